"""Break points: where a frame that the translator cannot finish may be split, and where it must not be.

In:  a code object and the offset of the instruction the translator refused (or, at the break itself, the root
translator's stack).  Out: whether a resume function could reproduce what follows -- the offset the break moves to
(``breaking_offset``), yes or no (``can_break_at``) -- or a refusal that runs the whole frame eagerly.

``convert_frame`` asks before it restarts a translation with a break: a refused instruction becomes a break point
only where CPython's state there is something a resume function can be handed (its live locals, its stack, its
cells).  Not inside a generator or coroutine, a frame that reads its own ``locals()``, or one whose cells are made
mid-body; not at an instruction that only moves values between slots (``NOT_BREAKABLE``: a break there has nothing
to run natively); and inside a 3.12 inlined comprehension or a ``try`` block the break moves to the outermost one's
start (``inlined_comprehension.py``; [Note: a break inside a try block] in exception_table.py).  At the break,
``graph_break.compile_and_break`` makes two more refusals, which need the translator's stack: inside an ``except``
block, and at the call that makes a generator whose close runs code.

    >>> can_break_at(f.__code__, 24)       # doctest: +SKIP
    True

Upstream twin: the checks around ``break_graph_if_unsupported`` in ``torch/_dynamo/symbolic_convert.py``
(``self.should_compile_partial_graph()``, the ``generic_jump`` and ``CALL`` handlers).
"""
from __future__ import annotations

import dis
import functools
import inspect
import itertools
import types

from . import bytecode_transformation as bt
from .bytecode_analysis import closing_runs_code, super_reads_a_cell
from .exc import refuse_frame, unimplemented
from .exception_table import inside_inlined_comprehension, inside_try_block, try_statement_start
from .inlined_comprehension import enclosing_comprehension
from .resume_execution import cell_check_offsets
from .variables.builder import LazyVariableTracker

NOT_BREAKABLE = {"STORE_FAST", "DELETE_FAST", "STORE_DEREF", "DELETE_DEREF", "LOAD_FAST", "LOAD_FAST_CHECK",
                 "LOAD_FAST_AND_CLEAR", "LOAD_CLOSURE", "LOAD_DEREF", "MAKE_CELL", "COPY_FREE_VARS", "RESUME",
                 "RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "RETURN_GENERATOR", "KW_NAMES", "PRECALL",
                 "END_FOR", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", "SEND", "RAISE_VARARGS", "RERAISE",
                 "NOP", "CACHE", "EXTENDED_ARG", "PUSH_NULL", "COPY", "SWAP", "POP_TOP", "LOAD_CONST",
                 "STORE_GLOBAL", "FOR_ITER_NOT_OPAQUE"}
JUMPS = {f"POP_JUMP_{d}IF_{c}" for d in ("", "FORWARD_", "BACKWARD_") for c in ("TRUE", "FALSE", "NONE", "NOT_NONE")}


# [Note: no graph break in an except block]  While an ``except`` block (or a ``finally`` block reached by an
# exception) runs, the exception it handles is interpreter state: ``sys.exc_info()``, a bare ``raise`` and
# ``logging.exception`` read it, and ``e.__traceback__``/``__context__`` live on the real exception object.  A resume
# function is called from plain code and its ``e`` is an exception rebuilt from its args: it saw no exception
# (``raise`` gave "RuntimeError: No active exception to reraise"), and no traceback.  So a break there is refused and
# the frame runs eagerly.  Such code is found by the marker ``PUSH_EXC_INFO`` leaves on the stack until
# ``POP_EXCEPT`` (``PreviousExceptionVariable``): exact on 3.11 and 3.12 alike, where the exception table's
# cleanup handlers differ.
def refuse_break_in_except_block(tx) -> None:
    from .variables.misc import PreviousExceptionVariable
    if any(isinstance(v, PreviousExceptionVariable) for v in tx.stack):
        unimplemented("a graph break inside an except block (the exception it handles cannot be handed to a "
                      "resume function)", "the frame runs eagerly; move the code that breaks out of the except block")


def refuse_break_making_a_closable_generator(tx, inst, callee) -> None:
    """A break at the call of a generator function whose close runs code, or at ``iter(obj)`` whose ``__iter__``
    is one: see [Note: drops Python must see] in exc.py."""
    from .variables.functions import BaseUserFunctionVariable
    code = None
    if isinstance(callee, BaseUserFunctionVariable):
        code = callee.get_code()
    elif inst.opname == "GET_ITER" and tx.stack:
        v = tx.stack[-1]  # a lazy input is not realised (guarded): a refusal holds for every call
        try:
            cls = type(v.value) if isinstance(v, LazyVariableTracker) else v.python_type()
        except NotImplementedError:
            cls = None
        code = getattr(inspect.getattr_static(cls, "__iter__", None), "__code__", None)
    if code is not None and closing_runs_code(code):
        refuse_frame(f"a graph break that makes generator {code.co_name}, whose close runs code (a `finally` or "
                     "`with` block) when Python drops it; a resume function would run it later",
                     "the frame runs eagerly; build a list of the items first")


def breaking_offset(code: types.CodeType, offset: int | None) -> int | None:
    """Where a frame that failed at ``offset`` breaks: there; inside a 3.12 inlined comprehension, at the start of
    the outermost one ([Note: a break inside an inlined comprehension]); inside a try block, at the start of the
    outermost try statement ([Note: a break inside a try block])."""
    comp = enclosing_comprehension(code, offset)
    if comp is not None:
        offset = comp.start
    start = try_statement_start(code, offset) if offset is not None else None
    return start if start is not None else offset


def can_break_at(code: types.CodeType, offset: int | None) -> bool:
    if offset is None or code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE) or \
            not cells_movable(code) or reads_frame_locals(code) or super_reads_a_cell(code):
        return False
    if offset in cell_check_offsets(code):  # no original instruction to resume at
        return False
    inst = next(i for i in bt.decode(code) if i.offset == offset)
    if inside_try_block(code, offset):  # only at a try statement's start: [Note: a break inside a try block]
        return try_statement_start(code, offset) == offset
    if inside_inlined_comprehension(code, offset):
        return False  # see inside_inlined_comprehension
    return inst.opname not in NOT_BREAKABLE and (not inst.opname.startswith("JUMP") or inst.opname in JUMPS)


@functools.lru_cache(maxsize=4096)
def reads_frame_locals(code: types.CodeType) -> bool:
    """Does ``code`` call ``locals()``, or ``vars()``/``dir()`` without an argument?

    Split at a graph break, such a frame would run the call natively in a resume function, whose locals are not the
    frame's: the live ones only, plus the generated ``___graph_out``.  So it is never split: run eagerly."""
    instrs = [i for i in bt.decode(code) if i.opname not in ("CACHE", "PRECALL", "PUSH_NULL")]
    for inst, nxt in itertools.pairwise(instrs):
        if inst.opname in ("LOAD_GLOBAL", "LOAD_NAME") and (inst.argval == "locals" or inst.argval in ("vars", "dir")
                                                            and nxt.opname == "CALL" and nxt.arg == 0):
            return True
    return False


def cells_movable(code: types.CodeType) -> bool:
    """Can a resume function take this frame's cells as free variables (see [Note: cells of resume functions])?

    Not when a cell is made mid-body or its slot is used as a plain local: 3.12 inlined comprehensions whose
    variable a lambda captures do ``LOAD_FAST_AND_CLEAR k; MAKE_CELL k`` (a fresh cell per run) and restore the
    outer binding with ``STORE_FAST k``; a free variable cannot be re-made that way.  Such frames run eagerly.
    """
    if not code.co_cellvars:
        return True
    seen_resume = False
    for inst in dis.get_instructions(code):
        if inst.opname == "RESUME":
            seen_resume = True
        elif inst.opname == "MAKE_CELL" and seen_resume:  # noqa: SIM114 - two reasons, two branches
            return False
        elif "FAST" in inst.opname and \
                any(n in code.co_cellvars for n in (inst.argval if isinstance(inst.argval, tuple) else (inst.argval,))):
            return False
    return True
