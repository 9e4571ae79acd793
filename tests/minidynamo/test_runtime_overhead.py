"""The translator's per-call runtime (issue #7): what a compiled call costs on the host, pinned by behaviour.

Every test compares with eager and asserts counts; the cost itself is pinned by what a call does (guards tried,
``nn.Module.__getattr__`` calls, frames entered), not by timings.  bench/overhead_translator.py measures the time.
"""
import dataclasses
import types

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.guards import Guard, GuardManager, TensorMeta, is_frame_input, tensor_match
from minidynamo.source import AttrSource, LocalSource
from minidynamo.testing import CompileCounter
from minidynamo.utils import tuple_iterator_state


class Experts(nn.Module):
    """A loop over experts with a graph break in the body: its resume function is entered once per index."""

    def __init__(self, n: int = 4):
        super().__init__()
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(n))
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(len(self.experts)):
            y = self.experts[i](x) * self.scale
            minidynamo.graph_break()
            out = out + y
        return out


class ExpertsWithGains(Experts):
    """The same loop, also reading a Python list by the loop index: that specialises the index, one entry each."""

    def __init__(self, n: int = 4):
        super().__init__(n)
        self.gains = [1.0, 2.0, 3.0, 4.0][:n]

    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(len(self.experts)):
            y = self.experts[i](x) * self.gains[i]
            minidynamo.graph_break()
            out = out + y
        return out


def entries_of(compiled, name_part: str) -> list:
    return [e for code, es in compiled._ctx.cache.items() if name_part in code.co_name for e in es]


def guard_lines(entry) -> list[str]:
    return [line.strip() for line in entry.guard_manager.source.splitlines() if line.strip().startswith("if not")]


def test_loop_index_is_the_first_guard_of_a_resume_function():
    """[Note: guard order and shared prefixes]: where a loop's resume function has an entry per index (the body
    reads a Python list by it), a miss is decided by the first line of the check function, before the ambient state
    is read."""
    model = ExpertsWithGains().eval()
    compiled = minidynamo.minicompile(model, backend="eager")
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        torch.testing.assert_close(compiled(x), model(x))
    # forward runs expert 0 up to the break; one resume function runs the rest of the body and the next expert
    # up to the break. Its first compile traces the index as a symbol ([Note: a resumed loop's variable]), which
    # gains[i] specialises: an entry per next index 1, 2, 3 (and one for the end of the loop)
    per_index = [e for e in entries_of(compiled, "__resume_at") if any(
        g.kind == "EQUALS_MATCH" and is_frame_input(g.source) for g in e.guards)]
    assert len(per_index) == 3 and len(entries_of(compiled, "__resume_at")) == 4
    assert minidynamo.counters["recompiles"]["total"] == 3
    for entry in per_index:
        first = guard_lines(entry)[0]
        assert "EQUALS_MATCH" in first and "is ___t" in first, first


def test_module_sources_read_the_module_dicts():
    """[Note: module sources read the module's dicts]: guards and graph inputs spell ``_modules[...]`` and
    ``_parameters[...]``, so a warm call never runs ``nn.Module.__getattr__``."""
    model = Experts().eval()
    compiled = minidynamo.minicompile(model, backend="eager")
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled(x)
        text = minidynamo.show_guards(compiled)
        assert "L['self']._modules['experts']._modules['0']._modules['0']._parameters['weight']" in text
        assert "L['self']._buffers['scale']" in text
        calls = []
        getattr_ = nn.Module.__getattr__

        def counting(self, name):
            calls.append(name)
            return getattr_(self, name)

        nn.Module.__getattr__ = counting
        try:
            out = compiled(x)
        finally:
            nn.Module.__getattr__ = getattr_
        torch.testing.assert_close(out, model(x))
    assert calls == []


def test_replaced_parameter_buffer_and_submodule_are_seen():
    """The dict reads see the module as it is now: a new parameter, buffer or submodule is used (or recompiles)."""
    cnt = CompileCounter()
    model = Experts().eval()
    compiled = minidynamo.minicompile(model, backend=cnt)
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled(x)
        frames = cnt.frame_count
        model.experts[1][0].weight = nn.Parameter(torch.randn(8, 8))  # same metadata: no recompile, new values
        torch.testing.assert_close(compiled(x), model(x))
        assert cnt.frame_count == frames
        model.scale = torch.tensor(3.0)  # a new buffer of the same metadata
        torch.testing.assert_close(compiled(x), model(x))
        model.experts[2] = nn.Sequential(nn.Linear(8, 8), nn.Tanh())  # another module type: recompiles
        torch.testing.assert_close(compiled(x), model(x))
        assert cnt.frame_count > frames


class SkippingExperts(Experts):
    """Like ``Experts``, but an expert whose index is in ``self.skip`` is skipped with ``continue``: the resume
    function then has entries that pin the index (they read ``self.experts[i]``) and one that does not."""

    def __init__(self, n: int = 6):
        super().__init__(n)
        self.skip = (2, 4)

    def forward(self, x):
        out = torch.zeros_like(x)
        for i in range(len(self.experts)):
            minidynamo.graph_break()
            if i in self.skip:
                continue
            out = out + self.experts[i](x) * self.scale
        return out


def plain_scan(entries, f_locals, f_globals):
    return next((e for e in entries if e.guard_manager.check(f_locals, f_globals)), None)


def spy_on_checks(entries, calls: list) -> None:
    """Make each entry's guard function record the locals it is called with."""
    def spy(check):
        return lambda f_locals, f_globals: calls.append(f_locals) or check(f_locals, f_globals)

    for entry in entries:
        entry.guard_manager.check = spy(entry.guard_manager.check)


def with_key(f_locals: dict, source, value, drop: bool = False) -> dict:
    """``f_locals`` where the indexed input reads ``value`` (or is missing): a local, or a loop iterator's item."""
    name = source.local_name if isinstance(source, LocalSource) else source.base.local_name
    if drop:
        return {k: v for k, v in f_locals.items() if k != name}
    if isinstance(source, LocalSource):
        return dict(f_locals, **{name: value})
    items, index = tuple_iterator_state(f_locals[name])
    rest = list(items[index:])
    rest[source.index] = value
    return dict(f_locals, **{name: iter(tuple(rest))})


def test_cache_lookup_by_index_agrees_with_a_plain_scan():
    """[Note: cache entries indexed by a constant]: the index finds an entry exactly when a scan in compile order
    does, and one whose guards pass (the scan's own entry, unless a more recently hit one also passes: [Note: most
    recently hit first]), for the locals of real calls and for those locals with the indexed value changed (other
    ints, types, unhashable)."""
    model = SkippingExperts().eval()
    compiled = minidynamo.minicompile(model, backend="eager")
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        entries = max(compiled._ctx.cache.values(), key=len)
        calls = []
        spy_on_checks(entries, calls)
        torch.testing.assert_close(compiled(x), model(x))
    assert is_frame_input(entries.key_source) and len(entries.by_value) >= 4
    f_globals = model.forward.__globals__
    seen = {id(L): L for L in calls}.values()
    variants = [with_key(L, entries.key_source, v) for L in seen for v in [*range(-1, 8), "3", 3.0, True, [1]]]
    variants += [with_key(L, entries.key_source, None, drop=True) for L in seen]
    for f_locals in [*seen, *variants]:
        scanned, found = plain_scan(entries, f_locals, f_globals), entries.lookup(f_locals, f_globals)
        assert (found is None) == (scanned is None)
        assert found is None or found.guard_manager.check(f_locals, f_globals)


def test_the_entry_last_hit_is_tried_first():
    """[Note: most recently hit first]: after a call takes the second of two entries, the next call with the same
    shapes tries one guard function, not two; the values stay eager's and nothing recompiles."""
    def f(x):
        return torch.relu(x) * 2

    counter = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=counter, dynamic=False)
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    compiled(a)
    compiled(b)
    assert counter.frame_count == 2
    (entries,) = compiled._minidynamo_ctx.cache.values()
    first, second = entries
    tried = []
    spy_on_checks(entries, tried)
    for expected_tries, x in ((2, b), (1, b), (1, b), (2, a), (1, a)):
        tried.clear()
        torch.testing.assert_close(compiled(x), f(x))
        assert len(tried) == expected_tries
    assert counter.frame_count == 2
    assert list(entries) == [first, second]  # the list itself keeps compile order (explain shows it)


def test_loop_lookup_tries_few_guard_functions():
    """Per iteration of the loop, a warm call tries the index's candidates only, not every entry."""
    model = SkippingExperts(n=8).eval()
    compiled = minidynamo.minicompile(model, backend="eager")
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled(x)
        tried = []
        for entries in compiled._ctx.cache.values():
            spy_on_checks(entries, tried)
        torch.testing.assert_close(compiled(x), model(x))
    biggest = max(len(v) for v in compiled._ctx.cache.values())
    frames = 1 + 2 * 8  # forward; per iteration the body after the break and the FOR_ITER's continuation
    assert biggest >= 6
    assert len(tried) <= frames + 8  # at most one miss (the unpinned entry) per iteration


# --- [Note: loops resumed with their iterator] -------------------------------------------------------------------
def sum_items(it, x):
    for v in it:
        x = x + v
    return x


def take_one(it, x):
    return x * next(it)


def sum_with_break(it, x):
    for v in it:
        x = x + v
        minidynamo.graph_break()
    return x


def test_tuple_iterator_input_is_traced_and_advanced():
    """An input ``tuple_iterator`` is unrolled in the graph, and the real iterator is left where eager leaves it."""
    cnt = CompileCounter()
    f = minidynamo.minicompile(sum_items, backend=cnt)
    x = torch.randn(3)
    it, expected_it = iter((1, 2, 3)), iter((1, 2, 3))
    torch.testing.assert_close(f(it, x), sum_items(expected_it, x))
    assert list(it) == list(expected_it) == []
    assert cnt.frame_count == 1 and not minidynamo.counters["graph_break"]
    g = minidynamo.minicompile(take_one, backend="eager")
    it = iter((2.0, 5.0))
    torch.testing.assert_close(g(it, x), x * 2.0)
    assert next(it) == 5.0


def test_tuple_iterator_guards_the_items_left():
    """A loop the trace ran to its end pins the number of items (== n); a changed item value is seen."""
    cnt = CompileCounter()
    f = minidynamo.minicompile(sum_items, backend=cnt)
    x = torch.randn(3)
    for items in [(1, 2, 3), (1, 2, 3), (1, 2), (4, 5), (1, 2, 3, 4)]:
        torch.testing.assert_close(f(iter(items), x), sum_items(iter(items), x))
    reasons = " ".join(f._minidynamo_ctx.recompile_reasons)
    assert "TUPLE_ITERATOR_LEN: expected items left == 3, got 2 items left" in reasons


def test_loop_resumed_with_its_iterator_has_no_break_at_for_iter():
    """A break in a loop body: the resume function runs the rest of the body, ``FOR_ITER`` on the iterator it
    received, and the next body up to the break -- one frame per iteration, one entry for all iterations (the
    item is an int that becomes dynamic; ``len >= 1`` does not pin how many are left)."""
    f = minidynamo.minicompile(sum_with_break, backend="eager")
    x = torch.randn(3)
    for n in (5, 40):
        items = tuple(range(n))
        it, expected_it = iter(items), iter(items)
        torch.testing.assert_close(f(it, x), sum_with_break(expected_it, x))
        assert list(it) == []
    ctx = f._minidynamo_ctx
    assert "iterating over tuple_iterator object" not in minidynamo.counters["graph_break"]
    resume = [es for code, es in ctx.cache.items() if code.co_name.startswith("__resume_at")]
    assert len(resume) == 1 and len(resume[0]) <= 3  # the first item, then a dynamic one, then the loop's end
    assert minidynamo.counters["recompiles"]["total"] <= 3


def test_inlined_tensor_match_agrees_with_tensor_match():
    """[Note: inlined tensor checks]: the check function's written-out TENSOR_MATCH accepts exactly the tensors
    ``tensor_match`` accepts, static or symbolic sizes, for every pair of a small zoo of tensors."""
    base = torch.randn(4, 6)
    zoo = [base, torch.randn(4, 6), torch.randn(6, 4).t(), base[:, :3], torch.randn(4, 6, dtype=torch.float64),
           torch.randn(4, 6, requires_grad=True), nn.Parameter(torch.randn(4, 6)), torch.randn(3, 6),
           torch.randn(4, 6, device="meta"), torch.randn(6), torch.zeros(4, 1)]
    metas = [TensorMeta.of(t) for t in zoo]
    metas.append(dataclasses.replace(TensorMeta.of(base), shape=("s0", 6), stride=(6, 1)))  # a dynamic size
    for meta in metas:
        manager = GuardManager([Guard("TENSOR_MATCH", LocalSource("t"), meta)])
        assert "___tensor_match" not in manager.source  # written out
        for t in [*zoo, "not a tensor"]:
            assert manager.check({"t": t}, {}) == (isinstance(t, torch.Tensor) and tensor_match(t, meta)), (meta, t)


def test_what_tells_entries_apart_is_checked_first_and_the_tensors_last():
    """[Note: guard order and shared prefixes]: a frame input's TENSOR_MATCH early half (requires_grad, a static
    shape) and a resumed loop's TUPLE_ITERATOR_LEN come before the ambient state; the rest of the tensor checks is
    the one ``___check_tensors`` line, after every other guard of one input."""
    x, w = torch.randn(3), torch.randn(4, 2)
    guards = [Guard("GRAD_MODE", None, True), Guard("TENSOR_MATCH", LocalSource("x"), TensorMeta.of(x)),
              Guard("TENSOR_MATCH", AttrSource(LocalSource("m"), "w"), TensorMeta.of(w)),
              Guard("TUPLE_ITERATOR_LEN", LocalSource("it"), ("==", 0))]
    manager = GuardManager(guards, {"L['x']": x, "L['m'].w": w})
    lines = [line.split("#")[1].strip() for line in manager.source.splitlines() if line.strip().startswith("if not")]
    assert lines == ["TENSOR_MATCH (early)", "TUPLE_ITERATOR_LEN", "GRAD_MODE", "TENSOR_MATCH x 2"], lines
    scope = {"x": x, "m": types.SimpleNamespace(w=w), "it": iter(())}
    assert manager.check(scope, {})
    assert not manager.check({**scope, "x": torch.randn(3, requires_grad=True)}, {})
    assert not manager.check({**scope, "it": iter((1,))}, {})
    assert not manager.check({**scope, "m": types.SimpleNamespace(w=w.double())}, {})


def test_tensor_checks_in_one_call_agree_with_tensor_match():
    """[Note: tensor checks in one call]: given the tensors the guards were made from, the TENSOR_MATCHes of an
    entry are one C++ ``TensorGuards`` call (plus each frame input's early half in Python), which accepts exactly
    what ``tensor_match`` accepts on a zoo of tensors, static or symbolic sizes; without them the Python lines
    stay."""
    base = torch.randn(4, 6)
    zoo = [base, torch.randn(4, 6), torch.randn(6, 4).t(), base[:, :3], torch.randn(4, 6, dtype=torch.float64),
           torch.randn(4, 6, requires_grad=True), nn.Parameter(torch.randn(4, 6)), torch.randn(3, 6),
           torch.randn(4, 6, device="meta"), torch.randn(6), torch.zeros(4, 1), torch.randn(5, 6)]
    made_from = [(t, TensorMeta.of(t)) for t in zoo]
    made_from.append((base, dataclasses.replace(TensorMeta.of(base), shape=("s0", 6), stride=(6, 1))))
    for value, meta in made_from:
        # two inputs, so the line checks a frame input (its early half in Python) and a module attribute
        w = torch.randn(2, 3)
        guards = [Guard("TENSOR_MATCH", LocalSource("t"), meta),
                  Guard("TENSOR_MATCH", AttrSource(LocalSource("m"), "w"), TensorMeta.of(w)),
                  Guard("NO_TENSOR_ALIASING", LocalSource("t"), None, None, (AttrSource(LocalSource("m"), "w"),))]
        manager = GuardManager(guards, {"L['t']": value, "L['m'].w": w})
        assert manager.tensor_checks is not None and "___check_tensors(___t0, " in manager.source
        assert "___no_aliasing" not in manager.source  # the C++ check refuses one tensor passed twice
        m = types.SimpleNamespace(w=w)
        for t in [*zoo, "not a tensor"]:
            expected = isinstance(t, torch.Tensor) and tensor_match(t, meta)
            assert manager.check({"t": t, "m": m}, {}) == expected, (meta, t)
        assert not manager.check({"t": value, "m": types.SimpleNamespace(w=w.t())}, {})
        assert not manager.check({"t": w, "m": m}, {})  # aliased inputs
    assert GuardManager([Guard("TENSOR_MATCH", LocalSource("t"), TensorMeta.of(base))]).tensor_checks is None


def test_a_tensor_with_other_dispatch_keys_recompiles_and_stays_right():
    """[Note: tensor checks in one call]: the C++ check also compares dispatch keys, so a conjugate view (same
    dtype, shape and strides as the tensor the frame was compiled for) fails it: one recompile, and both calls
    agree with eager."""
    def f(z):
        return z * 2 + 1

    compiled = minidynamo.minicompile(f, backend="eager")
    z = torch.randn(3, dtype=torch.complex64)
    torch.testing.assert_close(compiled(z), f(z))
    torch.testing.assert_close(compiled(z.conj()), f(z.conj()))
    torch.testing.assert_close(compiled(z), f(z))
    assert minidynamo.counters["frames"]["ok"] == 2 and minidynamo.counters["recompiles"]["total"] == 1


def test_the_collector_is_paused_while_a_frame_compiles_and_restored_after():
    """[Note: no collector while compiling]: the backend runs with the garbage collector off; afterwards it is as
    the program left it (on, or off if the program turned it off), also when the translation fails."""
    import gc

    seen = []

    def backend(gm, example_inputs):
        seen.append(gc.isenabled())
        return gm.forward

    def f(x):
        return x.sin() + 1

    def unsupported(x):
        return minidynamo.testing.not_a_function(x)  # the failure is the point

    assert gc.isenabled()
    x = torch.randn(3)
    torch.testing.assert_close(minidynamo.minicompile(f, backend=backend)(x), f(x))
    assert seen == [False] and gc.isenabled()
    with pytest.raises(AttributeError):
        minidynamo.minicompile(unsupported, backend=backend)(x)
    assert gc.isenabled()
    gc.disable()
    try:
        minidynamo.reset()
        minidynamo.minicompile(f, backend=backend)(x)
        assert seen == [False, False] and not gc.isenabled()  # the program's choice stands
    finally:
        gc.enable()


def test_a_frame_compiled_under_a_dispatch_mode_is_reused_outside_it_and_back():
    """[Note: tensor checks in one call]: the C++ check reads dispatch keys through the thread's dispatch state, which
    a ``TorchDispatchMode`` changes; where that state differs from the compile's, the Python checks decide, so
    moving in and out of a mode neither recompiles nor reuses an entry the tensors do not fit."""
    class Passthrough(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def f(x, w):
        return (x * w).sum(0)

    compiled = minidynamo.minicompile(f, backend="eager")
    x, w = torch.randn(4, 3), torch.randn(3)
    with Passthrough():
        torch.testing.assert_close(compiled(x, w), f(x, w))
    torch.testing.assert_close(compiled(x, w), f(x, w))
    with Passthrough():
        torch.testing.assert_close(compiled(x, w), f(x, w))
    assert minidynamo.counters["frames"]["ok"] == 1 and minidynamo.counters["recompiles"]["total"] == 0
    torch.testing.assert_close(compiled(x, w.double()), f(x, w.double()))  # a dtype the entry does not fit
    assert minidynamo.counters["recompiles"]["total"] == 1


def test_an_inference_tensor_gets_an_entry_of_its_own():
    """[Note: tensor checks in one call]: a tensor made under ``torch.inference_mode()`` has other dispatch keys, so
    passed outside that mode it fails the C++ check of an entry compiled for an ordinary tensor (as upstream's
    guards fail it): one recompile, values as eager's, and each kind of tensor then finds its own entry."""
    def f(x):
        return x.sin() * 2

    compiled = minidynamo.minicompile(f, backend="eager")
    x = torch.randn(5)
    with torch.inference_mode():
        t = torch.randn(5)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), f(x))
        torch.testing.assert_close(compiled(t), f(t))
    assert minidynamo.counters["frames"]["ok"] == 2 and minidynamo.counters["recompiles"]["total"] == 1
