"""Tests for minidynamo/step_through.py: the instruction-by-instruction record of a translation.

The oracle is the translator's own result (graphs and guards from ``explain``) and CPython: the steps must add up to
the same FX nodes, the same guards, the same break, and each concrete twin must be the instruction CPython ran.
Budget: a few seconds on a 2-core CPU.
"""
import dis

import pytest
import torch

import minidynamo
from minidynamo import step_through
from minidynamo.examples.demo import f, toy


def helper(a, n):
    return a * n


def with_callee(x, n=3):
    return helper(torch.cos(x), n)


@pytest.fixture(autouse=True)
def _reset():
    minidynamo.reset()
    yield
    minidynamo.reset()


def test_single_graph_steps_match_the_bytecode_and_the_graph():
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    st = step_through(f, x, w)
    assert torch.allclose(st.result, f(x, w))
    assert [t.kind for t in st.translations] == ["first"]
    # one step per instruction CPython's dis lists (no loops in f; CACHE entries are not instructions)
    assert [s.opname for s in st] == [i.opname for i in dis.get_instructions(f)]
    added = [n for s in st for n in s.nodes_added]
    assert any(n.startswith("relu = torch.relu(") for n in added)
    assert added[-1].startswith("return")
    assert "frame done" in st[-1].events[-1]
    guards = " ".join(g for s in st for g in s.guards_added)
    assert "L['x'] TENSOR_MATCH" in guards and "L['w'] TENSOR_MATCH" in guards


def test_stack_before_and_after_chain():
    st = step_through(f, torch.randn(2, 3), torch.randn(3, 2))
    for prev, cur in zip(st.steps, st.steps[1:]):
        if cur.translation == prev.translation and cur.depth == prev.depth == 0:
            assert cur.stack_before == prev.stack_after
    matmul = next(s for s in st if s.opname == "BINARY_OP")
    assert len(matmul.stack_before) - len(matmul.stack_after) == 1  # pops two, pushes one


def test_graph_break_restart_and_resume_function():
    x, y = torch.randn(4), torch.randn(4)
    st = step_through(toy, x, y)
    assert torch.allclose(st.result, toy(x, y))
    assert [t.kind for t in st.translations] == ["first", "restart", "resume function"]
    breaks = st.breaks()
    assert len(breaks) == 2  # where the first attempt failed, and where the restart broke the graph
    assert "data-dependent branch" in breaks[0].events[0]
    assert breaks[0].opname.startswith("POP_JUMP") and breaks[1].offset == breaks[0].offset
    resume = [s for s in st if s.translation == 2]
    assert resume and all(s.concrete is None for s in resume)  # generated code has no CPython twin


def test_inlined_callee_has_depth_and_concrete_twins():
    x = torch.randn(3)
    st = step_through(with_callee, x)
    inner = [s for s in st if s.frame == "helper"]
    assert inner and all(s.depth == 1 for s in inner)
    mul = next(s for s in inner if s.opname == "BINARY_OP")
    assert mul.nodes_added == ["mul = operator.mul(cos, 3)"]
    # CPython's twin ran the same instruction, and had the real values where the translator had symbols
    assert mul.concrete.opname == "BINARY_OP" and mul.concrete.offset == mul.offset
    assert mul.concrete.locals["n"] == "3" and mul.concrete.locals["a"].startswith("f32[3]")
    assert mul.locals_before["a"].startswith("TensorVariable(cos")


def test_walk_forward_and_back_and_render():
    st = step_through(toy, torch.randn(4), torch.randn(4))
    assert st.position == 0
    assert st.forward().index == 1 and st.forward(3).index == 4 and st.back().index == 3
    assert st.goto(10_000) is st[-1] and st.back(10_000) is st[0]
    text = str(st)
    assert "translation 2: __resume_at" in text and text.count("\n") >= len(st)
    html = st._repr_html_()
    assert html.count("<tr") >= len(st) and "class='cur'" in html
    assert "cannot trace" in str(st.breaks()[0]) and "<table" in st[5]._repr_html_()
