"""Indices read from tensors: gathers (``x[i]``, ``gather``, ``embedding``, ``index_select``) and scatters
(``index_put``, ``index_add``, ``index_copy``, ``scatter``). Out-of-range and negative indices raise as eager does
(the interpreter checks them; the GPU's device asserts are in test_device_asserts.py), index_add/index_copy values
and alpha rounding match eager, and accumulating scatters of dtypes ``tl.atomic_add`` lacks fall back. Found by
the op corpora. Budget: a few seconds on 2 cores."""
import pytest
import torch

from .utils import check, cpu_only, raises_like_eager

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


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


@cpu_only
@pytest.mark.parametrize("index", [[1, -1], [1, 5], [0, -6]])
def test_index_add_and_index_copy_refuse_negative_indices(index):
    """``x.index_add(0, tensor([1, -1]), v)`` raises in eager; upstream's decomposition (``x[i] += v``) counted
    -1 from the end and returned a value. index_add/index_copy now decompose to scatter_add/scatter, whose
    indices are checked without wrapping. ``index_fill`` does wrap -1 in eager, and still does (-6 raises)."""
    x, i, v = torch.randn(5, 3), torch.tensor(index), torch.ones(2, 3)
    raises_like_eager(lambda x, i: x.index_add(0, i, v), x, i, fallbacks=0)
    raises_like_eager(lambda x, i: x.clone().index_add_(0, i, v, alpha=2), x, i, fallbacks=0)
    raises_like_eager(lambda x, i: x.index_copy(0, i, v), x, i, fallbacks=0)
    fill = lambda x, i: x.index_fill(0, i, -2.0)
    if index == [1, -1]:
        check(fill, x, i, kernels=2, fallbacks=0)
    else:
        raises_like_eager(fill, x, i, fallbacks=0)


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


@cpu_only
def test_a_bad_index_does_not_retire_the_symbolic_graph():
    """A symbolic graph that raises on the caller's bad index is not broken: the error is eager's, raised once,
    with no "symbolic graph failed" fallback, and the next good call of a new size still runs the one symbolic
    compile (no per-shape compile). Before, the error retired the symbolic graph for good and re-ran the call."""
    import warnings

    import minidynamo
    from mininductor import metrics

    def f(x, i):
        return x[i] * 2 + 1

    compiled = minidynamo.minicompile(f)
    i = torch.tensor([1, 2])
    for n in (5, 6, 7):  # the third size compiles the symbolic graph (automatic dynamic)
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x, i), f(x, i))
    metrics.reset()
    bad, x = torch.tensor([1, 20]), torch.randn(8)
    with pytest.raises(IndexError) as eager_error:
        f(x, bad)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(IndexError) as ours:
        warnings.simplefilter("always")
        compiled(x, bad)
    assert "20" in str(ours.value) and "20" in str(eager_error.value)
    assert not [w for w in caught if "symbolic" in str(w.message)] and metrics.symbolic_fallbacks == []
    x = torch.randn(9)
    torch.testing.assert_close(compiled(x, i), f(x, i))
    assert metrics.specialisations == 0 and metrics.generated_kernel_count == 0  # the symbolic compile served it
    assert minidynamo.counters["stats"]["unique_graphs"] == 2
