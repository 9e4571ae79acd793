"""Decoding bytecode with ``dis`` and assembling new code objects with the ``bytecode`` package.

In:  a code object.  Out: a list of ``Instruction`` (what the translator steps over), and helpers that build
version-correct instruction sequences for generated code (``create_call``, ``create_load_global``, ...).
Every instruction sequence that differs between Python versions lives here, so the rest of minidynamo reads the same
on 3.11 and 3.12.  Mirrors ``torch/_dynamo/bytecode_transformation.py``.

    >>> [i.opname for i in decode(lambda x: x + 1)]        # 3.11 and 3.12
    ['RESUME', 'LOAD_FAST', 'LOAD_CONST', 'BINARY_OP', 'RETURN_VALUE']

[Note: generated code]  Generated code objects start with the original prologue (``COPY_FREE_VARS``,
``MAKE_CELL``), then ``RESUME 0`` (CPython 3.11+ expects every code object to begin that way), then the body.  We
assemble with ``bytecode`` using ``compute_exception_stack_depths=False`` (see PITFALLS.md).
"""
from __future__ import annotations

import dataclasses
import dis
import functools
import sys
import types
from typing import Any

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label  # noqa: F401  (re-exported for codegen)

PY311 = sys.version_info[:2] == (3, 11)
PY312 = sys.version_info >= (3, 12)


@dataclasses.dataclass
class Instruction:
    """One decoded instruction: what ``dis`` gives, plus the source line it belongs to."""

    opname: str
    arg: int | None
    argval: Any
    offset: int
    lineno: int | None
    argrepr: str = ""

    def __repr__(self) -> str:
        return f"{self.offset:>4} {self.opname:<24} {self.argrepr}"


def decode(fn_or_code) -> list[Instruction]:
    """The instructions of a function or code object (decoded once per code object: a loop's resume function is
    translated again for every iteration it recompiles for)."""
    return list(_decode(getattr(fn_or_code, "__code__", fn_or_code)))


@functools.lru_cache(maxsize=4096)
def _decode(code: types.CodeType) -> tuple[Instruction, ...]:
    out = []
    for i in dis.get_instructions(code):
        lineno = i.positions.lineno if i.positions else None
        out.append(Instruction(i.opname, i.arg, i.argval, i.offset, lineno, i.argrepr))
    return tuple(out)


def offset_index(instructions: list[Instruction]) -> dict[int, int]:
    return {inst.offset: k for k, inst in enumerate(instructions)}


# --------------------------------------------------------------------------------------------------------------
# Version-specific instruction sequences for generated code.
# --------------------------------------------------------------------------------------------------------------
def create_call(nargs: int) -> list[Instr]:
    """Call the callable below ``nargs`` arguments (a NULL or self slot sits below the callable)."""
    if PY311:
        return [Instr("PRECALL", nargs), Instr("CALL", nargs)]
    return [Instr("CALL", nargs)]


def create_load_global(name: str, push_null: bool) -> Instr:
    return Instr("LOAD_GLOBAL", (push_null, name))


def create_load_attr(name: str) -> Instr:
    return Instr("LOAD_ATTR", (False, name)) if PY312 else Instr("LOAD_ATTR", name)


def create_load_method(name: str) -> Instr:
    return Instr("LOAD_ATTR", (True, name)) if PY312 else Instr("LOAD_METHOD", name)


def create_load_deref(name: str, code: types.CodeType) -> Instr:
    return Instr("LOAD_DEREF", CellVar(name) if name in code.co_cellvars else FreeVar(name))


def create_load_closure(name: str, code: types.CodeType) -> Instr:
    """Push the cell object itself (3.11+: ``LOAD_CLOSURE`` indexes the same slots as ``LOAD_DEREF``)."""
    return Instr("LOAD_CLOSURE", CellVar(name) if name in code.co_cellvars else FreeVar(name))


def create_store_deref(name: str, code: types.CodeType) -> Instr:
    return Instr("STORE_DEREF", CellVar(name) if name in code.co_cellvars else FreeVar(name))


def prologue(code: types.CodeType) -> list[Instr]:
    """The instructions before RESUME that set up cells and free variables (kept in generated code)."""
    return [Instr(name, arg) for name, arg in _prologue_and_signature(code, code.co_filename)[0]]


_SIGNATURE_ATTRS = ("argcount", "posonlyargcount", "kwonlyargcount", "argnames", "cellvars", "freevars",
                    "filename", "first_lineno", "flags", "docstring")


@functools.lru_cache(maxsize=1024)
def _prologue_and_signature(code: types.CodeType, _filename: str) -> tuple[tuple, dict]:
    """(prologue as (name, arg) pairs, the ``Bytecode`` attributes of ``code``'s signature), once per code object:
    ``Bytecode.from_code`` is slow, and a resume function in a loop is assembled again for every recompile.
    (Equal code objects from two files compare equal: the file name is part of the key.)"""
    src = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    pairs = []
    for ins in src:
        if isinstance(ins, Instr) and ins.name == "RESUME":
            break
        if isinstance(ins, Instr):
            pairs.append((ins.name, ins.arg))
    return tuple(pairs), {attr: getattr(src, attr) for attr in _SIGNATURE_ATTRS}


def make_code(orig: types.CodeType, body: list, name: str | None = None) -> types.CodeType:
    """Assemble ``prologue(orig) + RESUME + body`` into a code object with ``orig``'s signature."""
    bc = Bytecode([*prologue(orig), Instr("RESUME", 0), *body])
    for attr, value in _prologue_and_signature(orig, orig.co_filename)[1].items():
        setattr(bc, attr, list(value) if isinstance(value, list) else value)
    bc.name = name or orig.co_name
    bc.qualname = name or orig.co_qualname
    return bc.to_code(compute_exception_stack_depths=False)


def format_code(code: types.CodeType) -> str:
    """A ``dis`` listing as a string (what ``show_transformed`` prints)."""
    import io

    buf = io.StringIO()
    dis.dis(code, file=buf, depth=0)
    return buf.getvalue()
