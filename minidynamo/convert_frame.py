"""convert_frame: translate one frame into a guarded, transformed code object (or refuse, with a reason).

In:  a function, the real values of its locals at call time, and a backend.  Out: a ``CacheEntry`` -- the guards
(a generated check function) and a new code object that calls the compiled graph and rebuilds the return value
and side effects.  Mirrors ``torch/_dynamo/convert_frame.py``.

    def f(x, n):                       transformed f:
        return torch.sin(x) * n   =>       ___graph_out = __compiled_fn_0(x)   # graph: sin(x) * 3
                                           return ___graph_out[0]
    guards: L['x'] TENSOR_MATCH ..., L['n'] EQUALS_MATCH 3
"""
from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any, Callable

from bytecode import Instr

from . import bytecode_transformation as bt
from . import config
from .codegen import GRAPH_OUT, PyCodegen
from .guards import GuardManager
from .output_graph import OutputGraph
from .source import LocalSource
from .utils import counters
from .variables.base import VariableTracker
from .variables.builder import LazyVariableTracker
from .variables.dicts import DictVariable
from .variables.functions import CellVariable
from .variables.lists import BaseListVariable, ListIteratorVariable, SliceVariable
from .variables.tensor import TensorVariable


@dataclasses.dataclass
class CacheEntry:
    """One compiled version of a code object: valid while ``guard_manager.check(L, G)`` holds."""

    guard_manager: GuardManager
    code: types.CodeType
    fn: Callable
    graph_module: Any
    compiled_fn_name: str | None
    compile_time: float
    orig_code: types.CodeType

    @property
    def guards(self):
        return self.guard_manager.guards


def convert_frame(fn: types.FunctionType, f_locals: dict, compiler_fn: Callable) -> CacheEntry:
    """Translate ``fn``'s code for these inputs; raises ``Unsupported`` if the frame cannot be captured."""
    from .symbolic_convert import InstructionTranslator

    code = fn.__code__
    counters["frames"]["total"] += 1
    output = OutputGraph(code, fn.__globals__, f_locals, compiler_fn, fn.__qualname__)
    symbolic_locals = {name: LazyVariableTracker(LocalSource(name), f_locals[name])
                       for name in code.co_varnames[:arg_count(code)] if name in f_locals}
    cells = {name: CellVariable(LazyVariableTracker(LocalSource(name, is_cell=True), f_locals[name]),
                                source=LocalSource(name, is_cell=True))
             for name in code.co_freevars if name in f_locals}
    tx = InstructionTranslator(code, fn.__globals__, symbolic_locals, cells, output)
    tx.run()
    guard_manager = GuardManager(output.guard_list())
    new_code = bt.make_code(code, tx.output_instructions)
    new_fn = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    counters["frames"]["ok"] += 1
    if config.debug >= 2:
        print(f"[minidynamo] guards for {fn.__qualname__}:\n{guard_manager}")
    if config.debug >= 3:
        print(f"[minidynamo] transformed {fn.__qualname__}:\n{bt.format_code(new_code)}")
    return CacheEntry(guard_manager, new_code, new_fn, getattr(output, "gm", None), output.compiled_name,
                      getattr(output, "compile_time", 0.0), code)


def arg_count(code: types.CodeType) -> int:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return n


def tensors_to_output(values: list[VariableTracker]) -> list[TensorVariable]:
    """The computed tensors (no source) reachable from ``values``: they become the graph's outputs."""
    out: dict[int, TensorVariable] = {}

    def walk(v):
        if isinstance(v, TensorVariable):
            if v.source is None:
                out.setdefault(id(v), v)
        elif v.source is not None:
            return
        elif isinstance(v, (BaseListVariable, ListIteratorVariable, SliceVariable)):
            for item in v.items:
                walk(item)
        elif isinstance(v, DictVariable):
            for item in v.items.values():
                walk(item)
        elif hasattr(v, "obj"):  # bound methods
            walk(v.obj)

    for v in values:
        walk(v)
    return list(out.values())


def compile_and_return(tx, return_value: VariableTracker) -> list[Instr]:
    """At the root RETURN_VALUE: compile the graph and emit ``call graph; apply side effects; return value``."""
    output = tx.output
    side_effect_values = output.side_effects.values_to_reconstruct()
    outputs = tensors_to_output([return_value, *side_effect_values])
    graph_outputs = {id(t): k for k, t in enumerate(outputs)}
    # Generate the tail first: if something cannot be rebuilt we refuse before compiling anything.
    tail = PyCodegen(tx, output.f_code, output.f_globals, graph_outputs)
    tail(return_value)  # before any side effect changes what sources point to
    if output.side_effects.is_empty():
        tail.append(Instr("RETURN_VALUE"))
    else:
        tail.store_local("___return_value")
        output.side_effects.codegen(tail)
        tail.load_local("___return_value")
        tail.append(Instr("RETURN_VALUE"))
    name, sources = output.compile_subgraph(outputs)
    output.compiled_name = name
    head = PyCodegen(tx, output.f_code, output.f_globals)
    if name is not None:
        head.load_global(name, push_null=True)
        for source in sources:
            source.reconstruct(head)
        head.call(len(sources))
        head.append(Instr("STORE_FAST", GRAPH_OUT))
    return head.instructions + tail.instructions
