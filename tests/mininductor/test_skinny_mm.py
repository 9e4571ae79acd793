"""An fp32/fp64 ``mm`` of at most four rows lowers as a reduction over K of elementwise products, fused with the
rows' producer and read by the next kernel, instead of a cuBLAS call ([Note: a skinny mm as a reduction] in
extern_lowering.py).  On the GPU by default; the CPU tests turn it on for this device.  Each test compares
values (and gradients) with eager and counts kernels and externs."""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import config, metrics

from .utils import DEVICE, assert_same, check, frames_ok, leaves


@pytest.fixture
def skinny_here(monkeypatch):
    monkeypatch.setattr(config, "skinny_mm", "always")
    monkeypatch.setattr(config, "unfused_addmm", "always")


def _call(compiled) -> str:
    return compiled.source.split("def call")[1]


def expert(x, rows, w1, b1, w2, b2, weights, outputs):
    """One expert of the tutorial MoE: its rows' Linear -> GELU -> Linear, weighted, added into ``outputs``."""
    y = F.linear(F.gelu(F.linear(x[rows], w1, b1)), w2, b2)
    outputs.index_add_(0, rows, y * weights.unsqueeze(-1))
    return outputs


def _expert_args(m, dtype=torch.float32):
    x, w1, b1 = torch.randn(16, 32, dtype=dtype), torch.randn(64, 32, dtype=dtype), torch.randn(64, dtype=dtype)
    w2, b2 = torch.randn(32, 64, dtype=dtype), torch.randn(32, dtype=dtype)
    return x, torch.randperm(16)[:m], w1, b1, w2, b2, torch.rand(m, dtype=dtype), torch.zeros(16, 32, dtype=dtype)


@pytest.mark.usefixtures("skinny_here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rows", [1, 2, 4])
def test_a_few_rows_times_a_matrix_is_one_reduction_kernel(rows, dtype):
    a, b = torch.randn(rows, 48, dtype=dtype), torch.randn(48, 40, dtype=dtype)
    compiled = check(lambda a, b: a @ b, a, b, kernels=1, externs=0)
    assert "aten_mm(" not in _call(compiled) and "tl.sum(" in compiled.source


@pytest.mark.usefixtures("skinny_here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_expert_is_two_kernels_with_the_gather_gelu_and_scatter_fused_in(dtype):
    """The rows' gather is read inside the first matmul's reduction, whose epilogue adds the bias and computes GELU
    (realised once, not recomputed by the second reduction for each of its columns); the second bias, the routing
    weight and the scatter are the second reduction's epilogue ([Note: a scatter ends its producer's kernel] in
    scheduler.py): no extern call, no ``index`` buffer, and the second matmul's result never stored."""
    compiled = check(expert, *_expert_args(4, dtype), atol=1e-4, rtol=1e-4, kernels=2, externs=0)
    call = _call(compiled)
    assert "aten_" not in call and call.count(".run(") == 2
    first, second = (line for line in call.splitlines() if ".run(" in line)
    assert "index" in first and "gelu" in first and "gelu" not in second  # gather and GELU in the first kernel
    assert "index_add" in second  # the scatter ends the second matmul's kernel
    assert call.count(" = empty_strided") == 1  # the first matmul's result; x[rows] is never materialised
    assert compiled.source.count("hint='skinny_mm'") == 2 and "ReductionKindChoice(" not in compiled.source


@pytest.mark.usefixtures("skinny_here")
def test_columns_read_across_rows_take_the_outer_block_sizes_untimed():
    """``x.T @ w`` with both stored row-major reads neither operand contiguously along K: a column reduction,
    whose launcher takes the ``outer`` block sizes, not the ``skinny_mm`` rule's -- the first of them, untimed
    (``outer_mm``): timing six candidates of the friendly MoE's combine cost its first call half a second."""
    from mininductor.runtime import candidate_configs
    compiled = check(lambda x, w: x.T @ w, torch.randn(48, 3), torch.randn(48, 40), kernels=1, externs=0)
    assert "hint='outer_mm'" in compiled.source and "hint='skinny_mm'" not in compiled.source
    assert len(candidate_configs("red", 32 * 1024, 128, "outer")) == 6
    assert candidate_configs("red", 32 * 1024, 128, "outer_mm") == candidate_configs("red", 32 * 1024, 128, "outer")[:1]


def test_a_skinny_mm_kernel_takes_one_config_untimed():
    """Timing the candidates of every expert's two reductions doubled the tutorial MoE's first call on an H200:
    the GPU's launcher gets the rule's first config, where an ordinary reduction of that size gets three."""
    from mininductor.runtime import candidate_configs
    assert len(candidate_configs("per", 4 * 4096, 1024, "inner")) == 3
    assert candidate_configs("per", 4 * 4096, 1024, "skinny_mm") == candidate_configs("per", 4 * 4096, 1024)[:1]
    assert len(candidate_configs("red", 4 * 1024, 8192, "skinny_mm")) == 1


@pytest.mark.usefixtures("skinny_here", "library_matmuls")
def test_more_rows_half_precision_and_a_scaled_addmm_keep_cublas():
    check(lambda a, b: a @ b, torch.randn(5, 48), torch.randn(48, 40), kernels=0, externs=1)  # five rows
    half = check(lambda a, b: (a @ b).relu(), torch.randn(2, 48, dtype=torch.bfloat16),
                 torch.randn(48, 40, dtype=torch.bfloat16), atol=1e-2, rtol=1e-2, kernels=1, externs=1)
    assert "aten_mm(" in _call(half)
    scaled = check(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0).relu(), torch.randn(40),
                   torch.randn(2, 48), torch.randn(48, 40), kernels=1, externs=1)
    assert "aten_addmm(" in _call(scaled)


@pytest.mark.usefixtures("skinny_here")
def test_empty_rows_and_an_empty_k():
    check(lambda a, b: (a @ b) + 1, torch.randn(0, 48), torch.randn(48, 40), externs=0)
    check(lambda a, b: (a @ b) + 1, torch.randn(3, 0), torch.randn(0, 40), externs=0)  # eager: zeros, + 1


@pytest.mark.usefixtures("skinny_here")
def test_special_values_match_eager():
    """inf times 0 is NaN, an inf row stays inf, NaN spreads: as cuBLAS's products and sums give them."""
    a, b = torch.randn(3, 8), torch.randn(8, 5)
    a[0, 2], b[2, 1] = float("inf"), 0.0
    a[1, 4], a[2, 5] = float("nan"), float("-inf")
    compiled = check(lambda a, b: a @ b, a, b, kernels=1, externs=0)
    assert_same(compiled(a.to(DEVICE), b.to(DEVICE)), a.to(DEVICE) @ b.to(DEVICE))


@pytest.mark.usefixtures("skinny_here")
def test_gradients_of_a_few_rows_match_eager():
    """Training: the forward's ``addmm`` is saved for GELU's backward and stays one call; the backward's
    ``grad @ w`` (rows of the gradient) is a reduction, ``grad.T @ x`` (16 rows) stays cuBLAS."""
    (x, w, b), (x_ref, w_ref, b_ref) = leaves(torch.randn(3, 32), torch.randn(16, 32), torch.randn(16))

    def f(x, w, b):
        return F.gelu(F.linear(x, w, b)).sum(1)
    out, expected = minidynamo.minicompile(f)(x, w, b), f(x_ref, w_ref, b_ref)
    grad = torch.randn_like(expected)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close((out, x.grad, w.grad, b.grad), (expected, x_ref.grad, w_ref.grad, b_ref.grad),
                               atol=1e-4, rtol=1e-4)
    assert metrics.fallback_count == 0, metrics.fallback_ops


@pytest.mark.usefixtures("skinny_here")
def test_a_symbolic_row_count_needs_a_bound_from_the_program():
    """``dynamic=True`` keeps one graph for every size: an unbounded row count keeps cuBLAS (no guard of ours);
    rows the program itself bounds -- as the tutorial MoE's capacity check does -- take the reduction."""
    def unbounded(a, b):
        return (a @ b).relu()

    def bounded(a, b):
        if a.shape[0] > 4:
            return (a[:4] @ b).relu()  # four rows: static
        return (a @ b).relu()  # here the guards say a has at most four rows

    w = torch.randn(24, 8)
    for fn, externs in ((unbounded, 1), (bounded, 0)):
        minidynamo.reset()
        metrics.reset()
        compiled = minidynamo.minicompile(fn, dynamic=True)
        for rows in (2, 3, 4):
            a = torch.randn(rows, 24)
            assert_same(compiled(a, w), fn(a, w))
        assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
        assert metrics.extern_call_count == externs and not metrics.size_guards
    a = torch.randn(9, 24)
    assert_same(compiled(a, w), bounded(a, w))  # the other branch: a frame of its own, with four static rows
    assert frames_ok() == 2 and metrics.extern_call_count == 0


@pytest.mark.usefixtures("library_matmuls")
def test_by_default_only_the_gpu_lowers_it_and_never_turns_it_off(monkeypatch):
    monkeypatch.setattr(config, "unfused_addmm", "always")
    args = _expert_args(3)
    # on the GPU the scatter ends the second reduction's kernel; on the CPU it reads an extern mm's result
    cuda = DEVICE == "cuda"
    check(expert, *args, atol=1e-4, rtol=1e-4, kernels=2 if cuda else 3, externs=0 if cuda else 2)
    monkeypatch.setattr(config, "skinny_mm", "never")  # the gather, the bias and GELU, the scatter; two mm
    check(expert, *args, atol=1e-4, rtol=1e-4, kernels=3, externs=2)


# --- [Note: a small matmul as a reduction]: any row count, when the product is small -------------------------

@pytest.fixture
def small_here(monkeypatch):
    monkeypatch.setattr(config, "small_mm", "always")


@pytest.mark.usefixtures("small_here")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_products_of_any_row_count_are_one_reduction_kernel(dtype):
    a, b = torch.randn(9, 24, dtype=dtype), torch.randn(24, 10, dtype=dtype)
    assert "aten_mm(" not in _call(check(lambda a, b: a @ b, a, b, kernels=1, externs=0))
    a, b = torch.randn(3, 7, 24, dtype=dtype), torch.randn(3, 24, 5, dtype=dtype)
    batched = check(torch.bmm, a, b, kernels=1, externs=0)
    assert "aten_bmm(" not in _call(batched) and "tl.sum(" in batched.source
    check(torch.bmm, a.transpose(1, 2).contiguous().transpose(1, 2), b, kernels=1, externs=0)  # strided in K


@pytest.mark.usefixtures("small_here")
def test_a_small_addmm_read_by_a_softmax_adds_its_bias_in_the_softmax_kernel():
    """The friendly MoE's gate: ``addmm`` read by a softmax (not pointwise: no unfused ``addmm``) is the
    reduction, whose sum the softmax's kernel reads and adds the bias to; ``baddbmm`` likewise."""
    compiled = check(lambda c, x, w: torch.addmm(c, x, w.t()).softmax(-1), torch.randn(8), torch.randn(12, 40),
                     torch.randn(8, 40), kernels=2, externs=0)
    assert "aten_addmm(" not in _call(compiled)
    check(lambda c, a, b: torch.baddbmm(c, a, b).sum(-1), torch.randn(3, 1, 5), torch.randn(3, 6, 7),
          torch.randn(3, 7, 5), kernels=2, externs=0)


@pytest.mark.usefixtures("small_here")
def test_the_friendly_moe_routing_einsums_are_reductions():
    """``einsum("bec,bd->ecd")`` (dispatch) and ``einsum("bec,eco->bo")`` (combine) are ``bmm``s of one batch."""
    mask, x, out = torch.rand(6, 4, 2), torch.randn(6, 16), torch.randn(4, 2, 16)
    check(lambda m, x: torch.einsum("bec,bd->ecd", m, x), mask, x, externs=0)
    check(lambda m, o: torch.einsum("bec,eco->bo", m, o), mask, out, externs=0)


@pytest.mark.usefixtures("small_here", "fresh_minicompile")
def test_larger_products_half_precision_and_symbolic_sizes_keep_the_library(monkeypatch):
    a, b = torch.randn(9, 24), torch.randn(24, 10)
    monkeypatch.setattr(config, "small_mm_max_products", 9 * 24 * 10 - 1)
    check(lambda a, b: a @ b, a, b, kernels=0, externs=1)
    monkeypatch.setattr(config, "small_mm_max_products", 9 * 24 * 10)
    check(lambda a, b: a @ b, a, b, kernels=1, externs=0)
    check(lambda a, b: (a @ b).relu(), a.bfloat16(), b.bfloat16(), atol=1e-2, rtol=1e-2, kernels=1, externs=1)
    metrics.reset()
    compiled = minidynamo.minicompile(lambda a, b: (a @ b).relu(), dynamic=True)  # rows: no bound on the product
    for rows in (6, 7, 9):
        a = torch.randn(rows, 24, device=DEVICE)
        assert_same(compiled(a, b.to(DEVICE)), (a @ b.to(DEVICE)).relu())
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.extern_call_count == 1


@pytest.mark.usefixtures("small_here", "fresh_minicompile")
def test_the_friendly_moe_forward_and_gradients_match_eager_without_a_library_call():
    """At the small size every matrix product of the friendly MoE -- gate, dispatch, experts, combine, and their
    backward's -- is a reduction kernel; outputs, aux loss and every parameter's gradient as eager's."""
    from minidynamo.examples.moe import friendly_from_tutorial, make_moe, make_moe_input
    eager = friendly_from_tutorial(make_moe("tutorial", "small", seed=0)).to(DEVICE).train()
    model = friendly_from_tutorial(make_moe("tutorial", "small", seed=0)).to(DEVICE).train()
    x = make_moe_input("small", seed=1).to(DEVICE)
    (out, aux), (expected, expected_aux) = minidynamo.minicompile(model)(x), eager(x)
    (out.square().mean() + aux).backward()
    (expected.square().mean() + expected_aux).backward()
    torch.testing.assert_close((out, aux), (expected, expected_aux), atol=1e-5, rtol=1e-5)
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-5)
    assert frames_ok() == 1 and metrics.extern_call_count == 0
    assert metrics.fallback_ops == ["aten.topk.default"], metrics.fallback_ops


def test_by_default_only_the_gpu_lowers_small_products_and_never_turns_it_off(monkeypatch):
    a, b = torch.randn(9, 24), torch.randn(24, 10)
    cuda = DEVICE == "cuda"
    check(lambda a, b: a @ b, a, b, kernels=1 if cuda else 0, externs=0 if cuda else 1)
    monkeypatch.setattr(config, "small_mm", "never")
    check(lambda a, b: a @ b, a, b, kernels=0, externs=1)
