"""Python's operators on trackers: ``a + b``, ``a < b``, ``a is b``, ``x in xs``, ``-a``, and the ``a is b or a == b``
that ``in``, ``list.index`` and ``list.remove`` ask of each item.

In:  the translator and two (or one) trackers, with the ``operator`` function the opcode names (``BINARY_OP``,
``COMPARE_OP``, ``IS_OP``, ``CONTAINS_OP``, ``UNARY_*``, or a call of ``operator.add`` & co.).  Out: the result's
tracker.  A tensor operand makes the operation an FX node; a symbolic int among numbers makes a ``SymNodeVariable``;
constants are folded (raising what CPython raises); containers, dict views, bound methods and user objects with
comparison dunders follow Python's rules.

    x + 1              -> TensorVariable (graph: add = x + 1)
    [a] + [b]          -> ListVariable([a, b])
    d.keys() == {"a"}  -> ConstantVariable(True)

Upstream keeps these in ``torch/_dynamo/variables/builtin.py`` (``BuiltinVariable``'s operator handlers); here they
are the one place every opcode handler and container method asks, so they stand alone.
"""
from __future__ import annotations

import inspect
import math
import operator
import types
from collections.abc import Callable
from typing import Any

import torch

from ..exc import unimplemented
from .base import BoundMethodVariable, NotConstant, VariableTracker
from .constant import ConstantVariable, fold, raise_as_observed
from .dicts import DictVariable, DictViewVariable, SetVariable, const_key
from .lists import BaseListVariable, ListVariable, TupleVariable
from .sym_node import OUT_OF_PLACE, SymNodeVariable, is_numeric
from .tensor import IN_PLACE_OPERATORS, TensorVariable, call_graph_op


def identity_value(v: VariableTracker) -> Any:
    """What ``is`` compares: the real object where the tracker wraps one, else the tracker itself."""
    if isinstance(v, ConstantVariable):
        return v.value
    if is_bound_method(v):  # `obj.m` makes a new bound method object each time: `obj.m is obj.m` is False
        return v
    for attr in ("value", "module", "fn"):
        if hasattr(v, attr) and not isinstance(v, (TensorVariable, BaseListVariable, DictVariable)):
            real = getattr(v, attr)
            return v if real is None else real  # an object built while tracing has no real one: the tracker is it
    return v


def is_bound_method(v: VariableTracker) -> bool:
    from .functions import UserMethodVariable
    return isinstance(v, (UserMethodVariable, BoundMethodVariable))


def same_bound_method(a: VariableTracker, b: VariableTracker) -> bool:
    """``obj.m == obj.m``: bound methods are equal when they bind the same object to the same function."""
    if type(a) is not type(b):
        return False
    if isinstance(a, BoundMethodVariable):
        return a.name == b.name and identity_value(a.obj) is identity_value(b.obj)
    return a.fn is b.fn and identity_value(a.obj) is identity_value(b.obj)


def tensor_never_equal(a: VariableTracker, b: VariableTracker) -> bool:
    """Is one side a tensor and the other a value torch cannot compare it with (a string, None, a container)?

    ``torch.ones(2) == "b"``: ``Tensor.__eq__`` returns NotImplemented (torch.eq raises TypeError on a ``str``),
    so does ``str.__eq__``, and Python falls back to identity: ``False``, never an elementwise tensor.  So ``"b" in
    [x, "a"]`` and ``[x, "a"].index("a")`` compare ``x`` without reading its values, as eager does.  A number does
    compare elementwise (``x == 1`` is a tensor, its truth data-dependent)."""
    if not isinstance(a, TensorVariable):
        a, b = b, a
    if not isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return False
    if isinstance(b, (BaseListVariable, DictVariable, SetVariable, DictViewVariable)):
        return True
    return isinstance(b, ConstantVariable) and isinstance(b.value, (str, bytes, type(None), tuple, frozenset))


def identical_or_equal(tx, a: VariableTracker, b: VariableTracker) -> bool:
    """``a is b or a == b``: what ``in``, ``list.index`` and ``list.remove`` ask of each item."""
    if a is b:
        return True
    if tensor_never_equal(a, b):
        return False
    if is_bound_method(a) and is_bound_method(b):
        return same_bound_method(a, b)
    if any(isinstance(v, SymNodeVariable) for v in (a, b)) and not any(isinstance(v, TensorVariable) for v in (a, b)):
        if is_numeric(a) and is_numeric(b):  # `n in (4, 5)` with a symbolic size
            return compare_op(tx, operator.eq, a, b).truth(tx)  # guards the relation it took (s0 == 4)
        return False  # a symbolic int is never equal to a str, None, a container
    if a.is_python_constant() and b.is_python_constant():
        return a.as_python_constant() == b.as_python_constant()
    if user_comparison_owner(a, "__eq__") or user_comparison_owner(b, "__eq__"):
        if identity_value(a) is identity_value(b):
            return True
        result = compare_op(tx, operator.eq, a, b)
        if not result.is_python_constant():
            unimplemented(f"a user __eq__ returned {result.describe()}")
        return bool(result.as_python_constant())
    return identity_value(a) is identity_value(b)


# operator -> (the dunder Python tries on the left operand, the reflected one it tries on the right)
COMPARE_DUNDERS = {operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"),
                   operator.lt: ("__lt__", "__gt__"), operator.le: ("__le__", "__ge__"),
                   operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__")}


def user_comparison_owner(v: VariableTracker, name: str) -> bool:
    """Is ``v`` a user object whose class defines the comparison ``name`` (other than ``object``'s)?"""
    from .user_defined import UserDefinedObjectVariable
    if not isinstance(v, UserDefinedObjectVariable):
        return False
    found = next((k.__dict__[name] for k in v.cls.__mro__ if name in k.__dict__), None)
    return found is not None and found is not getattr(object, name)


def user_comparison(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """``a == b`` (``<``, ...) where a user class defines the comparison: Python calls its dunder, so do we.

    ``a != b`` with only ``__eq__`` defined is ``not a.__eq__(b)`` (``object.__ne__``).  A dunder that is not a
    Python function (a C type's), a ``NotImplemented`` answer, or user objects of two classes (whose reflected
    order Python decides by subclassing) are refused: eager then compares.  None: no user comparison involved.
    """
    from .user_defined import UserDefinedObjectVariable
    name, reflected = COMPARE_DUNDERS[op]
    names = (name, "__eq__") if op is operator.ne else (name,)
    owners = [(v, n) for v, n in ((a, x) for x in names) if user_comparison_owner(v, n)] + \
             [(v, n) for v, n in ((b, x) for x in (reflected, *names[1:])) if user_comparison_owner(v, n)]
    if not owners:
        return None
    if isinstance(a, UserDefinedObjectVariable) and isinstance(b, UserDefinedObjectVariable) and a.cls is not b.cls:
        unimplemented(f"comparison {op.__name__} of objects of two user classes")
    obj, dunder = owners[0]
    other = b if obj is a else a
    if not isinstance(inspect.getattr_static(obj.cls, dunder), types.FunctionType):
        unimplemented(f"{obj.cls.__name__}.{dunder} is not a Python function")
    result = obj.call_method(tx, dunder, [other], {})
    if result.is_python_constant() and result.as_python_constant() is NotImplemented:
        unimplemented(f"{obj.cls.__name__}.{dunder} returned NotImplemented")
    if op is operator.ne and dunder == "__eq__":
        if not result.is_python_constant():
            unimplemented(f"{obj.cls.__name__}.__eq__ returned {result.describe()}")
        return ConstantVariable(not result.as_python_constant())
    return result


def contains(tx, items: list, x: VariableTracker) -> VariableTracker:
    """``x in items``: each item in order, ``is`` then ``==``, as CPython's ``PySequence_Contains``.  An ``==``
    between a tensor and another tensor or a number is elementwise (its truth data-dependent, or an error): refused."""
    for item in items:
        if item is x:
            return ConstantVariable(True)
        if (isinstance(item, TensorVariable) or isinstance(x, TensorVariable)) and not tensor_never_equal(item, x):
            unimplemented("`in` with tensors compares values", "compare indices or use torch.isin")
        if identical_or_equal(tx, item, x):
            return ConstantVariable(True)
    return ConstantVariable(False)


def sym_op(tx, op: Callable, args: list) -> VariableTracker | None:
    """Arithmetic or a comparison with a symbolic int among numbers: one more node in the graph (sym_node.py).

    Where this call's values make Python raise (``s0 // 0``, an overflow) or give a float that is not finite
    (``inf % s0``, ``nan - s0``), the symbols are specialised and Python computes it: sympy cannot represent
    such a value (evaluating it failed inside the ShapeEnv), and a guard on the values is what the answer needs.
    """
    if any(isinstance(a, SymNodeVariable) for a in args) and all(is_numeric(a) for a in args):
        if not finite_on_hints(op, args):
            return fold(tx, op, [a.as_python_constant() for a in args], {})
        return call_graph_op(tx, "call_function", OUT_OF_PLACE.get(op, op), args, {})
    return None


def finite_on_hints(op: Callable, args: list) -> bool:
    """``op`` on this call's values neither raises nor gives an infinite or NaN float, nor a float from an int
    that a float cannot hold exactly (unknown values pass).

    [Note: floats from huge ints]  ``s0 + 2.5`` with ``s0 = 2 ** 70 + 3`` is a SymFloat whose hint is the rounded
    float but whose sympy value is exact: reading it back (the example value) failed the ShapeEnv's own check
    (``1180591620717411303430 != 1.1805916207174113e+21``, an internal error).  Past 2**53 Python's rounding is
    the answer, so such values are specialised and Python computes the float (fuzz round 11).
    """
    values = [a.sym_num.node.hint if isinstance(a, SymNodeVariable) else a.as_python_constant() for a in args]
    if any(v is None for v in values):
        return True
    try:
        result = op(*values)
    except Exception:  # noqa: BLE001 - Python raises for these values: folding raises it
        return False
    if not isinstance(result, float):
        return True
    return math.isfinite(result) and all(not isinstance(v, int) or abs(v) <= 2 ** 53 for v in values)


def binary_op(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if not isinstance(a, TensorVariable) and op in IN_PLACE_OPERATORS:
            op = number_in_place_with_tensor(op, a)
        result = call_graph_op(tx, "call_function", _printable(op, a), [a, b], {})
        if op.__name__.startswith("i") and isinstance(a, TensorVariable) and op is not operator.is_:
            return a  # x += y mutates x and returns it
        return result
    if (result := sym_op(tx, op, [a, b])) is not None:
        return result
    if (result := specialised_sequence_op(tx, op, a, b)) is not None:
        return result
    if (result := inplace_container_op(tx, op, a, b)) is not None:
        return result
    if a.is_python_constant() and b.is_python_constant() and not isinstance(a, ListVariable):
        return fold(tx, op, [a.as_python_constant(), b.as_python_constant()], {})
    if isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable) and op in (operator.add, operator.iadd):
        if op is operator.iadd and isinstance(a, ListVariable):
            return a.call_method(tx, "__iadd__", [b], {})
        if a.python_type() is not b.python_type() and not (isinstance(a, TupleVariable) and isinstance(b, TupleVariable)):
            unimplemented(f"can only concatenate {a.python_type().__name__} to the same type")
        return type(a)(a.items + b.items) if type(a) in (ListVariable, TupleVariable) else TupleVariable(a.items + b.items)
    if isinstance(a, BaseListVariable) and b.is_python_constant() and op in (operator.mul, operator.imul):
        try:
            items = a.items * b.as_python_constant()
        except TypeError as e:  # [x] * 1.5: CPython's TypeError, observed
            raise_as_observed(e, f"{op.__name__} raised TypeError: {e} while tracing")
        return (ListVariable if isinstance(a, ListVariable) else TupleVariable)(items)
    if (isinstance(a, DictViewVariable) or isinstance(b, DictViewVariable)) and op in SET_OPERATORS:
        return view_set_op(tx, op, a, b)
    if isinstance(a, DictVariable) and isinstance(b, DictVariable) and op in (operator.or_,):
        return DictVariable({**a.items, **b.items})
    from .user_defined import UserDefinedObjectVariable
    if isinstance(a, UserDefinedObjectVariable):
        dunder = f"__{op.__name__.strip('_')}__"
        return a.call_method(tx, dunder, [b], {})
    unimplemented(f"operator {op.__name__} on {a.describe()} and {b.describe()}")


def number_in_place_with_tensor(op: Callable, a: VariableTracker) -> Callable:
    """``n += t`` with a number ``n`` and a tensor ``t``: a number has no ``__iadd__``, so Python computes
    ``n + t`` (a new tensor) and rebinds ``n``; the graph records the out-of-place operator.  Recorded as
    ``operator.iadd(3, t)`` it was an FX node that prints as ``3 += t`` (a SyntaxError when the graph's code is
    compiled).  A list or another object with its own in-place method (``xs += t`` extends ``xs`` by the
    tensor's rows) runs in Python at a graph break."""
    if not is_numeric(a) or op not in OUT_OF_PLACE:
        unimplemented(f"in-place {op.__name__} of {a.describe()} with a tensor",
                      "Python runs it at a graph break; write `v = v + t` to keep one graph")
    return OUT_OF_PLACE[op]


def is_sequence(v: VariableTracker) -> bool:
    return isinstance(v, BaseListVariable) or isinstance(v, ConstantVariable) and isinstance(v.value,
                                                                                           (str, bytes, tuple))


def specialised_sequence_op(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """``"%d" % n``, ``"ab" * n``, ``[0] * (n - 3)`` with a symbolic ``n``: the result's length or digits need
    its value, so ``n`` is specialised (a guard pins it), as upstream does ([Note: formatting a symbolic
    number]).  None for anything else."""
    if op in (operator.mod, operator.imod) and isinstance(b, SymNodeVariable) and a.is_python_constant() \
            and isinstance(a.as_python_constant(), (str, bytes)):
        return fold(tx, op, [a.as_python_constant(), b.as_python_constant()], {})
    if op in (operator.mul, operator.imul):
        if isinstance(a, SymNodeVariable) and is_sequence(b):  # n * seq repeats seq as seq * n does
            return binary_op(tx, operator.mul, b, ConstantVariable(a.as_python_constant()))
        if isinstance(b, SymNodeVariable) and is_sequence(a):
            return binary_op(tx, op, a, ConstantVariable(b.as_python_constant()))
    return None


def _printable(op: Callable, a: VariableTracker) -> Callable:
    """``op``, or ``torch.pow`` for ``(-2) ** x``: FX prints ``operator.pow(-2, x)`` as ``-2 ** x``, which Python
    reads as ``-(2 ** x)`` when the graph's code runs (``(-2) ** 4`` gave -16).  ``x`` is a tensor here, and
    ``torch.pow(-2, x)`` is what ``Tensor.__rpow__`` calls."""
    if op in (operator.pow, operator.ipow) and a.is_python_constant():
        value = a.as_python_constant()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.copysign(1, value) < 0:
            return torch.pow
    return op


SET_OPERATORS = (operator.and_, operator.or_, operator.sub, operator.xor)
INPLACE_SET_OPERATORS = (operator.iand, operator.ior, operator.isub, operator.ixor)


def inplace_container_op(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """``xs *= 2``, ``s |= t``, ``d |= e``: the mutable container on the left changes in place and stays the same
    object (another name for it, or the caller's argument, sees the change).  None where Python would build a new
    object instead (``fs |= t`` on a frozenset, ``s |= d.keys()``, which falls back to ``dict_keys.__ror__``)."""
    if isinstance(a, ListVariable) and op is operator.imul and b.is_python_constant():
        return a.call_method(tx, "__imul__", [b], {})
    if isinstance(a, SetVariable) and a.user_cls is set and op in INPLACE_SET_OPERATORS and (
            isinstance(b, SetVariable) or isinstance(b, ConstantVariable) and isinstance(b.value, frozenset)):
        return a.call_method(tx, f"__{op.__name__}__", [b], {})
    if isinstance(a, DictVariable) and op is operator.ior and isinstance(b, (DictVariable, BaseListVariable)):
        a.call_method(tx, "update", [b], {})
        return a
    return None


def view_set_op(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    """``d1.keys() & d2.keys()``, ``d.keys() - {"x"}``...: the result is a new ``set`` of constants."""
    def as_set(v):
        if isinstance(v, DictViewVariable):
            return v.as_python_set()
        if isinstance(v, SetVariable) or v.has_unpack_var_sequence(tx):
            return {const_key(i) for i in v.unpack_var_sequence(tx)}
        unimplemented(f"operator {op.__name__} on {a.describe()} and {b.describe()}")
    return SetVariable([ConstantVariable(v) for v in op(as_set(a), as_set(b))])


def view_equality(a: VariableTracker, b: VariableTracker) -> bool | None:
    """``d.keys() == {"a", "b"}``: a keys (or items) view equals any set-like with the same elements, as
    ``dict_keys.__eq__`` says; None where no view is involved, or a values view (which compares by identity)."""
    views = [v for v in (a, b) if isinstance(v, DictViewVariable) and v.kind != "values"]
    if not views:
        return None
    def as_set(v):
        if isinstance(v, DictViewVariable) and v.kind != "values":
            return v.as_python_set()
        if isinstance(v, SetVariable) or v.is_python_constant() and isinstance(v.as_python_constant(), frozenset):
            return set(v.as_python_constant())
        return None
    left, right = as_set(a), as_set(b)
    return None if left is None or right is None else left == right


def compare_op(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return call_graph_op(tx, "call_function", op, [a, b], {})
    if (result := sym_op(tx, op, [a, b])) is not None:
        return result
    if (result := user_comparison(tx, op, a, b)) is not None:
        return result
    if op in (operator.eq, operator.ne) and is_bound_method(a) and is_bound_method(b):  # not their functions
        return ConstantVariable(same_bound_method(a, b) is (op is operator.eq))
    try:
        return fold(tx, op, [a.as_python_constant(), b.as_python_constant()], {})
    except NotConstant:
        pass
    if op in (operator.eq, operator.ne) and (result := view_equality(a, b)) is not None:
        return ConstantVariable(result if op is operator.eq else not result)
    if op in (operator.eq, operator.ne):
        same = identical_or_equal(tx, a, b)
        return ConstantVariable(same if op is operator.eq else not same)
    unimplemented(f"comparison {op.__name__} of {a.describe()} and {b.describe()}")


def is_op(tx, a: VariableTracker, b: VariableTracker) -> bool:
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return a is b
    return identity_value(a) is identity_value(b)


def unary_op(tx, op: Callable, a: VariableTracker) -> VariableTracker:
    if isinstance(a, SymNodeVariable) and op is operator.invert and a.python_type() is int:
        return fold(tx, op, [a.as_python_constant()], {})  # torch.SymInt has no __invert__: specialise ~n
    if isinstance(a, (TensorVariable, SymNodeVariable)):
        return call_graph_op(tx, "call_function", op, [a], {})
    if a.is_python_constant():
        return fold(tx, op, [a.as_python_constant()], {})
    from .user_defined import UserDefinedObjectVariable
    if isinstance(a, UserDefinedObjectVariable):
        return a.call_method(tx, f"__{op.__name__.strip('_')}__", [], {})
    unimplemented(f"operator {op.__name__} on {a.describe()}")
