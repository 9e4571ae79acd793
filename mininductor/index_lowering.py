"""Indexing lowerings: gather, advanced indexing (``x[idx]``), embedding, index_select -- indirect *loads* --
and index_put / index_add / scatter(_add) -- indirect *stores*, as ``Scatter`` kernels that write into a copy
of the input (atomically when values accumulate), or into the input itself when the graph only writes the result
back into it (reinplace.py). Part of Inductor's ``lowering.py``.

    x[idx]          -> Pointwise: load(x, indirect(idx[i]) * stride + ...)
    out.index_add_  -> copy kernel, then Scatter: atomic_add(out + indirect(idx[i]) * stride, v[i])
"""
from __future__ import annotations

import torch

from . import ir
from .ir import Pointwise, TensorBox
from .lowering import broadcast_shapes, clone, expand_to, origins_of, register_lowering
from .reinplace import non_overlapping
from .virtualized import V, ops

aten = torch.ops.aten

# tl.atomic_add's dtypes: an accumulating scatter of int8/uint8/int16/bool/bf16 values falls back (the
# interpreter raised "atomic_add does not support int8" at launch; upstream's
# needs_fallback_due_to_atomic_add_limitations is the same idea).
ATOMIC_ADD_DTYPES = (torch.float16, torch.float32, torch.float64, torch.int32, torch.int64)


def _check_atomic_add(dtype: torch.dtype) -> None:
    if dtype not in ATOMIC_ADD_DTYPES:
        raise NotImplementedError(f"atomic_add of {dtype}")


def _indirect(loader, index, size, wrap_neg: bool = False):
    """An index read from a tensor.  ``wrap_neg``: a negative one counts from the end, as ``x[i]`` and
    ``x[i] = v`` allow; gather, scatter, ``index_select`` and ``embedding`` raise on it in eager, and so do we
    (interpreted: [Note: out-of-range indices] in codegen/triton.py)."""
    return ops.indirect_indexing(loader(index), size, True, wrap_neg)


@register_lowering(aten.gather)
def gather(x, dim, index, sparse_grad=False):
    dim = dim % max(len(x.get_size()), 1)
    xl, il, bound = x.make_loader(), index.make_loader(), x.get_size()[dim]

    def inner_fn(idx):
        src = list(idx)
        src[dim] = _indirect(il, idx, bound)
        return xl(src)
    return TensorBox.create(Pointwise(x.get_device(), x.get_dtype(), inner_fn, index.get_size(),
                                      origins=origins_of([x, index])))


def advanced_index(x, indices, wrap_neg: bool = True):
    """Eager's advanced-indexing shape rule: ``(output size, source_index(out_index))``. Index tensors broadcast
    together; their dims go where the indexed dims were when those are adjacent, else first."""
    if any(t is not None and t.get_dtype() in (torch.bool, torch.uint8) for t in indices):
        raise NotImplementedError("boolean-mask indexing has a data-dependent shape")
    size = list(x.get_size())
    indices = list(indices) + [None] * (len(size) - len(indices))
    dims = [d for d, t in enumerate(indices) if t is not None]
    bshape = broadcast_shapes([indices[d].get_size() for d in dims])
    loaders = [expand_to(indices[d], bshape).make_loader() for d in dims]
    consecutive = dims == list(range(dims[0], dims[-1] + 1))
    before = size[:dims[0]] if consecutive else []
    rest = [d for d in range(len(size)) if d not in dims and (not consecutive or d > dims[-1])]
    out_size = before + bshape + [size[d] for d in rest]
    nb = len(bshape)

    def source_index(idx):
        idx = list(idx)
        pre, bidx, post = idx[:len(before)], idx[len(before):len(before) + nb], idx[len(before) + nb:]
        src = [None] * len(size)
        for d, v in zip(range(len(before)), pre):
            src[d] = v
        for d, ld in zip(dims, loaders):
            src[d] = _indirect(ld, bidx, size[d], wrap_neg)
        for d, v in zip(rest, post):
            src[d] = v
        return src
    return out_size, source_index, [indices[d] for d in dims]


@register_lowering(aten.index)
def index(x, indices, wrap_neg: bool = True):
    """Advanced indexing with integer tensors (``x[idx]``, ``x[:, idx]``, ``x[i, j]``); bool masks fall back."""
    out_size, source_index, index_tensors = advanced_index(x, indices, wrap_neg)
    xl = x.make_loader()
    return TensorBox.create(Pointwise(x.get_device(), x.get_dtype(), lambda idx: xl(source_index(idx)), out_size,
                                      origins=origins_of([x, *index_tensors])))


@register_lowering(aten.index_put)
def index_put(x, indices, values, accumulate=False):
    """``x[indices] = values`` (or ``+=`` with ``accumulate``, what ``index_add_`` becomes): a copy of ``x``,
    then a ``Scatter`` kernel over the values that stores (atomically adds) through indirect indices."""
    if accumulate:
        _check_atomic_add(x.get_dtype())
    out_size, source_index, index_tensors = advanced_index(x, indices)
    dtype = x.get_dtype()
    target_buf = _scatter_target(x)
    vl = expand_to(values, out_size).make_loader() if isinstance(values, ir.IRNode) else None
    value_dtype = values.get_dtype() if vl is not None else dtype

    def inner_fn(idx):
        v = vl(idx) if vl is not None else ops.constant(values, dtype)
        return ops.to_dtype(v, dtype) if value_dtype != dtype else v
    scatter = ir.Scatter(x.get_device(), dtype, inner_fn, out_size, target_buf.get_name(),
                         target_buf.layout.make_indexer(), source_index, "atomic_add" if accumulate else None,
                         origins=origins_of([values, *index_tensors]) | target_buf.origins)
    return _scatter_buffer(scatter, target_buf)


@register_lowering(aten.scatter_add, aten.scatter.src, aten.scatter.value)
def scatter(x, dim, index, src):
    """``out = x.clone(); out[..., index[i], ...] (+)= src[i]`` along ``dim``: a copy, then a ``Scatter`` kernel
    over ``index``'s elements (``scatter_add`` adds atomically; plain ``scatter`` stores)."""
    accumulate = V.graph.current_node.target is aten.scatter_add.default
    if accumulate:
        _check_atomic_add(x.get_dtype())
    dim = dim % max(len(x.get_size()), 1)
    dtype, bound = x.get_dtype(), x.get_size()[dim]
    target_buf = _scatter_target(x)
    il = index.make_loader()
    sl = src.make_loader() if isinstance(src, ir.IRNode) else None

    def target_index(idx):
        out = list(idx)
        out[dim] = _indirect(il, idx, bound)
        return out

    def inner_fn(idx):
        if sl is None:
            return ops.constant(src, dtype)
        v = sl(idx)
        return ops.to_dtype(v, dtype) if src.get_dtype() != dtype else v
    node = ir.Scatter(x.get_device(), dtype, inner_fn, index.get_size(), target_buf.get_name(),
                      target_buf.layout.make_indexer(), target_index, "atomic_add" if accumulate else None,
                      origins=origins_of([index, src]) | target_buf.origins)
    return _scatter_buffer(node, target_buf)


def _scatter_target(x) -> ir.Buffer:
    """The buffer a scatter stores into: a fresh copy of ``x``, or ``x``'s own input buffer when the graph's
    only other use of that input is writing the result back (reinplace.py)."""
    storage = x.storage()
    if V.graph.current_node in V.graph.reinplace and x.data is storage and \
            isinstance(storage.data, ir.InputBuffer) and \
            non_overlapping(storage.data.layout.size, storage.data.layout.stride):
        return storage.data
    target = clone(x)
    target.realize()
    return ir.unwrap_view_to_buffer(target)


def _scatter_buffer(scatter: ir.Scatter, target_buf: ir.Buffer) -> TensorBox:
    buf = ir.ComputedBuffer(None, target_buf.layout, scatter)
    buf.name = V.graph.register_buffer(buf)
    if isinstance(target_buf, ir.InputBuffer):
        V.graph.reinplaced[buf.name] = target_buf.get_name()
    return TensorBox(ir.StorageBox(buf))


@register_lowering(aten.embedding)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return index(weight, [indices], wrap_neg=False)


@register_lowering(aten.index_select)
def index_select(x, dim, idx):
    if not idx.get_size():  # a 0-d index selects one element and keeps the dim (size 1), unlike x[i]
        from .view_lowering import view
        idx = view(idx, [1])
    return index(x, [None] * (dim % max(len(x.get_size()), 1)) + [idx], wrap_neg=False)

