"""A module list indexed by a symbolic int: ``layers[i]`` read at run time, one entry for every layer of a shape.

[Note: a module list indexed by a symbolic int] in variables/nn_module.py.  Each test compares with eager (values
and, in training, gradients) and counts entries and recompiles.
"""
from typing import ClassVar

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.testing import CompileCounter


def _entries(compiled) -> list:
    return [e for es in compiled._minidynamo_ctx.cache.values() for e in es]


def test_layers_of_one_shape_share_one_entry():
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.GELU()) for _ in range(6))

    def f(x, i):
        return layers[i](x) * i  # i is also a value in the graph

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    x = torch.randn(3, 4)
    for i in range(6):
        torch.testing.assert_close(compiled(x, i), f(x, i))
    # i == 0 (a constant on the first call), then i symbolic: one entry for layers 1..5
    assert cnt.frame_count == 2 and len(_entries(compiled)) == 2
    assert minidynamo.counters["recompiles"]["total"] == 1
    shared = _entries(compiled)[1]
    assert any(g.name() == "L['layers'][L['i']]._modules['0']._parameters['weight']" for g in shared.guards)
    assert not any(g.kind == "EQUALS_MATCH" and g.name() == "L['i']" for g in shared.guards)


def test_a_layer_of_another_shape_or_type_recompiles():
    torch.manual_seed(0)
    layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4),
                            nn.Sequential(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 8)])

    def f(x, i):
        return layers[i](x)

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    x = torch.randn(3, 4)
    for i in [0, 1, 2, 1, -1, 3, -5, 2, 4]:  # negative indices read the same items as in eager
        torch.testing.assert_close(compiled(x, i), f(x, i))
    assert cnt.frame_count == 4  # i == 0; Linear(4, 4); Linear(4, 8); the Sequential
    reasons = compiled._minidynamo_ctx.recompile_reasons
    assert len(reasons) == 3
    assert "TENSOR_MATCH" in reasons[1] and "shape=[8, 4]" in reasons[1]  # layers[-1]: its weight's shape
    assert "NN_MODULE" in reasons[2] and "Sequential" in reasons[2]  # layers[3]: another type


def test_an_index_out_of_range_raises_as_in_eager():
    layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def f(x, i):
        return layers[i](x).relu()

    compiled = minidynamo.minicompile(f, backend="eager")
    x = torch.randn(2, 4)
    for i in (0, 1):
        torch.testing.assert_close(compiled(x, i), f(x, i))
    for bad in (3, -4):
        with pytest.raises(IndexError, match="out of range"):
            f(x, bad)
        with pytest.raises(IndexError, match="out of range"):
            compiled(x, bad)
    for i in (2, -3):  # still compiled, still right
        torch.testing.assert_close(compiled(x, i), f(x, i))
    assert not minidynamo.counters["eager_fallback"]


def test_a_replaced_layer_is_read_on_the_next_call():
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def f(x, i):
        return layers[i](x)

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    x = torch.randn(2, 4)
    for i in range(3):
        compiled(x, i)
    layers[2] = nn.Linear(4, 4)  # same shape: same entry, new parameters
    torch.testing.assert_close(compiled(x, 2), f(x, 2))
    assert cnt.frame_count == 2


def test_a_computed_index_is_specialised():
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(4))

    def f(x, i):
        return layers[i + 1](x)  # no source to read layers[i + 1] from: a guard on the value, as before

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    x = torch.randn(2, 4)
    for i in (0, 1, 2, 1):
        torch.testing.assert_close(compiled(x, i), f(x, i))
    assert cnt.frame_count == 3


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_loop_over_experts_trains_with_shared_entries(backend):
    """The tutorial MoE's loop: a graph break per expert, ``experts[i]`` on a symbolic ``i``; every expert's
    parameters get eager's gradients."""
    torch.manual_seed(0)
    experts = nn.ModuleList(nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 6)) for _ in range(5))
    reference = [nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 6)) for _ in range(5)]
    for e, r in zip(experts, reference):
        r.load_state_dict(e.state_dict())

    def f(x, route, experts):
        out = torch.zeros_like(x)
        for i in range(len(experts)):
            rows = torch.nonzero(route == i).squeeze(1)  # data-dependent: a graph break
            out = out.index_add(0, rows, experts[i](x[rows]) * (i + 1))
        return out

    compiled = minidynamo.minicompile(f, backend=backend)
    x = torch.randn(12, 6)
    route = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 1, 3])  # 2 or 3 rows per expert
    for _ in range(2):
        compiled(x, route, experts).square().sum().backward()
        f(x, route, nn.ModuleList(reference)).square().sum().backward()
    for e, r in zip(experts, reference):
        for p, q in zip(e.parameters(), r.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    loop = max(compiled._minidynamo_ctx.cache.values(), key=len)
    assert len(loop) <= 4  # i == 1; i symbolic; rows symbolic; the end of the loop -- not one per expert
    assert not minidynamo.counters["eager_fallback"]


class CountingList(nn.ModuleList):
    """A module list subclass with its own ``__getitem__`` (which the compiled code must call)."""

    reads: ClassVar[list] = []

    def __getitem__(self, idx):
        CountingList.reads.append(idx)
        return super().__getitem__(idx)


@pytest.mark.parametrize("container", [nn.ModuleList, CountingList])
def test_the_selected_layer_is_read_once_by_the_guards_and_once_for_the_graph(monkeypatch, container):
    """[Note: one read of a module selected at run time]: ``layers[i]``'s four parameters are graph inputs, but a
    call reads the layer twice (the guards, the graph's inputs), not five times; and [Note: reading a module
    list's item]: for a plain ``ModuleList`` neither read goes through its Python ``__getitem__``, while a
    subclass's own ``__getitem__`` is called for both."""
    torch.manual_seed(0)
    layers = container(nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4)) for _ in range(4))

    def f(x, i):
        return layers[i](x)

    compiled = minidynamo.minicompile(f, backend="eager")
    x = torch.randn(2, 4)
    for i in range(4):
        compiled(x, i)
    reads = CountingList.reads
    reads.clear()
    original = nn.ModuleList.__getitem__
    if container is nn.ModuleList:
        monkeypatch.setattr(nn.ModuleList, "__getitem__",
                            lambda self, idx: (reads.append(idx), original(self, idx))[1])
    torch.testing.assert_close(compiled(x, 3), f(x, 3))
    # then eager's own read in f(x, 3)
    assert reads == ([3] if container is nn.ModuleList else [3, 3, 3])
    assert minidynamo.counters["recompiles"]["total"] == 1
