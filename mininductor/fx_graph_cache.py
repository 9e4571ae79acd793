"""FxGraphCache: reuse a compiled graph for another graph that is the same computation.

In:  an FX graph and its example inputs, as a backend receives them.  Out: a key, or None when the graph must not
be shared; ``lookup``/``save`` keep compiled callables by key, in memory, for this process.

Why: a loop with a graph break compiles one graph per iteration variant.  The tutorial MoE's expert loop makes the
same graph for every expert -- ``gate``'s output indexed, two Linear layers, GELU -- differing only in *which*
parameters come in as inputs (``L['self'].experts[3].net[0].weight`` vs ``...experts[4]...``), which names the
placeholders.  With placeholders renamed by position, half of its graphs are repeats; compiling each once halves
its first-call time.

The key is the graph with every node named by its position (op, target, arguments), the example inputs' metadata
(type, dtype, device, sizes and strides -- symbols by name -- and requires_grad; other values by type and repr), and
the state the compile reads: grad mode, default dtype, autocast state and mininductor's options.  Graphs that read
state other than their inputs (``get_attr`` constants, ``call_module``, tensor constants among the arguments) get
no key.  Neither does ``mode="reduce-overhead"``: its CUDA graph is recorded on the first caller's parameters
(cudagraphs.CudaGraphRunner), which another caller must not share.

Mirrors ``FxGraphCache`` in ``torch/_inductor/codecache.py`` (which hashes a pickled graph, keeps results on disk
and checks the compile's shape-env guards); ours is in memory and does no more than the key says.
``metrics.reset()`` clears it, so counts in tests start from an empty cache.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from . import config, metrics
from .specialize import is_symbolic_graph

_CACHE: dict[str, Callable] = {}


def cache_key(gm: torch.fx.GraphModule, example_inputs: list, changes: dict) -> str | None:
    """The key of this compile, or None when its result must not be shared (see the module docstring)."""
    if (changes.get("mode") or config.mode) == "reduce-overhead":
        return None
    graph = _graph_text(gm)
    if graph is None:
        return None
    # a symbolic input is keyed by its symbols (the graph's own example values), not by this call's sizes or value:
    # the loop index of the tutorial MoE is ``s10`` in every expert's graph, and the compile serves all of them
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = [_input_text(_graph_example(n, x)) for n, x in zip(placeholders, example_inputs)]
    shapes = _shape_facts(gm, example_inputs)
    # a symbolic graph (served per size) and its static specialisations for one size are different compiles
    state = (is_symbolic_graph(gm, example_inputs), torch.is_grad_enabled(), torch.get_default_dtype(),
             torch.is_autocast_enabled("cpu"), torch.is_autocast_enabled("cuda"), sorted(changes.items()),
             _config_state())
    return f"{graph}\n{inputs}\n{shapes}\n{state!r}"


def _shape_facts(gm: torch.fx.GraphModule, example_inputs: list) -> tuple:
    """What the translation knew about the symbols: every node's example value (sizes as expressions) and the
    ``ShapeEnv``'s guards.

    [Note: a symbolic graph's key holds its guards]  Two translations can record the same graph under different
    guards: ``x[::2].chunk(2)[0]`` first met with 2 rows (``(s77 + 1)//2 == 1``: one piece, the whole tensor) and
    then with 33 (two pieces) is ``getitem(chunk(getitem(x, ::2), 2), 0)`` both times, but the piece is
    ``(s77 + 1)//2`` rows in the first and ``((s77 + 1)//2 + 1)//2`` in the second.  Keyed by the graph alone, the
    second call reused the first compile and returned 17 rows where eager returns 9.  Upstream's FxGraphCache
    stores the guards a compile relied on and checks them on lookup; ours keys on them."""
    if not is_symbolic_graph(gm, example_inputs):
        return ()
    values = tuple(_value_text(n.meta.get("example_value")) for n in gm.graph.nodes)
    fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    shape_env = next((v.node.shape_env if isinstance(v, torch.SymInt) else v.fake_mode.shape_env for v in fakes
                      if isinstance(v, torch.SymInt) or getattr(v, "fake_mode", None) is not None), None)
    guards = tuple(sorted(str(g.expr) for g in shape_env.guards)) if shape_env is not None else ()
    return values, guards


def _value_text(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_value_text(v) for v in value)
    if isinstance(value, torch.Tensor):
        return _input_text(value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return str(value)
    return type(value).__name__


def _config_state() -> tuple:
    """mininductor's knobs that change the generated code (mode, block limits, fusion...): a compile made under
    other settings is another compile. Where output goes (debug, debug_dir, cache_dir) does not count."""
    return tuple((k, v) for k, v in sorted(vars(config).items())
                 if not k.startswith("_") and k not in ("debug", "debug_dir", "cache_dir")
                 and isinstance(v, (bool, int, float, str, type(None))))


def lookup(key: str | None) -> Callable | None:
    if key is None or key not in _CACHE:
        return None
    metrics.fx_graph_cache_hits += 1
    return _CACHE[key]


def save(key: str | None, compiled: Callable) -> Callable:
    if key is not None:
        _CACHE[key] = compiled
    return compiled


def clear() -> None:
    _CACHE.clear()


def _graph_text(gm: torch.fx.GraphModule) -> str | None:
    index = {node: k for k, node in enumerate(gm.graph.nodes)}
    lines = []
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            return None
        args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: _Ref(index[n]))
        if any(isinstance(a, torch.Tensor) for a in torch.utils._pytree.tree_leaves(args)):
            return None
        lines.append(f"{node.op} {_target_text(node)} {args!r}")
    return "\n".join(lines)


def _target_text(node: torch.fx.Node) -> str:
    if node.op in ("placeholder", "output"):
        return node.op  # the placeholder's name comes from its source: exactly what must not matter
    t = node.target
    if isinstance(t, str):
        return t  # a method name
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', None) or repr(t)}"


def _graph_example(node: torch.fx.Node, x: Any) -> Any:
    """The placeholder's example value when it is symbolic (a SymInt, or a tensor with symbolic sizes), else ``x``."""
    value = node.meta.get("example_value")
    if isinstance(value, torch.SymInt) or (isinstance(value, torch.Tensor) and
                                           any(isinstance(s, torch.SymInt) for s in value.shape)):
        return value
    return x


def _input_text(x: Any) -> tuple:
    if isinstance(x, torch.Tensor):
        return (type(x).__name__, str(x.dtype), str(x.device), tuple(str(s) for s in x.shape),
                tuple(str(s) for s in x.stride()), x.requires_grad)
    return (type(x).__name__, repr(x))


class _Ref:
    """A node argument, written by the node's position."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k

    def __repr__(self) -> str:
        return f"%{self.k}"
