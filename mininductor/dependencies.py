"""Run an ``inner_fn`` with a recording ``ops`` handler to learn what it reads (mirrors
``torch/_inductor/dependencies.py``).

    >>> rw = extract_read_writes(pointwise)          # Pointwise computing sin(arg0_1[i0] + 1)
    >>> rw.reads
    [MemoryDep('arg0_1', i0)]

The scheduler uses these reads to order and fuse nodes, codegen uses the index expressions to merge loop dims,
and ``format_inner_fn`` prints a body for ``ir_pre_fusion.txt``.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import sympy

from .indexing import sym, texpr
from .virtualized import V


@dataclasses.dataclass(frozen=True)
class MemoryDep:
    """Buffer ``name`` read (or written) at ``index`` (a sympy expression over the node's loop vars)."""

    name: str
    index: Any

    def __str__(self) -> str:
        return f"MemoryDep('{self.name}', {texpr(self.index)})"


@dataclasses.dataclass
class ReadWrites:
    reads: list
    index_exprs: list
    op_count: int
    op_names: list


class RecordLoadsHandler:
    """An ops handler that computes nothing: it remembers loads, index expressions and how many ops ran."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, Any]] = []
        self.index_exprs: list = []
        self.op_names: list[str] = []
        self.stores: list[tuple[str, Any]] = []
        self._indirect = itertools.count()

    def load(self, name, index):
        self.loads.append((name, index))

    def index_expr(self, expr, dtype):
        self.index_exprs.append(expr)

    def indirect_indexing(self, value, size, check=True, wrap_neg=True):
        return sym(f"indirect{next(self._indirect)}")

    def masked(self, mask, body, other):
        return body()

    def scan(self, dtype, scan_type, value):
        self.op_names.append("scan")

    def reduction(self, dtype, src_dtype, reduction_type, value):
        self.op_names.append("reduction")
        return (None, None, None) if reduction_type == "welford_reduce" else None  # (mean, m2, weight)

    def store(self, name, index, value, mode=None):
        self.stores.append((name, index))

    def store_reduction(self, name, index, value):
        self.stores.append((name, index))

    def __getattr__(self, name):
        def op(*args, **kwargs):
            self.op_names.append(name)
        return op


def extract_read_writes(loops) -> ReadWrites:
    """Run ``loops.inner_fn`` symbolically; index vars are ``i0, i1...`` (and ``r0, r1...`` for reductions)."""
    handler = RecordLoadsHandler()
    index = [sym(f"i{n}") for n in range(len(loops.ranges))]
    with V.set_ops_handler(handler):
        if loops.get_reduction_size():
            rindex = [sym(f"r{n}") for n in range(len(loops.get_reduction_size()))]
            loops.inner_fn(index, rindex)
        else:
            loops.inner_fn(index)
    reads = [MemoryDep(n, i) for n, i in handler.loads]
    return ReadWrites(reads, handler.index_exprs, len(handler.op_names) + len(reads), handler.op_names)


class _FormatHandler:
    """Prints every op as ``ops.name(args)``, naming intermediate values ``tmp0, tmp1...``."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._n = itertools.count()

    def _emit(self, text: str) -> str:
        name = f"tmp{next(self._n)}"
        self.lines.append(f"{name} = {text}")
        return name

    def _fmt(self, a) -> str:
        if isinstance(a, sympy.Basic):
            return texpr(a)
        if isinstance(a, str):
            return a
        return str(a).replace("torch.", "")

    def load(self, name, index):
        return self._emit(f"ops.load('{name}', {texpr(index)})")

    def indirect_indexing(self, value, size, check=True, wrap_neg=True):
        return sym(f"({value})")

    def masked(self, mask, body, other):
        value = body()
        return self._emit(f"ops.masked({mask}, {value}, {other})")

    def reduction(self, dtype, src_dtype, reduction_type, value):
        args = f"{self._fmt(dtype)}, {self._fmt(src_dtype)}, '{reduction_type}', {value}"
        text = self._emit(f"ops.reduction({args})")
        return tuple(f"{text}[{k}]" for k in range(3)) if reduction_type == "welford_reduce" else text

    def __getattr__(self, name):
        def op(*args, **kwargs):
            return self._emit(f"ops.{name}({', '.join(self._fmt(a) for a in args)})")
        return op


def format_inner_fn(loops) -> str:
    handler = _FormatHandler()
    index = [sym(f"i{n}") for n in range(len(loops.ranges))]
    with V.set_ops_handler(handler):
        if loops.get_reduction_size():
            rindex = [sym(f"r{n}") for n in range(len(loops.get_reduction_size()))]
            out = loops.inner_fn(index, rindex)
        else:
            out = loops.inner_fn(index)
    return "\n        ".join(["", *handler.lines, f"return {out}"])
