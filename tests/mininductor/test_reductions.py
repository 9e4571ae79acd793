"""Reductions vs eager over any dims with keepdim: sum, mean, prod, amax/amin, argmax/argmin, var/std/var_mean,
any/all -- persistent (whole row in registers) and looped (rows walked in chunks), with NaN semantics; arg
reductions over one element and the dtype of uint8 any/all."""
import pytest
import torch

import minidynamo
import mininductor
from mininductor import metrics

from .utils import DEVICE, check

torch.manual_seed(0)
X = torch.randn(6, 37, 11)


@pytest.fixture(params=["persistent", "looped"])
def reduction_kind(request, monkeypatch):
    """``looped`` forces RBLOCK=8, so every row of 11..37 elements needs a loop."""
    if request.param == "looped":
        monkeypatch.setattr(mininductor.config, "looped_reduction_rblock", 8)
    return request.param


DIMS = [(-1, False), (1, True), ((0, 2), False), ((0, 1, 2), True), (0, False)]


@pytest.mark.parametrize("dim,keepdim", DIMS)
def test_sum_mean_amax_amin(dim, keepdim, reduction_kind):
    check(lambda x: (x.sum(dim, keepdim), x.mean(dim, keepdim), x.amax(dim, keepdim), x.amin(dim, keepdim)),
          X, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dim,keepdim", [(-1, False), (0, True), (1, False)])
def test_arg_and_var(dim, keepdim, reduction_kind):
    check(lambda x: (x.argmax(dim, keepdim), x.argmin(dim, keepdim), x.var(dim, keepdim=keepdim),
                     x.std(dim, keepdim=keepdim), torch.var_mean(x, dim, correction=0, keepdim=keepdim),
                     (0.9 + 0.1 * x).prod(dim, keepdim)), X, atol=1e-5, rtol=1e-4)


def test_any_all_int_and_bool_sums(reduction_kind):
    check(lambda x: ((x > 1).any(-1), (x > -2).all(1), (x > 0).sum(-1), (x * 10).long().sum(0),
                     torch.max(x, 1), torch.min(x, -1, keepdim=True)), X)


def test_full_reductions(reduction_kind):
    check(lambda x: (x.sum(), x.mean(), x.amax(), x.argmax(), x.max(), x.min(), x.prod() * 0), X,
          atol=1e-4, rtol=1e-5)


def test_nan_propagates_like_eager(reduction_kind):
    x = X.clone()
    x[1, 3, 4] = float("nan")
    x[4, :, 2] = float("nan")
    check(lambda x: (x.amax(-1), x.amin(1), x.argmax(-1), x.argmin(0), x.sum(-1)), x)


def test_ties_pick_first_index(reduction_kind):
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0], [-float("inf")] * 4])
    check(lambda x: (x.argmax(-1), x.argmin(-1)), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_reductions_accumulate_in_fp32(dtype, reduction_kind):
    x = X.to(dtype)
    check(lambda x: (x.sum(-1), x.mean(0), x.amax(1), torch.softmax(x, -1)), x, atol=2e-2, rtol=2e-2)


def test_norms_and_softmax(reduction_kind):
    w, b = torch.randn(11), torch.randn(11)
    check(lambda x, w, b: (torch.softmax(x, -1), torch.log_softmax(x, 1),
                           torch.nn.functional.layer_norm(x, (11,), w, b), torch.logsumexp(x, -1),
                           torch.linalg.vector_norm(x, dim=-1)), X, w, b, atol=1e-5, rtol=1e-5)


def test_norm_over_a_negative_dim_of_size_one_drops_it():
    """torch 2.11's decomposition kept the dim (an [8, 1] norm, broadcast against [8, 1] into [8, 1] where eager
    gives [8, 8]); ``_with_canonical_dims`` in decomposition.py."""
    x = torch.randn(8, 1)
    check(lambda x: (x > torch.linalg.vector_norm(x, 2, -1), torch.linalg.vector_norm(x, 3.0, (-1, 0)),
                     torch.linalg.vector_norm(x[None], 2, (-3, -1), keepdim=True)), x, fallbacks=0)


def test_reduction_of_strided_views(reduction_kind):
    check(lambda x: (x.transpose(0, 2).sum(-1), x[:, ::3].amax(1), x.permute(2, 0, 1).reshape(11, -1).mean(-1)),
          X, atol=1e-5, rtol=1e-5)


def test_cumsum_is_a_scan_kernel(reduction_kind):
    x = X.reshape(6, 37 * 11)[:, :41].contiguous()
    check(lambda x: (x.cumsum(-1), x.cumsum(0) * 2, (x > 0).cumsum(1)), x, atol=2e-3, rtol=2e-3, fallbacks=0)
    # an fp16 running sum of ~6 differs from eager's by an fp16 rounding step (4e-3) where the sums' order differs
    check(lambda x: x.half().cumsum(-1), x, atol=1e-2, rtol=2e-3, fallbacks=0)



def test_cumprod_is_a_scan_kernel(reduction_kind):
    """``cumprod`` is the same ``Scan`` as ``cumsum`` with ``tl.cumprod``; looped, the carry is the product of the
    chunks before. It fell back to ATen before (found by a lowering fuzz). Factors near 1 keep the products of 41
    terms in range; a zero, a NaN, an infinity and a -0.0 follow eager through the rest of their row; integer
    and bool inputs give int64, as eager's."""
    x = X.reshape(6, 37 * 11)[:, :41].contiguous() * 0.1 + 1.0
    special = torch.tensor([[2.0, 0.0, 3.0, -1.0], [float("nan"), 2.0, 1.0, 1.0], [-0.0, 5.0, float("inf"), 2.0]])
    ints = torch.tensor([[1, -2, 3, 0, 5], [2, 2, -1, 1, 3]])

    def fn(x, special, ints):
        return (x.cumprod(-1), x.cumprod(0) * 2, special.cumprod(1), 1 / special.cumprod(1), special.cumprod(0),
                ints.cumprod(1), (ints > 0).cumprod(1), x.cumprod(1, dtype=torch.float64))

    check(fn, x, special, ints, atol=1e-4, rtol=1e-4, kernels=5, fallbacks=0)
    check(lambda x: x.half().cumprod(-1), x[:, :12], atol=1e-2, rtol=1e-2, kernels=1, fallbacks=0)


def test_cumsum_of_leading_negative_zeros_is_positive_zero(reduction_kind):
    """Eager's running sum starts from 0: ``cumsum([-0.0, -0.0, 1.0])`` is ``[0.0, 0.0, 1.0]``, a size-1 dim
    included; ours kept the -0.0s ([Note: cumsum starts at +0.0]). A 0-d tensor is copied as it is, in eager
    too. ``assert_close`` cannot see a zero's sign, so signbit is compared."""
    z = torch.tensor([[-0.0, -0.0, 1.0] * 4, [-0.0, 0.0, -0.0] * 4])

    def fn(z):
        return z.cumsum(1), z.cumsum(0), z[:, :1].cumsum(1), z[0, 0].cumsum(0), z.half().cumsum(1)

    compiled = check(fn, z, fallbacks=0)
    z = z.to(DEVICE)
    for ours, theirs in zip(compiled(z.clone()), fn(z.clone())):
        assert torch.equal(ours.signbit(), theirs.signbit()), (ours, theirs)


def test_split_reduction_for_few_long_rows(reduction_kind, monkeypatch):
    """Few outputs with long rows reduce in two kernels: partials over many programs, then the partials."""
    monkeypatch.setattr(mininductor.config, "split_reduction_threshold", 64)
    x = torch.randn(3, 1001)
    x[1, 17] = float("nan")
    check(lambda x: (x.sum(), x.mean(-1), x[0].amax(), x.amin(-1), (x > 3).any(), x[2].prod() * 0 + x.var()),
          x, atol=1e-4, rtol=1e-4)
    from mininductor import metrics
    assert metrics.generated_kernel_count >= 2


@pytest.fixture
def small_column_splits(monkeypatch):
    """Column reductions over 64+ rows split into blocks of 32 rows (the GPU default: 4096+ rows, 2048)."""
    monkeypatch.setattr(mininductor.config, "split_outer_reduction_min_rows", 64)
    monkeypatch.setattr(mininductor.config, "split_outer_reduction_block_rows", 32)


@pytest.mark.parametrize("rows", [128, 201])  # 4 blocks of 32; 6 blocks of 34, the last one masked
def test_column_reductions_split_over_row_blocks(rows, small_column_splits):
    """[Note: split column reductions]: partials over row blocks, then one small reduction of the partials."""
    x = torch.randn(rows, 24)
    x[5, 3] = float("nan")
    check(lambda x: x.sum(0), x, kernels=2)
    check(lambda x: x.sum(0) / rows + 1, x, kernels=2, atol=1e-5, rtol=1e-4)  # the epilogue joins the 2nd kernel
    check(lambda x: (x.mean(0, keepdim=True), x.amax(0), x.amin(0), (x > 0).any(0), (x > -3).all(0),
                     (x * 10).long().sum(0), (x * 10).int().amax(0), (0.99 + 0.01 * x).prod(0)),
          x, atol=1e-5, rtol=1e-4)
    check(lambda x: (x.t() * 2).sum(1), x, kernels=2, atol=1e-5, rtol=1e-4)  # a transposed row is a column
    check(lambda x: x.view(rows, 4, 6).sum(0), x, kernels=2, atol=1e-5, rtol=1e-4)


def test_only_column_reductions_split(small_column_splits):
    """Rows (contiguous along the reduced dim), argmax (no partials to combine) and few rows stay one kernel."""
    x = torch.randn(128, 24)
    check(lambda x: x.sum(1), x.t().contiguous(), kernels=1)
    check(lambda x: x.argmax(0), x, kernels=1)
    check(lambda x: x[:40].sum(0), x, kernels=1)
    check(lambda x: x.var(0), x, kernels=1, atol=1e-5, rtol=1e-4)  # Welford stays one loop


def test_argmax_of_whole_tensor_with_keepdim():
    check(lambda x: (x.argmax(), x.argmin(keepdim=True), torch.argmax(x, keepdim=True)), X)


def test_gpu_max_combine_keeps_nan_like_amax():
    # Compiled kernels reduce max/min with the NaN-keeping combines of output_code.py's header (one tl.reduce);
    # the interpreter uses tl.max plus a NaN check instead (tl.reduce is slow there). The combines themselves are
    # checked here, interpreted on a tiny block, against torch.amax/amin.
    from mininductor.codegen.wrapper import HEADER
    from mininductor.runtime import interpreted_stdlib, load_module
    source = HEADER + '''
@triton.jit
def reduce_rows(in_ptr, max_ptr, min_ptr, R: tl.constexpr):
    row = tl.program_id(0)
    block = tl.load(in_ptr + row * R + tl.arange(0, R))
    tl.store(max_ptr + row, tl.reduce(block, 0, _maximum_nan))
    tl.store(min_ptr + row, tl.reduce(block, 0, _minimum_nan))
'''
    kernel = load_module(source, interpret=True).reduce_rows
    x = torch.randn(3, 8)
    x[0, 5] = float("nan")
    x[2, 0] = float("nan")
    got_max, got_min = torch.empty(3), torch.empty(3)
    with interpreted_stdlib():
        kernel[(3,)](x, got_max, got_min, R=8)
    torch.testing.assert_close(got_max, x.amax(1), equal_nan=True)
    torch.testing.assert_close(got_min, x.amin(1), equal_nan=True)


# ---------------------------------------- regressions the op corpora found
@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_arg_reductions_over_one_element():
    """argmax/argmin over a size-1 dim (or a 0-d tensor) is 0; it was a reduction kernel without RBLOCK."""
    x = torch.randn(1, 5, 1)
    check(lambda x: (x.argmax(0), x.argmin(-1, keepdim=True), x.max(2), x[:, :1].argmax()), x)
    check(lambda s: (s.argmax(), s.argmin(), s.sum(), s.amax()), torch.tensor(0.7))


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_any_all_of_uint8_are_uint8(monkeypatch):
    """``u.any(0)`` of a uint8 tensor is uint8 in eager (a legacy rule), ours was bool (programs
    ``any_torch.uint8_96``, unsplit and split column reductions alike)."""
    monkeypatch.setattr(mininductor.config, "split_outer_reduction_min_rows", 64)
    monkeypatch.setattr(mininductor.config, "split_outer_reduction_block_rows", 32)
    u = torch.randint(0, 3, (96, 7), dtype=torch.uint8)
    check(lambda u: (u.any(0), u.all(0), u[:5].any(1), u.all(), u.bool().any(0)), u, fallbacks=0)


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_a_sum_of_negative_zeros_is_positive_zero_as_in_eager():
    """[Note: a sum of negative zeros]: eager's sums start from +0.0.  A row of one element was a copy of it and
    a block of -0.0s filling its lanes summed to -0.0, which a division turned into -inf (lowering fuzz, seed
    58227)."""
    z = torch.full((3, 4), -0.0, device=DEVICE)
    fn = lambda z: (1 / z[:, :1].sum(1), 1 / z[:, :2].sum(1), 1 / z.mean(1), 1 / z[:, :1].mean(1), z.sum(1), z.prod(1),
                    z.amax(1))
    compiled = minidynamo.minicompile(fn)
    for ours, theirs in zip(compiled(z), fn(z)):
        assert torch.equal(ours, theirs) and torch.equal(ours.signbit(), theirs.signbit()), (ours, theirs)
    assert metrics.fallback_count == 0
