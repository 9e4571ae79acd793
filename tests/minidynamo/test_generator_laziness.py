"""Generators run lazily in Python: a traced one must not run its side effects early, or forever.

minidynamo runs a generator's body up front ([Note: eager generators] in symbolic_convert.py), so a body that
writes anything outside itself, or that never ends, is refused (a graph break; Python then drives the real
generator).  Each test compares the compiled function with the plain one: results and the side-effect log.
Found by differential fuzzing.  Budget: ~2 s.
"""
import itertools

import pytest
import torch


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
