"""Context managers across a graph break: the ``with`` regions a break leaves open, and the exits it hands on.

In:  the stack of the root translator at a graph break (``graph_break.compile_and_break``), which may hold the
exits of ``with`` blocks the traced code entered and has not left.  Out: (1) each exit as an object the native
code can call (``stack_item_for_break``), (2) the native instruction wrapped so that those exits run should it
raise (``emit_under_exit_guard``), and (3) the decision that a break inside a *user* context manager's block runs
nothing natively (``inside_user_with_block``).

Why a stage of its own: a graph break splits a frame in the middle of a ``with`` block.  The captured graph has
entered the region, the native instruction runs inside it, and the resume function leaves it.  Three kinds of
region are understood, and each crosses the break in its own way:

* ``torch.no_grad()`` / ``enable_grad()`` / ``set_grad_enabled()``: grad mode stays as the graph set it; the
  resume function receives a ``GradModeExit`` that restores the previous mode.
* ``torch.autograd.profiler.record_function(name)``: the graph closes its region and the transformed code opens
  it again natively (``enter_record_function``), handing its ``__exit__`` on.
* ``torch.autocast(...)``: the same, through ``enter_autocast``.

Any other context manager (a class with ``__exit__``, a ``@contextmanager`` generator) may see and swallow an
exception, so the rest of the frame runs eagerly from the break ([Note: a break inside a user with block]).

    def f(x):                              transformed f (the break at ``print``):
        with torch.no_grad():                  ___graph_out = __compiled_fn_0(x)     # grad mode off, left off
            y = x * 2                          try:    print(...)                    # the native instruction
            print("break")                     except: run_exits(GradModeExit(True)); raise
            return y + 1                       return Continuation(__resume_at_.., GradModeExit(True), ...)

The runtime halves (``GradModeExit``, ``RecordFunctionExit``, ``AutocastExit``, ``run_exits``) are in
``resume_execution.py``; the resume function gets each exit on its stack, where the original ``with`` cleanup (its
exception table) calls it.  ``graph_break.compile_and_break`` is the driver that calls into this module.
Upstream: ``ReenterWith`` in ``torch/_dynamo/resume_execution.py`` (a try block that calls a context manager's exit,
used by ``create_call_resume_at`` in ``symbolic_convert.py``) and ``ContextWrappingVariable.reconstruct_type`` in
``variables/ctx_manager.py``.  Left out: upstream re-enters any context manager it can trace; a user context
manager here sends the rest of the frame to eager instead.
"""
from __future__ import annotations

from bytecode import Instr, Label, TryBegin, TryEnd

from .codegen import LoadedObject, PyCodegen
from .exception_table import with_exit_positions
from .resume_execution import GradModeExit, enter_autocast, enter_record_function
from .variables.base import VariableTracker


class _ReenteredRecordFunction(VariableTracker):
    """A record_function region re-entered natively: ``enter_record_function(name)`` returns its ``__exit__``."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def reconstruct(self, codegen):
        codegen.load_const_object(enter_record_function, push_null=True)
        codegen.load_const(self.name)
        codegen.call(1)


class _ReenteredAutocast(VariableTracker):
    """An autocast block re-entered natively: ``enter_autocast(device, dtype, enabled, cache)`` returns its exit."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def reconstruct(self, codegen):
        codegen.load_const_object(enter_autocast, push_null=True)
        codegen.load_const(self.ctx.device)
        codegen.load_const_object(self.ctx.dtype)
        codegen.load_const(self.ctx.enabled)
        codegen.load_const(self.ctx.cache_enabled)
        codegen.call(4)


def stack_item_for_break(tx, v: VariableTracker) -> VariableTracker:
    """Stack entries that only exist in the tracer become real objects the native code can use."""
    from .variables import WithExitFunctionVariable
    from .variables.ctx_manager import AutocastModeVariable, GradModeVariable, RecordFunctionVariable
    if isinstance(v, WithExitFunctionVariable):
        if isinstance(v.ctx, GradModeVariable):
            return LoadedObject(GradModeExit(v.ctx.prev))
        if isinstance(v.ctx, RecordFunctionVariable):
            v.ctx.exit(tx)  # close the region inside this graph; re-open it natively
            return _ReenteredRecordFunction(v.ctx.name)
        if isinstance(v.ctx, AutocastModeVariable):
            v.ctx.exit(tx)  # exit the block inside this graph; re-enter it natively (its exit then runs natively)
            return _ReenteredAutocast(v.ctx)
    return v


# [Note: exits when the native instruction raises]  A break inside ``with torch.no_grad():`` runs its native
# instruction with grad disabled (the graph entered the block and did not leave it; the resume function leaves it
# through the GradModeExit it receives).  Should that instruction raise, eager's ``with`` restores grad mode on the
# way out; the transformed code did not, and the caller's process went on with grad disabled (the same for
# autocast and record_function regions).  So the native instruction is covered by a handler that calls every
# pending exit, innermost first, and re-raises (``emit_under_exit_guard``).
def emit_under_exit_guard(tx, cg: PyCodegen, virtual: list[bool], run_native, continuations) -> None:
    """Emit the native code of a break (``run_native()``) and then its continuations (``continuations()``, each
    ending in a return), such that the ``with`` exits the break hands on run if the native code raises.

    When the stack holds such exits (``exit_slots``), the native code is wrapped in a try block whose handler --
    ``run_exits(...)``, then re-raise -- is emitted after the continuations, where only an exception reaches it.
    """
    exits = exit_slots(tx.stack, virtual)
    if not exits:
        run_native()
        continuations()
        return
    try_begin = TryBegin(Label(), push_lasti=False, stack_depth=max(exits) + 1)
    cg.append(try_begin)
    run_native()
    cg.append(TryEnd(try_begin))
    continuations()
    emit_exits_then_reraise(cg, try_begin, exits)


def exit_slots(stack: list, virtual: list[bool]) -> list[int]:
    """Real stack positions (NULLs never pushed do not count) of the ``with`` exits the break hands on."""
    positions, real = [], 0
    for v, is_virtual in zip(stack, virtual):
        if is_virtual:
            continue
        if is_our_exit(v):
            positions.append(real)
        real += 1
    return positions


def emit_exits_then_reraise(cg: PyCodegen, try_begin: TryBegin, exits: list[int]) -> None:
    """The handler: ``run_exits(exit_n, ..., exit_1)`` on the exits kept below the exception, then ``raise``."""
    from .resume_execution import run_exits
    cg.append(try_begin.target)
    cg.load_const_object(run_exits, push_null=True)
    size = try_begin.stack_depth + 3  # the kept stack, the exception, NULL and run_exits
    for k, position in enumerate(sorted(exits, reverse=True)):
        cg.append(Instr("COPY", size + k - position))
    cg.call(len(exits))
    cg.append(Instr("POP_TOP"), Instr("RERAISE", 0))


# [Note: a break inside a user with block]  The exit guard above calls the exits of the regions the translator
# understands (grad mode, autocast, record_function), which never swallow an exception.  A user context manager's
# ``__exit__`` (a class's, or a ``@contextmanager``'s, whose ``finally`` and code after ``yield`` run there) must
# see the exception the native instruction raised, and may swallow it, after which the code after the ``with``
# block runs: before, the transformed code let it pass, and the exit never ran (a ``finally`` skipped; fuzz round
# 12).  So a break inside such a block runs nothing natively: the resume function starts at the breaking
# instruction, with the exit on its stack and the original exception table, and runs eagerly from there, as after
# a break inside a try block ([Note: a break inside a try block]; upstream refuses a break under a context manager
# it cannot re-enter and runs the whole frame eagerly).
def inside_user_with_block(tx, inst) -> bool:
    """Is ``inst`` inside a ``with`` block whose exit is not one of ours (see the Note above)?"""
    return any(k < len(tx.stack) and not is_our_exit(tx.stack[k])
               for k in with_exit_positions(tx.output.f_code, inst.offset))


def is_our_exit(v) -> bool:
    """The exit of a region the translator understands: traced (``WithExitFunctionVariable``), or, in a resume
    function, the exit the transformed code handed on (a ``GradModeExit`` on its stack: fuzz round 12 found a
    native call that raised there leave grad mode off)."""
    from .resume_execution import AutocastExit, GradModeExit, RecordFunctionExit
    from .variables import WithExitFunctionVariable
    return isinstance(v, WithExitFunctionVariable) or \
        isinstance(getattr(v, "value", None), (GradModeExit, AutocastExit, RecordFunctionExit))
