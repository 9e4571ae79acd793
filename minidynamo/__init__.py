"""minidynamo: a pure-Python PEP 523-style frame translator (Python bytecode -> torch.fx graphs + guards).

    >>> from minidynamo import minicompile
    >>> @minicompile(backend="eager")
    ... def f(x, w):
    ...     return torch.relu(x @ w).sum(-1)

Stages, in the order a call goes through them: ``eval_frame`` (the hook and cache) -> ``convert_frame`` ->
``symbolic_convert`` (one handler per opcode over ``variables/``) -> ``output_graph`` (FX graph, backend) ->
``guards`` and ``codegen`` (the transformed bytecode).
"""
from . import config, exc
from .backends import list_backends, register_backend, warm_up_inductor
from .dynamic_shapes import mark_dynamic, mark_static
from .eval_frame import OptimizedModule, disable, graph_break, minicompile, reset
from .explain import explain, show_guards, show_transformed
from .step_through import step_through
from .utils import counters

__all__ = ["minicompile", "explain", "reset", "graph_break", "disable", "show_guards", "show_transformed",  # noqa: RUF022
           "step_through", "list_backends", "register_backend", "config", "exc", "counters", "OptimizedModule",
           "mark_dynamic", "mark_static"]

warm_up_inductor()  # on a GPU machine mininductor warms Triton up now, in the background (backends.py)
