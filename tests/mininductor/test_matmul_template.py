"""The skinny fp32 matmul template ([Note: tf32x3 for skinny fp32 matmuls] in mininductor/matmul_template.py).

On the CPU the template runs through Triton's interpreter under ``config.matmul_template = "always"``; on the GPU
(``MININDUCTOR_TEST_DEVICE=cuda``) the same tests run its compiled tf32x3 products, and ``"auto"`` times it
against cuBLAS."""
import pytest
import torch

import minidynamo
from mininductor import config, metrics
from mininductor.matmul_template import CONFIGS, MatmulChoice

from .utils import DEVICE, assert_same, check

# small fp32 products keep their library call here too ([Note: a small matmul as a reduction])
pytestmark = pytest.mark.usefixtures("library_matmuls")


def _matmuls(a, w, x):
    return torch.bmm(a, w), a[1] @ w[0], torch.bmm(a, x.transpose(1, 2)), a[0].T.T @ x[1].T


@pytest.mark.parametrize("k, n", [(64, 128), (45, 70), (100, 16), (3, 5), (0, 7)])
def test_skinny_matmuls_take_the_template_and_match_eager(k, n):
    """bmm and mm, K and N that are and are not multiples of the blocks, a transposed second operand; 1 to 16
    rows. Each matmul is one extern call through a MatmulChoice (an ``mm`` of four rows or fewer is otherwise a
    reduction on the GPU: [Note: a skinny mm as a reduction])."""
    for m in (1, 4, 16):
        a, w, x = torch.randn(3, m, k), torch.randn(3, k, n), torch.randn(3, n, k)
        with config.patch(matmul_template="always", skinny_mm="never"):
            compiled = check(_matmuls, a, w, x, atol=1e-4, rtol=1e-4, kernels=0, externs=4)
        assert metrics.matmul_choices == 4 and "input_precision=\"tf32x3\"" in compiled.source
        assert "torch.bmm" not in compiled.source and "torch.mm" not in compiled.source


def test_infinities_and_nan_follow_eager():
    """An ``inf`` in either operand (its tf32x3 split has a NaN remainder, which Triton drops) gives eager's
    signed infinities; ``0 * inf`` and a NaN give NaN."""
    a, w = torch.randn(2, 4, 96).round(), torch.randn(2, 96, 64)  # whole numbers: TF32 holds them exactly
    a[0, 0, 3] = 0.0
    w[0, 3, 5] = float("inf")  # meets a 0 in row 0 (NaN) and whole numbers in rows 1-3 (+-inf)
    w[1, 7, :] = -float("inf")
    a[1, 2, 9] = float("nan")
    a[0, 3, 11] = float("inf")
    with config.patch(matmul_template="always"):
        check(torch.bmm, a, w, atol=1e-4, rtol=1e-4, kernels=0, externs=1)
    assert metrics.matmul_choices == 1


@pytest.mark.parametrize("case", ["fp64", "bf16", "17 rows", "no columns", "never"])
def test_other_matmuls_keep_the_library(case):
    """Only fp32 with 1 to 16 rows and some columns takes the template; ``"never"`` turns it off."""
    a, w = torch.randn(2, 4, 32), torch.randn(2, 32, 32)
    if case == "fp64":
        a, w = a.double(), w.double()
    elif case == "bf16":
        a, w = a.bfloat16(), w.bfloat16()
    elif case == "17 rows":
        a = torch.randn(2, 17, 32)
    elif case == "no columns":
        w = w[:, :, :0]
    with config.patch(matmul_template="never" if case == "never" else "always"):
        compiled = check(torch.bmm, a, w, atol=1e-2, rtol=1e-2, kernels=0, externs=1)
    assert metrics.matmul_choices == 0 and "aten_bmm = torch.bmm" in compiled.source


def test_auto_uses_the_template_only_on_the_gpu_for_large_weights():
    """``"auto"`` (the default) times the two on the GPU, where the second operand holds at least
    ``matmul_template_min_bytes``; a CPU graph keeps ATen's kernel."""
    a, w = torch.randn(2, 4, 512), torch.randn(2, 512, 256)
    with config.patch(matmul_template="auto", matmul_template_min_bytes=1 << 20):
        check(torch.bmm, a, w, atol=1e-4, rtol=1e-4, kernels=0, externs=1)
        assert metrics.matmul_choices == (1 if DEVICE == "cuda" else 0)
        with config.patch(matmul_template_min_bytes=4 << 20):
            check(torch.bmm, a, w, atol=1e-4, rtol=1e-4, kernels=0, externs=1)
            assert metrics.matmul_choices == 0


@pytest.mark.skipif(DEVICE != "cuda", reason="the choice times cuBLAS against the template on the GPU")
def test_the_first_call_keeps_the_fastest_candidate():
    """``MatmulChoice`` times cuBLAS and each template configuration once, then runs only the winner."""
    a, w = torch.randn(8, 4, 1024, device="cuda"), torch.randn(8, 1024, 1024, device="cuda")
    from mininductor.codegen.wrapper import header_for
    from mininductor.matmul_template import TEMPLATE_NAME, TEMPLATE_SOURCE
    from mininductor.runtime import load_module
    module = load_module(header_for([TEMPLATE_SOURCE]) + TEMPLATE_SOURCE, interpret=False)
    choice = MatmulChoice(getattr(module, TEMPLATE_NAME), (8, 4, 1024), (4096, 1024, 1), "cuda")
    out = choice.run(a, w)
    assert choice.chosen_name in ["cuBLAS"] + [f"template {cfg}" for cfg in CONFIGS]
    torch.testing.assert_close(out, torch.bmm(a, w), atol=1e-4, rtol=1e-4)
    chosen = choice.chosen
    torch.testing.assert_close(choice.run(a * 2, w), torch.bmm(a * 2, w), atol=1e-4, rtol=1e-4)
    assert choice.chosen is chosen


def test_gradients_through_the_template():
    """The backward's ``grad @ w^T`` has the forward's few rows, so it takes the template too; values and
    gradients as eager's, one frame and one graph."""
    a0, w0, bias0 = torch.randn(3, 4, 48, device=DEVICE), torch.randn(3, 48, 40, device=DEVICE), \
        torch.randn(3, 1, 40, device=DEVICE)

    def f(a, w, bias):
        return torch.nn.functional.gelu(torch.baddbmm(bias, a, w)).square().sum()

    leaves = [t.clone().requires_grad_() for t in (a0, w0, bias0)]
    twins = [t.clone().requires_grad_() for t in (a0, w0, bias0)]
    minidynamo.reset()
    metrics.reset()
    with config.patch(matmul_template="always"):
        compiled = minidynamo.minicompile(f, backend="inductor")
        loss = compiled(*leaves)
        loss.backward()
    expected = f(*twins)
    expected.backward()
    assert_same(loss, expected, atol=1e-3, rtol=1e-4)
    for mine, theirs in zip(leaves, twins):
        assert_same(mine.grad, theirs.grad, atol=1e-4, rtol=1e-4)
    assert metrics.matmul_choices == 2  # forward a @ w, backward grad @ w^T (a^T @ grad has 48 rows)
    assert minidynamo.counters["frames"]["ok"] == 1 and minidynamo.counters["stats"]["unique_graphs"] == 1
