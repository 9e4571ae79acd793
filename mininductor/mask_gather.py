"""Mask gather: ``a[m]`` for a 1-D boolean mask in one Triton kernel, for the translator's native stretches.

In:  a contiguous tensor ``a``, a 1-D boolean mask ``m`` over its first dimension, and ``n``, how many of ``m``'s
elements are true (the caller has waited for the device to learn it).
Out: ``a[m]`` -- a new contiguous ``(n, *a.shape[1:])`` tensor of ``a``'s rows where ``m`` is true, in order.

[Note: mask gather]  Eager runs ``a[m]`` as advanced indexing by ``m.nonzero()``: ``nonzero`` counts the true
elements (its kernels, a copy to the host, a wait for the device), allocates and fills an index tensor, and
``index`` gathers the rows.  The translator's native stretch ([Note: native stretch] in minidynamo/native_stretch.py)
ran the tutorial MoE's two subscripts per expert that way, sharing one ``nonzero`` ([Note: shared nonzero]): 24.8 us
of host time for ``nonzero`` and 12.5 for each ``index_select`` on an H200 host, for a few bytes of work.  Once the
count is known the rows need no index: a kept element ``i`` of the mask goes to row ``cumsum(m)[i] - 1`` of the
output.  So the stretch counts the mask once (``count``: one small kernel, then ``item``, which waits for the
device as ``nonzero`` did) and each subscript is then an allocation and one launch of ``mask_gather_kernel``, whose
programs each take a block of columns and every row, the mask's exclusive prefix sum (``tl.cumsum``) giving each
kept row its output row.  Measured there: the count 14.9 us (``int(m.sum())``, torch's reduction, took 2.5x as
long), a gather 6.9; the expert's mask, count and two subscripts 41.3 us against 53.9, the MoE's eval forward 11%
faster (docs/benchmarks.md).  Values are copied bit for bit and the result is a new contiguous tensor, as eager's.
Upstream keeps such ops in the graph instead (``capture_dynamic_output_shape_ops``) and falls back to ATen's
``nonzero`` there.  (Later the count itself mostly went: where the mask is ``t == k``, the translator's stretch
reads it from one table of ``t``'s values per loop, [Note: equality masks counted once] in
minidynamo/native_stretch.py; ``mask_gather`` then writes no row beyond the ``n`` it is given.)

The prefix sum is taken over a 1-D block, then broadcast over the columns: the same scan over a ``[RBLOCK, 1]``
block failed this module's tests on the GPU with Triton 3.6 wherever a program had more than one column (the
interpreter passed them; tests/mininductor/test_mask_gather.py).  Only a contiguous mask of at most ``MAX_MASK``
elements (one block) and the dtypes Triton copies are taken; the caller
(``minidynamo.native_stretch.mask_subscript``) decides the rest -- grad mode, layout, device -- and keeps eager's
ops for anything else.
"""
from __future__ import annotations

import types

import torch

from .indexing import contiguous_strides
from .runtime import KernelLauncher, current_cuda_device, empty_strided_cuda, load_module

MAX_MASK = 4096  # the mask's prefix sum is one block: RBLOCK = next_power_of_2(len(m))
DTYPES = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.uint8,
                    torch.int8, torch.int16, torch.int32, torch.int64})


# Loaded like a graph's kernels (``runtime.load_module``: Triton reads a kernel's source from its file, and on
# the CPU it must be defined under the interpreter).
KERNEL_SOURCE = """\
import triton
import triton.language as tl


@triton.jit
def mask_count_kernel(mask_ptr, out_ptr, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    # one program: out[0] = the number of true elements of the mask
    rindex = tl.arange(0, RBLOCK)
    keep = tl.load(mask_ptr + rindex, mask=rindex < rnumel, other=0) != 0
    tl.store(out_ptr, tl.sum(keep.to(tl.int32), 0))


@triton.jit
def copy_kept_rows(keep, in_ptr, out_ptr, nrows, xnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    # rows (the mask's axis) along r, columns along x: out[cumsum(keep)[r] - 1, x] = in[r, x] where keep[r]; out
    # has nrows rows, and no row beyond them is written whatever keep holds
    rindex = tl.arange(0, RBLOCK)
    count = keep.to(tl.int32)
    row = tl.cumsum(count, 0) - count  # exclusive prefix sum: the output row of each kept row
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    where = (keep & (row < nrows))[:, None] & (xindex < xnumel)
    value = tl.load(in_ptr + (rindex[:, None] * xnumel + xindex), mask=where)
    tl.store(out_ptr + (row[:, None] * xnumel + xindex), value, mask=where)


@triton.jit(do_not_specialize=["nrows"])
def mask_gather_kernel(mask_ptr, in_ptr, out_ptr, nrows, xnumel, rnumel, XBLOCK: tl.constexpr,
                       RBLOCK: tl.constexpr):
    rindex = tl.arange(0, RBLOCK)
    keep = tl.load(mask_ptr + rindex, mask=rindex < rnumel, other=0) != 0
    copy_kept_rows(keep, in_ptr, out_ptr, nrows, xnumel, XBLOCK, RBLOCK)


@triton.jit(do_not_specialize=["nrows"])
def mask_gather_pair_kernel(mask_ptr, in0_ptr, out0_ptr, in1_ptr, out1_ptr, nrows, xnumel, rnumel,
                            XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    # mask_gather_kernel for two tensors of as many columns, subscripted by the same mask: one launch
    rindex = tl.arange(0, RBLOCK)
    keep = tl.load(mask_ptr + rindex, mask=rindex < rnumel, other=0) != 0
    copy_kept_rows(keep, in0_ptr, out0_ptr, nrows, xnumel, XBLOCK, RBLOCK)
    copy_kept_rows(keep, in1_ptr, out1_ptr, nrows, xnumel, XBLOCK, RBLOCK)


@triton.jit(do_not_specialize=["key", "nrows"])
def mask_gather_eq_kernel(t_ptr, key, in_ptr, out_ptr, nrows, xnumel, rnumel, XBLOCK: tl.constexpr,
                          RBLOCK: tl.constexpr):
    # mask_gather_kernel for the mask t == key, compared here (the mask is never made)
    rindex = tl.arange(0, RBLOCK)
    keep = (tl.load(t_ptr + rindex, mask=rindex < rnumel, other=0) == key) & (rindex < rnumel)
    copy_kept_rows(keep, in_ptr, out_ptr, nrows, xnumel, XBLOCK, RBLOCK)


@triton.jit(do_not_specialize=["key", "nrows"])
def mask_gather_pair_eq_kernel(t_ptr, key, in0_ptr, out0_ptr, in1_ptr, out1_ptr, nrows, xnumel, rnumel,
                               XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    rindex = tl.arange(0, RBLOCK)
    keep = (tl.load(t_ptr + rindex, mask=rindex < rnumel, other=0) == key) & (rindex < rnumel)
    copy_kept_rows(keep, in0_ptr, out0_ptr, nrows, xnumel, XBLOCK, RBLOCK)
    copy_kept_rows(keep, in1_ptr, out1_ptr, nrows, xnumel, XBLOCK, RBLOCK)
"""

_launchers: dict[tuple, KernelLauncher] = {}


def supports(a: torch.Tensor, m: torch.Tensor) -> bool:
    """Can ``count`` and ``mask_gather`` compute ``a[m]``?  (``a`` contiguous, ``m`` a 1-D mask over its first
    dimension on its device -- checked by the caller.)  The kernels read the mask as contiguous too, and a CUDA
    tensor must be on the current device, where they run and allocate."""
    return 0 < m.numel() <= MAX_MASK and m.is_contiguous() and a.dtype in DTYPES and 0 < a.numel() < 2 ** 31 and \
        (not a.is_cuda or current_cuda_device is not None and a.get_device() == current_cuda_device())


def count(m: torch.Tensor) -> int:
    """How many elements of the 1-D mask ``m`` are true: one small kernel and a copy to the host (which waits
    for the device).  ``int(m.sum())`` is the same number for twice the host time."""
    out = _empty((1,), torch.int32, m)
    _launcher("mask_count_kernel", m.numel(), 1, None, m.is_cuda).run(m, out, 1, m.numel())
    return out.item()


def mask_gather(a: torch.Tensor, m: torch.Tensor, n: int, key: int | None = None) -> torch.Tensor:
    """``a[m]`` where ``m`` has ``n`` true elements ([Note: mask gather]); given ``key``, ``a[m == key]`` of the
    integer tensor ``m``, compared in the kernel (``key`` within ``m``'s dtype: [Note: masks the graph does not
    make] in minidynamo/native_stretch.py)."""
    out = _empty((n, *a.shape[1:]), a.dtype, a)
    if n:
        rows = m.numel()
        columns = a.numel() // rows
        if key is None:
            _launcher("mask_gather_kernel", rows, columns, a.dtype, a.is_cuda).run(m, a, out, n, columns, rows)
        else:
            _launcher("mask_gather_eq_kernel", rows, columns, (m.dtype, a.dtype), a.is_cuda).run(
                m, key, a, out, n, columns, rows)
    return out


def mask_gather_pair(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor, n: int,
                     key: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a[m], b[m])`` where ``m`` has ``n`` true elements, in one launch (``m == key`` given ``key``, as
    ``mask_gather``); ``a`` and ``b`` have as many elements per row (``pairs``), and ``supports`` takes each
    ([Note: both subscripts in one launch] in minidynamo/native_stretch.py)."""
    out_a, out_b = _empty((n, *a.shape[1:]), a.dtype, a), _empty((n, *b.shape[1:]), b.dtype, b)
    if n:
        rows = m.numel()
        columns = a.numel() // rows
        if key is None:
            _launcher("mask_gather_pair_kernel", rows, columns, (a.dtype, b.dtype), a.is_cuda).run(
                m, a, out_a, b, out_b, n, columns, rows)
        else:
            _launcher("mask_gather_pair_eq_kernel", rows, columns, (m.dtype, a.dtype, b.dtype), a.is_cuda).run(
                m, key, a, out_a, b, out_b, n, columns, rows)
    return out_a, out_b


def pairs(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> bool:
    """Can ``mask_gather_pair`` take ``a[m]`` and ``b[m]`` together, where ``supports(a, m)`` holds?  On ``a``'s
    device, with as many elements, ``b`` is then supported if Triton copies its dtype."""
    return type(b) is torch.Tensor and b.dim() >= 1 and b.shape[0] == m.shape[0] and b.is_contiguous() and \
        b.device == a.device and b.numel() == a.numel() and b.dtype in DTYPES


def prefetch(a: torch.Tensor, m: torch.Tensor, b: torch.Tensor | None = None, t: torch.Tensor | None = None) -> bool:
    """Start compiling the kernels that ``count(m)`` and ``mask_gather(a, m, n)`` -- or, given ``b``,
    ``mask_gather_pair(a, b, m, n)`` -- will launch, on mininductor's compile pool, and return at once (True if it
    started); given the integer tensor ``t`` of a mask ``t == k`` left unmade, also the kernel that compares in
    its launch.  ``a``, ``m`` and ``t`` are the translator's example values
    (fake tensors: only dtype, shape and device are read, and only concrete sizes -- reading a symbolic one
    would guard on it).

    [Note: prefetched mask kernels]  Each kernel here is compiled at its first launch, like any Triton kernel
    without ``async_compile``: for the tutorial MoE's first expert that was three compiles one after another on
    the main thread (the count, and a gather for each of the two dtypes: 0.3 s of its first call on an H200
    host).  The translator knows them earlier: when it emits a native stretch's mask subscripts ([Note: native
    stretch] in minidynamo/native_stretch.py), before the graph in front of them is even compiled.  So it calls
    this, and the kernels compile on the pool while that graph is compiled and run; the launch then finds them
    in Triton's in-memory cache.  A guess that turns out wrong (another device, a grad mode that changed in
    between) only wastes a background compile: the launch compiles what it needs, as before."""
    from . import async_compile
    if not (a.is_cuda and m.dim() == 1 and m.dtype == torch.bool and a.dim() >= 1
            and async_compile.compile_threads() > 1):
        return False
    if not all(isinstance(n, int) for n in (*a.shape, *m.shape)) or a.shape[0] != m.shape[0] or not supports(a, m):
        return False
    rows = m.shape[0]
    columns = a.numel() // rows
    launchers = {"mask_count_kernel": (_launcher("mask_count_kernel", rows, 1, None, True),
                                       [torch.bool, torch.int32, 1, rows])}
    if b is None:
        launchers["mask_gather_kernel"] = (_launcher("mask_gather_kernel", rows, columns, a.dtype, True),
                                           [torch.bool, a.dtype, a.dtype, 2, columns, rows])
    elif b.shape[:1] == a.shape[:1] and all(isinstance(n, int) for n in b.shape) and b.numel() == a.numel() and \
            b.is_contiguous() and supports(b, m):
        launchers["mask_gather_pair_kernel"] = (
            _launcher("mask_gather_pair_kernel", rows, columns, (a.dtype, b.dtype), True),
            [torch.bool, a.dtype, a.dtype, b.dtype, b.dtype, 2, columns, rows])
    else:  # the two will not pair (mask_subscript asks ``pairs``): each subscript's own kernel
        launchers["mask_gather_kernel"] = (_launcher("mask_gather_kernel", rows, columns, a.dtype, True),
                                           [torch.bool, a.dtype, a.dtype, 2, columns, rows])
        prefetch(b, m, t=t)
    # a mask t == k left unmade: the kernel that compares t itself (2 stands for any key)
    if t is not None and all(isinstance(n, int) for n in t.shape) and t.shape == m.shape and t.is_contiguous():
        if "mask_gather_pair_kernel" in launchers:
            launchers["mask_gather_pair_eq_kernel"] = (
                _launcher("mask_gather_pair_eq_kernel", rows, columns, (t.dtype, a.dtype, b.dtype), True),
                [t.dtype, 2, a.dtype, a.dtype, b.dtype, b.dtype, 2, columns, rows])
        else:
            launchers["mask_gather_eq_kernel"] = (
                _launcher("mask_gather_eq_kernel", rows, columns, (t.dtype, a.dtype), True),
                [t.dtype, 2, a.dtype, a.dtype, 2, columns, rows])
    module = types.SimpleNamespace(**{name: launcher for name, (launcher, _) in launchers.items()})
    device = a.device.index if a.device.index is not None else torch.cuda.current_device()
    async_compile.precompile(module, {name: sig for name, (_, sig) in launchers.items()}, wait=False, device=device)
    return True


def _launcher(name: str, rows: int, columns: int, dtype, cuda: bool) -> KernelLauncher:
    """The launcher of kernel ``name`` for masks of ``rows`` elements (one block: ``RBLOCK >= rows``) and rows of
    ``columns`` elements of ``dtype`` (for the pair's kernel, a tuple of both tensors' dtypes); made once per key
    (Triton compiles a binary per dtype)."""
    key = (name, rows, columns, dtype, cuda)
    launcher = _launchers.get(key)
    if launcher is None:
        kernel = getattr(load_module(KERNEL_SOURCE, interpret=not cuda), name)
        launcher = _launchers[key] = KernelLauncher(kernel, "per", columns, rows, "cuda" if cuda else "cpu",
                                                    symbolic=True)
    return launcher


def _empty(shape: tuple, dtype: torch.dtype, like: torch.Tensor) -> torch.Tensor:
    """A new contiguous tensor on ``like``'s device; on the GPU through torch's C++ allocation call ([Note:
    allocating on the GPU] in runtime.py: ``supports`` made sure that ``like`` is on the current device)."""
    if like.is_cuda and empty_strided_cuda is not None:
        stride = (1,) if len(shape) == 1 else tuple(contiguous_strides(shape))  # the MoE's are all 1-D
        return empty_strided_cuda(shape, stride, dtype)
    return torch.empty(shape, dtype=dtype, device=like.device)
