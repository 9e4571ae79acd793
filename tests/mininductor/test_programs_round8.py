"""Op-level programs an eighth corpus (~250 programs over integer and low-precision dtype corners, NaN/inf
semantics, reductions, indexing and scatters, matmul epilogues and norms) found wrong, each compiled and compared
with eager. Budget: a few seconds on 2 cores."""
import pytest
import torch

from .utils import DEVICE, check

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def test_signbit_of_negative_zero_and_nan():
    """``torch.signbit(-0.0)`` is True in eager; ours was ``x < 0``, False (program ``float_sign_nan``). The sign
    bit is read by a bitcast now, -NaN included."""
    x = torch.tensor([-1.0, -0.0, 0.0, 2.0, float("nan"), -float("nan"), float("inf"), -float("inf")])
    check(lambda x: (torch.signbit(x), torch.signbit(x.half()), torch.signbit(x.double()), torch.signbit(x.int())),
          x, kernels=1, fallbacks=0)


def test_pow_special_cases_follow_c():
    """``pow(1, nan)`` is 1 and ``pow(-0.0, -1)`` is -inf in eager (C's pow); ``exp(b * log(a))`` gave NaN and
    +inf (program ``pow_zero_zero``)."""
    a = torch.tensor([0., 0., -0., 2., -2., float("nan"), 1., 1., -1., -1., -0., -0., -0., -0.5, 3.])
    b = torch.tensor([0., -1., 0.5, float("inf"), 0.5, 0., float("nan"), float("inf"), float("inf"),
                      -float("inf"), -1., 3., -2., float("inf"), -2.])
    check(lambda a, b: (torch.pow(a, b), torch.pow(a.double(), b.double())), a, b, kernels=1, fallbacks=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_python_scalars_convert_like_eager(dtype):
    """[Note: Python scalars in fp16/bf16 ops] ``x16 - 2049`` subtracts fp16(2049) = 2048 on the CPU, ``x16 % 0.3``
    divides by fp16(0.3), and ``add(a, b, alpha=0.3)`` rounds alpha and then the result once; ours kept the fp32
    scalar, or rounded ``b * alpha`` first (programs ``f16_mul_scalar_exact``, ``f16_floordiv_scalar``,
    ``bf16_add_alpha``: up to 2.0 off). mul and div read the scalar (or a 0-dim second operand) in fp32, which
    must stay so. 256 elements: eager's scalar loop over a vector's tail rounds ``b * alpha`` on its own."""
    torch.manual_seed(0)
    a, b = (torch.randn(256) * 100).to(dtype), (torch.randn(256) * 3).to(dtype)
    if DEVICE == "cpu":  # on CUDA add/sub read the scalar in fp32 (opmath): checked there by the same program
        check(lambda a, b: (a - 2049, a + 0.3, 0.3 - a, torch.add(a, b, alpha=0.3), torch.sub(a, b, alpha=0.3),
                            torch.rsub(a, 2.7, alpha=0.3)), a, b, atol=0, rtol=0, fallbacks=0)
    check(lambda a, s: (a % 0.3, torch.fmod(a, 0.3), a == 0.2998, a * 2049, a * 0.1, a / 0.3, a // 0.3, a * s, a / s),
          a, torch.tensor(0.1), atol=0, rtol=0, fallbacks=0)
