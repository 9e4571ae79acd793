"""``adaptive_avg_pool2d`` and ``adaptive_max_pool2d`` lowered to one kernel each (``pool_lowering.py``), and their
backwards, against eager: windows that tile the input unevenly (overlapping by one), outputs larger than the input,
NaN and ``-inf`` (eager's index rules, as for ``max_pool2d``), ties, gradients. An average window too large to unroll
is a reduction, and so is a max window that large (eager's index rules kept), and so is any window over a
symbolic input size.
"""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import metrics

from .utils import DEVICE, check, pool_gradient_matches_eager

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py

OUTPUT_SIZES = {"uneven": (3, 4), "one dim even": (7, 2), "larger than the input": (10, 12), "two columns": (5, 2)}


def _input(dtype):
    x = torch.randn(2, 3, 7, 9, dtype=dtype)
    x[0, 0, 1, 1] = float("nan")
    x[1, 0, 3, 3:5] = float("nan")  # two NaNs in one window: the last one's index
    x[1, 2] = float("-inf")  # windows of -inf only: the index is the window's first position
    x[0, 1, 4, 2:4] = 9.0  # a tie: the first one's index
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", list(OUTPUT_SIZES))
def test_adaptive_max_pool2d_is_one_kernel(name, dtype):
    size = OUTPUT_SIZES[name]
    check(lambda x: F.adaptive_max_pool2d(x, size, return_indices=True), _input(dtype), kernels=1, fallbacks=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", list(OUTPUT_SIZES))
def test_adaptive_avg_pool2d_is_one_kernel(name, dtype):
    size = OUTPUT_SIZES[name]
    tol = 1e-3 if dtype == torch.float16 else 1e-5
    check(lambda x: F.adaptive_avg_pool2d(x, size), torch.randn(2, 3, 7, 9, dtype=dtype), kernels=1, fallbacks=0,
          atol=tol, rtol=tol)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("name", list(OUTPUT_SIZES))
def test_adaptive_pooling_backwards_match_eager(kind, name):
    """Each input element gathers from the outputs whose window holds it (two where windows overlap)."""
    pool, size = (F.adaptive_max_pool2d if kind == "max" else F.adaptive_avg_pool2d), OUTPUT_SIZES[name]
    pool_gradient_matches_eager(lambda x: pool(x * 3, size).pow(2))
    # the forward's pooling (with the pow), the backward's gather, and x * 3 written out in the forward: eager saves
    # the pool's input, so the partitioner does ([Note: saving a primal eager does not save]), though the backward
    # reads only its size
    assert metrics.generated_kernel_count == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape, size", [((2, 3, 7, 9), 1), ((2, 3, 16, 16), 3), ((2, 3, 32, 32), (2, 3)),
                                         ((2, 4, 31, 20), (3, 2))])
def test_a_max_window_of_more_than_25_elements_is_a_reduction(shape, size, dtype):
    """Too large to unroll (global max pooling among them): a ``max`` and a ``min`` over per-position keys, fused
    into one kernel with what follows.  Ties (small integers), NaN and ``-inf`` follow eager's index rules."""
    x = torch.randint(0, 4, shape).to(dtype)  # many ties: the first position of the maximum
    x[0, 0, 1, 1] = x[0, 0, 3, 5] = float("nan")  # two NaNs in one window: the last one's index
    x[1, 1] = float("-inf")  # windows of -inf only: the window's first position
    check(lambda x: [t * 1 for t in F.adaptive_max_pool2d(x, size, return_indices=True)], x, kernels=1,
          fallbacks=0)


def test_a_large_max_window_trains_as_eager():
    """Global max pooling then a loss: the backward scatters through the saved indices (lowered)."""
    pool_gradient_matches_eager(lambda x: F.adaptive_max_pool2d(x, 1).pow(2), (2, 3, 7, 9))
    assert metrics.generated_kernel_count == 2  # forward, backward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape, size", [((2, 3, 16, 16), 3), ((2, 3, 32, 32), (2, 2)), ((1, 2, 31, 20), (3, 2))])
def test_an_average_window_of_more_than_25_elements_is_a_reduction(shape, size, dtype):
    """Too large to unroll: a masked ``sum`` over the longest window (float32 for fp16/bf16), divided by the
    window's area, in one kernel with what follows."""
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    check(lambda x: F.adaptive_avg_pool2d(x, size) * 2, torch.randn(shape, dtype=dtype), kernels=1, fallbacks=0,
          atol=tol, rtol=tol)


def test_a_large_average_window_trains_as_eager():
    """Its backward gathers from at most four outputs per element (``_adaptive_avg_pool2d_backward``): lowered."""
    def fn(x):
        return F.adaptive_avg_pool2d(x, (3, 2)).pow(2)  # of x itself: no pool input to save (see above)
    pool_gradient_matches_eager(fn, (2, 3, 31, 20))
    assert metrics.generated_kernel_count == 2  # forward, backward


@pytest.mark.parametrize("fn", [
    lambda x: F.adaptive_avg_pool2d(x, 1).flatten(1) * 2,  # global average pooling: the window is the whole plane
    lambda x: F.adaptive_avg_pool2d(x, (3, 4)).sin(),
    lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True),
    lambda x: F.adaptive_avg_pool2d(x, (10, 12)),  # larger than some inputs: windows of one or two positions
], ids=["global", "avg", "max", "larger"])
def test_symbolic_input_sizes_compile_once(fn):
    """A window's length depends on the input's size, so over a symbolic one it is a ``Reduction`` over a bound
    (``n // m + 2``, or the whole dim for global pooling), masked past each window's end: one symbolic compile, one
    kernel, no fallback (they fell back to ATen before, except global average pooling, which torch's
    decomposition turns into a ``mean``)."""
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for hw in ((8, 9), (11, 6), (16, 16)):
        x = torch.randn(2, 3, *hw, device=DEVICE)
        torch.testing.assert_close(compiled(x), fn(x))
    assert metrics.symbolic_compiles == 1 and minidynamo.counters["frames"]["ok"] == 1
    assert metrics.fallback_count == 0 and metrics.generated_kernel_count == 1, metrics.fallback_ops


@pytest.mark.parametrize("pool", [F.adaptive_avg_pool2d, F.adaptive_max_pool2d], ids=["avg", "max"])
@pytest.mark.parametrize("size", [1, (3, 2), (10, 3)], ids=["global", "smaller", "larger"])
def test_symbolic_input_sizes_train_as_eager(pool, size):
    """The backward gathers from a bound on the candidates (2, or ``ceil(out / 2) + 1``: a size symbol is at least
    2), the extra ones masked by the backward's own checks."""
    compiled = minidynamo.minicompile(lambda x: pool(x, size).pow(2), dynamic=True)
    for hw in ((7, 9), (11, 6)):
        x = torch.randn(2, 3, *hw, device=DEVICE, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, expected = compiled(x), pool(x_ref, size).pow(2)
        grad = torch.randn_like(expected)
        out.backward(grad)
        expected.backward(grad)
        torch.testing.assert_close((out, x.grad), (expected, x_ref.grad), atol=1e-5, rtol=1e-4)
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0 and metrics.fallback_count == 0
