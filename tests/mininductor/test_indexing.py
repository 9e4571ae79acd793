"""Index math (``mininductor/indexing.py``): FloorDiv/ModularIndexing evaluate like Python, ``simplify_index``
undoes a reshape's split exactly, and ``simplify_loops`` merges only dims that every index walks contiguously --
checked by brute force over every point of small loop nests (property tests with hypothesis); and symbolic sizes
print as valid Python and Triton (divisors, powers, ``Max``)."""
import itertools

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from mininductor.indexing import (
    FloorDiv,
    ModularIndexing,
    contiguous_strides,
    linear_stride,
    simplify_index,
    simplify_loops,
    split_flat,
    sym,
    texpr,
)

sizes_st = st.lists(st.integers(1, 5), min_size=1, max_size=4)


def _points(sizes):
    return itertools.product(*[range(s) for s in sizes])


def test_functions_evaluate_like_python():
    for a, d, m in [(17, 3, 4), (0, 5, 2), (23, 1, 7)]:
        assert FloorDiv(sympy.Integer(a), sympy.Integer(d)) == a // d
        assert ModularIndexing(sympy.Integer(a), sympy.Integer(d), sympy.Integer(m)) == (a // d) % m
    x = sym("x")
    assert FloorDiv(x, 1) == x
    assert texpr(ModularIndexing(x, 4, 8) + 8 * FloorDiv(x, 32)) in ("((x // 4) % 8) + 8*(x // 32)",
                                                                      "8*(x // 32) + ((x // 4) % 8)")


@settings(max_examples=40, deadline=None)
@given(sizes_st)
def test_split_then_contiguous_index_is_the_flat_index(sizes):
    """Reshape's round trip: splitting a flat index over sizes and re-flattening gives the flat index back."""
    flat = sym("f")
    parts = split_flat(flat, sizes)
    expr = simplify_index(sum((p * s for p, s in zip(parts, contiguous_strides(sizes))), sympy.Integer(0)))
    assert expr == flat


@settings(max_examples=40, deadline=None)
@given(sizes_st, st.permutations(range(4)), st.booleans())
def test_simplify_loops_preserves_every_index(sizes, perm, broadcast_last):
    """Merged loops visit the same elements in the same order as the original nest."""
    n = len(sizes)
    perm = [p for p in perm if p < n]
    vars_ = [sym(f"v{i}") for i in range(n)]
    permuted_strides = contiguous_strides([sizes[p] for p in perm])
    strides = [permuted_strides[perm.index(i)] for i in range(n)]
    exprs = [sum((v * s for v, s in zip(vars_, contiguous_strides(sizes))), sympy.Integer(0)),
             sum((v * s for v, s in zip(vars_, strides)), sympy.Integer(0))]
    if broadcast_last:
        exprs.append(vars_[0] * 3)
    new_sizes, reindex, _ = simplify_loops(sizes, exprs, vars_)
    new_vars = [sym(f"n{i}") for i in range(len(new_sizes))]
    merged_exprs = [e.subs(dict(zip(vars_, reindex(new_vars))), simultaneous=True) for e in exprs]
    original = [tuple(int(e.subs(dict(zip(vars_, p)))) for e in exprs) for p in _points(sizes)]
    merged = [tuple(int(e.subs(dict(zip(new_vars, p)))) for e in merged_exprs) for p in _points(new_sizes)]
    assert original == merged


def test_split_over_symbolic_sizes_folds_back_to_the_flat_index():
    """A reshape's split over *symbolic* sizes adds back up too: ``s1*FloorDiv(f, s1) + ModularIndexing(f, 1, s1)``
    is ``f`` (the coefficient ``s1`` was not taken for one, so a symbolic ``o.view(-1)`` was no strided window and
    returned a copy: [Note: outputs that alias outputs] in graph.py); a row further on (``x[1:]``) keeps its
    offset."""
    flat = sym("f")
    s0, s1, s2 = sympy.symbols("s0 s1 s2", positive=True, integer=True)
    for sizes in ([s0, s1], [s0, s1, s2], [3, s1, 4, s2]):
        parts = split_flat(flat, sizes)
        assert simplify_index(sum((p * s for p, s in zip(parts, contiguous_strides(sizes))), sympy.Integer(0))) == flat
    row, col = split_flat(flat, [s0 - 1, s1])
    assert simplify_index(s1 * (row + 1) + col) == flat + s1
    assert linear_stride(simplify_index(s1 * s2 * FloorDiv(flat, s1) + ModularIndexing(flat, 1, s1)), flat) is None


def test_contiguous_nest_merges_to_one_loop_and_transpose_does_not():
    i, j = sym("i"), sym("j")
    assert simplify_loops([4, 8], [8 * i + j], [i, j])[0] == [32]
    assert simplify_loops([4, 8], [8 * i + j, i + 4 * j], [i, j])[0] == [4, 8]
    assert linear_stride(8 * i + j, i) == 8 and linear_stride(FloorDiv(i, 2), i) is None


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 500), st.integers(1, 6), st.integers(1, 6), st.integers(1, 4), st.integers(1, 4))
def test_nested_floordiv_and_mod_rules_are_exact(value, a, m, c, k):
    """The eval-time rewrites of nested FloorDiv/ModularIndexing agree with Python on every value."""
    x = sym("x")
    exprs = [FloorDiv(FloorDiv(x, a), c), FloorDiv(ModularIndexing(x, a, m * c), c),
             ModularIndexing(FloorDiv(x, a), c, m), ModularIndexing(ModularIndexing(x, a, m * c * k), c, m)]
    expected = [value // a // c, ((value // a) % (m * c)) // c, ((value // a) // c) % m,
                (((value // a) % (m * c * k)) // c) % m]
    assert [int(e.subs(x, value)) for e in exprs] == expected


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), st.integers(1, 7), st.integers(1, 7), st.integers(1, 5))
def test_printed_index_evaluates_like_sympy(a, b, c, d, m):
    """The printed Python/Triton text keeps sympy's meaning (``//`` binds tighter than ``+``)."""
    x, y = sym("x"), sym("y")
    exprs = [FloorDiv(x + c * y, d), ModularIndexing(x + c * y, d, m), 3 * FloorDiv(c * x + y, d) + y,
             ModularIndexing(c * x, 1, m) + FloorDiv(ModularIndexing(x + y, d, m * c), c)]
    for e in exprs:
        assert eval(texpr(e), {"x": a, "y": b}) == int(e.subs({x: a, y: b}))


# ---------------------------------------- regressions the op corpora found: printing symbolic sizes
@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_symbolic_divisor_and_power_and_max_print_as_python_and_triton():
    s0, s1 = sympy.symbols("s0 s1", positive=True, integer=True)
    x = sympy.Symbol("xindex", integer=True, nonnegative=True)
    assert texpr(FloorDiv(x, s0 * s1)) == "(xindex // (s0*s1))"  # was ``xindex // s0*s1``: out of bounds
    assert texpr(ModularIndexing(x, s0, s1 + 1)) == "((xindex // s0) % (s1 + 1))"
    assert texpr(s0**2 * x) == "xindex*(s0*s0)"  # the interpreter's scalar tensors have no ``**``
    assert texpr((s0**2 + 1) // 2) == "(((s0*s0) + 1) // 2)"  # sympy's floor(s0**2/2 + 1/2)
    assert texpr(sympy.Max(1, s0 - s1)) == "max(1, s0 + (-1)*s1)"
    assert texpr(sympy.Max(1, s0 - s1), kernel=True) == "tl.maximum(1, s0 + (-1)*s1)"
