"""Input *values* eager refuses raise in compiled code too ([Note: value checks] in codegen/triton.py): an integer
division by zero (``RuntimeError: ZeroDivisionError`` on the CPU), a class outside ``one_hot``'s range, a
probability outside [0, 1] in ``binary_cross_entropy`` or ``bernoulli``, and ``torch._assert_async`` itself. Each compiled function
runs once on values eager accepts (compared with eager) and once on values it refuses; the check is made at run
time by the kernel, so neither costs a fallback. Out-of-range indices are in test_indirect_indexing.py, the GPU's
device-side asserts in test_device_asserts.py. Budget: a few seconds on 2 cores."""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import metrics

from .utils import DEVICE, assert_same, check, compile_fn, cpu_only, raises_like_eager

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _raises_like_eager(compiled, fn, *args):
    """Eager raises on ``args``; so does ``compiled``, with an exception of the same type whose message holds
    eager's (upstream's one_hot checks prefix it with ``one_hot: ``; TORCH_CHECK's plea for a better message,
    after two spaces, is left out)."""
    with pytest.raises(Exception) as eager:
        fn(*[a.clone() for a in args])
    with pytest.raises(type(eager.value)) as ours:
        compiled(*[a.clone() for a in args])
    assert str(eager.value).split("  (")[0] in str(ours.value), (eager.value, ours.value)


DIVISIONS = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "fmod": torch.fmod,
    "int32": lambda a, b: torch.remainder(a.int(), b.int()),
    "uint8": lambda a, b: a.to(torch.uint8).abs() // b.to(torch.uint8),
    "bool_divisor": lambda a, b: a // (b != 0),
    "scalar_dividend": lambda a, b: 7 % b,
    "zero_scalar": lambda a, b: torch.fmod(a, 0) + b,
}


@cpu_only
@pytest.mark.parametrize("name", DIVISIONS)
def test_integer_division_by_zero_raises_like_eager(name):
    """``a // b`` with a zero in ``b`` raises ``RuntimeError: ZeroDivisionError`` in eager's CPU kernels (all of
    floor/trunc division, ``%``/remainder and fmod); our kernel returned a value (its own floor of ``x // 0``).
    The same compiled kernel now checks its divisors and raises, and divides as before where none is zero."""
    fn = DIVISIONS[name]
    a, good, bad = torch.tensor([5, -7, 3, 8]), torch.tensor([2, 3, 1, -3]), torch.tensor([2, 3, 0, -3])
    compiled = check(fn, a, good, kernels=1, fallbacks=0) if name != "zero_scalar" else compile_fn(fn, a, good)
    _raises_like_eager(compiled, fn, a, bad)


@cpu_only
def test_division_checks_only_the_lanes_eager_computes():
    """A padded output's border (the untaken side of ``ops.masked``, whose loads read 0) and a reduction's
    padded lanes are not checked; ``where(b != 0, a // b, 0)`` still raises, as eager computes ``a // b``
    everywhere first. The divisor's check is a reduction over ``b``: one kernel with the division, but for the
    padded output (another size). ``minicompile`` goes the same way."""
    a, good, bad = torch.arange(1, 11), torch.arange(1, 11).flip(0), torch.arange(10) % 4
    programs = [(lambda a, b: F.pad(a // b, (2, 3)), 2), (lambda a, b: (a % b).sum(), 1),
                (lambda a, b: torch.where(b != 0, a // b, 0), 1)]
    for fn, kernels in programs:
        compiled = check(fn, a, good, kernels=kernels, fallbacks=0)
        _raises_like_eager(compiled, fn, a, bad)
    metrics.reset()
    dynamo = minidynamo.minicompile(programs[0][0])
    assert_same(dynamo(a, good), programs[0][0](a, good))
    _raises_like_eager(dynamo, programs[0][0], a, bad)
    assert (metrics.generated_kernel_count, metrics.fallback_count) == (2, 0)


SLICED_DIVISIONS = {
    "slice": (lambda a, b: (a // b)[:2] + 1, 2),
    "select": (lambda a, b: (a % b)[0] * 2, 1),  # one quotient: it fuses into the check's kernel
    "broadcast_dividend": (lambda a, b: (a.view(1, 3) // b.view(3, 1))[:, :1], 2),
    "same_size": (lambda a, b: torch.fmod(a, b) + 1, 1),  # the check fuses with the division
}


@cpu_only
@pytest.mark.parametrize("name", SLICED_DIVISIONS)
def test_a_zero_divisor_outside_a_fused_slice_raises_like_eager(name):
    """Eager divides every element, then slices; our kernel computes only the quotients the slice keeps, and
    checked only those: ``(a // b)[:2] + 1`` returned a value for ``b = [1, 2, 0]``.  The whole divisor is now
    checked by an ``all(b != 0)`` reduction -- in the division's kernel when their sizes agree."""
    fn, kernels = SLICED_DIVISIONS[name]
    a, good, bad = torch.tensor([4, 5, 6]), torch.tensor([1, 2, 3]), torch.tensor([1, 2, 0])
    compiled = check(fn, a, good, kernels=kernels, fallbacks=0)
    _raises_like_eager(compiled, fn, a, bad)


@cpu_only
def test_an_empty_division_checks_nothing():
    """Eager computes no quotient of an empty result, so a zero divisor raises nothing there."""
    fn = lambda a, b: a // b
    check(fn, torch.zeros(0, 3, dtype=torch.long), torch.tensor([1, 0, 2]), fallbacks=0)


def test_float_and_nonzero_scalar_divisions_have_no_check():
    """Floating-point division by zero is inf or NaN, not an error; a nonzero scalar divisor needs no check."""
    x = torch.tensor([5., -7., 3., 0.])
    for fn in (lambda x: x // torch.zeros_like(x), lambda x: torch.fmod(x, 0.0), lambda x: x.long() // 3,
               lambda x: x.long() % -2):
        compiled = check(fn, x, kernels=1, fallbacks=0)
        assert "_check_values" not in compiled.source and "device_assert" not in compiled.source


ONE_HOT = {
    "one_hot": lambda i: F.one_hot(i, 5) * 2,
    "keyword": lambda i: F.one_hot(i.view(2, 2), num_classes=5).sum(-1),
}


@cpu_only
@pytest.mark.parametrize("name", ONE_HOT)
def test_one_hot_refuses_a_class_outside_its_range(name):
    """``F.one_hot(i, 5)`` with a class of 5 or -1 raises in eager's CPU kernel; traced without the Python
    dispatcher (compile_fx_inner on make_fx) we took the C++ body's fake branch, a comparison with ``arange``:
    a row of zeros. Both paths now trace upstream's body with its two ``_assert_async`` checks, lowered into one
    reduction kernel (no fallback, no host sync)."""
    fn = ONE_HOT[name]
    good = torch.tensor([0, 4, 1, 3])
    compiled = check(fn, good, kernels=2, fallbacks=0)
    dynamo = minidynamo.minicompile(fn)
    assert_same(dynamo(good), fn(good))
    for bad in ([0, 5, 1, 3], [0, -1, 1, 3], [7, 1, -2, 0]):
        _raises_like_eager(compiled, fn, torch.tensor(bad))
        _raises_like_eager(dynamo, fn, torch.tensor(bad))


def test_one_hot_of_an_int32_tensor_still_raises():
    """Eager's one_hot takes int64 classes only; upstream's body (above) does not check the dtype, so an int32
    tensor goes to the C++ body, which raises at compile time as eager does."""
    raises_like_eager(lambda i: F.one_hot(i.int(), 4), torch.tensor([0, 3, 1]))


@cpu_only
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_binary_cross_entropy_refuses_probabilities_outside_0_1(reduction):
    """Eager's CPU kernel raises for an input (or target) element outside [0, 1], NaN included; upstream's
    decomposition computed a loss from the log of a negative number (clamped at -100)."""
    def fn(p, t):
        return F.binary_cross_entropy(p, t, reduction=reduction)
    p, t = torch.tensor([0.25, 0.5, 0.0, 1.0]), torch.tensor([1.0, 0.0, 0.5, 1.0])
    compiled = check(fn, p, t, fallbacks=0)
    dynamo = minidynamo.minicompile(fn)
    assert_same(dynamo(p, t), fn(p, t))
    for bad_p, bad_t in ((torch.tensor([0.25, 1.5, 0.0, 1.0]), t), (torch.tensor([0.25, -0.5, 0.0, 1.0]), t),
                         (torch.tensor([0.25, float("nan"), 0.0, 1.0]), t), (p, torch.tensor([1.0, 0.0, 2.0, 1.0]))):
        _raises_like_eager(compiled, fn, bad_p, bad_t)
        _raises_like_eager(dynamo, fn, bad_p, bad_t)


@cpu_only
def test_bernoulli_refuses_probabilities_outside_0_1():
    """``torch.bernoulli(p)`` with a ``p`` of 1.5, -0.1 or NaN raises in eager; upstream's decomposition
    (``rand < p``) drew a sample. ``* 0``: the draw itself is random, the error is not."""
    def fn(p):
        return torch.bernoulli(p) * 0
    p = torch.tensor([0.5, 1.0, 0.0])
    compiled = check(fn, p, kernels=1, fallbacks=1)  # the fallback: aten.rand
    dynamo = minidynamo.minicompile(fn)
    assert_same(dynamo(p), fn(p))
    for bad in ([0.5, 1.5, 0.0], [0.5, -0.1, 0.0], [0.5, float("nan"), 0.0]):
        _raises_like_eager(compiled, fn, torch.tensor(bad))
        _raises_like_eager(dynamo, fn, torch.tensor(bad))


def test_assert_async_is_a_kernel():
    """``torch._assert_async(cond, msg)`` is lowered to a kernel that checks ``cond`` (fused with the ``all``
    that computes it, and here with ``x * 2`` too), not a fallback that syncs with the host; its error is
    eager's RuntimeError(msg)."""
    def fn(x):
        torch._assert_async((x > 0).all(), "x must be positive")
        return x * 2
    x = torch.tensor([1.0, 2.0, 3.0])
    compiled = check(fn, x, kernels=1, fallbacks=0)
    if DEVICE == "cpu":
        _raises_like_eager(compiled, fn, torch.tensor([1.0, -2.0, 3.0]))


@cpu_only
def test_a_zero_divisor_does_not_retire_the_symbolic_graph():
    """As a bad index (test_indirect_indexing.py): the symbolic graph raises eager's error once, with no "symbolic
    graph failed" fallback, and still serves the next size."""
    import warnings

    def f(a, b):
        return a // b + 1

    compiled = minidynamo.minicompile(f)
    for n in (5, 6, 7):  # the third size compiles the symbolic graph (automatic dynamic)
        a, b = torch.arange(n), torch.arange(1, n + 1)
        assert_same(compiled(a, b), f(a, b))
    metrics.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _raises_like_eager(compiled, f, torch.arange(8), torch.arange(8))
    assert not [w for w in caught if "symbolic" in str(w.message)] and metrics.symbolic_fallbacks == []
    a, b = torch.arange(9), torch.arange(1, 10)
    assert_same(compiled(a, b), f(a, b))
    assert metrics.specialisations == 0 and metrics.generated_kernel_count == 0  # the symbolic compile served it


@cpu_only
def test_checks_survive_the_training_partition():
    """In a training compile the partitioner copies into each graph what its outputs need: the checks, which
    nothing reads, were dropped, and the loss came back where eager raises. They now go to the forward graph;
    the gradients still match eager's."""
    def f(logits, target, classes):
        p = logits.sigmoid()
        return F.binary_cross_entropy(p, target) + (F.one_hot(classes, 3).float() * logits[:, :3]).sum()

    compiled = minidynamo.minicompile(f)
    x, t, i = torch.randn(4, 5, requires_grad=True), torch.rand(4, 5), torch.tensor([0, 2, 1, 1])
    metrics.reset()
    compiled(x, t, i).backward()
    ours, x.grad = x.grad, None
    f(x, t, i).backward()
    assert_same(ours, x.grad)
    assert metrics.fallback_count == 0
    _raises_like_eager(compiled, f, x.detach().requires_grad_(), t * 2, i)
    _raises_like_eager(compiled, f, x.detach().requires_grad_(), t, torch.tensor([0, 3, 1, 1]))
