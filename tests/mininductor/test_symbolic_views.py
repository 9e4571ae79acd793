"""Views and output strides of a symbolic graph (``dynamic=True``) that fell back to ATen or to one compile per
shape, each found by the lowering fuzzer: reshapes whose sizes pair only through the guards (exact divisions,
``Min``s, a fixed quotient, a guard that two sizes are equal), windows whose strides hold an int input, and the
traced strides of saved outputs, which a backward compiled for them reads ([Note: a saved view with gaps]).
Each test compares values and gradients with eager and pins the symbolic compiles, per-shape compiles and
fallbacks.
"""
import pytest
import torch

import minidynamo
from mininductor import metrics

from .utils import (
    DEVICE,
    assert_no_per_shape_compile,
    assert_same,
    backward_with_weights,
    frames_ok,
    leaves,
    run_shapes,
    trains_once_with_an_int,
)

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def test_a_saved_view_with_gaps_is_not_stored_dense():
    """[Note: a saved view with gaps]: ``x.reshape(n, -1).sin()`` of an ``x`` with a last-dim stride of 2 saves the
    view for its backward, traced with strides ``(2 * (s53 // n), 2)``; the forward stored a dense copy, which the
    backward read with stride 2: wrong gradients, and a read past the copy (lowering fuzz --grad --zero
    --dynamic --int, seed 1001745). The twenty-second session made the symbolic compile refuse (each shape
    compiled a strided view); since the twenty-sixth the view is a strided window with eager's traced strides
    (their ``n`` is an int input, which ``as_strided_layout`` reads as a size), compiled once."""
    def fn(x, n):
        return x.reshape(n, -1).sin()

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n in (2, 4):
        base = torch.randn(64, dtype=torch.float64, device=DEVICE)
        # leaves that keep the gaps (a clone would be contiguous)
        x, x_ref = (base.clone().as_strided((1, 1, 8), (64, 32, 2)).requires_grad_() for _ in range(2))
        out, ref = compiled(x, n), fn(x_ref, n)
        backward_with_weights(out, ref)
        assert out.stride() == ref.stride()
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert_no_per_shape_compile()


def test_a_view_into_an_int_input_rows_is_a_view():
    """``x.reshape(n, -1)``: Dynamo guards ``Eq(Mod(s27*s77, s86), 0)``, a division by a symbol, which the exact
    division check took for integers only ([Note: divisions the guards make exact]); it fell back to ATen's
    view."""
    def fn(x, w, n):
        return (x.reshape(n, -1) * 2).sum(0).mul(w.sum()).sum()

    trains_once_with_an_int(fn, [(6, 3), (8, 4), (12, 6), (12, 4)])


def test_the_backward_of_a_view_into_an_int_input_rows_is_a_view():
    """``x.reshape(n, -1)`` when the branch on ``x.numel() % n`` made Dynamo guard ``Eq(Mod(s17, s86), 0)``: the
    traced sizes are torch's ``s27*((s17//s86))``, whose ``FloorDiv`` is not ours, and the guard divides a factor
    of ``s17*s27``; the backward's view fell back to ATen (lowering fuzz --grad --dynamic --int, seed 80010)."""
    def fn(x, y, n):
        return y * x.deg2rad(), x.reshape(n, -1) if x.numel() % n == 0 else x

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows, n in ((8, 4), (16, 5), (12, 6)):
        (x, y), (x_ref, y_ref) = leaves(torch.randn(rows, 2, device=DEVICE), torch.randn(rows, 2, device=DEVICE))
        (a, b), (a_ref, b_ref) = compiled(x, y, n), fn(x_ref, y_ref, n)
        (a.sum() + b.cos().sum()).backward()
        (a_ref.sum() + b_ref.cos().sum()).backward()
        assert_same((a, b, x.grad, y.grad), (a_ref, b_ref, x_ref.grad, y_ref.grad))
    assert frames_ok() == 2 and metrics.specialisations == 0  # one frame per branch
    assert metrics.fallback_count == 0, metrics.fallback_ops


def test_a_saved_output_keeps_traced_strides_with_a_max_in_them():
    """``exp2(x[:n])`` of a permuted ``x`` is saved for the backward with eager's strides, traced as
    ``(s53, s53*Max(1, s86), 1)``; the check that keeps them did not read the ``Max`` inside a product, so the
    forward stored it row-major while the backward read the traced strides: wrong gradients (lowering fuzz
    --grad --dynamic --int, seed 83951). Now the ``Max`` is read, and a layout it cannot keep refuses the
    symbolic compile instead of storing another one."""
    def fn(x, n):
        v = torch.exp2(x[:n])
        return torch.where(v > 0, v, v), v.select(1, v.shape[1] - 1)

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows, n in ((5, 2), (10, 3)):
        permuted = torch.randn(17, rows, 5, dtype=torch.float64, device=DEVICE).transpose(0, 1)
        (x,), (x_ref,) = leaves(permuted)
        outs, refs = compiled(x, n), fn(x_ref, n)
        backward_with_weights(outs, refs)
        assert_same((outs, x.grad), (refs, x_ref.grad))
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0


def test_a_view_whose_inferred_size_a_guard_makes_exact_is_a_view():
    """``x.reshape(rows, 2, -1)`` of an ``(s77, s27)`` tensor: Dynamo guards ``Eq(Mod(s27, 2), 0)`` and sizes the
    ``-1`` as ``s27 // 2``; as polynomials ``s27*s77 / (2*s77)`` is no product, so the view fell back to ATen
    ([Note: divisions the guards make exact] in indexing.py).  Now it is a view, fused into its users."""
    def fn(x):
        return x.reshape(x.shape[0], 2, -1).sum(1), x.unflatten(1, (2, -1)).amax(-1) * 2

    run_shapes(fn, lambda r, c: (torch.randn(r, c, device=DEVICE),), [(3, 6), (5, 8), (4, 10)], dynamic=True)
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.fallback_count == 0, metrics.fallback_ops


def test_a_view_whose_minus_one_the_guards_fix_is_a_view():
    """``x.reshape(n, -1)`` of a 1-d ``x`` with ``n == len(x)``: the ``-1`` traces as 1 under the guard
    ``Eq(s77//s86, 1)``, and ``[s77] -> [s86, 1]`` did not pair as sizes, so the view and its backward fell back
    to ATen (lowering fuzz --grad --zero --int --matmul, seed 6003610). Values and gradients as eager's, one
    symbolic compile, no fallback."""
    def fn(x, y, n):
        return y * 2, x.reshape(n, -1) if x.numel() % n == 0 else x

    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    for rows in (6, 4, 9):
        (x, y), (x_ref, y_ref) = leaves(torch.randn(rows, device=DEVICE), torch.randn(rows, device=DEVICE))
        (a, b), (a_ref, b_ref) = compiled(x, y, rows), fn(x_ref, y_ref, rows)
        (a.sum() + b.cos().sum()).backward()
        (a_ref.sum() + b_ref.cos().sum()).backward()
        assert_same((a, b, x.grad, y.grad), (a_ref, b_ref, x_ref.grad, y_ref.grad))
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.fallback_count == 0, metrics.fallback_ops


@pytest.mark.parametrize("case", ["repeat of a narrow", "repeat of n rows"])
def test_views_of_repeats_over_an_int_input_are_views(case):
    """``x.narrow(-1, 0, min(n, len(x))).repeat(n)`` views ``[s86, Min(s77, s86)]`` as ``[s86*Min(s77, s86)]``,
    where one ``Min`` was sympy's and the other torch's, unequal classes, in about half of the processes: which one
    a size gets depends on the order of a set, so on ``PYTHONHASHSEED`` (lowering fuzz --grad --int --dynamic,
    seed 6100083); ``y.repeat(n, 1, 1)`` of ``n`` rows traces ``(n**2 - n) // n + 1`` rows, which is ``n`` as
    polynomials (--int --dynamic --zero, seed 6110444). Both fell back to ATen's view; values and gradients as
    eager's now, no fallback."""
    if case == "repeat of a narrow":
        def fn(x, n):
            return x.narrow(-1, 0, min(n, x.shape[-1])).repeat(n).abs()
        shapes = (((8,), 2), ((10,), 3), ((12,), 5))
    else:
        def fn(x, n):
            return (x.new_ones(n, *x.shape[1:]) * x[:1]).repeat(n, 1, 1) * 2
        shapes = (((5, 2, 2), 5), ((4, 2, 3), 3), ((6, 3, 2), 4))
    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    runs = []
    for shape, n in shapes:
        (x,), (x_ref,) = leaves(torch.randn(*shape, dtype=torch.float64, device=DEVICE))
        out = compiled(x, n)
        out.sin().sum().backward()
        runs.append((x, x_ref, n, out))
    for x, x_ref, n, out in runs:
        ref = fn(x_ref, n)
        ref.sin().sum().backward()
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.fallback_count == 0, metrics.fallback_ops


def test_traced_strides_with_exact_divisions_are_kept_symbolically():
    """``x.reshape(n, -1)`` of a permuted ``x`` traces its output's strides as ``(s27*s53*s86*(s77//s86))//s77``,
    exact under the guard ``Eq(Mod(s77, s86), 0)``; read as floor divisions they did not look dense, and the
    symbolic compile refused, one compile per shape (lowering fuzz --grad --int --dynamic, seeds 6200507,
    6200728). Values and gradients as eager's, no per-shape compile."""
    def fn(x, y, n):
        return (x.reshape(n, -1) if x.numel() % n == 0 else x), y * 2

    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    for rows, n in ((5, 5), (10, 2), (7, 7)):
        base = torch.randn(17, rows, 2, dtype=torch.float64, device=DEVICE)
        (x, y), (x_ref, y_ref) = leaves(base.transpose(0, 1), torch.randn(rows, dtype=torch.float64, device=DEVICE))
        (a, b), (a_ref, b_ref) = compiled(x, y, n), fn(x_ref, y_ref, n)
        (a.sin().sum() + b.sum()).backward()
        (a_ref.sin().sum() + b_ref.sum()).backward()
        assert a.stride() == a_ref.stride()
        assert_same((a, b, x.grad, y.grad), (a_ref, b_ref, x_ref.grad, y_ref.grad))
    assert_no_per_shape_compile()


def test_an_expanded_output_with_an_int_input_in_its_strides_is_a_window():
    """``F.pad(x, (0, n)).tanh().expand(3, -1, -1)``: the output is a window with strides ``(0, n + 1, 1)`` on the
    ``tanh`` buffer.  ``n`` is an int input, whose symbol is not positive (it may be 0), so the coefficient
    ``n + 1`` did not read as a stride, the window became a row-major copy, and the traced strides (a 0 among them)
    could not be kept: one compile per shape (lowering fuzz --grad --int --dynamic, seed 6200233).  Now a window:
    values, gradients and strides as eager's, no per-shape compile."""
    def fn(x, n):
        return torch.nn.functional.pad(x, (0, n)).tanh().expand(3, -1, -1)

    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    for n in (2, 3, 5):
        (x,), (x_ref,) = leaves(torch.randn(5, 1, dtype=torch.float64, device=DEVICE))
        out, ref = compiled(x, n), fn(x_ref, n)
        backward_with_weights(out, ref)
        assert out.stride() == ref.stride()
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert_no_per_shape_compile()


def test_a_reshape_whose_divisibility_a_part_guards_is_a_view():
    """``b.reshape(n, -1)`` of an ``(s80, s9, s4)`` tensor, in the lowering fuzzer's program 6400208 (--grad --int
    --dynamic: the reshape, a ``mean``, a ``repeat``, a ``transpose @``, a ``softmax``).  Its guards say
    ``Eq(PythonMod(s4*s80*s9, s82), 0)`` -- Python's ``%``, torch's ``PythonMod``, not sympy's ``Mod`` -- and
    ``Eq(Mod(s80*s9, s82), 0)`` of a part of the product; ``divides`` asked only ``Mod`` of the whole product and
    of single factors, so the view could not pair ``[s80, s9, s4]`` with ``[s82, (s4*s80*s9)//s82]`` and fell back
    to ATen, forward and backward.  Now both forms and every part count ([Note: divisions the guards make
    exact]): values and gradients as eager's, no fallback."""
    from tests.fuzz.lowering import check_grad, generate
    inputs, steps = generate(6400208, True, False, True)
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in inputs]
    metrics.reset()
    assert check_grad(6400208, inputs, steps, dynamic=True) is None  # values and gradients, two shapes
    assert metrics.fallback_count == 0, metrics.fallback_ops
    assert not metrics.symbolic_fallbacks, metrics.symbolic_fallbacks


def test_a_view_pairs_sizes_a_guard_says_are_equal():
    """``torch.where(b > 0, b, torch.diagonal(a))`` broadcasts the diagonal, of ``Min(rows, cols)`` elements,
    against ``b``'s ``cols`` columns: Dynamo guards ``Eq(cols, Min(rows, cols))``.  The backward sums a gradient
    to ``[1, cols]`` and views it as the diagonal's ``[Min(rows, cols)]``, sizes equal only through that guard;
    the view fell back to ATen, forward and backward (lowering fuzz --grad --zero --dynamic, seed 6710278).
    ``_same_size`` now asks the ShapeEnv too: values and gradients as eager's over three shapes, no fallback."""
    def fn(a, b):
        d = torch.diagonal(a)
        f = torch.erf(d)
        return a * f + torch.where(b > 0, b, d), f.flip(0)

    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    for rows, cols in ((5, 2), (10, 2), (7, 3)):
        (a, b), (a_ref, b_ref) = leaves(torch.randn(rows, cols, dtype=torch.float64, device=DEVICE),
                                        torch.randn(rows, cols, dtype=torch.float64, device=DEVICE))
        outs, refs = compiled(a, b), fn(a_ref, b_ref)
        backward_with_weights(outs, refs)
        assert_same((*outs, a.grad, b.grad), (*refs, a_ref.grad, b_ref.grad))
    assert_no_per_shape_compile()
