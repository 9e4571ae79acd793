"""Graph breaks inside 3.12 inlined comprehensions: the whole comprehension runs natively, then a resume function.

In:  a code object (and, at a break, the translator).  Out: the comprehensions inlined into it (PEP 709) with the
bytecode range each one spans; at a break inside one, the instructions that run it natively in the transformed code.

[Note: a break inside an inlined comprehension]  On 3.11 a comprehension is a frame of its own: a break inside it
breaks the outer frame at the comprehension's ``CALL``, the comprehension runs natively and the outer frame resumes
after it.  On 3.12 its bytecode sits in the outer frame, between states a resume function cannot re-create
(``LOAD_FAST_AND_CLEAR`` saved the outer values of its variables on the stack, an exception-table handler restores
them).  So, like upstream (``_handle_comprehension_graph_break`` in ``symbolic_convert.py``), the *whole*
comprehension is the breaking unit: the translation restarts with its break at the comprehension's ``GET_ITER``;
the transformed code calls the graph so far, rebuilds the stack (the iterable on top), copies the comprehension's
own bytecode to run it natively, and returns a ``Continuation`` to a resume function that starts after it -- with
the result on the stack, or in the local the comprehension stored it into.  Upstream wraps the range in a function
of its own; here it runs in the transformed frame itself, like a native stretch ([Note: native stretch]).

    r = [print("hi") or v.cos() for v in y]      LOAD_FAST y
                                                 GET_ITER                   <- start: the break is moved here
                                                 LOAD_FAST_AND_CLEAR v      (the outer v, saved on the stack)
                                                 SWAP 2; BUILD_LIST 0; SWAP 2
                                                 FOR_ITER ... END_FOR       (the loop: any break in it maps here)
                                                 STORE_FAST r; STORE_FAST v (the result; the outer v restored)
                                                 ...                        <- end: the resume function starts here

The native range reads the frame's real local slots, which the traced code never wrote: each local it reads is
first written there from the break's value (or cleared, when unbound in the traced code, so ``LOAD_FAST_CHECK``
raises as in eager); a local it assigns (a walrus target, the result) is handed on from its real slot.  The
comprehension's own exception handler only restores its variables on the way out of a frame that has no other
handler (a break in a ``try`` block is refused), so it is not copied.
"""
from __future__ import annotations

import dataclasses
import dis
import functools
import types

from bytecode import Instr, Label, TryBegin, TryEnd

from . import bytecode_transformation as bt
from .bytecode_analysis import real_instructions
from .exc import unimplemented
from .resume_execution import abstract_instructions

_BUILDS = ("BUILD_LIST", "BUILD_SET", "BUILD_MAP")
_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR")
# Instructions after the comprehension's END_FOR that restore its variables (and may store or drop the result:
# CPython folds ``SWAP 2; STORE_FAST v; STORE_FAST r`` into ``STORE_FAST r; STORE_FAST v``).
_EPILOGUE = ("SWAP", "STORE_FAST", "POP_TOP")
# Never inside a comprehension's range; seen there, the pattern is not one we know: no unit.
_NOT_IN_RANGE = {"RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "MAKE_CELL", "DELETE_FAST", "SEND",
                 "RETURN_GENERATOR", "LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST"}


@dataclasses.dataclass(frozen=True)
class InlinedComprehension:
    """One inlined comprehension: the offsets ``[start, end)`` it spans and the locals it touches."""

    start: int  # its GET_ITER (the iterable below it is evaluated before)
    end: int  # the first instruction after the epilogue that restores its variables
    reads: frozenset[str]  # locals it loads (its own variables' outer values included)
    unchecked_reads: frozenset[str]  # those it loads with LOAD_FAST (the compiler proved them bound)
    restored: frozenset[str]  # its variables (and those of comprehensions nested in it): saved, then restored
    assigned_in_loop: frozenset[str]  # outer locals assigned in its loop (walrus targets): maybe not at all
    result_stores: frozenset[str]  # the local its result is stored into by the epilogue, if any
    result_on_stack: bool  # the result is left on the stack at ``end`` (an expression goes on with it)


@functools.lru_cache(maxsize=1024)
def inlined_comprehensions(code: types.CodeType) -> tuple[InlinedComprehension, ...]:
    """Every comprehension inlined into ``code`` (nested ones too), in the order they start; none before 3.12."""
    if not bt.PY312:
        return ()
    instrs, index = real_instructions(code)
    found = []
    for k, inst in enumerate(instrs):
        if inst.opname == "GET_ITER":
            comp = _comprehension_at(instrs, index, k)
            if comp is not None:
                found.append(comp)
    return tuple(found)


def enclosing_comprehension(code: types.CodeType, offset: int | None) -> InlinedComprehension | None:
    """The outermost inlined comprehension whose range holds ``offset`` (its GET_ITER included)."""
    if offset is None:
        return None
    return next((c for c in inlined_comprehensions(code) if c.start <= offset < c.end), None)


def comprehension_starting_at(code: types.CodeType, offset: int) -> InlinedComprehension | None:
    return next((c for c in inlined_comprehensions(code) if c.start == offset), None)


def _comprehension_at(instrs: list[dis.Instruction], index: dict[int, int], k: int) -> InlinedComprehension | None:
    """The comprehension whose GET_ITER is ``instrs[k]``, if the bytecode after it is one we know:
    ``GET_ITER; LOAD_FAST_AND_CLEAR v1..vn; SWAP n+1 (n > 0); BUILD_LIST/SET/MAP 0; SWAP 2; FOR_ITER``."""
    j = k + 1
    saved = []
    while j < len(instrs) and instrs[j].opname == "LOAD_FAST_AND_CLEAR":
        saved.append(instrs[j].argval)
        j += 1
    if saved:
        if not _is(instrs, j, "SWAP", len(saved) + 1):
            return None
        j += 1
    if not (j + 2 < len(instrs) and instrs[j].opname in _BUILDS and instrs[j].arg == 0 and
            _is(instrs, j + 1, "SWAP", 2) and instrs[j + 2].opname == "FOR_ITER"):
        return None
    end_for = index.get(instrs[j + 2].argval)
    if end_for is None or instrs[end_for].opname != "END_FOR":
        return None
    # the stack above the iterable's slot after END_FOR: the saved values (as SWAP n+1 left them), the result
    stack: list = [saved[-1], *saved[:-1]] if saved else []
    stack.append(None)  # the result
    result_stores, result_on_stack = set(), True
    e = end_for + 1
    while any(v is not None for v in stack):
        if e >= len(instrs) or instrs[e].opname not in _EPILOGUE:
            return None
        inst = instrs[e]
        if inst.opname == "SWAP":
            if inst.arg > len(stack):
                return None
            stack[-1], stack[-inst.arg] = stack[-inst.arg], stack[-1]
        elif not stack:
            return None
        else:
            top = stack.pop()
            if inst.opname == "STORE_FAST" and top is None:
                result_stores.add(inst.argval)
                result_on_stack = False
            elif inst.opname == "POP_TOP" and top is None:
                result_on_stack = False
            elif inst.opname != "STORE_FAST" or inst.argval != top:
                return None
        e += 1
    if e >= len(instrs):
        return None
    body = instrs[k:e]
    for inst in body:  # every jump stays inside; nothing we do not know of
        if inst.opname in _NOT_IN_RANGE:
            return None
        if inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs:
            target = index.get(inst.argval)
            if target is None or not k < target < e:
                return None
    reads = {i.argval for i in body if i.opname in _LOADS}
    restored = {i.argval for i in body if i.opname == "LOAD_FAST_AND_CLEAR"}
    assigned = {i.argval for i in instrs[k:end_for] if i.opname == "STORE_FAST"} - restored
    unchecked = {i.argval for i in body if i.opname == "LOAD_FAST"}
    return InlinedComprehension(instrs[k].offset, _first_offset(index, e), frozenset(reads), frozenset(unchecked),
                                frozenset(restored), frozenset(assigned), frozenset(result_stores), result_on_stack)


def _is(instrs, j: int, opname: str, arg: int) -> bool:
    return j < len(instrs) and instrs[j].opname == opname and instrs[j].arg == arg


def _first_offset(index: dict[int, int], k: int) -> int:
    """The offset of instruction ``k``, or of its EXTENDED_ARG prefix (where a jump to it lands)."""
    return min(offset for offset, j in index.items() if j == k)


def locals_handed_on(comp: InlinedComprehension, live: set[str], live_before: set[str],
                     live_after: set[str]) -> set[str]:
    """The locals the comprehension assigns that the resume function reads: taken from their real slots after it
    ran.  ``live``: the locals the break hands on (bound, and written to their slots before it runs);
    ``live_before``/``live_after``: the locals that may be read from its start / its end on.

    An empty slot must never be read by ``LOAD_FAST`` (3.12 does not check: a crash).  So a break is refused (the
    frame runs eagerly) where (1) a walrus target the traced code had not bound is read afterwards: it is bound only
    if the loop ran at least once; (2) the comprehension reads, unchecked, a local the traced code has not bound (the
    compiler proved it bound: a translator that lost it must not crash the process)."""
    for name in sorted((comp.unchecked_reads - comp.restored) & live_before - live):
        unimplemented(f"a graph break inside a comprehension that reads {name!r}, which the traced code has not bound",
                      "the frame runs eagerly")
    for name in sorted(comp.assigned_in_loop & live_after):
        if name not in live and name not in comp.result_stores:
            unimplemented(f"a graph break inside a comprehension that may assign {name!r} (`:=`), unbound before it",
                          f"the frame runs eagerly; assign {name!r} before the comprehension")
    return (comp.assigned_in_loop | comp.result_stores) & live_after


def emit_comprehension(tx, cg, comp: InlinedComprehension, live: list[str], handed_on: set[str]) -> None:
    """Run the comprehension natively: its locals into their real slots, its bytecode, and ``___live_`` copies of
    the locals it assigned (``handed_on``).  The iterable is on top of the stack; the result is left as ``comp``
    says."""
    for name in sorted(comp.reads | comp.assigned_in_loop):
        if name in live:
            cg.load_local(f"___live_{name}")
            cg.store_local(name)
        elif name in comp.reads:  # unbound in the traced code: empty the slot (an argument `del`eted is not)
            # LOAD_FAST_AND_CLEAR pushes NULL for an empty slot: only a store may take it (POP_TOP would crash)
            cg.append(Instr("LOAD_FAST_AND_CLEAR", name), Instr("STORE_FAST", "___cleared"))
    cg.append(*copy_range(tx.output.f_code, comp.start, comp.end))
    for name in sorted(handed_on):
        cg.load_local(name)
        cg.store_local(f"___live_{name}")


def copy_range(code: types.CodeType, start: int, end: int) -> list:
    """The instructions of ``code`` in ``[start, end)`` as new objects, their jumps on new labels, without the
    exception-table entries (see the module note)."""
    bc, by_offset = abstract_instructions(code)
    items = list(bc)
    first = next(k for k, x in enumerate(items) if x is by_offset[start])
    last = next(k for k, x in enumerate(items) if x is by_offset[end])
    labels = {id(x): Label() for x in items[first:last] if isinstance(x, Label)}
    out = []
    for x in items[first:last]:
        if isinstance(x, Label):
            out.append(labels[id(x)])
        elif isinstance(x, Instr):
            arg = x.arg
            if isinstance(arg, Label):
                arg = labels[id(arg)]  # a jump out of the range was ruled out by _comprehension_at
            out.append(Instr(x.name, arg, location=x.location))
        else:  # the comprehension's own try block is left out (see the module note)
            assert isinstance(x, (TryBegin, TryEnd)), f"unexpected item in a comprehension's bytecode: {x!r}"
    return out
