"""Liveness of local variables: which locals a resume function must receive.

In:  a code object and an offset.  Out: the names of the locals that some path from that offset reads before it
writes them.  At a graph break only those are handed to the resume function; a local that is dead there (a loop
index the body never reads, a temporary) is neither passed nor guarded, so it cannot cause a recompile.
Mirrors ``livevars_analysis`` in ``torch/_dynamo/bytecode_analysis.py``.

    def f(x, n):
        for i in range(n):       # at the break, `i` is dead: it is written by FOR_ITER before any read
            x = x + 1
            graph_break()        # live here: x (read next iteration and by `return x`), n is not (range made)
        return x

The analysis is the textbook backward one over the control-flow graph, written as a search: from the offset,
follow jumps, fall-throughs and exception edges; a path stops at a write of the name and succeeds at a read.
Soundness is what matters (a live local we dropped would be an unbound read, which 3.12 does not check: see
PITFALLS.md), so every exception handler covering an instruction is a successor of it.
"""
from __future__ import annotations

import dis
import functools
import inspect
import types

READS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST", "LOAD_FAST_LOAD_FAST"}
WRITES = {"STORE_FAST", "STORE_FAST_STORE_FAST"}
TERMINAL = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}
UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_ABSOLUTE"}


def real_instructions(code: types.CodeType) -> tuple[list[dis.Instruction], dict[int, int]]:
    """``code``'s instructions without ``EXTENDED_ARG`` prefixes, and offset -> index.

    [Note: offsets of EXTENDED_ARG]  An instruction whose argument needs more than a byte (``UNPACK_EX 256`` for
    ``*d, e = ...``, a far jump) starts at its ``EXTENDED_ARG`` prefix: jumps target the prefix, and a graph break
    just before such an instruction continues at the prefix's offset.  So the prefix's offset maps to the index of
    the instruction it extends, like the instruction's own offset.
    """
    instrs: list[dis.Instruction] = []
    index: dict[int, int] = {}
    prefixes: list[int] = []
    for inst in dis.get_instructions(code):
        if inst.opname == "EXTENDED_ARG":
            prefixes.append(inst.offset)
            continue
        for offset in prefixes + [inst.offset]:
            index[offset] = len(instrs)
        prefixes.clear()
        instrs.append(inst)
    return instrs, index


@functools.lru_cache(maxsize=256)
def _flow(code: types.CodeType) -> tuple[list[dis.Instruction], dict[int, int], list[list[int]]]:
    """Instructions, offset -> index, and each instruction's successors (as indices)."""
    instrs, index = real_instructions(code)
    handlers = dis.Bytecode(code).exception_entries
    succ: list[list[int]] = []
    for k, inst in enumerate(instrs):
        out = []
        if inst.opname not in TERMINAL and inst.opname not in UNCONDITIONAL and k + 1 < len(instrs):
            out.append(k + 1)
        if inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs:
            target = _jump_target(instrs, index, k)
            if target is not None:
                out.append(target)
        out += [index[h.target] for h in handlers if h.start <= inst.offset < h.end and h.target in index]
        succ.append(out)
    return instrs, index, succ


def _jump_target(instrs, index, k) -> int | None:
    inst = instrs[k]
    target = index.get(inst.argval)
    if target is not None and inst.opname == "FOR_ITER" and instrs[target].opname == "END_FOR":
        target += 1  # 3.12: an exhausted FOR_ITER skips the END_FOR it names
    return target


def _names(inst: dis.Instruction) -> tuple[str, ...]:
    """The local names an instruction touches (3.13's superinstructions name two)."""
    return inst.argval if isinstance(inst.argval, tuple) else (inst.argval,)


def livevars_analysis(code: types.CodeType, offset: int) -> set[str]:
    """Locals that may be read, before being written, on some path starting at ``offset`` (a new set each call)."""
    return set(_livevars(code, offset))


@functools.lru_cache(maxsize=1024)
def _livevars(code: types.CodeType, offset: int) -> frozenset[str]:
    """Once per (code object, offset): it depends on the bytecode alone, and a loop body's resume function breaks
    at the same offsets on every recompile."""
    instrs, index, succ = _flow(code)
    live: set[str] = set()
    for name in code.co_varnames:
        if _may_read_before_write(instrs, succ, index[offset], name):
            live.add(name)
    if uses_zero_arg_super(code) and not super_reads_a_cell(code):  # super() reads the first argument unnamed
        live.add(code.co_varnames[0])
    return frozenset(live)


def uses_zero_arg_super(code: types.CodeType) -> bool:
    """[Note: zero-argument super in resume functions]  ``super()`` with no arguments reads the frame's
    ``__class__`` cell and its *first local* (CPython's ``super_init_without_args``), whatever its name.  A resume
    function's parameters are the saved stack, then the live locals: without care its first local is a stack value
    and ``super()`` there looks up the wrong object, or the method's ``self`` is not passed at all (no instruction
    after the break names it).  So in a method that may call ``super()``, the first argument counts as live at
    every break and is the resume function's first parameter (``resume_execution.resume_argnames``)."""
    return code.co_argcount > 0 and "__class__" in code.co_freevars and "super" in code.co_names


def super_reads_a_cell(code: types.CodeType) -> bool:
    """A method calling ``super()`` whose first argument is a cell (a closure captures ``self``): in a resume
    function that cell is a free variable, never the first local ``super()`` reads, so such a frame is not split."""
    return uses_zero_arg_super(code) and code.co_varnames[0] in code.co_cellvars


def _may_read_before_write(instrs, succ, start: int, name: str) -> bool:
    seen, work = set(), [start]
    while work:
        k = work.pop()
        if k in seen:
            continue
        seen.add(k)
        inst = instrs[k]
        if inst.opname in READS and name in _names(inst):
            return True
        if inst.opname in WRITES and name in _names(inst):
            continue
        work.extend(succ[k])
    return False


@functools.lru_cache(maxsize=1024)
def cell_reads_maybe_unbound(code: types.CodeType, offset: int) -> frozenset[int]:
    """Offsets of the ``LOAD_DEREF``/``DELETE_DEREF`` of ``code``'s own cells that a path from ``offset`` may reach
    with the cell empty, taking every cell as possibly empty at ``offset`` ([Note: unbound cells in resume
    functions] in resume_execution.py).  A path is safe after a ``STORE_DEREF`` of the cell, until a
    ``DELETE_DEREF`` empties it again."""
    instrs, index, succ = _flow(code)
    found: set[int] = set()
    for name in code.co_cellvars:
        seen: set[tuple[int, bool]] = set()
        work = [(index[offset], True)]
        while work:
            k, maybe_empty = work.pop()
            if (k, maybe_empty) in seen:
                continue
            seen.add((k, maybe_empty))
            inst = instrs[k]
            if inst.opname in ("LOAD_DEREF", "DELETE_DEREF") and inst.argval == name:
                if maybe_empty:
                    found.add(inst.offset)
                maybe_empty = maybe_empty or inst.opname == "DELETE_DEREF"
            elif inst.opname == "STORE_DEREF" and inst.argval == name:
                maybe_empty = False
            work.extend((j, maybe_empty) for j in succ[k])
    return frozenset(found)


@functools.lru_cache(maxsize=1024)
def closing_runs_code(code: types.CodeType) -> bool:
    """Does closing a suspended generator of ``code`` run user code ([Note: drops Python must see] in exc.py)?

    Any exception handler in its body does (``finally``, ``with``, ``except``), except the one 3.12 wraps every
    generator body in (it turns a ``StopIteration`` into ``RuntimeError``); so does ``yield from``, which closes
    the generator it delegates to."""
    if not code.co_flags & (inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR):
        return False
    instrs = {i.offset: i for i in dis.get_instructions(code)}
    for entry in dis._parse_exception_table(code):
        target = instrs.get(entry.target)
        if target is None or not (target.opname == "CALL_INTRINSIC_1" and target.arg == 3):
            return True
    return any(i.opname == "SEND" for i in instrs.values())
