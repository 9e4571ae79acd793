"""``max_pool2d_with_indices`` and ``avg_pool2d`` lowered to one fused kernel each (``pool_lowering.py``), against
eager: values, indices (with NaN and all ``-inf`` windows, whose index rules are eager's), padding, stride,
dilation, ``ceil_mode``, the average's divisors; their backwards, one kernel each too (gradients against eager);
and symbolic sizes. All four were ATen fallbacks in every CNN.
"""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import metrics

from .utils import DEVICE, check, cpu_only, leaves, pool_gradient_matches_eager

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py

CASES = {
    "2x2": {"kernel_size": 2},
    "padded, strided": {"kernel_size": 3, "stride": 2, "padding": 1},
    "dilated, uneven": {"kernel_size": (3, 2), "stride": (1, 2), "dilation": (2, 1)},
    "ceil_mode": {"kernel_size": 2, "padding": 1, "ceil_mode": True},
}


def _input(dtype):
    x = torch.randn(2, 3, 7, 9, dtype=dtype)
    x[0, 0, 1, 1] = float("nan")  # a NaN wins its windows
    x[1, 0, 3, 3:5] = float("nan")  # two NaNs in one window: the last one's index
    x[0, 1, 2:4, 2:4] = float("-inf")
    x[1, 2] = float("-inf")  # windows of -inf only: the index is the window's first valid position
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", list(CASES))
def test_max_pool2d_with_indices_is_one_kernel(name, dtype):
    kw = CASES[name]
    check(lambda x: F.max_pool2d(x, return_indices=True, **kw), _input(dtype), kernels=1, fallbacks=0)


def test_a_window_of_more_than_25_elements_falls_back():
    check(lambda x: F.max_pool2d(x, 6, return_indices=True), torch.randn(1, 2, 12, 12), fallbacks=1)


@cpu_only  # eager's CUDA avg_pool2d refuses int64
def test_integer_pooling_falls_back_with_eager_values():
    """Eager's CPU kernels pool int64 tensors (a truncating average, no -inf to start a maximum from): left to ATen, counted
    (found by the lowering fuzzer, which pools a (C, H, W) value of any dtype)."""
    x = torch.arange(2 * 5 * 5).reshape(2, 5, 5) * 7 % 11
    check(lambda x: (F.avg_pool2d(x, 3, 1, 1), F.max_pool2d(x, 2)), x, fallbacks=2)


@pytest.mark.parametrize("kind, kw", [
    ("max", {"kernel_size": (3, 2), "stride": (1, 2), "dilation": (2, 1)}),
    ("max", {"kernel_size": 2, "padding": 1, "ceil_mode": True}),
    ("avg", {"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True}),  # rows no window covers
    ("avg", {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ("avg", {"kernel_size": 3, "padding": 1, "divisor_override": 5}),
])
def test_pooling_backwards_match_eager(kind, kw):
    """Each input element gathers from the output elements whose window may hold it: for the maximum where the
    saved index is its own (ties: the first), for the average its share under eager's divisor."""
    pool = F.max_pool2d if kind == "max" else F.avg_pool2d
    pool_gradient_matches_eager(lambda x: pool(x * 3, **kw).pow(2))


def test_a_pooling_gradient_fused_with_a_cosine_matches_eager():
    """One kernel: the average pooling's gradient, then the ``cos`` of sin's backward, whose slow path libdevice
    inlines as a loop over local memory.  On an H200, Triton 3.6's own ptxas (12.8.93) miscompiled it -- a third
    of the gradient wrong -- and the ptxas torch ships (13.0.88), which we compile with, builds it right
    ([Note: which ptxas] in compile_worker; docs/debugging.md)."""
    kw = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}
    pool_gradient_matches_eager(lambda x: F.avg_pool2d(x.sin() * 3, **kw).pow(2))


def test_max_pool_in_training_matches_eager_gradients():
    def fn(x, w):
        return F.max_pool2d(x * w, 3, 2, 1).sin()
    (x, w), (x_ref, w_ref) = leaves(torch.randn(2, 3, 8, 8, device=DEVICE), torch.randn(8, device=DEVICE))
    compiled = minidynamo.minicompile(fn)
    metrics.reset()
    out, out_ref = compiled(x, w), fn(x_ref, w_ref)
    torch.testing.assert_close(out, out_ref)
    out.pow(2).sum().backward()
    out_ref.pow(2).sum().backward()
    torch.testing.assert_close((x.grad, w.grad), (x_ref.grad, w_ref.grad), atol=1e-5, rtol=1e-4)
    assert metrics.fallback_count == 0, metrics.fallback_ops  # the backward too: max_pool2d_with_indices_backward
    assert minidynamo.counters["frames"]["ok"] == 1


def test_max_pool_of_symbolic_sizes_compiles_once():
    fn = lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for hw in ((8, 9), (11, 6), (7, 7)):
        x = torch.randn(2, 3, *hw, device=DEVICE)
        for ours, theirs in zip(compiled(x), fn(x)):
            assert torch.equal(ours, theirs)
    frames = minidynamo.counters["frames"]["ok"]
    assert metrics.symbolic_compiles == frames and not metrics.symbolic_fallbacks and metrics.fallback_count == 0
    # torch 2.13's fake max_pool2d serves the three sizes from one frame; 2.11's (the GPU machine's) guards its
    # output-size arithmetic on the sizes, so minidynamo recompiles for each -- still one symbolic compile each
    assert frames == 1 or (torch.__version__ < "2.13" and frames == 3)


AVG_CASES = {
    "padded": {"kernel_size": 3, "stride": 2, "padding": 1},
    "padding not counted": {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    "ceil_mode, uneven": {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "ceil_mode": True},
    "ceil_mode, window in padding": {"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True},
    "divisor_override": {"kernel_size": 3, "padding": 1, "divisor_override": 5},
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", list(AVG_CASES))
def test_avg_pool2d_is_one_kernel(name, dtype):
    """Eager's divisor: the window cut at the padded input (``count_include_pad``) or at the input, or the
    override; a ``ceil_mode`` window past the end is cut too."""
    kw = AVG_CASES[name]
    check(lambda x: F.avg_pool2d(x, **kw), torch.randn(2, 3, 7, 8, dtype=dtype), kernels=1, fallbacks=0,
          atol=1e-3 if dtype == torch.float16 else 1e-5, rtol=1e-3 if dtype == torch.float16 else 1e-5)


def test_avg_pool_in_training_matches_eager_gradients():
    def fn(x):
        return F.avg_pool2d(x.tanh(), 3, 2, 1, count_include_pad=False)
    (x,), (x_ref,) = leaves(torch.randn(2, 3, 9, 8, device=DEVICE))
    compiled = minidynamo.minicompile(fn)
    metrics.reset()
    out, out_ref = compiled(x), fn(x_ref)
    torch.testing.assert_close(out, out_ref)
    out.pow(2).sum().backward()
    out_ref.pow(2).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    assert metrics.fallback_count == 0, metrics.fallback_ops  # the backward too: avg_pool2d_backward
