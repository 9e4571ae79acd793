"""The mask gather (mininductor/mask_gather.py, [Note: mask gather]): ``a[m]`` for a 1-D boolean mask once its
count is known, in one kernel -- interpreted on the CPU, compiled on a GPU (MININDUCTOR_TEST_DEVICE=cuda).  Each
test compares with eager's ``a[m]`` bit for bit and counts the ``nonzero`` calls and the copies of a count to the host
(``item``) the native stretch makes."""
from __future__ import annotations

import pytest
import torch

import minidynamo
from minidynamo import native_stretch
from minidynamo.examples.moe import make_moe, make_moe_input
from minidynamo.native_stretch import mask_subscript
from mininductor import mask_gather

from .utils import DEVICE


class _CountOps(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.nonzero = self.item = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.nonzero += func is torch.ops.aten.nonzero.default
        self.item += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


@pytest.fixture
def gather_here(monkeypatch):
    """The native stretch gathers on this test's device (on the CPU it would not: an interpreted kernel)."""
    monkeypatch.setattr(native_stretch, "GATHER_ON_CPU", True)
    monkeypatch.setattr(minidynamo.config, "mask_gather", True)


def _same(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype and got.stride() == expected.stride()
    assert got.device == expected.device and got.is_contiguous() == expected.is_contiguous()
    assert got._base is None and expected._base is None  # a tensor of its own, as eager's
    assert torch.equal(_bits(got), _bits(expected))  # bit for bit: NaNs and signed zeros too


def _bits(t: torch.Tensor) -> torch.Tensor:
    same_size = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(same_size)


@pytest.mark.parametrize("rows, shape, dtype, p", [
    (128, (), torch.float32, 0.25),  # the tutorial MoE's flat_probs[mask]
    (128, (), torch.int64, 0.25),  # ... and sample_indices[mask]
    (7, (3,), torch.float16, 0.5),
    (33, (5, 2), torch.bool, 0.5),
    (1, (), torch.float64, 1.0),
    (300, (17,), torch.bfloat16, 0.1),
    (64, (4,), torch.int8, 0.0),  # nothing kept: an empty result, no launch
    (64, (4,), torch.int32, 1.0),  # everything kept
    (mask_gather.MAX_MASK, (), torch.uint8, 0.5),  # the largest mask taken
    (50, (2000,), torch.float32, 0.3),  # wide rows: several programs, each with every row
])
def test_mask_gather_is_eagers_subscript(rows, shape, dtype, p):
    gen = torch.Generator().manual_seed(rows)
    m = (torch.rand(rows, generator=gen) < p).to(DEVICE)
    a = (torch.randn(rows, *shape, generator=gen) * 100).to(dtype).to(DEVICE)
    if dtype.is_floating_point:
        a.view(-1)[::7] = float("nan")  # copied as they are
        a.view(-1)[1::7] = -0.0
    assert mask_gather.supports(a, m)
    n = mask_gather.count(m)
    assert n == int(m.sum())
    _same(mask_gather.mask_gather(a, m, n), a[m])


def test_mask_gather_takes_only_what_it_can_copy():
    m = torch.ones(4, dtype=torch.bool, device=DEVICE)
    assert not mask_gather.supports(torch.ones(4, dtype=torch.complex64, device=DEVICE), m)  # not a Triton dtype
    assert not mask_gather.supports(torch.ones(4, 0, device=DEVICE), m)  # nothing to copy
    big = torch.ones(mask_gather.MAX_MASK + 1, dtype=torch.bool, device=DEVICE)
    assert not mask_gather.supports(torch.ones(big.shape, device=DEVICE), big)  # one block holds the prefix sum
    assert not mask_gather.supports(torch.ones(0, device=DEVICE), torch.ones(0, dtype=torch.bool, device=DEVICE))
    every_other = torch.ones(8, dtype=torch.bool, device=DEVICE)[::2]  # the kernels read the mask contiguously
    assert not mask_gather.supports(torch.ones(4, device=DEVICE), every_other)


@pytest.mark.usefixtures("gather_here")
def test_a_strided_mask_or_a_view_with_an_offset_is_still_eagers_subscript():
    long_mask = torch.tensor([True, False, False, True, True, True, False, False], device=DEVICE)
    a = torch.arange(20.0, device=DEVICE)
    with torch.no_grad():
        _same(mask_subscript(a[:4], long_mask[::2]), a[:4][long_mask[::2]])  # strided mask: eager's ops
        _same(mask_subscript(a[3:11], long_mask), a[3:11][long_mask])  # contiguous, at an offset: the gather
        _same(mask_subscript(a[5:9], long_mask[4:]), a[5:9][long_mask[4:]])  # the mask at an offset too


@pytest.mark.usefixtures("gather_here")
def test_under_no_grad_the_stretch_counts_once_and_gathers_without_nonzero():
    x, w = torch.randn(6, 3, device=DEVICE), torch.randn(6, device=DEVICE)
    m = torch.tensor([True, False, True, True, False, True], device=DEVICE)
    counter = _CountOps()
    with torch.no_grad(), counter:
        a, b = mask_subscript(x, m), mask_subscript(w, m)
    assert (counter.nonzero, counter.item) == (0, 1)  # one count for both subscripts, no index
    _same(a, x[m])
    _same(b, w[m])
    m[1] = True  # mutated in place: a new version, counted again
    with torch.no_grad(), counter:
        _same(mask_subscript(w, m), w[m])
    assert (counter.nonzero, counter.item) == (0, 2)


@pytest.mark.usefixtures("gather_here")
def test_the_mask_gather_leaves_gradients_layouts_and_switches_to_eagers_ops(monkeypatch):
    x = torch.randn(6, 3, device=DEVICE, requires_grad=True)
    m = torch.tensor([True, False, True, True, False, True], device=DEVICE)
    counter = _CountOps()
    with counter:  # grad mode on: nonzero and index_select, with their backward
        got = mask_subscript(x, m)
    assert (counter.nonzero, counter.item) == (1, 0) and type(got.grad_fn).__name__ == "IndexSelectBackward0"
    with torch.no_grad(), counter:
        _same(mask_subscript(x.detach(), m), x.detach()[m])  # the indices just found give the count
        mask_subscript(x.detach().t(), torch.ones(3, dtype=torch.bool, device=DEVICE))  # not contiguous
        mask_subscript(torch.ones(6, 2, dtype=torch.complex64, device=DEVICE), m.clone())  # not a Triton dtype
    assert (counter.nonzero, counter.item) == (3, 0)
    monkeypatch.setattr(minidynamo.config, "mask_gather", False)
    fresh = m.clone()
    with torch.no_grad(), counter:
        _same(mask_subscript(x.detach(), fresh), x.detach()[fresh])
    assert (counter.nonzero, counter.item) == (4, 0)


@pytest.mark.usefixtures("gather_here", "fresh_minicompile")
def test_the_tutorial_moe_under_no_grad_counts_its_masks_from_one_table(monkeypatch):
    """[Note: equality masks counted once]: each expert's mask is ``flat_indices == expert_idx``; the first expert's
    stretch counts its mask, the second makes a table of ``flat_indices`` (one ``tolist``), and every later one
    reads its count there.  No ``nonzero``, one count per forward, eager's outputs."""
    counts, tables, launches = [], [], []
    monkeypatch.setattr(mask_gather, "count", lambda m, count=mask_gather.count: counts.append(count(m)) or counts[-1])
    def spy(name: str):
        f = getattr(mask_gather, name)
        return lambda *args, key=None: launches.append((name, key)) or f(*args, key=key)
    for name in ("mask_gather", "mask_gather_pair"):  # [Note: both subscripts in one launch]
        monkeypatch.setattr(mask_gather, name, spy(name))
    monkeypatch.setattr(native_stretch, "equality_count", lambda t, k, m=None, f=native_stretch.equality_count:
                        tables.append(f(t, k, m)) or tables[-1])
    torch.manual_seed(0)
    model = make_moe("tutorial", "small", seed=0).to(DEVICE).eval()
    compiled = minidynamo.minicompile(model)
    for seed in range(1, 4):
        x = make_moe_input("small", seed=seed).to(DEVICE)
        with torch.no_grad():
            expected, _ = model(x)
            counter = _CountOps()
            with counter:
                got, aux = compiled(x)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        assert aux == 0.0
        assert counter.nonzero == 0 and len(counts) == 1  # the first expert's count alone
        assert tables[0] is None and None not in tables[1:] and len(tables) == model.num_experts
        flat = torch.topk(torch.softmax(model.gate(x), -1), model.top_k, -1).indices.view(-1)
        assert counts + tables[1:] == [int((flat == e).sum()) for e in range(model.num_experts)]
        # both subscripts of an expert in one launch; with the count from the table, the mask is never made: the
        # kernel compares flat_indices with the expert's index ([Note: masks the graph does not make])
        assert launches == [("mask_gather_pair", None)] + [("mask_gather_pair", e) for e in range(1, len(tables))]
        counts.clear()
        tables.clear()
        launches.clear()
    assert sum(minidynamo.counters["eager_fallback"].values()) == 0
    assert minidynamo.counters["stats"]["unique_graphs"] == 7  # as without the gather (test_moe_modes.py)


def _groups(t, a, b, poke):
    out = []
    for k in range(4):
        m = t == k
        rows = a[m]  # breaks: its mask is t == k ...
        weights = b[m]  # ... and this subscript runs natively with it ([Note: native stretch])
        out.append(rows.sum(0) * (k + 1) + weights.sum())
        poke(t)  # user code between two iterations
    return out


@minidynamo.disable
def _write_through_data(t):
    t.data.add_(1)  # a write PyTorch does not count: t._version stays as it was


@minidynamo.disable
def _nothing(t):
    pass


@pytest.mark.usefixtures("gather_here", "fresh_minicompile")
@pytest.mark.parametrize("poke, in_place, answered", [
    (None, False, 3),  # the first iteration counts; the second makes the table, and it and the rest read it
    (_nothing, False, 0),  # a break between two stretches: user code ran, so no table is trusted
    (_write_through_data, False, 0),  # ... which matters: its write leaves the version as it was
    (None, True, 0),  # t.add_(1) in the graph: a new version at every stretch
])
def test_a_table_of_counts_is_read_only_straight_after_a_stretch_on_the_same_unchanged_tensor(poke, in_place,
                                                                                             answered, monkeypatch):
    tables = []
    monkeypatch.setattr(native_stretch, "equality_count", lambda t, k, m=None, f=native_stretch.equality_count:
                        tables.append(f(t, k, m)) or tables[-1])

    def bump(t):
        if in_place:
            t.add_(1)
    step = poke or bump
    fn = lambda t, a, b: _groups(t, a, b, step)
    t = torch.tensor([0, 1, 1, 3, 2, 0, 1, 1, 0, 3, 3, 1], device=DEVICE)
    a, b = torch.randn(12, 3, device=DEVICE), torch.randn(12, device=DEVICE)
    with torch.no_grad():
        expected = fn(t.clone(), a, b)
        got = minidynamo.minicompile(fn)(t, a, b)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    assert len(tables) == 4 and sum(n is not None for n in tables) == answered, (tables, minidynamo.counters)
    assert sum(minidynamo.counters["eager_fallback"].values()) == 0
    # breaks and recompiles are counted per translation (f, then the resume functions' entries for the row-count
    # cases), not per iteration: as many with the table as without it
    mask_breaks = minidynamo.counters["graph_break"].pop(
        "data-dependent output shape: `getitem` returns a shape that depends on tensor values", 0)
    poked = dict(minidynamo.counters["graph_break"])
    assert (mask_breaks, minidynamo.counters["recompiles"]["total"]) == ((5, 4) if poke else (9, 3))
    assert poked == ({f"{poke.__name__} is marked minidynamo.disable": 4} if poke else {})


def test_equality_count_answers_only_for_an_integer_tensor_the_mask_compares_elementwise(monkeypatch):
    t = torch.tensor([5, -2, 5, 7, 5], device=DEVICE)

    def ask(t, k, m):
        native_stretch.equality_counts.hops = 1  # straight after a stretch
        return native_stretch.equality_count(t, k, m)
    assert ask(t, 5, t == 5) is None  # the first sight of t: the caller counts
    assert [ask(t, k, t == k) for k in (5, -2, 9)] == [3, 1, 0]  # the table, made at the second
    assert ask(t.clone(), 5, t == 5) is None  # another tensor: seen for the first time
    assert ask(t[:3], 5, t == 5) is None and ask(t.float(), 5, t == 5) is None  # another shape; not an integer dtype
    small = torch.tensor([44, 1], dtype=torch.int8, device=DEVICE)
    assert ask(small, 300, small == 300) is None  # 300 wraps to 44 in int8: no table could say so
    monkeypatch.setattr(minidynamo.config, "equality_counts", False)  # MINICOMPILE_EQUALITY_COUNTS=0
    assert ask(t, 5, t == 5) is None and ask(t, 5, t == 5) is None
    native_stretch.equality_counts.hops = 2


@pytest.mark.usefixtures("gather_here")
def test_two_subscripts_by_one_mask_are_gathered_in_one_launch_and_the_second_is_handed_on(monkeypatch):
    """[Note: both subscripts in one launch]: ``mask_subscript(a, m, b=b)`` gathers ``b[m]`` too; the next call
    takes it only for the same unchanged ``b`` and mask."""
    pairs = []
    monkeypatch.setattr(mask_gather, "mask_gather_pair", lambda *args, f=mask_gather.mask_gather_pair:
                        pairs.append(args[:2]) or f(*args))
    a, b = torch.randn(9, 2, device=DEVICE), torch.randint(0, 50, (9, 2), device=DEVICE)
    m = torch.tensor([True, False, True, True, False, True, False, False, True], device=DEVICE)
    with torch.no_grad():
        got_a = mask_subscript(a, m, None, None, b)
        handed = native_stretch._last.pending[3]
        got_b = mask_subscript(b, m)
        assert got_b is handed and len(pairs) == 1
        _same(got_a, a[m])
        _same(got_b, b[m])
        mask_subscript(a, m, None, None, b)
        b.add_(1)  # written in between: a new version, gathered again
        _same(mask_subscript(b, m), b[m])
        mask_subscript(a, m, None, None, b)
        _same(mask_subscript(b.clone(), m), b[m])  # another tensor
        other = m.clone()
        mask_subscript(a, m, None, None, b)
        _same(mask_subscript(b, other), b[other])  # another mask
        assert len(pairs) == 4
        for c in (b[:, :1].contiguous(), b.t().contiguous().t(), b[:4]):  # other columns, not contiguous, rows
            _same(mask_subscript(a, m, None, None, c), a[m])  # the first subscript alone
        assert len(pairs) == 4


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_the_gather_compares_t_with_a_key_itself(dtype):
    """[Note: masks the graph does not make] (minidynamo/native_stretch.py): given ``key``, the kernels keep the rows
    where ``t == key`` -- the mask is never made.  37 rows in a block of 64: the padding loads 0, which must not
    count as a match for key 0."""
    gen = torch.Generator().manual_seed(0)
    t = torch.randint(0, 5, (37,), generator=gen).to(dtype).to(DEVICE)
    a = torch.randn(37, 3, generator=gen).to(DEVICE)
    b = torch.randint(-9, 9, (37, 3), generator=gen).to(DEVICE)
    for key in (0, 1, 4, 7):
        m = t == key
        n = int(m.sum())
        _same(mask_gather.mask_gather(a, t, n, key=key), a[m])
        got_a, got_b = mask_gather.mask_gather_pair(a, b, t, n, key=key)
        _same(got_a, a[m])
        _same(got_b, b[m])


@pytest.mark.usefixtures("gather_here")
def test_a_recipe_for_a_mask_subscripts_as_the_mask():
    """[Note: masks the graph does not make]: ``mask_subscript`` of a recipe ``EqualityMask(t, k)`` is ``a[t == k]``:
    gathered comparing ``t`` in the kernel where the table gives the count, through the mask made once otherwise."""
    t = torch.tensor([0, 2, 1, 2, 2, 0, 1, 2], device=DEVICE)
    a, b = torch.randn(8, 3, device=DEVICE), torch.randn(8, 3, device=DEVICE)
    recipe = native_stretch.EqualityMask
    with torch.no_grad():
        native_stretch.equality_counts.hops = 2  # called from outside: no table
        first = recipe(t, 2)
        _same(mask_subscript(a, first, None, None, b), a[t == 2])
        assert first.count is None and torch.equal(first.tensor, t == 2)  # made, once
        made = first.tensor
        _same(mask_subscript(b, first), b[t == 2])  # handed on from the pair
        assert first.tensor is made
        native_stretch.equality_counts.hops = 1  # straight after a stretch on the same t: the table answers
        second = recipe(t, 1)
        got = mask_subscript(a, second, None, None, b)
        assert second.count == 2 and second.tensor is None  # never made
        handed = native_stretch._last.pending[3]
        assert mask_subscript(b, second) is handed  # b's rows came with a's, in one launch
        _same(got, a[t == 1])
        _same(handed, b[t == 1])
        _same(mask_subscript(b.clone(), second), b[t == 1])  # not the handed-on tensor: its own gather, same count
        assert second.tensor is None
        strided = a.t().contiguous().t()
        _same(mask_subscript(strided, second), strided[t == 1])  # not contiguous: through the mask, made now
        assert torch.equal(second.tensor, t == 1)
        with pytest.raises(IndexError):  # eager's error, from the made mask
            mask_subscript(a[:5], recipe(t, 0))
    native_stretch.equality_counts.hops = 2


def test_the_gather_writes_no_row_beyond_the_count_it_is_given():
    a = torch.arange(24.0, device=DEVICE).view(8, 3)
    m = torch.tensor([True, False, True, True, False, True, True, False], device=DEVICE)
    got = mask_gather.mask_gather(a, m, 2)  # five rows are kept: only the first two fit
    assert got.shape == (2, 3) and torch.equal(got, a[m][:2])


@pytest.mark.usefixtures("gather_here")
@pytest.mark.parametrize("seed", range(6))
def test_random_masks_views_and_dtypes_subscript_as_eager(seed):
    # whichever path a subscript takes (gather, or eager's ops for what the gather leaves), eager's values
    gen = torch.Generator().manual_seed(seed)
    dtypes = [torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64, torch.uint8]
    for _ in range(8):
        rows = int(torch.randint(1, 40, (), generator=gen))
        inner = [int(d) for d in torch.randint(0, 4, (int(torch.randint(0, 3, (), generator=gen)),), generator=gen)]
        dtype = dtypes[int(torch.randint(len(dtypes), (), generator=gen))]
        base = (torch.randn(rows + 3, *inner, generator=gen) * 50).to(dtype).to(DEVICE)
        offset = int(torch.randint(0, 4, (), generator=gen))
        a = base[offset:offset + rows]
        if inner and torch.rand((), generator=gen) < 0.3:
            a = a.transpose(0, -1).contiguous().transpose(0, -1) if a.dim() > 1 else a  # not contiguous
        step = 2 if torch.rand((), generator=gen) < 0.3 else 1
        m = (torch.rand(rows * step, generator=gen) < torch.rand((), generator=gen)).to(DEVICE)[::step]
        with torch.no_grad():
            got, expected = mask_subscript(a, m), a[m]
            again = mask_subscript(a.clone(), m)  # the same mask again: its count (or indices) reused
            other = (torch.randn(a.shape, generator=gen) * 9).to(dtypes[int(torch.randint(6, (), generator=gen))])
            first = mask_subscript(a, m.clone(), None, None, other.to(DEVICE))  # maybe both in one launch
            second = mask_subscript(other.to(DEVICE), m)
        _same(got, expected)
        _same(again, expected)
        _same(first, expected)
        _same(second, other.to(DEVICE)[m])


def test_prefetch_starts_the_kernels_a_cuda_mask_subscript_will_launch(monkeypatch):
    """[Note: prefetched mask kernels]: for a CUDA tensor and mask (the translator's fake values; no GPU needed
    here), ``prefetch`` hands the count and gather kernels to ``async_compile.precompile`` without waiting, with
    the signatures their launches pass and as the launchers those launches will use; anything the gather would
    not take, a symbolic size, or one compile thread starts nothing."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from mininductor import async_compile
    calls = []
    monkeypatch.setattr(mask_gather, "_launchers", {})
    monkeypatch.setattr(async_compile, "compile_threads", lambda: 8)
    monkeypatch.setattr(mask_gather, "current_cuda_device", lambda: 0)  # ``supports`` asks: a GPU's, stood in
    monkeypatch.setattr(async_compile, "precompile", lambda module, sigs, wait=True, device=None:
                        calls.append((module, sigs, wait, device)))
    with FakeTensorMode():
        a = torch.empty(128, 4, device="cuda")
        m = torch.empty(128, dtype=torch.bool, device="cuda")
        ints = torch.empty(128, dtype=torch.int64, device="cuda")
        on_cpu = torch.empty(128, 4)
        too_long = torch.empty(mask_gather.MAX_MASK + 1, dtype=torch.bool, device="cuda")
    assert mask_gather.prefetch(a, m) and mask_gather.prefetch(ints, m)
    (module, sigs, wait, device), (_, int_sigs, _, _) = calls
    assert not wait and device == 0
    assert sigs == {"mask_count_kernel": [torch.bool, torch.int32, 1, 128],
                    "mask_gather_kernel": [torch.bool, torch.float32, torch.float32, 2, 4, 128]}
    assert int_sigs["mask_gather_kernel"] == [torch.bool, torch.int64, torch.int64, 2, 1, 128]
    assert module.mask_count_kernel is mask_gather._launcher("mask_count_kernel", 128, 1, None, True)
    assert module.mask_gather_kernel is mask_gather._launcher("mask_gather_kernel", 128, 4, torch.float32, True)
    assert not mask_gather.prefetch(on_cpu, m) and not mask_gather.prefetch(a, a) and \
        not mask_gather.prefetch(a, too_long)
    env = ShapeEnv()
    with FakeTensorMode(shape_env=env):
        symbolic = torch.empty(env.create_unbacked_symint(), 4, device="cuda")
    assert not mask_gather.prefetch(symbolic, m) and not env.guards  # not read, so not guarded on
    with FakeTensorMode():
        probs = torch.empty(128, device="cuda")
    assert mask_gather.prefetch(ints, m, probs)  # two subscripts by one mask: the pair's kernel
    assert calls[-1][1]["mask_gather_pair_kernel"] == [torch.bool, torch.int64, torch.int64, torch.float32,
                                                       torch.float32, 2, 1, 128]
    assert mask_gather.prefetch(a, m, probs)  # 4 columns and 1 do not pair: each subscript's own kernel
    assert sorted(c[1]["mask_gather_kernel"][3:] for c in calls[-2:]) == [[2, 1, 128], [2, 4, 128]]
    monkeypatch.setattr(async_compile, "compile_threads", lambda: 1)
    assert not mask_gather.prefetch(a, m)
    assert len(calls) == 5
