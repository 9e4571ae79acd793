"""Graph breaks inside ``try`` blocks: the graph of the code before the outermost ``try`` is kept, and the try
statement and the rest of the frame run eagerly in a resume function that is never translated, so the user's
handlers see what eager gives ([Note: a break inside a try block]; upstream compiles up to its last checkpoint
outside the block and runs the rest of the bytecode).  Before, the whole frame ran eagerly.

Each program is compared with eager (values, the side-effect log passed as an argument, exceptions, grad mode),
with graph and break counts asserted (the same on 3.11 and 3.12).  ``note`` is disabled: calling it is a break.
"""
from __future__ import annotations

import sys

import torch

import minidynamo
from minidynamo.testing import CompileCounter, check_against_eager, same


@minidynamo.disable
def note(log, *items):
    log.append(items)


X = torch.tensor([1.0, -2.0, 3.0, 4.0])


def caught_by_the_handler(x, log):
    a = x.sin()
    try:
        b = a.sum().item()
        c = int("nope") if b < 100 else b
    except ValueError as e:
        c = str(e)
    return a + 1, c


def try_finally(x, log):
    a = x.sin()
    try:
        note(log, 0)
        a = a * 2
    finally:
        note(log, 1)
        a = a + 1
    return a.cos()


def nested_tries(x, log):
    a = x.sin()
    try:
        try:
            note(log, 0)
            b = a[10]
        except IndexError:
            b = a.cos()
    except RuntimeError:
        b = None
    return a, b


def in_an_except_block_of_a_try_finally(x, log):
    a = x.sin()
    try:
        raise KeyError("k")
    except KeyError:
        note(log, 0)
        b = a + 1
    finally:
        log.append("finally")
    return b


def returns_inside(x, log):
    a = x.sin()
    try:
        note(log, 0)
        return a * 2
    except KeyError:
        return a


def raises_through_a_finally(x, log):
    a = x.sin()
    try:
        note(log, 0)
        return a / int("x")
    finally:
        log.append("finally")


def handler_sees_the_exception(x, log):
    a = x.sin()
    try:
        note(log, 0)
        raise ValueError("v")
    except ValueError:
        kind = sys.exc_info()[0]
        try:
            raise
        except ValueError as e:
            has_traceback = e.__traceback__ is not None
    return a, kind, has_traceback


def may_leave_a_local_unbound(x, log):
    a = x.sin()
    try:
        note(log, 0)
        y = a * 2
    except KeyError:
        pass
    return y


def test_a_break_inside_a_try_block_keeps_the_graph_before_it():
    for fn in (caught_by_the_handler, try_finally, nested_tries, in_an_except_block_of_a_try_finally,
               returns_inside, raises_through_a_finally, handler_sees_the_exception, may_leave_a_local_unbound):
        minidynamo.reset()
        minidynamo.counters.clear()
        check_against_eager(fn, X, [], graphs=1, breaks=1, calls=2)
    out = minidynamo.explain(caught_by_the_handler)(X, [])
    assert out.graph_count == 1 and out.graph_break_count == 1 and ".item()" in out.break_reasons[0].reason


def test_the_resume_function_at_the_try_runs_eagerly():
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(try_finally, backend=cnt)
    log_c, log_e = [], []
    assert same(compiled(X, log_c), try_finally(X, log_e)) and log_c == log_e
    ctx = compiled._minidynamo_ctx
    skipped = [code.co_name for code in ctx.skipped]
    assert len(skipped) == 1 and skipped[0].startswith("__resume_at_")
    assert "try block" in ctx.skipped[next(iter(ctx.skipped))].reason
    assert cnt.frame_count == 1 and not minidynamo.counters["eager_fallback"]


def in_a_loop(x, log):
    out = x
    for i in range(3):
        out = out + 1
        try:
            note(log, i)
            out = out * 2
        except KeyError:
            pass
    return out


def in_no_grad(x, log):
    with torch.no_grad():
        a = x * 2
        try:
            note(log, 0)
            b = a + 1
        except KeyError:
            b = None
    return b, torch.is_grad_enabled()


def with_a_comprehension(x, log):
    a = x.sin()
    try:
        r = [note(log, 0) or v for v in a]
    except ValueError:
        r = []
    return torch.stack(r) + a


def test_loops_with_blocks_and_comprehensions():
    for fn in (in_a_loop, in_no_grad, with_a_comprehension):
        minidynamo.reset()
        minidynamo.counters.clear()
        check_against_eager(fn, X, [], graphs=1, breaks=1, calls=2)


def in_an_except_block(x, log):
    a = x.sin()
    try:
        raise KeyError("k")
    except KeyError:
        note(log, 0)
        b = a + 1
    return b


def test_a_break_in_the_except_block_of_an_outermost_try_is_still_refused():
    """[Note: no graph break in an except block]: the frame runs eagerly."""
    compiled = minidynamo.minicompile(in_an_except_block, backend="eager")
    log_c, log_e = [], []
    assert same(compiled(X, log_c), in_an_except_block(X, log_e)) and log_c == log_e
    assert any("except block" in r for r in minidynamo.counters["eager_fallback"])


def try_that_always_raises_in_no_grad(x, log):
    a = x.sin()
    with torch.no_grad():
        try:
            if a.sum() > 0:  # a break: the try statement runs eagerly from its first instruction
                a = a - 1
            raise ValueError("v")
        except ValueError as e:
            a = a * len(str(e))
    return a, torch.is_grad_enabled()


def test_resuming_at_the_first_instruction_of_a_try_in_a_with_block():
    """The resume function's jump lands before the try block's TryBegin: landed past it, assembling it failed
    ("negative stack size", an internal error: the frame ran eagerly) when the try's body always raises
    ([Note: resuming at the first instruction of a try block])."""
    check_against_eager(try_that_always_raises_in_no_grad, X, [], graphs=1, breaks=1, calls=2)
