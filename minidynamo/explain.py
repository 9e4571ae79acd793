"""explain / show_guards / show_transformed: what the translator did to a function, in words.

``explain(fn)(*args)`` compiles ``fn`` afresh with a recording backend and reports the graphs, graph breaks (with
reasons, hints and user lines), operation counts, guards and compile times -- the fields of
``torch._dynamo.explain``.  ``show_guards`` and ``show_transformed`` print the guards and the original/transformed
bytecode of an already-compiled function.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from . import bytecode_transformation as bt


@dataclasses.dataclass
class BreakReason:
    reason: str
    user_stack: list
    hint: str = ""

    def __str__(self) -> str:
        where = ""
        if self.user_stack:
            fs = self.user_stack[-1]
            where = f" ({fs.filename.rsplit('/', 1)[-1]}:{fs.lineno}: {(fs.line or '').strip()})"
        return f"{self.reason}{where}" + (f"\n      hint: {self.hint}" if self.hint else "")


@dataclasses.dataclass
class ExplainOutput:
    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    ops_per_graph: list
    out_guards: list
    compile_times: str

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines += [f"  {k + 1}. {r}" for k, r in enumerate(self.break_reasons)]
        lines.append("Ops per Graph:")
        for k, ops in enumerate(self.ops_per_graph):
            lines.append(f"  Graph {k}: " + ", ".join(_op_name(o) for o in ops))
        lines.append(f"Out Guards: {len(self.out_guards)}")
        lines += [f"  {g}" for g in self.out_guards]
        lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines)


def _op_name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def explain(fn: Callable) -> Callable[..., ExplainOutput]:
    """``explain(fn)(*args, **kwargs)`` (the calling convention of ``torch._dynamo.explain``)."""
    from .eval_frame import minicompile

    def run(*args, **kwargs) -> ExplainOutput:
        graphs: list[torch.fx.GraphModule] = []

        def recording_backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        target = fn._orig_mod if hasattr(fn, "_orig_mod") else getattr(fn, "_minidynamo_orig", fn)
        compiled = minicompile(target, backend=recording_backend)
        compiled(*args, **kwargs)
        ctx = compiled._ctx if hasattr(compiled, "_ctx") else compiled._minidynamo_ctx
        breaks = [BreakReason(e.reason, e.user_stack, e.hint) for e in ctx.fallbacks]
        breaks += [BreakReason(b.reason, b.user_stack, b.hint) for b in getattr(ctx, "graph_breaks", [])]
        # like upstream, explain's op lists count call_function nodes (CompileCounter counts methods too)
        ops = [[n.target for n in g.graph.nodes if n.op == "call_function"] for g in graphs]
        entries = [e for es in ctx.cache.values() for e in es]
        guards = [g for e in entries for g in e.guards]
        times = ", ".join(f"{e.orig_code.co_name}: {e.compile_time:.4f}s" for e in entries)
        return ExplainOutput(graphs, len(graphs), len(breaks), breaks, sum(map(len, ops)), ops, guards, times)

    return run


def _entries(fn) -> list:
    from .eval_frame import contexts_of
    return [e for ctx in contexts_of(fn) for es in ctx.cache.values() for e in es]


def show_guards(fn) -> str:
    """The guards of every compiled version of ``fn`` (a ``minicompile`` result), printed and returned."""
    parts = []
    for k, e in enumerate(_entries(fn)):
        parts.append(f"--- cache entry {k} of {e.orig_code.co_name} ({len(e.guards)} guards) ---")
        parts.append(str(e.guard_manager))
    text = "\n".join(parts) or "(nothing compiled yet: call the function first)"
    print(text)
    return text


def show_transformed(fn) -> str:
    """The original and transformed bytecode of every compiled version of ``fn``."""
    parts = []
    for k, e in enumerate(_entries(fn)):
        parts.append(f"=== original {e.orig_code.co_name} ===\n{bt.format_code(e.orig_code)}")
        parts.append(f"=== transformed (cache entry {k}) ===\n{bt.format_code(e.code)}")
    text = "\n".join(parts) or "(nothing compiled yet: call the function first)"
    print(text)
    return text
