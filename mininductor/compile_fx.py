"""``compile_fx``: the backend entry point -- one driver that reads like the pipeline (mirrors
``torch/_inductor/compile_fx.py``).

    compiled = compile_fx(gm, example_inputs)          # or torch.compile(fn, backend=compile_fx)
    outputs = compiled(*example_inputs)

``compile_fx`` traces ``gm`` to ATen (through ``aot_autograd.aot_module`` when available: it handles training;
otherwise a private inference trace with ``make_fx`` + functionalization), then ``compile_fx_inner`` runs:

    GraphLowering (lowerings -> IR)  ->  Scheduler (fusion)  ->  WrapperCodeGen (output_code.py)
    ->  runtime.load_module (code cache; Triton interpreter for CPU tensors)
    ->  async_compile.maybe_precompile (GPU: the kernels compile in parallel)  ->  call(args)

Each stage's time is added to ``metrics.phase_times`` (``bench/compile_time.py`` prints them).
"""
from __future__ import annotations

import contextlib
import os
import types
import warnings
from collections.abc import Callable

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import DataDependentOutputException
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols

from . import async_compile, config, fx_graph_cache, ir, metrics
from .codegen.wrapper import WrapperCodeGen
from .cudagraphs import CudaGraphRunner, is_static_input
from .decomposition import select_decomp_table
from .eager_functions import EagerFunctions
from .graph import GraphLowering
from .runtime import load_module, unflattener
from .scheduler import Scheduler
from .specialize import (
    IntsAsTensors,
    SizeGuarded,
    SizeGuards,
    compile_dynamic,
    graph_device,
    ints_as_tensors,
    is_symbolic_graph,
    is_training,
)
from .virtualized import V


class CompiledGraph:
    """``compiled(*inputs)`` runs the generated ``call`` and rebuilds the graph's output structure."""

    def __init__(self, module, out_spec, example_inputs, source: str,
                 mutated_inputs: frozenset[int] = frozenset()) -> None:
        self.module, self.out_spec, self.source = module, out_spec, source
        self.mutated_inputs = mutated_inputs  # indices of inputs the graph writes in place
        self.call = module.call
        self.unflatten = unflattener(out_spec)
        self.n_inputs = len(example_inputs)
        # CUDA graphs are recorded on the first real call: example inputs may be fake tensors (AOTAutograd)
        self._use_cudagraphs = config.mode == "reduce-overhead" and any(
            isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs)
        # one per input shape signature, then per set of parameters (see runner())
        self._runners: dict[tuple, dict[tuple, CudaGraphRunner | None]] = {}

    def __call__(self, *args):
        runner = self.runner(args) if self._use_cudagraphs else None
        flat = runner(list(args)) if runner is not None else self.call(list(args))
        return self.unflatten(flat)

    def runner(self, args: tuple) -> CudaGraphRunner | None:
        """The CUDA graph recorded for these inputs, recorded on first use.

        [Note: one recording per shape and per set of parameters]  A CUDA graph replays fixed sizes and fixed
        addresses.  So a symbolic graph gets one recording per size signature, as upstream's cudagraph trees do,
        up to ``config.cudagraph_max_shapes`` signatures.  And parameters are recorded in place, never copied
        ([Note: static inputs] in cudagraphs.py): a graph shared by several modules -- the tutorial MoE's loop body
        runs every expert's weights through one compiled graph -- gets one recording per module's parameters,
        keyed by their addresses, up to ``config.cudagraph_max_static_variants`` per signature.  Past either
        limit, calls run without a graph, with the same results."""
        shapes = tuple((tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else
                       (type(a), a) for a in args)
        params = tuple(a.data_ptr() for a in args if isinstance(a, torch.Tensor) and is_static_input(a))
        try:
            variants = self._runners.get(shapes)
        except TypeError:  # an unhashable argument: no signature to record under
            return None
        if variants is None:
            variants = self._runners[shapes] = {}
            if len(self._runners) > config.cudagraph_max_shapes:
                variants[None] = None  # past the limit: this signature runs plainly, whatever the parameters
        if None in variants:
            return None
        if params in variants:
            return variants[params]
        runner = None
        if len(variants) < config.cudagraph_max_static_variants:
            try:
                runner = CudaGraphRunner(self.call, list(args), self.mutated_inputs)
            except Exception as e:  # noqa: BLE001  (e.g. an op that syncs with the CPU cannot be captured)
                warnings.warn(f"mininductor: CUDA graph capture failed ({type(e).__name__}: {e}); running plainly")
                self._use_cudagraphs = False
        variants[params] = runner
        return runner


def compile_fx_inner(aten_gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Compile an ATen-level graph (what make_fx / AOTAutograd produce) into a callable."""
    if _has_symbolic_shapes(aten_gm):
        # data-dependent sizes (x[x > 0], nonzero) need dynamic shapes, which we leave out: run it eagerly
        warnings.warn("mininductor: the graph has data-dependent (symbolic) sizes; running it eagerly")
        metrics.fallback_count += 1
        metrics.fallback_ops.append("whole graph (data-dependent shape)")
        return aten_gm
    try:
        graph, source, module = _compile_graph(aten_gm, example_inputs)
    except Exception as e:
        if config.debug:
            raise
        # a bug of ours must cost speed, not correctness: run the whole ATen graph eagerly, and say so
        warnings.warn(f"mininductor: compiling the graph failed ({type(e).__name__}: {e}); running it eagerly")
        metrics.fallback_count += 1
        metrics.fallback_ops.append(f"whole graph ({type(e).__name__}: {e})")
        return aten_gm
    return _compiled_graph(aten_gm, example_inputs, graph, source, module)


def _compiled_graph(aten_gm, example_inputs, graph, source, module) -> CompiledGraph:
    if graph.constants:
        module = with_constants(module, graph.constants)
    out_node = next(n for n in aten_gm.graph.nodes if n.op == "output")
    _, spec = pytree.tree_flatten(_plain_containers(out_node.args[0]))
    # inputs the graph changes: copied back at its end, or written in place by a scatter (reinplace.py) -- a CUDA
    # graph replays on its own copies of the inputs and must copy both kinds back (cudagraphs.CudaGraphRunner)
    written = {name for name, _ in graph.mutations} | {
        buf.data.target for buf in graph.buffers if isinstance(getattr(buf, "data", None), ir.Scatter)}
    mutated = frozenset(graph.graph_input_names.index(name) for name in written if name in graph.graph_input_names)
    return CompiledGraph(module, spec, example_inputs, source, mutated)


def with_constants(module: types.ModuleType, constants: dict[str, torch.Tensor]) -> types.ModuleType:
    """The generated module as this compile runs it: its globals plus this compile's tensor constants.

    [Note: constants per compile]  ``load_module`` keeps one module per source text, and two graphs that differ
    only in the value of a tensor constant (``torch.tensor(2)`` and ``torch.tensor(4)``: ``_constant0`` in both)
    generate the same source.  Their constants were stored on that shared module, so the later compile's values
    replaced the earlier's: the first graph went on computing with 4 (a wrong answer, found by translator fuzz
    round 10).  Each compile with constants gets a namespace of its own, and a ``call`` whose globals it is; the
    kernels and the rest are the shared module's objects."""
    own = types.ModuleType(module.__name__, module.__doc__)
    own.__dict__.update(module.__dict__)
    own.__dict__.update(constants)
    call = module.call
    own.call = types.FunctionType(call.__code__, own.__dict__, call.__name__, call.__defaults__, call.__closure__)
    return own


def _compile_graph(aten_gm, example_inputs, size_hints: dict | None = None, shape_env=None):
    graph = GraphLowering(aten_gm, list(example_inputs), size_hints)
    graph.shape_env = shape_env
    with torch.no_grad(), V.set_graph_handler(graph):
        with metrics.timed("lowering"):
            graph.run(*example_inputs)
        graph.current_node = None
        with metrics.timed("scheduling"):
            scheduler = Scheduler(graph)
        with metrics.timed("codegen"):
            wrapper = WrapperCodeGen(graph, scheduler)
            source = wrapper.generate()
    _debug_dump(aten_gm, graph, scheduler, source)
    with metrics.timed("load"):
        module = load_module(source, interpret=graph.device.type != "cuda")
    # GPU: compile the kernels side by side now, rather than one by one as the first call launches them
    async_compile.maybe_precompile(module, wrapper.kernels, graph, graph.device, metrics.timed)
    return graph, source, module


def compile_fx_symbolic(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """One compile for every size of a symbolic-size graph from minidynamo (see specialize.py).

    The graph is traced to ATen on its own fake inputs (``meta['example_value']``: ``SymInt`` sizes in
    minidynamo's ``ShapeEnv``), so ATen nodes carry ``s77``; the IR keeps sympy sizes, kernels take sizes as
    int arguments and ``call`` reads them from the inputs' shapes. Training (grad mode, an input that requires
    grad) traces AOTAutograd's joint graph the same way and compiles its forward and backward symbolically
    ([Note: dynamic shapes in AOTAutograd]). Raises ``NotImplementedError`` (with the reason) for what it cannot
    do symbolically -- in particular when tracing replaced a size by a number; the caller then compiles per shape.
    A relation over sizes that tracing assumed is checked at each call instead ([Note: guards a symbolic compile
    adds] in specialize.py)."""
    fakes = [n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder")]
    if len(fakes) != len(example_inputs) or not all(map(_symbolic_input, fakes)):
        raise NotImplementedError("a placeholder without a fake tensor or a symbolic int as its example value")
    shape_env = next(f.fake_mode.shape_env for f in fakes if isinstance(f, torch.Tensor))
    guards, replacements = len(shape_env.guards), dict(shape_env.replacements)
    training = is_training(example_inputs, gm)
    if training:
        from .aot_autograd import aot_module
        compiler = _symbolic_compiler(shape_env)
        with metrics.timed("aot"):  # the compiles it calls back are timed on their own
            compiled = aot_module(gm, fakes, fw_compiler=compiler, decompositions=select_decomp_table(), dynamic=True)
    else:
        with metrics.timed("aot"):
            aten_gm, _ = trace_inference(gm, fakes)
        compiled = _guard_aliased_inputs(_symbolic_compiler(shape_env)(aten_gm, fakes), gm, aten_gm)
    if dict(shape_env.replacements) != replacements:
        added = [str(g.expr) for g in shape_env.guards[guards:]]
        raise NotImplementedError(f"tracing to ATen specialised a size ({added or 'a replacement'})")
    added = [g.expr for g in shape_env.guards[guards:]]
    return SizeGuarded(compiled, SizeGuards(added, fakes)) if added else compiled


def _symbolic_input(fake) -> bool:
    """What a symbolic compile takes as an input: a fake tensor, an int input that is a symbol of its own, an int
    the frame specialised (a constant), or an int the trace found equal to an expression of other sizes.

    [Note: an int input equal to sizes]  ``x.reshape(n, -1)`` with ``n == x.numel()`` teaches the ShapeEnv that
    the second dim is 1 and so replaces ``n``'s symbol by ``s31*s46``: the input's example value is that
    expression, which the frame's guards check at every call. ``call`` needs nothing from the input then (the
    sizes are read from the tensors); it was refused, and such graphs compiled once per shape."""
    if isinstance(fake, torch.SymInt):
        return _is_size_symbol(fake) or fake.node.expr.is_number or not free_unbacked_symbols(fake)
    return isinstance(fake, (torch.Tensor, int))


def _is_size_symbol(value) -> bool:
    """An int input traced as a symbol of its own (``L['n']`` after it changed: ``s52``).

    [Note: int inputs of a symbolic graph]  ``x[:n]`` with a dynamic ``n`` slices to a symbolic length; like a
    size, ``n`` becomes a kernel argument, and ``call`` reads it from its input (``s52 = arg1_1``).  An int that is
    only an operand of element-wise ops is a 0-d tensor instead (``ints_as_tensors`` in specialize.py)."""
    return isinstance(value, torch.SymInt) and isinstance(value.node.expr, sympy.Symbol)


def _symbolic_compiler(shape_env) -> Callable:
    """``compile(aten_gm, fakes) -> CompiledGraph``: the pipeline with sympy sizes (hints: the example sizes)."""
    def compile_symbolic_graph(aten_gm: torch.fx.GraphModule, fakes: list) -> CompiledGraph:
        hints = {sym: int(val) for sym, val in _backed_values(shape_env).items()}
        graph, source, module = _compile_graph(aten_gm, fakes, size_hints=hints, shape_env=shape_env)
        return _compiled_graph(aten_gm, fakes, graph, source, module)
    return compile_symbolic_graph


def _backed_values(shape_env) -> dict:
    return getattr(shape_env, "backed_var_to_val", None) or shape_env.var_to_val


def _has_symbolic_shapes(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for v in pytree.tree_leaves(val):
            if isinstance(v, torch.SymInt) or isinstance(v, torch.Tensor) and any(
                    isinstance(s, torch.SymInt) for s in v.shape):
                return True
    return False


def _plain_containers(value):
    """FX keeps outputs in immutable_list/immutable_dict; callers expect plain lists and dicts."""
    if isinstance(value, (list, tuple)):
        items = [_plain_containers(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else list(items)
    if isinstance(value, dict):
        return {k: _plain_containers(v) for k, v in value.items()}
    return value


def compile_fx(gm: torch.fx.GraphModule, example_inputs: list, mode: str | None = None,
               options: dict | None = None) -> Callable:
    """A ``torch.compile`` backend: ``compile_fx(gm, example_inputs)(*example_inputs) == gm(*example_inputs)``."""
    with metrics.timed("backend"):
        changes = dict(options or {})
        if mode is not None:
            changes["mode"] = mode
        key = fx_graph_cache.cache_key(gm, example_inputs, changes)
        compiled = fx_graph_cache.lookup(key)
        if compiled is None:  # else the same computation was compiled already (a loop body for another iteration)
            compiled = fx_graph_cache.save(key, _compile_fx_uncached(gm, example_inputs, mode, options, changes))
        return _regenerate_input_aliases(compiled, gm, example_inputs)


def _input_aliases(gm: torch.fx.GraphModule) -> list[tuple[int, int, tuple, tuple, object]]:
    """``(output leaf, input, size, stride, offset)`` for each output that eager returns as a view of an input,
    read from Dynamo's fake values (``meta['example_value']``).  The offset is relative to the input's: another
    call may pass a view that starts elsewhere in its storage.  With symbolic sizes the entries are sympy
    expressions, evaluated at each call from the inputs' sizes (``_size_bindings``); an output whose expressions
    use a symbol no input size or stride is keeps the compiled copy."""
    from torch.multiprocessing.reductions import StorageWeakRef
    fake = lambda n: n.meta.get("example_value") if isinstance(n, torch.fx.Node) else None
    inputs = [fake(n) for n in gm.graph.find_nodes(op="placeholder")]
    storages = {StorageWeakRef(t.untyped_storage()): i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
    bound = set(_size_bindings(inputs))
    out_node = next(iter(gm.graph.find_nodes(op="output")))
    aliases = []
    for leaf, node in enumerate(pytree.tree_leaves(out_node.args[0])):
        t = fake(node)
        i = storages.get(StorageWeakRef(t.untyped_storage())) if isinstance(t, torch.Tensor) else None
        if i is None or inputs[i].dtype != t.dtype:
            continue
        size, stride = tuple(_expr(v) for v in t.shape), tuple(_expr(v) for v in t.stride())
        offset = _expr(t.storage_offset()) - _expr(inputs[i].storage_offset())
        free = set().union(*(getattr(e, "free_symbols", set()) for e in (*size, *stride, offset)))
        if free <= bound:
            aliases.append((leaf, i, size, stride, offset))
    return aliases


def _expr(v):
    """A size as a sympy expression (a plain int stays an int)."""
    return v.node.expr if isinstance(v, torch.SymInt) else v


def _size_bindings(inputs: list) -> dict:
    """``{symbol: read}``: each symbol that is itself some input's size, stride or int value, and how to read it
    from that call's arguments."""
    import sympy
    bindings: dict = {}
    for i, t in enumerate(inputs):
        if isinstance(t, torch.SymInt) and isinstance(t.node.expr, sympy.Symbol):
            bindings.setdefault(t.node.expr, lambda args, i=i: int(args[i]))
        if not isinstance(t, torch.Tensor):
            continue
        for d, (s, st) in enumerate(zip(t.shape, t.stride())):
            if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                bindings.setdefault(s.node.expr, lambda args, i=i, d=d: args[i].shape[d])
            if isinstance(st, torch.SymInt) and isinstance(st.node.expr, sympy.Symbol):
                bindings.setdefault(st.node.expr, lambda args, i=i, d=d: args[i].stride(d))
    return bindings


def _regenerate_input_aliases(compiled: Callable, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """[Note: outputs that alias inputs]  ``y = x.view(-1); y.mul_(2); return y`` returns a view of ``x`` in
    eager: writing to ``y`` later writes ``x``.  The functional graph computes ``y``'s values into a buffer of
    its own (and copies them back into ``x``), so the output is re-made as a view of the input after the call,
    as upstream's runtime wrapper does (``gen_alias_from_base``; here always ``as_strided``).  Inference only:
    a training graph's outputs carry autograd history of their own.  With symbolic sizes too: a symbolic
    ``x.reshape(x.shape[1], x.shape[0])`` returned a copy, and the caller's ``out.add_(1)`` missed ``x``."""
    aliases = [] if is_training(example_inputs) else _input_aliases(gm)
    if not aliases:
        return compiled
    bindings = _size_bindings([n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder")])

    def evaluate(e, args, values):
        if isinstance(e, int) or not getattr(e, "free_symbols", None):
            return int(e)
        for sym in e.free_symbols:
            if sym not in values:
                values[sym] = bindings[sym](args)
        return int(e.xreplace(values))

    def with_aliases(*args):
        leaves, spec = pytree.tree_flatten(compiled(*args))
        values: dict = {}
        for leaf, i, size, stride, offset in aliases:
            base = args[i]
            if isinstance(leaves[leaf], torch.Tensor) and isinstance(base, torch.Tensor) and \
                    leaves[leaf].untyped_storage().data_ptr() != base.untyped_storage().data_ptr():
                leaves[leaf] = base.as_strided([evaluate(e, args, values) for e in size],
                                               [evaluate(e, args, values) for e in stride],
                                               base.storage_offset() + evaluate(offset, args, values))
        return pytree.tree_unflatten(leaves, spec)

    return with_aliases


def _compile_fx_uncached(gm, example_inputs, mode, options, changes):
    as_tensors = ints_as_tensors(gm, example_inputs)  # one compile for every value of an int operand
    if as_tensors is not None:
        graph, inputs, positions = as_tensors
        return IntsAsTensors(compile_fx(graph, inputs, mode=mode, options=options), positions, graph_device(inputs))
    if is_symbolic_graph(gm, example_inputs):  # dynamic sizes: one symbolic compile, else per shape (specialize.py)
        def symbolic(g, inputs):
            with config.patch(**changes):
                return compile_fx_symbolic(g, inputs)
        return compile_dynamic(gm, example_inputs, lambda g, inputs: compile_fx(g, inputs, mode=mode,
                                                                                 options=options), symbolic)
    with config.patch(**changes):
        return _compile_fx(gm, example_inputs)


# What functionalization (or the meta kernel of ``copy_``) says of an in-place op on a view whose elements overlap
# (``x.unfold(0, 4, 1).mul_(2)``, ``x.expand(2, 3)[:2] = y``): eager runs it (in some element order), a functional
# graph cannot express it, upstream refuses it too.
_OVERLAPPING_MUTATION = ("functionalization encountered a tensor being mutated that has internal overlap",
                         "more than one element of the written-to tensor refers to a single memory location",
                         # a window beyond its input's elements (decomposition.py), a write through one
                         "functionalization encountered a window outside the elements of its input",
                         "encountered a mutation on a view chain")


def writes_overlapping_memory(e: Exception) -> bool:
    """``e`` is tracing's refusal of an in-place write to a view whose elements overlap."""
    return any(m in str(e) for m in _OVERLAPPING_MUTATION)


def _compile_fx(gm, example_inputs):
    try:
        return _trace_and_compile(gm, example_inputs)
    except RuntimeError as e:
        if not writes_overlapping_memory(e):
            raise
        # the program's doing, not a bug of ours: run the graph as Dynamo captured it, and say so
        warnings.warn("mininductor: running the graph eagerly, it writes a view whose elements overlap")
        metrics.fallback_count += 1
        metrics.fallback_ops.append("whole graph (in-place op on a view whose elements overlap)")
        return gm


def _trace_and_compile(gm, example_inputs):
    aot = _aot_module()
    if aot is not None:
        try:
            with metrics.timed("aot"):  # tracing to ATen; the compiles it calls back are timed on their own
                return aot(gm, example_inputs, fw_compiler=compile_fx_inner, bw_compiler=compile_fx_inner,
                           decompositions=select_decomp_table())
        except Exception as e:
            if any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs) \
                    and torch.is_grad_enabled():
                raise
            warnings.warn(f"mininductor: aot_module failed ({type(e).__name__}: {e}); tracing for inference")
    try:
        with metrics.timed("aot"):
            aten_gm, _ = trace_inference(gm, example_inputs)
    except (GuardOnDataDependentSymNode, DataDependentOutputException) as e:
        # an output shape depends on data (x[x > 0], nonzero): Dynamo would break the graph here; run it eagerly
        warnings.warn(f"mininductor: running the graph eagerly, it has a data-dependent shape ({e})")
        metrics.fallback_count += 1
        metrics.fallback_ops.append("whole graph (data-dependent shape)")
        return gm
    return _guard_aliased_inputs(compile_fx_inner(aten_gm, example_inputs), gm, aten_gm)


def _guard_aliased_inputs(compiled: Callable, gm: torch.fx.GraphModule, aten_gm: torch.fx.GraphModule) -> Callable:
    """``compiled``, or ``gm`` when inputs share memory and the graph writes one of them ([Note: aliased inputs
    of a mutating graph] in _aot_autograd/runtime_wrappers.py).  A mutated input is a ``copy_`` into a placeholder
    in ``aten_gm``."""
    from ._aot_autograd.runtime_wrappers import eager_if_inputs_alias
    mutates = any(n.args[0].op == "placeholder"
                  for n in aten_gm.graph.find_nodes(op="call_function", target=torch.ops.aten.copy_.default))
    return eager_if_inputs_alias(compiled, gm) if mutates else compiled


def _aot_module():
    """``aot_autograd.aot_module`` when that module exists (written alongside); else None."""
    if os.environ.get("MININDUCTOR_NO_AOT"):
        return None
    try:
        from .aot_autograd import aot_module
    except ImportError:
        return None
    return aot_module


def symbolic_dispatch(fake_mode):
    """With symbolic sizes, the Python dispatcher: composite ops (``F.pad`` -> ``constant_pad_nd``) then take
    their SymInt-aware Python decompositions, not C++ kernels that read sizes as ints -- which would specialise
    them in minidynamo's ShapeEnv, whose guards would then pin the size even though this compile refuses and
    falls back ([Note: composite ops on symbolic sizes] in minidynamo/variables/tensor.py; upstream's AOTAutograd
    always traces under it)."""
    return enable_python_dispatcher() if fake_mode.shape_env is not None else contextlib.nullcontext()


def trace_inference(gm, example_inputs):
    """make_fx + functionalization under no_grad: an ATen inference graph whose input mutations are explicit
    ``copy_`` nodes at the end."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.func import functionalize
    from torch.fx import traceback as fx_traceback
    from torch.fx.experimental.proxy_tensor import make_fx

    from ._aot_autograd.graph_capture_wrappers import tensor_meta_without_guards
    from .aot_autograd import no_dispatch_cache
    table = select_decomp_table()
    fake_mode = next((x.fake_mode for x in example_inputs if isinstance(x, FakeTensor)), None)

    def trace(fn):
        fn = functionalize(fn, remove="mutations")
        with torch.no_grad(), fx_traceback.preserve_node_meta(), EagerFunctions():
            if fake_mode is None:
                return make_fx(fn, decomposition_table=table, tracing_mode="fake",
                               _allow_non_fake_inputs=True)(*example_inputs)
            # inputs are already fake: trace in their mode (parameters may be real)
            prior, fake_mode.allow_non_fake_inputs = fake_mode.allow_non_fake_inputs, True
            try:
                with fake_mode, no_dispatch_cache(fake_mode), symbolic_dispatch(fake_mode), \
                        tensor_meta_without_guards():  # [Note: no fake dispatch cache in AOT], [Note:
                    # tensor_meta records no guards]
                    return make_fx(fn, decomposition_table=table, tracing_mode="real")(*example_inputs)
            finally:
                fake_mode.allow_non_fake_inputs = prior
    aten_gm = trace(gm)
    if _mutates_an_intermediate(aten_gm):  # functionalize what the first trace left in place
        aten_gm = trace(aten_gm)
    _record_original_output_strides(aten_gm, gm)
    return aten_gm, example_inputs


def _record_original_output_strides(aten_gm: torch.fx.GraphModule, fn: Callable) -> None:
    """``fn``'s outputs' strides before decomposing: eager's, which a decomposition need not keep ([Note: outputs
    keep eager's strides]).  A graph from minidynamo carries them: each node's ``meta['example_value']`` is the
    fake tensor its op gave when the translator ran it.  Otherwise a fake run of ``fn`` finds them; nothing is
    recorded if that run fails."""
    strides = _translated_output_strides(fn)
    if strides is None:
        strides = _fake_run_output_strides(aten_gm, fn)
    if strides is not None:
        aten_gm.meta["original_output_strides"] = strides


def _translated_output_strides(fn: Callable) -> list | None:
    """The strides of a translated graph's outputs, read from the translator's example values (None where one is
    missing: a graph built by other means)."""
    if not isinstance(fn, torch.fx.GraphModule):
        return None
    output = next(iter(fn.graph.find_nodes(op="output")), None)
    if output is None:
        return None
    strides = []
    for leaf in pytree.tree_leaves(output.args[0]):
        value = leaf.meta.get("example_value") if isinstance(leaf, torch.fx.Node) else leaf
        if isinstance(leaf, torch.fx.Node) and value is None:
            return None
        strides.append(tuple(value.stride()) if isinstance(value, torch.Tensor) else None)
    return strides


def _fake_run_output_strides(aten_gm: torch.fx.GraphModule, fn: Callable) -> list | None:
    from torch._guards import detect_fake_mode
    from torch.func import functionalize
    vals = [n.meta.get("val") for n in aten_gm.graph.find_nodes(op="placeholder")]
    fake_mode = detect_fake_mode(vals)
    if fake_mode is None:
        return None
    try:
        with fake_mode, torch.no_grad(), symbolic_dispatch(fake_mode), EagerFunctions():
            args = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
                    if isinstance(v, torch.Tensor) else v for v in vals]
            outs = pytree.tree_leaves(functionalize(fn)(*args))
    except Exception:  # noqa: BLE001  (data-dependent ops...: the traced strides are used)
        return None
    return [tuple(o.stride()) if isinstance(o, torch.Tensor) else None for o in outs]


def _mutates_an_intermediate(gm: torch.fx.GraphModule) -> bool:
    """An in-place op on a tensor the graph made (``F.pad(x, mode="circular")`` traces, through the
    CompositeImplicit ``_pad_circular``, to ``empty`` and ``copy_`` into its slices): functionalization, which
    ran above that decomposition, did not see it. Only ``copy_`` into an input (a mutated input) may stay."""
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        if node.target is not torch.ops.aten.copy_.default or node.args[0].op != "placeholder":
            return True
    return False


def _debug_dump(aten_gm, graph, scheduler, source: str) -> None:
    if config.debug >= 1:
        print(source)
    if config.debug >= 2:
        print(scheduler)
    if config.debug >= 3:
        print(aten_gm.print_readable(print_output=False))
    if not config.debug_dir:
        return
    os.makedirs(config.debug_dir, exist_ok=True)
    files = {
        "fx_graph_readable.py": aten_gm.print_readable(print_output=False),
        "ir_pre_fusion.txt": "\n\n".join(f"{b.get_name()}: {b}" for b in graph.buffers),
        "ir_post_fusion.txt": str(scheduler),
        "output_code.py": source,
    }
    for name, text in files.items():
        with open(os.path.join(config.debug_dir, name), "w") as f:
            f.write(text)
