"""Python's own exceptions from operations the translator runs or emulates while tracing, as CPython raises them.

``int("0x1f", 16)``, ``[1, 2].index(3)``, ``1 in 5``, ``1 // 0``, ``{}.pop("k")``: each was an internal error of the
translator or a refusal, both hidden by the eager fallback.  Now the exception is *observed*
(``exc.raise_observed_exception``): an ``except`` in the traced code catches it and tracing goes on, so the frame
stays one graph; uncaught, the frame breaks there and Python raises it natively.  Every test compares with plain
CPython -- values, the exception's type and ``args`` -- and counts graphs, breaks and eager fallbacks.
Exceptions leaving ``with`` blocks, ``finally`` and ``except`` clauses are in ``test_exceptions_and_with.py``.
(Pinned by the seventh session's fixes of translator errors; once named ``test_translator_errors_seventh.py``;
``range`` and ``len`` by translator fuzz round 10, slices by round 12.)
Budget: ~3 s.
"""
import collections
import math

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter


def _outcome(fn, x):
    try:
        return fn(x)
    except Exception as e:  # noqa: BLE001 - the exception is the result being compared
        return type(e), e.args


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return a == b


def _check(fn, graphs=1, breaks=0, fullgraph=False):
    """``fn`` compiled gives what it gives eagerly, in ``graphs`` graphs with ``breaks`` breaks and no fallback."""
    cnt = CompileCounter()
    x = torch.arange(3.0)
    expected = _outcome(fn, x)
    got = _outcome(minidynamo.minicompile(fn, backend=cnt, fullgraph=fullgraph), x)
    assert _same(got, expected), (got, expected)
    assert not minidynamo.counters["eager_fallback"], minidynamo.counters["eager_fallback"]
    assert sum(minidynamo.counters["graph_break"].values()) == breaks
    assert cnt.frame_count == graphs
    return expected


def _caught(op):
    """A program that runs ``op(x)`` and catches what it raises: (x + 1, its type's name, its args)."""
    def program(x):
        try:
            value = op(x)
        except Exception as e:  # noqa: BLE001
            return x + 1, type(e).__name__, e.args
        return x - 1, value
    return program


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3)])


_net = _Net()
_A, _FIVE, _NONE = "a", 5, None  # globals, not literals: Python and ruff warn about `(x, 1)["a"]`, `1 in 5`
_HALF, _ZERO = 1.5, 0


class _Sized:
    """``len()`` of it is whatever its ``__len__`` returns, as ``slot_sq_length`` takes it (fuzz round 10)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

# (name, op, the exception CPython raises or None): each op runs inside `_caught`
CAUGHT = [
    # 1. int() of a string, with a base: folded over constants
    ("int_hex_base_16", lambda x: int("0x1f", 16), None),
    ("int_base_16", lambda x: int("ff", 16), None),
    ("int_spaces", lambda x: int(" 12 "), None),
    ("int_base_keyword", lambda x: int("12", base=3), None),
    ("int_bad_literal", lambda x: int("z"), ValueError),
    ("float_bad_literal", lambda x: float("abc"), ValueError),
    # 2. sequences and dicts: index / remove / pop of what is not there
    ("list_index_missing", lambda x: [1, 2].index(3), ValueError),
    ("list_with_tensor_index_missing", lambda x: [x, 2].index(3, 1), ValueError),
    ("list_index_window", lambda x: [x, 2, 3].index(2, 1, 2), None),
    ("list_index_window_missing", lambda x: [x, 2, 3].index(2, 2), ValueError),
    ("list_index_negative_start", lambda x: [x, 2, 3].index(3, -1), None),
    ("list_index_by_identity", lambda x: [x, 1].index(x), None),
    ("tuple_index_missing", lambda x: (1, 2).index(3), ValueError),
    ("size_index_missing", lambda x: x.shape.index(7), ValueError),
    ("range_index_missing", lambda x: range(3).index(7), ValueError),
    ("list_remove_missing", lambda x: [1, 2].remove(3), ValueError),
    ("list_pop_empty", lambda x: [].pop(), IndexError),
    ("list_pop_out_of_range", lambda x: [x].pop(5), IndexError),
    ("list_item_out_of_range", lambda x: [x, 1][_FIVE], IndexError),
    ("tuple_item_out_of_range", lambda x: (x, 1)[-_FIVE], IndexError),
    ("tuple_item_not_an_int", lambda x: (x, 1)[_A], TypeError),
    ("size_item_out_of_range", lambda x: x.shape[3], IndexError),
    ("range_item_out_of_range", lambda x: range(3)[5], IndexError),
    ("str_item_out_of_range", lambda x: "abc"[5], IndexError),
    ("dict_pop_missing", lambda x: {"a": x}.pop("b"), KeyError),
    ("dict_pop_missing_with_default", lambda x: {"a": x}.pop("b", 4), None),
    ("dict_popitem_empty", lambda x: {}.popitem(), KeyError),
    ("ordered_dict_popitem_empty", lambda x: collections.OrderedDict().popitem(), KeyError),
    ("set_remove_missing", lambda x: {1, 2}.remove(3), KeyError),
    # 3. `in`, len() and attributes of a constant that has none
    ("in_an_int", lambda x: 1 in _FIVE, TypeError),
    ("in_none", lambda x: 1 in _NONE, TypeError),
    ("len_of_an_int", lambda x: len(5), TypeError),
    ("item_of_an_int", lambda x: _FIVE[0], TypeError),
    ("attribute_of_an_int", lambda x: (5).foo, AttributeError),
    # 4. constant folding that raises
    ("floordiv_by_zero", lambda x: 1 // 0, ZeroDivisionError),
    ("mod_by_zero", lambda x: 1 % 0, ZeroDivisionError),
    ("truediv_by_zero", lambda x: 1 / 0, ZeroDivisionError),
    ("float_overflow", lambda x: 2.0 ** 10000, OverflowError),
    ("int_too_large_for_float", lambda x: float(10 ** 400), OverflowError),
    ("math_domain_error", lambda x: math.sqrt(-1), ValueError),
    ("compare_int_and_str", lambda x: 1 < _A, TypeError),
    # 5. a module list's index out of range: its args are readable in the handler
    ("module_list_out_of_range", lambda x: _net.layers[3], IndexError),
    # 6. range(), len() and list repetition check what they are given (fuzz round 10: internal errors, and 2.5
    #    for a length)
    ("range_of_a_float", lambda x: list(range(_HALF)), TypeError),
    ("range_step_zero", lambda x: list(range(0, 3, _ZERO)), ValueError),
    ("len_returning_a_float", lambda x: len(_Sized(2.5)), TypeError),
    ("len_returning_a_negative_int", lambda x: len(_Sized(-1)), ValueError),
    ("len_returning_true", lambda x: len(_Sized(True)), None),
    ("list_times_a_float", lambda x: [x] * _HALF, TypeError),
    # 7. a slice bound that is no int (fuzz round 12: an internal error)
    ("list_slice_by_a_str", lambda x: [x, 1, 2][1:_A], TypeError),
    ("tuple_slice_by_a_float", lambda x: (x, 1, 2)[_HALF:], TypeError),
]


@pytest.mark.parametrize("name,op,error", CAUGHT, ids=[c[0] for c in CAUGHT])
def test_an_exception_caught_by_the_traced_code_keeps_one_graph(name, op, error):
    result = _check(_caught(op))
    if error is None:
        assert len(result) == 2  # (x - 1, value): nothing raised
    else:
        assert result[1] == error.__name__  # the table says what CPython raises


FULLGRAPH = ["int_hex_base_16", "int_bad_literal", "list_index_missing", "list_pop_empty", "dict_pop_missing",
             "in_an_int", "floordiv_by_zero", "module_list_out_of_range"]


@pytest.mark.parametrize("name", FULLGRAPH)
def test_a_caught_exception_needs_no_break_with_fullgraph(name):
    op = next(c[1] for c in CAUGHT if c[0] == name)
    _check(_caught(op), fullgraph=True)


def test_the_message_names_the_missing_value_as_cpython_does():
    """``list.index``'s words differ across Python versions ("3 is not in list" before 3.13): taken from CPython."""
    def program(x):
        try:
            [1, "a"].index("b")
        except ValueError as e:
            return x + 1, e.args
    _, args = _check(program)
    try:
        [].index("b")
    except ValueError as e:
        assert args == e.args


def test_an_exception_raised_in_a_callee_is_caught_by_the_caller():
    def find(items, value):
        return items.index(value)

    def program(x):
        try:
            return x + find([1, 2], 9)
        except ValueError as e:
            return x - 1, e.args

    _check(program)


def test_a_list_is_unchanged_by_a_remove_that_raised():
    def program(x):
        items = [1, 3]
        try:
            items.remove(2)
        except ValueError:
            items.append(4)
        return x + len(items), items

    _check(program)


def _int(x):
    return x.sin() + int("z")


def _in(x):
    return x.sin() + (1 in _FIVE)


def _floordiv(x):
    return x.sin() * (1 // 0)


def _index(x):
    return x.sin() + [1, 2].index(3)


def _pop(x):
    return x.sin() + {}.pop("k")


@pytest.mark.parametrize("program", [_int, _in, _floordiv, _index, _pop])
def test_an_uncaught_exception_breaks_the_graph_and_python_raises_it(program):
    """``x.sin()`` is the graph; at the break the instruction runs natively and raises CPython's exception."""
    error, _ = _check(program, graphs=1, breaks=1)
    assert error in (ValueError, TypeError, ZeroDivisionError, KeyError)


def test_an_uncaught_exception_with_fullgraph_is_refused():
    compiled = minidynamo.minicompile(lambda x: x + (1 // 0), backend="eager", fullgraph=True)
    with pytest.raises(minidynamo.exc.ObservedException, match="ZeroDivisionError"):
        compiled(torch.ones(2))


def test_remove_compares_tensors_as_cpython_does():
    """``list.remove`` asks ``item is x or item == x`` of each item in turn: an ``==`` between two tensors is
    elementwise (its truth an error in eager), so it is refused with a reason, never an internal error."""
    y = torch.ones(2)

    def by_identity(x):
        items = [x, y]
        items.remove(x)
        return items

    _check(by_identity, graphs=0)  # no tensor operation: no graph

    def by_value(x):
        items = [y, x]
        items.remove(x)  # y == x first: "Boolean value of Tensor with more than one value is ambiguous"
        return items

    with pytest.raises(RuntimeError, match="ambiguous"):
        minidynamo.minicompile(by_value, backend="eager")(torch.zeros(2))
    (reason,) = minidynamo.counters["graph_break"]  # the remove runs natively, and raises
    assert "compares values" in reason and not minidynamo.counters["eager_fallback"]
