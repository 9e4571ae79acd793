"""Wrong answers found in the eighth session, each compiled and compared with eager, bit for bit where eager's
answer is a whole number.  Budget: a few seconds on 2 cores."""
import pytest
import torch

from .utils import check

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _floor_division_operands(dtype, scale):
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(4096, generator=g) * scale).to(dtype)
    b = (torch.rand(4096, generator=g) * 2 - 1).to(dtype)
    b[::97] = 0  # x // 0 is +-inf or nan, as eager's
    return a, b


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale", [1, 1000, 1e5])
def test_low_precision_floor_division_rounds_where_eager_does(dtype, scale):
    """[Note: floor division rounds where ATen's kernel does]  We computed ``a // b`` of fp16/bf16 in fp32 and
    rounded once; ATen's kernel rounds intermediate steps to the tensor's type -- on the CPU every step, on CUDA
    the floor and the floor plus one -- and a scalar divisor takes a third path.  Where the quotient passes 2048
    (fp16) or 256 (bf16) the answers differed: on the CPU every one of these six cases was wrong before (up to 301
    of 4096 elements), as was ``3.7 // b``, whose scalar dividend eager converts to the tensor's type first."""
    a, b = _floor_division_operands(dtype, scale)
    check(lambda a, b: (a // b, torch.div(a, b, rounding_mode="floor"), a // 0.3772, torch.floor_divide(a, -7.3),
                        3.7 // b, a // 0.0, a % b, torch.fmod(a, b)),
          a, b, atol=0, rtol=0, kernels=1, fallbacks=0)


def test_fp32_and_fp64_floor_division_stay_exact():
    """fp32/fp64 round no intermediate step on either device; the GPU divides with ``tl.div_rn`` (Triton's
    ``/`` is approximate there) and multiplies by a scalar divisor's reciprocal, as eager's CUDA kernel."""
    for dtype in (torch.float32, torch.float64):
        a, b = _floor_division_operands(dtype, 1e4)
        check(lambda a, b: (a // b, a // 0.3772, 3.7 // b, a // -7.3), a, b, atol=0, rtol=0, kernels=1,
              fallbacks=0)
