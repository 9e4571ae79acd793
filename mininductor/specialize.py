"""Symbolic-size graphs in mininductor today: one compiled callable, a static compile per concrete shape behind it.

In:  a graph minidynamo captured with dynamic sizes -- placeholders whose example values have ``SymInt`` sizes,
int inputs (``L['n']``), and size arithmetic as nodes (``x.size(0)``, ``mul``).  Out: a callable that serves
every size.  On a call it looks at the actual shapes (and int values); the first time it meets a shape it
*specialises* the graph -- every size node and int input becomes a constant -- and compiles that static graph with
the ordinary pipeline (``compile_fx`` / AOTAutograd).  Later calls with a known shape reuse that compile.

    minidynamo graph (s0 = L['x'].size()[0])      specialised for x: [5, 3]        [7, 3]
        size = l_x.size(0)                    ->      (constant 5)         ->   (constant 7)
        mul = l_x * size                              mul = l_x * 5             mul = l_x * 7

[Note: per-shape specialisation is an intermediate]  Upstream Inductor keeps the sizes symbolic all the way to the
kernels: ``s0`` is a kernel argument, index math is sympy over ``s0``, the grid is computed from it at run time,
so *one* compile serves every size.  We have not done that yet (see docs/10-dynamic-shapes.md, "what we leave
out").  What this module buys: the translator no longer recompiles (guards, bytecode, resume functions stay one
cache entry), and the backend's cost per new size is one static compile, cached.  ``metrics.specialisations``
counts them.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode

from . import metrics

SYM_TYPES = (torch.SymInt, torch.SymBool, torch.SymFloat)


def is_symbolic_graph(gm: torch.fx.GraphModule, example_inputs: list) -> bool:
    """Does ``gm`` have symbolic sizes (a dynamic-shape graph from minidynamo) or non-tensor inputs?"""
    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, SYM_TYPES):
            return True
        if isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape):
            return True
    return False


def shape_key(args: list) -> tuple:
    """What a specialisation depends on: tensor metadata and the values of non-tensor inputs."""
    return (torch.is_grad_enabled(),) + tuple(
        (tuple(a.shape), a.stride(), a.dtype, a.device, a.requires_grad) if isinstance(a, torch.Tensor)
        else (type(a), a) for a in args)


class PerShapeCompiled:
    """``compiled(*args)``: the static compile for ``args``' shapes, made on first sight (see the module note)."""

    def __init__(self, gm: torch.fx.GraphModule, compile_static: Callable):
        self.gm = gm
        self.compile_static = compile_static
        self.cache: dict[tuple, Callable] = {}

    def __call__(self, *args):
        key = shape_key(args)
        compiled = self.cache.get(key)
        if compiled is None:
            compiled = self.cache[key] = self._compile(list(args))
        return compiled(*[a for a in args if isinstance(a, torch.Tensor)])

    def _compile(self, args: list) -> Callable:
        metrics.specialisations += 1
        static_gm = specialize_graph(self.gm, args)
        return self.compile_static(static_gm, [a for a in args if isinstance(a, torch.Tensor)])


def specialize_graph(gm: torch.fx.GraphModule, args: list) -> torch.fx.GraphModule:
    """A copy of ``gm`` for these inputs: non-tensor inputs and every node computing a number become constants."""
    values = _number_values(gm, args)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, object] = {}
    for node in gm.graph.nodes:
        if node in values:
            env[node] = values[node]
        elif node.op == "output":
            graph.output(torch.fx.map_arg(node.args[0], lambda n: env[n]))
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
            env[node].meta.pop("example_value", None)  # symbolic: the static compile makes its own
    out = torch.fx.GraphModule(gm, graph, class_name="SpecializedGraph")
    out.meta.update(gm.meta)
    return out


def _number_values(gm: torch.fx.GraphModule, args: list) -> dict:
    """Run ``gm`` on fake copies of ``args`` and keep the value of every node whose result is a plain number."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
    interp = _Recorder(gm)
    with mode, torch.no_grad():
        interp.run(*fake_args)
    return interp.numbers


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.numbers: dict[torch.fx.Node, object] = {}

    def run_node(self, n):
        result = super().run_node(n)
        if n.op != "output" and not isinstance(result, torch.Tensor) and _is_number(result):
            self.numbers[n] = result
        return result


def _is_number(v) -> bool:
    if isinstance(v, (torch.Size, tuple, list)):
        return all(_is_number(x) for x in v)
    return type(v) in (int, float, bool)
