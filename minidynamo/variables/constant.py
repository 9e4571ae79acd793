"""Python constants: numbers, strings, None, dtypes, devices, ... folded while tracing.

Operations on constants run at trace time (``1 + 2`` becomes ``3``); the guard installed when the constant was read
from an input (EQUALS_MATCH) makes that safe.  Mirrors ``torch/_dynamo/variables/constant.py``.
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from ..exc import unimplemented
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

    def var_getattr(self, tx, name):
        attr = getattr(self.value, name)
        if callable(attr):
            return BoundMethodVariable(self, name)
        return ConstantVariable(attr)

    def call_method(self, tx, name, args, kwargs):
        try:
            a = [x.as_python_constant() for x in args]
            k = {n: x.as_python_constant() for n, x in kwargs.items()}
        except Exception:  # noqa: BLE001 - an argument that is not a constant, whatever it raised
            unimplemented(f"method {name!r} of constant {self.value!r} with non-constant arguments")
        return fold(tx, getattr(self.value, name), a, k)

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
    except Exception as e:  # noqa: BLE001 - the eager run will raise it for real
        unimplemented(f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e} while tracing",
                      "the frame runs eagerly so Python raises the error itself")
    return wrap_constant_result(result)


BINARY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
               ">=": operator.ge}
