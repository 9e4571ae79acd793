"""Index math with sympy: ``FloorDiv``, ``ModularIndexing``, printing, and dimension merging.

An index is a sympy expression over loop variables, e.g. ``8*x0 + x1`` for element ``[x0, x1]`` of a contiguous
``(4, 8)`` buffer. A reshape of a non-contiguous view needs ``FloorDiv``/``ModularIndexing`` (``(x // d) % m``).
``simplify_loops`` merges adjacent loop dims that every index walks contiguously, so ``8*x0 + x1`` over
``(4, 8)`` becomes ``x`` over ``(32,)`` -- what makes a generated load coalesced.
Mirrors ``torch/utils/_sympy/functions.py`` and ``torch/_inductor/sizevars.py`` (much smaller).
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import sympy
import torch


class FloorDiv(sympy.Function):
    """``a // b`` on non-negative integers (index math never goes negative)."""

    nargs = (2,)
    is_integer = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if base == 0:
            return sympy.Integer(0)
        if isinstance(base, FloorDiv) and divisor.is_Integer:  # (x // a) // b == x // (a*b)
            return FloorDiv(base.args[0], base.args[1] * divisor)
        if isinstance(base, ModularIndexing) and divisor.is_Integer and base.args[2] % divisor == 0:
            x, d, m = base.args  # ((x // d) % m) // c == (x // (d*c)) % (m // c) when c divides m
            return ModularIndexing(x, d * divisor, m // divisor)
        return None

    def _eval_is_nonnegative(self):
        """Lets sympy decide ``s0 // 2 < 0`` (a slice bound, ``x[: x.shape[0] // 2]``) from the sizes' own
        assumptions; the ShapeEnv cannot be asked, it does not know this class."""
        base, divisor = self.args
        if base.is_nonnegative and divisor.is_positive:
            return True
        return None


class ModularIndexing(sympy.Function):
    """``(a // div) % mod``: the index of one dim inside a flattened range."""

    nargs = (3,)
    is_integer = True

    @classmethod
    def eval(cls, base, divisor, modulus):
        if base == 0 or modulus == 1:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        if isinstance(base, FloorDiv) and base.args[1].is_Integer:  # ((x // a) // d) % m
            return ModularIndexing(base.args[0], base.args[1] * divisor, modulus)
        if isinstance(base, ModularIndexing) and divisor.is_Integer and modulus.is_Integer \
                and base.args[2] % (divisor * modulus) == 0:  # an outer mod that the inner range nests in
            return ModularIndexing(base.args[0], base.args[1] * divisor, modulus)
        return None


def sym(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


def as_size(value):
    """A size as the IR keeps it: a Python int, or a sympy expression over size symbols (``s77``, ``4*s77``).

    ``SymInt`` (from a symbolic trace) becomes its sympy expression; a sympy integer becomes an int, so static
    graphs keep plain ints everywhere. A ``Min``/``Max`` of two sizes becomes the one the ShapeEnv decides is
    smaller/larger (``Min(2, s31)`` is 2: a size symbol is at least 2), as a fake tensor's later ops took it, so
    it broadcasts and views with that size. A compound size the ShapeEnv pins to one value is that value
    (``s32 // 2`` where the guards leave ``s32`` in [2, 3] is 1, and broadcasts as 1). See [Note: symbolic sizes
    in the IR]."""
    if isinstance(value, torch.SymInt):
        value = value.node.expr
    if isinstance(value, sympy.Basic):
        if _is_min_max(value) and len(value.args) == 2:  # a diagonal's length
            value = (sym_min if type(value).__name__ == "Min" else sym_max)(*value.args)
        if not value.is_Integer and not value.is_Symbol:
            value = _pinned(value)
        return int(value) if value.is_Integer else value
    return int(value)


def _is_min_max(expr) -> bool:
    """sympy's ``Min``/``Max`` or torch's functions of the same names (``torch/utils/_sympy/functions.py``), which
    the ShapeEnv writes in its guards and float expressions."""
    return isinstance(expr, (sympy.Min, sympy.Max)) or \
        type(expr).__name__ in ("Min", "Max") and type(expr).__module__ == "torch.utils._sympy.functions"


def decide_min_max(expr):
    """``expr`` with each ``Min``/``Max`` of two sizes replaced by the side the ShapeEnv decides (``as_size``)."""
    return expr.replace(lambda e: _is_min_max(e) and len(e.args) == 2, as_size)


def _pinned(expr):
    """``expr``, or the one integer the ShapeEnv knows it is for every size the graph serves: its example value,
    where the ShapeEnv decides ``Eq(expr, value)`` from its guards (``Eq(s32 // 2, 1)`` after Python's ``max(1,
    n // 2)`` took a branch) or its value ranges.  Remembered per graph: the IR asks about the same sizes often."""
    from .virtualized import V
    graph = V.graph
    if getattr(graph, "shape_env", None) is None or not getattr(graph, "size_hints", None):
        return expr
    known = graph.pinned_sizes
    if expr not in known:
        known[expr] = expr
        if not expr.free_symbols - set(graph.size_hints):
            value = expr.subs(graph.size_hints)
            if value.is_Integer and known_true(sympy.Eq(expr, value)):
                known[expr] = value
    return known[expr]


def is_symbolic(value) -> bool:
    return isinstance(value, sympy.Basic) and not value.is_Integer


def product(values: Sequence):
    """The product of sizes: an int when all are ints, else a sympy expression."""
    return as_size(math.prod(as_size(v) for v in values))


def contiguous_strides(size: Sequence) -> list:
    strides, acc = [], 1
    for s in reversed(list(size)):
        strides.append(acc)
        s = as_size(s)
        acc = acc * (s if is_symbolic(s) else max(s, 1))  # a symbol is >= 2 (sizes 0 and 1 stay static)
    return list(reversed(strides))


def size_hint(expr) -> int:
    """The example value of a size: for heuristics only (block sizes, kernel kind), never for correctness.

    [Note: symbolic sizes in the IR]  A graph compiled for symbolic sizes keeps ``sympy`` expressions over the
    ShapeEnv's symbols (``s77``) in ranges, layouts and index math; every decision that must hold for *every*
    size compares expressions structurally (``s77*s21 == s21*s77``) or refuses (a sympy relation that cannot
    be decided raises, and the symbolic compile falls back to one static compile per shape, ``specialize.py``).
    Only performance choices read the hint, the size the graph was traced with (``V.graph.size_hints``)."""
    expr = as_size(expr)
    if not is_symbolic(expr):
        return expr
    from .virtualized import V
    return int(expr.subs(V.graph.size_hints))


def statically_true(relation) -> bool:
    """Decide a relation between sizes for *every* size the graph is compiled for: ints and what sympy decides
    alone, else what the ShapeEnv knows (``V.graph.shape_env``: its guards, such as ``s77 > 4`` from the user's
    ``if len(x) > 4:``, and its value ranges).  Raises ``TypeError`` when undecidable (see [Note: symbolic sizes
    in the IR]): the symbolic compile then falls back to per-shape compiles."""
    relation = sympy.sympify(relation)
    if relation in (sympy.true, sympy.false):
        return bool(relation)
    from .virtualized import V
    shape_env = getattr(V.graph, "shape_env", None)
    decided = None
    if shape_env is not None:
        decided = shape_env._maybe_evaluate_static(as_torch_sympy(relation), axioms=_conjuncts(shape_env))
    if decided in (sympy.true, sympy.false):
        return bool(decided)
    raise TypeError(f"cannot determine truth value of {relation} for every size")


def _conjuncts(shape_env) -> tuple:
    """The ShapeEnv's guards, with each ``a & b`` as its two facts, in canonical form.  Slicing ``x[:n]`` guards
    ``(s86 >= 0) & (s86 <= s77)`` in one expression, which the ShapeEnv's own matching uses whole: ``s86 <= s77``
    alone, what ``min(n, len(x))`` asks, was undecided ([Note: int inputs of a symbolic graph] in compile_fx.py)."""
    from torch.fx.experimental.symbolic_shapes import canonicalize_bool_expr
    axioms = shape_env.get_axioms()  # cached by the ShapeEnv until a guard is added
    cached = getattr(shape_env, "_mininductor_conjuncts", None)
    if cached is not None and cached[0] is axioms:
        return cached[1]
    facts = []
    for axiom in axioms:
        facts.extend(axiom.args if isinstance(axiom, sympy.And) else (axiom,))
    # ``s86 > s77`` implies ``s77 <= s86`` only once written as ``s77 < s86``, the form the ShapeEnv reasons in
    conjuncts = tuple(dict.fromkeys(canonicalize_bool_expr(f) for f in facts))
    shape_env._mininductor_conjuncts = (axioms, conjuncts)
    return conjuncts


def as_torch_sympy(expr):
    """``expr`` with our ``FloorDiv``/``ModularIndexing`` and sympy's ``Min``/``Max`` as torch's functions of the
    same meaning: the ShapeEnv interprets only its own (a KeyError on ours, ``x[: x.shape[0] // 2]`` fell back per
    shape), and matches its guards by identity (sympy's ``Min(s27, s77)`` is not the ``Min(s27, s77)`` of the guard
    ``Eq(Min(s27, s77), s17)``)."""
    from torch.utils._sympy import functions as torch_fns
    for ours, theirs in ((FloorDiv, torch_fns.FloorDiv), (ModularIndexing, torch_fns.ModularIndexing),
                         (sympy.Min, getattr(torch_fns, "Min", sympy.Min)),
                         (sympy.Max, getattr(torch_fns, "Max", sympy.Max))):
        expr = expr.replace(ours, theirs)
    return expr.replace(sympy.floor, lambda e: _floor_as_floordiv(e, torch_fns.FloorDiv))


def _floor_as_floordiv(e, floordiv):
    """sympy's ``floor(s46/2)`` (what ``//`` of two sympy expressions gives) as ``FloorDiv(s46, 2)``, the form the
    ShapeEnv's guards use: the slice ``x[..., 1::2]`` is ``floor(s46/2)`` long, and a broadcast against it asked
    ``floor(s46/2) == 1`` of a guard ``Eq((s46//2), 1)`` (lowering fuzz --grad --dynamic, seed 69207)."""
    top, bottom = sympy.fraction(sympy.together(e))
    return floordiv(top, bottom) if bottom.is_Integer and bottom != 1 else sympy.floor(e)


def _structurally_le(a, b) -> bool:
    """``a <= b`` by its form: ``Min(s0, s1) <= s1`` and ``s1 <= Max(s0, s1)``, which the ShapeEnv does not see."""
    return isinstance(a, sympy.Min) and b in a.args or isinstance(b, sympy.Max) and a in b.args


def size_min(a, b):
    """``min(a, b)`` of sizes, exact for symbolic ones (``statically_true`` either way round: ``max(1, s // 2)``
    is decided by ``s // 2 >= 1``, where ``1 >= s // 2`` is not decided).  Raises ``TypeError`` if neither is."""
    if _structurally_le(a, b) or known_true(sympy.Le(a, b)):
        return a
    if _structurally_le(b, a) or known_true(sympy.Le(b, a)):
        return b
    raise TypeError(f"cannot determine min({a}, {b}) for every size")


def size_max(a, b):
    return b if a == size_min(a, b) else a


def known_true(relation) -> bool:
    """``statically_true``, with an undecided relation read as False (not known to hold for every size)."""
    try:
        return statically_true(relation)
    except TypeError:
        return False


def divides(d, n) -> bool:
    """Do the ShapeEnv's guards say ``n % d == 0``?

    [Note: divisions the guards make exact]  ``x.reshape(rows, 2, -1)`` of an ``(s77, s27)`` tensor makes Dynamo
    guard ``Eq(Mod(s27, 2), 0)`` and size the last dim ``s27 // 2``.  As polynomials, ``s27*s77 / (2*s77)`` is no
    product and ``2 * (s27 // 2)`` is not ``s27``, so the view fell back to ATen.  Under that guard the division is
    exact: the ``-1`` is ``s27 // 2``, and ``2 * (s27 // 2)`` pairs with ``s27`` (``_same_size`` in
    view_lowering.py).  The divisor may be a symbol too: ``x.reshape(n, -1)`` of an int input ``n`` guards
    ``Eq(Mod(s27*s77, s86), 0)``.  Traced strides hold such divisions too, which the check that an output's
    strides are dense reads through ``exact_quotients`` (graph.py)."""
    if exact_polynomial_quotient(n, d):  # ``s13**2 - s13`` by ``s13``: a traced ``x[::s13]`` of ``s13**2`` rows
        return True
    if _guarded_multiple(n, d):
        return True
    # a part's divisibility is the product's: the guards may say ``Eq(Mod(s31, s81), 0)`` of ``s31*s46``, or
    # ``Eq(Mod(s80*s9, s82), 0)`` of ``s4*s80*s9`` (lowering fuzz --grad --int --dynamic, seed 6400208)
    factors = sympy.Mul.make_args(n)
    parts = (sympy.Mul(*c) for k in range(1, len(factors)) for c in itertools.combinations(factors, k))
    return len(factors) > 1 and any(_guarded_multiple(part, d) for part in parts)


def _guarded_multiple(n, d) -> bool:
    """Is ``n % d == 0`` a guard, as sympy's ``Mod`` or as torch's ``PythonMod`` (Python's ``%``, which Dynamo
    records for ``x.numel() % n == 0``; the two agree on sizes)?"""
    from torch.utils._sympy.functions import Mod, PythonMod
    return known_true(sympy.Eq(Mod(n, d), 0)) or known_true(sympy.Eq(PythonMod(n, d), 0))


def exact_polynomial_quotient(n, d) -> bool:
    """Is ``n / d`` a polynomial with integer coefficients, so an integer for every size, whatever the guards?"""
    top, bottom = sympy.fraction(sympy.cancel(sympy.sympify(n) / d))
    symbols = sorted(top.free_symbols, key=str)
    if bottom != 1 or not symbols:
        return bottom == 1 and top.is_Integer
    return top.is_polynomial(*symbols) and all(c.is_Integer for c in sympy.Poly(top, *symbols).coeffs())


def exact_quotients(expr):
    """``expr`` with each floor division (ours or torch's ``FloorDiv``) that ``divides`` says is exact written as a
    true division, innermost first: ``(s36*((s4*s80*s9)//s36))//s80`` under ``Eq(Mod(s4*s80*s9, s36), 0)`` is
    ``s4*s9``. Exact for every size the graph serves, so two sizes (or strides) equal after it are equal."""
    if not isinstance(expr, sympy.Basic):
        return expr
    return expr.replace(lambda e: type(e).__name__ == "FloorDiv" and divides(e.args[1], e.args[0]),
                        lambda e: e.args[0] / e.args[1])


def sym_min(a, b):
    """``min(a, b)`` of sizes as an expression: the smaller one where the ShapeEnv decides it, else ``Min(a, b)``
    (printed ``min``/``tl.minimum``), as torch's ``sym_min`` gives a fake tensor's size (a diagonal's length)."""
    try:
        return size_min(a, b)
    except TypeError:
        return sympy.Min(a, b)


def sym_max(a, b):
    try:
        return size_max(a, b)
    except TypeError:
        return sympy.Max(a, b)


def texpr(expr, kernel: bool = False) -> str:
    """Print an index expression as Python/Triton source (``//`` and ``%`` for our functions). ``kernel``: the
    text goes into a Triton kernel, where a symbolic size is a scalar tensor argument (``max`` is ``tl.maximum``)."""
    expr = sympy.sympify(expr)
    if kernel and is_float_size(expr):
        return _FloatPrinter(kernel).doprint(expr)
    return _Printer(kernel).doprint(expr)


# [Note: float sizes]  Python's ``/`` on sizes is a float: ``1.0 / x.shape[0]`` and ``x.shape[0] / x.shape[1]`` are
# ``SymFloat``s, whose ShapeEnv expressions use torch's ``ToFloat`` (int -> float), ``FloatTrueDiv`` (float / float)
# and ``IntTrueDiv`` (int / int, a float result).  Eager computes them in double precision on the host, and an op
# then casts the Python float to its own dtype; a kernel computes the same double (``tl.float64``: every integer
# operand is converted first, so no int * float literal falls to float32) and casts it (upstream's
# ``TritonPrinter`` prints these functions the same way).  As for a Python number, an fp16/bf16 op rounds it to its
# dtype or reads it in fp32 ([Note: Python scalars in fp16/bf16 ops] in lowering.py).  Other float functions
# (``FloatPow``, ``sqrt``) are refused (``float_size`` in size_ops.py): the graph then compiles per shape.
FLOAT_SIZE_FUNCTIONS = ("ToFloat", "FloatTrueDiv", "IntTrueDiv")


def is_float_size(expr) -> bool:
    """Is ``expr`` a size expression computed in floating point (see [Note: float sizes])?"""
    if not isinstance(expr, sympy.Basic):
        return False
    return bool(expr.atoms(sympy.Float)) or any(type(f).__name__ in FLOAT_SIZE_FUNCTIONS
                                                 for f in expr.atoms(sympy.Function))


class _Printer(sympy.printing.str.StrPrinter):
    def __init__(self, kernel: bool = False):
        super().__init__()
        self.kernel = kernel

    def _operand(self, e) -> str:
        # ``//`` and ``%`` bind tighter than ``+`` and as tight as ``*``: wrap anything but a name or number
        text = self._print(e)
        return text if e.is_Atom or isinstance(e, (FloorDiv, ModularIndexing)) else f"({text})"

    def _print_FloorDiv(self, e):
        # the divisor is an operand too: a symbolic one is a product (``x // (s0*s1)``, never ``x // s0*s1``)
        return f"({self._operand(e.args[0])} // {self._operand(e.args[1])})"

    def _print_ModularIndexing(self, e):
        base, div, mod = (self._operand(a) for a in e.args)
        inner = base if e.args[1] == 1 else f"({base} // {div})"
        return f"({inner} % {mod})"

    def _print_Mul(self, e):
        # keep integer math: "8*x0", never "x0/2"
        return "*".join(self.parenthesize(a, 50) for a in e.args)

    def _print_Pow(self, e, rational=False):
        # ``s0**2`` (a symbolic size squared, e.g. the stride of a flattened square): Triton's interpreter has no
        # ``**`` for its scalar tensors, so a positive integer power is a product
        base, exp = e.args
        if exp.is_Integer and exp > 0:
            return "(" + "*".join([self._operand(base)] * int(exp)) + ")"
        return super()._print_Pow(e, rational)

    def _print_floor(self, e):
        # ``(s0**2 + 1) // 2`` (the length of ``x.view(-1)[::2]``) is sympy's ``floor(s0**2/2 + 1/2)``: back to ``//``
        num, den = sympy.fraction(sympy.together(e.args[0]))
        if not (den.is_Integer and den > 0):
            return self._print_Function(e)
        return self._print(num) if den == 1 else f"({self._operand(num)} // {den})"

    def _print_ceiling(self, e):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        if not (den.is_Integer and den > 0):
            return self._print_Function(e)
        return self._print(num) if den == 1 else f"(-((-{self._operand(num)}) // {den}))"

    def _print_Max(self, e):
        # ``Max(1, s0 - s1 + 3)``: the stride torch gives a dim that could be empty (a conv's output length)
        return self._min_max(e, "tl.maximum" if self.kernel else "max")

    def _print_Min(self, e):
        return self._min_max(e, "tl.minimum" if self.kernel else "min")

    def _min_max(self, e, fn: str) -> str:
        text = self._print(e.args[-1])
        for a in reversed(e.args[:-1]):
            text = f"{fn}({self._print(a)}, {text})"
        return text

    # float sizes in Python (the wrapper, a fallback's argument): Python's own arithmetic ([Note: float sizes])
    def _print_Float(self, e):
        return repr(float(e))  # every digit of the double (sympy prints 15)

    def _print_ToFloat(self, e):
        return f"float({self._print(e.args[0])})"

    def _print_FloatTrueDiv(self, e):
        return f"({self._operand(e.args[0])} / {self._operand(e.args[1])})"

    _print_IntTrueDiv = _print_FloatTrueDiv


class _FloatPrinter(_Printer):
    """A float size inside a kernel, in ``tl.float64`` throughout ([Note: float sizes]): each integer part is
    printed as an index expression and converted; float constants take the other operand's dtype."""

    def _f64(self, e) -> str:
        if e.is_number:
            return repr(float(e))
        if e.is_integer:
            return f"({_Printer(self.kernel).doprint(e)}).to(tl.float64)"
        return self._operand(e)

    def _print_Symbol(self, e):
        return self._f64(e)

    def _print_Integer(self, e):
        return repr(float(e))

    def _print_FloorDiv(self, e):
        return self._f64(e)

    def _print_ToFloat(self, e):
        return self._f64(e.args[0])

    def _print_FloatTrueDiv(self, e):
        return f"({self._f64(e.args[0])} / {self._f64(e.args[1])})"

    _print_IntTrueDiv = _print_FloatTrueDiv

    def _print_Pow(self, e, rational=False):
        base, exp = e.args
        if exp.is_Integer and exp > 0:
            return "(" + "*".join([self._f64(base)] * int(exp)) + ")"
        raise NotImplementedError(f"a float size {e}")


def linear_stride(expr, var, int_inputs=frozenset()) -> int | None:
    """The coefficient of ``var`` in ``expr`` if ``expr`` is linear in it, else None: an integer, or sizes (and
    the symbols of ``int_inputs``: a graph's int inputs, which a view's strides may hold, ``F.pad(x, (0, n))``'s
    row length ``n + 1``)."""
    expr = sympy.expand(expr)
    if var not in expr.free_symbols:
        return 0
    coeff = expr.coeff(var, 1)
    rest = sympy.expand(expr - coeff * var)
    if var in rest.free_symbols:
        return None
    if coeff.is_Integer:
        return int(coeff)
    # a symbolic stride (``s21*x0``): only size symbols, which the ShapeEnv makes positive; loop variables are
    # merely nonnegative, so a coefficient that holds one means the index is not linear in ``var``
    if coeff.free_symbols and all(s.is_positive or s in int_inputs for s in coeff.free_symbols):
        return coeff
    return None


def simplify_loops(sizes: list[int], index_exprs: list, var_names: list) -> tuple[list[int], Callable]:
    """Merge adjacent dims ``i, i+1`` when every index has ``stride_i == stride_{i+1} * size_{i+1}``.

    ``var_names`` are the symbols the exprs use for ``sizes``. Returns the new sizes and ``reindex(new_vars)``
    giving one expression per old var (the merged-away outer var maps to 0 and the inner one carries the merged
    var: exact because every expr is linear in both). Size-1 dims are dropped first.
    """
    groups = [[i] for i, s in enumerate(sizes) if s != 1]
    strides = [[linear_stride(e, v) for v in var_names] for e in index_exprs]
    merged: list[list[int]] = []
    for g in groups:
        if merged and _can_merge(merged[-1][-1], g[0], sizes, strides):
            merged[-1].append(g[0])
        else:
            merged.append(list(g))
    new_sizes = [product(sizes[i] for i in g) for g in merged]

    def reindex(new_vars):
        out = [sympy.Integer(0)] * len(sizes)
        for g, v in zip(merged, new_vars):
            out[g[-1]] = v  # the innermost var takes the merged index; outer ones vanish (see docstring)
        return out

    return new_sizes, reindex, merged


def _can_merge(outer: int, inner: int, sizes, strides) -> bool:
    for per_expr in strides:
        so, si = per_expr[outer], per_expr[inner]
        if so is None or si is None or so != si * sizes[inner]:
            return False
    return True


def split_flat(flat, sizes: list[int]) -> list:
    """Express each dim's index in terms of one flat index over ``sizes`` (row-major)."""
    out, div = [], 1
    for i in reversed(range(len(sizes))):
        if i == 0:
            out.append(FloorDiv(flat, div))
        else:
            out.append(ModularIndexing(flat, div, sizes[i]))
        div *= sizes[i]
    return list(reversed(out))


def simplify_index(expr):
    """Undo the ``FloorDiv``/``ModularIndexing`` a reshape introduced when the pieces add back up:
    ``a*m*FloorDiv(x, d*m) + a*ModularIndexing(x, d, m) -> a*FloorDiv(x, d)`` (and ``FloorDiv(x, 1) = x``)."""
    expr = sympy.expand(expr)
    changed = True
    while changed and isinstance(expr, sympy.Add):
        changed = False
        terms = list(expr.args)
        for i, t in enumerate(terms):
            coeff, fn = _split_term(t)
            if not isinstance(fn, ModularIndexing):
                continue
            x, d, m = fn.args
            for j, u in enumerate(terms):
                c2, fn2 = _split_term(u)
                if isinstance(fn2, FloorDiv) and fn2.args[0] == x and fn2.args[1] == d * m and c2 == coeff * m:
                    rest = [w for k, w in enumerate(terms) if k not in (i, j)]
                    expr = sympy.expand(sympy.Add(*rest, coeff * FloorDiv(x, d)))
                    changed = True
                    break
            if changed:
                break
    return expr


def _split_term(term):
    """``(coefficient, factor)``: a term as its one ``FloorDiv``/``ModularIndexing`` factor times the rest.  The
    rest is an integer, or with symbolic sizes a product of sizes (``s27*FloorDiv(x0, s27)``: the row of a
    ``(s77, s27)`` buffer read through a reshape), which must fold back like ``6*FloorDiv(x0, 6)`` does."""
    if isinstance(term, sympy.Mul):
        fns = [a for a in term.args if isinstance(a, (FloorDiv, ModularIndexing))]
        if len(fns) == 1:
            return sympy.Mul(*(a for a in term.args if a is not fns[0])), fns[0]
    return sympy.Integer(1), term


def next_power_of_2(n: int) -> int:
    return 1 << max(size_hint(n) - 1, 0).bit_length()
