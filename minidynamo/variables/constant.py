"""Python constants: numbers, strings, None, dtypes, devices, ... folded while tracing.

Operations on constants run at trace time (``1 + 2`` becomes ``3``); the guard installed when the constant was read
from an input (EQUALS_MATCH) makes that safe.  Mirrors ``torch/_dynamo/variables/constant.py``.
"""
from __future__ import annotations

import operator
from typing import Any, NoReturn

import torch

from ..exc import raise_observed_exception, unimplemented
from .base import BoundMethodVariable, VariableTracker

LITERAL_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented))
CONSTANT_TYPES = LITERAL_TYPES + (torch.dtype, torch.device, torch.layout, torch.memory_format)


def is_constant_value(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset):
        return all(is_constant_value(v) for v in value)
    return type(value) in CONSTANT_TYPES


class ConstantVariable(VariableTracker):
    def __init__(self, value: Any, **kw):
        super().__init__(**kw)
        self.value = value

    def as_python_constant(self):
        return self.value

    def python_type(self):
        return type(self.value)

    def truth(self, tx) -> bool:
        return bool(self.value)

    def python_attr(self, name: str) -> Any:
        """``getattr(value, name)``; missing (``(5).foo``), CPython's AttributeError, catchable by the traced code."""
        try:
            return getattr(self.value, name)
        except AttributeError as e:
            raise_as_observed(e, f"{type(self.value).__name__} object has no attribute {name!r}")

    def var_getattr(self, tx, name):
        attr = self.python_attr(name)
        if callable(attr):
            return BoundMethodVariable(self, name)
        return ConstantVariable(attr)

    def call_method(self, tx, name, args, kwargs):
        if name == "join" and isinstance(self.value, (str, bytes)) and len(args) == 1 and not kwargs \
                and not args[0].is_python_constant() and args[0].has_unpack_var_sequence(tx):
            # ", ".join(map(str, x.shape)), "".join(s for s in parts): join runs the iterable out; its items may be
            # constants even when the iterator over them is not one (upstream: ConstantVariable.call_method)
            from .lists import ListVariable
            args = [ListVariable(args[0].unpack_var_sequence(tx))]
        try:
            a = [x.as_python_constant() for x in args]
            k = {n: x.as_python_constant() for n, x in kwargs.items()}
        except Exception:  # noqa: BLE001 - an argument that is not a constant, whatever it raised
            unimplemented(f"method {name!r} of constant {self.value!r} with non-constant arguments")
        if name in DUNDER_OPERATORS:  # `1 in 5`, `len(5)`, `5[0]`: the operator, for CPython's own TypeError
            return fold(tx, DUNDER_OPERATORS[name], [self.value, *a], k)
        return fold(tx, self.python_attr(name), a, k)

    def has_unpack_var_sequence(self, tx):
        return isinstance(self.value, (str, bytes))

    def unpack_var_sequence(self, tx):
        if isinstance(self.value, (str, bytes, tuple)):
            return [ConstantVariable(v) for v in self.value]
        return super().unpack_var_sequence(tx)

    def reconstruct(self, codegen):
        codegen.load_const(self.value)

    def describe(self):
        return f"constant {self.value!r}"

    def _repr_body(self):
        return repr(self.value)


def fold(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """Run ``fn`` on Python values now and wrap the result (constant folding)."""
    from .builder import wrap_constant_result

    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - whatever CPython raises here, the traced code raises
        raise_as_observed(e, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e} while tracing")
    return wrap_constant_result(result)


def holds_state_across_calls(cls: type) -> bool:
    """[Note: folding a constructor]  A library class called on constants is folded: run now, the object baked
    into the code.  That is right for values (``int("3")``, ``torch.Size([2])``) and for the containers that
    become fresh trackers (``list``, ``dict``, ``set``); an iterator (``reversed``, ``map``) or a mutable object
    (``bytearray(2)``) would be one object shared by every call -- exhausted, or carrying the last call's writes."""
    return hasattr(cls, "__next__") or \
        cls.__module__ == "builtins" and cls.__hash__ is None and cls not in (list, dict, set)  # not torch.finfo


def raise_as_observed(e: Exception, reason: str) -> NoReturn:
    """Raise ``e``, which a Python operation on constants just raised (``1 / 0``, ``int("z")``), in the traced
    code: an ``except`` there catches it (``ObservedException``); unhandled, the frame runs eagerly and Python
    raises it.  An exception whose class runs user code when built, or whose args are not constants, is refused
    with the same effect but no ``except`` can catch it while tracing."""
    from .misc import plain_exception_class
    if not plain_exception_class(type(e)) or not all(is_constant_value(a) for a in e.args):
        unimplemented(reason, "the frame runs eagerly so Python raises the error itself")
    raise_observed_exception(type(e), [ConstantVariable(a) for a in e.args], reason)


BINARY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}
# dunders the interpreter calls for an operator: a constant without one (``1 in 5``) gets the operator's TypeError
DUNDER_OPERATORS = {"__contains__": operator.contains, "__len__": len, "__getitem__": operator.getitem}
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
               ">=": operator.ge}
