"""Differential fuzzing, round 5: each program that gave a wrong answer, an internal error or a needless eager
fallback, pinned.

Every test runs a small program eagerly and compiled (on deep copies of the same inputs), compares the results --
values, dtypes, exceptions' types and args -- and the inputs afterwards, then counts graphs, graph breaks and eager
fallbacks.  Budget: a few seconds.
"""
import functools
import types
import warnings

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter
from minidynamo.testing import check_against_eager as _check
from minidynamo.testing import same as _same

X = torch.arange(3.0)


# --- a. a graph whose backward eager itself refuses ----------------------------------------------------------------

def _slice_times_input(x, y):
    y[1:3] = y[1:3] * x[0]  # saves the slice for x's gradient, then overwrites it
    return y.sum(), (x * 2).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_backward_that_eager_refuses_compiles_and_raises_at_backward(backend):
    """``y[1:3] = y[1:3] * x[0]`` with ``x`` requiring grad: eager runs the forward and raises only at
    ``.backward()``.  AOTAutograd traced the backward ahead of time, its ``autograd.grad`` raised, and the frame
    fell back to eager as an "internal error in minidynamo".  Now the graph runs through eager autograd, which
    raises (or not) exactly where eager does."""
    def run(f):
        x, y = torch.arange(1.0, 4.0, requires_grad=True), torch.arange(4.0)
        out, other = f(x, y)
        other.backward()  # a gradient that does not need the overwritten slice: fine in eager too
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()
        return out.detach(), y, x.grad

    expected = run(_slice_times_input)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = run(minidynamo.minicompile(_slice_times_input, backend=backend))
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert not minidynamo.counters["eager_fallback"], minidynamo.counters["eager_fallback"]
    assert minidynamo.counters["stats"]["unique_graphs"] == 1


def test_a_slice_overwritten_by_its_product_with_a_grad_free_factor_trains():
    def fn(x, y):
        z = y * 1
        z[1:3] = z[1:3] * x[0]
        return z.sum()

    def run(f):
        x, y = torch.arange(1.0, 4.0), torch.arange(4.0, requires_grad=True)
        out = f(x, y)
        out.backward()
        return out.detach(), y.grad

    expected = run(fn)
    got = run(minidynamo.minicompile(fn, backend="aot_eager"))
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert not minidynamo.counters["eager_fallback"]


# --- b. an exception leaving a `with` block ------------------------------------------------------------------------

def test_an_exception_leaving_no_grad_in_a_callee_restores_grad_mode():
    """The exception left ``with torch.no_grad()`` in an inlined callee without its ``__exit__``: the graph ran the
    rest with grad disabled, and the transformed code left the caller's process with grad disabled."""
    def fn(x):
        def f():
            with torch.no_grad():
                return 1 / 0
        try:
            f()
        except ZeroDivisionError:
            pass
        return torch.is_grad_enabled(), x * 2

    x = torch.arange(3.0, requires_grad=True)
    got = _check(fn, x)
    assert got[0] is True and got[1].requires_grad and torch.is_grad_enabled()


def test_an_exception_leaving_nested_managers_exits_each():
    def fn(x):
        try:
            with torch.no_grad():
                y = x * 2
                with torch.enable_grad(), torch.autocast("cpu"):
                    raise KeyError(1)
        except KeyError as e:
            z, args = x * 3, e.args
        return torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"), y, z, args

    _check(fn, torch.arange(3.0, requires_grad=True))
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


class _Logged:
    def __init__(self, log, suppress=False):
        self.log, self.suppress = log, suppress

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(("exit", exc_type.__name__ if exc_type else None, exc.args if exc else None))
        return self.suppress


def test_an_exception_leaving_a_user_context_manager_calls_its_exit():
    """Also: ``if exc_type:`` on a class and ``if exc:`` on an exception were 'truth value of ...' refusals."""
    def fn(x, log):
        def f():
            with _Logged(log):
                raise ValueError(7)
        try:
            f()
        except ValueError:
            log.append("caught")
        return x + 1

    _check(fn, X, [])


def test_an_exit_that_suppresses_runs_eagerly():
    def fn(x, log):
        with _Logged(log, suppress=True):
            raise ValueError(7)
        return x + 1

    cnt = CompileCounter()
    log = []
    assert torch.equal(minidynamo.minicompile(fn, backend=cnt)(X, log), X + 1)
    assert log == ["enter", ("exit", "ValueError", (7,))]
    assert "suppress" in next(iter(minidynamo.counters["eager_fallback"]))


# --- c. functions: partials, comprehension frames, functions made in the frame -------------------------------------

_MUL3 = functools.partial(torch.mul, other=3)
_SUB2 = functools.partial(lambda a, b: a - b, b=2)


def test_a_global_partial_with_keywords_only():
    """``functools.partial(f, kw=...)`` has ``args == ()``, a constant: reading its ``.items`` was an internal
    error."""
    def fn(x):
        return _MUL3(x), _SUB2(x)
    _check(fn, X)


def test_a_comprehension_frame_called_at_a_break_gets_its_implicit_argument():
    """A 3.11 comprehension is a function whose argument is named ``.0``; run natively at a graph break, its frame
    was bound through ``inspect.signature``, which calls it ``implicit0``, and the frame fell back to eager
    ("local variable '.0' referenced before assignment")."""
    def make(x):
        return [x * v for v in range(3)]
    listcomps = [c for c in make.__code__.co_consts if isinstance(c, types.CodeType)]
    if not listcomps:
        pytest.skip("comprehensions are inlined (PEP 709)")
    comp = types.FunctionType(listcomps[0], globals(), "listcomp", None, (types.CellType(X),))
    cnt = CompileCounter()
    got = minidynamo.minicompile(comp, backend=cnt)(iter([1, 2]))
    assert _same(got, [X * 1, X * 2])
    assert not minidynamo.counters["eager_fallback"] and cnt.frame_count >= 1


def test_a_function_made_in_the_frame_is_one_object_across_a_break():
    """At the break on ``f.__defaults__ = (5,)`` the generated code rebuilt ``f`` twice: the store went to one
    copy, the resume function got the other, and ``f(x)`` used the old default."""
    def fn(x):
        def f(a, b=1):
            return a * b
        f.__defaults__ = (5,)
        return f(x)
    _check(fn, X, graphs=1, breaks=1)


# --- d. hasattr on objects and modules -----------------------------------------------------------------------------

class _Obj:
    k = 1

    def __init__(self):
        self.t = 1


def test_hasattr_sees_attributes_stored_and_deleted_while_tracing():
    """``hasattr`` asked the real object, which the traced ``o.z = 1`` / ``del o.t`` had not changed yet."""
    def fn(x, o):
        o.z = 1
        del o.t
        return x + 1, hasattr(o, "z"), hasattr(o, "t"), hasattr(o, "k")
    assert _check(fn, X, _Obj())[1:] == (True, False, True)


def test_hasattr_on_an_input_is_guarded():
    """The answer for one object was reused for another object of the same class (no guard)."""
    def fn(x, o, m):
        return x + 1, hasattr(o, "z"), hasattr(m, "extra")

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    plain, extra = _Obj(), _Obj()
    extra.z = 2
    lin, lin_extra = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    lin_extra.extra = True
    assert compiled(X, plain, lin)[1:] == (False, False)
    assert compiled(X, extra, lin_extra)[1:] == (True, True)
    assert compiled(X, plain, lin)[1:] == (False, False)
    assert cnt.frame_count == 2


def test_two_partials_of_one_function_are_distinct_objects():
    """``is`` compared the partials' shared ``func`` tracker: ``p1 is p2`` was True."""
    def fn(x):
        f = torch.mul
        p1, p2 = functools.partial(f, x), functools.partial(f, x)
        p3 = p1
        return p1 is p2, p1 is p3, p1(2)
    assert _check(fn, X)[:2] == (False, True)


def test_a_partial_passed_twice_is_one_object():
    def fn(x, p, q):
        return p is q, q(x)

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    p, other = functools.partial(torch.mul, 2), functools.partial(torch.mul, 2)
    assert compiled(X, p, p)[0] is True
    assert compiled(X, p, other)[0] is False
    assert cnt.frame_count == 2


def test_a_partial_made_in_the_frame_lives_across_a_break():
    """It could not be rebuilt by the generated code: the frame ran eagerly."""
    def fn(x):
        p = functools.partial(lambda a, b, c=1: a * b + c, x, c=2)
        q = p
        minidynamo.graph_break()
        return p(3), q is p, p.keywords
    _check(fn, X, graphs=1, breaks=1)


# --- e. exceptions through cleanup handlers, and breaks inside except blocks ---------------------------------------

def test_an_unmatched_except_passes_the_exception_to_the_outer_try():
    """``RERAISE`` (and the compiler's cleanup handlers) were refused: the frame ran eagerly."""
    def fn(x, log):
        def inner():
            try:
                raise IndexError(3)
            finally:
                log.append("finally")
        try:
            try:
                inner()
            except (ValueError, KeyError):
                return x
        except IndexError as e:
            log.append(e.args)
        return x + len(log)
    _check(fn, X, [])


def test_a_comprehension_that_raises_inside_try():
    """On 3.12 the inlined comprehension's own handler (restoring ``i``) was not traced: the frame ran eagerly."""
    def fn(x):
        i = "outer"
        try:
            ys = [x / (1 - i) if i != 1 else 1 // 0 for i in range(3)]
        except ZeroDivisionError as e:
            ys = str(e)
        return ys, i, x + 1
    _check(fn, X)


def test_no_graph_break_inside_an_except_block():
    """A resume function does not run inside the except block: after a break there, a bare ``raise`` gave
    "RuntimeError: No active exception to reraise", ``sys.exc_info()`` was empty and ``e.__traceback__`` None."""
    import sys

    def fn(x):
        try:
            try:
                raise ValueError("v")
            except ValueError as e:
                minidynamo.graph_break()
                info = sys.exc_info()[0], e.__traceback__ is None
                raise
        except ValueError as e:
            return x + 1, info, e.args

    cnt = CompileCounter()
    assert _same(minidynamo.minicompile(fn, backend=cnt)(X), fn(X))
    assert "except block" in next(iter(minidynamo.counters["eager_fallback"]))


# --- f. generators run up front must not be stale -----------------------------------------------------------------

def test_a_generator_reads_a_variable_changed_after_it_was_made():
    """The translator runs a generator's body when it is made; ``k = 10`` before ``list(g)`` was not seen."""
    def fn(x):
        k = 1
        g = (x * k for _ in range(2))
        k = 10
        return list(g)
    _check(fn, X, graphs=0, breaks=2)


def test_a_generator_sees_items_appended_to_its_list():
    def fn(x):
        xs = [1, 2]
        g = (v * x for v in xs)
        xs.append(3)
        return list(g)
    assert len(_check(fn, X, graphs=0, breaks=2)) == 3


def test_a_generator_resumed_after_its_dict_changed_raises():
    """The body's end (the dict iterator noticing the new key) runs at the ``next`` after the last item."""
    def fn(x, d):
        def keys():
            for k in d:  # noqa: UP028 - the loop is what is being tested
                yield k
        it = keys()
        first = next(it)
        d["b"] = 2
        try:
            rest = list(it)
        except RuntimeError as e:
            rest = str(e)
        return x + 1, first, rest

    cnt = CompileCounter()
    got = minidynamo.minicompile(fn, backend=cnt)(X, {"a": 1})
    assert _same(got, fn(X, {"a": 1}))
    assert not minidynamo.counters["eager_fallback"] or "generator" in next(iter(minidynamo.counters["eager_fallback"]))


def test_a_generator_made_and_consumed_at_once_is_still_one_graph():
    def fn(x):
        k = 2
        total = sum(x * i for i in range(3))
        k = 3
        return total * k, torch.stack(list(x * j for j in range(k)))  # noqa: C400
    _check(fn, X)


def test_generator_methods_are_not_run_on_its_items():
    """``it.throw(...)`` ran on the tuple iterator the traced generator was rebuilt as: AttributeError."""
    def fn(x):
        def g():
            try:
                yield 1
            except ValueError:
                yield 99
        it = g()
        next(it)
        return x * it.throw(ValueError())

    assert _same(minidynamo.minicompile(fn, backend=CompileCounter())(X), fn(X))


def test_an_unfinished_generator_live_at_a_break_is_the_real_one():
    """Rebuilt at the break as a tuple iterator of the items computed up front, it missed ``k = 10`` after the
    break; the break now moves to the generator's call ([Note: a break moved earlier])."""
    def fn(x):
        k = 1
        g = (x * k for _ in range(2))
        minidynamo.graph_break()
        k = 10
        return list(g)
    _check(fn, X, graphs=0, breaks=3)


def test_a_returned_generator_is_a_generator():
    """It was returned as a tuple iterator of its items: no ``send``, and stale once the caller changed ``xs``."""
    def fn(x, xs):
        return (v * x for v in xs)

    xs = [1, 2]
    g = minidynamo.minicompile(fn, backend=CompileCounter())(X, xs)
    xs.append(3)
    assert isinstance(g, types.GeneratorType) and len(list(g)) == 3


# --- g. containers that hold themselves --------------------------------------------------------------------------

def test_a_list_that_contains_itself_is_refused_cleanly():
    """Walking it for graph outputs, or rebuilding it, recursed until RecursionError: an internal error."""
    def returned(x):
        a = [1]
        a.append(a)
        return x * 2, a

    def mutated_input(x, lst):
        lst.append(lst)
        return x + 1

    t, a = minidynamo.minicompile(returned, backend=CompileCounter())(X)
    assert torch.equal(t, X * 2) and a[1] is a
    [reason] = minidynamo.counters["eager_fallback"]
    assert "contains itself" in reason

    minidynamo.reset()
    lst = [1]
    assert torch.equal(minidynamo.minicompile(mutated_input, backend=CompileCounter())(X, lst), X + 1)
    assert lst[1] is lst
    [reason] = minidynamo.counters["eager_fallback"]
    assert "contains itself" in reason


def test_a_list_that_contains_itself_but_stays_in_the_graph():
    def fn(x):
        a = [1]
        a.append(a)
        return x * len(a), a[1] is a
    _check(fn, X)


class _RaisingExit:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append("exit")
        raise KeyError("from exit")


def test_an_exception_raised_by_exit_replaces_the_one_leaving_the_block():
    def fn(x, log):
        def f():
            with _RaisingExit(log):
                raise ValueError(1)
        try:
            f()
        except KeyError as e:
            log.append(e.args)
        except ValueError:
            log.append("the exception __exit__ replaced")
        return x + 1
    _check(fn, X, [])


def test_a_comprehension_variable_captured_by_a_lambda_has_its_own_cell():
    """3.12 (PEP 709): ``LOAD_FAST_AND_CLEAR i; MAKE_CELL i`` gives the comprehension a cell of its own and
    ``STORE_FAST i`` puts the function's cell back.  The translator kept one cell, so ``i = 7`` after the
    comprehension changed what its lambdas returned ([1, 1] in eager, [7, 7] compiled)."""
    def fn(x):
        fs = [lambda: i for i in range(2)]  # noqa: B023 - the late binding is what is tested
        i = 7
        g = lambda: i
        return x * g(), [f() for f in fs]
    assert _check(fn, X)[1] == [1, 1]


def test_a_comprehension_variable_that_is_a_plain_local_inside():
    def fn(x):
        i = 100
        g = lambda: i
        ys = [i * 2 for i in range(3)]
        return x * g(), ys, i
    _check(fn, X)


# --- h. code made by exec() ----------------------------------------------------------------------------------------

_EXEC_SOURCE = '''
import torch
class Ctx:
    def __init__(self, log): self.log = log
    def __enter__(self): self.log.append("enter"); return self
    def __exit__(self, *exc): self.log.append("exit"); return False
def helper(x):
    print("natively")
    return x + 1
def fn(x, log):
    with Ctx(log):
        x = x * 2
    return helper(x)
'''


def test_code_made_by_exec_without_a_module_name():
    """exec() without ``__name__`` in the globals: the class says ``__module__ == "builtins"`` and was folded like
    a builtin over its constant args (the log never saw enter/exit), and a function's ``__module__`` is None
    (``.startswith`` on it was an internal error at the break)."""
    ns: dict = {}
    exec(compile(_EXEC_SOURCE, "<generated>", "exec"), ns)  # noqa: S102 - exec is what is tested
    _check(ns["fn"], X, [], graphs=2, breaks=2)


# --- i. an exception at a graph break inside a `with` block ---------------------------------------------------------

def _raises_natively(t):
    print("runs natively")
    raise ValueError("h")


@pytest.mark.parametrize("manager", ["no_grad", "autocast", "record_function"])
def test_a_native_instruction_that_raises_inside_a_with_block_leaves_it(manager):
    """The graph entered the block and the native call raised: grad mode (autocast) stayed as the block set it
    in the caller's process ([Note: exits when the native instruction raises])."""
    enter = {"no_grad": torch.no_grad, "autocast": lambda: torch.autocast("cpu"),
             "record_function": lambda: torch.autograd.profiler.record_function("r")}[manager]

    def fn(x):
        with enter():
            y = x * 2
            _raises_natively(y)
        return y

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    for _ in range(2):
        with pytest.raises(ValueError, match="h"):
            compiled(X)
        assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
    assert cnt.frame_count == 1  # fn's graph; the callee's frame runs eagerly (its raise is uncaught)
