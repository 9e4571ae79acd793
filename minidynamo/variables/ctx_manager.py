"""Context managers the graph understands: ``torch.no_grad``, ``torch.enable_grad``, ``torch.set_grad_enabled``,
``torch.autograd.profiler.record_function`` / ``torch.profiler.record_function``, ``torch.autocast`` (also spelled
``torch.amp.autocast``, ``torch.cpu.amp.autocast``, ``torch.cuda.amp.autocast``).

Entering one changes the tracer's state *and* records the change in the graph, so the compiled graph does what
eager did: ``no_grad`` becomes ``torch._C._set_grad_enabled(False)`` ... ``_set_grad_enabled(True)`` nodes, and a
``record_function`` region becomes the profiler's enter/exit ops (so ``torch.profiler`` still shows the region).
``BEFORE_WITH`` calls ``enter``; the ``__exit__`` it pushes is a ``WithExitFunctionVariable``.
Mirrors ``torch/_dynamo/variables/ctx_manager.py``.
"""
from __future__ import annotations

import torch

from ..exc import unimplemented
from .base import VariableTracker
from .constant import ConstantVariable


class ContextManagerVariable(VariableTracker):
    def enter(self, tx) -> VariableTracker:
        raise NotImplementedError

    def exit(self, tx) -> None:
        raise NotImplementedError

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return WithExitFunctionVariable(self) if name == "__exit__" else _EnterVariable(self)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        # used as a decorator: @torch.no_grad() def f(...)
        unimplemented("a context manager used as a decorator inside the compiled function")


class _EnterVariable(VariableTracker):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def call_function(self, tx, args, kwargs):
        return self.ctx.enter(tx)


class GradModeVariable(ContextManagerVariable):
    def __init__(self, target: bool, **kw):
        super().__init__(**kw)
        self.target = target
        self.prev: bool | None = None

    @staticmethod
    def create(tx, target: bool, initially_applied: bool = False) -> GradModeVariable:
        var = GradModeVariable(target)
        if initially_applied:  # torch.set_grad_enabled(False) takes effect when called
            var.prev = tx.output.grad_enabled
            set_grad_mode(tx, target)
        return var

    def enter(self, tx):
        if self.prev is None:
            self.prev = tx.output.grad_enabled
            set_grad_mode(tx, self.target)
        return ConstantVariable(None)

    def exit(self, tx):
        set_grad_mode(tx, self.prev)

    def call_function(self, tx, args, kwargs):
        """``torch.no_grad()(fn)``: the decorator statement ``@torch.no_grad()`` over a function defined in the
        compiled function. ``torch.set_grad_enabled(b)`` changed the mode when it was made (and its decorator use
        puts it back), so it keeps the break."""
        from .functions import BaseUserFunctionVariable
        if self.prev is None and len(args) == 1 and not kwargs and isinstance(args[0], BaseUserFunctionVariable):
            return GradModeWrappedFunctionVariable(self.target, args[0])
        return super().call_function(tx, args, kwargs)

    def describe(self):
        return f"grad mode {self.target}"


class GradModeWrappedFunctionVariable(VariableTracker):
    """A function decorated with ``@torch.no_grad()`` or ``@torch.enable_grad()`` inside the compiled function.

    As ``torch.utils._contextlib`` builds it, each call runs the function inside a fresh copy of the context: the
    call is inlined between a grad-mode change and its undoing, as a ``with`` block would be. Where it must exist
    for real (live at a graph break, returned, or called natively because its body breaks), the generated code
    decorates the function again (``grad_mode_wrapped``). Upstream: ``WrappedUserFunctionVariable``."""

    def __init__(self, target: bool, fn: VariableTracker, **kw):
        super().__init__(**kw)
        self.target, self.fn = target, fn

    def python_type(self):
        return self.fn.python_type()

    def describe(self):
        return f"{self.fn.describe()} decorated with grad mode {self.target}"

    def call_function(self, tx, args, kwargs):
        ctx = GradModeVariable(self.target)
        ctx.enter(tx)
        try:
            return self.fn.call_function(tx, args, kwargs)
        finally:
            ctx.exit(tx)

    def reconstruct(self, codegen):
        codegen.load_const_object(grad_mode_wrapped, push_null=True)
        codegen(ConstantVariable(self.target))
        codegen(self.fn)
        codegen.call(2)


def grad_mode_wrapped(enabled: bool, fn):
    """``@torch.enable_grad()`` / ``@torch.no_grad()`` applied to ``fn``, in generated code."""
    return (torch.enable_grad if enabled else torch.no_grad)()(fn)


def set_grad_mode(tx, enabled: bool) -> None:
    if tx.output.grad_enabled != enabled:
        tx.output.create_proxy("call_function", torch._C._set_grad_enabled, (enabled,), {})
        tx.output.grad_enabled = enabled


class RecordFunctionVariable(ContextManagerVariable):
    def __init__(self, name: str, **kw):
        super().__init__(**kw)
        self.name = name
        self.handle = None

    def enter(self, tx):
        self.handle = tx.output.create_proxy(
            "call_function", torch.ops.profiler._record_function_enter_new, (self.name, None), {})
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.create_proxy("call_function", torch.ops.profiler._record_function_exit._RecordFunction,
                               (self.handle,), {})

    def describe(self):
        return f"record_function({self.name!r})"


# [Note: autocast state]  Autocast is global state that decides the dtype of ops such as matmul.  The tracer keeps
# its own copy, ``tx.output.autocast_state`` (``autocast_state()`` when the frame started, which an AUTOCAST guard
# pins), changes it on enter/exit, and runs fake tensors under it (``tracing_autocast``), so fake results have the
# dtypes eager will produce.  The real global state is never changed while tracing.
AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple:
    """``((enabled, dtype) for cpu, cuda)`` now: what the AUTOCAST guard compares."""
    # Spelled out (no generator): this runs in every check function, once per cache entry tried.
    enabled, dtype = torch.is_autocast_enabled, torch.get_autocast_dtype
    return ((enabled("cpu"), dtype("cpu")), (enabled("cuda"), dtype("cuda")))


class tracing_autocast:
    """Run fake tensors (and state queries) under the tracer's autocast state; restores the real one after."""

    def __init__(self, output):
        self.state = output.autocast_state
        self.saved = None

    def __enter__(self):
        now = autocast_state()
        if now != self.state:
            self.saved = now
            _set_autocast_state(self.state)

    def __exit__(self, *exc):
        if self.saved is not None:
            _set_autocast_state(self.saved)


def _set_autocast_state(state: tuple) -> None:
    for device, (enabled, dtype) in zip(AUTOCAST_DEVICES, state):
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)


class AutocastModeVariable(ContextManagerVariable):
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``.

    The arguments are resolved by building the real ``torch.autocast`` object at trace time (its constructor only
    reads state: the default dtype, a warning and ``enabled=False`` for an unsupported dtype or device), so the
    tracer applies exactly what eager would.  Entering records ``mode = torch.amp._enter_autocast(device, dtype,
    enabled, cache_enabled)`` and exiting ``torch.amp._exit_autocast(mode)``, as upstream does: the graph changes
    the global state when it runs, and a backend that retraces it (make_fx) sees the casts.
    """

    def __init__(self, device: str, dtype: torch.dtype, enabled: bool, cache_enabled: bool, **kw):
        super().__init__(**kw)
        self.device, self.dtype, self.enabled, self.cache_enabled = device, dtype, enabled, cache_enabled
        self.mode = None  # the proxy of the enter node
        self.prev: tuple | None = None

    @staticmethod
    def create(tx, cls: type, args, kwargs) -> AutocastModeVariable:
        if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            unimplemented("torch.autocast(...) with arguments that are not constants")
        a = [v.as_python_constant() for v in args]
        k = {n: v.as_python_constant() for n, v in kwargs.items()}
        with tracing_autocast(tx.output):  # the default dtype it reads is the traced one
            real = cls(*a, **k)
        if real.device not in AUTOCAST_DEVICES:
            unimplemented(f"torch.autocast on device {real.device!r}", "only cpu and cuda autocast are traced")
        return AutocastModeVariable(real.device, real.fast_dtype, bool(real._enabled), bool(real._cache_enabled))

    def enter(self, tx):
        out = tx.output
        self.prev = out.autocast_state
        self.mode = out.create_proxy("call_function", torch.amp._enter_autocast,
                                     (self.device, self.dtype, self.enabled, self.cache_enabled), {})
        i = AUTOCAST_DEVICES.index(self.device)
        state = list(out.autocast_state)
        state[i] = (self.enabled, self.dtype)
        out.autocast_state = tuple(state)
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.create_proxy("call_function", torch.amp._exit_autocast, (self.mode,), {})
        tx.output.autocast_state = self.prev

    def describe(self):
        return f"torch.autocast({self.device!r}, dtype={self.dtype}, enabled={self.enabled})"


class WithExitFunctionVariable(VariableTracker):
    """The ``__exit__`` pushed by BEFORE_WITH; the normal exit path calls it with (None, None, None)."""

    def __init__(self, ctx: ContextManagerVariable):
        super().__init__()
        self.ctx = ctx

    def call_function(self, tx, args, kwargs):
        self.ctx.exit(tx)
        return ConstantVariable(None)


class ContextManagerClassVariable(VariableTracker):
    """The class itself (``torch.no_grad``): calling it makes the context manager tracker."""

    def __init__(self, cls: type, **kw):
        super().__init__(**kw)
        self.cls = cls

    def as_python_constant(self):
        return self.cls

    def describe(self):
        return f"context manager {self.cls.__qualname__}"

    def call_function(self, tx, args, kwargs):
        cls = self.cls
        if cls is torch.no_grad:
            return GradModeVariable.create(tx, False)
        if cls is torch.enable_grad:
            return GradModeVariable.create(tx, True)
        if cls is torch.set_grad_enabled:
            return GradModeVariable.create(tx, args[0].as_python_constant(), initially_applied=True)
        if cls in autocast_classes():
            return AutocastModeVariable.create(tx, cls, args, kwargs)
        name = (args[0] if args else kwargs["name"]).as_python_constant()
        return RecordFunctionVariable(name)


def record_function_classes() -> tuple:
    import torch.profiler as torch_profiler

    return (torch.autograd.profiler.record_function, torch_profiler.record_function)


def autocast_classes() -> tuple:
    return (torch.autocast, torch.cpu.amp.autocast, torch.cuda.amp.autocast)


def wrap_context_manager_class(value, source) -> VariableTracker | None:
    if value in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled) or value in record_function_classes() \
            or value in autocast_classes():
        return ContextManagerClassVariable(value, source=source)
    return None
