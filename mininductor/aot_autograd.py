"""AOTAutograd: a Dynamo graph in, ATen forward (and backward) graphs out, wrapped to plug into eager autograd.

What goes in: a Dynamo-style ``torch.fx.GraphModule`` (torch-level ops, maybe ``_set_grad_enabled`` calls and in-place
ops on its inputs) that takes a flat list of tensors (parameters are ordinary inputs) and its example inputs.
What comes out: ``compiled(*inputs)``, returning what ``gm`` returns, whose graphs were compiled by ``fw_compiler`` and
``bw_compiler`` ahead of time, so ``loss.backward()`` runs a *generated* backward too. ``compiled.aot_graphs`` (an
``AOTGraphs``) keeps the forward/backward/joint ATen graphs, the bytes saved for backward, the recomputed ops and the
compiled callables (with their generated code); with ``mininductor.config.debug_dir`` set, they are also written there
(``fw_graph_readable.py``, ``bw_graph_readable.py``, ``joint_graph_readable.py``, ``aot_partition.txt``,
``fw_output_code.py``, ``bw_output_code.py``).

Why: the backend (mininductor) wants small, functional ATen graphs; training needs the backward as such a graph as
well, so it can be fused and generated like the forward. The pipeline reads like upstream's; this file is the entry
point and the driver (``aot_module``), each stage lives in ``mininductor/_aot_autograd/`` (upstream's
``torch/_functorch/_aot_autograd/``), in processing order:

1. ``collect_metadata`` (``collect_metadata_analysis.py``; a ``ViewAndMutationMeta`` of ``schemas.py``): run ``gm``
   once on fake tensors, functionalized, to learn which inputs it mutates and which outputs require grad (this fixes
   the joint graph's signature).
2. Inference (grad disabled, or nothing requires grad; ``graph_capture_wrappers.py``): ``make_fx`` over the
   functionalized ``gm`` with the decomposition table gives one ATen graph
   ``(*inputs) -> (*outputs, *new values of mutated inputs)``.
3. Training (``graph_capture_wrappers.py``): ``make_fx`` over ``joint(primals, tangents)``, which runs ``gm`` and
   then ``torch.autograd.grad`` -- the autograd engine itself writes the backward, as ATen ops, into the same graph.
   ``partitioners`` cuts that joint graph into a forward (returning outputs + tensors saved for backward) and a
   backward graph.
4. Runtime (``runtime_wrappers.py``): the forward and backward are the ``forward``/``backward`` of a
   ``torch.autograd.Function``, so a compiled graph is one node of the eager autograd graph (graph breaks between
   compiled graphs just work). New values of mutated inputs are copied back into the real inputs after the graph
   ([Note: input mutations] in ``runtime_wrappers.py``).

Tiny example::

    def f(x, w):                       # x: (4, 8), w: (8, 8) requires grad
        return (torch.nn.functional.gelu(x @ w),)
    compiled = aot_module(torch.fx.symbolic_trace(f), [x, w], fw_compiler=nop)  # or mininductor.compile_fx_inner
    compiled(x, w)[0].sum().backward()  # runs the partitioned backward graph; w.grad matches eager
    print(compiled.aot_graphs)          # forward and backward ATen graphs, bytes saved for backward

Dynamic shapes: ``aot_module(..., dynamic=True)`` traces on Dynamo's own fake inputs, whose sizes are symbols
([Note: dynamic shapes in AOTAutograd]).

Left out (compared with upstream): tensor subclasses, double backward, RNG functionalization, outputs that are
overlapping views (``expand``) or overlapping views of one buffer in training graphs (they stay views made by the
Function, which refuse in-place ops: [Note: outputs that are views] in ``_aot_autograd/runtime_wrappers.py``;
inference graphs re-make views of inputs in compile_fx: [Note: outputs that alias inputs]), metadata mutations of
inputs (``t_()``, ``resize_``: the graph runs eagerly, with a warning). Mirrors ``torch/_functorch/aot_autograd.py`` (``aot_module_simplified``);
the stages mirror ``torch/_functorch/_aot_autograd/`` (schemas, functional_utils, collect_metadata_analysis,
graph_capture_wrappers, runtime_wrappers).

AOTAutograd's notes that live in ``_aot_autograd/``: [Note: input mutations], [Note: outputs that are views],
[Note: outputs that alias mutated inputs], [Note: enable_grad inside], [Note: double backward], [Note: aliased
inputs of a mutating graph] in ``runtime_wrappers.py``; [Note: the joint graph], [Note: a backward that eager
refuses], [Note: attention in training] in ``graph_capture_wrappers.py``; [Note: a clone keeps the input's
strides] in ``functional_utils.py``. Here: [Note: dynamic shapes in AOTAutograd], [Note: no fake dispatch cache in
AOT], [Note: a view functionalization cannot replay].
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from collections.abc import Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from mininductor import partitioners, reinplace

from ._aot_autograd.collect_metadata_analysis import (
    AliasOfMutatedInput,
    AsStridedOfShiftedInput,
    MetadataMutation,
    collect_metadata,
)
from ._aot_autograd.graph_capture_wrappers import BackwardFailsInEager, trace_forward, trace_joint
from ._aot_autograd.runtime_wrappers import (
    eager_if_inputs_alias,
    make_autograd_runtime,
    make_inference_runtime,
    tangent_dependencies,
)
from ._aot_autograd.schemas import ViewAndMutationMeta

Compiler = Callable[[torch.fx.GraphModule, list], Callable]

__all__ = ["AOTGraphs", "ViewAndMutationMeta", "aot_eager", "aot_module", "default_decompositions", "nop"]


# ----------------------------------------------------------------------------------------------------------------
# The record that explain / debug_dir read
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class AOTGraphs:
    """The ATen graphs made for one Dynamo graph, the partition's cost and the compiled callables."""

    fw_graph: torch.fx.GraphModule
    bw_graph: torch.fx.GraphModule | None = None  # None on the inference path
    joint_graph: torch.fx.GraphModule | None = None
    stats: partitioners.PartitionStats | None = None
    compiled_fw: Callable | None = None
    compiled_bw: Callable | None = None  # filled in lazily, at the first backward
    mutated_inputs: list[int] = dataclasses.field(default_factory=list)

    @property
    def saved_bytes(self) -> int:
        """Bytes the forward keeps alive for the backward (0 on the inference path)."""
        return self.stats.saved_bytes if self.stats else 0

    @property
    def num_saved(self) -> int:
        return len(self.stats.saved) if self.stats else 0

    @property
    def num_recomputed(self) -> int:
        return len(self.stats.recomputed) if self.stats else 0

    def __str__(self) -> str:
        parts = ["===== forward graph =====", self.fw_graph.print_readable(print_output=False)]
        if self.bw_graph is not None:
            parts += ["===== backward graph =====", self.bw_graph.print_readable(print_output=False)]
        if self.stats is not None:
            parts.append(str(self.stats))
        if self.mutated_inputs:
            parts.append(f"inputs mutated in place (copied back after the graph): {self.mutated_inputs}")
        for name, fn in (("forward", self.compiled_fw), ("backward", self.compiled_bw)):
            code = _source_code(fn)
            if code:
                parts += [f"===== {name} output code =====", code]
        return "\n".join(parts)

    def write_debug_files(self, directory: str) -> None:
        """``fw_graph_readable.py``, ``bw_graph_readable.py`` (+ ``joint_graph_readable.py``, ``aot_partition.txt``)."""
        os.makedirs(directory, exist_ok=True)
        graphs = {"fw": self.fw_graph, "bw": self.bw_graph, "joint": self.joint_graph}
        for prefix, gm in graphs.items():
            if gm is not None:
                with open(os.path.join(directory, f"{prefix}_graph_readable.py"), "w") as f:
                    f.write(gm.print_readable(print_output=False))
        if self.stats is not None:
            with open(os.path.join(directory, "aot_partition.txt"), "w") as f:
                f.write(str(self.stats) + "\n")
        self.write_output_code(directory)

    def write_output_code(self, directory: str) -> None:
        """``fw_output_code.py`` / ``bw_output_code.py``: the generated modules, when the compiler kept them."""
        for prefix, fn in (("fw", self.compiled_fw), ("bw", self.compiled_bw)):
            if (code := _source_code(fn)) is not None:
                with open(os.path.join(directory, f"{prefix}_output_code.py"), "w") as f:
                    f.write(code)


def _source_code(fn: Callable | None) -> str | None:
    """The generated module of a compiled graph, when the compiler kept it (mininductor does)."""
    for attr in ("source", "source_code", "output_code"):
        code = getattr(fn, attr, None)
        if isinstance(code, str):
            return code
    return None


def _debug_dir() -> str | None:
    try:
        from mininductor import config
    except ImportError:
        return None
    return getattr(config, "debug_dir", None)


# ----------------------------------------------------------------------------------------------------------------
# ----------------------------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------------------------
def default_decompositions() -> dict:
    """mininductor's decomposition table when it exists, else PyTorch's core ATen decompositions."""
    try:
        from mininductor.decomposition import select_decomp_table
    except ImportError:
        return torch._decomp.core_aten_decompositions()
    return select_decomp_table()


def _fake_inputs(example_inputs: list) -> tuple[FakeTensorMode, list]:
    """Fake copies of the inputs (same shapes, strides, dtypes, requires_grad); reuse their mode if already fake."""
    modes = {a.fake_mode for a in example_inputs if isinstance(a, FakeTensor)}
    mode = modes.pop() if modes else FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor) else a for a in example_inputs]
    return mode, fakes


def no_dispatch_cache(fake_mode: FakeTensorMode):
    """Trace without FakeTensorMode's dispatch cache: minidynamo's helper, shared.

    [Note: no fake dispatch cache in AOT]  As in minidynamo's translation ([Note: no fake dispatch cache while
    tracing] in ``minidynamo/variables/tensor.py``): the graphs of one program share few ops of one shape, so most
    lookups miss, and a miss costs the dispatch plus the entry plus a synthesised output to validate it.  The
    tutorial MoE's first call: 71 hits, 177 misses; without the cache, aot was about 10% faster (CPU, medians of 7).
    Imported when called, not at the top: minidynamo imports mininductor when it starts up on a GPU machine."""
    from minidynamo.variables.tensor import no_dispatch_cache as minidynamo_no_dispatch_cache
    return minidynamo_no_dispatch_cache(fake_mode)


@contextlib.contextmanager
def _allow_real_constants(fake_mode: FakeTensorMode):
    """Real tensors held by ``gm`` (constants) may meet fake inputs, also in a mode Dynamo made strict."""
    prior, fake_mode.allow_non_fake_inputs = fake_mode.allow_non_fake_inputs, True
    try:
        yield
    finally:
        fake_mode.allow_non_fake_inputs = prior


def _lift_parameters(gm: torch.nn.Module) -> tuple[Callable, list]:
    """``gm``'s own parameters/buffers become leading inputs (Dynamo graphs have none; symbolic_trace ones do)."""
    state = {**dict(gm.named_parameters()), **dict(gm.named_buffers())}
    if not state:
        return gm, []
    names = list(state)

    def fn(*args):
        return torch.func.functional_call(gm, dict(zip(names, args[:len(names)])), tuple(args[len(names):]))

    return fn, list(state.values())


def _keeping_grad_mode(fn: Callable) -> Callable:
    """``fn`` that leaves grad mode as it found it.  [Note: a graph that ends under no_grad]  A Dynamo graph that
    breaks inside ``with torch.no_grad():`` ends with ``_set_grad_enabled(False)`` (minidynamo sets that final
    mode itself after the compiled graph runs).  Running it here left grad mode off for the runs that follow:
    ``collect_metadata`` saw ``y = x * 0`` made before the block require grad, then the joint trace ran the graph
    again with grad off, ``autograd.grad`` raised "element 0 of tensors does not require grad", and the fallback
    to an inference compile returned ``y`` without ``requires_grad`` (translator fuzz round 9)."""
    def run(*args):
        prior = torch.is_grad_enabled()
        try:
            return fn(*args)
        finally:
            torch._C._set_grad_enabled(prior)

    return run


def aot_module(gm: torch.fx.GraphModule, example_inputs: list, fw_compiler: Compiler,
               bw_compiler: Compiler | None = None, decompositions: dict | None = None,
               partition_fn: Callable | None = None, *, dynamic: bool = False) -> Callable:
    """Compile ``gm`` ahead of time for inference or training; see the module docstring for the pipeline.

    ``dynamic=True``: ``example_inputs`` are ``gm``'s fake inputs with symbolic sizes, and the graphs handed to the
    compilers keep those symbols ([Note: dynamic shapes in AOTAutograd])."""
    bw_compiler = bw_compiler or fw_compiler
    decompositions = default_decompositions() if decompositions is None else decompositions
    partition_fn = partition_fn or partitioners.min_cut_rematerialization_partition
    fn, lifted = _lift_parameters(gm)
    fn = _keeping_grad_mode(fn)
    if dynamic:
        fake_mode, fake_args = _symbolic_fake_inputs(lifted, example_inputs)
    else:
        _check_static(example_inputs)
        fake_mode, fake_args = _fake_inputs(lifted + list(example_inputs))
    with _allow_real_constants(fake_mode), no_dispatch_cache(fake_mode):
        with fake_mode:
            try:
                meta = collect_metadata(fn, fake_args)
            except AliasOfMutatedInput as e:  # [Note: outputs that alias mutated inputs] (runtime_wrappers.py)
                warnings.warn(f"aot_autograd: {e}; running the graph eagerly")
                return gm
            except (MetadataMutation, AsStridedOfShiftedInput) as e:  # ``y.t_()`` of an input; [Note: as_strided
                # of a shifted input] (collect_metadata_analysis.py)
                warnings.warn(f"aot_autograd: {e}; running the graph eagerly")
                return gm
            except ValueError as e:
                # [Note: a view functionalization cannot replay]  ``v = c.view(-1)``, then an in-place op through
                # ``c.t()``: functionalization re-makes ``v`` from ``c``'s new value, whose strides are the
                # transposed ones, and ``view`` refuses them (upstream's torch.compile raises the same).  Eager
                # never re-makes ``v``: the graph runs eagerly.
                if "Cannot view a tensor" not in str(e):
                    raise
                warnings.warn(f"aot_autograd: functionalization cannot replay a view ({e}); running the graph "
                              "eagerly")
                return gm
        if any(meta.fw_output_requires_grad):  # grad mode on, or turned on inside gm ([Note: enable_grad inside])
            try:
                compiled, graphs = _aot_training(fn, meta, fake_mode, fake_args, fw_compiler, bw_compiler,
                                                 decompositions, partition_fn, compile_bw_now=dynamic)
            except BackwardFailsInEager as e:  # [Note: a backward that eager refuses] (graph_capture_wrappers.py)
                warnings.warn(f"aot_autograd: the graph's backward would fail ({e}); running the graph eagerly, "
                              "so that .backward() raises where eager raises")
                return gm
        else:
            compiled, graphs = _aot_inference(fn, meta, fake_mode, fake_args, fw_compiler, decompositions)
    if (directory := _debug_dir()) is not None:
        graphs.write_debug_files(directory)
    if meta.mutated_inputs:
        compiled = eager_if_inputs_alias(compiled, gm)
    if lifted:
        compiled = _prepend(compiled, lifted)
    compiled.aot_graphs = graphs
    return compiled


# [Note: dynamic shapes in AOTAutograd]
# A graph Dynamo captured with dynamic shapes comes with fake inputs whose sizes are ``SymInt``s of Dynamo's
# ``ShapeEnv`` (``s0`` rows). Tracing on *those* fakes (not on static copies) makes every graph symbolic: the joint
# graph's forward and backward ops take ``s0``, the tangents are made ``empty_like`` the symbolic outputs, and an
# op that must decide something about a size (``s0 == 1``?) asks the ShapeEnv, which answers from what Dynamo's
# guards imply or else adds a guard, which the compile then checks at each call ([Note: guards a symbolic compile
# adds] in specialize.py; a trace that *replaced* a size by a number is refused: never a wrong answer). Three
# things differ from the static path:
#   1. the fakes are used as they are (detached: autograd history of Dynamo's tracing is not ours), parameters
#      of ``gm`` itself get static fakes in the same mode;
#   2. the partitioner re-reads every size the backward needs from the shape of a saved tensor or tangent
#      ([Note: sizes in the backward] in partitioners.py), or refuses;
#   3. the backward is compiled at once, not at the first ``backward()``: a refusal must come before the graph
#      first runs, while the caller can still compile per shape instead.
def _symbolic_fake_inputs(lifted: list, example_inputs: list) -> tuple[FakeTensorMode, list]:
    """Dynamo's fake inputs, detached (requires_grad kept), after static fakes of ``gm``'s own parameters."""
    modes = {a.fake_mode for a in example_inputs if isinstance(a, FakeTensor)}
    if len(modes) != 1 or not all(isinstance(a, (FakeTensor, torch.SymInt)) for a in example_inputs):
        raise NotImplementedError("dynamic=True needs fake tensor (or SymInt) inputs of one FakeTensorMode")
    mode = modes.pop()
    with mode:
        fakes = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, FakeTensor) else a
                 for a in example_inputs]
    return mode, [mode.from_tensor(p, static_shapes=True) for p in lifted] + fakes


def _check_static(example_inputs: list) -> None:
    """Graphs are traced for the inputs' exact shapes; a symbolic size (dynamic shapes) would be silently baked in."""
    for i, a in enumerate(example_inputs):
        symbolic = not isinstance(a, torch.Tensor) or any(not isinstance(s, int) for s in a.shape)
        if symbolic:
            raise NotImplementedError(
                f"input {i} is {type(a).__name__}{'' if not isinstance(a, torch.Tensor) else tuple(a.shape)}: "
                "minicompile's AOTAutograd traces static shapes only. Hint: compile with dynamic=False.")


def _prepend(compiled: Callable, lifted: list) -> Callable:
    def with_params(*args):
        return compiled(*lifted, *args)

    return with_params


def _user_output_strides(meta: ViewAndMutationMeta) -> list:
    """The user outputs' strides in the fake run, before decomposing: eager's ([Note: outputs keep eager's
    strides]); the forward graph's first outputs are those."""
    return [tuple(v.stride()) for v in meta.fw_output_vals[:meta.num_tensor_outputs]]


def _aot_inference(fn, meta, fake_mode, fake_args, fw_compiler, decompositions) -> tuple:
    with fake_mode:
        fw_gm = trace_forward(fn, meta, fake_args, decompositions)
    # where each mutated input's new value is returned: a compiler may then write it in place (reinplace.py)
    fw_gm.meta["input_mutations"] = {i: meta.num_tensor_outputs + k for k, i in enumerate(meta.mutated_inputs)}
    fw_gm.meta["original_output_strides"] = _user_output_strides(meta)
    compiled_fw = fw_compiler(fw_gm, _placeholder_vals(fw_gm))
    graphs = AOTGraphs(fw_graph=fw_gm, compiled_fw=compiled_fw, mutated_inputs=list(meta.mutated_inputs))
    return make_inference_runtime(compiled_fw, meta), graphs


def _aot_training(fn, meta, fake_mode, fake_args, fw_compiler, bw_compiler, decompositions, partition_fn,
                  compile_bw_now: bool = False) -> tuple:
    with fake_mode:
        joint = trace_joint(fn, meta, fake_args, decompositions)
    fw_gm, bw_gm = partition_fn(joint, fake_args, num_fwd_outputs=meta.num_fw_outputs)
    fw_gm.meta["input_mutations"] = _in_place_candidates(fw_gm, meta)  # [Note: input mutations in training]
    reinplace.drop_input_clones(fw_gm, fw_gm.meta["input_mutations"])
    stats = partitioners.partition_stats(fw_gm, bw_gm, meta.num_fw_outputs)
    graphs = AOTGraphs(fw_graph=fw_gm, bw_graph=bw_gm, joint_graph=joint, stats=stats,
                       mutated_inputs=list(meta.mutated_inputs))
    fw_gm.meta["original_output_strides"] = _user_output_strides(meta)
    graphs.compiled_fw = fw_compiler(fw_gm, _placeholder_vals(fw_gm))

    def compile_bw() -> Callable:
        if graphs.compiled_bw is None:
            graphs.compiled_bw = bw_compiler(bw_gm, _placeholder_vals(bw_gm))
            if (directory := _debug_dir()) is not None:
                graphs.write_output_code(directory)
        return graphs.compiled_bw

    if compile_bw_now:  # ([Note: dynamic shapes in AOTAutograd], 3.)
        compile_bw()
    grads = list(joint.graph.find_nodes(op="output")[0].args[0])[meta.num_fw_outputs:]
    saved = list(fw_gm.graph.find_nodes(op="output")[0].args[0])[meta.num_fw_outputs:]
    saved_ints = [k for k, n in enumerate(saved) if partitioners.is_sym_node(n)]
    return make_autograd_runtime(graphs.compiled_fw, compile_bw, meta, [g is not None for g in grads],
                                 in_place=frozenset(fw_gm.meta["input_mutations"]), saved_ints=saved_ints,
                                 grad_deps=tangent_dependencies(joint, len(fake_args), meta.num_fw_outputs)), graphs


def _in_place_candidates(fw_gm: torch.fx.GraphModule, meta: ViewAndMutationMeta) -> dict[int, int]:
    """``{input position: forward output position}`` of the mutated inputs a compiler may write in place in a
    training forward (reinplace.py decides which it does): those whose new value requires grad and is returned
    once -- the runtime then marks the input dirty ([Note: input mutations in training])."""
    placeholders = list(fw_gm.graph.find_nodes(op="placeholder"))
    outputs = list(fw_gm.graph.find_nodes(op="output")[0].args[0])
    if len(placeholders) < meta.num_inputs:
        return {}
    found = {}
    for k, i in enumerate(meta.mutated_inputs):
        pos = meta.num_tensor_outputs + k
        if meta.mutation_requires_grad[k] and sum(o is outputs[pos] for o in outputs) == 1:
            found[i] = pos
    return found


def _placeholder_vals(gm: torch.fx.GraphModule) -> list:
    """The fake example inputs a compiler receives (as upstream: shapes, strides, dtypes, devices; no data)."""
    return [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]


def nop(gm: torch.fx.GraphModule, _example_inputs: list) -> Callable:
    """The compiler of ``aot_eager`` (upstream's ``nop``): run the ATen graph as it is (but for
    ``_detach_scatter_bases``)."""
    _detach_scatter_bases(gm)
    return gm.forward


def _detach_scatter_bases(gm: torch.fx.GraphModule) -> None:
    """[Note: as_strided_scatter of an input that requires grad]  ``x.as_strided(...).add_(1)`` of a transposed
    ``x`` is traced as ``as_strided_scatter(primals_1, ...)``; ATen's kernel asserts that a base that requires
    grad is contiguous ("INTERNAL ASSERT FAILED ... as_strided_scatter is currently only supported for contiguous
    inputs": it has no derivative for one).  The graph runs without autograd (inside the Function's ``forward``,
    or under ``no_grad``), but its placeholders are the caller's tensors, which do require grad, and so do views of
    them -- so the base is passed detached: same values (the kernel clones the whole storage of its base), no
    check.  (mininductor lowers the op itself.)"""
    scatters = list(gm.graph.find_nodes(op="call_function", target=torch.ops.aten.as_strided_scatter.default))
    for n in scatters:
        with gm.graph.inserting_before(n):
            n.update_arg(0, gm.graph.call_function(torch.ops.aten.detach.default, (n.args[0],)))
    if scatters:
        gm.recompile()


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A backend (``backend="aot_eager"``): AOTAutograd's graphs, run eagerly -- to debug everything but codegen."""
    from .compile_fx import writes_overlapping_memory
    from .specialize import PerShapeCompiled, is_symbolic_graph
    if is_symbolic_graph(gm, example_inputs):  # dynamic sizes: traced static per shape (specialize.py)
        return PerShapeCompiled(gm, aot_eager)
    try:
        return aot_module(gm, example_inputs, fw_compiler=nop, bw_compiler=nop)
    except RuntimeError as e:
        if not writes_overlapping_memory(e):
            raise
        warnings.warn("aot_eager: running the graph eagerly, it writes a view whose elements overlap")
        return gm
