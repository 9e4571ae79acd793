"""Integer and bool arithmetic like eager: ``bool + bool`` is a logical or, shifts (``<<``/``>>``, arithmetic
right shifts of negatives, bool operands), and Python scalars out of an integer dtype's range wrap as eager casts
them. Found by the op corpora. Budget: a few seconds on 2 cores."""
import pytest
import torch

import minidynamo

from .utils import DEVICE, check, raises_like_eager

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def test_bool_add_is_logical_or():
    """``b + c`` on bool tensors is True where either is: Triton's int1 add wrapped True + True to False
    (program ``m_bool_uint8``)."""
    b, c = torch.rand(5, 7) > 0.5, torch.rand(5, 7) > 0.5
    check(lambda b, c: (b + c, b + c + b, (b + c).int() * 3, b.add(True), b + c.to(torch.uint8)), b, c,
          kernels=1, fallbacks=0)


def test_shift_operators_lower_like_bitwise_shifts():
    """``a << s`` and ``a >> 2`` trace to ``aten.__lshift__``/``__rshift__``, which had no lowering: every shift
    was an eager fallback (programs ``i_shifts``, ``i_int8_wrap_neg``). Arithmetic right shift of negatives, uint8,
    and int32 promoted by an int64 shift amount."""
    a = torch.tensor([[5, -7, 1, -1, 100, -128]], dtype=torch.int32).repeat(3, 1)
    s = torch.tensor([0, 3, 7, 8, 2, 1], dtype=torch.int32)
    check(lambda a, s: (a << s, a >> s, a >> 2, a.to(torch.int8) >> 1, a.to(torch.uint8) >> s.to(torch.uint8),
                        a << s.long(), a.long() << 40), a, s, kernels=1, fallbacks=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_shifts_by_the_width_or_more_or_by_a_negative_amount_are_eagers(dtype):
    """[Note: shifts by the width or more]: eager gives 0 for a left shift and the sign fill for a right shift;
    compiled for the GPU, ``int32 >> 40`` was ``a >> 8`` (lowering fuzz on CUDA, seed 910117)."""
    info = torch.iinfo(dtype)
    a = torch.tensor([info.min, -5, -1, 0, 1, 7, 100, info.max], dtype=torch.int64).to(dtype).repeat(16)
    s = (torch.arange(-8, 120) if dtype.is_signed else torch.arange(0, 256, 2)).to(dtype)
    check(lambda a, s: (a >> s, a << s, a >> 70 % info.bits + info.bits, a << info.bits), a, s, kernels=1,
          fallbacks=0)


@pytest.mark.skipif(DEVICE == "cpu", reason="eager's CPU kernels raise ZeroDivisionError (tested elsewhere)")
@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_integer_division_by_zero_gives_what_eagers_cuda_kernels_give(dtype):
    """[Note: integer division by zero on CUDA]: -1 (2**32 - 1 for small non-negative int64), one less for a
    negative floor quotient; our kernels gave 0, 1 or ``x`` itself, varying by op (lowering fuzz on CUDA,
    seeds 900066, 900308, 910813). A divisor tensor holding zeros, and a scalar 0."""
    a = torch.tensor([-7, -1, 0, 1, 7, 100] + ([2**40, -2**40, 2**32 - 1, 2**32, -2**63] if dtype == torch.int64
                                                else []), dtype=torch.int64).to(dtype)
    b = torch.zeros_like(a)
    b[::3] = 3
    check(lambda a, b: (torch.div(a, b, rounding_mode="trunc"), a // b, a % b, torch.fmod(a, b), a // 0, a % 0),
          a, b, kernels=1, fallbacks=0)


def test_shifts_of_bool_tensors_run_as_eager():
    """``mask << 1`` is int64 and ``x16 >> mask`` int16 in eager; the fake kernels refuse a bool operand, so
    the compile raised "lshift: Expected input tensor to have an integral dtype" (random programs ``rnd183``,
    ``rnd317``)."""
    mask, x = torch.rand(5, 3) > 0.5, torch.randint(0, 100, (5, 3), dtype=torch.int16)
    check(lambda m, x: (m << 1, m >> 1, x << m, x >> m, torch.bitwise_left_shift(m, 2), 3 << m, m << x % 4), mask, x,
          kernels=1, fallbacks=0)
    y = torch.randint(-3, 4, (6,), dtype=torch.int8)
    dynamo = minidynamo.minicompile(lambda y: (y > 0) << 2)
    assert torch.equal(dynamo(y), (y > 0) << 2)


def test_out_of_range_integer_scalars_wrap_like_eager():
    """``int8 < 300``, ``uint8 + 300``, ``int32 * 2**33``: eager casts the scalar to the tensor's dtype, wrapping
    (300 -> 44); the kernel's ``tl.full(.., 300, tl.int8)`` raised OverflowError (``cmp_int_float_scalar``)."""
    a = torch.tensor([0, 43, 44, 45, -1, 127, -128], dtype=torch.int8)
    check(lambda a: (a < 300, a + 300, a - 128, a == 300, a.to(torch.uint8) + 300, a.to(torch.uint8) < 300,
                     a.int() * 2 ** 33, (a.to(torch.int8) - 128).abs()), a, kernels=1, fallbacks=0)


def test_integer_pow_with_a_negative_exponent_raises_like_eager():
    """``t ** -1`` on an integer tensor raises in eager whatever the values; repeated squaring then
    ``reciprocal`` computed garbage (``[0, 0, INT64_MIN]`` for ``[7, -7, 0]``). It falls back, so eager's
    error is raised; a float tensor, or a positive exponent, still lowers."""
    a = torch.tensor([7, -7, 0, 1])
    raises_like_eager(lambda p: p ** -1, a, fallbacks=1)
    raises_like_eager(lambda p: (p + 1).to(torch.int8) ** -2, a, fallbacks=1)
    check(lambda p: (p.float() ** -2, p ** 3, (p > 0) ** 2), a, kernels=1, fallbacks=0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_the_extreme_of_a_narrow_integer_row_keeps_its_dtype(dtype):
    """Triton's ``tl.max`` widens an 8- or 16-bit block to int32, so ``x // x.amax(1)`` on uint8 divided a uint8
    by an int32, which Triton refuses to compile ([Note: narrow integer reductions]; lowering fuzz, seed 57864).
    The maximum fused with its uses, persistent and looped (1025 columns), and the minimum."""
    low = 0 if dtype == torch.uint8 else -50
    for cols in (5, 1025):
        x = torch.randint(low, 100, (3, cols), dtype=dtype)
        x[:, 0] = 7  # no zero divisor
        check(lambda x: (x // x.amax(1, keepdim=True), x % x.amax(1, keepdim=True), x.amin(1) // 3,
                         x.amax(1) - x[:, 0]), x, fallbacks=0)
