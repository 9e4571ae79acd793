"""Odds and ends: Python modules (``torch``, ``math``, ``F``) read as globals or attributes.

Mirrors ``PythonModuleVariable`` in ``torch/_dynamo/variables/misc.py``.
"""
from __future__ import annotations

import types

from ..exc import unimplemented
from ..source import AttrSource
from .base import VariableTracker
from .constant import ConstantVariable


class PythonModuleVariable(VariableTracker):
    def __init__(self, value: types.ModuleType, **kw):
        super().__init__(**kw)
        self.value = value

    def python_type(self):
        return types.ModuleType

    def as_python_constant(self):
        return self.value

    def describe(self):
        return f"module {self.value.__name__}"

    def _repr_body(self):
        return self.value.__name__

    def var_getattr(self, tx, name):
        from .builder import VariableBuilder, wrap_constant_result
        if not hasattr(self.value, name):
            unimplemented(f"module {self.value.__name__} has no attribute {name!r}")
        value = getattr(self.value, name)
        if self.source is not None:
            return VariableBuilder(tx, AttrSource(self.source, name))(value)
        return wrap_constant_result(value)


class PreviousExceptionVariable(ConstantVariable):
    """What ``PUSH_EXC_INFO`` saves below the exception an ``except`` block handles: the exception handled before
    it (none while tracing).  On the stack it also marks the code in between, up to ``POP_EXCEPT``, as running
    inside an ``except`` block: see [Note: no graph break in an except block] in graph_break.py."""

    def __init__(self):
        super().__init__(None)


class ExceptionVariable(VariableTracker):
    """An exception object built while tracing (``ValueError("negative")``): raised and caught symbolically."""

    def __init__(self, exc_type: type, args: list, **kw):
        super().__init__(**kw)
        self.exc_type = exc_type
        self.args = args

    def python_type(self):
        return self.exc_type

    def describe(self):
        return f"{self.exc_type.__name__} object"

    def _repr_body(self):
        return self.exc_type.__name__

    def truth(self, tx) -> bool:
        """An exception object is true unless its class defines ``__bool__``/``__len__``."""
        return self.truth_of_instance_of(tx, self.exc_type)

    def var_getattr(self, tx, name):
        from .lists import TupleVariable
        if name == "args":
            return TupleVariable(list(self.args))
        return super().var_getattr(tx, name)

    def printable(self) -> BaseException | None:
        """The exception rebuilt from its constant args, for ``str(e)``, ``repr(e)`` and ``f"{e}"`` while tracing;
        None when an arg is not a constant or the class prints through user code (its own ``__str__``)."""
        from .constant import is_constant_value
        prints_natively = all(k.__module__ == "builtins" or not {"__str__", "__repr__", "__format__"} & set(vars(k))
                              for k in self.exc_type.__mro__)
        if not (prints_natively and plain_exception_class(self.exc_type)):
            return None
        if not all(a.is_python_constant() and is_constant_value(a.as_python_constant()) for a in self.args):
            return None
        return self.exc_type(*[a.as_python_constant() for a in self.args])

    def reconstruct(self, codegen):
        codegen.load_const_object(self.exc_type, push_null=True)
        for a in self.args:
            codegen(a)
        codegen.call(len(self.args))


def plain_exception_class(cls: type) -> bool:
    """An exception class whose construction runs no user code (no ``__init__``/``__new__`` outside builtins)."""
    return issubclass(cls, BaseException) and all(
        k.__module__ == "builtins" or ("__init__" not in vars(k) and "__new__" not in vars(k)) for k in cls.__mro__)


class EqualityMaskVariable(VariableTracker):
    """A boolean mask ``t == k`` the graph leaves unmade, rebuilt as the recipe ``native_stretch.EqualityMask(t, k)``
    for a native stretch's subscripts ([Note: masks the graph does not make] in native_stretch.py).  Made at a
    graph break for the code it emits, never traced through."""

    def __init__(self, t: VariableTracker, k: VariableTracker):
        super().__init__()
        self.t, self.k = t, k

    def reconstruct(self, codegen):
        from ..native_stretch import EqualityMask  # the runtime's class: native_stretch imports this module
        codegen.load_const_object(EqualityMask, push_null=True)
        codegen(self.t)
        codegen(self.k)
        codegen.call(2)
