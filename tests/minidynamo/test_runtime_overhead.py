"""The translator's per-call runtime (issue #7): what a compiled call costs on the host, pinned by behaviour.

Every test compares with eager and asserts counts; the cost itself is pinned by what a call does (guards tried,
``nn.Module.__getattr__`` calls, frames entered), not by timings.  bench/overhead_translator.py measures the time.
"""
import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Experts(nn.Module):
    """A loop over experts with a graph break in the body: its resume function has one cache entry per index."""

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


def entries_of(compiled, name_part: str) -> list:
    return [e for code, es in compiled._ctx.cache.items() if name_part in code.co_name for e in es]


def guard_lines(entry) -> list[str]:
    return [line.strip() for line in entry.guard_manager.source.splitlines() if line.strip().startswith("if not")]


def test_loop_index_is_the_first_guard_of_a_resume_function():
    """[Note: guard order and shared prefixes]: the entries of a loop's resume function differ by the index, so
    a miss is decided by the first line of the check function, before the ambient state is read."""
    model = Experts().eval()
    compiled = minidynamo.minicompile(model, backend="eager")
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        torch.testing.assert_close(compiled(x), model(x))
    # forward runs expert 0; the loop's FOR_ITER breaks and the body resumes with i (on the stack) = 1, 2, 3
    per_index = [e for e in entries_of(compiled, "__resume_at") if any(g.kind == "EQUALS_MATCH" for g in e.guards)]
    assert len(per_index) == 3
    assert minidynamo.counters["recompiles"]["total"] == 2
    for entry in per_index:
        first = guard_lines(entry)[0]
        assert first.startswith("if not (type(L['") and "EQUALS_MATCH" in first, first


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
