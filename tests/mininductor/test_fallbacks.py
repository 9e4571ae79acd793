"""ATen fallbacks: ops we do not lower (integer ``pow`` with a tensor exponent, complex tensors, ``scatter`` with
``reduce=``) and ops eager's kernels refuse (``x - True``, ``softmax`` of ints, ``bitwise_and`` of floats...) run
eagerly inside the compiled graph, counted in ``metrics.fallback_count``: the same value as eager, or the same
error. Found by the op corpora. Budget: a few seconds on 2 cores."""
import pytest
import torch

from mininductor import metrics

from .utils import check, compile_fn, cpu_only, raises_like_eager

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def test_integer_pow_with_a_tensor_exponent_falls_back():
    """``torch.pow(2, i)`` and ``i ** j`` on integers: ``ops.pow`` is ``exp(b*log(a))``, float-only, and the
    interpreter raised on ``tl.exp`` of an int64 (program ``i_pow_int``). Like Inductor it now runs eagerly."""
    i = torch.randint(-9, 9, (6, 10))
    check(lambda i: (torch.pow(2, i.abs() % 10) + 1, i ** (i.abs() % 4), i.to(torch.int32) ** 3, i.float().pow(i)),
          i, kernels=2, fallbacks=2)
    assert all("aten.pow" in op for op in metrics.fallback_ops)


def test_complex_ops_fall_back():
    """``view_as_complex(x).abs()`` lowered ``abs`` over a complex64 buffer: the kernel raised at launch
    (program ``complex_abs``); ``view_as_complex(x) * 2`` made the whole graph run eagerly. Ops that read or
    make complex tensors now fall back, each counted, and the real ops around them still compile."""
    x = torch.randn(4, 2)
    check(lambda x: torch.view_as_complex(x).abs() * 2, x, kernels=1, fallbacks=2)
    check(lambda x: torch.view_as_real(torch.view_as_complex(x) * 2).sum(-1) + 1, x, kernels=1, fallbacks=3)


def test_string_arguments_of_a_fallback_are_quoted():
    """``x.scatter(1, i, 2.0, reduce="add")`` falls back; the wrapper wrote ``reduce=add`` (NameError at run time,
    program ``scatter_value_reduce``)."""
    x, i = torch.randn(4, 5), torch.randint(0, 5, (4, 2))
    check(lambda x, i: (x.scatter(1, i, 2.0, reduce="add"), x.scatter(1, i, 3.0, reduce="multiply")), x, i,
          fallbacks=2)


@cpu_only  # eager's CUDA kernels accept some of these (abs of a bool); where they refuse, the fallback raises too
def test_what_eager_refuses_falls_back_and_raises():
    """The trace accepts these; eager's kernels refuse them. We computed a value (``x - True``, ``abs`` of a
    bool, ``var`` of an int tensor, ``addcdiv`` of ints) or failed to compile a kernel (``bitwise_and`` of
    floats: an InterpreterError). Each now falls back, counted, and raises eager's error."""
    i8, mask, f = torch.randint(-5, 5, (4, 3), dtype=torch.int8), torch.rand(4, 3) > 0.5, torch.randn(4, 3)
    raises_like_eager(lambda x: x - True, i8, fallbacks=1)
    raises_like_eager(lambda x, m: x - m, i8, mask, fallbacks=1)
    raises_like_eager(lambda x, m: torch.rsub(x, m), i8, mask, fallbacks=1)
    raises_like_eager(lambda m: m.abs(), mask, fallbacks=1)
    raises_like_eager(lambda x: (x + 1) & 3, f, fallbacks=1)
    raises_like_eager(lambda x: x.sin() ^ x, f, fallbacks=1)
    raises_like_eager(lambda x: x.std(0), i8, fallbacks=1)
    raises_like_eager(lambda x: x.var(1, correction=0), i8.long(), fallbacks=1)
    raises_like_eager(lambda x: torch.addcdiv(x, x, x + 10), i8.int())  # the fake kernel raises: at compile time


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
    raises_like_eager(lambda x: x.softmax(-1) * 2, i8, fallbacks=1)
    raises_like_eager(lambda x: x.long().log_softmax(0), i8, fallbacks=1)
    raises_like_eager(lambda x: torch.lerp(x, x + 1, 0.5), i8.int(), fallbacks=1)
    raises_like_eager(lambda x: torch.hypot(x, x + 1), i8.short(), fallbacks=1)
    for op in (torch.floor, torch.trunc, torch.round, lambda m: m % m, lambda m: torch.fmod(m, m)):
        raises_like_eager(lambda m: op(m) | m, mask, fallbacks=1)  # noqa: B023
    with pytest.raises(RuntimeError):  # lerp of two dtypes: the fake kernel raises, at compile time
        compile_fn(lambda x, y: torch.lerp(x, y, 0.5), f, f.double())
