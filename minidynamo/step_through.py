"""step_through: watch the translator run one instruction at a time, next to what CPython really did.

What goes in: a function (or ``nn.Module``) and its arguments.  What comes out: a ``StepThrough`` -- one ``Step``
per instruction the translator ran, in order, across every translation the call caused (the first attempt, the
restart after a graph break, the resume functions, the inlined callees).  Each step records

    frame, inline depth, source line     where we are (an inlined callee has depth 1, 2, ...)
    opcode and argument                  what ``dis`` says the instruction is
    stack and locals, before and after   the symbolic values: VariableTrackers, not real values
    FX nodes added, guards added          what the instruction contributed to the graph and to the guards
    events                               a graph break, a restart, the graph compiled at RETURN_VALUE

and, next to it, the matching *concrete* event: the same instruction as CPython ran it on the real arguments, with
the real values of the locals at that moment.  Where the translator had ``TensorVariable(add)``, CPython had a
tensor with numbers in it; where the translator folded ``n = 3`` away, CPython had the same 3.

    >>> st = step_through(toy, x, y)            # doctest: +SKIP
    >>> print(st)                               # one line per instruction
    >>> st.forward(); st.forward(); st.back()   # walk; ``st.current`` is where you are
    >>> st.breaks()                             # the steps where a graph break happened
    >>> st                                      # in Jupyter: an HTML table, the current step highlighted

How the two runs are recorded:

- The translator: ``symbolic_convert.step_observer`` is set for the duration of the call, so the translator's
  loop hands each instruction to ``_Recorder.__call__``, which snapshots, calls ``tx.step()``, snapshots again.
  The function runs through ``minicompile`` (backend ``"eager"`` by default), so graph breaks, restarts and resume
  functions happen exactly as they do for a user.
- CPython: the original function is called once more, on the same arguments, with opcode events switched on for
  the code objects the translator read: ``sys.settrace`` with ``frame.f_trace_opcodes`` on 3.11, and
  ``sys.monitoring``'s INSTRUCTION events on 3.12+ (where ``f_trace_opcodes`` set in the 'call' event is ignored).
  CPython does not let Python code read a frame's value stack, so the concrete side shows locals only.
  The function runs twice: a function with side effects (an optimizer step) has them twice.

Step *k* of a code object at offset *o* is paired with the *n*-th concrete event at (code, *o*) when it is the
translator's *n*-th visit there.  Resume functions are generated code that CPython never ran in the plain call,
so their steps have no concrete twin.

Upstream twin: none.  Dynamo's closest is ``TORCH_LOGS=+dynamo`` (``torch/_dynamo/symbolic_convert.py`` logs each
instruction with the stack at debug level), which is what ``MINICOMPILE_DEBUG=4`` prints here.
"""
from __future__ import annotations

import dataclasses
import dis
import html
import linecache
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from . import symbolic_convert
from .exc import Unsupported

_MAX_REPR = 60


# --------------------------------------------------------------------------------------------- what is recorded
@dataclasses.dataclass
class ConcreteEvent:
    """One opcode as CPython ran it: where, and the real locals just before it ran."""

    frame: str
    offset: int
    opname: str
    lineno: int | None
    locals: dict[str, str]


@dataclasses.dataclass
class Step:
    """One instruction as the translator ran it (see the module docstring for the fields)."""

    index: int
    translation: int
    frame: str
    depth: int
    filename: str
    lineno: int | None
    offset: int
    opname: str
    argrepr: str
    stack_before: list[str]
    stack_after: list[str]
    locals_before: dict[str, str]
    locals_after: dict[str, str]
    nodes_added: list[str] = dataclasses.field(default_factory=list)
    guards_added: list[str] = dataclasses.field(default_factory=list)
    events: list[str] = dataclasses.field(default_factory=list)
    concrete: ConcreteEvent | None = None

    @property
    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip() if self.lineno else ""

    def headline(self) -> str:
        indent = "  " * self.depth
        op = f"{self.opname} {self.argrepr}".strip()
        return f"[{self.index:3d}] {indent}{self.frame}:{self.lineno} @{self.offset:<4d} {op}"

    def __str__(self) -> str:
        lines = [self.headline(), f"      line:    {self.source_line}",
                 f"      stack:   {_list(self.stack_before)}  ->  {_list(self.stack_after)}",
                 f"      locals:  {_dict(self.locals_after)}"]
        lines += [f"      + node:  {n}" for n in self.nodes_added]
        lines += [f"      + guard: {g}" for g in self.guards_added]
        lines += [f"      ! {e}" for e in self.events]
        if self.concrete is not None:
            lines.append(f"      CPython: {_dict(self.concrete.locals)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return _step_html(self)


@dataclasses.dataclass
class Translation:
    """One run of the translator over one code object (a frame, a restart, or a resume function)."""

    index: int
    frame: str
    kind: str  # "first", "restart" (breaks at an offset), "resume function"
    break_offset: int | None = None


class StepThrough:
    """The recorded steps, with a cursor that walks forward and backward."""

    def __init__(self, steps: list[Step], translations: list[Translation], concrete: list[ConcreteEvent],
                 result: Any) -> None:
        self.steps, self.translations, self.concrete, self.result = steps, translations, concrete, result
        self.position = 0

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, k: int) -> Step:
        return self.steps[k]

    def __iter__(self):
        return iter(self.steps)

    @property
    def current(self) -> Step:
        return self.steps[self.position]

    def goto(self, k: int) -> Step:
        self.position = max(0, min(k, len(self.steps) - 1))
        return self.current

    def forward(self, n: int = 1) -> Step:
        return self.goto(self.position + n)

    def back(self, n: int = 1) -> Step:
        return self.goto(self.position - n)

    def breaks(self) -> list[Step]:
        """The steps where something happened to the frame: a graph break, a restart."""
        return [s for s in self.steps if any("break" in e or "restart" in e for e in s.events)]

    def __str__(self) -> str:
        out = []
        for t in self.translations:
            out.append(f"=== translation {t.index}: {t.frame} ({t.kind}) ===")
            for s in (s for s in self.steps if s.translation == t.index):
                mark = ">" if s.index == self.position else " "
                extra = "".join(f"  + {n}" for n in s.nodes_added) + "".join(f"  ! {e}" for e in s.events)
                out.append(f"{mark}{s.headline():<58} stack={_list(s.stack_after)}{extra}")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        return _table_html(self)


# ------------------------------------------------------------------------------------------------ the recorder
class _Recorder:
    """The translator's ``step_observer``: snapshot, step, snapshot."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.translations: list[Translation] = []
        self.code_objects: dict[types.CodeType, None] = {}  # what the concrete run must watch, in order
        self._outputs: dict[int, int] = {}  # id(OutputGraph) -> translation index
        self._keep: list[Any] = []  # keep each OutputGraph alive, so its id is not reused

    def __call__(self, tx) -> None:
        inst = tx.instructions[tx.ip]
        step = self._begin(tx, inst)
        nodes, guards = set(tx.output.graph.nodes), set(tx.output.guards)
        try:
            tx.step()
        except Unsupported as e:
            if not getattr(e, "_seen_by_step_through", False):  # the innermost frame reports it; callers re-raise
                e._seen_by_step_through = True
                step.events.append(self._describe_unsupported(tx, e))
            raise
        finally:
            self._end(tx, step, nodes, guards)
        if tx.done and tx.parent is None:
            step.events.append(self._describe_done(tx))

    def _begin(self, tx, inst) -> Step:
        code = tx.f_code
        if not code.co_name.startswith("__resume_at"):
            self.code_objects.setdefault(code, None)
        step = Step(len(self.steps), self._translation(tx), code.co_name, tx.depth(), code.co_filename,
                    inst.lineno or tx.lineno, inst.offset, inst.opname, inst.argrepr,
                    [_short(v) for v in tx.stack], [], _locals(tx), {})
        if inst.offset == getattr(tx, "break_offset", None):
            step.events.append("graph break here: the graph so far is compiled, this instruction runs natively, "
                               "and a resume function continues after it")
        self.steps.append(step)
        return step

    def _end(self, tx, step: Step, nodes_before: set, guards_before: set) -> None:
        step.stack_after = [_short(v) for v in tx.stack]
        step.locals_after = _locals(tx)
        step.nodes_added = [format_node(n) for n in tx.output.graph.nodes if n not in nodes_before]
        step.guards_added = [" ".join(str(g).split()) for k, g in tx.output.guards.items() if k not in guards_before]

    def _translation(self, tx) -> int:
        key = id(tx.output)
        if key not in self._outputs:
            root = tx
            while root.parent is not None:
                root = root.parent
            offset = getattr(root, "break_offset", None)
            kind = ("resume function" if root.f_code.co_name.startswith("__resume_at")
                    else "restart" if offset is not None else "first")
            self._outputs[key] = len(self.translations)
            self._keep.append(tx.output)
            self.translations.append(Translation(len(self.translations), root.f_code.co_name, kind, offset))
        return self._outputs[key]

    @staticmethod
    def _describe_unsupported(tx, e: Unsupported) -> str:
        hint = f" (hint: {e.hint})" if getattr(e, "hint", "") else ""
        where = "in an inlined callee; " if tx.parent is not None else ""
        return f"cannot trace: {e.reason}{hint} -- {where}the translator gives up here; the frame restarts and " \
               f"breaks the graph at this point (or runs eagerly if it cannot)"

    @staticmethod
    def _describe_done(tx) -> str:
        out = tx.output
        name = getattr(out, "compiled_name", None)
        return f"frame done: graph {name or '(none: no tensor ops)'} with {out.count_calls()} ops compiled"


def format_node(node) -> str:
    """``add = operator.add(sin, l_y)``: an FX node as the line of Python it stands for."""
    from .viz import target_name
    if node.op == "placeholder":
        return f"{node.name} = input {node.meta.get('source', node.target)}"
    if node.op == "output":
        return f"return {node.args[0]}"
    args = [str(a) for a in node.args] + [f"{k}={v}" for k, v in node.kwargs.items()]
    return f"{node.name} = {target_name(node)}({', '.join(args)})"


def _short(v: Any) -> str:
    if type(v).__name__ == "LazyVariableTracker":
        text = f"Lazy({v.source.name()})"  # an input not looked at yet (no guard so far)
    else:
        text = repr(v)
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR - 3] + "..."


def _locals(tx) -> dict[str, str]:
    return {k: _short(v) for k, v in tx.symbolic_locals.items()}


# ------------------------------------------------------------------------------------------ the concrete run
def concrete_value(v: Any) -> str:
    """A real value in a few characters: tensors by dtype, shape and (when tiny) their numbers."""
    if isinstance(v, torch.Tensor):
        from .viz import describe_value
        text = describe_value(v)
        if v.numel() <= 4:
            values = v.detach().flatten().tolist()
            text += " [" + ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in values) + "]"
        return text
    if isinstance(v, torch.nn.Module):
        return f"<{type(v).__name__}>"
    text = repr(v)
    return text if len(text) <= _MAX_REPR else text[:_MAX_REPR - 3] + "..."


def trace_concrete(fn: Callable, args: tuple, kwargs: dict, codes) -> tuple[Any, list[ConcreteEvent]]:
    """Call ``fn(*args, **kwargs)`` natively, recording one ``ConcreteEvent`` per opcode run in ``codes``."""
    codes = set(codes)
    events: list[ConcreteEvent] = []
    lines = {code: _offsets_to_instructions(code) for code in codes}

    def record(frame, offset: int) -> None:
        inst = lines[frame.f_code].get(offset)
        if inst is not None:
            events.append(ConcreteEvent(frame.f_code.co_name, offset, inst.opname, _lineno(frame),
                                        {k: concrete_value(v) for k, v in frame.f_locals.items()}))

    runner = _run_monitored if sys.version_info >= (3, 12) else _run_settrace
    result = runner(fn, args, kwargs, codes, record)
    return result, events


def _offsets_to_instructions(code: types.CodeType) -> dict[int, dis.Instruction]:
    return {i.offset: i for i in dis.get_instructions(code)}


def _lineno(frame) -> int | None:
    return frame.f_lineno


def _run_settrace(fn, args, kwargs, codes, record):
    """3.11: ``f_trace_opcodes`` turns on one 'opcode' event per instruction of a traced frame."""

    def local_trace(frame, event, arg):
        if event == "opcode":
            record(frame, frame.f_lasti)
        return local_trace

    def global_trace(frame, event, arg):
        if frame.f_code not in codes:
            return None  # no events at all for library frames: torch stays fast
        frame.f_trace_opcodes = True
        return local_trace

    old = sys.gettrace()
    sys.settrace(global_trace)
    try:
        return fn(*args, **kwargs)
    finally:
        sys.settrace(old)


def _run_monitored(fn, args, kwargs, codes, record):  # 3.12+: checked standalone on 3.12.1 and 3.13.0
    """3.12+: INSTRUCTION events of ``sys.monitoring``, switched on for our code objects only."""
    mon = sys.monitoring
    tool = next(t for t in range(6) if mon.get_tool(t) is None)
    mon.use_tool_id(tool, "minidynamo.step_through")

    def on_instruction(code, offset):
        record(sys._getframe(1), offset)

    mon.register_callback(tool, mon.events.INSTRUCTION, on_instruction)
    try:
        for code in codes:
            mon.set_local_events(tool, code, mon.events.INSTRUCTION)
        return fn(*args, **kwargs)
    finally:
        for code in codes:
            mon.set_local_events(tool, code, 0)
        mon.register_callback(tool, mon.events.INSTRUCTION, None)
        mon.free_tool_id(tool)


def pair_with_concrete(steps: list[Step], events: list[ConcreteEvent], codes) -> None:
    """Give each step its concrete twin: the n-th visit of (frame, offset) on both sides."""
    by_key: dict[tuple, list[ConcreteEvent]] = {}
    for ev in events:
        by_key.setdefault((ev.frame, ev.offset), []).append(ev)
    seen: dict[tuple, int] = {}
    # a restart re-reads the frame from the top: visits are counted per translation, not per call
    for s in steps:
        if s.frame.startswith("__resume_at"):
            continue
        key = (s.translation, s.frame, s.offset)
        n = seen.get(key, 0)
        seen[key] = n + 1
        twins = by_key.get((s.frame, s.offset), [])
        if n < len(twins):
            s.concrete = twins[n]


# --------------------------------------------------------------------------------------------- the entry point
def step_through(fn: Callable, *args, backend: str | Callable = "eager", **kwargs) -> StepThrough:
    """Compile and run ``fn(*args, **kwargs)`` once with the translator watched, then once natively traced."""
    from .eval_frame import minicompile

    fn = getattr(fn, "_minidynamo_orig", fn)
    target = getattr(fn, "_orig_mod", fn)
    recorder = _Recorder()
    compiled = minicompile(target, backend=backend)
    previous, symbolic_convert.step_observer = symbolic_convert.step_observer, recorder
    try:
        result = compiled(*args, **kwargs)
    finally:
        symbolic_convert.step_observer = previous
    _, events = trace_concrete(target, args, kwargs, recorder.code_objects)
    pair_with_concrete(recorder.steps, events, recorder.code_objects)
    return StepThrough(recorder.steps, recorder.translations, events, result)


# --------------------------------------------------------------------------------------------------- rendering
def _list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _dict(d: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


_CSS = ("<style>.st td,.st th{font-family:monospace;font-size:11px;text-align:left;vertical-align:top;"
        "padding:1px 6px}.st tr.cur{background:#fff3b0}.st .ev{color:#b00}.st .node{color:#060}"
        ".st .guard{color:#55a}</style>")


def _esc(text: str) -> str:
    return html.escape(text)


def _step_cells(s: Step) -> str:
    extra = "".join(f"<div class='node'>+ {_esc(n)}</div>" for n in s.nodes_added)
    extra += "".join(f"<div class='guard'>+ {_esc(g)}</div>" for g in s.guards_added)
    extra += "".join(f"<div class='ev'>! {_esc(e)}</div>" for e in s.events)
    concrete = _esc(_dict(s.concrete.locals)) if s.concrete else "<i>(generated code: no twin)</i>" \
        if s.frame.startswith("__resume_at") else ""
    return (f"<td>{s.index}</td><td>{'&nbsp;' * 2 * s.depth}{_esc(s.frame)}:{s.lineno}</td>"
            f"<td>{_esc(s.opname)} {_esc(s.argrepr)}</td><td>{_esc(_list(s.stack_after))}</td>"
            f"<td>{_esc(_dict(s.locals_after))}</td><td>{extra}</td><td>{concrete}</td>")


def _table_html(st: StepThrough) -> str:
    head = ("<tr><th>#</th><th>frame:line</th><th>instruction</th><th>stack after</th><th>locals after</th>"
            "<th>graph / guards / events</th><th>CPython locals (before)</th></tr>")
    rows = []
    for s in st.steps:
        if s.index == 0 or st.steps[s.index - 1].translation != s.translation:
            t = st.translations[s.translation]
            rows.append(f"<tr><th colspan=7>translation {t.index}: {_esc(t.frame)} ({t.kind})</th></tr>")
        cls = " class='cur'" if s.index == st.position else ""
        rows.append(f"<tr{cls}>{_step_cells(s)}</tr>")
    return f"{_CSS}<table class='st'>{head}{''.join(rows)}</table>"


def _step_html(s: Step) -> str:
    rows = [("where", f"{s.frame}:{s.lineno} (depth {s.depth}), offset {s.offset}"),
            ("source", s.source_line), ("instruction", f"{s.opname} {s.argrepr}"),
            ("stack before", _list(s.stack_before)), ("stack after", _list(s.stack_after)),
            ("locals before", _dict(s.locals_before)), ("locals after", _dict(s.locals_after))]
    rows += [("FX node added", n) for n in s.nodes_added] + [("guard added", g) for g in s.guards_added]
    rows += [("event", e) for e in s.events]
    if s.concrete is not None:
        rows.append(("CPython locals", _dict(s.concrete.locals)))
    body = "".join(f"<tr><th>{k}</th><td>{_esc(v)}</td></tr>" for k, v in rows)
    return f"{_CSS}<table class='st'>{body}</table>"
