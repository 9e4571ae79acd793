"""Replacing what a class holds after a compile -- a method, a static or class method, a property, a submodule's
``forward``, the compiled module's own ``forward``, a parent's method ``super()`` reads -- or setting a method on the instance gives eager's answer
([Note: guarding what the class holds] in variables/user_defined.py). Until the twenty-seventh session the class
attribute was read once, unguarded, and the old graph ran: a wrong answer. Each case compares with eager after the
change and asserts how many graphs were compiled and whether it counted as a recompile."""
from __future__ import annotations

import types

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.testing import CompileCounter


class _Method(nn.Module):
    def helper(self, x):
        return x * 2

    def forward(self, x):
        return self.helper(x) + 1


class _Static(nn.Module):
    @staticmethod
    def helper(x):
        return x * 2

    def forward(self, x):
        return self.helper(x) + 1


class _ClassMethod(nn.Module):
    @classmethod
    def helper(cls, x):
        return x * 2

    def forward(self, x):
        return self.helper(x) + 1


class _Property(nn.Module):
    @property
    def factor(self):
        return 2

    def forward(self, x):
        return x * self.factor


class _Inner(nn.Module):
    def forward(self, x):
        return x * 2


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()

    def forward(self, x):
        return self.inner(x) + 1


class _Forward(nn.Module):
    def forward(self, x):
        return x * 2


class _Child(_Forward):
    def forward(self, x):
        return super().forward(x) + 1


# (model class, the change, graphs compiled in all, whether the second compile is a recompile of the same code)
CASES = {
    "method on the class": (_Method, lambda m: setattr(_Method, "helper", lambda self, x: x * 10), 2, True),
    "method on the instance": (_Method, lambda m: setattr(m, "helper", types.MethodType(lambda self, x: x * 3, m)),
                               2, True),
    "staticmethod": (_Static, lambda m: setattr(_Static, "helper", staticmethod(lambda x: x * 7)), 2, True),
    "classmethod": (_ClassMethod, lambda m: setattr(_ClassMethod, "helper", classmethod(lambda cls, x: x * 7)),
                    2, True),
    "property": (_Property, lambda m: setattr(_Property, "factor", property(lambda self: 9)), 2, True),
    "a submodule's forward": (_Outer, lambda m: setattr(_Inner, "forward", lambda self, x: x * 8), 2, True),
    "the parent's method super() reads": (_Child, lambda m: setattr(_Forward, "forward", lambda self, x: x * 10),
                                           2, True),
    # a new forward is new code: a first compile of it, not a recompile
    "the module's own forward": (_Forward, lambda m: setattr(_Forward, "forward", lambda self, x: x * 6), 2, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_replacing_what_the_class_holds_gives_eagers_answer(case, monkeypatch):
    cls, change, graphs, recompiled = CASES[case]
    for klass in (cls, _Forward, _Inner):  # undone after the test (the classes are shared)
        for name in ("helper", "factor", "forward"):
            if name in vars(klass):
                monkeypatch.setattr(klass, name, vars(klass)[name])
    m, x = cls(), torch.ones(2)
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(m, backend=cnt)
    torch.testing.assert_close(compiled(x), m(x), rtol=0, atol=0)
    change(m)
    torch.testing.assert_close(compiled(x), m(x), rtol=0, atol=0)
    assert cnt.frame_count == graphs
    assert minidynamo.counters["recompiles"]["total"] == int(recompiled)
    assert not minidynamo.counters["eager_fallback"]


def test_a_forward_set_on_the_instance_runs_it():
    # nn.Module.__call__ runs the instance's own `forward` attribute: the compiled module calls it natively
    m, x = _Forward(), torch.ones(2)
    m.forward = lambda x: x * 5
    cnt = CompileCounter()
    torch.testing.assert_close(minidynamo.minicompile(m, backend=cnt)(x), m(x), rtol=0, atol=0)
    assert cnt.frame_count == 0
    assert dict(minidynamo.counters["graph_break"]) == {"a forward set on the _Forward instance itself": 1}


class _Noisy(nn.Module):
    def forward(self, x):
        print("noisy")  # a graph break: the caller calls this module natively
        return x * 2


class _CallsNoisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Noisy()

    def forward(self, x):
        return self.inner(x) + 1


def test_a_submodule_called_at_a_break_runs_its_current_forward(monkeypatch, capsys):
    # the caller's generated code calls the submodule through compiled_module_call, which reads the class's
    # forward when it runs: a forward replaced since is compiled then, not the one seen when tracing
    monkeypatch.setattr(_Noisy, "forward", _Noisy.forward)
    m, x = _CallsNoisy(), torch.ones(2)
    compiled = minidynamo.minicompile(m, backend=CompileCounter())
    torch.testing.assert_close(compiled(x), m(x), rtol=0, atol=0)

    def louder(self, x):
        print("louder")
        return x * 4
    _Noisy.forward = louder
    capsys.readouterr()
    torch.testing.assert_close(compiled(x), m(x), rtol=0, atol=0)
    assert capsys.readouterr().out == "louder\nlouder\n"
    assert minidynamo.counters["graph_break"]["`print` writes to stdout (a side effect the graph cannot hold)"] >= 1
    assert not minidynamo.counters["eager_fallback"]
