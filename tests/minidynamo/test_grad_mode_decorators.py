"""``@torch.no_grad()`` and ``@torch.enable_grad()`` over a function defined inside the compiled function
(``GradModeWrappedFunctionVariable`` in variables/ctx_manager.py): each call is inlined inside the grad mode, as
eager runs it; where the decorated function must exist for real (live at a graph break, returned, or called
natively because its body breaks) the generated code decorates it again. Until the twenty-seventh session the
decorator statement sent the whole frame to eager, and a decorated *method* of a module broke the graph (the
functions in its wrapper's closure were opaque objects). A method read from a class is guarded there, so
replacing it recompiles. Every test compares with eager (values, ``requires_grad``, gradients, the grad mode
afterwards) and asserts graphs, breaks, recompiles and fallbacks."""
from __future__ import annotations

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter


def _counts() -> tuple[dict, dict]:
    return dict(minidynamo.counters["graph_break"]), dict(minidynamo.counters["eager_fallback"])


def _same(got, expected) -> None:
    got, expected = (got if isinstance(got, tuple) else (got,)), (expected if isinstance(expected, tuple) else (expected,))
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert a.requires_grad == b.requires_grad


def _grads(fn, x) -> torch.Tensor:
    x = x.detach().requires_grad_()
    out = fn(x)
    sum(o.sum() for o in (out if isinstance(out, tuple) else (out,)) if o.requires_grad).backward()
    return x.grad


def _no_grad_inside(x):
    @torch.no_grad()
    def scaled(v):
        return v * 2

    return scaled(x) + x.sin(), scaled(x)


def _enable_grad_under_no_grad(x):
    @torch.enable_grad()
    def grows(v):
        return v.sin() * 3

    with torch.no_grad():
        y = grows(x)
        z = x * 2
    return y + 1, z


@pytest.mark.parametrize("fn", [_no_grad_inside, _enable_grad_under_no_grad])
def test_a_decorated_nested_function_is_inlined_in_its_grad_mode(fn):
    x = torch.randn(5, requires_grad=True)
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    _same(compiled(x), fn(x))
    torch.testing.assert_close(_grads(compiled, x), _grads(fn, x), rtol=0, atol=0)
    assert torch.is_grad_enabled()
    assert cnt.frame_count == 1 and _counts() == ({}, {})
    # the graph changes the mode around each inlined call and back (two calls of `scaled`; one of `grows`
    # inside the `with`)
    modes = [n.args[0] for n in cnt.graphs[0].graph.nodes if n.target is torch._C._set_grad_enabled]
    assert modes == [False, True, False, True]


def _break_inside(x):
    @torch.no_grad()
    def noisy(v):
        print("inside", tuple(v.shape))
        return v * 2

    return noisy(x) + x


def _live_across_a_break(x):
    @torch.no_grad()
    def scaled(v):
        return v * 2

    minidynamo.graph_break()
    return scaled(x) + x, torch.is_grad_enabled()


def test_a_break_inside_the_decorated_body_calls_it_natively_inside_its_mode(capsys):
    x = torch.randn(4, requires_grad=True)
    expected = _break_inside(x)
    eager_out = capsys.readouterr().out
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(_break_inside, backend=cnt)
    got = compiled(x)
    assert capsys.readouterr().out == eager_out
    _same(got, expected)
    # the call breaks (its body prints), runs natively -- decorated again, so inside no_grad -- and `+ x` is a graph
    assert cnt.frame_count == 1
    assert _counts() == ({"`print` writes to stdout (a side effect the graph cannot hold)": 1}, {})
    torch.testing.assert_close(_grads(compiled, x), _grads(_break_inside, x), rtol=0, atol=0)
    assert torch.is_grad_enabled()


def test_a_decorated_function_live_at_a_break_is_decorated_again():
    x = torch.randn(4, requires_grad=True)
    cnt = CompileCounter()
    got = minidynamo.minicompile(_live_across_a_break, backend=cnt)(x)
    expected = _live_across_a_break(x)
    _same(got[0], expected[0])
    assert got[1] is expected[1] is True
    assert _counts() == ({"minidynamo.graph_break() was called": 1}, {})


def test_a_returned_decorated_function_keeps_its_grad_mode():
    def make(x):
        @torch.no_grad()
        def scaled(v):
            return v * 2
        return scaled, x + 1

    x = torch.randn(3, requires_grad=True)
    scaled, y = minidynamo.minicompile(make, backend=CompileCounter())(x)
    eager_scaled, eager_y = make(x)
    _same(y, eager_y)
    _same(scaled(x), eager_scaled(x))
    assert not scaled(x).requires_grad and callable(scaled)
    assert _counts() == ({}, {})


def test_set_grad_enabled_as_a_decorator_still_runs_as_eager():
    # torch.set_grad_enabled(False) changes the mode when it is made, and its decorator use puts it back: not
    # traced, the frame runs eagerly, with eager's results and grad mode
    def f(x):
        @torch.set_grad_enabled(False)
        def scaled(v):
            return v * 2
        return scaled(x) + x, torch.is_grad_enabled()

    x = torch.randn(3, requires_grad=True)
    cnt = CompileCounter()
    got, expected = minidynamo.minicompile(f, backend=cnt)(x), f(x)
    _same(got[0], expected[0])
    assert got[1] is expected[1] is True and torch.is_grad_enabled()
    assert cnt.frame_count == 0 and _counts() == ({}, {"grad mode False cannot be rebuilt by generated code": 1})


class _Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @torch.no_grad()
    def stats(self, x):
        return self.lin(x).abs().mean()

    @torch.enable_grad()
    def scores(self, x):
        return self.lin(x).sin()

    def forward(self, x):
        with torch.no_grad():
            s = self.scores(x)
        return self.lin(x) * self.stats(x) + s


def test_a_decorated_method_of_a_module_is_inlined():
    # the method's wrapper (torch.utils._contextlib.decorate_context) keeps the method and the context's `clone`
    # in its closure; both are inlined, so the module is one graph
    torch.manual_seed(0)
    head, x = _Head(), torch.randn(3, 4, requires_grad=True)
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(head, backend=cnt)
    _same(compiled(x), head(x))
    got = torch.autograd.grad(compiled(x).sum(), [x, head.lin.weight])
    expected = torch.autograd.grad(head(x).sum(), [x, head.lin.weight])
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert cnt.frame_count == 1 and _counts() == ({}, {})
    assert torch.is_grad_enabled()


def test_replacing_a_method_on_the_class_recompiles():
    # a method is read from the class: the class attribute is guarded, so a new function there recompiles instead
    # of running the old one's graph (a wrong answer before the twenty-seventh session)
    class Twice(torch.nn.Module):
        def helper(self, x):
            return x * 2

        def forward(self, x):
            return self.helper(x) + 1

    m, x = Twice(), torch.ones(2)
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(m, backend=cnt)
    _same(compiled(x), m(x))
    Twice.helper = lambda self, x: x * 10
    _same(compiled(x), m(x))
    assert cnt.frame_count == 2 and minidynamo.counters["recompiles"]["total"] == 1
