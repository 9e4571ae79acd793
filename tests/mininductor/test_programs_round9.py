"""Op-level programs a ninth corpus (~680 programs: odd integer dtypes and Python-scalar promotion, reductions
and scans over non-contiguous and expanded inputs, sorts, views, padding, attention, einsum/bmm epilogues, empty
tensors, indexing with negative and out-of-range indices) found wrong, each compiled and compared with eager.
Budget: a few seconds on 2 cores."""
import pytest
import torch
import torch.nn.functional as F

import minidynamo

from .utils import DEVICE, check, compile_fn

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
cpu_only = pytest.mark.skipif(DEVICE != "cpu", reason="eager's CPU kernel (or the interpreter's index check)")


def _raises_like_eager(fn, *args, fallbacks=None):
    """Eager raises; the compiled ``fn`` raises an exception of the same type (or a subclass) when it runs, or
    when it compiles (a fake kernel that checks what eager checks: then ``fallbacks`` is None)."""
    from mininductor import metrics
    args = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(Exception) as eager:
        fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    metrics.reset()
    with pytest.raises(type(eager.value)):
        compile_fn(fn, *args)(*args)
    if fallbacks is not None:
        assert metrics.fallback_count == fallbacks, metrics.fallback_ops


# ----------------------------------------------------------------------------------------- indices
@cpu_only
@pytest.mark.parametrize("index", [[1, -1], [1, 5], [0, -6]])
def test_index_add_and_index_copy_refuse_negative_indices(index):
    """``x.index_add(0, tensor([1, -1]), v)`` raises in eager; upstream's decomposition (``x[i] += v``) counted
    -1 from the end and returned a value. index_add/index_copy now decompose to scatter_add/scatter, whose
    indices are checked without wrapping. ``index_fill`` does wrap -1 in eager, and still does (-6 raises)."""
    x, i, v = torch.randn(5, 3), torch.tensor(index), torch.ones(2, 3)
    _raises_like_eager(lambda x, i: x.index_add(0, i, v), x, i, fallbacks=0)
    _raises_like_eager(lambda x, i: x.clone().index_add_(0, i, v, alpha=2), x, i, fallbacks=0)
    _raises_like_eager(lambda x, i: x.index_copy(0, i, v), x, i, fallbacks=0)
    fill = lambda x, i: x.index_fill(0, i, -2.0)
    if index == [1, -1]:
        check(fill, x, i, kernels=2, fallbacks=0)
    else:
        _raises_like_eager(fill, x, i, fallbacks=0)


def test_index_add_and_index_copy_values():
    """Every dim, a 0-d input and index, an empty index; the in-place form still scatters into its input."""
    x, i = torch.randn(4, 5, 3), torch.tensor([2, 0, 2])
    ones = lambda *size, like: torch.ones(*size, device=like.device)  # on the input's device
    check(lambda x, i: (x.index_add(1, i, ones(4, 3, 3, like=x)), x.index_add(-1, i, ones(4, 5, 3, like=x), alpha=2.5),
                        x.index_copy(0, torch.tensor([2, 0], device=x.device), ones(2, 5, 3, like=x))), x, i,
          fallbacks=0)
    check(lambda x: x.index_add(0, torch.tensor(0, device=x.device), torch.tensor(2., device=x.device)),
          torch.tensor(1.), fallbacks=0)
    check(lambda x: x.index_add(0, torch.tensor([], dtype=torch.long, device=x.device), ones(0, 2, like=x)),
          torch.randn(3, 2))

    def inplace(x, i, v):
        x.index_add_(0, i, v)
        return x.sum()
    compiled = check(inplace, torch.randn(6, 4), torch.tensor([1, 1, 5]), torch.randn(3, 4), kernels=2)
    assert "the scatter writes in place" in compiled.source


@cpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_index_add_alpha_rounds_as_eager(dtype):
    """[Note: index_add's alpha in fp16/bf16] eager adds ``alpha * v`` in fp32 (one rounding), except
    along the last dim, where it rounds the product first; ``v * 0.3`` (fp32 scalar) matched neither."""
    torch.manual_seed(0)
    x, i = torch.randn(16, 24, 32).to(dtype), torch.tensor([1, 4, 3, 0, 2])
    for dim in (0, 1, -1):
        v = torch.randn(16, 24, 32).to(dtype).narrow(dim, 0, 5)
        bf16_scatter = dtype == torch.bfloat16 and dim == -1  # computed in bf16: no atomic_add, a fallback
        check(_index_add_along(dim, i), x, v, atol=0, rtol=0, fallbacks=int(bf16_scatter))


def _index_add_along(dim, i):
    return lambda x, v: x.index_add(dim, i, v, alpha=0.3)


def test_accumulating_scatters_of_small_dtypes_fall_back():
    """``tl.atomic_add`` takes no int8/uint8/int16/bool/bf16: the kernel raised at launch ("atomic_add does not
    support int8"). Such scatters fall back, counted."""
    for dtype in (torch.int8, torch.uint8, torch.int16, torch.bfloat16):
        x = torch.ones(3, 2, dtype=dtype)
        def scatters(x):
            index, ones = torch.tensor([1, 1], device=x.device), torch.ones(2, 2, dtype=x.dtype, device=x.device)
            return (x.index_put((index,), ones, accumulate=True), x.scatter_add(0, index[None], ones[:1]),
                    x.index_add(0, index, ones, alpha=3))
        check(scatters, x, fallbacks=2 if dtype == torch.bfloat16 else 3)  # bf16 index_add(alpha) along dim 0 is fp32


# ----------------------------------------------------------------------------------------- layouts
def test_one_hot_of_a_permuted_input_is_row_major():
    """[Note: one_hot's layout] eager's ``F.one_hot`` is ``zeros().scatter_()`` (row-major); what we trace
    is the fake-tensor body ``eq(x.unsqueeze(-1), arange)``, which kept the permuted input's layout."""
    x = torch.randint(0, 6, (2, 3, 4))
    fn = lambda x: (F.one_hot(x.permute(2, 0, 1), 6), F.one_hot(x[:, ::2].transpose(0, 1), 6).float() * 2)
    compiled = check(fn, x, fallbacks=0)
    x = x.to(DEVICE)
    assert [o.stride() for o in compiled(x)] == [o.stride() for o in fn(x)]
    dynamo = minidynamo.minicompile(lambda x: F.one_hot(x.t(), 5) + 1)
    y = torch.randint(0, 5, (3, 4), device=DEVICE)
    assert dynamo(y).stride() == (F.one_hot(y.t(), 5) + 1).stride()


def test_copysign_and_xlogy_take_the_first_operand_layout():
    """``copysign(a.t(), b_broadcast)`` has ``a``'s strides (1, 4) in eager; the fake kernels of copysign,
    xlogy and xlog1py are ``where(signbit(b) / isnan(b), ...)`` references that gave ``b``'s, (3, 1) (random
    programs ``rnd213``, ``rnd247``)."""
    for dtype in (torch.int32, torch.float32):
        a = torch.randint(-5, 5, (3, 4)).to(dtype).t()
        b = torch.randint(1, 5, (1, 3)).to(dtype).expand(4, 3)
        fn = lambda a, b: (torch.copysign(a, b), torch.xlogy(a, b).sin(), torch.special.xlog1py(a, b))
        compiled = check(fn, a, b, kernels=1, fallbacks=0)
        args = [a.to(DEVICE), b.to(DEVICE)]
        assert [o.stride() for o in compiled(*args)] == [o.stride() for o in fn(*args)]


# ----------------------------------------------------------------------------------------- fp16 / bf16
@cpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_composites_round_every_step_on_the_cpu(dtype):
    """[Note: fp16/bf16 composites on the CPU] eager's ``mse_loss(reduction='none')``, ``xlogy`` and
    ``xlog1py`` round ``a - b`` / ``log(y)`` to fp16 before the next step; upstream's decompositions computed all
    in fp32 (~30% of elements 1 ulp off)."""
    torch.manual_seed(0)
    a, b = torch.randn(8, 64).to(dtype), torch.randn(8, 64).to(dtype)
    check(lambda a, b: (F.mse_loss(a, b, reduction="none"), F.mse_loss(a, b), F.mse_loss(a, b, reduction="sum"),
                        torch.xlogy(a.abs(), b.abs()), torch.special.xlog1py(a, b.abs())),
          a, b, atol=0, rtol=0, fallbacks=0)
    nan = torch.tensor([0., 0., 1., float("nan"), 2.], dtype=dtype)
    check(lambda x, y: (torch.xlogy(x, y), torch.special.xlog1py(x, y)), nan, nan.flip(0), atol=0, rtol=0)


@cpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_trunc_division_rounds_the_quotient(dtype):
    """``div(a, b, rounding_mode='trunc')`` in fp16 on the CPU truncates the fp16 quotient (2.9998 rounds to 3,
    trunc 3); ours truncated the fp32 one (2). A Python-scalar divisor is read in fp32 and not rounded; a scalar
    dividend is converted to fp16 first. (1 to 350 of 4096 elements off by 1.)"""
    torch.manual_seed(0)
    a, b = (torch.randn(4096) * 30).to(dtype), torch.randn(4096).to(dtype)
    check(lambda a, b: (torch.div(a, b, rounding_mode="trunc"), torch.div(a, 0.37, rounding_mode="trunc"),
                        torch.div(a, torch.tensor(0.37), rounding_mode="trunc"),
                        torch.div(5.3, b, rounding_mode="trunc")), a, b, atol=0, rtol=0, fallbacks=0)


@cpu_only
def test_tanh_is_correctly_rounded():
    """``tanh(9)`` is 0.99999994 in eager, ours 1.0 (``-t / (t + 2)`` in fp32 is an ulp off near 1), so
    ``floor(tanh(x))`` was 1 where eager's is 0 (random program ``rnd65``). The interpreter computes fp32 tanh
    in fp64."""
    x = torch.arange(-12, 13, dtype=torch.int32)
    check(lambda x: (torch.tanh(x), torch.tanh(x).floor()), x, atol=0, rtol=0, kernels=1)
    y = torch.linspace(-10, 10, 2001)
    compiled = compile_fn(torch.tanh, y)
    assert (compiled(y) != torch.tanh(y)).sum() < 10  # eager's own (SLEEF) tanh is not always correctly rounded


# ----------------------------------------------------------------------------------------- eager refuses
@cpu_only  # eager's CUDA kernels accept some of these (abs of a bool); where they refuse, the fallback raises too
def test_what_eager_refuses_falls_back_and_raises():
    """The trace accepts these; eager's kernels refuse them. We computed a value (``x - True``, ``abs`` of a
    bool, ``var`` of an int tensor, ``addcdiv`` of ints) or failed to compile a kernel (``bitwise_and`` of
    floats: an InterpreterError). Each now falls back, counted, and raises eager's error."""
    i8, mask, f = torch.randint(-5, 5, (4, 3), dtype=torch.int8), torch.rand(4, 3) > 0.5, torch.randn(4, 3)
    _raises_like_eager(lambda x: x - True, i8, fallbacks=1)
    _raises_like_eager(lambda x, m: x - m, i8, mask, fallbacks=1)
    _raises_like_eager(lambda x, m: torch.rsub(x, m), i8, mask, fallbacks=1)
    _raises_like_eager(lambda m: m.abs(), mask, fallbacks=1)
    _raises_like_eager(lambda x: (x + 1) & 3, f, fallbacks=1)
    _raises_like_eager(lambda x: x.sin() ^ x, f, fallbacks=1)
    _raises_like_eager(lambda x: x.std(0), i8, fallbacks=1)
    _raises_like_eager(lambda x: x.var(1, correction=0), i8.long(), fallbacks=1)
    _raises_like_eager(lambda x: torch.addcdiv(x, x, x + 10), i8.int())  # the fake kernel raises: at compile time


def test_integer_addcmul_with_a_float_value_runs():
    """``addcmul(int, int, int, value=0.5)`` is accepted by eager; upstream's decomposition raised ValueError
    ("cannot be safely cast") at compile time (random program ``rnd186``). It falls back."""
    x = torch.randint(-5, 5, (8, 2), dtype=torch.int16)
    check(lambda x: torch.addcmul(x - 1, x, x, value=0.5) * 2, x, fallbacks=1)


def test_dtypes_eager_does_not_implement_fall_back_and_raise():
    """``softmax`` of an int tensor ('"softmax_lastdim_kernel_impl" not implemented for 'Char''), ``lerp`` of
    ints or of two dtypes, ``hypot`` of ints, ``floor``/``trunc``/``remainder``/``fmod`` of bools: eager's
    kernels refuse them, we computed a value (random programs ``rnd34``, ``rnd52``, ``rnd60``, ``rnd64``,
    ``rnd5``...). Each falls back, counted, and raises eager's error."""
    i8, mask, f = torch.randint(-5, 5, (4, 3), dtype=torch.int8), torch.rand(4, 3) > 0.5, torch.randn(4, 3)
    _raises_like_eager(lambda x: x.softmax(-1) * 2, i8, fallbacks=1)
    _raises_like_eager(lambda x: x.long().log_softmax(0), i8, fallbacks=1)
    _raises_like_eager(lambda x: torch.lerp(x, x + 1, 0.5), i8.int(), fallbacks=1)
    _raises_like_eager(lambda x: torch.hypot(x, x + 1), i8.short(), fallbacks=1)
    for op in (torch.floor, torch.trunc, torch.round, lambda m: m % m, lambda m: torch.fmod(m, m)):
        _raises_like_eager(lambda m: op(m) | m, mask, fallbacks=1)  # noqa: B023
    with pytest.raises(RuntimeError):  # lerp of two dtypes: the fake kernel raises, at compile time
        compile_fn(lambda x, y: torch.lerp(x, y, 0.5), f, f.double())


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
