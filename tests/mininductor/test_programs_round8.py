"""Op-level programs an eighth corpus (~250 programs over integer and low-precision dtype corners, NaN/inf
semantics, reductions, indexing and scatters, matmul epilogues and norms) found wrong, each compiled and compared
with eager. Budget: a few seconds on 2 cores."""
import pytest
import torch

import minidynamo

from .utils import DEVICE, check

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def test_signbit_of_negative_zero_and_nan():
    """``torch.signbit(-0.0)`` is True in eager; ours was ``x < 0``, False (program ``float_sign_nan``). The sign
    bit is read by a bitcast now, -NaN included."""
    x = torch.tensor([-1.0, -0.0, 0.0, 2.0, float("nan"), -float("nan"), float("inf"), -float("inf")])
    check(lambda x: (torch.signbit(x), torch.signbit(x.double()), torch.signbit(x.int())), x, kernels=1, fallbacks=0)
    # Eager's CUDA x.half() makes -NaN the canonical +NaN (H200); Triton's conversion, and eager's on the CPU, keep
    # the sign. Not matched on the GPU: it would cost every fp16 rounding a select.
    h = x if DEVICE == "cpu" else x[torch.arange(len(x)) != 5]
    check(lambda x: torch.signbit(x.half()), h, kernels=1, fallbacks=0)


def test_pow_special_cases_follow_c():
    """``pow(1, nan)`` is 1 and ``pow(-0.0, -1)`` is -inf in eager (C's pow); ``exp(b * log(a))`` gave NaN and
    +inf (program ``pow_zero_zero``)."""
    a = torch.tensor([0., 0., -0., 2., -2., float("nan"), 1., 1., -1., -1., -0., -0., -0., -0.5, 3.])
    b = torch.tensor([0., -1., 0.5, float("inf"), 0.5, 0., float("nan"), float("inf"), float("inf"),
                      -float("inf"), -1., 3., -2., float("inf"), -2.])
    check(lambda a, b: (torch.pow(a, b), torch.pow(a.double(), b.double())), a, b, kernels=1, fallbacks=0)


def test_pow_and_hypot_at_the_edges_of_the_range():
    """``pow(-inf, 0.5)`` is inf in eager, ours NaN; ``1.4e7 ** 5.0`` (a tensor exponent) was 71 ulp off (exp of
    b*log(a) in fp32); ``hypot(1e20, 1)`` overflowed to inf (``sqrt(a*a + b*b)``); ``hypot(nan, 0)`` is NaN
    (binary-op sweep over 370k pairs)."""
    a = torch.tensor([-float("inf"), -float("inf"), -float("inf"), 1.3667e7, 3.7, -2.5, 1e20, -3e19, float("nan"),
                      0.0, float("inf")])
    b = torch.tensor([0.5, -0.5, 3.0, 5.0, 11.3, 0.5, 1.0, 4e19, 0.0, 0.0, float("nan")])
    check(lambda a, b: (torch.pow(a, b), torch.hypot(a, b), torch.hypot(a.double() * 1e280, b.double() * 1e280)),
          a, b, atol=0, rtol=3e-7, kernels=1, fallbacks=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_python_scalars_convert_like_eager(dtype):
    """[Note: Python scalars in fp16/bf16 ops] ``x16 - 2049`` subtracts fp16(2049) = 2048 on the CPU, ``x16 % 0.3``
    divides by fp16(0.3), and ``add(a, b, alpha=0.3)`` rounds alpha and then the result once; ours kept the fp32
    scalar, or rounded ``b * alpha`` first (programs ``f16_mul_scalar_exact``, ``f16_floordiv_scalar``,
    ``bf16_add_alpha``: up to 2.0 off). mul and div read the scalar (or a 0-dim second operand) in fp32, which
    must stay so. 256 elements: eager's scalar loop over a vector's tail rounds ``b * alpha`` on its own."""
    torch.manual_seed(0)
    a, b = (torch.randn(256) * 100).to(dtype), (torch.randn(256) * 3).to(dtype)
    if DEVICE == "cpu":  # CUDA reads add/sub's scalar in fp32 (opmath) and divides by one as a * (1 / b)
        check(lambda a, b: (a - 2049, a + 0.3, 0.3 - a, torch.add(a, b, alpha=0.3), torch.sub(a, b, alpha=0.3),
                            torch.rsub(a, 2.7, alpha=0.3), a / 0.3), a, b, atol=0, rtol=0, fallbacks=0)
    check(lambda a, s: (a % 0.3, torch.fmod(a, 0.3), a == 0.2998, a * 2049, a * 0.1, a // 0.3, a * s, a / s),
          a, torch.tensor(0.1), atol=0, rtol=0, fallbacks=0)


def test_small_argument_math_keeps_its_digits():
    """``expm1(1e-8)`` is 1e-8 in eager; ``exp(x) - 1`` gave 0 (and 2.4e-7 at 1.2e-7), as did log1p, tanh, sinh,
    asinh and atanh near 0 -- all within the default atol, wrong relatively (e.g. ``x.expm1() / x``). cosh(89) and
    sinh(89) overflowed in ``exp(89) / 2``; acosh(-1e30) and asinh(1e20) lost to ``x * x``; fp64 atan/asin/acos
    were accurate to fp32 only; atan2 of signed zeros and two infinities was wrong (program ``unary_big_args`` and
    a sweep of 8000 arguments per op)."""
    mag = torch.logspace(-30, 38, 400)
    x = torch.cat([mag, -mag, torch.linspace(-20, 20, 401), torch.tensor([0., -0., 89., -89., float("inf"), -float("inf")])])
    ops = (torch.expm1, torch.log1p, torch.tanh, torch.sinh, torch.cosh, torch.asinh, torch.acosh, torch.atanh,
           torch.atan, torch.asin, torch.acos)
    for dtype, rtol in ((torch.float32, 8 * 2.0 ** -23), (torch.float64, 8 * 2.0 ** -52)):
        check(lambda x: tuple(op(x) for op in ops), x.to(dtype), atol=0, rtol=rtol, kernels=1, fallbacks=0)
        check(lambda x: x.expm1() / x, torch.tensor([1e-8, -3e-9, 1e-20], dtype=dtype), atol=0, rtol=rtol)
    y = torch.tensor([0., -0., 0., -0., 1., -1., float("inf"), float("inf"), -float("inf"), 0., float("nan"), 1.])
    z = torch.tensor([0., 0., -0., -0., -0., -0., float("inf"), -float("inf"), -float("inf"), float("nan"), 1., -1.])
    check(lambda y, z: (torch.atan2(y, z), torch.atan2(y.double(), z.double())), y, z, atol=0, rtol=1e-6)
    tiny = torch.tensor([1e-40, -1e-40, 1e-30, 2e-4])  # atan's angle halvings cost a denormal its low bits
    check(lambda x: (torch.atan(x), torch.asin(x)), tiny, atol=0, rtol=1e-6)


def test_cpu_attention_output_is_row_major():
    """``F.scaled_dot_product_attention`` on CPU returns a row-major (N, H, L, E) tensor; upstream's decomposition
    of ``_scaled_dot_product_flash_attention_for_cpu`` ended in a permute-copy-permute that gave strides (24, 8,
    48, 1) (programs ``sdpa_causal_scale``, ``attention_f16``)."""
    import torch.nn.functional as F
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    compiled = check(fn, q, k, v, atol=1e-5, fallbacks=None)
    args = [t.to(DEVICE) for t in (q, k, v)]
    assert compiled(*args).stride() == fn(*args).stride()


def test_string_arguments_of_a_fallback_are_quoted():
    """``x.scatter(1, i, 2.0, reduce="add")`` falls back; the wrapper wrote ``reduce=add`` (NameError at run time,
    program ``scatter_value_reduce``)."""
    x, i = torch.randn(4, 5), torch.randint(0, 5, (4, 2))
    check(lambda x, i: (x.scatter(1, i, 2.0, reduce="add"), x.scatter(1, i, 3.0, reduce="multiply")), x, i,
          fallbacks=2)


def test_outputs_that_alias_inputs_stay_views():
    """``y = x.view(-1); y.mul_(2); return y`` returns a view of ``x`` in eager; ours returned the functional
    graph's own buffer, so writing to ``y`` afterwards no longer wrote ``x`` (programs ``alias_inplace_view``,
    ``setitem_return_view``, ``float_of_float``). [Note: outputs that alias inputs]"""
    def fn(x):
        y = x.view(-1)
        y.mul_(2)
        x[0] = 5
        z = x.float()  # the same dtype: x itself
        z += 1
        return y[2:], x[0], z
    compiled = minidynamo.minicompile(fn)
    base = torch.randn(40)
    for start in (0, 12, 5):  # the inputs start at different offsets of one storage
        x, expected_x = base[start:start + 12].view(3, 4), base[start:start + 12].view(3, 4).clone()
        outs, expected = compiled(x), fn(expected_x)
        for out, want in zip(outs, expected):
            assert torch.equal(out, want) and out.stride() == want.stride()
            assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        outs[0].zero_()  # writes x, as in eager
        assert torch.equal(x.view(-1)[2:], torch.zeros(10))


def test_complex_ops_fall_back():
    """``view_as_complex(x).abs()`` lowered ``abs`` over a complex64 buffer: the kernel raised at launch
    (program ``complex_abs``); ``view_as_complex(x) * 2`` made the whole graph run eagerly. Ops that read or
    make complex tensors now fall back, each counted, and the real ops around them still compile."""
    x = torch.randn(4, 2)
    check(lambda x: torch.view_as_complex(x).abs() * 2, x, kernels=1, fallbacks=2)
    check(lambda x: torch.view_as_real(torch.view_as_complex(x) * 2).sum(-1) + 1, x, kernels=1, fallbacks=3)


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


def test_view_of_a_flip_keeps_eager_strides():
    """``x.flip(-1)[..., ::2]`` is a view of flip's new tensor in eager, strides (8, 2); we lower ``flip`` to a
    re-indexing view of ``x``, so the output was a contiguous copy, (4, 1) (random program ``rnd112``; ``rnd134``
    the same through ``cumsum().flip().expand()``). The flipped base is computed into a buffer of its own."""
    x, y = torch.randn(13, 8), torch.randn(7, 2)
    for fn, arg in ((lambda x: x.flip(-1)[..., ::2], x), (lambda y: y.cumsum(-1).flip(-1).unsqueeze(0).expand(2, 7, 2), y)):
        compiled = check(fn, arg, fallbacks=0)
        assert compiled(arg.to(DEVICE)).stride() == fn(arg.to(DEVICE)).stride()


def test_round_half_to_even_where_x_plus_half_rounds():
    """``torch.round(0.49999997)`` is 0 and ``round(8388609.0)`` is 8388609 in eager; ``floor(x + 0.5)`` gave 1
    and 8388610 (``x + 0.5`` itself rounds), and ``round(-0.4)`` lost its sign (0.0, eager -0.0)."""
    x = torch.tensor([0.49999997, -0.49999997, 8388609.0, -8388609.0, 8388611.0, 2.5, 3.5, -2.5, 0.5, 1.5, -0.4,
                      -0.0, 1e30, float("inf"), -float("inf"), float("nan")])
    compiled = check(lambda x: (torch.round(x), torch.round(x.double() * 2 ** 29), torch.round(x.half())), x,
                     atol=0, rtol=0, kernels=1, fallbacks=0)
    ours = compiled(x.to(DEVICE))[0]
    assert torch.equal(ours.signbit(), torch.round(x.to(DEVICE)).signbit())


def test_arange_with_a_symbolic_end_keeps_its_start():
    """``torch.arange(-1, x.shape[0] + 2)`` compiled with ``dynamic=True`` gave ``[0, 1, ...]``: the lowering
    counted the numeric arguments, and with a symbolic end only the start was one, read as ``arange(end)``.
    A reflection pad (whose decomposition indexes with such an arange) was off by one row (programs
    ``pad_reflect_2d``, ``pad_replicate_3d`` under ``dynamic=True``)."""
    import torch.nn.functional as F
    def fn(x):
        n = x.shape[0]
        return torch.arange(-1, n + 2), torch.arange(2, n, 2), F.pad(x[None], (2, 1, 1, 2), mode="reflect")
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows in (4, 6):
        x = torch.randn(rows, 5)
        for out, want in zip(compiled(x), fn(x)):
            assert torch.equal(out, want)
