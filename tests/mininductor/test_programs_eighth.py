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


@pytest.mark.skipif(__import__("os").environ.get("MININDUCTOR_TEST_DEVICE", "cpu") != "cpu",
                    reason="on the GPU a bad index is a device-side assert, tested in a child process: test_device_asserts.py")
def test_out_of_range_indices_raise_like_eager_instead_of_crashing():
    """[Note: out-of-range indices]  ``x[i]`` with ``i`` out of range raises in eager; interpreted, our kernel read
    host memory past the tensor: garbage for an index of 20, a segfault for 10**7 (op corpus round 8 and the lead).
    Interpreted kernels now check their indices and raise an error that is both ``IndexError`` and
    ``RuntimeError``, whichever eager raises; in-range and negative indices still work."""
    import torch.nn.functional as F

    from .utils import compile_fn
    x, w = torch.randn(16, 8), torch.randn(16, 4)
    programs = {
        "subscript": lambda x, i: x[i] * 2,
        "gather": lambda x, i: torch.gather(x, 0, i.view(-1, 1).expand(-1, 8)),
        "embedding": lambda x, i: F.embedding(i, w),
        "index_select": lambda x, i: x.index_select(0, i),
        "index_put": lambda x, i: x.clone().index_put_((i,), torch.ones(8)),
        "index_add": lambda x, i: x.clone().index_add_(0, i, torch.ones(2, 8)),
        "scatter": lambda x, i: x.clone().scatter_(0, i.view(-1, 1).expand(-1, 8), 1.0),
    }
    for name, fn in programs.items():
        compiled = compile_fn(fn, x, torch.tensor([1, 2]))
        for values in ([3, 5], [3, -1], [0, 20], [0, -17], [0, 10**7]):  # -1: x[i] allows it, gather does not
            i = torch.tensor(values)
            try:
                expected = fn(x, i)
            except (IndexError, RuntimeError) as e:
                with pytest.raises(type(e)):
                    compiled(x, i)
            else:
                torch.testing.assert_close(compiled(x, i), expected, msg=lambda m, name=name: f"{name}: {m}")
