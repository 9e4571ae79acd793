"""Op-level programs a seventh corpus (~100 programs over masked_fill/where, integer division of negatives,
bitwise int8/uint8, mixed-dtype comparisons, scans and sorts, gathers and scatters, softmax/norm families,
attention with masks, shape ops; plus fuzzing of eager output strides and split column reductions) found wrong,
each compiled and compared with eager. Budget: a few seconds on 2 cores."""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
import mininductor
from mininductor import metrics

from .utils import DEVICE, check

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _strides(t):  # a size-1 dim's stride is never used: eager and we may differ there
    return [s for s, n in zip(t.stride(), t.shape) if n != 1]


def test_any_all_of_uint8_are_uint8(monkeypatch):
    """``u.any(0)`` of a uint8 tensor is uint8 in eager (a legacy rule), ours was bool (programs
    ``any_torch.uint8_96``, unsplit and split column reductions alike)."""
    monkeypatch.setattr(mininductor.config, "split_outer_reduction_min_rows", 64)
    monkeypatch.setattr(mininductor.config, "split_outer_reduction_block_rows", 32)
    u = torch.randint(0, 3, (96, 7), dtype=torch.uint8)
    check(lambda u: (u.any(0), u.all(0), u[:5].any(1), u.all(), u.bool().any(0)), u, fallbacks=0)


def test_circular_pad_is_functionalized():
    """``F.pad(x, mode="circular")`` traces (through the CompositeImplicit ``_pad_circular``) to ``copy_`` into
    slices of an ``empty``, which functionalization did not see: the copies fell back and wrote into a buffer the
    output never read -- all zeros (program ``pad_circular``). The graph is now functionalized again."""
    x = torch.randn(3, 4)
    check(lambda x: F.pad(x.unsqueeze(0), (1, 2), mode="circular") * 2, x, fallbacks=0)
    check(lambda x: F.pad(x[None, None], (1, 1, 2, 1), mode="circular"), x, fallbacks=0)


def test_out_of_range_integer_scalars_wrap_like_eager():
    """``int8 < 300``, ``uint8 + 300``, ``int32 * 2**33``: eager casts the scalar to the tensor's dtype, wrapping
    (300 -> 44); the kernel's ``tl.full(.., 300, tl.int8)`` raised OverflowError (``cmp_int_float_scalar``)."""
    a = torch.tensor([0, 43, 44, 45, -1, 127, -128], dtype=torch.int8)
    check(lambda a: (a < 300, a + 300, a - 128, a == 300, a.to(torch.uint8) + 300, a.to(torch.uint8) < 300,
                     a.int() * 2 ** 33, (a.to(torch.int8) - 128).abs()), a, kernels=1, fallbacks=0)


def test_float_fmod_remainder_and_floor_division_are_exact():
    """``a - trunc(a / b) * b`` rounds ``a / b`` first: ``fmod(-21.0, 0.6)`` gave 0.6 where eager's gives ~0
    (program ``float_fmod_neg``). Now ``fmod`` is Triton's ``%`` (frem, exact), ``remainder`` and ``//`` are
    ATen's formulas over it, as eager's ``div_floor_floating``."""
    a = (torch.arange(-40, 41).float() * 0.7).view(-1, 1)
    b = (torch.arange(-9, 10).float() * 0.3).view(1, -1)
    check(lambda a, b: (torch.fmod(a, b), torch.remainder(a, b), a // b, torch.div(a, b, rounding_mode="floor"),
                        a % 0.3, a // -0.3, a.half() % b.half(), a.double() // b.double()), a, b,
          fallbacks=0)


def test_output_realised_early_keeps_eager_strides():
    """An output that an extern kernel reads (``y @ w``) was realised row-major by the matmul before the output
    could ask for eager's strides; a view of a mutated transposed input (``x.t().add_(1)`` returns
    ``add.t().t()``) kept its base row-major (programs ``mm_of_t_output``, ``inplace_t_add``)."""
    def read_by_mm(a, w):
        y = a.t() * 2
        return y, y @ w

    def fns():
        yield read_by_mm, (torch.randn(5, 4), torch.randn(5, 6))
        yield lambda x: x.t().add_(1), (torch.randn(4, 5),)
        yield lambda x: x.permute(2, 0, 1).mul_(2), (torch.randn(3, 4, 5),)
        yield lambda x, y: x.permute(1, 0).copy_(y), (torch.randn(4, 5), torch.randn(5, 4))
    for fn, args in fns():
        args = [a.to(DEVICE) for a in args]
        compiled = check(fn, *args, fallbacks=0)
        ours, theirs = compiled(*[a.clone() for a in args]), fn(*[a.clone() for a in args])
        ours, theirs = (ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,))
        assert [_strides(o) for o in ours] == [_strides(t) for t in theirs]


def test_dynamic_outputs_keep_eager_strides():
    """A symbolic compile kept row-major outputs (``x.t().sin()`` with ``dynamic=True``); now its strides are
    the traced ``SymInt`` strides, checked dense structurally (``Max(1, (s27 + 1)//2)`` of a sliced dim too)."""
    cases = [(lambda x: x.t().sin() + 1, lambda n: torch.randn(n, 4)),
             (lambda x: x.permute(2, 0, 1) * 2, lambda n: torch.randn(n, 4, 3)),
             (lambda x: x * 2 + 1, lambda n: torch.randn(n, 3, 4, 5).contiguous(memory_format=torch.channels_last)),
             (lambda x: x[:, ::2].t() * 3, lambda n: torch.randn(n, 8))]
    for fn, make in cases:
        minidynamo.reset()
        compiled = minidynamo.minicompile(fn, dynamic=True)
        for n in (5, 6, 9):
            x = make(n).to(DEVICE)
            ours, theirs = compiled(x), fn(x)
            torch.testing.assert_close(ours, theirs)
            assert _strides(ours) == _strides(theirs), (ours.stride(), theirs.stride())
        assert minidynamo.counters["stats"]["unique_graphs"] == 1
    assert metrics.fallback_count == 0


def test_outputs_of_decomposed_ops_keep_eager_strides():
    """A decomposition need not keep eager's strides: ``x.repeat`` is a permuted view of an expanded clone, so the
    traced ``repeat(x) + x`` had strides (6, 24, 1) where eager's result is row-major (``repeat_expand``). The
    strides recorded before decomposing (a fake run of the graph) win."""
    x = torch.randn(4, 6, device=DEVICE)
    cases = [(lambda x: x[:, None].repeat(1, 3, 1) + x[:, None], x),
             (lambda x: x.t().repeat(2, 1) * 2, x)]
    for fn, arg in cases:
        compiled = check(fn, arg, fallbacks=0, atol=1e-5, rtol=1e-4)
        assert _strides(compiled(arg.clone())) == _strides(fn(arg))
        minidynamo.reset()
        train = arg.clone().requires_grad_(True)
        assert _strides(minidynamo.minicompile(fn)(train)) == _strides(fn(arg))
