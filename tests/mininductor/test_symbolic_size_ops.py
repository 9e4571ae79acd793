"""Sizes computed in a symbolic graph (``dynamic=True``) that sent it to one compile per shape, each found by the
lowering fuzzer's ``--dynamic`` mode: ``min``/``max``/``%`` of sizes, a diagonal of two symbolic dims, ``select``
at an index expression, a tuple index led by one, and kernels that read or write one element at such an index;
and the size guards that tracing to ATen adds, which a symbolic compile checks at each call; int inputs read as
sizes.
Each test compares with eager and pins the frames, recompiles, symbolic compiles and fallbacks.
"""
import pytest
import torch

import minidynamo
from minidynamo.testing import outcome
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


def test_diagonal_of_symbolic_dims_compiles_symbolically():
    """A diagonal's length ``max(min(rows + min(offset, 0), cols - max(offset, 0)), 0)`` of symbolic sizes: the
    lowering took Python's ``min`` of two symbols, which raised, and the graph compiled once per shape. Now it
    takes ``sym_min``/``sym_max``: ``Min(s77, s27)`` where the ShapeEnv cannot decide, as the fake tensor's size
    is (the trace holds no guard ``rows <= cols``)."""
    def fn(x):
        return x.diagonal() * 2, x.diagonal(1).exp(), torch.diagonal(x[None] + 1, -1, 1, 2).sum(-1)
    run_shapes(fn, lambda r: (torch.randn(r, r + 3),), [(4,), (6,), (5,)], dynamic=True)
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks and metrics.specialisations == 0
    assert metrics.fallback_count == 0
    assert minidynamo.counters["frames"]["ok"] == 1 and minidynamo.counters["recompiles"]["total"] == 0


def test_a_diagonal_whose_length_the_shape_env_decides_broadcasts_with_that_size():
    """The diagonal of an ``(s77, 2)`` tensor (automatic dynamic shapes: only the rows are symbolic) has the fake
    size ``Min(2, s77)``, which is 2 for every size the graph serves (a size symbol is at least 2); the lowering
    kept ``Min(2, s77)``, which broadcast with nothing and viewed as nothing, so ``mul`` and ``view`` fell back
    (lowering fuzzer, ``--grad``, seed 45037). Sizes now take the decided side of a ``Min``/``Max``."""
    def fn(x, y):
        d = torch.diagonal(x)
        return d * y, d.view(1, 2) + 1
    run_shapes(fn, lambda n: (torch.randn(n, 2), torch.randn(2)), [(3,), (6,), (9,)])
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks and metrics.fallback_count == 0
    assert minidynamo.counters["frames"]["ok"] == 2 and minidynamo.counters["recompiles"]["total"] == 1


def test_select_at_a_symbolic_index_and_max_of_a_size_compile_symbolically():
    """``x.select(0, x.shape[0] - 1)`` (the index an expression: ``sympy.Integer`` of it raised) and
    ``max(x.shape[1], 1)`` / ``min(...)`` (traced as ``torch.sym_max``/``sym_min``, refused before) each made the
    graph compile once per shape (lowering fuzzer, ``--dynamic``)."""
    def fn(x):
        n, m = x.shape
        idx = torch.arange(x.numel(), device=x.device).reshape(n, m) * 7 % max(m, 1)
        return x.select(0, n - 1) * 2, x.select(1, -1), torch.gather(x, 1, idx), x[:, :min(n, m)] + 1
    run_shapes(fn, lambda n, m: (torch.randn(n, m),), [(4, 6), (6, 9), (5, 7)], dynamic=True)
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks and metrics.specialisations == 0
    assert metrics.fallback_count == 0
    assert minidynamo.counters["frames"]["ok"] == 1 and minidynamo.counters["recompiles"]["total"] == 0


def test_roll_and_a_size_modulo_compile_symbolically():
    """``roll``'s decomposition takes its shift modulo the size (``operator.mod`` of sizes, refused before: the
    lowering fuzzer's ``--dynamic`` mode sent 41 of 3,000 programs to per-shape compiles for it)."""
    def fn(x):
        return torch.roll(x, 1, 0) * 2, torch.roll(x, -2, 1), x.reshape(-1)[: x.shape[0] % 3 + 1]
    run_shapes(fn, lambda n, m: (torch.randn(n, m),), [(4, 6), (6, 9), (5, 7)], dynamic=True)
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks and metrics.specialisations == 0
    assert metrics.fallback_count == 0
    assert minidynamo.counters["frames"]["ok"] == 1 and minidynamo.counters["recompiles"]["total"] == 0


def _pieces_of_last_rows(x):
    n = x.shape[0]
    y = x * 1
    y.select(0, n - 1).fill_(5.0)  # a store at the element ``s77 - 1``: no loop variable in its index
    return x[n - 1, 1:], x[n - 2, ..., None], x[n - 1, n - 3], x[n - 1, :, 0] * 2, x.select(0, n - 1)[0, 0] + 1, y


def test_a_tuple_index_led_by_a_symbolic_int_does_not_specialise_the_size():
    """``x[n - 1, 1:]`` went to ``getitem`` whole, which guarded ``s77 - 1 == 4``: one recompile per size (the
    lowering fuzzer's ``--dynamic`` mode). It is ``x[n - 1][1:]``, and the first index takes the path above.
    A kernel reading or writing one element at a size-only index (``s77 - 1``) gave its load a block mask over a
    scalar pointer, which Triton refuses ("Mask argument cannot be block type...")."""
    compiled = minidynamo.minicompile(_pieces_of_last_rows, dynamic=True)
    for n in (5, 7, 6):
        x = torch.randn(n, 6, 3)
        assert_same(compiled(x), _pieces_of_last_rows(x))
    assert frames_ok() == 1 and minidynamo.counters["recompiles"]["total"] == 0
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks and metrics.fallback_count == 0
    assert outcome(lambda x: x[x.shape[0], 0], [torch.randn(4, 2)])[0] is IndexError
    assert outcome(minidynamo.minicompile(lambda x: x[x.shape[0], 0], dynamic=True), [torch.randn(4, 2)])[0] \
        is IndexError


def test_a_diagonal_times_a_vector_of_its_length_broadcasts():
    """Under ``dynamic=True`` the vector's length is a symbol of its own: the trace guards ``Eq(Min(s27, s77),
    s17)``, and the lowering's broadcast met two different sizes, ``Min(s27, s77)`` and ``s17``, and fell back.  It
    now asks the ShapeEnv, which knows them equal from that guard -- once our ``Min`` is written as torch's, which
    its guards hold (sympy's is another function of the same name)."""
    def fn(x, y):
        return x.diagonal() * y, (x.diagonal(1) + y[1:]).exp()
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows, cols in ((5, 3), (7, 4), (2, 6)):
        x, y = torch.randn(rows, cols), torch.randn(min(rows, cols))
        assert_same(compiled(x, y), fn(x, y))
    # (2, 6) fails the first frame's guard ``y.size(0) - 1 != 1`` (``y[1:]`` has one row there, and a size of 1 is
    # static): one recompile, each frame one symbolic compile
    assert frames_ok() == 2 and minidynamo.counters["recompiles"]["total"] == 1
    assert metrics.symbolic_compiles == 2 and not metrics.symbolic_fallbacks
    assert metrics.fallback_count == 0, metrics.fallback_ops  # before: the two multiplications and the add


def _first_half_times(x, y):
    return x.narrow(0, 0, max(1, x.shape[0] // 2)) * y


def test_a_size_the_guards_pin_to_one_broadcasts_as_one():
    """``max(1, n // 2)`` took a branch while tracing, guarding ``Eq(s77 // 2, 1)``; the first half of ``x`` is then
    one row, which broadcasts against ``y``'s ``s17`` rows. The IR kept the size as ``s77 // 2``, which broadcast
    with nothing, and the multiplication fell back (lowering fuzz --grad --dynamic, seed 51298). A compound size
    the ShapeEnv pins to one value is now that value (``as_size``)."""
    compiled = minidynamo.minicompile(_first_half_times, dynamic=True)
    for rows, others in ((2, 5), (3, 7), (3, 4)):
        x, y = torch.randn(rows, 3), torch.randn(others, 3)
        assert_same(compiled(x, y), _first_half_times(x, y))
    assert frames_ok() == 1 and minidynamo.counters["recompiles"]["total"] == 0
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks
    assert metrics.fallback_count == 0, metrics.fallback_ops


def test_a_size_the_guards_pin_to_one_trains_as_eager():
    minidynamo.reset()
    compiled = minidynamo.minicompile(_first_half_times, dynamic=True)
    for rows, others in ((2, 5), (3, 7)):
        x, y = torch.randn(rows, 3, requires_grad=True), torch.randn(others, 3, requires_grad=True)
        x_ref, y_ref = (t.detach().clone().requires_grad_() for t in (x, y))
        out, expected = compiled(x, y), _first_half_times(x_ref, y_ref)
        assert_same(out, expected)
        out.backward(torch.ones_like(out))
        expected.backward(torch.ones_like(expected))
        assert_same((x.grad, y.grad), (x_ref.grad, y_ref.grad))
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.fallback_count == 0, metrics.fallback_ops


def _first_half_variance(x):
    return x.narrow(0, 0, max(1, x.shape[0] // 2)).var(0)


def test_a_float_size_of_a_max_the_shape_env_decides_compiles_symbolically():
    """``var``'s correction divides by ``ToFloat(Max(1, s77 // 2)) - 1``; the float size refused the ``Max``, and
    each row count trained its own static graph (lowering fuzz --grad, seed 50699). The ShapeEnv decides it
    (``s77 // 2 >= 1``: a size symbol is at least 2) -- once ``min``/``max`` asks both ways round, since ``1 >=
    s77 // 2`` alone is undecided -- so the float size is ``ToFloat(s77 // 2)``."""
    compiled = minidynamo.minicompile(_first_half_variance, dynamic=True)
    for rows in (8, 12, 17):
        x = torch.randn(rows, 5, dtype=torch.float64, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, expected = compiled(x), _first_half_variance(x_ref)
        assert_same(out, expected)
        out.sum().backward()
        expected.sum().backward()
        assert_same(x.grad, x_ref.grad)
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert not metrics.symbolic_fallbacks and metrics.fallback_count == 0


def test_a_call_that_breaks_a_size_guard_of_the_trace_is_compiled_for_its_shape():
    """[Note: guards a symbolic compile adds]: tracing the joint graph of ``view(-1, 4)`` to ATen guards relations
    over ``s0, s1`` (``Ne(s1, s1 // 4)``, ...) that minidynamo's graph never asked.  The compile carries them: a
    caller that checks no frame guards (here the backend's result, called directly) and breaks one gets a static
    compile of its shape and eager's values and gradients, not the symbolic graph."""
    from mininductor import compile_fx
    compiled_graphs = []

    def backend(gm, example_inputs):
        compiled_graphs.append(compile_fx(gm, example_inputs))
        return compiled_graphs[-1]

    def f(x):
        return x.view(-1, 4).sum(1).exp()
    frame = minidynamo.minicompile(f, backend=backend, dynamic=True)
    for shape in ((2, 8), (3, 8)):
        x = torch.randn(shape, requires_grad=True)
        assert_same(frame(x), f(x))
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0 and metrics.size_guards
    x = torch.randn(4, 4, requires_grad=True)  # breaks Ne(s1, s0*s1 // (s0*s1 // 4)); eager is fine
    x_ref = x.detach().clone().requires_grad_()
    out, expected = compiled_graphs[0](x)[0], f(x_ref)
    assert_same(out, expected)
    out.sum().backward()
    expected.sum().backward()
    assert_same(x.grad, x_ref.grad)
    assert metrics.specialisations == 1 and len(compiled_graphs) == 1


def test_size_guards_over_an_inputs_strides_are_read_off_its_strides():
    """``nansum`` of an input with gaps between its rows: the trace compares its stride symbols (``s89 >= s9``),
    which no size holds, so each call reads them off the input's strides (lowering fuzz --dynamic, seed 46073:
    the symbolic compile refused and compiled per shape)."""
    def f(x):
        return x.nansum(2, keepdim=True)
    compiled = minidynamo.minicompile(f, dynamic=True)
    for n, m in ((5, 33), (7, 20), (5, 33)):
        x = torch.randn(n * 8 * m).as_strided((n, 1, m), (8 * m, 4 * m, 2))
        assert_same(compiled(x), f(x))
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.size_guards and not metrics.symbolic_fallbacks


def test_int_inputs_are_kernel_arguments_read_by_call():
    """[Note: int inputs of a symbolic graph]: an int ``n`` used as a slice bound, a size and an operand is a symbol
    like the sizes; ``call`` reads it from its input (``s86 = arg1_1``), so one compile serves every ``(rows, n)``.
    They used to compile once per shape and value.  Slicing guards ``0 <= n <= rows`` (one guard, two facts, which
    ``min(n, rows)`` now reads apart); ``n`` past the rows (eager clamps the slice) is another frame."""
    def fn(x, n):
        return x[:n] * n, x.new_zeros(n, 2) + x[:n, :2], x[:n].reshape(-1) + 1, x.new_ones(n).sum()

    def clamped(x, n):
        return (x[:n] * 2).sum(0)

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows, n in ((6, 2), (8, 5), (9, 3), (8, 5)):
        x = torch.randn(rows, 6, device=DEVICE)
        assert_same(compiled(x, n), fn(x, n))
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert not metrics.symbolic_fallbacks and metrics.fallback_count == 0, metrics.fallback_ops
    compiled = minidynamo.minicompile(clamped, dynamic=True)
    for rows, n in ((6, 2), (8, 5), (3, 5), (2, 7)):
        x = torch.randn(rows, 6, device=DEVICE)
        assert_same(compiled(x, n), clamped(x, n))
    # fn's one frame, then clamped's two: one for n <= rows, one for n > rows
    assert frames_ok() == 3 and metrics.specialisations == 0 and metrics.fallback_count == 0


def test_training_with_an_int_input_compiles_once():
    """An int input in training: the joint graph takes it as a ``SymInt`` primal, the backward reads it as a saved
    int (``_int_primals`` in partitioners.py; the runtime keeps it on ``ctx``), so one symbolic compile serves every
    value, as at inference. Before, each value compiled per shape."""
    def fn(x, w, n):
        return (x[:n] * w).sum() + x.new_ones(n, 3).mul(w).sum() + x.narrow(0, 1, n - 1).square().mean()

    # n - 1 == 1 would be a frame of its own
    trains_once_with_an_int(fn, [(6, 3), (8, 5), (8, 5), (5, 4), (9, 7)])


def test_a_pad_by_an_int_input_compiles_once():
    """``F.pad(x, (0, 0, 0, n))``: whether a dim needs a mask asked ``s77 + s86 > s77`` of sympy, which cannot
    tell for an int of unknown sign (TypeError: every value compiled per shape). Now an undecided dim is masked,
    which is right for any ``n``, a negative one (a crop) too. Its backward pads by ``-s86``."""
    def fn(x, w, n):
        return torch.nn.functional.pad(x * w, (0, 0, 0, n)).cumsum(0)

    trains_once_with_an_int(fn, [(6, 3), (8, 5), (4, 7), (6, -2)], loss=lambda out: out.square().sum())


def test_a_kernel_reads_one_element_at_an_int_inputs_offset():
    """The backward of ``F.pad(x, (0, n)).cumsum(0)`` for a one-element ``x``: its gradient is one element of the
    reversed running sum, read at offset ``n``.  ``n``'s symbol is not positive (an int may be 0), so that
    one-element load was taken for a load along a loop variable, and its scalar pointer met the block mask: Triton
    raised "Mask argument cannot be block type if pointer argument is not a block" (lowering fuzz --grad --zero
    --int, seed 975924)."""
    def fn(x, n):
        return torch.nn.functional.pad(x, (0, n)).cumsum(0)

    compiled = minidynamo.minicompile(fn)
    for n in (3, 4, 6):  # the second call recompiles with n symbolic; the third reuses it
        (x,), (x_ref,) = leaves(torch.randn(1, dtype=torch.float64, device=DEVICE))
        out, ref = compiled(x, n), fn(x_ref, n)
        backward_with_weights(out, ref)
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert frames_ok() == 2 and metrics.fallback_count == 0, metrics.fallback_ops


def test_a_guard_made_in_the_autograd_engines_thread_gets_a_place(monkeypatch):
    """[Note: a guard made in the autograd engine's thread]: for CUDA tensors the training trace's backward runs in
    the engine's device thread, where ``F.pad``'s backward guards ``n`` with no Python frame outside torch; the
    ShapeEnv recorded the place as ``SLoc(None, ...)`` and torch 2.11's ``produce_guards`` raised formatting it
    (this test's function, on the GPU). Here the ShapeEnv finds no user frame on any device, as in that thread: no
    place may reach ``produce_guards`` empty, and values and gradients match eager."""
    from minidynamo.dynamic_shapes import ShapeEnv

    empty = []
    produce_guards = ShapeEnv.produce_guards

    def spy(env, *args, **kwargs):
        places = [g.sloc for g in env.guards] + [p for vr in env.var_to_range_sloc.values() for p in (vr.lower, vr.upper)]
        empty.extend(p for p in places if p.framework_loc is None)
        return produce_guards(env, *args, **kwargs)

    monkeypatch.setattr(ShapeEnv, "_get_user_frame", lambda env: None)
    monkeypatch.setattr(ShapeEnv, "produce_guards", spy)

    def fn(x, n):
        return torch.nn.functional.pad(x, (0, n)).cumsum(0)

    compiled = minidynamo.minicompile(fn)
    for n in (3, 4, 6):
        (x,), (x_ref,) = leaves(torch.randn(2, dtype=torch.float64, device=DEVICE))
        out, ref = compiled(x, n), fn(x_ref, n)
        out.sum().backward()
        ref.sum().backward()
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert frames_ok() == 2 and metrics.fallback_count == 0, metrics.fallback_ops
    assert not empty


def test_a_size_of_two_symbols_is_solved_for_the_unknown_one():
    """``F.pad(x, (0, n))`` returned as it is: its backward gets only the tangent, of ``s40 + s86`` columns, and the
    saved ``n`` (``s86``); ``s40``, the gradient's width, is solved from the two (``_solve_sizes`` in
    graph.py). It compiled per value (lowering fuzz --grad --dynamic --int, seeds 81149, 81199)."""
    def fn(x, n):
        return torch.nn.functional.pad(x, (0, n))

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for cols, n in ((33, 5), (20, 6), (9, 3)):
        (x,), (x_ref,) = leaves(torch.randn(1, cols, device=DEVICE))
        out, ref = compiled(x, n), fn(x_ref, n)
        backward_with_weights(out, ref)
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert not metrics.symbolic_fallbacks, metrics.symbolic_fallbacks


def test_a_broadcast_against_a_floor_of_a_size_the_guards_pin_to_one():
    """``x * x[..., 1::2]`` of ``(rows, 2 or 3)``: the slice is ``floor(s46/2)`` columns, which the guard
    ``Eq((s46//2), 1)`` pins to one, so it broadcasts.  Our ``floor(s46/2)`` (sympy's ``//``) did not match the
    guard's ``FloorDiv``, and the ``mul`` fell back to ATen in training (lowering fuzz --grad --dynamic, seed
    69207)."""
    def fn(x):
        return x * x[..., 1::2]

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows, cols in ((5, 3), (7, 2), (4, 3)):
        (x,), (x_ref,) = leaves(torch.randn(rows, cols, device=DEVICE))
        out, expected = compiled(x), fn(x_ref)
        assert_same(out, expected)
        (out * out).sum().backward()
        (expected * expected).sum().backward()
        assert_same(x.grad, x_ref.grad)
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.fallback_count == 0, metrics.fallback_ops


def test_an_int_input_equal_to_sizes_compiles_symbolically():
    """[Note: an int input equal to sizes]: ``x.reshape(n, -1)`` with ``n == x.numel()`` makes the ShapeEnv replace
    ``n``'s symbol by ``s31*s46``; that placeholder was refused ("a placeholder without a fake tensor or a symbolic
    int") and the graph compiled once per shape (lowering fuzz --grad --int --dynamic, seed 2300251). Now one
    symbolic compile serves every shape, in training; an ``n`` that is not the numel is another graph."""
    def fn(x, n):
        return x.reshape(n, -1).sin() * 2, x + 1

    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    for shape in ((3, 2), (4, 5), (2, 7)):
        (x,), (x_ref,) = leaves(torch.randn(*shape, dtype=torch.float64, device=DEVICE))
        out, ref = compiled(x, x.numel()), fn(x_ref, x_ref.numel())
        (out[0].sum() + out[1].sum()).backward()
        (ref[0].sum() + ref[1].sum()).backward()
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks and metrics.fallback_count == 0
    x = torch.randn(3, 4, device=DEVICE)
    assert_same(compiled(x, 6), fn(x, 6))


def test_a_float_size_through_min_compiles_symbolically():
    """``torch.diag(x).var()`` divides by ``min(rows, cols) - 1``, a float size ``ToFloat(Min(s13, s31))`` the
    symbolic compile refused ("the float size ... (Min)"): one compile per shape (lowering fuzz --grad --zero
    --dynamic, seed 2400751). ``Min``/``Max`` of sizes print as ``min``/``tl.minimum`` like any size now; values
    and gradients, one symbolic compile for four shapes."""
    def fn(x):
        return torch.diag(x).var().cos(), torch.diag(x, 1).mean()

    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    for shape in ((5, 8), (9, 4), (6, 6), (3, 7)):
        (x,), (x_ref,) = leaves(torch.randn(*shape, dtype=torch.float64, device=DEVICE))
        out, ref = compiled(x), fn(x_ref)
        (out[0] + out[1]).backward()
        (ref[0] + ref[1]).backward()
        assert_same((out, x.grad), (ref, x_ref.grad))
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks and metrics.fallback_count == 0


def test_a_backward_size_of_a_shape_and_an_int_input_is_rebuilt():
    """``(b.repeat(n, 1) @ c.t()).reshape(-1)``: the backward views its tangent, of ``n*s20*s20`` elements, as
    ``(n*s20, s20)``, and no saved tensor has ``n*s20`` rows (``b`` is saved, and ``repeat`` is redone).  ``n`` is
    a saved int input; ``_symbol_dims`` did not count it as a holder of its symbol, so the partition refused and
    the graph compiled per shape (lowering fuzz --grad --int --dynamic, seed 6300157).  Now ``n * sym_size(b, 0)``:
    values and gradients as eager's, one symbolic compile."""
    def fn(b, c, n):
        return c @ (c - b).t(), (b.repeat(n, 1) @ c.t()).reshape(-1)

    compiled = minidynamo.minicompile(fn, dynamic=True)
    metrics.reset()
    for rows, n in ((2, 5), (4, 5), (6, 3)):
        (b,), (b_ref,) = leaves(torch.randn(rows, 2, dtype=torch.float64, device=DEVICE))
        c = torch.randn(rows, 2, dtype=torch.float64, device=DEVICE)
        outs, refs = compiled(b, c, n), fn(b_ref, c, n)
        backward_with_weights(outs, refs)
        assert_same((*outs, b.grad), (*refs, b_ref.grad))
    assert_no_per_shape_compile()
