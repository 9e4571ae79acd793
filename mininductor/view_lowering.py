"""View lowerings: every view is a re-indexing of its input, never a copy (part of Inductor's ``lowering.py``
and ``ir.py``'s ``View``/``ExpandView``/``PermuteView``/``SliceView``).

``permute(x, [1, 0])`` loads ``x`` at ``[i1, i0]``; ``expand`` loads broadcast dims at 0; ``x[:, 1:7:2]`` loads at
``[i0, 2*i1 + 1]``; ``reshape`` maps each group of output dims to a flat index and splits it over the input dims
(``FloorDiv``/``ModularIndexing``), which ``simplify_index`` folds back when the input was contiguous.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

import sympy
import torch

from . import ir
from .indexing import (
    FloorDiv,
    ModularIndexing,
    as_size,
    as_torch_sympy,
    contiguous_strides,
    divides,
    exact_quotients,
    is_symbolic,
    known_true,
    product,
    size_hint,
    statically_true,
    sym_max,
    sym_min,
)
from .ir import TensorBox, View
from .lowering import register_lowering
from .virtualized import V

aten, prims = torch.ops.aten, torch.ops.prims


def _view(x, size, reindex) -> TensorBox:
    return TensorBox(View(x.data if isinstance(x, TensorBox) else x, size, reindex))


def expand(x, size: Sequence[int]) -> TensorBox:
    old = list(x.get_size())
    size = [o if s == -1 else s for s, o in zip(size, [None] * (len(size) - len(old)) + old)]
    skip = len(size) - len(old)

    def reindex(index):
        return [sympy.Integer(0) if o == 1 and size[skip + d] != 1 else index[skip + d] for d, o in enumerate(old)]
    return _view(x, size, reindex)


register_lowering(aten.expand)(lambda x, size, implicit=False: expand(x, size))
register_lowering(aten.expand_as)(lambda x, other: expand(x, other.get_size()))


@register_lowering(prims.broadcast_in_dim)
def broadcast_in_dim(x, shape, broadcast_dimensions):
    kept, xs = list(broadcast_dimensions), list(x.get_size())
    mid = [1] * len(shape)
    for k, d in enumerate(kept):
        mid[d] = xs[k]
    return expand(_view(x, mid, lambda index: [index[d] for d in kept]), shape)


@register_lowering(aten.permute, prims.transpose)
def permute(x, dims):
    nd = len(x.get_size())
    dims = [d % nd for d in dims]
    size = [x.get_size()[d] for d in dims]
    inverse = [dims.index(i) for i in range(nd)]
    return _view(x, size, lambda index: [index[inverse[i]] for i in range(nd)])


@register_lowering(aten.transpose)
def transpose(x, d0, d1):
    nd = len(x.get_size())
    dims = list(range(nd))
    if nd:
        dims[d0 % nd], dims[d1 % nd] = dims[d1 % nd], dims[d0 % nd]
    return permute(x, dims)


@register_lowering(aten.t)
def t(x):
    return transpose(x, 0, 1) if len(x.get_size()) == 2 else x


@register_lowering(aten.slice)
def slice_(x, dim=0, start=None, end=None, step=1):
    size = list(x.get_size())
    dim = dim % len(size)
    n = size[dim]
    start = 0 if start is None else start
    # ``x[a:]`` traces with end = 2**63 - 1: that is the dim's size (a symbolic size, ``s0**2``, has no upper
    # bound sympy could compare it with)
    end = n if end is None or isinstance(end, int) and end >= sys.maxsize else end
    # a symbolic bound (``x[: x.shape[0] // 2]``) is negative or not for every size, as the ShapeEnv knows;
    # Python's ``<`` on the sympy expression could not tell (the symbolic compile fell back per shape)
    # clamped to [0, n]: where no guard decides a bound against the size (``x[:8]`` of ``s31`` rows, neither
    # known to be the smaller), the size is ``Min(8, s31)``, as the fake tensor's is; the kernel computes it
    start = sym_min(sym_max(start + n if statically_true(sympy.Lt(start, 0)) else start, 0), n)
    end = sym_min(sym_max(end + n if statically_true(sympy.Lt(end, 0)) else end, start), n)
    new = list(size)
    new[dim] = (end - start + step - 1) // step
    if start == 0 and end == n and step == 1:
        return x

    def reindex(index):
        index = list(index)
        index[dim] = index[dim] * step + start
        return index
    return _view(x, new, reindex)


@register_lowering(aten.select)
def select(x, dim, idx):
    size = list(x.get_size())
    dim = dim % len(size)
    idx = as_size(idx)  # ``x.select(0, x.shape[0] - 1)`` of a symbolic size: an expression, ``s31 - 1``
    idx = idx + size[dim] if statically_true(sympy.Lt(idx, 0)) else idx
    new = size[:dim] + size[dim + 1:]
    return _view(x, new, lambda index: list(index[:dim]) + [sympy.sympify(idx)] + list(index[dim:]))


@register_lowering(aten.unsqueeze)
def unsqueeze(x, dim):
    size = list(x.get_size())
    dim = dim % (len(size) + 1)
    return _view(x, size[:dim] + [1] + size[dim:], lambda index: list(index[:dim]) + list(index[dim + 1:]))


@register_lowering(aten.squeeze, prims.squeeze)
def squeeze(x, dim=None):
    size = list(x.get_size())
    if dim is None:
        dims = [d for d, s in enumerate(size) if s == 1]
    else:
        dims = [d % max(len(size), 1) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
        dims = [d for d in dims if size and size[d] == 1]
    keep = [d for d in range(len(size)) if d not in dims]

    def reindex(index):
        out = [sympy.Integer(0)] * len(size)
        for d, v in zip(keep, index):
            out[d] = v
        return out
    return _view(x, [size[d] for d in keep], reindex)


@register_lowering(aten.view, aten.reshape, aten._unsafe_view, prims.reshape, aten.view_copy, aten.flatten,
                   prims.collapse_view, aten.unflatten)
def view(x, size, *args):
    target = _target()
    if target is not None and target in (aten.flatten.using_ints, prims.collapse_view.default):
        start, end = size, args[0]
        old = list(x.get_size())
        nd = len(old)
        start, end = start % max(nd, 1), end % max(nd, 1)
        size = old[:start] + [product(old[start:end + 1])] + old[end + 1:]
    elif target is not None and target is aten.unflatten.int:
        old, dim = list(x.get_size()), size % len(x.get_size())
        size = old[:dim] + list(args[0]) + old[dim + 1:]
    return reshape(x, list(size))


def _target():
    return V.graph.current_node.target if V.graph is not None and V.graph.current_node is not None else None


def reshape(x, size: list[int]) -> TensorBox:
    old = list(x.get_size())
    numel = product(old)
    size = [as_size(s) for s in size]
    if -1 in size:
        known = product(s for s in size if s != -1)
        size = [_exact_div(numel, known) if s == -1 else s for s in size]
    if old == size:
        return x
    if numel == 0:
        # [Note: views of empty tensors] nothing is read, so any index will do; pairing the dims would meet a
        # product of 0 on both sides ([2, 0] as [0]) and index modulo a size of 0
        return _view(x, size, lambda index: [sympy.Integer(0)] * len(old))
    groups = _reshape_groups(old, size)

    def reindex(index):
        out = [sympy.Integer(0)] * len(old)
        for old_dims, new_dims in groups:
            flat = sum((index[d] * s for d, s in zip(new_dims, contiguous_strides([size[d] for d in new_dims]))),
                       sympy.Integer(0))
            # a size-1 dim's index is 0: ``x[::2]`` of 2 rows, viewed flat, reads row ``0``, not ``FloorDiv(i, 8)``
            # (0 as well, but then no strided window reads it: the output was a copy where eager returns a view)
            dims = [d for d in old_dims if old[d] != 1]
            div = 1
            for k in reversed(range(len(dims))):
                out[dims[k]] = FloorDiv(flat, div) if k == 0 else ModularIndexing(flat, div, old[dims[k]])
                div *= old[dims[k]]
        return out
    return _view(x, size, reindex)


def _exact_div(numel, known):
    """``numel // known`` for ``view(-1)``; with symbols the quotient must be a product, or a ``FloorDiv`` the
    guards say is exact ([Note: divisions the guards make exact])."""
    if not is_symbolic(numel) and not is_symbolic(known):
        return numel // known
    quotient = sympy.cancel(sympy.sympify(numel) / known)
    top, bottom = sympy.fraction(quotient)
    if bottom == 1:
        return as_size(quotient)
    if divides(bottom, top):
        return as_size(FloorDiv(top, bottom))
    raise NotImplementedError(f"symbolic view: {numel} is not a multiple of {known}")


def _reshape_groups(old: list[int], new: list[int]) -> list[tuple[list[int], list[int]]]:
    """Pair up runs of old and new dims with equal products (greedy from the left).

    With symbolic sizes the side to grow is chosen by the size hints, but a group closes only when the two
    products are equal as polynomials (``s0*4 == 4*s0``, ``(s0 - 1)*s1 == s0*s1 - s1``: ``x[1:].view(-1)``), so
    the grouping holds for every size."""
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        og, ng = [], []
        po = pn = 1
        if i < len(old):
            og.append(i); po *= old[i]; i += 1
        if j < len(new):
            ng.append(j); pn *= new[j]; j += 1
        while not _same_size(po, pn):
            if i >= len(old) and j >= len(new):
                raise NotImplementedError(f"symbolic view: cannot pair sizes {old} with {new}")
            if j >= len(new) or i < len(old) and size_hint(po) <= size_hint(pn):
                og.append(i); po *= old[i]; i += 1
            else:
                ng.append(j); pn *= new[j]; j += 1
        # trailing size-1 dims join the current group
        while i < len(old) and old[i] == 1 and (j >= len(new) or new[j] != 1):
            og.append(i); i += 1
        while j < len(new) and new[j] == 1 and (i >= len(old) or old[i] != 1):
            ng.append(j); j += 1
        groups.append((og, ng))
    return groups


def _same_size(a, b) -> bool:
    if a == b:
        return True
    if is_symbolic(a - b):  # sympy's Min/Max (ours) and torch's (traced sizes) are other classes: one kind
        a, b = as_torch_sympy(sympy.sympify(a)), as_torch_sympy(sympy.sympify(b))
        if a == b or sympy.expand(a - b) == 0:
            return True
    # ours or torch's FloorDiv (a traced size, ``s46*((s31//s81))``): [Note: divisions the guards make exact]
    if sympy.expand(exact_quotients(sympy.sympify(a - b))) == 0:
        return True
    fixed = _quotients_the_guards_fix()
    if fixed and is_symbolic(a - b) and sympy.expand((a - b).xreplace(fixed)) == 0:
        return True
    # a guard that says so: a gradient summed to ``[1, s46]`` views as a ``diagonal``'s ``[Min(s31, s46)]`` after a
    # broadcast guarded ``Eq(s46, Min(s31, s46))`` (lowering fuzz --grad --zero --dynamic, seed 6710278)
    a, b = as_torch_sympy(sympy.sympify(a)), as_torch_sympy(sympy.sympify(b))
    return is_symbolic(a - b) and known_true(sympy.Eq(a, b))


def _quotients_the_guards_fix() -> dict:
    """``{p: c*q}`` for each guard ``Eq(p // q, c)`` (``p`` a size symbol, ``c`` an integer) whose division the
    guards also make exact: under both, ``p`` is ``c*q`` for every size the graph serves.

    ``x.reshape(n, -1)`` of a 1-d ``x`` with ``n == len(x)`` traces the ``-1`` as 1 and guards ``Eq(s77//s86,
    1)``: the view's sizes ``[s77] -> [s86, 1]`` pair only through it. Without it the view, and its backward,
    fell back to ATen (lowering fuzz --grad --zero --int --matmul, seed 6003610)."""
    shape_env = getattr(V.graph, "shape_env", None)
    fixed = {}
    for guard in getattr(shape_env, "guards", ()):
        e = guard.expr
        if not isinstance(e, sympy.Eq):
            continue
        for quotient, c in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if type(quotient).__name__ == "FloorDiv" and c.is_Integer and quotient.args[0].is_Symbol and \
                    divides(quotient.args[1], quotient.args[0]):
                fixed[quotient.args[0]] = c * quotient.args[1]
    return fixed


@register_lowering(aten.as_strided, prims.as_strided)
def as_strided(x, size, stride, storage_offset=None):
    """Index the underlying storage directly: the input is realised first (its storage must exist)."""
    x.realize()
    buf = ir.unwrap_view_to_buffer(x)
    if not isinstance(buf, ir.Buffer):
        rv = ir.as_strided_layout(x)
        if rv is None:
            raise NotImplementedError("as_strided of a non-strided view")
        buf = rv.data
        base_offset = 0
    else:
        base_offset = buf.layout.offset
    # storage_offset counts from the start of the storage; our offsets count from the buffer's data_ptr
    offset = base_offset if storage_offset is None else storage_offset - getattr(buf, "storage_offset", 0)
    layout = ir.FixedLayout(buf.get_device(), buf.get_dtype(), list(size), list(stride), offset)
    return TensorBox(ir.ReinterpretView(buf, layout))


@register_lowering(aten.unfold)
def unfold(x, dim, size, step):
    """``x.unfold(dim, size, step)``: the windows of ``size`` elements along ``dim``, ``step`` apart, in a new
    last dim: ``[..., w, ..., k]`` reads ``x[..., w * step + k, ...]``."""
    old = list(x.get_size())
    if not old:  # a 0-d tensor is one window of its one element
        return _view(x, [1], lambda index: [])
    dim = dim % len(old)
    new = list(old)
    new[dim] = (old[dim] - size) // step + 1

    def reindex(index):
        out = list(index[:-1])
        out[dim] = index[dim] * step + index[-1]
        return out
    return _view(x, new + [size], reindex)


@register_lowering(aten.flip, prims.rev)
def flip(x, dims):
    """Not a view in eager (it copies), but for us just another re-indexing: ``i -> size - 1 - i``."""
    size = list(x.get_size())
    dims = {d % len(size) for d in dims}
    return _view(x, size, lambda index: [size[d] - 1 - v if d in dims else v for d, v in enumerate(index)])


@register_lowering(aten.split, aten.split_with_sizes)
def split(x, sizes, dim=0):
    n = x.get_size()[dim % len(x.get_size())]
    if isinstance(sizes, int):
        sizes = [sizes] * (n // sizes) + ([n % sizes] if n % sizes else [])
    out, start = [], 0
    for s in sizes:
        out.append(slice_(x, dim, start, start + s))
        start += s
    return out


@register_lowering(aten.unbind)
def unbind(x, dim=0):
    return [select(x, dim, i) for i in range(x.get_size()[dim % len(x.get_size())])]


@register_lowering(aten.diagonal)
def diagonal(x, offset=0, dim1=0, dim2=1):
    size = list(x.get_size())
    nd = len(size)
    dim1, dim2 = dim1 % nd, dim2 % nd
    n = sym_max(sym_min(size[dim1] + min(offset, 0), size[dim2] - max(offset, 0)), 0)  # sizes may be symbols
    keep = [d for d in range(nd) if d not in (dim1, dim2)]

    def reindex(index):
        out = [None] * nd
        for d, v in zip(keep, index):
            out[d] = v
        out[dim1] = index[-1] - min(offset, 0)
        out[dim2] = index[-1] + max(offset, 0)
        return out
    return _view(x, [size[d] for d in keep] + [n], reindex)


# ----------------------------------------------------------------------------------------- view scatters
# ``diagonal_scatter`` and ``as_strided_scatter`` (the backwards of ``diagonal`` and ``as_strided``): a copy of
# ``x``, then a ``Scatter`` kernel over ``src``'s elements that stores each where the view would read it.
def _view_scatter(x, src, stride, target_index, flat: bool = False) -> TensorBox:
    """``out = x.clone()`` laid out with ``stride``, then ``out[target_index(i)] = src[i]`` for every ``i`` of
    ``src``; ``flat``: ``target_index`` gives an element offset into ``out``, not a multi-dim index."""
    from .index_lowering import _scatter_buffer
    from .lowering import clone, origins_of
    from .virtualized import ops
    target = clone(x)
    target.storage().realize(stride)
    target_buf = ir.unwrap_view_to_buffer(target)
    dtype, loader = x.get_dtype(), src.make_loader()

    def inner_fn(index):
        value = loader(index)
        return ops.to_dtype(value, dtype) if src.get_dtype() != dtype else value
    indexer = (lambda index: index[0]) if flat else target_buf.layout.make_indexer()
    node = ir.Scatter(x.get_device(), dtype, inner_fn, list(src.get_size()), target_buf.get_name(), indexer,
                      target_index, None, origins=origins_of([src]) | target_buf.origins)
    return _scatter_buffer(node, target_buf)


def _eager_dense_stride(size) -> list | None:
    """The strides eager gives this node's (fresh, dense) result, or None (row-major) when they are not dense."""
    from .lowering import meta_val
    val = meta_val()
    if isinstance(val, torch.Tensor) and list(val.shape) == list(size) and \
            torch._prims_common.is_non_overlapping_and_dense_or_false(val):
        return [as_size(s) for s in val.stride()]
    return None


@register_lowering(aten.diagonal_scatter)
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    """``x`` with ``src`` written on the diagonal ``x.diagonal(offset, dim1, dim2)`` reads."""
    nd = len(x.get_size())
    dim1, dim2 = dim1 % nd, dim2 % nd
    keep = [d for d in range(nd) if d not in (dim1, dim2)]

    def target_index(index):
        out = [None] * nd
        for d, v in zip(keep, index):
            out[d] = v
        out[dim1] = index[-1] + max(-offset, 0)
        out[dim2] = index[-1] + max(offset, 0)
        return out
    return _view_scatter(x, src, _eager_dense_stride(x.get_size()), target_index)


def _reach(size, stride) -> int:
    """The offset of a strided window's last element from its first."""
    return sum((n - 1) * st for n, st in zip(size, stride))


def _no_overlap(size, stride) -> bool:
    """No two elements of a strided window share memory: walking its dims from the smallest stride up, each
    stride passes the reach of the dims below it (sufficient; plain ints)."""
    reach = 0
    for st, n in sorted((st, n) for n, st in zip(size, stride) if n > 1):
        if st <= reach:
            return False
        reach += st * (n - 1)
    return True


@register_lowering(aten.as_strided_scatter)
def as_strided_scatter(x, src, size, stride, storage_offset=None):
    """``x`` with ``src`` written where ``x.as_strided(size, stride, storage_offset)`` reads.  Eager clones ``x``
    with its strides (``clone_preserve_strides``) and indexes that storage, so ``x`` must be a dense buffer
    (with eager's layout: [Note: as_strided reads eager's layout]); the window must fit in it and not overlap
    itself (eager's ``copy_`` refuses to write one memory location twice).  Else it falls back."""
    x.realize()
    buf = ir.unwrap_view_to_buffer(x)
    if not isinstance(buf, ir.Buffer) or buf.layout.offset != 0:
        raise NotImplementedError("as_strided_scatter of a view")
    layout = buf.layout
    numel, offset = product(layout.size), 0 if storage_offset is None else storage_offset - getattr(buf, "storage_offset", 0)
    if any(is_symbolic(v) for v in [numel, offset, *size, *stride, *layout.size, *layout.stride]):
        raise NotImplementedError("as_strided_scatter with symbolic sizes")
    if not numel or not _no_overlap(layout.size, layout.stride) or _reach(layout.size, layout.stride) != numel - 1:
        raise NotImplementedError("as_strided_scatter of an empty, overlapping or non-dense tensor")
    if not _no_overlap(size, stride) or product(size) and not 0 <= offset <= offset + _reach(size, stride) < numel:
        raise NotImplementedError("as_strided_scatter of a window that overlaps itself or leaves the tensor")
    return _view_scatter(x, src, list(buf.layout.stride),
                         lambda index: [offset + sum((i * st for i, st in zip(index, stride)), sympy.Integer(0))],
                         flat=True)


def _register_copy_variants() -> None:
    """Functionalization can emit ``view_copy``-style ops (``slice_copy``, ``permute_copy``...): same values."""
    from .lowering import lowerings
    for op, fn in list(lowerings.items()):
        packet = getattr(aten, f"{op._opname}_copy", None) if op.namespace == "aten" else None
        if packet is not None and op._overloadname in packet.overloads():
            lowerings.setdefault(getattr(packet, op._overloadname), fn)


_register_copy_variants()
