"""Wrong answers found in the eighth session, each compiled and compared with eager, bit for bit where eager's
answer is a whole number.  Budget: a few seconds on 2 cores."""
import contextlib

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


def test_zero_dim_cpu_tensors_meet_device_tensors():
    """[Note: CPU scalars]  A 0-dim CPU tensor may meet device tensors, as the tutorial MoE's loop variable does
    (``flat_indices == expert_idx``).  On the GPU a kernel takes its value (``x.item()``, no copy to the device),
    and one compiled graph serves every value, 1 and multiples of 16 included (no specialization); a matmul or a
    mutation still gets the tensor.  On the CPU the same programs run through the interpreter."""
    from mininductor import config, metrics

    from .utils import DEVICE, MODE, assert_same, compile_fn
    x, w = torch.randn(64, 8, device=DEVICE), torch.randn(8, 8, device=DEVICE)
    idx = torch.randint(0, 20, (64,), device=DEVICE)

    def by_value(x, idx, i, f):
        return idx == i, x * f + i, (idx + i).sum()

    def needs_the_tensor(x, w, i, f):
        return (x * f) @ (w * f), f + 1  # a matmul reads f * w; an output is f + 1 (a CPU-scalar graph output)

    def mutated(x, i):
        i.add_(1)
        return x * i

    with config.patch(mode=MODE) if MODE else contextlib.nullcontext():
        metrics.reset()
        compiled = compile_fn(by_value, x, idx, torch.tensor(3), torch.tensor(0.5))
        for value in (0, 1, 3, 16, 17, 2**40):
            i, f = torch.tensor(value), torch.tensor(value / 7, dtype=torch.float32)
            assert_same(compiled(x, idx, i, f), by_value(x, idx, i, f), 1e-5, 1e-5)
        if DEVICE == "cuda" and MODE is None:
            assert ".item()" in compiled.source and ".to('cuda" not in compiled.source, compiled.source
        compiled = compile_fn(needs_the_tensor, x, w, torch.tensor(3), torch.tensor(0.5))
        assert_same(compiled(x, w, torch.tensor(2), torch.tensor(0.25)),
                    needs_the_tensor(x, w, torch.tensor(2), torch.tensor(0.25)), 1e-5, 1e-5)
        compiled = compile_fn(mutated, x, torch.tensor(3))
        ours, theirs = torch.tensor(5), torch.tensor(5)
        assert_same(compiled(x, ours), mutated(x, theirs), 1e-5, 1e-5)
        assert ours.item() == theirs.item() == 6 and ours.device.type == "cpu"
        assert metrics.fallback_count == 0
