"""``max_pool2d_with_indices``: a pointwise loop over the output whose body unrolls the window.

Each output element ``(..., oh, ow)`` reads the ``kh * kw`` input elements of its window, in row-major order,
at ``h = oh * stride - padding + i * dilation`` (and the same for ``w``); a position outside the input (padding,
or past the end under ``ceil_mode``) is masked and never wins. Like eager's CPU and CUDA kernels, a value wins
when it is greater than the running maximum or is NaN (so a NaN propagates, and the last NaN's index is kept),
and the index starts at the window's first valid position (a window of ``-inf`` returns it). The values and the
indices (``h * W + w``, int64) are two ``Pointwise`` nodes with the same body; the scheduler fuses them into one
kernel. A window of more than 25 elements falls back to ATen (as upstream, whose lowering in ``lowering.py``
unrolls the window the same way). The backward, ``max_pool2d_with_indices_backward``, is an ATen fallback.
"""
from __future__ import annotations

import math

import torch

from .ir import Pointwise, TensorBox
from .lowering import _in_range, _masked_load, meta_val, origins_of, register_lowering
from .virtualized import ops

aten = torch.ops.aten

MAX_WINDOW = 25  # elements unrolled per output element; a larger window runs in ATen


def _pair(v, default=None) -> list[int]:
    v = list(v) if isinstance(v, (list, tuple)) and len(v) else default
    return v * 2 if len(v) == 1 else v


@register_lowering(aten.max_pool2d_with_indices)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel = _pair(kernel_size)
    stride = _pair(stride, kernel)
    padding = _pair(padding if isinstance(padding, (list, tuple)) else [padding])
    dilation = _pair(dilation if isinstance(dilation, (list, tuple)) else [dilation])
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError("max_pool2d of an integer tensor (eager's CPU kernel refuses it)")
    if math.prod(kernel) > MAX_WINDOW:
        raise NotImplementedError(f"a pooling window of {math.prod(kernel)} elements (more than {MAX_WINDOW})")
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
