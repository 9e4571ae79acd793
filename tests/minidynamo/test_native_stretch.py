"""Native stretches (minidynamo/native_stretch.py): after a break at a boolean-mask subscript, the next one runs
natively in the same frame ([Note: native stretch]) and shares the first one's nonzero ([Note: shared nonzero]).
Each test compares with eager and asserts frames, breaks and nonzero calls."""
from __future__ import annotations

import contextlib

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter


def test_back_to_back_boolean_mask_subscripts_share_one_frame():
    # [Note: native stretch] in native_stretch.py: after the break at x[m], the next statement w[m] would break again
    # with an empty graph in between; it runs natively in the same frame, and one resume function continues after
    # it. Both breaks are recorded, as upstream would record them.
    def f(x, idx, w):
        out = torch.zeros(3)
        for i in range(3):
            m = idx == i
            a = x[m]
            b = w[m]
            out[i] = (a * b).sum() + len(a)
        return out, a, b

    x, w = torch.randn(10), torch.randn(10)
    idx = torch.tensor([0, 1, 2, 0, 1, 2, 0, 0, 1, 2])
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    for got, expected in zip(compiled(x, idx, w), f(x, idx, w)):
        assert torch.equal(got, expected)
    ctx = compiled._minidynamo_ctx
    # f, and one resume function for the rest of the loop (for i == 1, 2 and the exhausted iterator)
    assert sorted(len(entries) for entries in ctx.cache.values()) == [1, 3]
    assert sum(minidynamo.counters["graph_break"].values()) == len(ctx.graph_breaks) == 6
    assert all("data-dependent" in e.reason and e.user_stack[-1].line.startswith(("a = x[m]", "b = w[m]"))
               for e in ctx.graph_breaks)
    for got, expected in zip(compiled(x, idx, w), f(x, idx, w)):  # warm: no new compile
        assert torch.equal(got, expected)
    assert cnt.frame_count == 4


class _CountNonzero(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += func is torch.ops.aten.nonzero.default
        return func(*args, **(kwargs or {}))


def test_the_two_subscripts_of_a_stretch_share_one_nonzero():
    # [Note: shared nonzero]: x[m] then w[m] compute m's indices once (one device sync instead of two), values,
    # gradients and recorded breaks unchanged
    def f(x, idx, w):
        total = x.sum() * 0
        for i in range(3):
            m = idx == i
            a = x[m]
            b = w[m]
            total = total + (a * b).sum()
        return total

    x, w = torch.randn(10, requires_grad=True), torch.randn(10)
    idx = torch.tensor([0, 1, 2, 0, 1, 2, 0, 0, 1, 2])
    x_e = x.detach().clone().requires_grad_(True)
    compiled = minidynamo.minicompile(f, backend=CompileCounter())
    compiled(x, idx, w)  # compile
    counter = _CountNonzero()
    with counter:
        got = compiled(x, idx, w)
    assert counter.calls == 3  # one per iteration: each stretch's second subscript reused the first's indices
    expected = f(x_e, idx, w)
    assert torch.equal(got, expected)
    got.backward()
    expected.backward()
    assert torch.equal(x.grad, x_e.grad)
    assert sum(minidynamo.counters["graph_break"].values()) == 6


def test_mask_subscript_is_a_subscript():
    from minidynamo.native_stretch import mask_subscript
    x, w = torch.randn(5, 3), torch.randn(5)
    m = torch.tensor([True, False, True, True, False])
    counter = _CountNonzero()
    with counter:
        a, b = mask_subscript(x, m), mask_subscript(w, m)
    assert counter.calls == 1  # m's indices, once for both
    assert torch.equal(a, x[m]) and torch.equal(b, w[m])
    m[1] = True  # mutated in place: a new version, new indices
    assert torch.equal(mask_subscript(w, m), w[m])
    other = m.clone()  # same values, another tensor: its own indices
    assert torch.equal(mask_subscript(x, other), x[other])
    # written behind autograd's back (as a CUDA graph replay rewrites its outputs), then announced with
    # increment_version (mininductor's [Note: replayed outputs are new values]): new indices again
    assert torch.equal(mask_subscript(w, other), w[other])
    other.data[0] = False
    torch.autograd.graph.increment_version(other)
    assert torch.equal(mask_subscript(w, other), w[other])
    # what a[m] would convert or reject goes to a[m] itself: a 0-d mask, a wrong shape, a non-tensor, a subclass
    assert torch.equal(mask_subscript(w, torch.tensor(True)), w[torch.tensor(True)])
    with pytest.raises(IndexError) as ours:
        mask_subscript(w, torch.tensor([True, False]))
    with pytest.raises(IndexError) as eager:
        w[torch.tensor([True, False])]
    assert str(ours.value) == str(eager.value)
    p = torch.nn.Parameter(torch.randn(5))
    assert torch.equal(mask_subscript(p, m), p[m])


@pytest.mark.parametrize("make", [
    lambda: torch.randn(6, 4),  # contiguous: index_select
    lambda: torch.randn(4, 6).t(),  # a transposed view: a[rows], eager's layout
    lambda: torch.arange(6),  # integer rows, as the tutorial MoE's sample indices
    lambda: torch.randn(6, 0),  # empty rows
])
@pytest.mark.parametrize("mask", [[True, False, True, True, False, True], [False] * 6, [True] * 6])
def test_a_one_dimensional_mask_gives_eagers_values_layout_and_gradients(make, mask):
    from minidynamo.native_stretch import mask_subscript
    m = torch.tensor(mask)
    a = make()
    got, expected = mask_subscript(a, m), a[m]
    assert torch.equal(got, expected) and got.dtype == expected.dtype and got.stride() == expected.stride()
    if a.is_floating_point():  # with a gradient: index_select's backward, equal to eager's
        weights = torch.randn(expected.shape)
        eager_leaf = a.detach().requires_grad_()
        (eager_leaf[m] * weights).sum().backward()
        for deterministic in (False, True):
            leaf = a.detach().requires_grad_()
            with _deterministic(deterministic):
                got = mask_subscript(leaf, m)
            kind = "IndexSelect" if a.is_contiguous() and not deterministic else "Index"
            assert type(got.grad_fn).__name__ == f"{kind}Backward0"
            (got * weights).sum().backward()
            assert torch.equal(leaf.grad, eager_leaf.grad)


@contextlib.contextmanager
def _deterministic(flag: bool):
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(flag)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def test_a_captured_variable_keeps_the_usual_resume():
    # a stretch only moves plain locals: `a` is captured by the closure (a cell), so the second subscript gets
    # its own resume function as before -- and the closure still sees the value
    def f(x, m):
        a = x[m]
        get = lambda: a
        b = x[m] * 2
        return get() + b

    x, m = torch.randn(6), torch.tensor([True, False, True, True, False, True])
    compiled = minidynamo.minicompile(f, backend=CompileCounter())
    assert torch.equal(compiled(x, m), f(x, m))
    assert sum(minidynamo.counters["graph_break"].values()) == 2


def _subscripts_in_a_region(x, idx, w):
    out = []
    with torch.no_grad():  # a region the break hands on: its exit runs in the resume function
        for i in range(3):
            m = idx == i
            a = x[m]
            b = w[m]
            out.append((a * b).sum() + len(a))
    return torch.stack(out)


def _subscripts_in_a_profiler_region(x, idx, w):
    out = torch.zeros(3)
    with torch.profiler.record_function("experts"):  # the tutorial MoE's loop sits in one of these
        for i in range(3):
            m = idx == i
            a = x[m]
            b = w[m]
            out[i] = (a * b).sum()
    return out


@pytest.mark.parametrize("fn, entries, exit_breaks", [
    (_subscripts_in_a_region, [1, 3], 0),
    # record_function's exit runs eagerly (a break of its own): one more resume function, after the loop
    (_subscripts_in_a_profiler_region, [1, 1, 3], 1),
])
def test_a_stretch_inside_a_with_region_keeps_one_frame_and_one_nonzero_per_iteration(fn, entries, exit_breaks):
    # The break hands the region's exit on, and the stretch runs inside the exit guard's try block: the tutorial
    # MoE's expert loop, inside record_function("MoE_Experts"), enters one resume function per expert and syncs
    # once, not two frames and two syncs
    x, w = torch.randn(10, requires_grad=True), torch.randn(10)
    idx = torch.tensor([0, 1, 2, 0, 1, 2, 0, 0, 1, 2])
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    assert torch.equal(compiled(x, idx, w), fn(x, idx, w))  # compile
    ctx = compiled._minidynamo_ctx
    # fn, and one resume function for the loop (i == 1, 2 and the exhausted iterator)
    assert sorted(len(e) for e in ctx.cache.values()) == entries
    assert sum(minidynamo.counters["graph_break"].values()) == len(ctx.graph_breaks) == 6 + exit_breaks
    lines = [e.user_stack[-1].line for e in ctx.graph_breaks if "data-dependent" in e.reason]
    assert lines == ["a = x[m]", "b = w[m]"] * 3  # each break, then its stretch's, in source order
    frames = cnt.frame_count
    counter = _CountNonzero()
    with counter:
        got = compiled(x, idx, w)
    assert cnt.frame_count == frames  # warm: nothing compiled again
    assert counter.calls == 3
    assert torch.equal(got, fn(x, idx, w)) and torch.is_grad_enabled()


def _a_failing_second_subscript(x, idx, w):
    with torch.no_grad():
        m = idx == 0
        a = x[m]
        b = w[m]  # w is shorter than the mask: IndexError, raised inside the no_grad region
    return a, b


def test_an_error_in_a_stretch_inside_a_with_region_runs_the_exit_as_eager():
    x, w, idx = torch.randn(10), torch.randn(4), torch.tensor([0, 1, 2, 0, 1, 2, 0, 0, 1, 2])
    with pytest.raises(IndexError) as eager:
        _a_failing_second_subscript(x, idx, w)
    assert torch.is_grad_enabled()
    compiled = minidynamo.minicompile(_a_failing_second_subscript, backend=CompileCounter())
    with pytest.raises(IndexError) as ours:
        compiled(x, idx, w)
    assert str(ours.value) == str(eager.value)
    assert torch.is_grad_enabled()  # the region's exit ran: grad mode is back on
    assert torch.equal(compiled(x, idx, torch.randn(10))[0], x[idx == 0])


@pytest.mark.parametrize("grad", [False, True])
def test_a_stretch_prefetches_its_subscripts_kernels_when_it_will_gather(monkeypatch, grad):
    """[Note: prefetched mask kernels] (mininductor/mask_gather.py): when the translator emits a stretch it hands
    both subscripts' tensors and their mask -- the breaking one's and the stretch's own -- to mininductor's ``prefetch``
    (once per translation, not per run), under ``no_grad`` only, where ``mask_subscript`` would gather.  Values,
    frames and breaks are unchanged."""
    from minidynamo import native_stretch
    seen = []
    stand_in = type("Gather", (), {
        "supports": staticmethod(lambda a, m: False),  # the runtime keeps eager's ops on this CPU
        "prefetch": staticmethod(lambda a, m, b=None, t=None: seen.append(
            (a.dtype, tuple(a.shape), m.dtype, tuple(m.shape), b if b is None else (b.dtype, tuple(b.shape)),
             t if t is None else (t.dtype, tuple(t.shape)))))})
    monkeypatch.setattr(native_stretch, "_mask_gather", lambda: stand_in)
    monkeypatch.setattr(minidynamo.config, "mask_gather", True)

    def f(x, idx, w):
        out = torch.zeros(3)
        for i in range(3):
            m = idx == i
            a = x[m]
            b = w[m]
            out[i] = (a.sum(1) * b).sum() + len(a)
        return out

    x, w = torch.randn(10, 2), torch.arange(10)
    idx = torch.tensor([0, 1, 2, 0, 1, 2, 0, 0, 1, 2])
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    with torch.set_grad_enabled(grad):
        for _ in range(2):
            assert torch.equal(compiled(x, idx, w), f(x, idx, w))
    assert cnt.frame_count == 4 and sum(minidynamo.counters["graph_break"].values()) == 6
    # one call: the two subscripts take the same mask, so they may be gathered in one launch ([Note: both
    # subscripts in one launch]); whether x's rows of 2 and w's of 1 pair is mininductor's to say.  The mask is
    # ``idx == i``, read by the two subscripts only: the graph leaves it unmade, and the kernel that compares
    # ``idx`` itself is prefetched too ([Note: masks the graph does not make])
    per_translation = [(torch.float32, (10, 2), torch.bool, (10,), (torch.int64, (10,)), (torch.int64, (10,)))]
    # translations that emit a stretch: f, and the loop's resume function for i == 1 and 2 (the third entry of
    # the resume function, for the exhausted iterator, has none)
    assert seen == ([] if grad else per_translation * 3)


def _makes_masks(graphs: list) -> int:
    """How many ``==`` comparisons the captured graphs compute (each loop iteration's mask is one).  (Each function
    below reads its loop index after the stretch, as the MoE reads ``expert_idx``: ``k`` must be a live local.)"""
    import operator
    return sum(n.op == "call_function" and n.target in (operator.eq, torch.eq) or
               n.op == "call_method" and n.target == "eq" for gm in graphs for n in gm.graph.nodes)


def _uses_mask_later(x, idx, w):
    out = []
    for i in range(3):
        m = idx == i
        a, b = x[m], w[m]
        out.append(a.sum() * i + b.sum() + m.sum())  # m is read after the stretch: handed on, so made
    return out


def _mask_in_a_list(x, idx, w):
    out, masks = [], []
    for i in range(3):
        m = idx == i
        masks.append(m)  # a container holds it
        a, b = x[m], w[m]
        out.append(a.sum() * i + b.sum())
    return out, masks


def _mask_below_on_the_stack(x, idx, w):
    out = []
    for i in range(3):
        m = idx == i
        pair = (m, x[m], w[m])  # the break's stack holds m below the subscript's operands
        out.append(pair[1].sum() * i + pair[2].sum() + pair[0].sum())
    return out


def _written_after_the_comparison(x, idx, w):
    out = []
    for i in range(3):
        t = idx.clone()
        m = t == i
        t.add_(1)  # t changes after the graph compared it: t == i now is another mask
        a, b = x[m], w[m]
        out.append(a.sum() * i + b.sum() + t.sum())
    return out


def _stored_by_the_stretch(x, idx, w):
    out = []
    for i in range(3):
        m = idx == i
        a = x[m]
        n = m  # the stretch stores the mask in another local, read after it
        b = w[n]
        out.append(a.sum() * i + b.sum() + n.sum())
    return out


def _unmade(x, idx, w):
    out = []
    for i in range(3):
        m = idx == i
        a = x[m]
        b = w[m]
        out.append(a.sum() * i + b.sum() + len(a))  # i is read after the stretch (the MoE's expert_idx is too)
    return out


@pytest.mark.parametrize("fn, made", [
    (_unmade, 0),  # read by the two subscripts alone: left to them
    (_uses_mask_later, 3),
    (_mask_in_a_list, 3),  # (here and below the graph outputs the mask anyway: no recipe besides it)
    (_mask_below_on_the_stack, 3),
    (_written_after_the_comparison, 3),
    (_stored_by_the_stretch, 3),
])
def test_a_mask_only_the_stretch_reads_is_left_unmade(fn, made):
    """[Note: masks the graph does not make] (native_stretch.py): a mask ``t == k`` that only a stretch's subscripts
    read is not computed by the graph; the stretch gets a recipe and computes ``t == k`` where it needs the mask.
    Anything else that could see the mask, or a write to ``t`` after the comparison, keeps it in the graph.
    Values as eager; frames and breaks as when every mask is made."""
    x, w = torch.randn(10, 2), torch.randn(10)
    idx = torch.tensor([0, 1, 2, 0, 1, 2, 0, 0, 1, 2])
    counts = {}
    for unmade in (True, False):
        minidynamo.reset()
        graphs = []
        cnt = CompileCounter()

        def backend(gm, inputs, cnt=cnt, graphs=graphs):
            graphs.append(gm)
            return cnt(gm, inputs)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(minidynamo.config, "unmade_masks", unmade)
            compiled = minidynamo.minicompile(fn, backend=backend)
            with torch.no_grad():
                for _ in range(2):
                    got, expected = compiled(x, idx, w), fn(x, idx, w)
                    torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert sum(minidynamo.counters["eager_fallback"].values()) == 0
        counts[unmade] = (cnt.frame_count, sum(minidynamo.counters["graph_break"].values()), _makes_masks(graphs))
    assert counts[True][1] == counts[False][1] and counts[False][2] == 3  # the same breaks
    assert counts[True][2] == made
    # graphs: where the mask is left unmade, fn's own graph was the comparison alone: nothing left to compile
    assert counts[True][0] == counts[False][0] - (made == 0)


def test_an_unmade_mask_is_made_under_grad_mode_and_raises_as_eager():
    x, w = torch.randn(10, 2, requires_grad=True), torch.randn(10)
    idx = torch.tensor([0, 1, 2, 0, 1, 2, 0, 0, 1, 2])
    graphs = []
    compiled = minidynamo.minicompile(_unmade, backend=lambda gm, inputs: graphs.append(gm) or gm.forward)
    got, expected = compiled(x, idx, w), _unmade(x, idx, w)  # grad mode: the mask is made, nonzero as before
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert _makes_masks(graphs) == 3
    got[0].backward()
    grad, x.grad = x.grad, None
    expected[0].backward()
    assert torch.equal(grad, x.grad)
    with torch.no_grad():
        short = torch.randn(7, 2)  # 7 rows for a mask of 10: eager's IndexError, from the made mask
        with pytest.raises(IndexError) as caught:
            _unmade(short, idx, w)
        with pytest.raises(IndexError) as got_error:
            minidynamo.minicompile(_unmade)(short, idx, w)
    assert str(got_error.value) == str(caught.value)
