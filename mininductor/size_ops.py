"""Size arithmetic of a symbolic-size ATen graph: what ``GraphLowering`` computes when a node works on sizes.

A graph traced with symbolic sizes (dynamic shapes, chapter 10) computes sizes as nodes: ``sym_size(x, 0)`` reads
``s77`` off an input, ``mul(s77, 16)``, ``floordiv(s77, 2)``, ``sym_max(s77 // 2, 1)``.  Each becomes a sympy
expression over the size symbols, which the kernels take as int arguments and the wrapper evaluates
(``call`` reads every symbol from an input first).  ``SIZE_OPS`` maps each FX target to the function that
builds its expression; anything else on a size (a comparison, an integer power) is refused, and the symbolic
compile falls back to one static compile per shape (specialize.py).  A float result (``1.0 / s77``) is the
ShapeEnv's own expression ([Note: float sizes] in indexing.py).  Upstream evaluates these nodes in
``GraphLowering.call_function`` too (``torch/_inductor/graph.py``), through its ``SizeVarAllocator``.
"""
from __future__ import annotations

import operator

import sympy
import torch

from .indexing import (
    FLOAT_SIZE_FUNCTIONS,
    FloorDiv,
    ModularIndexing,
    as_size,
    decide_min_max,
    statically_true,
    sym_max,
    sym_min,
)
from .virtualized import V


def _sym_size(x, dim):
    return x.get_size()[dim]


def _sym_stride(x, dim):
    """A stride as traced: ``split``/``chunk`` decompose to ``as_strided`` views whose strides read it off their
    input, and that input is laid out as eager lays it ([Note: as_strided reads eager's layout])."""
    return as_size(V.graph.current_node.meta["val"])


def _sym_float(x):
    """Kept as the integer expression: a pointwise lowering that meets it converts it (``ops.index_expr``)."""
    if isinstance(x, (sympy.Basic, int)):
        return x
    raise NotImplementedError(f"sym_float of {x!r}")


def float_size(val):
    """A ``SymFloat`` computed from sizes (``1.0 / x.shape[0]``): the ShapeEnv's own expression for it, over the
    same symbols as our sizes, for a kernel to compute in float64 ([Note: float sizes] in indexing.py).  Only
    ``+ - *``, ``/``, int -> float conversions and the ``min``/``max`` of sizes (the length of a diagonal, whose
    ``var`` divides by it) are printed; anything else is refused."""
    expr = decide_min_max(val.node.expr)  # ``max(1, n // 2)`` is ``n // 2``: a size symbol is at least 2
    if expr.is_number:
        return float(expr)
    allowed = (sympy.Symbol, sympy.Number, sympy.Add, sympy.Mul, sympy.Pow)
    for e in sympy.preorder_traversal(expr):
        name = type(e).__name__
        if not (isinstance(e, allowed) or name in FLOAT_SIZE_FUNCTIONS or name == "FloorDiv" or
                name in ("Min", "Max") and e.is_integer) or \
                isinstance(e, sympy.Pow) and not (e.exp.is_Integer and e.exp > 0):
            raise NotImplementedError(f"symbolic compile: the float size {expr} ({name})")
    return expr


def _size_mod(a, b):
    """``a % b`` of sizes (``roll``'s decomposition takes its shift modulo the size): ``ModularIndexing``, printed
    ``%``, which is Python's floor modulo in the wrapper but C's remainder in a kernel -- the same only when
    ``a >= 0`` and ``b > 0``; else refused."""
    if not (statically_true(sympy.Ge(a, 0)) and statically_true(sympy.Gt(b, 0))):
        raise NotImplementedError(f"symbolic compile: {a} % {b} of a size that may be negative")
    return as_size(ModularIndexing(a, 1, b))


def _true_div_or_pow(*args):
    """``/`` and ``**`` of sizes: float results are taken from the trace (``call_function``); an int ``s0 ** 2``
    is refused."""
    raise NotImplementedError("symbolic compile: an integer power of a size")


# What the symbolic ATen graph computes on sizes; anything else on a size (comparisons...) is refused, so the
# symbolic compile falls back to one static compile per shape.  A float result (``1.0 / s77``) is the traced
# expression ([Note: float sizes]).  ``max(x.shape[0], 1)`` traces as ``torch.sym_max``: the larger one where the
# ShapeEnv decides it (a size symbol is at least 2), else ``Max``.
SIZE_OPS = {
    torch.ops.aten.sym_size.int: _sym_size,
    torch.ops.aten.sym_numel.default: lambda x: x.get_numel(),
    torch.ops.aten.sym_stride.int: _sym_stride,
    torch.sym_float: _sym_float,
    operator.mul: operator.mul,
    operator.add: operator.add,
    operator.sub: operator.sub,
    operator.neg: operator.neg,  # pad's backward pads by the negated amounts (an int input's ``-s86``)
    operator.floordiv: lambda a, b: as_size(FloorDiv(a, b)),  # sizes are positive: floor == FloorDiv
    operator.mod: _size_mod,
    operator.truediv: _true_div_or_pow,
    operator.pow: _true_div_or_pow,
    torch.sym_max: sym_max,
    torch.sym_min: sym_min,
}
