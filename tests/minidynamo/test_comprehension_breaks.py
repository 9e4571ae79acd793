"""Graph breaks inside comprehensions: the graphs before and after the comprehension are kept, on 3.11 (where a
comprehension is a frame of its own) and on 3.12 (inlined, PEP 709: the whole comprehension runs natively and a
resume function starts after it, [Note: a break inside an inlined comprehension]).

Each program is compared with eager (values, the side-effect log passed as an argument, exceptions, grad mode);
the graph and break counts are asserted, per version where they differ.  ``note`` is disabled, so calling it is a
graph break wherever it is called.
"""
from __future__ import annotations

import torch

import minidynamo
from minidynamo.bytecode_transformation import PY312
from minidynamo.inlined_comprehension import inlined_comprehensions
from minidynamo.testing import CompileCounter, check_against_eager, outcome, same


@minidynamo.disable
def note(log, *items):
    log.append(items)


X = torch.tensor([1.0, -2.0, 3.0, 4.0])


def fallback_reasons() -> str:
    return " ".join(minidynamo.counters["eager_fallback"])


# --- where the result goes ------------------------------------------------------------------------------------------
def stored(x, log):
    a = x.sin()
    r = [note(log, "v") or v.cos() for v in x]
    return a + r[0]


def consumed_by_a_call(x, log):
    a = x.sin()
    s = a.sum() + sum([v.item() for v in x])  # NULL and `sum` below the comprehension on the stack
    return a * s


def in_the_middle_of_an_expression(x, log):
    a = x.sin()
    return torch.cat([a, torch.stack([note(log, 0) or v for v in x]), a * 2]).sum() + a


def arguments_after_it(x, log):
    a = x.sin()
    return torch.where(x > 0, torch.stack([note(log, 0) or v for v in a]), a * 3)


def discarded(x, log):
    a = x.sin()
    [note(log, v.item()) for v in x]
    return a + 1


def returned(x, log):
    a = x.sin()
    return [note(log, 0) or v + a for v in x]


def unpacked(x, log):
    a = x.sin()
    p, q, *rest = [note(log, 0) or v for v in a]
    return p + q, rest


def subscripted(x, log):
    a = x.sin()
    return [note(log, 0) or v for v in a][1] * a


def test_a_break_inside_a_comprehension_keeps_the_graphs_around_it():
    for fn in (stored, consumed_by_a_call, in_the_middle_of_an_expression, arguments_after_it, discarded):
        minidynamo.reset()
        minidynamo.counters.clear()
        check_against_eager(fn, X, [], graphs=2, breaks=1, calls=2)
    out = minidynamo.explain(stored)(X, [])
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert "marked minidynamo.disable" in out.break_reasons[0].reason


def test_a_comprehension_returned_or_unpacked():
    for fn in (returned, unpacked, subscripted):
        minidynamo.reset()
        minidynamo.counters.clear()
        # `returned`: nothing after the comprehension but the return (no graph after it)
        check_against_eager(fn, X, [], graphs=1 if fn is returned else 2, breaks=1, calls=2)


# --- the kinds of comprehension -------------------------------------------------------------------------------------
def nested(x, log):
    a = x * 2
    r = [[note(log, i) or u * i for u in v] for i, v in enumerate(x.view(2, 2))]
    return a + torch.stack([torch.stack(q) for q in r]).flatten()


def break_in_the_outer_of_two(x, log):
    a = x * 2
    r = [note(log, i) or [u * i for u in v] for i, v in enumerate(x.view(2, 2))]
    return a, r


def in_the_iterable_of_another(x, log):
    a = x.sin()
    r = [v + 1 for v in [note(log, 0) or u for u in a]]
    return torch.stack(r)


def with_a_data_dependent_condition(x, log):
    a = x + 1
    r = [v * 2 for v in a if v.sum() > 0]
    return a.cos(), r


def dict_comprehension(x, log):
    d = {"a": x, "b": x + 1}
    a = x.abs()
    e = {k: note(log, k) or v * 2 for k, v in d.items()}
    return a + e["b"], e


def set_comprehension(x, log):
    a = x.abs()
    s = {note(log, int(v)) or int(v) for v in (x > 0)}
    return a + len(s), s


def test_nested_conditional_dict_and_set_comprehensions():
    for fn, graphs in ((nested, 2), (break_in_the_outer_of_two, 1), (in_the_iterable_of_another, 2),
                       (with_a_data_dependent_condition, 2), (dict_comprehension, 2), (set_comprehension, 2)):
        minidynamo.reset()
        minidynamo.counters.clear()
        check_against_eager(fn, X, [], graphs=graphs, breaks=1, calls=2)


# --- the comprehension's variables and the frame's locals ------------------------------------------------------------
def loop_variable_shadows_a_local(x, v):
    v = x.cos()  # the traced value, not the argument still in v's slot, is what the comprehension saves
    r = [note([], v) or v * 3 for v in x]
    return v + r[1], v


def reads_locals_of_the_graph(x, w):
    w = w * 3
    k = x.sum()
    r = [note([], 0) or v * w + k for v in x]
    return torch.stack(r) - w


def same_name_as_the_iterable(v):
    a = v.sin()
    return a + torch.stack([note([], 0) or v * 2 for v in v])


def walrus_bound_before(x, log):
    t = x.sum()
    r = [(t := v.item()) for v in x]
    return x * t, r


def walrus_in_the_condition(x, log):
    best = x[0]
    r = [v for v in x if (best := v).sum() > 0 or note(log, 0)]
    return r, best


def walrus_unbound_before_and_not_read(x, log):
    a = x.sin()
    r = [(t := v.item()) + 1 for v in x]  # noqa: F841 - t is not read: nothing to hand on
    return a * r[0]


def test_the_loop_variable_is_restored_and_locals_are_read_as_traced():
    check_against_eager(loop_variable_shadows_a_local, X, X + 1, graphs=2, breaks=1, calls=2)
    minidynamo.reset()
    minidynamo.counters.clear()
    check_against_eager(reads_locals_of_the_graph, X, X + 1, graphs=2, breaks=1, calls=2)
    minidynamo.reset()
    minidynamo.counters.clear()
    check_against_eager(same_name_as_the_iterable, X, graphs=2, breaks=1, calls=2)


def test_walrus_targets_are_handed_on():
    for fn, graphs in ((walrus_bound_before, 2), (walrus_in_the_condition, 1), (walrus_unbound_before_and_not_read, 2)):
        minidynamo.reset()
        minidynamo.counters.clear()
        check_against_eager(fn, X, [], graphs=graphs, breaks=1, calls=2)


def walrus_unbound_before(x, log):
    r = [(t := v.item()) for v in x]
    return x * t, r


def test_a_walrus_target_unbound_before_the_comprehension():
    """3.12: it is bound after the comprehension only if its loop ran, and an empty slot must not be read to hand
    it on: the frame runs eagerly.  3.11: the comprehension's frame assigns its cell."""
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(walrus_unbound_before, backend=cnt)
    for _ in range(2):
        assert same(outcome(compiled, (X, [])), outcome(walrus_unbound_before, (X, [])))
    if PY312:
        assert cnt.frame_count == 0 and "`:=`" in fallback_reasons()
    else:
        assert cnt.frame_count == 2 and not fallback_reasons()


def deleted_then_read(x, w):
    del w
    return [note([], 0) or w for v in x]  # noqa: F821 - w is deleted: an UnboundLocalError


def test_a_deleted_local_read_inside_raises_as_in_eager():
    """Its slot still holds the argument: it is emptied before the native comprehension, whose LOAD_FAST_CHECK
    raises UnboundLocalError (3.11: the comprehension reads a cell, refused when deleted)."""
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(deleted_then_read, backend=cnt)
    expected = outcome(deleted_then_read, (X, X))
    assert expected[0] is (UnboundLocalError if PY312 else NameError)  # 3.11: a free variable of the listcomp
    assert same(outcome(compiled, (X, X)), expected)
    assert cnt.frame_count == 0
    if PY312:
        assert sum(minidynamo.counters["graph_break"].values()) == 1 and not fallback_reasons()


def closure_cell_assigned_before(x, log):
    k = 3
    f = lambda: k
    k = 4
    r = [note(log, f()) or v * k for v in x]
    return torch.stack(r) * k


def test_cells_assigned_before_the_comprehension_are_written_first():
    # 3.12 breaks before iterating x: no graph before it; 3.11 iterated x in a graph
    check_against_eager(closure_cell_assigned_before, X, [], graphs=1 if PY312 else 2, breaks=1, calls=2)


def lambda_captures_the_loop_variable(x, log):
    a = x.sin()
    fs = [lambda: note(log, 0) or v for v in x]  # noqa: B023 - all read the last v, as in eager
    return a, [f() for f in fs]


def test_a_loop_variable_in_a_cell_still_runs_eagerly():
    """3.12 makes a fresh cell per run (``MAKE_CELL`` mid-body): such a frame is never split (``cells_movable``);
    3.11 refuses the lambda made in the comprehension's frame."""
    compiled = minidynamo.minicompile(lambda_captures_the_loop_variable, backend="eager")
    log_c, log_e = [], []
    assert same(compiled(X, log_c), lambda_captures_the_loop_variable(X, log_e)) and log_c == log_e
    assert fallback_reasons()


# --- blocks, loops, several breaks, exceptions, gradients -----------------------------------------------------------
def in_no_grad(x, log):
    with torch.no_grad():
        a = x * 2
        r = [note(log, 0) or v * 2 for v in a]
        b = torch.stack(r) + 1
    return b, torch.is_grad_enabled()


def raises_in_no_grad(x, log):
    with torch.no_grad():
        a = x * 2
        r = [v.item() / 0 for v in a]
    return r


def raises(x, log):
    a = x.sin()
    r = [v.item() / 0 for v in x]
    return a, r


def test_with_blocks_and_exceptions():
    check_against_eager(in_no_grad, X, [], graphs=2, breaks=1, calls=2)
    for fn in (raises_in_no_grad, raises):  # the native comprehension raises: the `with` exit still runs
        minidynamo.reset()
        minidynamo.counters.clear()
        expected = check_against_eager(fn, X, [], graphs=1, breaks=1, calls=2)
        assert expected[0] is ZeroDivisionError and torch.is_grad_enabled()


def in_a_loop(x, log):
    out = x
    for i in range(3):
        out = out + 1
        r = [note(log, i) or v * i for v in out]
        out = torch.stack(r)
    return out


def two_comprehensions(x, log):
    a = x.sin()
    r = [note(log, 0) or v for v in a]
    b = torch.stack(r).cos()
    s = [note(log, 1) or v for v in b]
    return torch.stack(s) + 1


def after_another_break(x, log):
    a = x.sin()
    minidynamo.graph_break()
    b = a.cos()
    r = [note(log, 0) or v for v in b]
    return torch.stack(r) + b


def side_effects_before(x, log):
    log.append("before")
    a = x.sin()
    r = [note(log, len(log)) or v for v in a]
    log.append("after")
    return torch.stack(r)


def test_loops_several_breaks_and_side_effects():
    for fn in (in_a_loop, two_comprehensions, after_another_break, side_effects_before):
        minidynamo.reset()
        minidynamo.counters.clear()
        graphs, breaks = (2, 1) if fn is side_effects_before else (3, 2)
        check_against_eager(fn, X, [], graphs=graphs, breaks=breaks, calls=2)


def test_gradients_flow_through_the_native_comprehension():
    def fn(x, log):
        a = x.sin()
        r = [note(log, 0) or v * 2 for v in a]
        return (torch.stack(r) * a).sum()

    x_e, x_c = X.clone().requires_grad_(), X.clone().requires_grad_()
    cnt = CompileCounter()
    fn(x_e, []).backward()
    minidynamo.minicompile(fn, backend=cnt)(x_c, []).backward()
    assert torch.allclose(x_c.grad, x_e.grad) and cnt.frame_count == 2


def in_a_try_block(x, log):
    a = x.sin()
    try:
        r = [note(log, 0) or v for v in x]
    except ValueError:
        r = []
    return a, r


def test_a_comprehension_in_a_try_block_keeps_the_graph_before_the_try():
    """The break moves to the try statement, which runs eagerly ([Note: a break inside a try block])."""
    check_against_eager(in_a_try_block, X, [], graphs=1, breaks=1, calls=2)


# --- the bytecode ranges (3.12) -------------------------------------------------------------------------------------
def test_the_ranges_of_inlined_comprehensions():
    comps = inlined_comprehensions(nested.__code__)
    if not PY312:
        assert comps == ()
        return
    outer, inner, last = comps  # the two of `r = ...`, then the one in the return
    assert outer.start < inner.start < inner.end < outer.end <= last.start
    assert outer.result_stores == {"r"} and not outer.result_on_stack
    assert inner.result_on_stack and last.result_on_stack
    assert outer.restored == {"i", "v", "u"} and inner.restored == {"u"}
    (w,) = inlined_comprehensions(walrus_bound_before.__code__)
    assert w.assigned_in_loop == {"t"} and w.result_stores == {"r"}
    (d,) = inlined_comprehensions(deleted_then_read.__code__)
    assert "w" in d.reads and "w" not in d.unchecked_reads  # LOAD_FAST_CHECK: maybe deleted


# --- a break in a resume function before a jump that needs EXTENDED_ARG ---------------------------------------------
def brk(t):
    minidynamo.graph_break()
    return t + 1


def loop_of_comprehensions(x, y, log):
    a = x.sin()
    b = y * 2
    for _ in range(1):
        a = torch.cat([a, torch.stack([(v + len([u for u in a if u.item() > 0])) for v in a] + [a.sum()])]).sum() + a
        v = b.cos()
        r = [brk(v) for v in (u + 1 for u in a) if v > 0]
        a = a + v + len(r)
        a = torch.where(a > 0, torch.stack([(v + (w := v * 2)) for v in a * 2][:1] * 4), b * 3)  # noqa: F841
        if a.sum() > 3:  # a break here continues at the loop's jump back: behind an EXTENDED_ARG in the resume code
            break
    return a, b


def test_a_break_before_a_jump_with_an_extended_arg_in_a_resume_function():
    """The resume function's copy of the loop is longer (its prologue), so its jump back needs an ``EXTENDED_ARG``
    the original did not; a break just before that jump continues at the prefix's offset, which must map back to
    the original offset (an internal KeyError before: the frame ran eagerly)."""
    graphs, breaks = (3, 4) if PY312 else (8, 19)
    check_against_eager(loop_of_comprehensions, X, torch.tensor([0.5, 0.25, -1.0, 2.0]), [], graphs=graphs,
                        breaks=breaks, calls=2)
