"""Functions made or called in the traced frame: ``functools.partial`` objects (identity, keywords, living across a
break), functions and lambdas made in the frame, comprehension frames and the cells of their variables, code
made by ``exec()``, and a ``functools.wraps`` wrapper compiled as a frame of its own.

Found by differential fuzzing, rounds 5 and 7.  Every test compares with the plain function (results, object
identity, the side-effect log) and counts graphs, graph breaks and eager fallbacks.  Budget: ~2 s.
"""
import dis
import functools
import types

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter, outcome
from minidynamo.testing import check_against_eager as _check
from minidynamo.testing import same as _same

X = torch.arange(3.0)


# --- functions: partials, comprehension frames, functions made in the frame (fuzz round 5) --------------------------

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


# --- the identity of partials (fuzz round 5) ------------------------------------------------------------------------

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


# --- comprehension variables and their cells (fuzz round 5) ---------------------------------------------------------

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


# --- code made by exec() (fuzz round 5) -----------------------------------------------------------------------------

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


# --- a functools.wraps wrapper compiled as a frame binds its own parameters (fuzz round 7) --------------------------

def _wrapped(t, scale=2):
    return t * scale


@functools.wraps(_wrapped)
def _forwarding(*args, **kwargs):
    return _wrapped(*args, **kwargs) + len(args)


def test_a_wraps_wrapper_frame_binds_its_own_parameters():
    """The frame's locals were bound with ``inspect.signature``, which follows ``__wrapped__``: ``_forwarding``'s
    frame got ``t`` and ``scale`` instead of ``args`` and ``kwargs``, found ``args`` unbound and ran eagerly.
    ``@contextlib.contextmanager``'s ``helper(*args, **kwds)`` -- called by the code around a ``with`` that
    breaks -- ran eagerly for the same reason."""
    _check(_forwarding, X)
    _check(lambda x: _forwarding(x, scale=3), X)


def test_a_contextmanager_factory_compiled_as_a_frame_binds_args():
    import contextlib

    @contextlib.contextmanager
    def cm(tag):
        yield tag + 1

    compiled = minidynamo.minicompile(cm, backend=CompileCounter())
    with compiled(5) as v:
        assert v == 6
    # the frame itself traces; the manager it returns escapes it, which refuses for that reason (not `args`)
    assert list(minidynamo.counters["eager_fallback"]) == [
        "a _GeneratorContextManager object built inside the compiled function escapes it"]


# --- defaults read at each call (fuzz round 9) ----------------------------------------------------------------------
# The frame's signature was cached per code object *with its defaults*: ``f.__defaults__ = (1,)`` between calls was
# ignored (``f(x)`` still multiplied by the first call's default, a wrong answer), and so were the different
# defaults of two closures made by one ``def`` ([Note: defaults are read at each call]).

def test_changed_defaults_of_the_compiled_frame_are_used():
    def fn(x, s=2, *args, k=3, **kw):
        return x * s + k, args, kw

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    for i in range(4):
        fn.__defaults__ = (i,)
        fn.__kwdefaults__ = {"k": 10 * i}
        assert _same(compiled(X), fn(X))
        assert _same(compiled(X, 5, k=1), fn(X, 5, k=1))
    assert not minidynamo.counters["eager_fallback"] and not minidynamo.counters["graph_break"]
    assert cnt.frame_count == 2  # s=0, k=0 pinned; then s and k change: automatic dynamic makes them symbols


def test_closures_of_one_def_keep_their_own_defaults():
    """Each callee breaks the graph (``print``), so it is compiled as a frame of its own, in the caller's context:
    both closures share one code object, and each must bind its own default (the second one's graph multiplied
    by the first one's ``s``: 11 instead of 21)."""
    def make(k):
        def scale(x, s=k):
            y = x * s
            print("scale")
            return y
        return scale

    one, two = make(1), make(2)

    def fn(x):
        return one(x) + two(x) * 10

    _check(fn, X, graphs=3, breaks=4)  # fn breaks at each call; each callee frame breaks at its print


# --- cells read before assignment after a break (fuzz round 12) -----------------------------------------------------

def _unbound_cell_after_a_break(x):
    print(end="")
    t[0] = 1  # noqa: F821 - t is assigned below: a local (and a cell, read_t captures it), unbound here
    t = x + 1

    def read_t():
        return t
    return read_t()


def test_an_unbound_cell_read_after_a_break_raises_unbound_local_error():
    """Fuzz round 12: a resume function's cells are free variables, and CPython words an empty free variable as
    NameError, an empty cell as UnboundLocalError.  The resume function checks the cell before the read
    ([Note: unbound cells in resume functions]); found empty while tracing, the check is a graph break of its
    own: the resume function runs eagerly."""
    expected = outcome(_unbound_cell_after_a_break, (X,))
    assert expected[0] is UnboundLocalError
    assert _same(outcome(minidynamo.minicompile(_unbound_cell_after_a_break), (X,)), expected)
    # uncaught, the check's error sends the resume function to eager (a break inside the check has nowhere to go)
    assert dict(minidynamo.counters["eager_fallback"]) == {"local variable 't' read while unbound": 1}


def _cell_maybe_assigned_then_caught(x, flag):
    if flag:
        y = x + 1
    read_y = lambda: y  # noqa: F841 - makes y a cell
    print(end="")
    try:
        return y * 2
    except UnboundLocalError as e:  # a NameError from the resume function would not be caught
        return str(e)


def test_an_unbound_cell_is_caught_by_except_unbound_local_error_after_a_break():
    """Caught in the traced code, the check's error is traced too; the entry is guarded to get the cell empty."""
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(_cell_maybe_assigned_then_caught, backend=cnt)
    for flag in (False, True, False, True):
        assert _same(compiled(X, flag), _cell_maybe_assigned_then_caught(X, flag))
    assert dict(minidynamo.counters["graph_break"]) == {
        "`print` writes to stdout (a side effect the graph cannot hold)": 2}  # once per flag: y is guarded
    assert not minidynamo.counters["eager_fallback"]
    assert minidynamo.counters["recompiles"]["total"] == 2 and cnt.frame_count == 2  # x + 1, y * 2: flag True


def _cell_deleted_after_a_break(x):
    y = x + 1
    read_y = lambda: y  # noqa: F841, F821 - makes y a cell
    print(end="")
    del y
    try:
        return y  # noqa: F821 - deleted above: Python raises UnboundLocalError
    except UnboundLocalError as e:
        return str(e)


def test_a_cell_deleted_after_a_break_then_read_raises_unbound_local_error():
    expected = _cell_deleted_after_a_break(X)
    assert expected.startswith("cannot access local variable 'y'")
    assert minidynamo.minicompile(_cell_deleted_after_a_break)(X) == expected
    # the resume function traces the check's error, then runs eagerly: a cell the traced code deleted is not
    # written back at its return (graph_break.cell_stores)
    assert list(minidynamo.counters["eager_fallback"]) == [
        "cell variable 'y' deleted (del) before a graph break or return"]


def _cell_assigned_after_a_break(x):
    print(end="")
    y = x + 1
    read_y = lambda: y
    return y * 2 + read_y()


def _cell_assigned_before_a_break(x):
    y = x + 1
    read_y = lambda: y
    print(end="")
    return y * 2 + read_y()


def _reads_checked_after_print(fn) -> int:
    from minidynamo.bytecode_analysis import cell_reads_maybe_unbound
    at_print = next(i.offset for i in dis.get_instructions(fn) if i.argval == "print")
    return len(cell_reads_maybe_unbound(fn.__code__, at_print))


def test_a_read_after_a_store_on_every_path_is_not_checked():
    assert _reads_checked_after_print(_cell_maybe_assigned_then_caught) == 1  # `return y * 2`
    assert _reads_checked_after_print(_cell_assigned_after_a_break) == 0
    # A resume function serves every call, with the cell full or empty: a read before any store is checked, and
    # costs nothing in the graph when the cell holds a value.
    assert _reads_checked_after_print(_cell_assigned_before_a_break) == 1
    _check(_cell_assigned_before_a_break, X, graphs=2, breaks=1, calls=2)
    minidynamo.reset()
    _check(_cell_assigned_after_a_break, X, graphs=1, breaks=1, calls=2)


def _cell_read_in_a_branch_after_a_break(x, flag):
    if flag:
        t = x + 1
    read_t = lambda: t  # noqa: F841 - makes t a cell
    print(end="")
    if x.sum() > 0:  # a data-dependent jump: its fall-through is the check before `t`'s read
        return t * 2
    return x


def test_a_break_that_continues_at_a_cell_check_resumes_at_the_read_it_guards():
    """Translator fuzz (seeds 21100008, 21100380 and two more, Python 3.12): a break whose next instruction, or
    jump target, is a cell check continued at an offset that mapped to no instruction of the original (an
    internal error: KeyError).  The check's first instruction maps to the read it guards."""
    _check(_cell_read_in_a_branch_after_a_break, X + 1, True, graphs=3, breaks=2, calls=2)
    minidynamo.reset()
    expected = outcome(_cell_read_in_a_branch_after_a_break, (X + 1, False))
    assert expected[0] is UnboundLocalError
    assert _same(outcome(minidynamo.minicompile(_cell_read_in_a_branch_after_a_break), (X + 1, False)), expected)
    assert dict(minidynamo.counters["eager_fallback"]) == {"local variable 't' read while unbound": 1}


def _default_step(x):
    return x * 2


@minidynamo.disable
def _disabled_step(x):
    return x - 1


def _scaled_by(k):
    return lambda x: x * k


@pytest.mark.parametrize("step, graphs, breaks", [
    (None, 1, 0), (_default_step, 1, 0), (lambda x: x + 5, 1, 0), (_disabled_step, 1, 1), (_scaled_by(4), 1, 0),
    (torch.relu, 1, 0), (torch.nn.functional.softplus, 1, 0), (abs, 1, 0),
])
def test_a_function_is_true_in_an_or_and_an_if(step, graphs, breaks):
    """``step = hook or default`` and ``if hook:`` on a function, a lambda, a disabled function, a closure, a
    torch function, a builtin or a ``functools.partial``: each is always true (its type has no ``__bool__`` or
    ``__len__``).  Refused as "truth value of
    function", the whole frame ran eagerly (found writing a test of the native stretch).  Calling the disabled one
    breaks the graph, as always."""
    def fn(x, hook):
        chosen = hook or _default_step
        y = chosen(x)
        if hook:
            y = y + 1
        made_here = functools.partial(torch.mul, other=2)  # a partial made while tracing; _MUL3, one read from G
        return y * 3 if not (_default_step and made_here and _MUL3 and torch.sin and len) else made_here(y)
    _check(fn, X, step, graphs=graphs, breaks=breaks)
