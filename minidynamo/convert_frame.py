"""convert_frame: translate one frame into a guarded, transformed code object (or refuse, with a reason).

In:  a function, the real values of its locals at call time, and a backend.  Out: a ``CacheEntry`` -- the guards
(a generated check function) and a new code object that calls the compiled graph and rebuilds the return value
and side effects.  Where the frame cannot be traced whole, the translation is restarted with a graph break at the
failing instruction (``convert_frame``; the break's code is made in ``graph_break.py``).  At the return it ends
with ``compile_and_return``.  Mirrors ``torch/_dynamo/convert_frame.py``.

    def f(x, n):                       transformed f:
        return torch.sin(x) * n   =>       ___graph_out = __compiled_fn_0(x)   # graph: sin(x) * 3
                                           return ___graph_out[0]
    guards: L['x'] TENSOR_MATCH ..., L['n'] EQUALS_MATCH 3
"""
from __future__ import annotations

import inspect
import types
from collections.abc import Callable

from bytecode import Instr

from . import bytecode_transformation as bt
from . import config
from .break_points import breaking_offset, can_break_at
from .cache_entry import CacheEntry
from .codegen import GRAPH_OUT, PyCodegen
from .exc import Unsupported, without_frames
from .graph_break import built_after_side_effects, cell_stores, tensors_to_output
from .guards import GuardManager
from .output_graph import OutputGraph
from .source import LocalSource
from .utils import counters
from .variables.base import VariableTracker
from .variables.builder import LazyVariableTracker
from .variables.functions import CellVariable


def convert_frame(fn: types.FunctionType, f_locals: dict, compiler_fn: Callable, ctx=None) -> CacheEntry:
    """Translate ``fn``'s code for these inputs; raises ``Unsupported`` if the frame cannot be captured.

    Restart on failure: if tracing fails at an instruction of this frame where a graph break is possible, the
    translation starts again and, at that instruction, compiles the graph so far and breaks there.

    [Note: break hints]  A resume function of a loop body is translated again for every case it recompiles for
    (the loop index while it is a constant, another row count), and each time the first attempt failed where the
    last one did: a third of the tutorial MoE's first call, when it still compiled once per expert.  So a resume
    function that broke at an instruction starts its next translation with the break there; should that attempt
    fail elsewhere, the usual restart follows -- at once if it failed before reaching the hinted instruction: up to
    there it traced what a translation without the break traces, so that one would fail at the same instruction.
    (A break the new values would not have needed would cost speed, never correctness.)  User functions keep
    upstream's restart.
    """
    try:
        hinted = _translate_with_break_hint(fn, f_locals, compiler_fn, ctx)
        return hinted if hinted is not None else translate(fn, f_locals, compiler_fn, ctx)
    except Unsupported as e:
        offset = e.root_offset = breaking_offset(fn.__code__, getattr(e, "root_offset", None))
        if ctx is None or ctx.fullgraph or getattr(e, "whole_frame", False) or not can_break_at(fn.__code__, offset):
            raise
        entry, e = _translate_breaking(fn, f_locals, compiler_fn, ctx, e)
        record_breaks(ctx, e, entry)
        if fn.__code__ in ctx.resume_origin:
            ctx.break_hints[fn.__code__] = e
        return entry


def _translate_breaking(fn, f_locals, compiler_fn, ctx, e: Unsupported) -> tuple[CacheEntry, Unsupported]:
    """Translate breaking the graph where ``e`` happened -- or earlier, where breaking there needs it.

    [Note: a break moved earlier]  At a break every live value is handed to Python.  One that cannot be (a
    generator the translator ran up front: [Note: stale generators]) refuses with ``break_earlier`` and the
    offset of the instruction that made it; the translation starts once more and breaks there instead."""
    tried = set()
    while True:
        tried.add(e.root_offset)
        try:
            return translate(fn, f_locals, compiler_fn, ctx, break_offset=e.root_offset), e
        except Unsupported as earlier:
            offset = earlier.root_offset = breaking_offset(fn.__code__, getattr(earlier, "root_offset", None))
            if not getattr(earlier, "break_earlier", False) or offset in tried or \
                    not can_break_at(fn.__code__, offset):
                raise
            e = earlier


def _translate_with_break_hint(fn, f_locals, compiler_fn, ctx) -> CacheEntry | None:
    """Translate a resume function breaking where it broke last time (see [Note: break hints]).

    None if there is no hint, or if the translation failed at the hinted break itself; raises ``Unsupported`` if it
    failed before reaching it (an instruction of the root frame other than the break's sets ``root_offset``)."""
    e = ctx.break_hints.get(fn.__code__) if ctx is not None and not ctx.fullgraph else None
    if e is None:
        return None
    try:
        entry = translate(fn, f_locals, compiler_fn, ctx, break_offset=e.root_offset)
    except Unsupported as failure:
        if getattr(failure, "root_offset", None) not in (None, e.root_offset):
            raise
        return None
    if entry.broke:
        record_breaks(ctx, e, entry)
    return entry


def record_breaks(ctx, e: Unsupported, entry: CacheEntry) -> None:
    """Count the break ``e`` and keep it for ``explain``, then those of the native stretch after it, in source order."""
    for error in (e, *entry.stretch_breaks):
        counters["graph_break"][error.reason] += 1
        ctx.graph_breaks.append(without_frames(error))  # [Note: kept refusals hold no frames]


def translate(fn: types.FunctionType, f_locals: dict, compiler_fn: Callable, ctx=None,
              break_offset: int | None = None) -> CacheEntry:
    from .symbolic_convert import InstructionTranslator

    code = fn.__code__
    counters["frames"]["total"] += 1
    output = OutputGraph(code, fn.__globals__, f_locals, compiler_fn, fn.__qualname__)
    output.ctx = ctx
    output.closure = fn.__closure__
    symbolic_locals = {name: LazyVariableTracker(LocalSource(name), f_locals[name])
                       for name in code.co_varnames[:arg_count(code)] if name in f_locals}
    # Every free variable gets a cell (an empty one too: a resume function's cells may be assigned later).
    cells = {name: CellVariable(LazyVariableTracker(LocalSource(name, is_cell=True), f_locals[name])
                                if name in f_locals else None, source=LocalSource(name, is_cell=True))
             for name in code.co_freevars}
    tx = InstructionTranslator(code, fn.__globals__, symbolic_locals, cells, output, break_offset=break_offset)
    tx.run()
    guard_manager = GuardManager(output.guard_list(), output.tensor_values())
    new_code = bt.make_code(code, tx.output_instructions)
    new_fn = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    counters["frames"]["ok"] += 1
    if config.debug >= 2:
        print(f"[minidynamo] guards for {fn.__qualname__}:\n{guard_manager}")
    if config.debug >= 3:
        print(f"[minidynamo] transformed {fn.__qualname__}:\n{bt.format_code(new_code)}")
    return CacheEntry(guard_manager, new_code, new_fn, getattr(output, "gm", None), output.compiled_name,
                      getattr(output, "compile_time", 0.0), code, tx.broke, output.stretch_breaks)


def arg_count(code: types.CodeType) -> int:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return n


def compile_and_return(tx, return_value: VariableTracker) -> list[Instr]:
    """At the root RETURN_VALUE: compile the graph and emit ``call graph; apply side effects; return value``."""
    output = tx.output
    cells = cell_stores(tx)
    side_effect_values = output.side_effects.values_to_reconstruct() + [v for _, v in cells]
    outputs = tensors_to_output([return_value, *side_effect_values])
    graph_outputs = {id(t): k for k, t in enumerate(outputs)}
    # Generate the tail first: if something cannot be rebuilt we refuse before compiling anything.
    tail = PyCodegen(tx, output.f_code, output.f_globals, graph_outputs)
    after = built_after_side_effects(return_value)  # [Note: dict iterators see the mutated dict]
    if not after:
        tail(return_value)  # before any side effect changes what sources point to
    if output.side_effects.is_empty() and not cells:
        tail.append(Instr("RETURN_VALUE"))
    else:
        if not after:
            tail.store_local("___return_value")
        output.side_effects.codegen(tail, cells)
        if after:
            tail(return_value)
        else:
            tail.load_local("___return_value")
        tail.append(Instr("RETURN_VALUE"))
    name, sources = output.compile_subgraph(outputs)
    output.compiled_name = name
    head = PyCodegen(tx, output.f_code, output.f_globals)
    if name is not None:
        head.load_global(name, push_null=True)
        head.load_graph_inputs(sources)
        head.call(len(sources))
        head.append(Instr("STORE_FAST", GRAPH_OUT))
    return head.instructions + tail.instructions
