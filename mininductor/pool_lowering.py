"""Max and average pooling (``max_pool2d_with_indices``, ``avg_pool2d``) and their backwards: pointwise loops whose
body unrolls the window.

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
"""
from __future__ import annotations

import math

import torch

from .indexing import FloorDiv
from .ir import Pointwise, TensorBox
from .lowering import _in_range, _masked_load, _size_value, meta_val, origins_of, register_lowering
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


@register_lowering(aten.max_pool2d_with_indices)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel, padding, dilation = _pair(kernel_size), _pair(padding), _pair(dilation)
    stride = _pair(stride, kernel)
    _check_window(x, kernel)
    values, _ = meta_val()  # the output size, ceil_mode included
    size = list(values.shape)
    in_h, in_w = x.get_size()[-2:]
    dtype, loader = x.get_dtype(), x.make_loader()

    def window(index):
        """The running (value, index) over the window of output element ``index``."""
        *outer, oh, ow = index
        best, best_at, seen = ops.constant(float("-inf"), dtype), ops.constant(-1, torch.int64), None
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                h = oh * stride[0] - padding[0] + i * dilation[0]
                w = ow * stride[1] - padding[1] + j * dilation[1]
                valid = ops.logical_and(_in_range(h, 0, in_h), _in_range(w, 0, in_w))
                value = _masked_load(loader, [*outer, h, w], valid, dtype, dtype, float("-inf"))
                at = ops.index_expr(h * in_w + w, torch.int64)
                wins = ops.logical_and(valid, ops.logical_or(ops.gt(value, best), ops.isnan(value)))
                first = valid if seen is None else ops.logical_and(valid, ops.logical_not(seen))
                best = ops.where(wins, value, best)
                best_at = ops.where(ops.logical_or(wins, first), at, best_at)
                seen = valid if seen is None else ops.logical_or(seen, valid)
        return best, best_at

    device, origins = x.get_device(), origins_of([x])
    out = TensorBox.create(Pointwise(device, dtype, lambda index: window(index)[0], size, origins=origins))
    at = TensorBox.create(Pointwise(device, torch.int64, lambda index: window(index)[1], size, origins=origins))
    return out, at


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
        total = ops.constant(0, dtype)
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                h, w = oh * stride[0] - padding[0] + i, ow * stride[1] - padding[1] + j
                valid = ops.logical_and(_in_range(h, 0, in_h), _in_range(w, 0, in_w))
                total = ops.add(total, _masked_load(loader, [*outer, h, w], valid, dtype, dtype))
        count, some = divisor(oh, ow)
        return ops.where(some, ops.truediv(total, ops.to_dtype(count, dtype)), ops.constant(0, dtype))
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, size, origins=origins_of([x])))


def _candidates(in_pos, kernel, stride, padding, dilation=1) -> list:
    """The output positions whose window may hold input position ``in_pos`` along one dim (see the docstring)."""
    reach = (kernel - 1) * dilation + 1
    return [FloorDiv(in_pos + padding, stride) - i for i in range(-(-reach // stride))]


def _pool_backward(grad, x, kernel, stride, padding, dilation, take) -> TensorBox:
    """``x``'s gradient: for each input element, the sum of ``take(outer, oh, ow, h, w, grad_value, inside)`` over
    its candidate output elements (``inside``: the candidate is an output element; ``take`` returns the
    contribution, 0 where it is not this input element's)."""
    if not grad.get_dtype().is_floating_point:
        raise NotImplementedError("pooling backward of an integer tensor")
    dims = list(zip(kernel, stride, padding, dilation))  # (k, s, p, d) along h, then w
    if math.prod(-(-((k - 1) * d + 1) // s) for k, s, _, d in dims) > MAX_WINDOW:
        raise NotImplementedError(f"a pooling backward of more than {MAX_WINDOW} candidate outputs per element")
    out_h, out_w = grad.get_size()[-2:]
    dtype, loader = grad.get_dtype(), grad.make_loader()

    def inner_fn(index):
        *outer, h, w = index
        total = ops.constant(0, dtype)
        for oh in _candidates(h, *dims[0]):
            for ow in _candidates(w, *dims[1]):
                inside = ops.logical_and(_in_range(oh, 0, out_h), _in_range(ow, 0, out_w))
                value = _masked_load(loader, [*outer, oh, ow], inside, dtype, dtype)
                part = take(outer, oh, ow, h, w, value, inside)
                total = ops.add(total, ops.where(inside, part, ops.constant(0, dtype)))
        return total
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, list(x.get_size()),
                                      origins=origins_of([grad, x])))


@register_lowering(aten.max_pool2d_with_indices_backward)
def max_pool2d_with_indices_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    kernel, padding, dilation = _pair(kernel_size), _pair(padding), _pair(dilation)
    stride = _pair(stride, kernel)
    in_w, index_loader = x.get_size()[-1], indices.make_loader()

    def take(outer, oh, ow, h, w, value, inside):
        saved = _masked_load(index_loader, [*outer, oh, ow], inside, torch.int64, torch.int64, -1)
        mine = ops.eq(saved, ops.index_expr(h * in_w + w, torch.int64))
        return ops.where(mine, value, ops.constant(0, grad.get_dtype()))
    return _pool_backward(grad, x, kernel, stride, padding, dilation, take)


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
    return _pool_backward(grad, x, kernel, stride, padding, [1, 1], take)
