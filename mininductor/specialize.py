"""Symbolic-size graphs in mininductor: one compile for every size where we can, else a static compile per shape.

In:  a graph minidynamo captured with dynamic sizes -- placeholders whose example values have ``SymInt`` sizes,
int inputs (``L['n']``), and size arithmetic as nodes (``x.size(0)``, ``mul``).  Out: a callable that serves
every size.

**Symbolic compile first** (``compile_fx.compile_fx_symbolic``).  The graph is traced to ATen on its fake inputs,
so sizes stay ``s77``; the IR keeps sympy sizes ([Note: symbolic sizes in the IR] in ``indexing.py``); each
kernel takes ``xnumel``/``rnumel`` and the symbols of its index math as int arguments; ``call`` reads each symbol
from an input's ``.shape`` and allocates buffers of shape ``(s77, 16)``; ``KernelLauncher`` computes the grid
from the numels of each call (block sizes are chosen once, from the size hints)::

    def call(args):
        arg0_1, = args
        s77 = arg0_1.shape[0]  # a symbolic size, read from the input
        buf0 = empty_strided((s77, 16), (16, 1), device='cpu', dtype=torch.float32)
        triton_poi_fused_mul_relu_0.run(arg0_1, buf0, 16*s77)

**Training** traces AOTAutograd's joint graph on the same fake inputs and compiles the partitioned forward and
backward symbolically too (``aot_autograd``: [Note: dynamic shapes in AOTAutograd]); the backward reads its sizes
off the shapes of the saved tensors and tangents (``partitioners``: [Note: sizes in the backward]).

**Per-shape fallback** (``PerShapeCompiled``) when the symbolic compile refuses -- a size the backward cannot read
off its inputs' shapes, an op with no lowering that returns a size (other fallback kernels take symbolic layouts:
[Note: fallbacks with symbolic sizes] in graph.py), size arithmetic other than ``+ - * // /`` (float sizes:
[Note: float sizes] in indexing.py), a reshape that is not a product of sizes (or an exact division:
[Note: divisions the guards make exact]), a size symbol not readable from an input's shape, or an ATen decomposition
that replaces a size by a number (one that only *guards* on sizes is checked at each call instead:
[Note: guards a symbolic compile adds]). On a call it looks at the actual shapes (and int values); the first time it
meets a shape it *specialises* the graph -- every size node and int input becomes a constant -- and compiles that
static graph with the ordinary pipeline. ``metrics.specialisations`` counts those static compiles and
``metrics.symbolic_fallbacks`` says why each graph fell back.

    minidynamo graph (s0 = L['x'].size()[0])      specialised for x: [5, 3]        [7, 3]
        size = l_x.size(0)                    ->      (constant 5)         ->   (constant 7)
        mul = l_x * size                              mul = l_x * 5             mul = l_x * 7

**Int operands as tensors** (``ints_as_tensors``) before either: an int input used only as an operand of
element-wise ops on tensors (``flat_indices == expert_idx``: the tutorial MoE's loop index, an automatic dynamic
int) is passed as a 0-d tensor instead.  One compile then serves every value (static, or symbolic in the tensors'
sizes only), where a compile per value would otherwise make a kernel per value (30 of the tutorial MoE's first
call).  A 0-d tensor promotes like the Python int it stands for, so values are unchanged.

[Note: never a wrong answer]  Every refusal happens at compile time and costs one static compile per shape,
never a wrong value: a decision the IR cannot make for every size (a sympy relation it cannot decide) raises.
Should a symbolic graph still fail when called, ``SymbolicCompiled`` switches to per-shape compiles for good.
"""
from __future__ import annotations

import operator
import warnings
from collections.abc import Callable

import sympy
import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from . import config, metrics
from .runtime import ValueCheckFailed

SYM_TYPES = (torch.SymInt, torch.SymBool, torch.SymFloat)
DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode)


def is_symbolic_graph(gm: torch.fx.GraphModule, example_inputs: list) -> bool:
    """Does ``gm`` have symbolic sizes (a dynamic-shape graph from minidynamo) or non-tensor inputs?"""
    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, SYM_TYPES):
            return True
        if isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape):
            return True
    return False


def shape_key(args: list) -> tuple:
    """What a specialisation depends on: tensor metadata and the values of non-tensor inputs."""
    return (torch.is_grad_enabled(),) + tuple(
        (tuple(a.shape), a.stride(), a.dtype, a.device, a.requires_grad) if isinstance(a, torch.Tensor)
        else (type(a), a) for a in args)


def is_training(args, gm: torch.fx.GraphModule | None = None) -> bool:
    """Does a call with ``args`` build autograd history (grad mode, and an input that requires grad)?  With
    ``gm``: also when the caller's grad mode is off but the graph turns it on (``with torch.enable_grad():``
    inside a function called under ``no_grad``: eager's results from that region require grad)."""
    if gm is None and not torch.is_grad_enabled():  # an inference call: no need to look at the arguments
        return False
    if not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return False
    return torch.is_grad_enabled() or gm is not None and enables_grad(gm)


def enables_grad(gm: torch.fx.GraphModule) -> bool:
    """Does ``gm`` switch grad mode on somewhere (a ``_set_grad_enabled(True)`` node from ``enable_grad``)?"""
    return any(n.args[:1] == (True,) for n in gm.graph.find_nodes(op="call_function",
                                                                    target=torch._C._set_grad_enabled))


def compile_dynamic(gm: torch.fx.GraphModule, example_inputs: list, compile_static: Callable,
                    compile_symbolic: Callable | None = None) -> Callable:
    """The callable for a symbolic-size graph: ``compile_symbolic(gm, example_inputs)`` when it succeeds,
    else a ``PerShapeCompiled`` (the reason recorded in ``metrics.symbolic_fallbacks``)."""
    per_shape = PerShapeCompiled(gm, compile_static)
    if compile_symbolic is None:
        return per_shape
    saved = _save_metrics()
    try:
        compiled = compile_symbolic(gm, example_inputs)
    except Exception as e:  # noqa: BLE001  [Note: never a wrong answer]: anything we cannot do costs speed only
        _restore_metrics(saved)
        _record_fallback(f"{type(e).__name__}: {e}")
        return per_shape
    metrics.symbolic_compiles += 1
    return SymbolicCompiled(compiled, per_shape, training=is_training(example_inputs, gm))


def _record_fallback(reason: str) -> None:
    metrics.symbolic_fallbacks.append(reason)
    if config.debug:
        print(f"[mininductor] symbolic compile fell back to one static compile per shape: {reason}")


def _save_metrics() -> tuple:
    return (metrics.generated_kernel_count, metrics.fallback_count, metrics.extern_call_count,
            metrics.num_bytes_accessed, len(metrics.fallback_ops), len(metrics.fusion_rejections))


def _restore_metrics(saved: tuple) -> None:
    """A refused symbolic compile may have generated kernels already: count only what will run."""
    (metrics.generated_kernel_count, metrics.fallback_count, metrics.extern_call_count,
     metrics.num_bytes_accessed, n_ops, n_rejections) = saved
    del metrics.fallback_ops[n_ops:]
    del metrics.fusion_rejections[n_rejections:]


class SymbolicCompiled:
    """``compiled(*args)``: one compiled graph for every size.  A training compile (forward and backward in an
    ``autograd.Function``) serves every call; an inference compile sends training calls -- which need a backward
    it lacks -- to the per-shape compiles, and so does a call that fails."""

    def __init__(self, compiled: Callable, per_shape: PerShapeCompiled, training: bool = False):
        self.compiled, self.per_shape, self.training = compiled, per_shape, training
        self.broken = False

    def __call__(self, *args):
        if self.broken or not self.training and is_training(args):
            return self.per_shape(*args)
        try:
            return self.compiled(*args)
        except SizeGuardFailed:  # [Note: guards a symbolic compile adds]: this call's sizes need their own compile
            return self.per_shape(*args)
        except ValueCheckFailed:  # the caller's data, not our compile (a bad index, a zero
            raise  # divisor: [Note: value checks]): eager raises it too, and so do we, once
        except Exception as e:  # noqa: BLE001  (see [Note: never a wrong answer])
            self.broken = True
            _record_fallback(f"the symbolic graph failed when called: {type(e).__name__}: {e}")
            warnings.warn(f"mininductor: the symbolic-size graph failed ({type(e).__name__}: {e}); "
                          "compiling per shape")
            return self.per_shape(*args)


class SizeGuardFailed(Exception):
    """A call's sizes break a relation its symbolic compile assumed (``SizeGuarded``)."""


class SizeGuards:
    """``holds(args)``: do this call's sizes satisfy every relation that tracing to ATen assumed?

    [Note: guards a symbolic compile adds]  Tracing a symbolic graph to ATen can ask about sizes what the graph
    itself never asked: the joint graph of ``x.view(-1, 4)`` asks how ``s0*s1`` splits into rows of 4; the
    backward of ``x.chunk(2)`` asks whether the last piece has one row (``Ne(s77 - (s77 + 1)//2, 1)``).  The
    ShapeEnv answers from the example sizes and records the answer
    as a guard.  Upstream hands such guards back to Dynamo, which checks them before it reuses the frame.  So
    does minidynamo: a frame's guards are built after the backend returns, from the same ShapeEnv.  But a
    compiled graph can be reached without them: the FxGraphCache hands it to another frame whose ShapeEnv never
    saw this trace, and a caller of ``compile_fx`` may check no guards at all.  So the compile carries its own.
    Each call's sizes (and strides) are read off its inputs and the relations evaluated -- once per distinct set of
    sizes, then remembered -- and a call that breaks one goes to the per-shape compiles.  Before, any added
    guard refused the symbolic compile, and every size was compiled on its own.

    A relation over a symbol that is no input's size or stride cannot be checked, so that compile still refuses; so
    does one whose trace *replaced* a symbol by a number (``s77 == 3``: the graph is specialised throughout).
    """

    def __init__(self, exprs: list, fakes: list) -> None:
        self.exprs = exprs
        self.reads = _symbol_reads(fakes)  # symbol -> (input, dim, is a stride) whose size or stride it is
        missing = set().union(*(e.free_symbols for e in exprs)) - set(self.reads)
        if missing:
            raise NotImplementedError(f"tracing to ATen guarded {sorted(map(str, missing))}, which no input's "
                                      f"size or stride is ({[str(e) for e in exprs]})")
        self.seen: dict[tuple, bool] = {}
        metrics.size_guards.extend(str(e) for e in exprs)

    def holds(self, args) -> bool:
        sizes = tuple(args[i] if d is None else args[i].stride(d) if stride else args[i].shape[d]
                      for i, d, stride in self.reads.values())
        ok = self.seen.get(sizes)
        if ok is None:
            if len(self.seen) >= 1024:
                self.seen.clear()
            values = {sym: sympy.Integer(v) for sym, v in zip(self.reads, sizes)}
            ok = self.seen[sizes] = all(e.xreplace(values) is sympy.true for e in self.exprs)
        return ok

    def __str__(self) -> str:
        return " and ".join(map(str, self.exprs))


def _symbol_reads(fakes: list) -> dict:
    """Each symbol of the fake inputs, and the first ``(input, dim, is a stride)`` whose size -- or, for an input
    with gaps between its rows, stride -- is exactly that symbol; ``(input, None, False)`` for an int input that
    is the symbol."""
    reads = {}
    for i, fake in enumerate(fakes):
        if isinstance(fake, torch.SymInt) and isinstance(fake.node.expr, sympy.Symbol):
            reads.setdefault(fake.node.expr, (i, None, False))
    for stride in (False, True):
        for i, fake in enumerate(fakes):
            if not isinstance(fake, torch.Tensor):
                continue
            for d, size in enumerate(fake.stride() if stride else fake.shape):
                expr = size.node.expr if isinstance(size, torch.SymInt) else None
                if isinstance(expr, sympy.Symbol) and expr not in reads:
                    reads[expr] = (i, d, stride)
    return reads


class SizeGuarded:
    """``compiled(*args)``, for calls whose sizes pass ``guards``; any other call raises ``SizeGuardFailed``
    (``SymbolicCompiled`` then compiles that shape on its own)."""

    def __init__(self, compiled: Callable, guards: SizeGuards) -> None:
        self.compiled, self.guards = compiled, guards

    def __call__(self, *args):
        if not self.guards.holds(args):
            raise SizeGuardFailed(str(self.guards))
        return self.compiled(*args)


class PerShapeCompiled:
    """``compiled(*args)``: the static compile for ``args``' shapes, made on first sight (see the module note)."""

    def __init__(self, gm: torch.fx.GraphModule, compile_static: Callable):
        self.gm = gm
        self.compile_static = compile_static
        self.cache: dict[tuple, Callable] = {}

    def __call__(self, *args):
        key = shape_key(args)
        compiled = self.cache.get(key)
        if compiled is None:
            compiled = self.cache[key] = self._compile(list(args))
        return compiled(*[a for a in args if isinstance(a, torch.Tensor)])

    def _compile(self, args: list) -> Callable:
        metrics.specialisations += 1
        try:
            static_gm = specialize_graph(self.gm, args)
        except DATA_DEPENDENT_ERRORS as e:
            # ``x[i]`` with a 0-d index tensor, ``nonzero``: a size depends on values, so no constant stands for
            # it; run the graph eagerly, as ``compile_fx`` does with a static graph of this kind
            warnings.warn(f"mininductor: running the graph eagerly, it has a data-dependent shape ({e})")
            metrics.fallback_count += 1
            metrics.fallback_ops.append("whole graph (data-dependent shape)")
            return _run_eagerly(self.gm, args)
        return self.compile_static(static_gm, [a for a in args if isinstance(a, torch.Tensor)])


def _run_eagerly(gm: torch.fx.GraphModule, args: list) -> Callable:
    """``gm`` as a callable of the tensor inputs only (what ``PerShapeCompiled`` passes); the non-tensor inputs
    are those of ``args``, which the shape key fixes."""
    def run(*tensors):
        it = iter(tensors)
        return gm(*[next(it) if isinstance(a, torch.Tensor) else a for a in args])
    return run


def specialize_graph(gm: torch.fx.GraphModule, args: list) -> torch.fx.GraphModule:
    """A copy of ``gm`` for these inputs: non-tensor inputs and every node computing a number become constants."""
    values = _number_values(gm, args)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, object] = {}
    for node in gm.graph.nodes:
        if node in values:
            env[node] = values[node]
        elif node.op == "output":
            graph.output(torch.fx.map_arg(node.args[0], lambda n: env[n]))
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
            env[node].meta.pop("example_value", None)  # symbolic: the static compile makes its own
    out = torch.fx.GraphModule(gm, graph, class_name="SpecializedGraph")
    out.meta.update(gm.meta)
    return out


def _number_values(gm: torch.fx.GraphModule, args: list) -> dict:
    """Run ``gm`` on fake copies of ``args`` and keep the value of every node whose result is a plain number.
    The copies do not require grad: ``gm`` may turn grad mode back on after a ``no_grad`` block, and autograd's
    checks then refused an in-place op on the base of a view made in the block, which eager had run with grad off
    -- a compile error where eager runs (AOT fuzz round)."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake_args = [mode.from_tensor(a.detach()) if isinstance(a, torch.Tensor) else a for a in args]
    interp = _Recorder(gm)
    with mode, torch.no_grad():
        interp.run(*fake_args)
    return interp.numbers


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.numbers: dict[torch.fx.Node, object] = {}

    def run_node(self, n):
        result = super().run_node(n)
        if n.op != "output" and not isinstance(result, torch.Tensor) and _is_number(result):
            self.numbers[n] = result
        return result


def _is_number(v) -> bool:
    if isinstance(v, (torch.Size, tuple, list)):
        return all(_is_number(x) for x in v)
    return type(v) in (int, float, bool)


# Element-wise ops where ``tensor op int`` computes what ``tensor op 0-d int64 tensor`` computes.
_INT_OPERAND_OPS = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge, operator.add,
                    operator.sub, operator.mul, torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge,
                    torch.add, torch.sub, torch.mul}


class IntsAsTensors:
    """``compiled(*args)`` with the int inputs at ``positions`` passed to ``compiled_graph`` as 0-d tensors.

    [Note: device scalars]  The 0-d tensor is made on the graph's device and kept per value.  A CPU scalar would
    be copied to the GPU inside the graph on every call, and a copy from pageable host memory waits for the
    stream to drain: one hidden synchronisation per call (30 per forward of the tutorial MoE, whose loop index
    is such an int).  The graph only reads its inputs, so one tensor per value can serve every call.
    """

    def __init__(self, compiled_graph: Callable, positions: frozenset[int], device: torch.device | None = None):
        self.compiled_graph, self.positions = compiled_graph, positions
        self.device = device if device is not None and device.type != "cpu" else None
        self.scalars: dict[int, torch.Tensor] = {}

    def __call__(self, *args):
        args = list(args)
        for k in self.positions:  # usually one: the loop index
            args[k] = self.scalar(args[k])
        return self.compiled_graph(*args)

    def scalar(self, value: int) -> torch.Tensor:
        if self.device is None:
            return torch.tensor(value)
        tensor = self.scalars.get(value)
        if tensor is None:
            if len(self.scalars) >= 4096:  # an int that takes ever new values: keep the memory bounded
                self.scalars.clear()
            tensor = self.scalars[value] = torch.tensor(value, device=self.device)
        return tensor


def ints_as_tensors(gm: torch.fx.GraphModule, example_inputs: list) -> tuple | None:
    """``(graph, inputs, positions)``: ``gm`` where the int inputs at ``positions`` -- each only an operand of
    ``_INT_OPERAND_OPS`` with a tensor result -- are 0-d tensor inputs; None when there is no such int."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    positions = frozenset(k for k, x in enumerate(example_inputs) if type(x) is int)
    if not positions or len(placeholders) != len(example_inputs) or \
            not all(_only_tensor_operand(placeholders[k]) for k in positions):
        return None
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    device = graph_device(example_inputs)
    for node in gm.graph.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
        if node in (placeholders[k] for k in positions):  # a 0-d tensor now, not a SymInt
            env[node].meta.pop("example_value", None)
            # the symbolic path reads every placeholder's fake value, and tells inputs apart by it: one fake
            # per int (one shared by ``s`` and ``u`` made ``t * s + u`` read ``u`` twice)
            zero_dim = _fake_zero_dim(placeholders, device)
            if zero_dim is not None:
                env[node].meta["example_value"] = zero_dim
    out = torch.fx.GraphModule(gm, graph, class_name="GraphModule")
    out.meta.update(gm.meta)
    inputs = [torch.tensor(x, device=device) if k in positions else x for k, x in enumerate(example_inputs)]
    return out, inputs, positions  # still symbolic in tensor sizes? compile_fx then compiles that symbolically


def graph_device(example_inputs: list) -> torch.device | None:
    """The device of the graph's first input tensor that is not a scalar (None if it has none)."""
    return next((x.device for x in example_inputs if isinstance(x, torch.Tensor) and x.dim() > 0), None)


def _fake_zero_dim(placeholders: list[torch.fx.Node], device: torch.device | None) -> torch.Tensor | None:
    """A fake 0-d int64 tensor on ``device``, in the fake mode of the graph's other inputs (None if it has no fake
    inputs).  On the device the real one will be on ([Note: device scalars]): a CPU fake made the symbolic
    compile copy (later: read) a device scalar as if it came from the CPU, on every call."""
    from torch._subclasses.fake_tensor import FakeTensor
    for node in placeholders:
        value = node.meta.get("example_value")
        if isinstance(value, FakeTensor):
            with value.fake_mode:
                return torch.empty((), dtype=torch.int64, device=device)
    return None


def _only_tensor_operand(node: torch.fx.Node) -> bool:
    return bool(node.users) and all(
        u.op == "call_function" and u.target in _INT_OPERAND_OPS and not u.kwargs and len(u.args) == 2
        and isinstance(u.meta.get("example_value"), torch.Tensor) for u in node.users)
