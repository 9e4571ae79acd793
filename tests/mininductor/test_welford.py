"""Welford reductions (``WelfordReduction``, ``config.welford_looped``): var, std, var_mean and layer_norm vs
eager, persistent and looped, on rows that no RBLOCK divides (masked lanes must weigh nothing), with NaN and inf,
fp32, bf16 and fp64; and the shape of the looped code -- layer_norm reads its row in two loops, not three."""
import pytest
import torch
import torch.nn.functional as F

import mininductor
from mininductor import metrics

from .utils import assert_same, check, kernel_code

torch.manual_seed(0)
X = torch.randn(7, 45, 13) * 3 + 1.5


@pytest.fixture(autouse=True)
def welford_on(monkeypatch):
    """Welford is off by default (slower on an H200, config.py): these tests turn it on (a test may turn it off)."""
    monkeypatch.setattr(mininductor.config, "welford_looped", True)


@pytest.fixture(params=["persistent", "looped"])
def reduction_kind(request, monkeypatch):
    """``looped`` forces RBLOCK=8: none of the row lengths here (7 to 4095) is a multiple of it, so every row
    ends in a partly masked chunk."""
    if request.param == "looped":
        monkeypatch.setattr(mininductor.config, "looped_reduction_rblock", 8)
    return request.param


def _stats(dim, correction, keepdim):
    return lambda x: (x.var(dim, correction=correction, keepdim=keepdim),
                      x.std(dim, correction=correction, keepdim=keepdim),
                      torch.var_mean(x, dim, correction=correction, keepdim=keepdim),
                      torch.std_mean(x, dim, correction=correction, keepdim=keepdim))


@pytest.mark.parametrize("dim", [-1, 1, (0, 2), 0, None])
@pytest.mark.parametrize("correction,keepdim", [(0, False), (1, True), (2, False)])
def test_var_std_var_mean_match_eager(dim, correction, keepdim, reduction_kind):
    check(_stats(dim, correction, keepdim), X, atol=1e-5, rtol=1e-5, kernels=1)


@pytest.mark.parametrize("correction,keepdim", [(0, True), (1, False)])
def test_bf16_input_accumulates_in_fp32(correction, keepdim, reduction_kind):
    x = X.to(torch.bfloat16)
    check(_stats(-1, correction, keepdim), x, atol=2e-2, rtol=2e-2, kernels=1)
    check(_stats(1, correction, keepdim), x, atol=2e-2, rtol=2e-2, kernels=1)


def test_nan_and_inf_rows_match_eager(reduction_kind):
    x = X.clone()
    x[1, 3, 4] = float("nan")        # one NaN: its row's mean and variance are NaN, the others untouched
    x[4, :, 2] = float("nan")        # a NaN in every row of x[4]
    x[2, 44, 12] = float("inf")      # in the last, partial chunk of its row and column: variance NaN, as eager
    x[5, 0, :] = float("-inf")       # a row of -inf
    check(lambda x: (x.var(-1), x.std(1, keepdim=True), x.var((0, 2), correction=0)), x, kernels=3)
    # a mean beside an inf depends on the order of the sum (eager's Welford gives NaN or inf): NaN rows only
    check(lambda x: torch.var_mean(torch.where(torch.isinf(x), 0.0, x), -1), x, kernels=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_matches_eager(dtype, reduction_kind):
    x = X.reshape(7, 585).to(dtype)
    x[3, 100] = float("nan")
    w, b = torch.randn(585).to(dtype), torch.randn(585).to(dtype)
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    check(lambda x, w, b: F.layer_norm(x, (585,), w, b), x, w, b, atol=tol, rtol=tol, kernels=1)
    check(lambda x: F.layer_norm(x.reshape(7, 45, 13), (45, 13)), x, atol=tol, rtol=tol, kernels=1)


def test_welford_looped_off_gives_the_same_values(reduction_kind, monkeypatch):
    monkeypatch.setattr(mininductor.config, "welford_looped", False)
    check(_stats(-1, 1, True), X, atol=1e-5, rtol=1e-5, kernels=1)
    check(lambda x: F.layer_norm(x, (13,)), X, atol=1e-5, rtol=1e-5, kernels=1)


def test_fp64_accumulates_in_fp64(reduction_kind):
    check(lambda x: (torch.var_mean(x, -1), F.layer_norm(x, (13,))), X.double(), atol=1e-10, rtol=1e-10,
          kernels=1)


def test_a_large_constant_offset_keeps_its_digits(reduction_kind):
    # 1e4 + N(0, 1): a sum of squares minus the squared sum would cancel almost every digit in fp32
    x = torch.randn(5, 300) + 1e4
    check(lambda x: torch.var_mean(x, -1), x, atol=1e-3, rtol=1e-3, kernels=1)


# ----------------------------------------------------------------------------------------- the generated code
def _layer_norm_kernel(monkeypatch, welford: bool) -> str:
    monkeypatch.setattr(mininductor.config, "looped_reduction_rblock", 32)
    monkeypatch.setattr(mininductor.config, "welford_looped", welford)
    x, w, b = torch.randn(33, 130), torch.randn(130), torch.randn(130)
    compiled = check(lambda x, w, b: F.layer_norm(x, (130,), w, b), x, w, b, kernels=1, atol=1e-5, rtol=1e-5)
    code = kernel_code(compiled)
    assert "def triton_red_fused_native_layer_norm_0" in code
    return code


def test_looped_layer_norm_reads_the_row_in_two_loops(monkeypatch):
    code = _layer_norm_kernel(monkeypatch, welford=True)
    assert code.count("for roffset in range(0, rnumel, RBLOCK):") == 2
    assert code.count("tl.load(in_ptr0 ") == 2  # x: once per loop (the weight and bias are in_ptr1, in_ptr2)
    assert code.count("_welford_reduce(") == 1 and code.count("= _welford(") == 1
    assert "tl.sum(" not in code and "tl.reduce(" not in code  # the lanes combine inside _welford
    first_loop, second_loop = code.split("for roffset in range")[1:]
    assert "_welford_reduce(" in first_loop and "tl.store(" in second_loop
    assert "'evict_last'" in first_loop and "'evict_first'" in second_loop


def test_two_pass_looped_layer_norm_reads_the_row_three_times(monkeypatch):
    code = _layer_norm_kernel(monkeypatch, welford=False)
    assert code.count("for roffset in range(0, rnumel, RBLOCK):") == 3
    assert code.count("tl.load(in_ptr0 ") == 3 and "_welford" not in code


def test_var_and_mean_of_one_row_share_one_welford_loop(monkeypatch):
    monkeypatch.setattr(mininductor.config, "looped_reduction_rblock", 8)
    compiled = check(lambda x: (torch.var_mean(x, -1), x.std(-1), x.mean(-1)), X, kernels=1)
    code = kernel_code(compiled)
    assert code.count("_welford_reduce(") == 1  # var_mean and std: one Welford reduction of the same row
    assert code.count("for roffset in range") == 1  # the plain mean's sum rides in the same loop


def test_split_variance_keeps_two_passes(monkeypatch):
    # few outputs, long rows: split reductions of sums (Welford partials would need welford_combine)
    monkeypatch.setattr(mininductor.config, "split_reduction_threshold", 64)
    x = torch.randn(3, 1001)
    compiled = check(lambda x: (x.var(), torch.var_mean(x, -1)), x, atol=1e-4, rtol=1e-4)
    assert metrics.generated_kernel_count >= 2 and "_welford" not in kernel_code(compiled)


def test_welford_helpers_interpreted_on_a_tiny_block():
    # the header's helpers alone: two chunks of 3 lanes (the last lane masked once), then the lanes combined
    from mininductor.codegen.wrapper import HEADER
    from mininductor.runtime import interpreted_stdlib, load_module
    source = HEADER + '''
@triton.jit
def welford_rows(in_ptr, out_ptr, R: tl.constexpr):
    rindex = tl.arange(0, 4)[None, :]
    xindex = tl.arange(0, 2)[:, None]
    mean = tl.zeros([2, 4], tl.float32)
    m2 = tl.zeros([2, 4], tl.float32)
    weight = tl.zeros([2, 4], tl.float32)
    for roffset in range(0, R, 4):
        mask = (roffset + rindex < R) & (xindex < 2)
        value = tl.load(in_ptr + xindex * R + roffset + rindex, mask, other=123.0)
        mean, m2, weight = _welford_reduce(value, mean, m2, weight, mask, 1.0 / (roffset // 4 + 1))
    m, s, w = _welford(mean, m2, weight)
    tl.store(out_ptr + xindex * 3 + tl.arange(0, 1)[None, :], m)
    tl.store(out_ptr + xindex * 3 + 1 + tl.arange(0, 1)[None, :], s)
    tl.store(out_ptr + xindex * 3 + 2 + tl.arange(0, 1)[None, :], w)
'''
    kernel = load_module(source, interpret=True).welford_rows
    x = torch.randn(2, 7) * 5 + 2
    x[1, 2] = float("nan")
    out = torch.empty(2, 3)
    with interpreted_stdlib():
        kernel[(1,)](x, out, R=7)
    var, mean = torch.var_mean(x, -1, correction=0)
    torch.testing.assert_close(out[:, 0], mean, equal_nan=True)
    torch.testing.assert_close(out[:, 1] / 7, var, equal_nan=True)
    torch.testing.assert_close(out[:, 2], torch.full((2,), 7.0))


@pytest.mark.parametrize("welford", [True, False])
def test_symbolic_row_length_is_one_symbolic_compile(welford, monkeypatch):
    # the row length is a size symbol: a looped kernel, n - correction computed from the symbol at run time
    import minidynamo
    monkeypatch.setattr(minidynamo.config, "raise_internal_errors", True)
    monkeypatch.setattr(mininductor.config, "welford_looped", welford)
    minidynamo.reset()
    metrics.reset()

    def f(x):
        return x.var(0), torch.var_mean(x, -1, correction=0), F.layer_norm(x.t(), (x.shape[0],))
    compiled = minidynamo.minicompile(f, backend="inductor", dynamic=True)
    try:
        for b in (2, 5, 9):
            x = torch.randn(b, 16)
            assert_same(compiled(x), f(x))
    finally:
        minidynamo.reset()
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def test_a_variance_over_one_element_is_eager_s(reduction_kind):
    """[Note: a variance of one element]: over rows of one element ``m2`` is exactly 0, so with correction 1 the
    variance is 0 / 0 = NaN and with correction 0 it is 0 (NaN for inf or NaN), as in eager. The fused
    ``hardsigmoid(a @ b + c)`` before it was computed twice and once contracted differently on the GPU: inf
    (GPU lowering fuzz --zero --matmul, seed 5504602)."""
    a = torch.tensor([[-0.3168, -3.0169, -3.5741]], dtype=torch.float64)
    b = torch.tensor([[-0.7285, 0.7454, -0.7544], [3.8637, -2.7203, -0.0922]], dtype=torch.float64)
    special = torch.tensor([[float("inf"), float("nan"), 1e308]], dtype=torch.float64)

    def f(a, b, special):
        h = F.hardsigmoid(a * 5.1 + b[:1] * 0.37 + 0.3)  # [1, 3]: 0.55, 0, 0
        both = torch.cat([h, special])[None]  # [1, 2, 3]
        return (h.std(0), h.var(0, correction=0), torch.var_mean(h.float(), 0, keepdim=True),
                both.var(0), both.std(0, correction=0), torch.std_mean(special, 0))
    check(f, a, b, special, atol=0, rtol=0)
