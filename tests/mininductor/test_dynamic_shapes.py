"""mininductor with symbolic-size graphs from minidynamo: one compiled callable serves every size.

Today that callable holds one static compile per concrete shape (``mininductor/specialize.py``); the translator
compiles once.  These tests pin that: values equal eager, one frame, one specialisation per distinct shape,
kernels generated (not an eager fallback).  Budget: ~20 s on 2 cores (Triton interpreter).
"""
import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter
from mininductor import metrics
from mininductor.specialize import is_symbolic_graph, specialize_graph

from .utils import assert_same


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    minidynamo.reset()
    metrics.reset()
    monkeypatch.setattr(minidynamo.config, "raise_internal_errors", True)
    yield
    minidynamo.reset()


def _model(x, w):
    b = x.shape[0]
    h = torch.relu(x @ w)                        # extern mm with a symbolic number of rows
    v = h.view(b, 5).transpose(0, 1).sum(1)      # view + reduction over the symbolic dim
    return h * b + v.mean(), h.amax(dim=1)       # the size as a number; a row reduction


def test_inductor_serves_every_size_from_one_frame():
    compiled = minidynamo.minicompile(_model, backend="inductor", dynamic=True)
    w = torch.randn(4, 5)
    for b in (3, 4, 6, 3, 4):
        x = torch.randn(b, 4)
        assert_same(compiled(x, w), _model(x, w))
    assert minidynamo.counters["frames"]["ok"] == 1
    assert minidynamo.counters["recompiles"]["total"] == 0
    assert metrics.specialisations == 3  # sizes 3, 4, 6; the repeats reuse them
    assert metrics.generated_kernel_count > 0 and metrics.fallback_count == 0


def test_inductor_with_automatic_dynamic_and_an_int_input():
    def f(x, n):
        return (x * n).sum(0) + x.shape[0]
    compiled = minidynamo.minicompile(f, backend="inductor")
    for b, n in ((3, 2), (5, 3), (7, 4), (5, 3)):
        x = torch.randn(b, 8)
        assert_same(compiled(x, n), f(x, n))
    assert minidynamo.counters["frames"]["ok"] == 2  # static first, then x's dim 0 and n are symbols
    assert metrics.specialisations == 2  # (7, 4) and (5, 3) under the symbolic graph


def test_training_with_symbolic_sizes_specialises_forward_and_backward():
    def f(x, w):
        return (x @ w).tanh().sum() * x.shape[0]
    compiled = minidynamo.minicompile(f, backend="aot_eager", dynamic=True)
    w = torch.randn(4, 3, requires_grad=True)
    for b in (2, 5, 2):
        x = torch.randn(b, 4, requires_grad=True)
        out = compiled(x, w)
        out.backward()
        grads = (x.grad.clone(), w.grad.clone())
        x.grad = None
        w.grad = None
        f(x, w).backward()
        assert_same(out, f(x, w))
        assert_same(grads, (x.grad, w.grad))
        w.grad = None
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.specialisations == 2


def test_specialize_graph_turns_size_nodes_and_int_inputs_into_constants():
    cnt = CompileCounter()
    f = minidynamo.minicompile(lambda x, n: x.reshape(-1) * x.shape[0] + n, backend=cnt, dynamic=True)
    f(torch.randn(3, 2), 5)
    gm = cnt.graphs[0]
    x = torch.randn(4, 2)
    assert is_symbolic_graph(gm, [x, 7])
    static = specialize_graph(gm, [x, 7])
    assert [n.op for n in static.graph.nodes].count("placeholder") == 1
    assert not is_symbolic_graph(static, [x])
    assert_same(static(x)[0], x.reshape(-1) * 4 + 7)
