"""Max and average pooling (``max_pool2d_with_indices``, ``avg_pool2d``, and the adaptive pools) and their backwards:
pointwise loops whose body unrolls the window.

Each output element ``(..., oh, ow)`` reads the ``kh * kw`` input elements of its window, in row-major order,
at ``h = oh * stride - padding + i * dilation`` (and the same for ``w``); a position outside the input (padding,
or past the end under ``ceil_mode``) is masked. For the maximum, like eager's CPU and CUDA kernels, a value wins
when it is greater than the running maximum or is NaN (so a NaN propagates, and the last NaN's index is kept),
and the index starts at the window's first valid position (a window of ``-inf`` returns it); the values and the
indices (``h * W + w``, int64) are two ``Pointwise`` nodes with the same body, which the scheduler fuses into one
kernel. The average divides the window's sum by eager's divisor: ``divisor_override``, else the window clipped
to the padded input (``count_include_pad``) or to the input itself; a window with no input element is 0. A window
of more than 25 elements falls back to ATen (as upstream, whose lowerings in ``lowering.py`` unroll the window the
same way).

The backwards are pointwise loops over the *input*: element ``(h, w)`` gathers from every output element whose
window can hold it -- along each dim, ``o = (h + padding) // stride - i`` for the first ``ceil(reach / stride)``
values of ``i`` (``reach``: the window's span, ``(k - 1) * dilation + 1``), masked where ``o`` is outside the output.
The maximum's takes ``grad[o]`` where the saved index is ``h * W + w``; the average's takes ``grad[o] / divisor(o)``
where ``o``'s window covers ``h``. More than 25 candidates per element fall back to ATen, as upstream's lowerings
of the same names do.

The adaptive pools use the same loops with eager's adaptive windows (see "adaptive pooling" below); their window
length varies with the output position, so the longest is unrolled and masked. A window too long to unroll, or
over a symbolic input size (its length is not a number), is a masked ``Reduction`` instead: a ``sum`` for the
average, a ``max`` and a ``min`` over per-position keys (for eager's index) for the maximum.
"""
from __future__ import annotations

import math

import sympy
import torch

from .indexing import FloorDiv, is_symbolic, known_true
from .ir import Pointwise, Reduction, TensorBox
from .lowering import meta_val, origins_of, register_lowering
from .pad_lowering import _in_range, _masked_load, _size_value
from .virtualized import ops

aten = torch.ops.aten

MAX_WINDOW = 25  # elements unrolled per output element; a larger window runs in ATen


def _pair(v, default=None) -> list[int]:
    v = list(v) if isinstance(v, (list, tuple)) and len(v) else [v] if isinstance(v, int) else default
    return v * 2 if len(v) == 1 else v


def _check_window(x, kernel) -> None:
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError("pooling of an integer tensor (ATen's integer rules: no -inf, truncating average)")
    if math.prod(kernel) > MAX_WINDOW:
        raise NotImplementedError(f"a pooling window of {math.prod(kernel)} elements (more than {MAX_WINDOW})")


def _max_over(loader, outer, rows, cols, in_w, dtype):
    """The running ``(value, index)`` over the window ``rows x cols`` (lists of ``(position, valid)``), in
    row-major order, with eager's rules (see the docstring); the index is ``h * W + w``, int64."""
    best, best_at, seen = ops.constant(float("-inf"), dtype), ops.constant(-1, torch.int64), None
    for h, valid_h in rows:
        for w, valid_w in cols:
            valid = ops.logical_and(valid_h, valid_w)
            value = _masked_load(loader, [*outer, h, w], valid, dtype, dtype, float("-inf"))
            at = ops.index_expr(h * in_w + w, torch.int64)
            wins = ops.logical_and(valid, ops.logical_or(ops.gt(value, best), ops.isnan(value)))
            first = valid if seen is None else ops.logical_and(valid, ops.logical_not(seen))
            best = ops.where(wins, value, best)
            best_at = ops.where(ops.logical_or(wins, first), at, best_at)
            seen = valid if seen is None else ops.logical_or(seen, valid)
    return best, best_at


def _sum_over(loader, outer, rows, cols, dtype):
    """The sum of the window ``rows x cols`` (lists of ``(position, valid)``; invalid positions add 0)."""
    total = ops.constant(0, dtype)
    for h, valid_h in rows:
        for w, valid_w in cols:
            valid = ops.logical_and(valid_h, valid_w)
            total = ops.add(total, _masked_load(loader, [*outer, h, w], valid, dtype, dtype))
    return total


def _strided_window(o, k, s, p, d, n) -> list:
    """Along one dim, the window of output position ``o``: ``(o * s - p + i * d, inside the input)``."""
    return [(o * s - p + i * d, _in_range(o * s - p + i * d, 0, n)) for i in range(k)]


def _values_and_indices(x, size, window) -> tuple[TensorBox, TensorBox]:
    """Two ``Pointwise`` nodes with one body (``window(index) -> (value, index)``), fused into one kernel."""
    device, dtype, origins = x.get_device(), x.get_dtype(), origins_of([x])
    out = TensorBox.create(Pointwise(device, dtype, lambda index: window(index)[0], size, origins=origins))
    at = TensorBox.create(Pointwise(device, torch.int64, lambda index: window(index)[1], size, origins=origins))
    return out, at


@register_lowering(aten.max_pool2d_with_indices)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel, padding, dilation = _pair(kernel_size), _pair(padding), _pair(dilation)
    stride = _pair(stride, kernel)
    _check_window(x, kernel)
    values, _ = meta_val()  # the output size, ceil_mode included
    in_h, in_w = x.get_size()[-2:]
    dims = list(zip(kernel, stride, padding, dilation, (in_h, in_w)))  # (k, s, p, d, n) along h, then w
    loader = x.make_loader()

    def window(index):
        *outer, oh, ow = index
        return _max_over(loader, outer, _strided_window(oh, *dims[0]), _strided_window(ow, *dims[1]), in_w,
                         x.get_dtype())
    return _values_and_indices(x, list(values.shape), window)


def _avg_divisor(kernel, stride, padding, in_h, in_w, count_include_pad, divisor_override):
    """Eager's divisor of output element ``(oh, ow)`` as a function: ``divisor_override``, else the window
    ``[o * s - p, o * s - p + k)`` cut at the padded input's end (``count_include_pad``) or also at the input's;
    with a flag that is false where the window holds no input element (eager writes 0 there)."""
    def extent(o, k, s, p, n):
        lo = ops.index_expr(o * s - p, torch.int64)
        hi = ops.minimum(ops.add(lo, ops.constant(k, torch.int64)), ops.add(_size_value(n), ops.constant(p, torch.int64)))
        inside = ops.sub(ops.minimum(hi, _size_value(n)), ops.maximum(lo, ops.constant(0, torch.int64)))
        return ops.sub(hi, lo), inside

    def divisor(oh, ow):
        padded_h, rows = extent(oh, kernel[0], stride[0], padding[0], in_h)
        padded_w, cols = extent(ow, kernel[1], stride[1], padding[1], in_w)
        if divisor_override:
            count = ops.constant(divisor_override, torch.int64)
        else:
            count = ops.mul(padded_h, padded_w) if count_include_pad else ops.mul(rows, cols)
        zero = ops.constant(0, torch.int64)
        return count, ops.logical_and(ops.gt(rows, zero), ops.gt(cols, zero))
    return divisor


@register_lowering(aten.avg_pool2d)
def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    kernel, padding = _pair(kernel_size), _pair(padding)
    stride = _pair(stride, kernel)
    _check_window(x, kernel)
    size = list(meta_val().shape)
    in_h, in_w = x.get_size()[-2:]
    dtype, loader = x.get_dtype(), x.make_loader()

    divisor = _avg_divisor(kernel, stride, padding, in_h, in_w, count_include_pad, divisor_override)

    def inner_fn(index):
        *outer, oh, ow = index
        rows = _strided_window(oh, kernel[0], stride[0], padding[0], 1, in_h)
        total = _sum_over(loader, outer, rows, _strided_window(ow, kernel[1], stride[1], padding[1], 1, in_w), dtype)
        count, some = divisor(oh, ow)
        return ops.where(some, ops.truediv(total, ops.to_dtype(count, dtype)), ops.constant(0, dtype))
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, size, origins=origins_of([x])))


def _candidates(in_pos, kernel, stride, padding, dilation=1) -> list:
    """The output positions whose window may hold input position ``in_pos`` along one dim (see the docstring)."""
    reach = (kernel - 1) * dilation + 1
    return [FloorDiv(in_pos + padding, stride) - i for i in range(-(-reach // stride))]


def _check_candidates(count: int) -> None:
    if count > MAX_WINDOW:
        raise NotImplementedError(f"a pooling backward of {count} candidate outputs per element (more than {MAX_WINDOW})")


def _pool_backward(grad, x, candidates, take) -> TensorBox:
    """``x``'s gradient: for each input element ``(h, w)``, the sum of ``take(outer, oh, ow, h, w, grad_value,
    inside)`` over its candidate output elements (``candidates(h, w) -> (ohs, ows)``; ``inside``: the candidate is
    an output element; ``take`` returns the contribution, 0 where it is not this input element's)."""
    if not grad.get_dtype().is_floating_point:
        raise NotImplementedError("pooling backward of an integer tensor")
    out_h, out_w = grad.get_size()[-2:]
    dtype, loader = grad.get_dtype(), grad.make_loader()

    def inner_fn(index):
        *outer, h, w = index
        total = ops.constant(0, dtype)
        ohs, ows = candidates(h, w)
        for oh in ohs:
            for ow in ows:
                inside = ops.logical_and(_in_range(oh, 0, out_h), _in_range(ow, 0, out_w))
                value = _masked_load(loader, [*outer, oh, ow], inside, dtype, dtype)
                part = take(outer, oh, ow, h, w, value, inside)
                total = ops.add(total, ops.where(inside, part, ops.constant(0, dtype)))
        return total
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, list(x.get_size()),
                                      origins=origins_of([grad, x])))


def _strided_candidates(kernel, stride, padding, dilation):
    """``candidates`` for ``_pool_backward`` of a strided window (refused past ``MAX_WINDOW``)."""
    dims = list(zip(kernel, stride, padding, dilation))  # (k, s, p, d) along h, then w
    _check_candidates(math.prod(-(-((k - 1) * d + 1) // s) for k, s, _, d in dims))
    return lambda h, w: (_candidates(h, *dims[0]), _candidates(w, *dims[1]))


def _take_if_saved_index(index_loader, in_w, dtype):
    """The maximum's ``take``: the gradient of the candidates whose saved index is this element's."""
    def take(outer, oh, ow, h, w, value, inside):
        saved = _masked_load(index_loader, [*outer, oh, ow], inside, torch.int64, torch.int64, -1)
        mine = ops.eq(saved, ops.index_expr(h * in_w + w, torch.int64))
        return ops.where(mine, value, ops.constant(0, dtype))
    return take


@register_lowering(aten.max_pool2d_with_indices_backward)
def max_pool2d_with_indices_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    kernel, padding, dilation = _pair(kernel_size), _pair(padding), _pair(dilation)
    candidates = _strided_candidates(kernel, _pair(stride, kernel), padding, dilation)
    return _pool_backward(grad, x, candidates, _take_if_saved_index(indices.make_loader(), x.get_size()[-1],
                                                                    grad.get_dtype()))


@register_lowering(aten.avg_pool2d_backward)
def avg_pool2d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    kernel, padding = _pair(kernel_size), _pair(padding)
    stride = _pair(stride, kernel)
    in_h, in_w = x.get_size()[-2:]
    divisor = _avg_divisor(kernel, stride, padding, in_h, in_w, count_include_pad, divisor_override)

    def take(outer, oh, ow, h, w, value, inside):
        # a candidate starts at or before (h, w); it covers it when it ends after it
        zero = ops.constant(0, torch.int64)
        covers = ops.logical_and(ops.gt(ops.index_expr(oh * stride[0] - padding[0] + kernel[0] - h, torch.int64), zero),
                                 ops.gt(ops.index_expr(ow * stride[1] - padding[1] + kernel[1] - w, torch.int64), zero))
        share = ops.truediv(value, ops.to_dtype(divisor(oh, ow)[0], grad.get_dtype()))
        return ops.where(covers, share, ops.constant(0, grad.get_dtype()))
    return _pool_backward(grad, x, _strided_candidates(kernel, stride, padding, [1, 1]), take)


# ------------------------------------------------------------------------------------------------ adaptive pooling
# Output position o of n_out along a dim of n_in pools the input positions [floor(o * n_in / n_out),
# ceil((o + 1) * n_in / n_out)), eager's windows: they tile the input, overlapping by one where n_out does not
# divide n_in. The window is unrolled at its longest length, the positions past its end masked; backward, input
# position h is in the windows of outputs floor(h * n_out / n_in) up to ceil((h + 1) * n_out / n_in) - 1.

def _adaptive_bounds(o, n_in: int, n_out: int):
    """The window ``[start, end)`` of output position ``o`` (an index expression)."""
    return FloorDiv(o * n_in, n_out), FloorDiv((o + 1) * n_in + n_out - 1, n_out)


def _longest(n, m):
    """The most positions one of ``m`` adaptive windows over ``n`` holds (counted: at most ``ceil((n + m - 1) /
    m)``, the bound upstream unrolls). With ``n`` and ``m`` swapped: the most windows one position is in.

    Over a symbolic input size (``n`` symbolic, ``m`` a number) it is a bound, ``n // m + 2`` (positions past a
    window's end are masked), or ``n`` itself for one window (global pooling).  Swapped, a bound from the least
    input size the ShapeEnv allows: 2 where it knows ``m >= n`` (windows overlap by one at most), else
    ``ceil(n / 2) + 1`` (a size symbol is at least 2); extra candidates are masked by the backward's checks."""
    if not (is_symbolic(n) or is_symbolic(m)):
        return max(-(-((o + 1) * n) // m) - o * n // m for o in range(m))
    if m == 1 or n == 1:
        return n
    if not is_symbolic(m):
        return FloorDiv(n, m) + 2
    for least, bound in ((n, 2), (2, -(-n // 2) + 1)):
        if known_true(sympy.Ge(m, least)):
            return bound
    raise NotImplementedError(f"an adaptive pooling backward from {n} outputs to {m} inputs")


def _static_sizes(*sizes) -> list[int]:
    try:
        return [int(n) for n in sizes]
    except TypeError:
        raise NotImplementedError("adaptive pooling to a symbolic output size") from None


def _adaptive_sizes(x, out_size) -> list:
    """``[in_h, in_w, out_h, out_w]``: the output's sizes must be numbers, the input's may be symbolic."""
    return [*x.get_size()[-2:], *_static_sizes(*out_size[-2:])]


def _adaptive_position(o, i, n_in: int, n_out: int):
    """Along one dim, position ``i`` of output ``o``'s window: ``(start + i, before the window's end)``."""
    start, end = _adaptive_bounds(o, n_in, n_out)
    return start + i, ops.lt(ops.index_expr(start + i, torch.int64), ops.index_expr(end, torch.int64))


def _adaptive_window(o, n_in: int, n_out: int) -> list:
    """Along one dim, the window of output position ``o``, unrolled at the longest window's length."""
    return [_adaptive_position(o, i, n_in, n_out) for i in range(_longest(n_in, n_out))]


def _adaptive_setup(x, meta_size) -> tuple[list, bool]:
    """``[in_h, in_w, out_h, out_w]`` and whether the longest window must be a ``Reduction``: too long to unroll
    (more than ``MAX_WINDOW`` elements), or of a symbolic length (a symbolic input size)."""
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError("adaptive pooling of an integer tensor")
    in_h, in_w, out_h, out_w = sizes = _adaptive_sizes(x, meta_size)
    if is_symbolic(in_h) or is_symbolic(in_w):
        return sizes, True
    return sizes, _longest(in_h, out_h) * _longest(in_w, out_w) > MAX_WINDOW


@register_lowering(aten._adaptive_avg_pool2d)
def _adaptive_avg_pool2d(x, output_size):
    size = list(meta_val().shape)
    (in_h, in_w, out_h, out_w), too_long = _adaptive_setup(x, size)
    if too_long:
        return _adaptive_avg_pool2d_by_reduction(x, size, in_h, in_w, out_h, out_w)
    dtype, loader = x.get_dtype(), x.make_loader()

    def inner_fn(index):
        *outer, oh, ow = index
        total = _sum_over(loader, outer, _adaptive_window(oh, in_h, out_h), _adaptive_window(ow, in_w, out_w), dtype)
        return ops.truediv(total, ops.to_dtype(_adaptive_area(oh, ow, in_h, in_w, out_h, out_w), dtype))
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, size, origins=origins_of([x])))


def _adaptive_avg_pool2d_by_reduction(x, size, in_h, in_w, out_h, out_w) -> TensorBox:
    """A window too large to unroll (a 32x32 plane to 2x2): a ``sum`` ``Reduction`` over the longest window's
    ``(i, j)``, masked past each window's end and accumulated in float32 for fp16/bf16, then divided by the
    window's area (upstream falls back here)."""
    dtype, loader = x.get_dtype(), x.make_loader()
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype

    def inner_fn(index, rindex):
        (*outer, oh, ow), (i, j) = index, rindex
        (h, valid_h), (w, valid_w) = _adaptive_position(oh, i, in_h, out_h), _adaptive_position(ow, j, in_w, out_w)
        return _masked_load(loader, [*outer, h, w], ops.logical_and(valid_h, valid_w), acc, dtype)
    window = [_longest(in_h, out_h), _longest(in_w, out_w)]
    total = TensorBox.create(Reduction(x.get_device(), acc, inner_fn, size, window, "sum", acc,
                                       origins=origins_of([x])))
    total.realize()
    load = total.make_loader()

    def mean(index):
        *_, oh, ow = index
        area = ops.to_dtype(_adaptive_area(oh, ow, in_h, in_w, out_h, out_w), acc)
        return ops.to_dtype(ops.truediv(load(index), area), dtype)
    return TensorBox.create(Pointwise(x.get_device(), dtype, mean, size, origins=origins_of([x])))


def _adaptive_area(oh, ow, in_h, in_w, out_h, out_w):
    (h0, h1), (w0, w1) = _adaptive_bounds(oh, in_h, out_h), _adaptive_bounds(ow, in_w, out_w)
    return ops.index_expr((h1 - h0) * (w1 - w0), torch.int64)


@register_lowering(aten.adaptive_max_pool2d)
def adaptive_max_pool2d(x, output_size):
    values, _ = meta_val()
    (in_h, in_w, out_h, out_w), too_long = _adaptive_setup(x, values.shape)
    if too_long:
        return _adaptive_max_pool2d_by_reduction(x, list(values.shape), in_h, in_w, out_h, out_w)
    loader = x.make_loader()

    def window(index):
        *outer, oh, ow = index
        return _max_over(loader, outer, _adaptive_window(oh, in_h, out_h), _adaptive_window(ow, in_w, out_w), in_w,
                         x.get_dtype())
    return _values_and_indices(x, list(values.shape), window)


def _adaptive_max_pool2d_by_reduction(x, size, in_h, in_w, out_h, out_w) -> tuple[TensorBox, TensorBox]:
    """A window too large to unroll (global max pooling of a 7x9 plane): two ``Reduction``s over the longest
    window's ``(i, j)``, masked past each window's end, which the scheduler fuses into one kernel (upstream falls
    back here).  The first is the ``max`` (NaN wins).  The second finds eager's index with a ``min`` over one key
    per position: its flat index ``h * W + w`` where it holds the maximum, so the first such position wins; where
    the maximum is NaN, minus the flat index of each NaN, so the *last* NaN wins, as ``_max_over``'s rule keeps it.
    A window of ``-inf`` matches its first position."""
    dtype, loader, device = x.get_dtype(), x.make_loader(), x.get_device()
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    window, origins = [_longest(in_h, out_h), _longest(in_w, out_w)], origins_of([x])

    def element(index, rindex):
        (*outer, oh, ow), (i, j) = index, rindex
        (h, valid_h), (w, valid_w) = _adaptive_position(oh, i, in_h, out_h), _adaptive_position(ow, j, in_w, out_w)
        valid = ops.logical_and(valid_h, valid_w)
        return valid, _masked_load(loader, [*outer, h, w], valid, acc, dtype, float("-inf")), h * in_w + w

    best = TensorBox.create(Reduction(device, acc, lambda index, rindex: element(index, rindex)[1], size, window,
                                      "max", acc, origins=origins))
    best.realize()
    load_best = best.make_loader()

    def key(index, rindex):
        valid, value, flat = element(index, rindex)
        top, at = load_best(index), ops.index_expr(flat, torch.int64)
        nan_here = ops.logical_and(ops.isnan(top), ops.isnan(value))
        holds_max = ops.where(ops.eq(value, top), at, ops.constant(_NO_POSITION, torch.int64))
        return ops.where(valid, ops.where(nan_here, ops.neg(at), holds_max), ops.constant(_NO_POSITION, torch.int64))

    keys = TensorBox.create(Reduction(device, torch.int64, key, size, window, "min", torch.int64, origins=origins))
    keys.realize()
    load_key = keys.make_loader()

    def index_of(index):
        return ops.where(ops.isnan(load_best(index)), ops.neg(load_key(index)), load_key(index))
    values = TensorBox.create(Pointwise(device, dtype, lambda index: ops.to_dtype(load_best(index), dtype), size,
                                        origins=origins))
    return values, TensorBox.create(Pointwise(device, torch.int64, index_of, size, origins=origins))


_NO_POSITION = 2 ** 62  # a key larger than any flat index: a position that is not a candidate


def _adaptive_candidates(x, grad):
    """``candidates`` for ``_pool_backward`` of an adaptive window (refused past ``MAX_WINDOW``)."""
    in_h, in_w, out_h, out_w = _adaptive_sizes(x, grad.get_size())
    _check_candidates(_longest(out_h, in_h) * _longest(out_w, in_w))
    return lambda h, w: ([FloorDiv(h * out_h, in_h) + i for i in range(_longest(out_h, in_h))],
                         [FloorDiv(w * out_w, in_w) + i for i in range(_longest(out_w, in_w))])


@register_lowering(aten._adaptive_avg_pool2d_backward)
def _adaptive_avg_pool2d_backward(grad, x):
    in_h, in_w, out_h, out_w = _adaptive_sizes(x, grad.get_size())
    dtype = grad.get_dtype()

    def take(outer, oh, ow, h, w, value, inside):
        # every candidate ends after (h, w); it covers it when it starts at or before it
        starts_h, starts_w = _adaptive_bounds(oh, in_h, out_h)[0], _adaptive_bounds(ow, in_w, out_w)[0]
        covers = ops.logical_and(ops.le(ops.index_expr(starts_h, torch.int64), ops.index_expr(h, torch.int64)),
                                 ops.le(ops.index_expr(starts_w, torch.int64), ops.index_expr(w, torch.int64)))
        share = ops.truediv(value, ops.to_dtype(_adaptive_area(oh, ow, in_h, in_w, out_h, out_w), dtype))
        return ops.where(covers, share, ops.constant(0, dtype))
    return _pool_backward(grad, x, _adaptive_candidates(x, grad), take)


@register_lowering(aten.adaptive_max_pool2d_backward)
def adaptive_max_pool2d_backward(grad, x, indices):
    take = _take_if_saved_index(indices.make_loader(), x.get_size()[-1], grad.get_dtype())
    return _pool_backward(grad, x, _adaptive_candidates(x, grad), take)
