"""What a frame's exception table says about an offset: the handlers around it, whether it lies in a ``try`` block
or a 3.12 inlined comprehension, and where the outermost try statement around it starts.

In:  a code object and a bytecode offset.  Out: plain answers (a list of handler kinds, a bool, an offset).
``break_points.py`` asks them before it moves a break or refuses one; no upstream twin of its own (upstream reads
the exception table inside ``symbolic_convert.py``).
"""
from __future__ import annotations

import dis
import functools
import types

from . import bytecode_transformation as bt


# [Note: a break inside a try block]  An exception raised by the code after a break inside a ``try`` block must
# reach the user's handler, and the handler must see what eager gives (``sys.exc_info()``, a bare ``raise``, the
# traceback): native code in the transformed code runs outside every handler.  So, as upstream does (it compiles
# the graph up to its last checkpoint outside the block and runs the rest of the frame's bytecode), the break moves
# to the start of the outermost try statement around it: the graph of the code before the ``try`` is compiled,
# nothing runs natively in the transformed code, and the resume function that starts at the ``try`` runs *eagerly*
# (put in the context's ``skipped`` when made): the try statement and the rest of the frame run as plain Python,
# the resume function's exception table being the original's.  (Translated, it would break at its own entry
# again.)  A break in an ``except`` block of a try statement nested in another's moves the same way; one in an
# ``except`` block of an outermost ``try`` stays refused ([Note: no graph break in an except block]).
@functools.lru_cache(maxsize=4096)
def try_statement_start(code: types.CodeType, offset: int) -> int | None:
    """The first offset of the body of the outermost ``try`` statement (``with`` blocks and 3.12 comprehensions
    aside) around ``offset``, or None.

    The exception table does not nest: an offset is covered by its innermost handler only, whose own code is
    covered by the next one out, and so on -- that chain is followed up.  A try statement starts at the first
    offset its handler covers, or that a handler nested in it covers (3.12 covers the body of a ``try/except``
    in a ``try/finally`` by the ``except`` handler alone; that handler's code is covered by the ``finally``'s)."""
    entries = dis.Bytecode(code).exception_entries
    kinds = {e.target: kind for e, kind in zip(entries, handler_kinds(code, entries))}

    def handlers_of(o: int) -> set[int]:
        return {e.target for e in entries if e.start <= o < e.end}

    @functools.cache
    def region_start(target: int) -> int:
        starts = [e.start for e in entries if e.target == target]
        for nested in kinds:  # handlers whose own code this one covers
            if nested != target and target in handlers_of(nested) and nested not in chain_above(target):
                starts.append(region_start(nested))
        return min(starts)

    @functools.cache
    def chain_above(target: int) -> frozenset[int]:
        out, work = set(), list(handlers_of(target))
        while work:
            t = work.pop()
            if t not in out:
                out.add(t)
                work += handlers_of(t)
        return frozenset(out)

    chain = set(handlers_of(offset))
    for target in list(chain):
        chain |= chain_above(target)
    starts = [region_start(t) for t in chain
              if kinds[t][:1] == ["PUSH_EXC_INFO"] and kinds[t][1:2] != ["WITH_EXCEPT_START"]]
    return min(starts, default=None)


def handlers_covering(code: types.CodeType, offset: int) -> list[list[str]]:
    """The first two opnames of each exception handler whose try range covers ``offset`` (what kind it is)."""
    entries = dis.Bytecode(code).exception_entries
    return [kind for e, kind in zip(entries, handler_kinds(code, entries)) if e.start <= offset < e.end and kind]


def handler_kinds(code: types.CodeType, entries: list) -> list[list[str]]:
    """The first two opnames of each entry's handler (empty where its target is not an instruction)."""
    instrs = bt.decode(code)
    index = {i.offset: k for k, i in enumerate(instrs)}
    return [[i.opname for i in instrs[index[e.target]:index[e.target] + 2]] if e.target in index else []
            for e in entries]


def inside_inlined_comprehension(code: types.CodeType, offset: int) -> bool:
    """Is ``offset`` in the body of a 3.12 inlined comprehension (PEP 709)?

    Such a body is covered by an exception-table entry whose handler restores the comprehension variable
    (``SWAP 2; POP_TOP; SWAP 2; STORE_FAST k; RERAISE``).  A resume function cannot start there (the outer values
    of its variables are on the stack): a break inside one is moved to its start (``breaking_offset``), and one
    whose bytecode we do not recognise as a whole (``inlined_comprehension``) is refused: the frame runs eagerly.
    On 3.11 a comprehension is its own frame.
    """
    return bt.PY312 and ["SWAP", "POP_TOP"] in handlers_covering(code, offset)


def with_exit_positions(code: types.CodeType, offset: int) -> list[int]:
    """The stack positions of the ``__exit__`` of each ``with`` block around ``offset``, innermost last.

    A with block's handler (``PUSH_EXC_INFO; WITH_EXCEPT_START``) keeps the stack up to its entry's depth, the
    exit on top of it; the handlers of outer blocks cover that handler's code, and so on out."""
    entries = dis.Bytecode(code).exception_entries
    kinds = handler_kinds(code, entries)
    positions, seen, work = [], set(), [offset]
    while work:
        o = work.pop()
        for e, kind in zip(entries, kinds):
            if e.start <= o < e.end and e.target not in seen:
                seen.add(e.target)
                if kind == ["PUSH_EXC_INFO", "WITH_EXCEPT_START"]:
                    positions.append(e.depth - 1)
                work.append(e.target)
    return sorted(positions)


def inside_try_block(code: types.CodeType, offset: int) -> bool:
    """Is ``offset`` protected by a try/except/finally handler (``with`` blocks and 3.12 comprehensions aside)?"""
    return any(h[:1] == ["PUSH_EXC_INFO"] and h[1:2] != ["WITH_EXCEPT_START"]
               for h in handlers_covering(code, offset))
