"""``EagerFunctions``: the torch functions whose traced form differs from what eager does, put right while tracing.

A decomposition table (``decomposition.py``) rewrites ATen ops below the dispatcher. Some differences sit above it,
in torch functions whose C++ composite runs a different body on fake tensors (``F.one_hot``), that a fake kernel
refuses where eager runs (shifts of a bool tensor), or that functionalization would silently turn into another
program: an in-place op that writes an element twice or reads what it already wrote, an ``as_strided`` window
outside its input, an in-place op on a tensor that is not row-major. This ``TorchFunctionMode`` is entered around
every trace (``compile_fx``'s inference trace and AOTAutograd's) and handles each of them, as the Notes below say.
Upstream spreads these rules over its functionalization and meta kernels; here they are in one place.
"""
from __future__ import annotations

import math

import torch

aten = torch.ops.aten


class EagerFunctions(torch.overrides.TorchFunctionMode):
    """Torch functions whose traced form (fake tensors, references) differs from what eager does; entered
    around every trace.

    [Note: one_hot's layout] ``F.one_hot`` is a CompositeImplicit op with two bodies: on real tensors
    ``zeros(...).scatter_(-1, x.unsqueeze(-1), 1)``, row-major; on fake, meta or functional tensors (whatever we
    trace with) ``eq(x.unsqueeze(-1), arange(n)).long()``, which keeps ``x``'s layout -- a permuted ``x`` gave
    strides (6, 24, 1) where eager's are (18, 6, 1). It decomposes in C++, above the dispatcher, so no
    decomposition table sees it: its result is made contiguous here.

    Shifts of a bool tensor: eager converts it to the result type (``mask << 1`` is int64, ``x16 >> mask`` is
    int16); the fake kernel refuses any bool operand, so the compile raised where eager runs. Converted here.

    ``unfold`` with windows that leave elements out is traced as ``as_strided``: [Note: unfold under
    functionalization].

    An in-place op on a tensor that is not row-major keeps its layout: [Note: in-place ops keep their input's
    strides]."""

    def __init__(self) -> None:
        super().__init__()
        self.as_strided_storages: set[int] = set()  # the storages ``as_strided`` read (collect_metadata asks)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _SHIFTS and len(args) == 2:
            args = _shift_operands(*args)
        if func is torch.nn.functional.one_hot:
            return _one_hot(*args, **(kwargs or {})).contiguous()
        if func is torch.Tensor.unfold and (window := _gapped_unfold(*args, **(kwargs or {}))) is not None:
            return window
        if _writes_overlapping_elements(func, args):
            raise RuntimeError(f"{func.__name__}: functionalization encountered a tensor being mutated that has "
                               "internal overlap (one element written twice: eager applies the op twice)")
        if func in (torch.Tensor.as_strided, torch.as_strided) and isinstance(args[0], torch.Tensor):
            self.as_strided_storages.add(args[0].untyped_storage()._cdata)  # [Note: as_strided of a shifted input]
        if func in (torch.Tensor.as_strided, torch.as_strided) and _outside_its_input(*args, **(kwargs or {})):
            raise RuntimeError("as_strided: functionalization encountered a window outside the elements of its "
                               "input (eager reads and writes the storage beyond them)")
        if _reads_what_it_writes(func, args, kwargs or {}):
            raise RuntimeError(f"{func.__name__}: functionalization encountered a tensor being mutated that has "
                               "internal overlap with an operand (eager reads some elements after writing them)")
        if (name := getattr(func, "__name__", "")).endswith("_") and not name.endswith("__") and args and \
                isinstance(args[0], torch.Tensor) and name not in _IN_PLACE_KEEPS_NO_LAYOUT and \
                func in (getattr(torch.Tensor, name, None), getattr(torch, name, None)):
            return _in_place_keeping_strides(func, name, args, kwargs or {})
        out = func(*args, **(kwargs or {}))
        if func in _WHERE_REFS and isinstance(out, torch.Tensor) and \
                all(isinstance(a, torch.Tensor) for a in args[:2]):
            out = _tensor_iterator_layout(out, args[:2])
        return out


# [Note: in-place ops keep their input's strides]
# Functionalization runs ``a.masked_fill_(m, v)`` as ``a = masked_fill(a, m, v)`` and gives the wrapper the
# out-of-place result's strides.  Eager's in-place op leaves ``a``'s layout alone, but some out-of-place forms
# (``masked_fill``, ``masked_scatter``, ``index_add``, ``index_copy``, ``cumsum``, ``tril``: their
# decompositions or meta kernels) are row-major whatever their input.  A transposed ``a`` then looked row-major
# to the rest of the trace, and the layout decides whether a ``reshape`` is a view or a copy:
# ``a.t().flatten().add_(1.5)`` wrote a traced copy where eager writes ``a`` (AOT fuzz round, masked_fill_
# strides).  Here such an op on a tensor that is not laid out like its out-of-place result is traced as
# ``a.copy_(a.op(...))``: a functional ``copy`` keeps ``a``'s strides (a pointwise copy the lowering fuses away).
# Same family as [Note: scatters keep their input's strides].  Ops that change metadata or draw random numbers
# (whose out-of-place namesake means something else: ``bernoulli``) are left as they are.
_IN_PLACE_KEEPS_NO_LAYOUT = {
    "t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_", "unsqueeze_", "as_strided_", "resize_", "resize_as_",
    "set_", "detach_", "requires_grad_", "share_memory_", "copy_", "bernoulli_", "random_", "uniform_",
    "normal_", "exponential_", "geometric_", "cauchy_", "log_normal_", "retain_grad_", "apply_", "map_",
}


def _in_place_keeping_strides(func, name: str, args: tuple, kwargs: dict):
    """``func(*args)`` (an in-place op on ``args[0]``), traced so that ``args[0]`` keeps its strides ([Note:
    in-place ops keep their input's strides])."""
    self = args[0]
    out_of_place = getattr(torch.Tensor, name[:-1], None)
    if out_of_place is None or not all(isinstance(v, int) for v in (*self.shape, *self.stride())) or \
            self.is_contiguous():  # the usual case (symbolic sizes: comparing would specialise them)
        return func(*args, **kwargs)
    try:
        out = out_of_place(*args, **kwargs)
    except (RuntimeError, TypeError):
        return func(*args, **kwargs)  # raises as eager does, or runs in place
    if not isinstance(out, torch.Tensor) or out.shape != self.shape or out.dtype != self.dtype or \
            all(a == b for a, b, n in zip(out.stride(), self.stride(), self.shape) if n != 1):
        return func(*args, **kwargs)  # nothing to keep, or an op eager refuses in place: as it is
    return self.copy_(out)


def _one_hot(x, num_classes: int = -1):
    """``F.one_hot`` as the AOT path traces it (upstream's Python body, under the Python dispatcher): the
    comparison with ``arange``, after two ``aten._assert_async`` checks of the classes (lowered to kernels:
    [Note: value checks] in codegen/triton.py).  Eager's CPU kernel raises for a class outside
    ``[0, num_classes)``; its CUDA kernel's scatter stops with a device-side assert.  The C++ body we would
    trace otherwise has no check: a bad class gave a row of zeros.  ``num_classes=-1`` reads the largest
    class (a data-dependent size): left to the C++ body, as is an index tensor that is not int64 (which it
    refuses, as eager does)."""
    if num_classes == -1 or x.dtype != torch.long:
        return torch.nn.functional.one_hot(x, num_classes)
    # our own body: torch 2.11 (the GPU machine's) has no Python one_hot to reuse
    aten = torch.ops.aten
    aten._assert_async.msg(torch.all(x >= 0), "one_hot: Class values must be non-negative.")
    aten._assert_async.msg(torch.all(x < num_classes), "one_hot: Class values must be smaller than num_classes.")
    return (x.unsqueeze(-1) == torch.arange(num_classes, dtype=x.dtype, device=x.device)).to(torch.int64)


def _writes_overlapping_elements(func, args) -> bool:
    """Is ``func`` an in-place method writing a tensor with elements that share memory but no stride 0 (eager
    refuses those itself)?  ``c.as_strided((2, 2), (3, 3)).mul_(2)`` doubles the shared element twice in eager;
    functionalization, which only refuses the overlaps ATen can prove (``unfold``), wrote it back once.  Such a
    graph runs eagerly (``compile_fx._OVERLAPPING_MUTATION``)."""
    name = getattr(func, "__name__", "")
    if not (name.endswith("_") and not name.startswith("__") or name.startswith("__i") or name == "__setitem__") \
            or not args or not isinstance(args[0], torch.Tensor):
        return False
    size, stride = args[0].shape, args[0].stride()
    if not all(isinstance(v, int) for v in (*size, *stride)):
        return False
    if any(st == 0 for n, st in zip(size, stride) if n > 1):
        return name in _RUN_BY_EAGER_ON_AN_EXPAND  # [Note: in-place ops on an expanded tensor]
    if name == "__setitem__":
        return False
    reach = 0  # walking the dims from the smallest stride up, each passes the reach of those below (sufficient)
    for st, n in sorted((st, n) for n, st in zip(size, stride) if n > 1):
        if st <= reach:
            return _really_overlaps(size, stride)
        reach += st * (n - 1)
    return False


# in-place ops that read other elements of an operand than the one they write (an operand equal to the written
# tensor is read after earlier writes), unlike pointwise ones
_GATHERING_INPLACE = {"index_add_", "index_copy_", "index_put_", "scatter_", "scatter_add_", "scatter_reduce_",
                      "masked_scatter_", "put_", "index_reduce_"}


def _reads_what_it_writes(func, args, kwargs) -> bool:
    """Does an in-place method read memory it writes, other than element by element?  ``b.add_(b[:, 1:2])`` of a
    ``b`` with gaps (which eager does not check) reads column 1 after writing it for the later columns;
    ``b.detach().index_add_(0, index, b)`` reads rows it already changed.  The functional graph reads the old
    values: a wrong answer (AOT fuzz round).  Such a graph runs eagerly, as one that writes overlapping elements; a dense
    ``x.add_(x.t())`` raises in eager, and then in the eager run too."""
    name = getattr(func, "__name__", "")
    if not name.endswith("_") or name.startswith("__") or not args or not isinstance(args[0], torch.Tensor):
        return False
    dst = args[0]
    key = dst.untyped_storage()._cdata
    for a in (*args[1:], *kwargs.values()):
        if not isinstance(a, torch.Tensor) or a.untyped_storage()._cdata != key:
            continue
        same = (a.shape, a.stride(), a.storage_offset()) == (dst.shape, dst.stride(), dst.storage_offset())
        if (not same or name in _GATHERING_INPLACE) and _offsets_meet(a, dst):
            return True
    return False


def _outside_its_input(x, size, stride, storage_offset=None) -> bool:
    """Does ``x.as_strided(size, stride, storage_offset)`` reach storage elements that are none of ``x``'s?
    ``a.as_strided((2, 2), (1, 2))`` of ``a = x[:, ::2]`` reads ``x[0, 1]``: a functional graph knows ``a``'s
    elements only, and a write through the window did not reach ``x[0, 1]`` (AOT fuzz round).  Such a graph runs
    eagerly.  (Counted; False when too many to count or symbolic.)"""
    if not isinstance(x, torch.Tensor):
        return False
    window = _offsets(size, stride, x.storage_offset() if storage_offset is None else storage_offset)
    own = _offsets(x.shape, x.stride(), x.storage_offset())
    return window is not None and own is not None and not window <= own


def _offset_list(size, stride, start) -> list | None:
    """The storage offset of each element of a strided window, repeats included (None: too many to count, or
    symbolic)."""
    if not all(isinstance(v, int) for v in (*size, *stride, start)) or math.prod(size) > 1 << 16:
        return None
    offsets = [start]
    for n, st in zip(size, stride):
        offsets = [o + i * st for o in offsets for i in range(n)]
    return offsets


def _offsets(size, stride, start) -> set | None:
    """The storage offsets a strided window touches (None: too many to count, or symbolic)."""
    offsets = _offset_list(size, stride, start)
    return None if offsets is None else set(offsets)


def _offsets_meet(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do two tensors on one storage share an element (counted; False when too many to count or symbolic)?"""
    sets = [_offsets(t.shape, t.stride(), t.storage_offset()) for t in (a, b)]
    return all(o is not None for o in sets) and not sets[0].isdisjoint(sets[1])


# [Note: in-place ops on an expanded tensor]  Eager refuses most in-place ops on a tensor with stride 0 ("more
# than one element of the written-to tensor refers to a single memory location"), and so does our compiled graph
# when it writes the input back.  Those eager runs give wrong answers functionalized: ``masked_fill_``
# (deprecated there) depends on the element order (it filled elements whose mask was false in eager, none in the
# functional graph), and a write into an ``expand``ed view of an input (``c.unsqueeze(0).expand(2, 3, 4).zero_()``,
# ``fill_``, ``index_fill_``, ``e[1:] = v``) did not reach the input, or reached it summed over the copies
# (AOT fuzz round).  Such a graph runs eagerly.
_RUN_BY_EAGER_ON_AN_EXPAND = {"masked_fill_", "fill_", "zero_", "index_fill_", "__setitem__"}


def _really_overlaps(size, stride) -> bool:
    """Two elements at one offset (counted; the sufficient test above says nothing for ``(3, 4)``/``(7, 2)``)."""
    offsets = _offset_list(size, stride, 0)  # None: too many to count, left to functionalization
    return offsets is not None and len(set(offsets)) < len(offsets)


def _gapped_unfold(x, dimension: int, size: int, step: int):
    """``x.unfold(dimension, size, step)`` as the same window through ``as_strided``, when the windows leave
    elements of ``x`` out; else None (traced as ``unfold``).

    [Note: unfold under functionalization]  An in-place op on a view is traced as the op on a copy, written back
    into the base by the view's *inverse*; upstream's inverse of ``unfold`` is ``unfold_backward``, which is
    zero where no window reads.  ``c.unfold(0, 2, 3).mul_(2)`` of a ``c`` of 7 elements zeroed elements 2, 5
    and 6 (``torch.compile`` with ``aot_eager`` does too).  ``as_strided``'s inverse, ``as_strided_scatter``,
    keeps them.  Only where the windows share no element (``step >= size``: eager may write those) and no two
    elements of ``x`` share memory (``as_strided``'s gradient is taken over the storage: an expanded ``x``
    would get another gradient); a window that covers every element keeps ``unfold``, which fuses better
    (``as_strided`` needs its base in memory with eager's strides)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true as known

    from .reinplace import non_overlapping
    if x.dim() == 0 or not isinstance(size, int) or not isinstance(step, int) or step < size:
        return None
    dim = dimension % x.dim()
    n = x.shape[dim]
    if all(isinstance(v, int) for v in (*x.shape, *x.stride())):
        no_overlap = non_overlapping(x.shape, x.stride())
    else:  # symbolic: asking more would specialise the sizes
        no_overlap = torch._prims_common.is_non_overlapping_and_dense_or_false(x)
    # a symbolic ``n`` with ``step == size`` keeps ``unfold`` unless it is known to leave a tail: asking would
    # specialise ``x.unfold(0, 4, 4)``, and a gap there is only wrong if an in-place op writes through it
    tail = known((n - size) % step != 0) if not isinstance(n, int) else (n - size) % step != 0
    if known(n < size) or step == size and not tail or not no_overlap:
        return None
    shape, stride = list(x.shape), list(x.stride())
    shape[dim], stride[dim] = (n - size) // step + 1, stride[dim] * step
    return x.as_strided(shape + [size], stride + [x.stride(dim)], x.storage_offset())


_SHIFTS = {torch.Tensor.__lshift__, torch.Tensor.__rshift__, torch.Tensor.__rlshift__, torch.Tensor.__rrshift__,
           torch.bitwise_left_shift, torch.bitwise_right_shift, torch.Tensor.bitwise_left_shift,
           torch.Tensor.bitwise_right_shift}


def _shift_operands(a, b) -> tuple:
    dtype = torch.result_type(a, b)
    if dtype == torch.bool:  # eager refuses a bool result: leave it to the op
        return a, b
    return tuple(v.to(dtype) if isinstance(v, torch.Tensor) and v.dtype == torch.bool else v for v in (a, b))


# Binary ops whose fake (meta) kernel is a reference written as ``where(signbit(b), ...)`` or ``where(isnan(b),
# ...)``: its result took ``b``'s layout. Eager's TensorIterator gives ``a``'s (a transposed ``a`` and a
# broadcast ``b``: strides (1, 4) in eager, (3, 1) traced).
_WHERE_REFS = {torch.copysign, torch.Tensor.copysign, torch.xlogy, torch.Tensor.xlogy, torch.special.xlog1py}


def _tensor_iterator_layout(out, inputs):
    """``out`` copied into the strides eager's TensorIterator gives a pointwise op over ``inputs``."""
    from torch._prims_common import compute_elementwise_output_strides
    strides = compute_elementwise_output_strides(*[t.expand(out.shape) for t in inputs])
    if tuple(strides) == tuple(out.stride()):
        return out
    return torch.empty_strided(out.shape, strides, dtype=out.dtype, device=out.device).copy_(out)
