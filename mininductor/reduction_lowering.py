"""Reduction lowerings (sum, mean, prod, amax/amin, argmax/argmin, var/std, any/all); the matmuls are in
``extern_lowering.py``.

A reduction over ``dims`` becomes a ``Reduction`` whose ``ranges`` are the kept dims and ``reduction_ranges``
the reduced ones; ``inner_fn(index, rindex)`` interleaves them back into the input's index. Reductions are always
realised (a buffer), so their consumers read a value, not a loop.

``var`` and ``var_mean`` (and so ``std`` and ``layer_norm``, whose decompositions call them) are a Welford
reduction, as in Inductor's ``var_mean_welford_``: ``WelfordReduction`` buffers for the mean and ``m2`` (the sum of
squared deviations), then ``var = m2 / max(0, n - correction)``. Codegen decides how to compute it
(``codegen/triton_reduction.py``): a looped kernel keeps a running mean, ``m2`` and weight per lane, so a
``layer_norm`` walks its row twice (statistics, then normalise) instead of three times (sum, squared deviations,
normalise); a persistent kernel, whose row is in registers anyway, takes two sums. ``config.welford_looped=False``
and split reductions (few long rows) use the two-pass lowering -- ``mean``, then ``sum((x - mean)**2)`` -- instead.
Mirrors the reduction part of Inductor's ``lowering.py``.
"""
from __future__ import annotations

import torch

from . import config, ir
from .dependencies import extract_read_writes
from .indexing import is_symbolic, linear_stride, product, split_flat, sym
from .ir import Reduction, TensorBox
from .lowering import device_of, origins_of, out_dtype, pointwise, register_lowering
from .view_lowering import unsqueeze
from .virtualized import V, ops

aten, prims = torch.ops.aten, torch.ops.prims


def _norm_dims(x, dims) -> list[int]:
    nd = len(x.get_size())
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(nd))
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    return sorted({d % max(nd, 1) for d in dims}) if nd else []


def make_reduction(x, dims, keepdim: bool, reduction_type: str, dtype: torch.dtype,
                   src_dtype: torch.dtype | None = None) -> TensorBox:
    """Reduce ``x`` over ``dims``. ``src_dtype`` is what values are cast to before accumulating."""
    size = list(x.get_size())
    dims = _norm_dims(x, dims)
    kept = [d for d in range(len(size)) if d not in dims]
    ranges, rranges = [size[d] for d in kept], [size[d] for d in dims]
    src_dtype = src_dtype or (dtype if reduction_type not in ("argmax", "argmin", "any") else x.get_dtype())
    inner_fn = _reduction_inner_fn(x, kept, dims, src_dtype)
    if product(rranges) == 0 and reduction_type in ("sum", "prod", "any", "all"):
        empty = {"sum": 0, "prod": 1, "any": False, "all": True}[reduction_type]  # eager's empty reductions
        result = TensorBox.create(ir.Pointwise(x.get_device(), dtype, lambda index: ops.constant(empty, dtype),
                                               ranges))
    elif product(rranges) == 1 and reduction_type in ("argmax", "argmin"):  # one candidate: its index, 0
        result = TensorBox.create(ir.Pointwise(x.get_device(), dtype, lambda index: ops.constant(0, dtype), ranges))
    elif product(rranges) == 1:
        body = lambda index: ops.to_dtype(_plus_zero(inner_fn(index, [0] * len(rranges)), reduction_type,
                                                     src_dtype), dtype)
        result = TensorBox.create(ir.Pointwise(x.get_device(), dtype, body, ranges, origins=origins_of([x])))
    elif _should_split(ranges, rranges, reduction_type):
        result = _split_reduction(x, inner_fn, ranges, rranges, reduction_type, dtype, src_dtype)
    elif splits := _outer_splits(x, inner_fn, ranges, rranges, reduction_type, dtype, src_dtype):
        result = _split_outer_reduction(x, inner_fn, ranges, rranges[0], splits, reduction_type, dtype, src_dtype)
    else:
        node = Reduction(x.get_device(), dtype, inner_fn, ranges, rranges, reduction_type, src_dtype,
                         origins=origins_of([x]))
        result = TensorBox.create(node)
        result.realize()
    if keepdim:
        for d in dims:
            result = unsqueeze(result, d)
    return result


def _plus_zero(value, reduction_type: str, dtype: torch.dtype):
    """A float sum of one element, plus ``+0.0``.

    [Note: a sum of negative zeros]  Eager's sums start from ``+0.0``, so the sum of ``-0.0`` alone, or of
    several, is ``+0.0``; the sign shows after a division (``1 / x[:, :1].sum(1)`` is ``+inf``).  A row of one
    element reduces to a copy of it, and a block of ``-0.0``s that fills its lanes sums to ``-0.0`` (no padding
    lane holds the ``+0.0`` identity): ``-inf`` (lowering fuzz, seed 58227).  Adding ``+0.0`` gives eager's zero
    and leaves every other value, NaN included, as it is."""
    if reduction_type != "sum" or not dtype.is_floating_point:
        return value
    return ops.add(value, ops.constant(0.0, dtype))


def _reduction_inner_fn(x, kept: list[int], dims: list[int], src_dtype: torch.dtype):
    """``inner_fn(index, rindex)``: ``x`` at the index interleaved from the kept and reduced dims, cast to the
    dtype the reduction accumulates in."""
    loader, x_dtype, nd = x.make_loader(), x.get_dtype(), len(x.get_size())

    def inner_fn(index, rindex):
        full = [None] * nd
        for d, v in zip(kept, index):
            full[d] = v
        for d, v in zip(dims, rindex):
            full[d] = v
        value = loader(full)
        return ops.to_dtype(value, src_dtype) if x_dtype != src_dtype else value
    return inner_fn


def _should_split(ranges, rranges, reduction_type) -> bool:
    """A few outputs each reducing a huge row would run on a few programs (one SM for ``x.sum()``)."""
    if any(is_symbolic(s) for s in [*ranges, *rranges]):
        return False  # how to split depends on the size; one looped reduction is right for every size
    return (reduction_type in _SPLIT_IDENTITY and product(ranges) <= config.split_reduction_max_outputs
            and product(rranges) >= config.split_reduction_threshold)


_SPLIT_IDENTITY = {"sum": 0, "prod": 1, "any": False, "all": True, "max": float("-inf"), "min": float("inf")}


def _outer_splits(x, inner_fn, ranges, rranges, reduction_type, dtype, src_dtype) -> int:
    """How many row blocks a column reduction (an "outer" one) is split into; 0: not split.

    [Note: split column reductions]  ``x.sum(0)`` of an ``8192 x 8192`` matrix reads rows of contiguous columns:
    a program takes a few columns and walks all 8192 rows, so there are only ``8192 / XBLOCK`` programs -- two
    waves of an H200's 132 SMs -- and too few loads in flight (82% of copy bandwidth on an H200). Split over row
    blocks it has ``splits`` times more programs: partial sums ``[splits, columns]``, then a small column sum of
    those. Blocks of 2048 rows were the fastest (4 of them for 8192 rows: 75.8 µs, against 77.7 unsplit and
    77.0-77.2 with 2, 8 or 16 blocks; torch.compile 76.7; docs/benchmarks.md). Inductor splits for the same
    reason when the outputs are fewer than ``2 * 32 * SMs`` (``Reduction.num_splits``); its threshold needs the
    SM count, ours is a constant.
    """
    if (reduction_type not in _SPLIT_IDENTITY or len(rranges) != 1 or not ranges
            or any(is_symbolic(s) for s in [*ranges, *rranges])):
        return 0
    rows, outputs = rranges[0], product(ranges)
    if rows < config.split_outer_reduction_min_rows or outputs > config.split_outer_reduction_max_outputs:
        return 0
    probe = Reduction(x.get_device(), dtype, inner_fn, ranges, rranges, reduction_type, src_dtype)
    reads = [dep.index for dep in extract_read_writes(probe).reads]
    r0, last = sym("r0"), sym(f"i{len(ranges) - 1}")
    strides = [(linear_stride(e, r0), linear_stride(e, last)) for e in reads]
    if not reads or not all(r is not None and r > 1 for r, _ in strides) or not any(c == 1 for _, c in strides):
        return 0  # not a column reduction: some read is contiguous (or gathered) along the rows
    splits = min(32, rows // config.split_outer_reduction_block_rows)
    return splits if splits >= 2 else 0


def _split_outer_reduction(x, inner_fn, ranges, rows, splits, reduction_type, dtype, src_dtype) -> TensorBox:
    """[Note: split column reductions]: ``splits`` partial reductions of ``part`` rows each, stored
    ``[splits, *ranges]`` -- the split dim outermost, so a program's lanes still read contiguous columns --
    then the reduction of the partials over that first dim."""
    part = (rows + splits - 1) // splits
    identity = _identity(reduction_type, src_dtype)

    def partial_fn(index, rindex):
        row = index[0] * part + rindex[0]
        if part * splits == rows:  # the blocks tile the rows exactly: no row past the end to mask
            return inner_fn(index[1:], [row])
        inside = ops.lt(ops.index_expr(row, torch.int64), ops.constant(rows, torch.int64))
        return ops.masked(inside, lambda: inner_fn(index[1:], [row]), identity)

    partial = TensorBox.create(Reduction(x.get_device(), dtype, partial_fn, [splits, *ranges], [part],
                                         reduction_type, src_dtype, origins=origins_of([x])))
    partial.realize()
    load = partial.make_loader()
    final = Reduction(x.get_device(), dtype, lambda index, rindex: load([rindex[0], *index]), ranges, [splits],
                      reduction_type, dtype, origins=origins_of([x]))
    result = TensorBox.create(final)
    result.realize()
    return result


def _identity(reduction_type: str, src_dtype: torch.dtype):
    """The value a masked-off element of a split contributes: 0 for sums, the dtype's lowest value for max..."""
    identity = _SPLIT_IDENTITY[reduction_type]
    if not src_dtype.is_floating_point and reduction_type in ("max", "min"):
        info = torch.iinfo(src_dtype) if src_dtype != torch.bool else None
        identity = (info.min if reduction_type == "max" else info.max) if info else reduction_type == "min"
    return identity


def _split_reduction(x, inner_fn, ranges, rranges, reduction_type, dtype, src_dtype) -> TensorBox:
    """Inductor's split reduction: ``S`` partial reductions of ``P`` elements each (many programs), then one
    small reduction of the ``S`` partials. The flat reduction index ``s*P + p`` is split back over the reduced
    dims; the tail past the last element is masked to the identity."""
    total = product(rranges)
    splits = min(512, max(2, total // 4096))
    part = (total + splits - 1) // splits
    identity = _identity(reduction_type, src_dtype)

    def partial_fn(index, rindex):
        flat = index[-1] * part + rindex[0]
        rvars = split_flat(flat, rranges) if len(rranges) > 1 else [flat]
        inside = ops.lt(ops.index_expr(flat, torch.int64), ops.constant(total, torch.int64))
        return ops.masked(inside, lambda: inner_fn(index[:-1], rvars), identity)

    partial = TensorBox.create(Reduction(x.get_device(), dtype, partial_fn, [*ranges, splits], [part],
                                         reduction_type, src_dtype, origins=origins_of([x])))
    partial.realize()
    load = partial.make_loader()
    final = Reduction(x.get_device(), dtype, lambda index, rindex: load([*index, rindex[0]]), ranges, [splits],
                      reduction_type, dtype, origins=origins_of([x]))
    result = TensorBox.create(final)
    result.realize()
    return result


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.int64
    return dtype


@register_lowering(aten.sum, prims.sum)
def sum_(x, dims=None, keepdim=False, *, dtype=None, output_dtype=None):
    out = out_dtype(default=dtype or output_dtype or _acc_dtype(x.get_dtype()))
    result = make_reduction(x, dims, keepdim, "sum", _acc_dtype(out), _acc_dtype(out))
    return _cast(result, out)


def _cast(x, dtype):
    if x.get_dtype() == dtype:
        return x
    return pointwise([x], lambda v: ops.to_dtype(v, dtype), dtype, cast_inputs=False)


@register_lowering(aten.mean)
def mean(x, dims=None, keepdim=False, *, dtype=None):
    out = out_dtype(default=dtype or x.get_dtype())
    acc = _acc_dtype(out)
    n = product(x.get_size()[d] for d in _norm_dims(x, dims))
    total = make_reduction(x, dims, keepdim, "sum", acc, acc)
    if device_of([x]).type == "cuda":  # eager's CUDA mean multiplies by 1 / n (its CPU mean divides by n): an ulp
        # apart in about a fifth of the results, which a floor or a rounding to fp16 after it can show
        scale = lambda v: ops.mul(v, ops.truediv(ops.constant(1.0, acc), _size_value(n, acc)))
        return pointwise([total], scale, out, acc, cast_inputs=False)
    return pointwise([total], lambda v: ops.truediv(v, _size_value(n, acc)), out, acc, cast_inputs=False)


@register_lowering(aten.prod)
def prod(x, dims=None, keepdim=False, *, dtype=None):
    out = out_dtype(default=dtype or _acc_dtype(x.get_dtype()))
    return _cast(make_reduction(x, dims, keepdim, "prod", _acc_dtype(out), _acc_dtype(out)), out)


def _minmax(kind: str):
    def lowering(x, dims=None, keepdim=False):
        dtype = x.get_dtype()
        acc = _acc_dtype(dtype) if dtype.is_floating_point else dtype
        return _cast(make_reduction(x, dims, keepdim, kind, acc, acc), dtype)
    return lowering


register_lowering(aten.amax, prims.amax)(_minmax("max"))
register_lowering(aten.amin, prims.amin)(_minmax("min"))


@register_lowering(aten.max.default, aten.min.default)
def max_all(x):
    kind = "max" if V.graph.current_node.target is aten.max.default else "min"
    return _minmax(kind)(x)


def _arg(kind: str):
    def lowering(x, dim=None, keepdim=False):
        if dim is None:  # over the flattened tensor; keepdim gives all-ones dims
            from .view_lowering import reshape
            nd = len(x.get_size())
            result = make_reduction(reshape(x, [x.get_numel()]), [0], False, kind, torch.int64, _acc_dtype_val(x))
            return reshape(result, [1] * nd) if keepdim else result
        return make_reduction(x, [dim], keepdim, kind, torch.int64, _acc_dtype_val(x))
    return lowering


def _acc_dtype_val(x):
    dt = x.get_dtype()
    return torch.float32 if dt in (torch.float16, torch.bfloat16) else dt


register_lowering(aten.argmax)(_arg("argmax"))
register_lowering(aten.argmin)(_arg("argmin"))


@register_lowering(aten.max.dim, aten.min.dim)
def max_dim(x, dim, keepdim=False):
    is_max = V.graph.current_node.target is aten.max.dim
    values = _minmax("max" if is_max else "min")(x, [dim], keepdim)
    indices = _arg("argmax" if is_max else "argmin")(x, dim, keepdim)
    return [values, indices]


def _any_all(kind: str):
    def lowering(x, dims=None, keepdim=False):
        as_bool = pointwise([x], lambda v: ops.ne(v, ops.constant(0, x.get_dtype())), torch.bool,
                            cast_inputs=False) if x.get_dtype() != torch.bool else x
        result = make_reduction(as_bool, dims, keepdim, kind, torch.bool, torch.bool)
        return _cast(result, out_dtype(default=torch.bool))  # uint8 in, uint8 out (eager's legacy rule)
    return lowering


register_lowering(aten.any)(_any_all("any"))
register_lowering(aten.all)(_any_all("all"))


@register_lowering(aten.cumsum)
def cumsum(x, dim, *, dtype=None):
    """A ``Scan``: ``tl.cumsum`` over each row (plus a running carry when rows are walked in chunks)."""
    return _scan(x, dim, dtype, "sum")


@register_lowering(aten.cumprod)
def cumprod(x, dim, *, dtype=None):
    """A ``Scan``: ``tl.cumprod`` over each row (times the product of the chunks before, when looped)."""
    return _scan(x, dim, dtype, "prod")


def _scan(x, dim, dtype, scan_type: str):
    out = out_dtype(default=dtype or _acc_dtype(x.get_dtype()))
    acc = _acc_dtype(out)
    size = list(x.get_size())
    loader, x_dtype = x.make_loader(), x.get_dtype()

    def first_value(value):
        # [Note: cumsum starts at +0.0]  Eager's running sum starts from 0, so a leading -0.0 comes out as
        # 0 + -0.0 = +0.0, where a scan would return it as it is. Adding +0.0 changes nothing else.  (A running
        # product starts from 1, and 1 * -0.0 is -0.0: nothing to do.)
        value = ops.to_dtype(value, acc) if x_dtype != acc else value
        if scan_type == "sum" and acc.is_floating_point:
            return ops.add(value, ops.constant(0.0, acc))
        return value

    if not size:  # eager copies a 0-d tensor, -0.0 included
        return _cast(x, out)
    if not is_symbolic(size[dim % len(size)]) and size[dim % len(size)] <= 1:  # a symbolic length: the scan
        # kernel is right for every length, 0 and 1 included
        return _cast(pointwise([x], first_value, acc, cast_inputs=False), out)
    dim = dim % len(size)
    kept = [d for d in range(len(size)) if d != dim]

    def inner_fn(index, rindex):
        full = list(index)
        full.insert(dim, rindex[0])
        return first_value(loader(full))

    node = ir.Scan(x.get_device(), acc, inner_fn, [size[d] for d in kept], size[dim], dim, size,
                   origins=origins_of([x]), scan_type=scan_type)
    result = TensorBox.create(node)
    result.realize()
    return _cast(result, out)


@register_lowering(prims.var)
def var(x, dims, correction=1, *, output_dtype=None):
    """``m2 / (n - correction)``, with ``m2 = sum((x - mean)**2)`` from a Welford reduction (or two sums)."""
    return _var_mean(x, dims, correction, keepdim=False, return_mean=False, output_dtype=output_dtype)


@register_lowering(aten.var_mean)
def var_mean(x, dims=None, *, correction=1, keepdim=False):
    """Kept whole by the decomposition table (layer_norm's decomposition calls it): one Welford reduction gives
    both outputs, as Inductor's ``var_mean_welford_``."""
    return _var_mean(x, dims, 1 if correction is None else correction, keepdim, return_mean=True)


def _var_mean(x, dims, correction, keepdim: bool, return_mean: bool, output_dtype=None):
    out = out_dtype(default=output_dtype or x.get_dtype())
    acc = _acc_dtype(out)
    dims = _norm_dims(x, dims)
    n = product(x.get_size()[d] for d in dims)
    if not is_symbolic(n) and n == 1:
        v = _keep(_var_of_one(x, dims, correction, out, acc), dims, keepdim)
        return [v, mean(x, dims, keepdim)] if return_mean else v
    if not _use_welford(x, dims):
        v = _keep(_two_pass_var(x, dims, correction, out, acc), dims, keepdim)
        return [v, mean(x, dims, keepdim)] if return_mean else v
    boxes = welford_reduction(x, dims, acc, outputs=(0, 1) if return_mean else (1,))
    scale = lambda m2: ops.truediv(m2, _var_denominator(n, correction, acc))
    v = _keep(pointwise([boxes[-1]], scale, out, acc, cast_inputs=False), dims, keepdim)
    return [v, _keep(_cast(boxes[0], out), dims, keepdim)] if return_mean else v


def _use_welford(x, dims) -> bool:
    """Welford (``config.welford_looped``) unless the reduction is trivial (a row of 0 or 1: no loop) or would be
    split: a split var keeps two passes, whose partials are plain sums (Inductor combines Welford partials with
    ``welford_combine``, which we do not have)."""
    size = x.get_size()
    ranges, rranges = [s for d, s in enumerate(size) if d not in dims], [size[d] for d in dims]
    if not config.welford_looped:
        return False
    if not any(is_symbolic(s) for s in rranges) and product(rranges) <= 1:
        return False
    return not _should_split(ranges, rranges, "sum")


def welford_reduction(x, dims, acc: torch.dtype, outputs=(0, 1)) -> list[TensorBox]:
    """The ``outputs`` (0 mean, 1 m2, 2 weight) of a Welford reduction of ``x`` over ``dims``, each a realised
    ``WelfordReduction`` buffer. They run the same ``ops.reduction(..., "welford_reduce", ...)``, which codegen
    computes once per kernel: the outputs share one loop (Inductor's ``WelfordReduction.create``)."""
    size = list(x.get_size())
    kept = [d for d in range(len(size)) if d not in dims]
    inner_fn = _reduction_inner_fn(x, kept, dims, acc)
    boxes = []
    for k in outputs:
        box = TensorBox.create(ir.WelfordReduction(x.get_device(), acc, inner_fn, [size[d] for d in kept],
                                                   [size[d] for d in dims], acc, k, origins=origins_of([x])))
        box.realize()
        boxes.append(box)
    return boxes


def _var_of_one(x, dims, correction, out, acc):
    """The variance of rows of one element: ``(v - v)**2 / max(0, 1 - correction)``, one value read once.

    [Note: a variance of one element]  Eager's ``m2`` of one element is exactly 0 (inf - inf is NaN), so
    ``std(x, 0)`` of one row is 0 / 0, NaN. The two passes computed ``x - mean`` with ``x`` evaluated twice, once
    inside the mean and once beside it; compiled for the GPU, the two copies of a fused ``hardsigmoid`` were
    contracted into FMAs differently, an ulp apart, so ``m2`` was 1e-33 and the result inf (GPU lowering fuzz
    --zero --matmul, seed 5504602). Read once, ``v - v`` is exactly 0 on every device."""
    value = mean(x, dims, False, dtype=acc)  # a sum of one element, over 1: the element itself
    return pointwise([value], lambda v: ops.truediv(ops.mul(ops.sub(v, v), ops.sub(v, v)),
                                                    _var_denominator(1, correction, acc)), out, acc)


def _two_pass_var(x, dims, correction, out, acc):
    """``sum((x - mean)**2) / (n - correction)`` with the mean from a first sum: two reductions, so a looped
    kernel reads the row once more than Welford (``config.welford_looped=False``, split reductions)."""
    n = product(x.get_size()[d] for d in dims)
    total = make_reduction(x, dims, True, "sum", acc, acc)
    mean_ = pointwise([total], lambda v: ops.truediv(v, _size_value(n, acc)), acc)
    centered = pointwise([x, mean_], lambda a, m: ops.mul(ops.sub(a, m), ops.sub(a, m)), acc, acc)
    sq = make_reduction(centered, dims, False, "sum", acc, acc)
    return pointwise([sq], lambda v: ops.truediv(v, _var_denominator(n, correction, acc)), out, acc,
                     cast_inputs=False)


def _var_denominator(n, correction, dtype):
    """Eager divides by ``max(0, n - correction)``: a row no longer than ``correction`` gives inf or NaN."""
    if not is_symbolic(n):
        return ops.constant(max(n - correction, 0), dtype)
    if correction == 0:
        return _size_value(n, dtype)
    diff = ops.sub(_size_value(n, dtype), ops.constant(correction, dtype))
    return ops.maximum(diff, ops.constant(0, dtype))


def _size_value(n, dtype):
    """A reduction's element count as an ops value: a constant, or the size symbol's value at run time."""
    if is_symbolic(n):
        return ops.to_dtype(ops.index_expr(n, torch.int64), dtype)
    return ops.constant(n, dtype)


def _keep(x, dims, keepdim: bool):
    if keepdim:
        for d in dims:
            x = unsqueeze(x, d)
    return x
