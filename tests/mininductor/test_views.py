"""Views are re-indexing (no copy): permute/transpose, expand, slice with steps, select, squeeze/unsqueeze,
reshape, as_strided; plus cat, constant_pad, gather/index/embedding (indirect loads), iota/arange, full."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from .utils import DEVICE, assert_same, check

torch.manual_seed(0)
X = torch.randn(6, 10, 7)


def test_view_chain_is_one_kernel():
    check(lambda x: x.permute(2, 0, 1)[1:6:2, :, 3].unsqueeze(0).expand(3, 3, 6).squeeze() + 1, X, kernels=1)


def test_reshape_contiguous_and_not():
    check(lambda x: (x.reshape(60, 7) * 2, x.transpose(0, 1).reshape(10, 42) + 1, x.view(-1).sin(),
                     x.flatten(1) * 3, x.unflatten(1, (2, 5)) + 1), X, kernels=1)


def test_select_negative_index_and_slices():
    check(lambda x: (x[-1] + x[:, -3:] .sum(), x[..., ::-1 if False else 2] * 2, x.narrow(1, 2, 5) + 0), X)


def test_reshape_through_a_size_1_dim_reads_linearly():
    """``x[::2]`` of 2 rows is one row: viewed flat, it reads row 0, not ``FloorDiv(i, 8)`` (0 as well, but no
    strided window: ``o[::2].reshape(-1)`` returned with ``o`` was a copy of it, where eager returns a view, and
    the caller's ``add_`` missed ``o``)."""
    def fn(x):
        o = x.sin()
        return o, o[::2].reshape(-1)

    compiled = check(lambda x: x[::2].reshape(-1) * 2, torch.randn(2, 8), kernels=1)
    assert "tl.load(in_ptr0 + (xindex)" in compiled.source
    compiled = check(fn, torch.randn(2, 8), kernels=1)
    x = torch.randn(2, 8, device=DEVICE)
    ours, theirs = compiled(x), fn(x)
    ours[1].add_(1)
    theirs[1].add_(1)
    assert_same(ours, theirs)


def test_as_strided_of_input():
    check(lambda x: torch.as_strided(x, (5, 4), (3, 2), 1) * 2, X)


def test_cat_and_pad():
    y = torch.randn(6, 3, 7)
    check(lambda x, y: (torch.cat([x, y, x * 2], 1), torch.cat([x, x], -1), F.pad(x, (1, 2, 0, 3), value=0.5),
                        F.pad(x, (-1, 2))), X, y, kernels=4)  # four output shapes, one kernel each


def test_a_pad_that_reads_one_element_of_an_empty_tensor_masks_the_load():
    # [Note: a masked load of one element]: the sum over the 1-row dim of a (1, 0) tensor is one element read at
    # index 0 of an empty tensor (a NULL data pointer), which the pad's mask never lets through; unmasked, the
    # load segfaulted the interpreter (lowering fuzz, seed 945782). Then the same read of a non-empty tensor, and
    # a crop whose one output element is padding
    x, y = torch.randn(1, 0), torch.randn(1, 3)
    check(lambda x: (F.pad(x.sum(0), (0, 1), value=2.0), F.pad(x.sum(0), (2, 0)).ceil()), x, kernels=2)
    check(lambda y: (F.pad(y.sum(0), (1, 1)), F.pad(y[:, :1].sum(0), (-1, 1), value=-3.0)), y)


def test_gather_index_embedding():
    idx = torch.tensor([4, 0, -1, 2])
    table = torch.randn(20, 9)
    tokens = torch.randint(0, 20, (3, 5))
    g = torch.randint(0, 10, (6, 4, 7))
    check(lambda x, i, t, tok, g: (x[i], x[:, i], x[i, :, i], F.embedding(tok, t), torch.gather(x, 1, g),
                                   torch.index_select(x, 2, i.abs())), X, idx, table, tokens, g)


def test_creation_ops():
    check(lambda x: (x + torch.arange(7, device=x.device), torch.zeros(3, 4, device=x.device) + 1,
                     torch.ones_like(x) * 2, torch.full((2, 2), 7, device=x.device),
                     torch.arange(2, 11, 3, dtype=torch.float32, device=x.device) * 2, x.new_zeros(5) + x.sum()), X)


@settings(max_examples=12, deadline=None)
@given(st.permutations([0, 1, 2]), st.integers(0, 5), st.integers(1, 3), st.booleans())
def test_random_view_chains(perm, start, step, transpose_first):
    """Property: any permute -> slice -> reshape chain equals eager."""
    def fn(x):
        y = x.transpose(0, 1) if transpose_first else x
        y = y.permute(*perm)
        y = y[start % y.shape[0]::step]
        return (y.reshape(-1) * 2, y.sum(-1))
    check(fn, X)


def test_index_put_and_index_add_scatter_kernels():
    x, i, v = torch.randn(6, 5), torch.tensor([0, 2, 2, 5, 0]), torch.randn(5, 5)
    check(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, i, v, fallbacks=0, kernels=2)
    check(lambda x, i, v: torch.index_add(x, 0, i, v) * 2, x, i, v, fallbacks=0)
    check(lambda x, v: x.index_put((torch.tensor([1, 3], device=x.device),), v[:2]) + 1, x, v, fallbacks=0)
    check(lambda x, i, j: x.index_put((i, j), torch.tensor(7.0, device=x.device), accumulate=True),
          x, i, torch.tensor([1, 1, 1, 4, 0]))


@pytest.mark.parametrize("alpha", [0, 1, 2, -3])
def test_index_add_with_alpha_keeps_the_dtype_of_a_bool_or_int_tensor(alpha):
    """``index_add(..., alpha=2)`` of a bool tensor adds ``alpha`` as a bool, as eager does; ``source * 2`` was
    int64 and the scatter refused it at compile time (lowering fuzz --scatter, seed 9850033).  Triton has no
    atomic add of bool or int16: the scatter falls back to ATen's, counted."""
    x, i = torch.tensor([False, False, True, False]), torch.tensor([0, 1, 0, 3])
    if alpha >= 0:
        check(lambda x, i: x.index_add(0, i, x.flip(0), alpha=alpha), x, i, fallbacks=1)
    ints = torch.tensor([[1, -2], [3, 4], [5, 6], [-7, 8]], dtype=torch.int16)
    check(lambda x, i: x.index_add(0, i, x * 3, alpha=alpha), ints, i, fallbacks=1)
    check(lambda x, i: x.index_add(0, i, x * 3, alpha=alpha), ints.int(), i, fallbacks=0)


def test_flip_reaching_an_output_and_a_matmul_is_copied():
    # a flip is a re-indexing with negative strides, which torch.as_strided cannot express
    check(lambda x: (x.flip(1), x[0].flip(0) @ x[0]), torch.randn(3, 7, 7))


def test_unfold_is_a_view():
    """``x.unfold(dim, size, step)`` re-indexes: ``[..., w, ..., k]`` reads ``x[..., w * step + k, ...]`` (it fell
    back to ATen); one kernel per output shape."""
    check(lambda x: (x.unfold(1, 3, 2) * 2, x.unfold(-1, 7, 1).sum(-1), x[0, 0].unfold(0, 2, 3) + 1,
                     x[0, 0, 0].unfold(0, 1, 1) + 1), X, kernels=4, fallbacks=0)


def test_as_strided_reads_its_base_with_eager_strides():
    """``as_strided`` indexes its input's storage as eager laid it out ([Note: as_strided reads eager's layout]):
    ``x.t() + 1`` is column-major in eager, and we stored it row-major, so the window read it transposed."""
    check(lambda x: (x.t() + 1).as_strided((7, 6), (1, 7)) * 2, X[:, :, 0], fallbacks=0)
    check(lambda x: (x.permute(2, 0, 1).exp().as_strided((3, 4), (6, 1), 2), x.sum()), X, fallbacks=0)


def test_view_scatters_are_kernels():
    """``diagonal_scatter`` and ``as_strided_scatter`` (the backwards of ``diagonal`` and ``as_strided``): a copy,
    then a Scatter kernel over the source; an ``as_strided_scatter`` window starting before its (offset) input's
    first element falls back, as the tensor's storage holds more than we know of."""
    check(lambda x, s: torch.diagonal_scatter(x, s, 1, 0, 2), X, torch.randn(10, 6), kernels=2, fallbacks=0)
    check(lambda x, s: torch.diagonal_scatter(x.transpose(0, 2) * 1, s, -2), X, torch.randn(6, 5), fallbacks=0)
    check(lambda x, s: torch.as_strided_scatter(x * 2, s, (3, 4), (7, 2), 5), X, torch.randn(3, 4), kernels=2,
          fallbacks=0)
    check(lambda x, s: torch.as_strided_scatter(x, s, (3, 4), (7, 2), 5), X[1:], torch.randn(3, 4), fallbacks=1)
