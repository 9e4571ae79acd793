"""Library calls: the matmuls and convolution as extern kernels, and the two matmul lowerings that do without
one on the GPU (mirrors the extern part of ``torch/_inductor/lowering.py`` and ``kernel/mm.py``).

``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``convolution``, ``mv``, ``addmv`` and ``dot`` become an ``ExternKernel``:
a call to cuBLAS/cuDNN (or ATen's CPU kernel) in the generated wrapper, on realised inputs, with the output layout
eager gives (chapter 6). A skinny fp32 ``bmm``/``mm`` may become a ``MatmulChoice`` instead (matmul_template.py).
Two lowerings avoid the call altogether, on the GPU: an ``addmm`` whose result only pointwise ops read is an
``mm`` plus a bias its consumer adds ([Note: a bias added by its consumer]), and an fp32/fp64 ``mm`` of at most
four rows, or any matrix product of few enough products, is a reduction kernel ([Note: a skinny mm as a
reduction], [Note: a small matmul as a reduction]).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import sympy
import torch

from . import config, ir, matmul_template
from .dependencies import extract_read_writes
from .indexing import as_size, is_symbolic, statically_true
from .ir import Reduction, TensorBox
from .lowering import device_of, lowerings, meta_val, pointwise, register_lowering
from .reduction_lowering import make_reduction
from .view_lowering import permute, unsqueeze
from .virtualized import V

aten = torch.ops.aten


def realize_input(x) -> ir.IRNode:
    """A buffer or strided view of one, as a library call needs (copying when the view is not strided)."""
    if isinstance(x, TensorBox):
        storage = x.storage()
        if storage is not None and not storage.is_realized() and x.data is not storage:
            rv = None
        else:
            x.realize()
            buf = ir.unwrap_view_to_buffer(x)
            if isinstance(buf, ir.Buffer):
                return buf
            rv = ir.as_strided_layout(x)
        if rv is not None:
            return rv
        inner = ir.unwrap_view_to_buffer(x)
        if isinstance(inner, ir.ReinterpretView):
            return inner
        copy = pointwise([x], lambda v: v, x.get_dtype())
        copy.realize()
        return ir.unwrap_view_to_buffer(copy)
    return x


def make_extern(kernel: str, args: Sequence, kwargs=None, fallback: bool = False, template: bool = False) -> TensorBox:
    """An ``ExternKernel`` (counted as an extern call) whose output layout is what eager would produce;
    ``template``: a matmul the wrapper runs through a ``MatmulChoice`` (matmul_template.py)."""
    val = meta_val()
    inputs = [realize_input(a) if isinstance(a, ir.IRNode) else a for a in args]
    layout = ir.FixedLayout(val.device, val.dtype, [as_size(s) for s in val.shape],
                            [as_size(s) for s in val.stride()], 0)  # [Note: offsets]
    node = ir.ExternKernel(layout, kernel, [i for i in inputs if isinstance(i, ir.IRNode)],
                           kwargs=kwargs or {}, origins={V.graph.current_node})
    node.args, node.template = inputs, template
    node.name = V.graph.register_buffer(node)
    return TensorBox(ir.StorageBox(node))


# The matrix products a reduction can stand for: op -> whether its first argument is a bias added to the product.
PRODUCTS = {aten.mm.default: False, aten.bmm.default: False, aten.addmm.default: True, aten.baddbmm.default: True}


def _extern_lowering(op) -> callable:
    def lower(*args, **kwargs):
        if op is aten.addmm.default and not kwargs and prefers_unfused_addmm(*args):
            return unfused_addmm(*args)
        if op in PRODUCTS and not kwargs:
            bias, (a, b) = (args[0], args[1:]) if PRODUCTS[op] else (None, args)
            if (op is aten.mm.default and prefers_reduction_mm(a, b)) or is_small_mm(a, b):
                product = mm_as_reduction(a, b)
                return product if bias is None else lowerings[aten.add.Tensor](product, bias)
        template = op._opname in ("bmm", "mm") and not kwargs and \
            matmul_template.use_template(op._opname, *args, device_of(args))
        return make_extern(f"torch.ops.{op}", args, kwargs, template=template)
    return lower


# [Note: a bias added by its consumer]  ``addmm(bias, a, b)`` is one cuBLAS call that adds the bias in its
# epilogue.  When everything that reads its result is pointwise (the tutorial MoE's GELU after the first Linear,
# the routing weight's multiply after the second), Inductor lowers it as ``mm(a, b) + bias`` instead
# (``unfuse_bias_add_to_pointwise`` in torch/_inductor/fx_passes/post_grad.py, on GPUs): the add becomes part of
# the consumer's kernel, which reads the bias, and the extern is the plainer ``mm``.  Both sum the same fp32
# products and add the bias once; cuBLAS may pick another kernel for ``mm`` than for ``addmm``, so results can
# differ in the last bits, as between any two of its kernels.  On an H200 host ``torch.mm`` costs 12.9 us of host
# time against 16-18 for ``torch.addmm`` -- the MoE calls two per expert.  As upstream (since it measured the
# extra rounding compound in deep models), fp16/bf16 keep ``addmm``, and so do the CPU (where the extern is
# eager's own kernel and a kernel interpreted) and a result any non-pointwise op reads (a reduction, an output,
# a saved activation of a training graph).  The ``mm`` keeps cuBLAS: the skinny-matmul template's first-call
# timing (matmul_template.py) is not added to a lowering that did not have it.  ``config.unfused_addmm``:
# "gpu" (the default), "always" (the CPU too: tests), "never".


def prefers_unfused_addmm(bias, a, b) -> bool:
    """Should ``addmm(bias, a, b)`` lower as ``mm(a, b) + bias`` ([Note: a bias added by its consumer])?"""
    node, val = V.graph.current_node, meta_val()
    if config.unfused_addmm == "never" or node is None or val is None or not isinstance(bias, ir.IRNode) or \
            val.dtype not in (torch.float32, torch.float64) or \
            (device_of((bias, a, b)).type != "cuda" and config.unfused_addmm != "always"):
        return False
    return bool(node.users) and all(_pointwise_use(user) for user in node.users)


def _pointwise_use(node: torch.fx.Node) -> bool:
    """Does ``node`` read its input elementwise -- a pointwise op, or a view all of whose users do?"""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if node.target.is_view:
        return all(_pointwise_use(user) for user in node.users)
    return torch.Tag.pointwise in node.target.tags


def unfused_addmm(bias, a, b) -> TensorBox:
    if prefers_reduction_mm(a, b) or is_small_mm(a, b):
        product = mm_as_reduction(a, b)
    else:
        product = make_extern(f"torch.ops.{aten.mm.default}", [a, b])  # addmm's result layout: a contiguous (m, n)
    return lowerings[aten.add.Tensor](product, bias)


# [Note: a skinny mm as a reduction]  ``mm(a, b)`` with a few rows -- each expert of the tutorial MoE multiplies its
# 1-4 samples by 16 MB of weights, twice -- reads ``b`` once and does almost no arithmetic, and at these sizes its
# cost is the host's: a cuBLAS call costs 10-18 us of Python and C++ before the GPU sees it, and the ops around it
# (the rows' gather, the bias and GELU after it) are launches of their own. Written as what it computes,
# ``out[m, n] = sum_k a[m, k] * b[k, n]``, it is a reduction over K of a pointwise product: one of our reduction
# kernels, into which the rows' producer fuses (``x[rows]`` is read through the index, never materialised). The
# reduction reads each ``a[m, k]`` once per column ``n``: a gather is cheaper to redo than to store, but GELU's
# ``erf`` redone 1024 times per element took the second matmul from 12 to 26 us on an H200, so an ``a`` of more
# than ``config.skinny_mm_inline_ops`` ops is realised first -- and, computed over the first reduction's own
# ``[m, n]``, it joins that kernel as its epilogue (the first matmul's sums never leave registers). The expert's
# two cuBLAS calls and four kernels become three kernels: 60 us of host time per call against 101, 34 us of GPU
# time against 15 (the first kernel reads ``b`` once per row of ``a``, from L2 after the first; docs/benchmarks.md,
# thirty-second session). The host time saved repays the GPU's only for a few rows: at most
# ``config.skinny_mm_max_rows``. Its kernels take the block sizes of the rule, untimed (``hint='skinny_mm'``):
# timing the candidates of every expert graph's reductions took the tutorial MoE's first call from 4.0 to 6.6 s.
# Upstream's Inductor writes ``mm`` this way for one row (a matrix-vector product: ``mm`` in
# torch/_inductor/decomposition.py, under coordinate-descent tuning), and an opt-in pass does it for other
# memory-bound shapes (fx_passes/decompose_mem_bound_mm.py). The sum is taken in another order than cuBLAS's, so
# results differ in the last bits, as between two of cuBLAS's kernels. A symbolic row count qualifies only where
# the ShapeEnv already bounds it -- the tutorial's ``if len(expert_samples) > self.expert_capacity:`` leaves
# ``s <= 4`` among its guards -- never by its example value, which would need a guard of our own and a recompile
# whenever more rows come, where ``dynamic=True`` promises one graph for every size (upstream decides with
# ``statically_known_true`` too). fp32/fp64 on the GPU (``config.skinny_mm``: "gpu", "always" for the CPU's tests,
# "never"); fp16/bf16 keep cuBLAS, whose products are exact and sums fp32.


def prefers_reduction_mm(a, b) -> bool:
    """Should ``mm(a, b)`` lower as a reduction ([Note: a skinny mm as a reduction])?"""
    return _may_lower_as_reduction(config.skinny_mm, a, b) and \
        _rows_at_most(a.get_size()[0], config.skinny_mm_max_rows)


def _may_lower_as_reduction(setting: str, a, b) -> bool:
    """What both matmul-as-reduction rules ask first: the switch (``"gpu"``, ``"always"``, ``"never"``) allows it on
    this device, and both operands are fp32 (or both fp64) IR nodes."""
    if setting == "never" or not isinstance(a, ir.IRNode) or not isinstance(b, ir.IRNode):
        return False
    if device_of((a, b)).type != "cuda" and setting != "always":
        return False
    return a.get_dtype() in (torch.float32, torch.float64) and b.get_dtype() == a.get_dtype()


# [Note: a small matmul as a reduction]  The same lowering pays for any product small enough, whatever its row
# count.  The compile-friendly MoE routes with three: the gate's ``addmm`` (32 x 1024 by 1024 x 32, read by the
# softmax) and the dispatch and combine ``einsum``s (a ``bmm`` of 128 x 32 by 32 x 1024, and of 32 x 128 by
# 128 x 1024).  Each is a few microseconds of GPU work, and each cuBLAS call cost 35-60 us of host time on an
# H200 host (``addmm`` the most), where one of our launches costs 5-7 -- all of it before the expert matmuls, the
# forward's only large GPU work, could start.  So an fp32/fp64 ``mm``/``bmm`` of at most
# ``config.small_mm_max_products`` products (batch x rows x columns x K: 2^22, which the three above reach and a
# 256-sample batch's do not) is a reduction too, and ``addmm``/``baddbmm`` are that reduction plus their bias,
# added by whatever kernel reads the sum.  Its kernel takes one config, untimed, as the skinny mm's (``skinny_mm``;
# ``outer_mm``, the column reduction's block sizes, where neither operand is contiguous along K): timing the
# combine's six candidates cost the friendly MoE's first call half a second.  On an H200 the
# friendly forward's host time went from 0.212 to 0.152 ms and its GPU time from 0.302 to 0.278 (the gate's
# ``sgemm`` took 20 us, its reduction takes 2; docs/benchmarks.md, thirty-seventh session).  Static sizes only (a
# symbolic size has no bound on the product without a guard); fp16/bf16 keep cuBLAS, as for the skinny mm.
# Upstream's Inductor keeps cuBLAS for these (its opt-in ``decompose_mem_bound_mm`` pass decomposes some into
# pointwise products and a sum).  ``config.small_mm``: "gpu" (the default), "always" (the CPU too: tests), "never".
def is_small_mm(a, b) -> bool:
    """Should ``mm``/``bmm(a, b)`` lower as a reduction for its size ([Note: a small matmul as a reduction])?"""
    if not _may_lower_as_reduction(config.small_mm, a, b):
        return False
    sizes = [*a.get_size(), b.get_size()[-1]]
    if any(is_symbolic(s) for s in sizes):
        return False
    return math.prod(int(s) for s in sizes) <= config.small_mm_max_products


def _rows_at_most(m, limit: int) -> bool:
    """``m <= limit`` for every size the graph serves: a static ``m``, or a symbolic one the ShapeEnv bounds so
    (never guarded here: [Note: a skinny mm as a reduction])."""
    if not is_symbolic(m):
        return m <= limit
    try:
        return statically_true(sympy.Le(m, limit))
    except TypeError:  # undecided
        return False


def mm_as_reduction(a, b) -> TensorBox:
    """``sum_k a[m, k] * b[k, n]``: the ``[m, n, k]`` products of ``a[:, None, :]`` and ``b.T[None]``, summed over
    the last dim (contiguous in ``k`` for an ``nn.Linear`` weight's transpose, so each output reads a row of it);
    for ``bmm``, the same within each batch (``[batch, m, n, k]``).  The reduction reads each ``a[m, k]`` once per
    column: an ``a`` that is costly to compute is computed once, into a buffer, first ([Note: a skinny mm as a
    reduction])."""
    storage = a.storage() if isinstance(a, TensorBox) else None
    if storage is not None and isinstance(storage.data, ir.Pointwise) and \
            extract_read_writes(storage.data).op_count > config.skinny_mm_inline_ops:
        a.realize()
    batch = len(a.get_size()) - 2  # 0 for mm, 1 for bmm
    b_t = permute(b, [*range(batch), batch + 1, batch])
    products = lowerings[aten.mul.Tensor](unsqueeze(a, batch + 1), unsqueeze(b_t, batch))
    result = make_reduction(products, [batch + 2], False, "sum", a.get_dtype())
    reduction = result.storage().data if result.storage() is not None else None
    if isinstance(reduction, ir.ComputedBuffer) and isinstance(reduction.data, Reduction):
        reduction.data.skinny_mm = True  # its kernel takes one config, untimed (codegen/tiling.reduction_hint)
    return result


for _op in (aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
            aten.convolution.default, aten.mv.default, aten.addmv.default, aten.dot.default):
    register_lowering(_op)(_extern_lowering(_op))
