"""Test helpers (mirrors ``torch/_dynamo/testing.py``): a counting backend, and the differential oracle of the
fuzzing rounds -- run a program eagerly and compiled, on deep copies of the same inputs, and compare everything
(values, dtypes, ``requires_grad``, exceptions' types and args, the inputs afterwards), then count graphs, graph
breaks and eager fallbacks."""
from __future__ import annotations

import copy

import torch

import minidynamo


class CompileCounter:
    """A backend that counts graphs (``frame_count``) and their operations (``op_count``), then runs them eagerly."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.frame_count += 1
        self.op_count += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
        self.graphs.append(gm)
        return gm.forward

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs.clear()


def outcome(fn, args):
    """What calling ``fn(*args)`` gives: its result, or the exception's type and args."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the result being compared
        return type(e), e.args


def same(a, b) -> bool:
    """Equal as the oracle means it: tensors in dtype, ``requires_grad`` and every value; containers and plain
    objects item by item, with their types."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.requires_grad == b.requires_grad \
            and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "__dict__") and not callable(a):
        return type(a) is type(b) and same(vars(a), vars(b))
    return type(a) is type(b) and a == b


def check_against_eager(fn, *args, graphs=1, breaks=0, calls=1, backend=None):
    """``fn(*args)`` compiled gives what it gives eagerly and leaves its arguments as eager does, in ``graphs``
    graphs (counted when no ``backend`` is given) with ``breaks`` graph breaks and no eager fallback."""
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=backend or cnt)
    for _ in range(calls):
        eager_args, compiled_args = copy.deepcopy(args), copy.deepcopy(args)
        expected = outcome(fn, eager_args)
        got = outcome(compiled, compiled_args)
        assert same(got, expected), (got, expected)
        assert same(compiled_args, eager_args), (compiled_args, eager_args)
    assert not minidynamo.counters["eager_fallback"], minidynamo.counters["eager_fallback"]
    assert sum(minidynamo.counters["graph_break"].values()) == breaks, minidynamo.counters["graph_break"]
    if backend is None:
        assert cnt.frame_count == graphs
    return expected
