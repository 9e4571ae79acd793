"""Generators run lazily in Python: a traced one must not run its side effects early, or forever.

minidynamo runs a generator's body up front ([Note: eager generators] in inlining.py), so a body that
writes anything outside itself, or that never ends, is refused (a graph break; Python then drives the real
generator).  A generator run up front must not be stale either: a variable or list changed after the generator
was made, a generator still live at a break or returned to the caller, ``send`` / ``throw`` on it.  And
``StopIteration`` is Python's: it ends a ``map``, and becomes ``RuntimeError`` inside a generator (PEP 479).
Each test compares the compiled function with the plain one: results and the side-effect log, and counts graphs
and graph breaks.  Found by differential fuzzing (the StopIteration tests in round 4, staleness in round 5).
Budget: ~3 s.
"""
import itertools
import types

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter
from minidynamo.testing import check_against_eager as _check
from minidynamo.testing import same as _same

X = torch.arange(3.0)


def _count_up():
    i = 0
    while True:
        yield i
        i += 1


def _make(kind, log):
    def gen(n):
        for i in range(n):
            log.append(("gen", i))
            yield i

    def interleaved(x):
        for v in gen(3):
            log.append(("use", v))
            x = x + v
        return x

    def broken_off(x):
        for v in gen(5):
            if v == 2:
                break
            x = x * 2
        return x

    def short_circuit(x):
        return x * any(log.append(v) or v > 0 for v in [0, 1, 2])

    def partially_consumed(x):
        g = (log.append(i) or x * i for i in range(4))
        return next(g) + next(g)

    def in_place_after_a_read(x):
        g = (x.add_(1) for _ in range(2))
        y = x * 1
        for _ in g:
            pass
        return y, x

    def endless(x):
        return [x * i for _, i in zip(range(3), _count_up())], [x * i for i, _ in zip(itertools.count(5), range(2))]

    def random_draws(x):  # the RNG is global state: the draws must interleave as in Python
        g = (x + torch.randn(2) for _ in range(2))
        a = next(g)
        return a, torch.randn(2), next(g)

    def pure(x):  # no side effects: still traced, in one graph
        return sum(x * w for w in (v * 2 for v in [1.0, 2.0]))

    return locals()[kind]


@pytest.mark.parametrize("kind", ["interleaved", "broken_off", "short_circuit", "partially_consumed",
                                  "in_place_after_a_read", "endless", "random_draws", "pure"])
def test_generator_side_effects_happen_when_python_runs_them(md, kind):
    expected_log, log = [], []
    torch.manual_seed(0)
    expected = _make(kind, expected_log)(torch.ones(2))
    md.reset()
    torch.manual_seed(0)
    out = md.minicompile(_make(kind, log), backend="eager")(torch.ones(2))
    assert repr(out) == repr(expected) and log == expected_log
    if kind == "pure":
        assert not md.counters["graph_break"] and md.counters["stats"]["unique_graphs"] == 1


# --- StopIteration, and generators that raise (fuzz round 4) --------------------------------------------------------

def _raises_stop_at_one(v):
    if v == 1:
        raise StopIteration
    return v


def test_stop_iteration_from_a_mapped_function_ends_the_map():
    def fn(x):
        try:
            return x + 1, list(map(_raises_stop_at_one, range(3)))  # eager: [0]
        except StopIteration:
            return "caught"
    cnt = CompileCounter()
    got = minidynamo.minicompile(fn, backend=cnt)(X)
    assert got[1] == [0]


def test_stop_iteration_inside_a_generator_expression_becomes_runtime_error():
    def fn(x):
        try:
            return x, list(_raises_stop_at_one(v) for v in range(3))  # noqa: C400 - the generator is the point
        except StopIteration:
            return "caught"
        except RuntimeError as e:
            return str(e)
    cnt = CompileCounter()
    assert minidynamo.minicompile(fn, backend=cnt)(X) == "generator raised StopIteration"


def test_a_generator_that_raises_is_not_run_up_front():
    def fn(x):
        try:
            g = (v // 0 for v in [1])  # eager: nothing raised until the generator is asked for an item
        except ZeroDivisionError:
            return "caught"
        return x + 1 if g is not None else x
    cnt = CompileCounter()
    assert torch.equal(minidynamo.minicompile(fn, backend=cnt)(X), X + 1)


# --- generators run up front must not be stale (fuzz round 5) -------------------------------------------------------

def test_a_generator_reads_a_variable_changed_after_it_was_made():
    """The translator runs a generator's body when it is made; ``k = 10`` before ``list(g)`` was not seen."""
    def fn(x):
        k = 1
        g = (x * k for _ in range(2))
        k = 10
        return list(g)
    _check(fn, X, graphs=0, breaks=2)


def test_a_generator_sees_items_appended_to_its_list():
    def fn(x):
        xs = [1, 2]
        g = (v * x for v in xs)
        xs.append(3)
        return list(g)
    assert len(_check(fn, X, graphs=0, breaks=2)) == 3


def test_a_generator_resumed_after_its_dict_changed_raises():
    """The body's end (the dict iterator noticing the new key) runs at the ``next`` after the last item."""
    def fn(x, d):
        def keys():
            for k in d:  # noqa: UP028 - the loop is what is being tested
                yield k
        it = keys()
        first = next(it)
        d["b"] = 2
        try:
            rest = list(it)
        except RuntimeError as e:
            rest = str(e)
        return x + 1, first, rest

    cnt = CompileCounter()
    got = minidynamo.minicompile(fn, backend=cnt)(X, {"a": 1})
    assert _same(got, fn(X, {"a": 1}))
    assert not minidynamo.counters["eager_fallback"] or "generator" in next(iter(minidynamo.counters["eager_fallback"]))


def test_a_generator_made_and_consumed_at_once_is_still_one_graph():
    def fn(x):
        k = 2
        total = sum(x * i for i in range(3))
        k = 3
        return total * k, torch.stack(list(x * j for j in range(k)))  # noqa: C400
    _check(fn, X)


def test_generator_methods_are_not_run_on_its_items():
    """``it.throw(...)`` ran on the tuple iterator the traced generator was rebuilt as: AttributeError."""
    def fn(x):
        def g():
            try:
                yield 1
            except ValueError:
                yield 99
        it = g()
        next(it)
        return x * it.throw(ValueError())

    assert _same(minidynamo.minicompile(fn, backend=CompileCounter())(X), fn(X))


def test_an_unfinished_generator_live_at_a_break_is_the_real_one():
    """Rebuilt at the break as a tuple iterator of the items computed up front, it missed ``k = 10`` after the
    break; the break now moves to the generator's call ([Note: a break moved earlier])."""
    def fn(x):
        k = 1
        g = (x * k for _ in range(2))
        minidynamo.graph_break()
        k = 10
        return list(g)
    _check(fn, X, graphs=0, breaks=3)


def test_a_returned_generator_is_a_generator():
    """It was returned as a tuple iterator of its items: no ``send``, and stale once the caller changed ``xs``."""
    def fn(x, xs):
        return (v * x for v in xs)

    xs = [1, 2]
    g = minidynamo.minicompile(fn, backend=CompileCounter())(X, xs)
    xs.append(3)
    assert isinstance(g, types.GeneratorType) and len(list(g)) == 3


@minidynamo.disable
def _note(log):
    log.append(0)


def _set_of_items_over_a_genexpr_after_a_break(x, y, log):
    a = torch.where(x.sin() > 0, torch.stack([y[0]] * 4), y * 6)
    _note(log)
    return {v.item() for v in (u + 1 for u in a)}, a


def test_a_set_comprehension_over_a_generator_handed_on_at_a_break():
    """3.11: the set being built reached the loop's resume function as an input, and its guard held the set
    itself, which the frame went on to fill: later elements were lost ([Note: a set's guard holds a copy])."""
    x, y = torch.tensor([0.5, -2.0, 4.5, 8.0]), torch.tensor([0.5, 0.25, -1.0, 2.0])
    compiled = minidynamo.minicompile(_set_of_items_over_a_genexpr_after_a_break, backend="eager")
    minidynamo.counters.clear()
    assert _same(compiled(x, y, []), _set_of_items_over_a_genexpr_after_a_break(x, y, []))
    assert _same(compiled(y, x, []), _set_of_items_over_a_genexpr_after_a_break(y, x, []))  # other contents
    assert not minidynamo.counters["eager_fallback"], minidynamo.counters["eager_fallback"]
