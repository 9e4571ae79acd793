"""Functions of the ``torch`` namespace: put in the graph as ``call_function`` nodes.

``torch.sin``, ``torch.nn.functional.gelu``, ``torch.topk``... are recorded as nodes and run on fake tensors.  A few
torch functions are about the *state of the program* rather than tensors (``torch.is_grad_enabled``,
``torch.get_default_dtype``, ``torch.cuda.is_available``); those are answered at trace time.  Context managers
(``torch.no_grad``) live in ``ctx_manager.py``.  Mirrors ``torch/_dynamo/variables/torch.py``.
"""
from __future__ import annotations

import inspect
import types

import torch

from ..exc import unimplemented
from .base import VariableTracker
from .constant import ConstantVariable
from .tensor import TensorVariable, call_graph_op

# Python code in these torch packages is inlined like user code instead of becoming one graph node.
NOT_IN_GRAPH = ("torch.nn.modules", "torch.utils", "torch.fx", "torch._dynamo", "torch.distributed", "torch.optim",
                "torch.nn.utils", "torch.testing")

# Answered now, from the current state (upstream "constant_fold_functions"); guarded where the state can change.
CONSTANT_FUNCTIONS = {
    torch.is_grad_enabled, torch.get_default_dtype, torch.is_tensor, torch.is_floating_point, torch.is_complex,
    torch.cuda.is_available, torch.is_autocast_enabled, torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling,
    torch.cuda.device_count, torch.is_inference_mode_enabled, torch.get_autocast_dtype, torch.is_autocast_cache_enabled,
    # [Note: the dispatch mode stack while tracing]  Under tracing, our FakeTensorMode is on the dispatch mode stack;
    # code asking for the stack (``nn.MultiheadAttention``'s ``_is_make_fx_tracing`` in eval mode) must see the
    # caller's stack, and must not get the fake mode back as a value.  Answered natively, outside the fake mode.
    torch._C._len_torch_dispatch_stack,
    # the name of the out-of-tree device backend, a str: torch 2.11's clip_grad_norm_ lists it among foreach devices
    torch._C._get_privateuse1_backend_name,
}
# Answered from the *tracer's* autocast state (inside a traced `with torch.autocast(...)` it differs from the real one;
# the state at frame start is pinned by the AUTOCAST guard).  See [Note: autocast state].
AUTOCAST_QUERIES = {torch.is_autocast_enabled, torch.get_autocast_dtype}
COMPILING_TRUE = {torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling}
# [Note: wrapped torch functions]  Keys are *unwrapped* (``inspect.unwrap``), and so is the function looked up:
# importing ``torch._dynamo`` replaces ``torch.manual_seed`` by a ``torch._disable_dynamo`` wrapper of it, so which
# object ``torch.manual_seed`` is depends on import order.  Keyed by identity alone, the wrapper was not refused: it
# became a graph node that nothing used, and the reseed was silently dropped.
UNSUPPORTED = {
    inspect.unwrap(torch.manual_seed): "`torch.manual_seed` changes global RNG state",
    torch.set_grad_enabled: None,  # handled as a context manager / function in ctx_manager
}
# Functions that change global state: run while tracing they would change it once, at trace time, and the graph
# would not change it at all.  Calling one is a graph break (it then runs natively, where eager ran it).
_STATE_SETTERS = ("set_autocast_enabled", "set_autocast_dtype", "set_autocast_cache_enabled", "set_autocast_cpu_enabled",
                  "set_autocast_cpu_dtype", "set_autocast_gpu_dtype", "set_autocast_ipu_enabled",
                  "set_autocast_ipu_dtype", "set_autocast_xla_enabled", "set_autocast_xla_dtype",
                  "autocast_increment_nesting", "autocast_decrement_nesting", "clear_autocast_cache",
                  "set_default_dtype", "set_default_device", "set_default_tensor_type", "set_num_threads",
                  "set_num_interop_threads", "set_float32_matmul_precision", "use_deterministic_algorithms",
                  "set_deterministic_debug_mode", "set_flush_denormal", "set_rng_state", "seed", "set_anomaly_enabled",
                  "set_printoptions", "set_warn_always")
for _name in _STATE_SETTERS:
    if hasattr(torch, _name):
        UNSUPPORTED[inspect.unwrap(getattr(torch, _name))] = f"`torch.{_name}` changes global state"
UNSUPPORTED[torch.amp._enter_autocast] = UNSUPPORTED[torch.amp._exit_autocast] = \
    "calling torch.amp._enter_autocast/_exit_autocast directly changes global autocast state"


def is_torch_callable(value) -> bool:
    if isinstance(value, type) or not callable(value):
        return False
    if is_private_functional_helper(value):
        return False
    module = getattr(value, "__module__", None) or ""
    if isinstance(value, (types.BuiltinFunctionType, types.FunctionType)) or type(value).__name__ in (
            "method_descriptor", "builtin_function_or_method", "OpOverloadPacket", "OpOverload"):
        return (module == "torch" or module.startswith("torch.")) and not module.startswith(NOT_IN_GRAPH)
    return False


def is_private_functional_helper(value) -> bool:
    """``F._canonical_mask``, ``F._none_or_dtype``, ``F._in_projection_packed``: Python helpers of
    ``torch.nn.functional`` that check arguments or compute dtypes, not tensor ops.  They are inlined: as a graph
    node, ``_none_or_dtype`` would return a dtype, which no graph node can stand for.  (Training round 10:
    ``nn.MultiheadAttention`` with an ``attn_mask``.)"""
    return isinstance(value, types.FunctionType) and value.__module__ == "torch.nn.functional" \
        and value.__name__.startswith("_") and not value.__name__.startswith("__")


class TorchVariable(VariableTracker):
    def __init__(self, fn, **kw):
        super().__init__(**kw)
        self.fn = fn

    def as_python_constant(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"torch function {getattr(self.fn, '__qualname__', self.fn)}"

    def truth(self, tx) -> bool:
        return self.truth_of_instance_of(tx, type(self.fn))

    def _repr_body(self):
        return getattr(self.fn, "__qualname__", repr(self.fn))

    def reconstruct(self, codegen):
        if self.source is not None:
            return super().reconstruct(codegen)
        codegen.load_const_object(self.fn)

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if reason := UNSUPPORTED.get(inspect.unwrap(fn)):
            unimplemented(reason, "call it outside the compiled function")
        if fn is torch._C._set_grad_enabled:
            from .ctx_manager import set_grad_mode
            set_grad_mode(tx, args[0].as_python_constant())
            return ConstantVariable(None)
        if fn is torch.set_grad_enabled:
            from .ctx_manager import GradModeVariable
            return GradModeVariable.create(tx, args[0].as_python_constant(), initially_applied=True)
        if fn in CONSTANT_FUNCTIONS:
            return self._constant(tx, args, kwargs)
        if fn is torch._C._group_tensors_by_device_and_dtype:  # [Note: grouping tensors by device and dtype]
            from .. import polyfills
            from .functions import UserFunctionVariable
            return UserFunctionVariable(polyfills.group_tensors_by_device_and_dtype).call_function(tx, args, kwargs)
        return call_graph_op(tx, "call_function", fn, list(args), dict(kwargs))

    def _constant(self, tx, args, kwargs):
        fn = self.fn
        if fn in COMPILING_TRUE:
            return ConstantVariable(True)
        if fn is torch.is_grad_enabled:
            return ConstantVariable(tx.output.grad_enabled)
        if fn in AUTOCAST_QUERIES:
            from .ctx_manager import tracing_autocast
            with tracing_autocast(tx.output):
                return ConstantVariable(fn(*[a.as_python_constant() for a in args]))
        if fn in (torch.is_tensor,):
            return ConstantVariable(isinstance(args[0], TensorVariable))
        if fn in (torch.is_floating_point, torch.is_complex) and isinstance(args[0], TensorVariable):
            return ConstantVariable(fn(args[0].example_value))
        return ConstantVariable(fn(*[a.as_python_constant() for a in args]))
