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
well, so it can be fused and generated like the forward. The pipeline reads like upstream's:

1. ``collect_metadata``: run ``gm`` once on fake tensors, functionalized, to learn which inputs it mutates and which
   outputs require grad (this fixes the joint graph's signature).
2. Inference (grad disabled, or nothing requires grad): ``make_fx`` over the functionalized ``gm`` with the
   decomposition table gives one ATen graph ``(*inputs) -> (*outputs, *new values of mutated inputs)``.
3. Training: ``make_fx`` over ``joint(primals, tangents)``, which runs ``gm`` and then ``torch.autograd.grad`` -- the
   autograd engine itself writes the backward, as ATen ops, into the same graph. ``partitioners`` cuts that joint
   graph into a forward (returning outputs + tensors saved for backward) and a backward graph.
4. Runtime: the forward and backward are the ``forward``/``backward`` of a ``torch.autograd.Function``, so a compiled
   graph is one node of the eager autograd graph (graph breaks between compiled graphs just work). New values of
   mutated inputs are copied back into the real inputs after the graph ([Note: input mutations]).

Tiny example::

    def f(x, w):                       # x: (4, 8), w: (8, 8) requires grad
        return (torch.nn.functional.gelu(x @ w),)
    compiled = aot_module(torch.fx.symbolic_trace(f), [x, w], fw_compiler=nop)  # or mininductor.compile_fx_inner
    compiled(x, w)[0].sum().backward()  # runs the partitioned backward graph; w.grad matches eager
    print(compiled.aot_graphs)          # forward and backward ATen graphs, bytes saved for backward

Dynamic shapes: ``aot_module(..., dynamic=True)`` traces on Dynamo's own fake inputs, whose sizes are symbols
([Note: dynamic shapes in AOTAutograd]).

Left out (compared with upstream): tensor subclasses, double backward, RNG functionalization,
outputs that are overlapping views (``expand``) or overlapping views of one buffer in training graphs (they stay
views made by the Function, which refuse in-place ops: [Note: outputs that are views]; inference graphs re-make
views of inputs in compile_fx: [Note: outputs that alias inputs]), metadata mutations of inputs (``t_()``,
``resize_``) which raise. Mirrors ``torch/_functorch/aot_autograd.py`` and
``torch/_functorch/_aot_autograd/`` (collect_metadata_analysis, graph_capture_wrappers, runtime_wrappers).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import os
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import torch
import torch.fx
import torch.nn.attention
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from mininductor import partitioners
from mininductor.decomposition import EagerFunctions

Compiler = Callable[[torch.fx.GraphModule, list], Callable]

__all__ = ["AOTGraphs", "ViewAndMutationMeta", "aot_eager", "aot_module", "default_decompositions", "nop"]


# ----------------------------------------------------------------------------------------------------------------
# What we learn before tracing
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ViewAndMutationMeta:
    """What one fake run of the functionalized graph tells us (upstream's class of the same name, much smaller).

    ``outputs`` are the flat outputs of ``gm``: a tensor's slot holds ``TENSOR``, any other value (an int, None)
    is kept as a constant, since only tensors travel through the compiled graphs.
    """

    TENSOR: ClassVar[object] = type("TensorOutput", (), {"__repr__": lambda self: "<tensor>"})()

    num_inputs: int
    mutated_inputs: list[int]  # indices of inputs whose data ``gm`` changes in place
    input_requires_grad: list[bool]
    outputs: list[Any]  # TENSOR for a tensor output, else the constant value
    output_requires_grad: list[bool]  # one per *tensor* output
    mutation_requires_grad: list[bool]  # one per mutated input: does its new value require grad?
    out_spec: pytree.TreeSpec
    fw_output_vals: list[torch.Tensor]  # fake values of the forward's outputs (shapes/dtypes of the tangents)
    # tensor outputs that are views made under no_grad of a tensor that requires grad: eager gives them
    # ``requires_grad=True`` and no ``grad_fn`` (they get no gradient); [Note: outputs that are views]
    no_grad_views: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        from .runtime import unflattener
        self.all_tensors = all(o is self.TENSOR for o in self.outputs)
        self.unflatten = unflattener(self.out_spec)

    @property
    def num_tensor_outputs(self) -> int:
        return len(self.output_requires_grad)

    @property
    def num_fw_outputs(self) -> int:
        """Outputs of the compiled forward before the saved tensors: user tensors, then mutated inputs' values."""
        return self.num_tensor_outputs + len(self.mutated_inputs)

    @property
    def fw_output_requires_grad(self) -> list[bool]:
        return self.output_requires_grad + self.mutation_requires_grad


def to_fun(t: Any) -> Any:
    """Wrap a tensor for functionalization (a FunctionalTensorMode must be active); other values pass through."""
    return FunctionalTensor.to_functional(t) if isinstance(t, torch.Tensor) else t


def from_fun(t: Any) -> Any:
    """Unwrap a functional tensor after applying its pending mutations (``_sync``)."""
    if not isinstance(t, FunctionalTensor):
        return t
    torch._sync(t)
    return torch._from_functional_tensor(t.elem)


def _wrap_inputs(args: list, clone: list[bool]) -> list:
    """Functional wrappers of ``args``; cloned where an input requiring grad may be mutated.

    The clone makes the mutated value a non-leaf, so autograd allows the in-place op and routes its gradient to the
    original input -- exactly what eager autograd does for a mutated non-leaf tensor.
    """
    wrapped = [to_fun(a) for a in args]
    return [_grad_clone(w) if c else w for w, c in zip(wrapped, clone)]


def _grad_clone(t: torch.Tensor) -> torch.Tensor:
    """A clone that stands for ``t`` in autograd whatever the grad mode: a graph called under ``no_grad`` may turn
    it on itself ([Note: enable_grad inside]), and then its ops on the input must be recorded."""
    with torch.enable_grad():
        return t.clone()


def collect_metadata(fn: Callable, fake_args: list) -> ViewAndMutationMeta:
    """Run ``fn`` once on fake, functional inputs and record mutations and ``requires_grad`` of every output."""
    requires_grad = [isinstance(a, torch.Tensor) and a.requires_grad for a in fake_args]
    with enable_python_dispatcher(), FunctionalTensorMode(), EagerFunctions():
        f_args = _wrap_inputs(fake_args, requires_grad)
        flat_outs, out_spec = pytree.tree_flatten(fn(*f_args))
        if any(isinstance(o, (torch.SymInt, torch.SymFloat, torch.SymBool)) for o in flat_outs):
            # kept as a constant it would be the symbol itself (``s77``) on every call: refuse, so the caller
            # compiles per shape, where sizes are plain ints (specialize.py)
            raise NotImplementedError("a symbolic size among the outputs (only tensors travel through the graphs)")
        for a in f_args:
            if isinstance(a, FunctionalTensor):
                torch._sync(a)
        mutated = [i for i, a in enumerate(f_args) if _has_data_mutation(a, i)]
        outputs = [ViewAndMutationMeta.TENSOR if isinstance(o, torch.Tensor) else o for o in flat_outs]
        tensors = [o for o in flat_outs if isinstance(o, torch.Tensor)]
        no_grad_views = [k for k, o in enumerate(tensors) if o.requires_grad and o.grad_fn is None and o._is_view()]
        out_rg = [o.requires_grad and k not in no_grad_views for k, o in enumerate(tensors)]
        mut_rg = [f_args[i].requires_grad for i in mutated]
        vals = [from_fun(o) for o in tensors] + [from_fun(f_args[i]) for i in mutated]
    return ViewAndMutationMeta(len(fake_args), mutated, requires_grad, outputs, out_rg, mut_rg, out_spec, vals,
                               no_grad_views)


def _has_data_mutation(a: Any, index: int) -> bool:
    if not isinstance(a, FunctionalTensor):
        return False
    if torch._functionalize_has_metadata_mutation(a.elem):
        raise NotImplementedError(
            f"input {index} has its metadata (shape/strides) mutated in place (e.g. t_(), resize_()); "
            "minicompile's AOTAutograd only supports data mutations. Hint: use the out-of-place op.")
    return torch._functionalize_has_data_mutation(a.elem)


# ----------------------------------------------------------------------------------------------------------------
# The functions we trace with make_fx
# ----------------------------------------------------------------------------------------------------------------
def create_forward_fn(fn: Callable, meta: ViewAndMutationMeta) -> Callable:
    """``forward(primals) -> [*tensor outputs, *new values of mutated inputs]`` without any in-place op on inputs."""

    def forward(primals: list) -> list:
        f_args = _wrap_inputs(primals, [False] * len(primals))
        flat_outs = pytree.tree_leaves(fn(*f_args))
        outs = [o for o in flat_outs if isinstance(o, torch.Tensor)]
        return [from_fun(o) for o in outs] + [from_fun(f_args[i]) for i in meta.mutated_inputs]

    return forward


def create_joint(fn: Callable, meta: ViewAndMutationMeta) -> Callable:
    """``joint(primals, tangents) -> [*forward outputs, *grads of primals]`` ([Note: the joint graph]).

    One tangent per forward output that requires grad (user outputs first, then mutated inputs). A grad is None
    where the primal does not require grad or does not influence any output.
    """

    def joint(primals: list, tangents: list) -> list:
        clone = [rg and i in meta.mutated_inputs for i, rg in enumerate(meta.input_requires_grad)]
        f_primals = [to_fun(p) for p in primals]
        f_args = [_grad_clone(p) if c else p for p, c in zip(f_primals, clone)]
        flat_outs = pytree.tree_leaves(fn(*f_args))
        fw_outs = [o for o in flat_outs if isinstance(o, torch.Tensor)] + [f_args[i] for i in meta.mutated_inputs]
        grads = _autograd_grad(fw_outs, meta.fw_output_requires_grad, f_primals, [to_fun(t) for t in tangents])
        return [from_fun(o) for o in fw_outs] + [from_fun(g) for g in grads]

    return joint


def _autograd_grad(outs: list, out_rg: list[bool], primals: list, tangents: list) -> list:
    """``torch.autograd.grad`` over the outputs that require grad, with None for primals that get no gradient."""
    diff_outs = [o for o, rg in zip(outs, out_rg) if rg]
    wrt = [i for i, p in enumerate(primals) if isinstance(p, torch.Tensor) and p.requires_grad]
    grads: list = [None] * len(primals)
    if diff_outs and wrt:
        with torch.enable_grad():
            try:
                found = torch.autograd.grad(diff_outs, [primals[i] for i in wrt], tangents, allow_unused=True)
            except RuntimeError as e:
                if "modified by an inplace operation" in str(e):
                    raise BackwardFailsInEager(str(e)) from e
                raise
        for i, g in zip(wrt, found):
            grads[i] = g
    return grads


class BackwardFailsInEager(RuntimeError):
    """The joint graph's ``autograd.grad`` hit autograd's own check that a tensor saved for backward was not
    changed in place since: ``y[1:3] = y[1:3] * x[0]`` saves the slice for ``x``'s gradient, then overwrites it.

    [Note: a backward that eager refuses]  Eager runs such a forward and raises only at ``.backward()`` -- and not
    at all if the program never asks for that gradient.  Tracing the backward ahead of time would raise at compile
    time instead (upstream's AOTAutograd does: BackendCompilerFailed).  So ``aot_module`` hands back ``gm`` itself
    for this graph: eager autograd records its history and raises, or not, exactly where eager does."""


# [Note: the joint graph]
# make_fx records every ATen op that reaches the dispatcher below autograd. While ``joint`` runs, the forward's ops
# are recorded first; then ``torch.autograd.grad`` walks the autograd graph that the forward built on the (fake,
# functional) tensors and calls each op's derivative formula -- those backward ops are recorded too. Decompositions
# apply to both halves, and functionalization turns ``index_add_``/``scatter_``/``copy_`` into their out-of-place
# forms. ``_set_grad_enabled(False)`` regions of ``gm`` simply build no autograd history, so they get no gradient.
def trace_joint(fn: Callable, meta: ViewAndMutationMeta, fake_args: list, decompositions: dict) -> torch.fx.GraphModule:
    tangents = [torch.empty_like(v, memory_format=torch.contiguous_format)
                for v, rg in zip(meta.fw_output_vals, meta.fw_output_requires_grad) if rg]
    # [Note: attention in training] A fused attention kernel saves its logsumexp for its own backward, but its
    # decomposition returns the probabilities in that slot, so decomposing the forward and not the backward gives
    # wrong gradients. The math backend is made of bmm/softmax, whose backward decomposes cleanly and fuses.
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        return _make_fx(create_joint(fn, meta), decompositions, fake_args, tangents)


def trace_forward(fn: Callable, meta: ViewAndMutationMeta, fake_args: list,
                  decompositions: dict) -> torch.fx.GraphModule:
    return _make_fx(create_forward_fn(fn, meta), decompositions, fake_args)


def _make_fx(fn: Callable, decompositions: dict, *args: list) -> torch.fx.GraphModule:
    with enable_python_dispatcher(), FunctionalTensorMode(), EagerFunctions():  # [Note: one_hot's layout]
        gm = make_fx(fn, decomposition_table=decompositions)(*args)
    gm.graph._codegen = torch.fx.graph.CodeGen()  # flat placeholders (primals_1, ...), not make_fx's pytree lists
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


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
# Runtime
# ----------------------------------------------------------------------------------------------------------------
# [Note: input mutations]
# The compiled graphs are functional: an input mutated by ``gm`` comes back as an extra output holding its new
# value, and the runtime copies it into the real input afterwards. The copy happens outside the autograd.Function:
# under grad mode, when the new value requires grad, so the input's autograd history becomes "copy of that output"
# and gradients flow through the graph to the input's old value, as they would in eager; otherwise under no_grad,
# so e.g. an optimizer's in-place update of a parameter stays invisible to autograd, as in eager.  A leaf that
# requires grad is always written under no_grad: eager refuses any other in-place change of it, so the program
# made this one under ``torch.no_grad()`` (the new value may still require grad: it is computed from the leaf).
def _apply_mutations(args: tuple, meta: ViewAndMutationMeta, new_values: list) -> None:
    for i, new in zip(meta.mutated_inputs, new_values):
        if new is args[i]:  # the graph wrote into the input itself (mininductor's reinplace.py): a kernel
            torch.autograd.graph.increment_version(new)  # autograd did not see, so say it changed, as copy_ would
            continue
        leaf_with_grad = args[i].is_leaf and args[i].requires_grad  # eager can only have changed it under no_grad
        if new.requires_grad and torch.is_grad_enabled() and not leaf_with_grad:
            args[i].copy_(new)
        else:
            with torch.no_grad():
                args[i].copy_(new)


def _user_outputs(meta: ViewAndMutationMeta, tensors: list) -> Any:
    """Put the compiled graph's tensors back between the constant outputs, in ``gm``'s output structure."""
    if meta.all_tensors:  # the usual case: nothing to put back, and (mostly) a flat list
        return meta.unflatten(tensors)
    it = iter(tensors)
    flat = [next(it) if c is meta.TENSOR else c for c in meta.outputs]
    return meta.unflatten(flat)


def _unalias_mutated_inputs(saved: list, mutated: list) -> list:
    """A saved tensor that shares memory with an input we are about to overwrite is saved as a copy.

    The backward needs the value from *before* the mutation (and autograd would rightly refuse a tensor whose version
    changed after it was saved).
    """
    storages = {m.untyped_storage().data_ptr() for m in mutated}
    return [s.clone() if s.untyped_storage().data_ptr() in storages else s for s in saved]


def make_inference_runtime(compiled_fw: Callable, meta: ViewAndMutationMeta) -> Callable:
    def runtime(*args):
        # no output requires grad (that is why this is the inference path), whatever the caller's grad mode: an
        # ATen graph run as it is (aot_eager) has lost gm's ``set_grad_enabled(False)`` regions, and under the
        # caller's grad mode its ``exp`` of an input that requires grad would record history eager did not
        with torch.no_grad():
            outs = list(compiled_fw(*args))
        n = meta.num_tensor_outputs
        _apply_mutations(args, meta, outs[n:])
        return _user_outputs(meta, outs[:n])

    return runtime


def _distinct_non_differentiable(outs: list, requires_grad: list[bool]) -> list:
    """An output without grad that *is* an output with grad (``y`` and ``y.detach()`` compiled to one buffer) is
    returned as a detached alias of it: ``mark_non_differentiable`` marks objects, so it would take ``y`` too.
    So is one that is a *view* (``aten.alias(y)``, what ``y.detach()`` becomes in an ATen graph run as it is): a
    view returned by an ``autograd.Function`` takes ``requires_grad`` from its base whatever it is marked."""
    differentiable = {id(o) for o, rg in zip(outs, requires_grad) if rg}
    return [o.detach() if not rg and (id(o) in differentiable or o._is_view()) else o
            for o, rg in zip(outs, requires_grad)]


def _refuse_double_backward(grads: tuple) -> tuple:
    """[Note: double backward]  Under ``create_graph=True`` eager's input gradients require grad (they are
    functions of the inputs); ours come from a backward graph that autograd did not record, so they would look
    constant, and a loss built on them (a gradient penalty) would silently miss that term.  As upstream
    (``CompiledFunctionBackward``) and ``once_differentiable``, they are returned as requiring grad, through a node
    that raises if a second backward reaches it.  (``once_differentiable`` alone decides from the incoming
    gradients, which do not require grad in ``torch.autograd.grad(loss, x, create_graph=True)``.)"""
    tensors = [g for g in grads if g is not None]
    err = torch._C._functions.DelayedError(
        b"minicompile: double backward (create_graph=True, then a backward through the gradients) of a compiled "
        b"graph is not supported; compute the gradient penalty eagerly (minidynamo.disable)", len(tensors))
    wrapped = err(*[g.detach().requires_grad_() for g in tensors])
    wrapped = iter(wrapped if isinstance(wrapped, tuple) else (wrapped,))  # one tensor comes back bare
    return tuple(None if g is None else next(wrapped) for g in grads)


# [Note: outputs that are views]
# An output of an ``autograd.Function`` that is a view (of an intermediate buffer, of an input, of another output)
# is marked as "created in a custom Function", and autograd refuses any in-place op on it -- but in eager,
# ``y = f(x)`` returning ``(x * 2).view(-1)`` may be changed with ``y.add_(1)`` (autograd rebases its history).
# As upstream's runtime wrappers (``gen_alias_from_base``), such an output is re-made *outside* the Function, as a
# view (``as_strided``: same size, strides and storage offset) of a tensor autograd knows as an ordinary one:
#   * the input it aliases (its gradient then flows to the input directly, as in eager; a view of a leaf that
#     requires grad refuses in-place ops with eager's own error);
#   * another output that is no view (``return a.view(3, 2), a``: an in-place change of one shows in the other);
#   * else its base buffer, returned by the Function as an extra output; the backward turns the base's gradient
#     back into the view's tangent.  Only for a base that is contiguous, and views of it that share no element
#     (not an ``expand``; ``a[0], a[1]`` but not ``a[0], a.t()``): then reading the base's gradient at a view's
#     positions gives each element its own gradient, where overlapping views would each get the other's too.
#     Other views stay as they are: an in-place op on them raises, never a wrong gradient.
# The view outputs of the Function itself are dropped: their gradients arrive as zeros.
def _storage_key(t: torch.Tensor) -> int:
    """Which storage ``t`` is a view of (its ``StorageImpl``; ``data_ptr`` is 0 for every empty tensor)."""
    return t.untyped_storage()._cdata


def _no_overlap(t: torch.Tensor) -> bool:
    """No two elements of ``t`` share memory: with its dims in order of stride, each stride passes the reach of
    the smaller ones.  (Sufficient, not necessary; ``torch._debug_has_internal_overlap`` gives up on most views.)"""
    reach = 0
    for size, stride in sorted(((sz, st) for sz, st in zip(t.size(), t.stride()) if sz > 1), key=lambda d: d[1]):
        if stride <= reach:
            return False
        reach += stride * (size - 1)
    return True


def _disjoint_views(views: list[torch.Tensor]) -> bool:
    """Views of one contiguous base that share no element, within or between them (sufficient: the memory spans
    of different views do not meet)."""
    if not all(v._base is views[0]._base and v._base.is_contiguous() and _no_overlap(v) for v in views):
        return False
    spans = sorted((v.storage_offset(), v.storage_offset() + sum(st * (sz - 1) for sz, st in zip(v.size(), v.stride())))
                   for v in views if v.numel())
    return all(end < start for (_, end), (start, _) in itertools.pairwise(spans))


@dataclasses.dataclass
class OutputAliasPlan:
    """For one call: which user outputs are re-made as views, and of what (see [Note: outputs that are views])."""

    # user output index -> ("input", i) | ("output", j) | ("base", index into ``bases``), with the view's geometry
    views: dict[int, tuple[str, int, tuple]]
    bases: list[torch.Tensor]  # base buffers returned as extra outputs of the Function

    @staticmethod
    def of(args: tuple, outs: list, requires_grad: list[bool], meta: ViewAndMutationMeta) -> OutputAliasPlan:
        plan = OutputAliasPlan({}, [])
        inputs = {_storage_key(a): i for i, a in enumerate(args)
                  if isinstance(a, torch.Tensor) and a.requires_grad and i not in meta.mutated_inputs}
        plain = {_storage_key(o): j for j, (o, rg) in enumerate(zip(outs, requires_grad))
                 if rg and not o._is_view()}
        views = [k for k, (o, rg) in enumerate(zip(outs, requires_grad)) if rg and o._is_view()]
        by_storage = collections.defaultdict(list)
        for k in views:
            by_storage[_storage_key(outs[k])].append(outs[k])
        disjoint = {ptr for ptr, group in by_storage.items() if _disjoint_views(group)}
        base_index: dict[int, int] = {}
        any_input = {_storage_key(a): i for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
        for k in meta.no_grad_views:  # re-made under no_grad, as eager made them
            if (ptr := _storage_key(outs[k])) in any_input:
                o = outs[k]
                plan.views[k] = ("input", any_input[ptr], (tuple(o.size()), tuple(o.stride()), o.storage_offset()))
        for k in views:
            o = outs[k]
            geometry = (tuple(o.size()), tuple(o.stride()), o.storage_offset())
            ptr = _storage_key(o)
            if ptr in inputs:
                plan.views[k] = ("input", inputs[ptr], geometry)
            elif ptr in plain:
                plan.views[k] = ("output", plain[ptr], geometry)
            elif ptr in disjoint:
                if ptr not in base_index:
                    base_index[ptr] = len(plan.bases)
                    plan.bases.append(o._base)
                plan.views[k] = ("base", base_index[ptr], geometry)
        return plan

    def regenerate(self, args: tuple, outs: list, bases: tuple) -> list:
        """The user outputs, with the planned ones re-made as ordinary autograd views."""
        for k, (kind, index, (size, stride, offset)) in self.views.items():
            source = {"input": args, "output": outs, "base": bases}[kind][index]
            with torch.set_grad_enabled(outs[k].requires_grad):
                outs[k] = source.as_strided(size, stride, offset)
        return outs

    def tangents_of_views(self, grad_outs: list, base_grads: tuple) -> list:
        """A view re-made from a base buffer gets its gradient through that base: read it back at its positions."""
        for k, (kind, index, (size, stride, offset)) in self.views.items():
            if kind == "base":
                base = self.bases[index]
                grad = base_grads[index].contiguous()
                grad_outs[k] = grad.as_strided(size, stride, offset - base.storage_offset())
        return grad_outs


def make_autograd_runtime(compiled_fw: Callable, compile_bw: Callable[[], Callable], meta: ViewAndMutationMeta,
                          num_grads: list[bool]) -> Callable:
    """Wrap the forward/backward pair in a ``torch.autograd.Function`` (upstream: ``CompiledFunction``).

    ``num_grads[i]`` says whether the backward graph returns a gradient for input ``i``.
    """
    n_fw = meta.num_fw_outputs
    fw_rg = meta.fw_output_requires_grad

    plans: list[OutputAliasPlan] = []  # forward -> runtime: how to re-make this call's aliased outputs

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            outs = list(compiled_fw(*args))
            fw_outs, saved = _distinct_non_differentiable(outs[:n_fw], fw_rg), outs[n_fw:]
            ctx.save_for_backward(*_unalias_mutated_inputs(saved, [args[i] for i in meta.mutated_inputs]))
            ctx.mark_non_differentiable(*[o for o, rg in zip(fw_outs, fw_rg) if not rg])
            ctx.plan = plan = OutputAliasPlan.of(args, fw_outs[:meta.num_tensor_outputs], fw_rg, meta)
            plans.append(plan)
            return (*fw_outs, *plan.bases)

        @staticmethod
        def backward(ctx, *grad_outs):
            with torch.no_grad():
                grad_outs = ctx.plan.tangents_of_views(list(grad_outs[:n_fw]), grad_outs[n_fw:])
                tangents = [g.contiguous() for g, rg in zip(grad_outs, fw_rg) if rg]
                grads = iter(compile_bw()(*ctx.saved_tensors, *tangents))
                grads = tuple(next(grads) if has else None for has in num_grads)
            if torch.is_grad_enabled() and any(ctx.needs_input_grad):
                return _refuse_double_backward(grads)
            return grads

    def runtime(*args):
        # [Note: enable_grad inside]  Some outputs require grad (``meta``), so autograd must record this node even
        # when the caller runs under ``no_grad`` and ``gm`` turned grad mode on itself (``with torch.enable_grad():``
        # inside): ``apply`` under no_grad would return plain tensors.  Outputs eager computed without grad are
        # marked non-differentiable in ``forward``, so they stay plain either way.
        with torch.enable_grad():
            outs = CompiledFunction.apply(*args)
        n = meta.num_tensor_outputs
        user_outs = plans.pop().regenerate(args, list(outs[:n]), outs[n_fw:])
        _apply_mutations(args, meta, list(outs[n:n_fw]))
        return _user_outputs(meta, user_outs)

    return runtime


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
    if dynamic:
        fake_mode, fake_args = _symbolic_fake_inputs(lifted, example_inputs)
    else:
        _check_static(example_inputs)
        fake_mode, fake_args = _fake_inputs(lifted + list(example_inputs))
    with _allow_real_constants(fake_mode), no_dispatch_cache(fake_mode):
        with fake_mode:
            meta = collect_metadata(fn, fake_args)
        if any(meta.fw_output_requires_grad):  # grad mode on, or turned on inside gm ([Note: enable_grad inside])
            try:
                compiled, graphs = _aot_training(fn, meta, fake_mode, fake_args, fw_compiler, bw_compiler,
                                                 decompositions, partition_fn, compile_bw_now=dynamic)
            except BackwardFailsInEager as e:  # [Note: a backward that eager refuses]
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
# guards imply or else adds a guard -- the caller refuses a trace that added one (specialize.py: never a wrong
# answer). Three things differ from the static path:
#   1. the fakes are used as they are (detached: autograd history of Dynamo's tracing is not ours), parameters
#      of ``gm`` itself get static fakes in the same mode;
#   2. the partitioner re-reads every size the backward needs from the shape of a saved tensor or tangent
#      ([Note: sizes in the backward] in partitioners.py), or refuses;
#   3. the backward is compiled at once, not at the first ``backward()``: a refusal must come before the graph
#      first runs, while the caller can still compile per shape instead.
def _symbolic_fake_inputs(lifted: list, example_inputs: list) -> tuple[FakeTensorMode, list]:
    """Dynamo's fake inputs, detached (requires_grad kept), after static fakes of ``gm``'s own parameters."""
    modes = {a.fake_mode for a in example_inputs if isinstance(a, FakeTensor)}
    if len(modes) != 1 or not all(isinstance(a, FakeTensor) for a in example_inputs):
        raise NotImplementedError("dynamic=True needs fake tensor inputs of one FakeTensorMode")
    mode = modes.pop()
    with mode:
        fakes = [a.detach().requires_grad_(a.requires_grad) for a in example_inputs]
    return mode, [mode.from_tensor(p, static_shapes=True) for p in lifted] + fakes


def _check_static(example_inputs: list) -> None:
    """Graphs are traced for the inputs' exact shapes; a symbolic size (dynamic shapes) would be silently baked in."""
    for i, a in enumerate(example_inputs):
        symbolic = not isinstance(a, torch.Tensor) or any(not isinstance(s, int) for s in a.shape)
        if symbolic:
            raise NotImplementedError(
                f"input {i} is {type(a).__name__}{'' if not isinstance(a, torch.Tensor) else tuple(a.shape)}: "
                "minicompile's AOTAutograd traces static shapes only. Hint: compile with dynamic=False.")


def eager_if_inputs_alias(compiled: Callable, gm: torch.fx.GraphModule) -> Callable:
    """[Note: aliased inputs of a mutating graph]  The graph was traced on fake inputs that share no memory, so
    its functional form reads ``b`` as it was before ``a.add_(1)`` -- wrong when the caller passes ``a`` and
    ``a[:]`` (upstream's AOTAutograd regenerates both from a "synthetic base").  Left out here: when two tensor
    inputs of a graph that mutates an input share storage, ``gm`` itself runs, eagerly, in-place ops in order.
    (Also applied by compile_fx to inference graphs traced without AOTAutograd: ``_guard_aliased_inputs``.)"""
    def runtime(*args):
        storages = [a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)]
        if len(set(storages)) != len(storages):
            return gm(*args)
        return compiled(*args)

    return runtime


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
    return make_autograd_runtime(graphs.compiled_fw, compile_bw, meta, [g is not None for g in grads]), graphs


def _placeholder_vals(gm: torch.fx.GraphModule) -> list:
    """The fake example inputs a compiler receives (as upstream: shapes, strides, dtypes, devices; no data)."""
    return [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]


def nop(gm: torch.fx.GraphModule, _example_inputs: list) -> Callable:
    """The compiler of ``aot_eager`` (upstream's ``nop``): run the ATen graph as it is."""
    return gm.forward


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A backend (``backend="aot_eager"``): AOTAutograd's graphs, run eagerly -- to debug everything but codegen."""
    from .specialize import PerShapeCompiled, is_symbolic_graph
    if is_symbolic_graph(gm, example_inputs):  # dynamic sizes: traced static per shape (specialize.py)
        return PerShapeCompiled(gm, aot_eager)
    return aot_module(gm, example_inputs, fw_compiler=nop, bw_compiler=nop)
