"""``cat`` and ``constant_pad_nd``: outputs whose every element reads one input at a shifted index, or a constant
where the index falls outside it (mirrors the ``cat`` and ``constant_pad_nd`` lowerings of
``torch/_inductor/lowering.py``).

Both are one ``Pointwise``: no input is copied first.  ``cat([a, b], 0)`` at row ``i`` loads ``a[i]`` where
``i < len(a)`` and ``b[i - len(a)]`` otherwise, each load masked (``ops.masked``) so that it never reads past its
input; ``F.pad(x, (1, 1))`` at ``i`` loads ``x[i - 1]`` where ``0 <= i - 1 < len(x)`` and the pad value elsewhere::

    cat([a, b]), lengths 4 and 3, at i:   from_b = tl.load(b + (i - 4), mask=(i >= 4) & (i < 7), other=0)
                                          from_a = tl.load(a + i, mask=(i >= 0) & (i < 4), other=0)
                                          out = tl.where(i < 4, from_a, from_b)

A bound may be a symbolic size (``s0``): the kernel computes it from its size arguments (``_size_value``).  The
masked-load helpers serve the pooling lowerings too (``pool_lowering.py``), whose windows also overhang.
"""
from __future__ import annotations

import sympy
import torch

from .indexing import known_true
from .ir import Pointwise, TensorBox
from .lowering import device_of, origins_of, out_dtype, promote, register_lowering
from .virtualized import ops

aten, prims = torch.ops.aten, torch.ops.prims


@register_lowering(aten.cat, prims.cat)
def cat(tensors, dim=0):
    # eager skips legacy empty (0,) inputs -- unless all of them are: then the result is (0,) itself
    tensors = [t for t in tensors if not (len(t.get_size()) == 1 and t.get_size()[0] == 0)] or tensors[:1]
    dim = dim % len(tensors[0].get_size())
    dtype = out_dtype(default=promote(tensors))
    size = list(tensors[0].get_size())
    offsets = [0]
    for t in tensors:
        offsets.append(offsets[-1] + t.get_size()[dim])
    size[dim] = offsets[-1]
    loaders = [t.make_loader() for t in tensors]

    def inner_fn(index):
        result = None
        for k in reversed(range(len(tensors))):
            shifted = list(index)
            shifted[dim] = index[dim] - offsets[k]
            value = _masked_load(loaders[k], shifted, _in_range(index[dim], offsets[k], offsets[k + 1]), dtype,
                                 tensors[k].get_dtype())
            result = value if result is None else ops.where(
                ops.lt(ops.index_expr(index[dim], torch.int64), _size_value(offsets[k + 1])),
                value, result)
        return result
    return TensorBox.create(Pointwise(device_of(tensors), dtype, inner_fn, size, origins=origins_of(tensors)))


def _in_range(idx, lo, hi):
    i = ops.index_expr(idx, torch.int64)
    return ops.logical_and(ops.ge(i, _size_value(lo)), ops.lt(i, _size_value(hi)))


def _size_value(v):
    """A size or offset as an int64 value in a kernel: a constant, or -- a symbolic size such as the bound of
    ``F.pad``/``cat`` along an ``s0`` dim ([Note: symbolic sizes in the IR]) -- the expression, which the kernel
    computes from its size arguments (``ops.constant`` would need an int: the symbolic compile failed)."""
    if isinstance(v, int) or getattr(v, "is_number", False):
        return ops.constant(int(v), torch.int64)
    return ops.index_expr(v, torch.int64)


def _masked_load(loader, index, mask, dtype, src_dtype, other=0):
    def body():
        v = loader(index)
        return ops.to_dtype(v, dtype) if src_dtype != dtype else v
    return ops.masked(mask, body, other)


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(x, pad, value=0):
    size = list(x.get_size())
    nd = len(size)
    lefts = [0] * nd
    new_size = list(size)
    for k in range(len(pad) // 2):
        d = nd - 1 - k
        lefts[d] = pad[2 * k]
        new_size[d] = size[d] + pad[2 * k] + pad[2 * k + 1]
    loader, dtype = x.make_loader(), x.get_dtype()
    # a dim needs a mask unless it is known to add nothing (a pad by an int input ``n`` of unknown sign: masked)
    masked = [not (known_true(sympy.Le(lefts[d], 0)) and known_true(sympy.Le(new_size[d] - lefts[d], size[d])))
              for d in range(nd)]

    def inner_fn(index):
        src = [i - lo for i, lo in zip(index, lefts)]
        mask = None
        for d in range(nd):
            if masked[d]:
                m = _in_range(src[d], 0, size[d])
                mask = m if mask is None else ops.logical_and(mask, m)
        if mask is None:
            return loader(src)
        return ops.where(mask, _masked_load(loader, src, mask, dtype, dtype), ops.constant(value, dtype))
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, new_size, origins=origins_of([x])))
