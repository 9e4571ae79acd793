"""Odds and ends: Python modules (``torch``, ``math``, ``F``) read as globals or attributes.

Mirrors ``PythonModuleVariable`` in ``torch/_dynamo/variables/misc.py``.
"""
from __future__ import annotations

import types

from ..exc import unimplemented
from ..source import AttrSource
from .base import VariableTracker


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
