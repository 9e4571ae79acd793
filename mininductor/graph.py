"""``GraphLowering``: an ``fx.Interpreter`` over an ATen graph that calls each node's lowering (mirrors
``torch/_inductor/graph.py``).

In: an ATen-level ``GraphModule`` (from ``make_fx`` with our decomposition table) and example inputs.
Out: the graph's buffers (``graph.buffers``, in creation order), its inputs, constants, outputs and mutated inputs
-- everything the scheduler and the wrapper need. Each placeholder becomes an ``InputBuffer`` ``arg{i}_1``; each
ATen node runs its lowering, or becomes a ``FallbackKernel`` when it has none (``metrics.fallback_count``).
"""
from __future__ import annotations

import operator
from typing import Any

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree

# the *_lowering modules register their lowerings when imported
from . import (  # noqa: F401
    config,
    division_lowering,
    extern_lowering,
    index_lowering,
    ir,
    metrics,
    pad_lowering,
    pool_lowering,
    reduction_lowering,
    view_lowering,
)
from .indexing import (
    as_size,
    exact_quotients,
    is_symbolic,
    size_hint,
    texpr,
)
from .ir import TensorBox
from .lowering import lowerings
from .reinplace import reinplaceable_scatters
from .size_ops import SIZE_OPS, float_size
from .virtualized import V

# [Note: CPU scalars]  Eager lets a 0-dim CPU tensor meet CUDA tensors (``flat_indices == i`` where ``i`` is a
# tensor): the kernel receives its value, not a pointer.  A compiled CUDA kernel cannot read CPU memory, so such an
# input is copied to the device at the start of ``call`` -- a host-to-device copy per call (the tutorial MoE passes
# its loop variable this way, once per expert).  Inductor instead passes its value (``zero_dim_cpu_tensor_list``):
# the wrapper reads ``x.item()`` (host memory: no sync) and the kernel takes it as a scalar argument.  We do the
# same for the dtypes a Triton scalar argument holds exactly; the copy stays for other dtypes and for any
# consumer that is not a kernel (a matmul, a fallback, an output).
SCALAR_ARG_DTYPES = (torch.int32, torch.int64, torch.float32)


def _is_view_node(node) -> bool:
    """An output computed by an ATen view op (transpose, slice, diagonal...): eager returns a view of its input."""
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and getattr(node.target, "is_view", False)


def _eager_stride(node, original=None) -> list | None:
    """The strides eager gives an output, when they are a dense permutation other than row-major; else None.

    [Note: outputs keep eager's strides]  Eager's pointwise ops lay their result out like their inputs
    (TensorIterator): ``x.t() * 2`` has the strides of ``x.t()``, a channels-last input gives a channels-last
    result. A program may read those strides (``.stride()``, ``.is_contiguous()``, a ``.view`` that only works on
    them), so a computed pointwise output is stored with the strides the traced graph recorded -- Inductor's
    ``keep_output_stride``. The scheduler walks such a node's loop in memory order (``SchedulerNode._make_plan``),
    so its store is contiguous; a 2-D tile only where another large access is transposed to that order
    (``codegen/tiling.py``: ``choose_tiling``). Reductions and views keep their own rules.

    A decomposition need not keep eager's strides (``repeat`` is a permuted view of an expanded clone;
    ``one_hot``, training ``batch_norm``...): a user output's strides are ``original``, recorded before
    decomposing (the graph's ``meta["original_output_strides"]``, Inductor's name), when there are some: by
    AOTAutograd's metadata run, or, for a symbolic compile, read off the translator's fake values of the graph's
    outputs (``compile_fx._record_original_output_strides``).
    """
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return None
    size = [as_size(s) for s in val.shape]
    stride = [as_size(s) for s in (val.stride() if original is None else original)]
    dims = [d for d in range(len(size)) if size[d] != 1]  # a symbolic size is never 1 (0 and 1 specialise)
    if any(size[d] == 0 for d in dims) or len(dims) <= 1:
        return None
    # A symbolic stride (``s27*s53``) holds for every size: order the dims by the example's strides (the hint),
    # then check structurally that each is the product of the sizes below it. Row-major is not re-laid out.
    by_stride = sorted(dims, key=lambda d: size_hint(stride[d]))
    if by_stride == sorted(dims, reverse=True) or len({size_hint(stride[d]) for d in dims}) < len(dims):
        return None
    expected = 1  # dense: walking the dims from the smallest stride up, each stride is the elements below it
    for d in by_stride:  # (a symbolic stride may read ``Max(1, s27//2)`` or ``s53*Max(1, s86)``: the sizes below
        # are not 0 here, so each such ``Max`` is its argument)
        if not _equal_as_sizes(stride[d], expected):
            if any(is_symbolic(s) for s in size):
                # a forward's saved output is read by a backward compiled for these strides: a row-major store
                # would be a wrong answer, so the symbolic compile refuses instead (one compile per shape)
                raise NotImplementedError(f"cannot keep the traced strides {list(val.stride())} of an output")
            return None
        stride[d], expected = expected, expected * size[d]
    return stride


def _output_bases(gm: torch.fx.GraphModule) -> set:
    """The graph's outputs, and the nodes that an output is a view of (``x.t().add_(1)`` returns ``add.t().t()``):
    each is realised with eager's strides as soon as it is lowered, so that an extern kernel or a consumer that
    realises it first (``y = x.t() * 2; return y, y @ w``) does not fix it row-major."""
    bases = set()
    for node in gm.graph.find_nodes(op="output"):
        for leaf in pytree.tree_leaves(node.args[0]):
            while isinstance(leaf, torch.fx.Node):
                bases.add(leaf)
                leaf = leaf.args[0] if _is_view_node(leaf) else None
    return bases


# [Note: as_strided reads eager's layout]  ``as_strided(t, size, stride, offset)`` indexes ``t``'s *storage*, so
# what it reads depends on how eager laid ``t`` (or, through views, the tensor that owns the storage) out:
# functionalization replays a view whose chain it cannot name (``chunk(x.t() + 1, 1)[0]``) as ``as_strided`` of
# the base with the base's eager strides.  We store a computed buffer row-major unless told otherwise, so
# such a base is realised with eager's strides as soon as it is lowered -- Inductor's ``as_strided_ops`` rule
# in ``GraphLowering.run_node``.  (A column-major ``x.t() + 1`` stored row-major was read transposed.)
_AS_STRIDED_OPS = {torch.ops.aten.as_strided.default, torch.ops.prims.as_strided.default,
                   torch.ops.aten.as_strided_scatter.default}


def _is_view_output(node) -> bool:
    """``getitem`` of a view op with several outputs (``split``, ``unbind``)."""
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is operator.getitem \
        and _is_view_node(node.args[0])


def _view_base(node):
    """The node whose storage ``node`` is a view of (itself when it is no view); ``split(t)[1]`` views ``t`` too."""
    while _is_view_node(node) or _is_view_output(node):
        node = node.args[0] if _is_view_node(node) else node.args[0].args[0]
    return node


def _as_strided_bases(gm: torch.fx.GraphModule) -> set:
    """The computed nodes whose storage an ``as_strided`` indexes (through any views of them)."""
    bases = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _AS_STRIDED_OPS:
            base = _view_base(node.args[0])
            if isinstance(base, torch.fx.Node) and base.op == "call_function":
                bases.add(base)
    return bases


def _output_alias_groups(gm: torch.fx.GraphModule) -> list[tuple[torch.fx.Node, list[int]]]:
    """``(base, output positions)`` for each set of outputs that eager returns on one storage, that of a node the
    graph computes (outputs on an input's storage are re-made after the call: [Note: outputs that alias inputs]
    in compile_fx.py).  Read from the traced values: a view shares its base's storage, a copy has its own."""
    from torch.multiprocessing.reductions import StorageWeakRef
    nodes = [leaf for node in gm.graph.find_nodes(op="output") for leaf in pytree.tree_leaves(node.args[0])]
    by_storage: dict = {}
    for k, n in enumerate(nodes):
        if isinstance(n, torch.fx.Node) and isinstance(val := n.meta.get("val"), torch.Tensor):
            by_storage.setdefault(StorageWeakRef(val.untyped_storage()), []).append(k)
    groups = [(_view_base(nodes[ks[0]]), ks) for ks in by_storage.values() if len(ks) > 1]
    return [(base, ks) for base, ks in groups if base.op == "call_function"]


def _output_buffer(value):
    """The buffer a realised output reads: itself, or the one under its strided window."""
    node = ir.unwrap_view_to_buffer(value)
    return node.data if isinstance(node, ir.ReinterpretView) else node


def _original_output_strides(gm: torch.fx.GraphModule) -> dict:
    """Output node -> the strides eager gives it, where recorded before decomposing (see ``_eager_stride``)."""
    recorded = gm.meta.get("original_output_strides") or []
    nodes = [leaf for node in gm.graph.find_nodes(op="output") for leaf in pytree.tree_leaves(node.args[0])]
    return {n: s for n, s in zip(nodes, recorded) if isinstance(n, torch.fx.Node) and s is not None
            and len(s) == len(getattr(n.meta.get("val"), "shape", ()))}


def _refuse_a_symbolic_layout_with_gaps(node) -> None:
    """Raise ``NotImplementedError`` when ``node``'s traced strides, in row-major order, are not dense and its
    sizes are symbolic: a row-major copy of it cannot have them.

    [Note: a saved view with gaps]  ``x.reshape(n, -1)`` of an ``x`` whose last dim has stride 2 is, in eager, a
    view with strides ``(2 * (s53 // n), 2)``.  Our symbolic reshape reads it through a floor division that
    ``as_strided_layout`` cannot turn into strides, so the output is copied, row-major and dense -- while a training
    forward's saved output is read by a backward compiled for the traced strides: it read every other element of
    the copy, and past its end (wrong gradients; lowering fuzz --grad --zero --dynamic --int, seed 1001745).  As
    for a permuted layout that cannot be kept (``_eager_stride``), the symbolic compile refuses; per shape, the
    view is a strided window again.  (That view itself is a window now: ``n`` is an int input, and
    ``as_strided_layout`` reads int inputs as sizes since the twenty-sixth session.  The rule stays for views no
    window expresses.)"""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return
    size, stride = [as_size(s) for s in val.shape], [as_size(s) for s in val.stride()]
    if not any(is_symbolic(s) for s in size):
        return
    expected = 1
    for d in reversed(range(len(size))):
        if size[d] != 1 and not _equal_as_sizes(stride[d], expected):
            raise NotImplementedError(f"cannot keep the traced strides {list(val.stride())} of an output")
        expected = expected * size[d]


def _equal_as_sizes(stride, expected) -> bool:
    """Is a traced ``stride`` the product of sizes ``expected`` for every size? Each ``Max(1, e)`` (sympy's or
    torch's own ``Max``) reads as ``e``, and each floor division the guards make exact as a true division
    (``exact_quotients``): ``x.reshape(n, -1)`` of a permuted ``x`` traces strides such as
    ``(s36*((s4*s80*s9)//s36))//s80``, which is ``s4*s9`` under ``Eq(Mod(s4*s80*s9, s36), 0)``, and a symbolic
    compile refused them as not dense (lowering fuzz --grad --int --dynamic, seed 6200728)."""
    diff = stride - expected
    if not isinstance(diff, sympy.Basic):
        return diff == 0
    diff = diff.replace(lambda e: type(e).__name__ == "Max" and len(e.args) == 2 and sympy.Integer(1) in e.args,
                        lambda e: next(a for a in e.args if a != 1))
    return sympy.expand(exact_quotients(diff)) == 0


class GraphLowering(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list,
                 size_hints: dict | None = None) -> None:
        super().__init__(gm)
        self.example_inputs = example_inputs
        # symbolic compile (specialize.py): example inputs are fake tensors with SymInt sizes; ``size_hints`` maps
        # each size symbol to its example value, ``size_sources`` each symbol to the input dim it is read from
        self.symbolic = size_hints is not None
        self.size_hints: dict = dict(size_hints or {})
        self.size_sources: dict = {}
        self._pending_sizes: list = []  # sizes of several symbols, solved once the others are known
        self.shape_env = None  # a symbolic compile's ShapeEnv: what its guards imply about the sizes (statically_true)
        self.pinned_sizes: dict = {}  # compound size -> the one value the ShapeEnv allows it, or itself (as_size)
        self.buffers: list[ir.Buffer] = []
        self.name_to_buffer: dict[str, ir.Buffer] = {}
        self.graph_inputs: dict[str, ir.IRNode] = {}
        self.graph_input_names: list[str] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.graph_outputs: list = []
        self.cpu_outputs: set[int] = set()  # indices of outputs eager returns on the CPU (see output())
        self.mutations: list[tuple[str, TensorBox]] = []
        # scatters that store into the input they mutate (reinplace.py): node -> placeholder position, and the
        # name of each such scatter's buffer -> the input's name
        self.reinplace = reinplaceable_scatters(gm)
        self.reinplaced: dict[str, str] = {}
        # buffers whose kernels check values (aten._assert_async): kept, though nothing reads them
        self.assertions: list[str] = []
        self.current_node: torch.fx.Node | None = None
        self.output_bases = _output_bases(gm)
        self.original_strides = _original_output_strides(gm)
        self.as_strided_bases = _as_strided_bases(gm)
        self.output_alias_groups = _output_alias_groups(gm)
        self.alias_bases: dict = {base: None for base, _ in self.output_alias_groups}  # base -> its lowered value
        devices = [x.device for x in example_inputs if isinstance(x, torch.Tensor)]
        cuda = [d for d in devices if d.type == "cuda"]
        self.device = cuda[0] if cuda else devices[0] if devices else torch.device("cpu")
        # CPU scalars that meet CUDA tensors (eager allows it): copied to the device at the start of call()
        self.moved_inputs: list[str] = []
        # the 0-dim ones among them: kernels take their value as a scalar argument (see [Note: CPU scalars])
        self.zero_dim_cpu_tensors: set[str] = set()
        self._placeholder_index = 0

    # -------------------------------------------------------------------------------------- buffers
    def register_buffer(self, buf: ir.Buffer) -> str:
        name = f"buf{len(self.buffers)}"
        self.buffers.append(buf)
        self.name_to_buffer[name] = buf
        return name

    def get_buffer(self, name: str) -> ir.Buffer:
        if name in self.name_to_buffer:
            return self.name_to_buffer[name]
        return self.graph_inputs[name]

    def get_dtype(self, name: str) -> torch.dtype:
        return self.get_buffer(name).get_dtype()

    # -------------------------------------------------------------------------------------- fx hooks
    def run(self, *args):
        with V.set_graph_handler(self):
            return super().run(*args)

    def run_node(self, n: torch.fx.Node) -> Any:
        self.current_node = n
        result = super().run_node(n)
        if isinstance(result, TensorBox) and n.op == "call_function":
            if n in self.output_bases and not _is_view_node(n) and result.data is not result.storage():
                # eager makes a new tensor here, which an output is (a view of); we lowered it to a view of
                # another buffer (``flip`` re-indexes its input): a copy of its own, or the output's view of it
                # would be a contiguous copy (``x.flip(-1)[..., ::2]`` had strides (4, 1), eager's (8, 2))
                from .lowering import clone
                result = clone(result)
            storage = result.storage()
            if result.data is storage and n in self.output_bases and isinstance(storage.data, ir.Pointwise) \
                    and (stride := _eager_stride(n, self.original_strides.get(n))) is not None:
                storage.realize(stride)  # before a consumer realises it row-major: [Note: outputs keep eager's strides]
            if storage is not None:
                storage.mark_reuse(len(n.users))
            if n in self.as_strided_bases:
                result = self._with_eager_layout(n, result)
        if n in self.alias_bases:
            self.alias_bases[n] = result
        return result

    def _with_eager_layout(self, node: torch.fx.Node, result: TensorBox) -> TensorBox:
        """``result`` as a buffer with exactly the strides eager gives ``node`` (an ``as_strided`` reads its
        storage: [Note: as_strided reads eager's layout]); a copy when it was lowered to a view or realised
        with other strides."""
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return result
        from torch.fx.experimental.symbolic_shapes import statically_known_true as known
        if known(val.numel() <= 1):  # (``known``: a symbolic compile must not specialise the sizes)
            return result
        if not known(val.storage_offset() == 0) or not torch._prims_common.is_non_overlapping_and_dense_or_false(val):
            # no buffer of ours has that layout; raised here, outside any lowering, it runs the whole graph
            # eagerly (a per-op fallback would run as_strided on our buffer, with its layout: a wrong answer)
            raise NotImplementedError(f"as_strided of {node.target}'s output, whose eager layout is not dense")
        stride = [as_size(s) for s in val.stride()]
        storage = result.storage()
        if result.data is storage and not storage.is_realized():
            storage.realize(stride)
            return result
        buf = ir.unwrap_view_to_buffer(result)
        if isinstance(buf, ir.Buffer) and buf.layout.offset == 0 and all(
                a == b for a, b, n in zip(buf.layout.stride, stride, buf.layout.size) if n != 1):
            return result
        from .lowering import clone
        copy = clone(result)
        copy.storage().realize(stride)
        return copy

    def placeholder(self, target, args, kwargs):
        example = self.example_inputs[self._placeholder_index]
        self._placeholder_index += 1
        name = f"arg{len(self.graph_input_names)}_1"
        if isinstance(example, torch.SymInt):  # [Note: int inputs of a symbolic graph] in compile_fx.py
            self.graph_input_names.append(name)
            expr = example.node.expr
            if expr.is_number:  # an int the frame specialised (0 and 1 are): a constant, as below
                return int(expr)
            if isinstance(expr, sympy.Symbol):  # else sizes read elsewhere: [Note: an int input equal to sizes]
                self.size_sources.setdefault(expr, (name, None, None, name))
            return expr
        if not isinstance(example, torch.Tensor):
            self.graph_input_names.append(name)  # passed to call() like any input, used as a constant
            return example
        # [Note: offsets] a kernel receives a tensor's data_ptr, which already includes its storage offset, so
        # every buffer's layout offset is 0; only as_strided (absolute storage offsets) needs the real one.
        device = example.device
        if device != self.device and example.numel() == 1:
            self.moved_inputs.append(name)
            if example.dim() == 0 and example.dtype in SCALAR_ARG_DTYPES:
                self.zero_dim_cpu_tensors.add(name)
            device = self.device
        size, stride = [as_size(s) for s in example.shape], [as_size(s) for s in example.stride()]
        self._record_size_sources(name, size, stride)
        layout = ir.FixedLayout(device, example.dtype, size, stride, 0)
        buf = ir.InputBuffer(name, layout)
        buf.storage_offset = as_size(example.storage_offset())
        self.graph_inputs[name] = buf
        self.graph_input_names.append(name)
        return TensorBox(ir.StorageBox(buf))

    def _record_size_sources(self, name: str, size: list, stride: list) -> None:
        """A size or stride that is a bare symbol tells the wrapper where to read that symbol at run time:
        ``size_sources[s77] = (name, attr, dim, text)``, ``text`` the read (``arg0_1.shape[0]``).  A
        non-contiguous input (``x[:, ::2]`` of a dynamic ``x``) has a stride symbol of its own, read with
        ``.stride()`` when no input's size has it.  Any other size waits until it can be solved for a symbol
        (``_solve_sizes``)."""
        for attr, values in (("shape", size), ("stride()", stride)):
            for dim, s in enumerate(values):
                if isinstance(s, sympy.Symbol) and s not in self.size_sources:
                    self.size_sources[s] = (name, attr, dim, f"{name}.{attr}[{dim}]")
                elif isinstance(s, sympy.Expr) and s.free_symbols and not s.is_Symbol:
                    self._pending_sizes.append((name, attr, dim, s))
        self._solve_sizes()

    def _solve_sizes(self) -> None:
        """A size ``a*s + rest`` whose only symbol no input has bare is ``s``, with ``rest`` a number or made of
        known symbols, is solved for ``s``.  The backward of ``F.pad(x, (1, 2))`` receives a tangent of ``s77 + 3``
        elements and returns ``s77`` of them, so ``s77 = arg0_1.shape[0] - 3``; with an int width ``n`` the
        tangent has ``s40 + s86`` and the saved ``n`` is ``s86``, so ``s40 = arg2_1.shape[1] - (arg0_1)``
        (upstream passes the sizes themselves to the backward).  Known symbols are written as their own reads,
        so the order in which ``call`` reads its sizes does not matter."""
        progress = True
        while progress:
            progress = False
            for item in list(self._pending_sizes):
                name, attr, dim, s = item
                unknown = [f for f in s.free_symbols if f not in self.size_sources]
                if len(unknown) > 1:
                    continue  # perhaps once another input is read
                self._pending_sizes.remove(item)
                if not unknown:
                    continue
                u = unknown[0]
                a, rest = s.coeff(u), sympy.expand(s - s.coeff(u) * u)
                if not (a.is_Integer and a > 0) or u in rest.free_symbols:
                    continue
                read = f"{name}.{attr}[{dim}]"
                if rest.is_Integer:
                    read += f" - {rest}" if rest > 0 else f" + {-rest}" if rest < 0 else ""
                else:
                    reads = {k: sympy.Symbol(f"({self.size_sources[k][3]})") for k in rest.free_symbols}
                    read += f" - ({texpr(rest.xreplace(reads))})"
                self.size_sources[u] = (name, attr, dim, f"({read}) // {a}" if a != 1 else read)
                progress = True

    def get_attr(self, target, args, kwargs):
        value = getattr(self.module, target)
        if not isinstance(value, torch.Tensor):
            return value
        name = f"_constant{len(self.constants)}"
        if value.device != self.device:  # e.g. a CPU tensor constant in a CUDA graph
            value = value.to(self.device)
        self.constants[name] = value
        layout = ir.FixedLayout(value.device, value.dtype, list(value.shape), list(value.stride()), 0)
        buf = ir.ConstantBuffer(name, layout)
        buf.storage_offset = value.storage_offset()
        self.graph_inputs[name] = buf
        return TensorBox(ir.StorageBox(buf))

    def call_function(self, target, args, kwargs):
        if target is operator.getitem:
            return args[0][args[1]]
        if target in SIZE_OPS:  # size arithmetic of a symbolic graph: sympy expressions, evaluated by the wrapper
            val = self.current_node.meta.get("val")
            if isinstance(val, torch.SymFloat):
                return float_size(val)
            return SIZE_OPS[target](*args, **kwargs)
        if _touches_complex(self.current_node):
            self.fallback_reason = "complex tensors (Triton has no complex type)"
        elif target in lowerings:
            try:
                return lowerings[target](*args, **kwargs)
            except NotImplementedError as e:  # the lowering declines this case (bool masks, device copies...)
                self.fallback_reason = str(e)
            except Exception as e:  # a lowering bug must cost speed, not correctness
                self.fallback_reason = f"lowering failed: {type(e).__name__}: {e}"
                if config.debug:
                    raise
        return self.fallback(target, args, kwargs)

    def output(self, target, args, kwargs):
        outputs = pytree.tree_leaves(args[0])
        nodes = pytree.tree_leaves(self.current_node.args[0])
        self.graph_outputs = [self._realize_output(self._fresh_output(o, n), _is_view_node(n), n)
                              for o, n in zip(outputs, nodes)]
        for base, positions in self.output_alias_groups:
            self._keep_output_aliases(base, [(k, nodes[k]) for k in positions])
        # an output eager computes on the CPU from CPU scalars alone (``i + 1``): computed here, returned there
        self.cpu_outputs = {k for k, n in enumerate(nodes)
                            if self.device.type != "cpu" and isinstance(n, torch.fx.Node)
                            and isinstance(v := n.meta.get("val"), torch.Tensor) and v.device.type == "cpu"}
        return self.graph_outputs

    def _fresh_output(self, value, node):
        """An output that lowered to an input or a constant *itself* (``x.detach()``, ``x.view(x.shape)``,
        ``torch.tensor(2.5)``'s ``lift_fresh_copy``) is, in eager, a new tensor each call: a view of the input
        (another object on the same storage), a fresh copy of the constant -- never the constant the compiled
        graph keeps, which a caller's in-place op on one call's result would change for every later call."""
        if not isinstance(value, TensorBox) or not isinstance(node, torch.fx.Node) or node.op == "placeholder":
            return value
        storage = value.storage()
        if value.data is not storage or storage is None or not isinstance(storage.data, (ir.InputBuffer,
                                                                                          ir.ConstantBuffer)):
            return value
        if isinstance(storage.data, ir.ConstantBuffer):
            from .lowering import clone
            return clone(value)
        view = ir.as_strided_layout(value)
        return TensorBox(view) if view is not None else value

    def _realize_output(self, value, is_view: bool = False, node=None):
        """An output with eager's permuted strides was realised with them when lowered (``run_node``); one that
        must be copied (a view no strided window can express: ``flip``) is copied with them too.  Those are the
        strides the graph's consumers were traced with -- for a training forward, its *saved* outputs are read by
        a backward compiled for the traced strides: a row-major copy of a column-major ``rev`` gave it wrong
        gradients."""
        if not isinstance(value, TensorBox):
            return value
        if not isinstance(value.data, ir.View):  # a buffer, or a strided window on one (``as_strided``)
            value.realize()
            return value
        # a view chain: of a StorageBox, or of an ``as_strided`` window (no StorageBox: ``storage()`` is None,
        # and the window's buffer is realised already -- ``x.as_strided(...).unsqueeze(2)`` is such a chain)
        storage = value.storage()
        if is_view and storage is not None:  # eager returns a view of an intermediate: its strides, not a
            storage.realize()  # contiguous copy (AOTAutograd's "output aliases an intermediate": the base is
            # computed and the view regenerated)
        rv = ir.as_strided_layout(value) if storage is None or storage.is_realized() else None
        if rv is not None:
            return TensorBox(rv)
        from .lowering import clone
        copy = clone(value)
        stride = _eager_stride(node, self.original_strides.get(node)) if node is not None else None
        if stride is None and node is not None:
            _refuse_a_symbolic_layout_with_gaps(node)
        copy.storage().realize(stride)
        return copy

    def _keep_output_aliases(self, base: torch.fx.Node, outputs: list[tuple[int, torch.fx.Node]]) -> None:
        """[Note: outputs that alias outputs]  ``o = x.sin(); return o, o.view(-1)``: eager's two outputs share
        one storage, and the caller's ``b.add_(1)`` changes ``a``.  A view lowers to a re-indexing of its base's
        buffer, which the output becomes a strided window on (``ir.as_strided_layout``) when the index is linear
        -- after ``simplify_index`` folds a reshape's ``FloorDiv``/``ModularIndexing`` back, with symbolic sizes
        too.  Where it is not (an index that does not fold, a view lowered to a fallback kernel) the output was a
        copy: the values right, the aliasing silently lost.  So every output of such a set must read one buffer;
        those that do not are re-made here as windows on their base's buffer, with the size, strides and offset
        of the traced value (upstream's runtime wrapper does this with ``gen_alias_from_base``).  The base buffer
        must have eager's layout; when that or the window cannot be had, the compile refuses (the graph runs
        eagerly, or per shape), so the answer is never a copy where eager returns a view."""
        if len({id(_output_buffer(self.graph_outputs[k])) for k, _ in outputs}) == 1:
            return  # all windows on one buffer already
        value = self.alias_bases[base]
        if not isinstance(value, TensorBox):
            raise NotImplementedError(f"outputs that alias {base.target}'s output, which is not a tensor buffer")
        value = self._with_eager_layout(base, value)
        value.realize()
        buf = _output_buffer(value)
        if not isinstance(buf, ir.Buffer) or buf.layout.offset != 0:
            raise NotImplementedError(f"outputs that alias {base.target}'s output, which has no buffer of its own")
        for k, node in outputs:
            if _output_buffer(self.graph_outputs[k]) is not buf:
                self.graph_outputs[k] = TensorBox(self._window(buf, node.meta["val"]))

    def _window(self, buf: ir.Buffer, val: torch.Tensor) -> ir.ReinterpretView:
        """``buf`` seen with the traced value's size, strides and offset (the base's storage offset is 0)."""
        layout = ir.FixedLayout(buf.get_device(), val.dtype, [as_size(s) for s in val.shape],
                                [as_size(s) for s in val.stride()], as_size(val.storage_offset()))
        symbols = set().union(*(getattr(e, "free_symbols", set()) for e in (*layout.size, *layout.stride,
                                                                            layout.offset)))
        if val.dtype != buf.get_dtype() or not symbols <= set(self.size_sources):
            raise NotImplementedError(f"an output that eager returns as a view of {buf.get_name()}: no window")
        return ir.ReinterpretView(buf, layout)

    # -------------------------------------------------------------------------------------- fallback
    def fallback(self, target, args, kwargs):
        """Run ``target`` eagerly at runtime: inputs realised, outputs wrapped as ``MultiOutput`` buffers."""
        from .extern_lowering import realize_input
        if not isinstance(target, torch._ops.OpOverload):
            raise NotImplementedError(f"cannot lower {target} (not an ATen op)")
        val = self.current_node.meta.get("val") if self.current_node is not None else None
        if self.symbolic and any(isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))
                                 for v in pytree.tree_leaves(val)):  # a size the op returns: no name for it
            raise NotImplementedError(f"symbolic compile: {target} returns a size, and has no lowering")
        inputs: list = []
        opaque: list[str] = []

        def convert(a):
            if isinstance(a, TensorBox):
                r = realize_input(a)
                inputs.append(r)
                return r
            if isinstance(a, ir.OpaqueOutput):
                opaque.append(a.get_name())
            return a
        cargs = torch.fx.node.map_aggregate(args, convert)
        ckwargs = torch.fx.node.map_aggregate(kwargs, convert)
        node = ir.FallbackKernel(target, cargs, ckwargs, val, inputs, origins={self.current_node})
        node.opaque_inputs = opaque
        node.name = self.register_buffer(node)
        metrics.fallback_count += 1
        reason, self.fallback_reason = getattr(self, "fallback_reason", None), None
        metrics.fallback_ops.append(f"{target} ({reason})" if reason else str(target))
        return self._fallback_outputs(node, val, ())

    def _fallback_outputs(self, parent, val, indices):
        if isinstance(val, torch.Tensor):
            # [Note: fallbacks with symbolic sizes]  The op runs in ATen on the real tensors, whatever their sizes;
            # its outputs' layouts are the traced ones (``(s77, s27)``, strides ``(s27, 1)``), which the kernels
            # reading them index with, and ``ensure_layout`` makes the result have them (Inductor's
            # ``FallbackKernel`` under dynamic shapes).
            layout = ir.FixedLayout(val.device, val.dtype, [as_size(s) for s in val.shape],
                                    [as_size(s) for s in val.stride()], 0)
            out = ir.MultiOutput(None, layout, parent, indices)
            out.name = self.register_buffer(out)
            return TensorBox(ir.StorageBox(out))
        if isinstance(val, (list, tuple)):
            return [self._fallback_outputs(parent, v, indices + (i,)) for i, v in enumerate(val)]
        if val is None or isinstance(val, (int, float, bool)) and not indices:
            return val
        if not indices:  # an opaque object (a profiler handle...): referenced by the fallback's own name
            return ir.OpaqueOutput(parent.get_name())
        return val


def _touches_complex(node) -> bool:
    """Does ``node`` read or make a complex tensor?  Triton has no complex type, so such an op runs in ATen
    (``view_as_complex(x).abs()`` compiled a kernel over a complex64 pointer, which raised at launch)."""
    if not isinstance(node, torch.fx.Node):
        return False
    values = [node.meta.get("val"), *(n.meta.get("val") for n in node.all_input_nodes)]
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in pytree.tree_leaves(values))
