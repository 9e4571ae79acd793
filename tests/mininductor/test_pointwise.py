"""Pointwise lowerings vs eager on irregular shapes: unary/binary math, comparisons, logical ops, where, clamp,
pow, casts (fp16/bf16 computed in fp32), scalars, broadcasting, integer division and NaN semantics; a negative
constant base of ``**``, and 0-d CPU tensors as operands of device kernels ([Note: CPU scalars])."""
import contextlib

import pytest
import torch

import minidynamo

from .utils import check

torch.manual_seed(0)
X = torch.randn(7, 33)
POS = torch.rand(7, 33) + 0.1
UNIT = torch.rand(7, 33) * 1.8 - 0.9

UNARY = [
    (torch.abs, X), (torch.neg, X), (torch.exp, X), (torch.exp2, X), (torch.expm1, X), (torch.log, POS),
    (torch.log1p, POS), (torch.log2, POS), (torch.log10, POS), (torch.sqrt, POS), (torch.rsqrt, POS),
    (torch.sin, X), (torch.cos, X), (torch.tan, UNIT), (torch.tanh, X), (torch.sigmoid, X), (torch.erf, X),
    (torch.asin, UNIT), (torch.acos, UNIT), (torch.atan, X), (torch.sinh, X), (torch.cosh, X),
    (torch.asinh, X), (torch.acosh, POS + 1), (torch.atanh, UNIT), (torch.floor, X * 3), (torch.ceil, X * 3),
    (torch.trunc, X * 3), (torch.round, torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 3.0])),
    (torch.sign, X), (torch.reciprocal, POS), (torch.relu, X), (torch.frac, X * 3), (torch.square, X),
    (lambda x: torch.nn.functional.silu(x), X), (lambda x: torch.nn.functional.softplus(x), X), (lambda x: torch.nn.functional.elu(x), X),
    (lambda x: torch.nn.functional.leaky_relu(x), X), (lambda x: torch.nn.functional.hardswish(x), X * 4),
    (lambda x: torch.nn.functional.hardsigmoid(x), X * 4), (lambda x: torch.nn.functional.mish(x), X),
    (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), X), (torch.nn.functional.gelu, X),
]


@pytest.mark.parametrize("fn,x", UNARY, ids=[str(i) for i in range(len(UNARY))])
def test_unary(fn, x):
    check(fn, x, atol=2e-5, rtol=2e-5, kernels=1)


BINARY = [torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum, torch.atan2, torch.hypot,
          torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge, torch.remainder, torch.fmod,
          torch.floor_divide, torch.copysign, torch.logical_and, torch.logical_or, torch.logical_xor]


@pytest.mark.parametrize("fn", BINARY, ids=lambda f: f.__name__)
def test_binary_broadcast(fn):
    a, b = torch.randn(5, 1, 9) * 3, torch.randn(4, 9) * 3 + 0.1
    check(fn, a, b, atol=1e-5, rtol=1e-5, kernels=1)


def test_alpha_rsub_scalars():
    check(lambda x, y: (torch.add(x, y, alpha=2), torch.sub(x, 3, alpha=0.5), torch.rsub(x, 1.5), 2 - x,
                        x * 2.5 + 1), X, X.flip(0), kernels=1)


def test_where_clamp_pow():
    check(lambda x, p: torch.where(x > 0, x.clamp(-0.5, 0.5) ** 2, x.pow(3)) + x.clamp(min=0.1)
          + x.clamp(max=0.2) + torch.nn.functional.hardtanh(x) + p ** x + x ** -2, X, POS, atol=1e-4, rtol=1e-4,
          kernels=1)


def test_pow_negative_base_integer_exponent():
    x = torch.tensor([-2.0, -1.5, 0.0, 1.5, 2.0])
    check(lambda x, e: (x ** 3, x ** e, torch.pow(x, 0)), x, torch.tensor([2.0, 3.0, 2.0, 0.5, -1.0]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_cast_and_compute(dtype):
    # eager rounds after every op, and so do we (config.emulate_precision_casts), but our sin computes in fp32
    # where eager's low-precision kernel may not: allow a few ulps
    check(lambda x: ((x.to(dtype) * 3).sin() + 1).to(dtype), X, atol=5e-2, rtol=5e-2, kernels=1)
    check(lambda x: x.to(dtype).float() * 2, X, kernels=1)


def test_int_and_bool_casts():
    check(lambda x: ((x * 10).to(torch.int32) + 1, (x > 0).to(torch.float32), (x * 100).long() // 7,
                     (x > 0) & (x < 1), ~(x > 0)), X, kernels=1)


def test_integer_division_semantics():
    a = torch.tensor([-7, -6, -1, 0, 1, 6, 7, 13, -13])
    b = torch.tensor([2, -4, 3, 5, -2, 4, -3, 5, 5])
    check(lambda a, b: (a // b, a % b, torch.div(a, b, rounding_mode="trunc"), torch.fmod(a, b),
                        torch.div(a, b, rounding_mode="floor"), a / b), a, b, kernels=1)


def test_nan_semantics_match_eager():
    x = torch.tensor([1.0, float("nan"), -2.0, float("inf"), -float("inf"), 0.0])
    y = torch.tensor([float("nan"), 2.0, -3.0, 1.0, float("nan"), -0.0])
    check(lambda x, y: (torch.maximum(x, y), torch.minimum(x, y), torch.relu(x), torch.isnan(x),
                        torch.isinf(x), torch.isfinite(x), x.clamp(-1, 1), torch.nan_to_num(x)), x, y, kernels=1)


def test_fmax_fmin_ignore_a_nan_operand():
    """``fmax``/``fmin`` return the other operand where one is NaN (NaN only where both are), unlike
    ``maximum``. Of two zeros eager's CPU kernel returns the first, its CUDA kernel whatever CUDA's ``fmaxf``
    (PTX ``max.f32``) does: compiled for the GPU we emit that instruction (``tl.maximum`` without NaN
    propagation), interpreted the formula in ``BINARY``; ``1 / fmax`` compares the zeros' signs. Integers and bools are a plain maximum. They fell back to ATen before
    (found by a lowering fuzz)."""
    x = torch.tensor([0.0, -0.0, float("nan"), 1.0, float("nan"), 2.0, -3.0, float("inf"), -0.0])
    y = torch.tensor([-0.0, 0.0, 1.0, float("nan"), float("nan"), 2.0, 5.0, float("nan"), -0.0])
    check(lambda x, y: (torch.fmax(x, y), torch.fmin(x, y), 1 / torch.fmax(x, y), 1 / torch.fmin(x, y),
                        torch.fmax(x.half(), y), torch.fmin(x.double(), y[:1])), x, y, kernels=1, fallbacks=0)
    a, b = torch.tensor([1, 5, -2, 7]), torch.tensor([3, 2, -2, -9])
    check(lambda a, b: (torch.fmax(a, b), torch.fmin(a, b), torch.fmax(a > 0, b > 0)), a, b, kernels=1,
          fallbacks=0)


def test_broadcast_scalar_tensor_and_zero_dim():
    check(lambda x, s: x * s + s, X, torch.tensor(2.5), kernels=1)


def test_logical_not_and_bitwise():
    a = torch.randint(-50, 50, (3, 17), dtype=torch.int32)
    check(lambda a: (torch.bitwise_not(a), a & 12, a | 3, a ^ 5, torch.logical_not(a), a.abs(), -a), a,
          kernels=1)


# ---------------------------------------- regressions the op corpora found
@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_negative_constant_base_of_pow_keeps_its_parentheses():
    """``(-2) ** x`` through minidynamo gave ``-(2 ** x)``: FX prints ``operator.pow(-2, x)`` as ``-2 ** x``
    (``(-2) ** 4`` was -16; program ``rpow_int_scalar`` run with ``dynamic=True``). The graph records
    ``torch.pow(-2, x)`` instead."""
    def fn(x, y):
        return (-2) ** x, (-2.5) ** y, (-0.0) ** x, 2 ** x
    x, y = torch.tensor([4, 9, 3, 0, 1]), torch.tensor([2.0, 3.0, 0.0, -1.0, 0.5])
    compiled = minidynamo.minicompile(fn)
    for out, want in zip(compiled(x, y), fn(x, y)):
        torch.testing.assert_close(out, want, equal_nan=True)


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
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
