"""``addmm`` whose result only pointwise ops read lowers as ``mm`` plus a bias added in the consumer's kernel
([Note: a bias added by its consumer] in extern_lowering.py; upstream's ``unfuse_bias_add_to_pointwise``).
On the GPU by default; the CPU tests turn it on for this device.  Each test compares with eager and counts
kernels and externs, and reads which extern the wrapper calls."""
import pytest
import torch
import torch.nn.functional as F

from mininductor import config

from .utils import DEVICE, check

# small fp32 products keep their library call here too ([Note: a small matmul as a reduction])
pytestmark = pytest.mark.usefixtures("library_matmuls")


@pytest.fixture
def unfused_here(monkeypatch):
    monkeypatch.setattr(config, "unfused_addmm", "always")


def _call(compiled) -> str:
    return compiled.source.split("def call")[1]


@pytest.mark.usefixtures("unfused_here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_linear_then_gelu_is_mm_and_one_kernel_that_adds_the_bias(dtype):
    x, w, b = (torch.randn(*s, dtype=dtype) for s in ((6, 16), (32, 16), (32,)))
    compiled = check(lambda x, w, b: F.gelu(F.linear(x, w, b)), x, w, b, kernels=1, externs=1)
    call = _call(compiled)
    assert "aten_mm(" in call and "aten_addmm(" not in call
    assert call.count(".run(") == 1  # the bias add is in the GELU's kernel


@pytest.mark.usefixtures("unfused_here")
def test_a_view_then_a_multiply_still_counts_as_pointwise():
    # the tutorial MoE's second Linear: its result times the routing weight, through an unsqueeze
    x, w, b, p = torch.randn(5, 16), torch.randn(8, 16), torch.randn(8), torch.randn(5)
    compiled = check(lambda x, w, b, p: F.linear(x, w, b).view(5, 2, 4) * p.view(5, 1, 1), x, w, b, p, kernels=1,
                     externs=1)
    assert "aten_mm(" in _call(compiled)


@pytest.mark.usefixtures("unfused_here")
@pytest.mark.parametrize("fn, externs", [
    (lambda x, w, b: torch.softmax(F.linear(x, w, b), -1), 1),  # a reduction reads it
    (lambda x, w, b: F.linear(x, w, b), 1),  # the graph's output
    (lambda x, w, b: (F.linear(x, w, b), F.linear(x, w, b).sum()), 2),  # one use of two is not pointwise
], ids=["softmax", "output", "sum"])
def test_addmm_stays_where_anything_else_reads_its_result(fn, externs):
    x, w, b = torch.randn(6, 16), torch.randn(32, 16), torch.randn(32)
    compiled = check(fn, x, w, b, externs=externs)
    assert "aten_addmm(" in _call(compiled) and "aten_mm(" not in _call(compiled)


@pytest.mark.usefixtures("unfused_here")
def test_half_precision_and_scaled_addmm_stay_addmm():
    x, w, b = (torch.randn(*s).to(torch.bfloat16) for s in ((6, 16), (32, 16), (32,)))
    compiled = check(lambda x, w, b: F.gelu(F.linear(x, w, b)), x, w, b, atol=2e-2, rtol=2e-2, kernels=1,
                     externs=1)
    assert "aten_addmm(" in _call(compiled)
    a, m1, m2 = torch.randn(4), torch.randn(3, 5), torch.randn(5, 4)
    compiled = check(lambda a, m1, m2: torch.relu(torch.addmm(a, m1, m2, beta=0.5, alpha=2.0)), a, m1, m2,
                     kernels=1, externs=1)
    assert "aten_addmm(" in _call(compiled)


def test_by_default_only_the_gpu_unfuses_and_never_turns_it_off(monkeypatch):
    x, w, b = torch.randn(6, 16), torch.randn(32, 16), torch.randn(32)
    compiled = check(lambda x, w, b: F.gelu(F.linear(x, w, b)), x, w, b, kernels=1, externs=1)
    assert ("aten_mm(" if DEVICE == "cuda" else "aten_addmm(") in _call(compiled)
    monkeypatch.setattr(config, "unfused_addmm", "never")
    compiled = check(lambda x, w, b: F.gelu(F.linear(x, w, b)), x, w, b, kernels=1, externs=1)
    assert "aten_addmm(" in _call(compiled)
