"""VariableTrackers: one class per kind of Python value the translator understands (see ``base.py``)."""
from .base import BoundMethodVariable, NotConstant, NullVariable, VariableTracker
from .builder import VariableBuilder, wrap_constant_result
from .builtin import BuiltinVariable
from .constant import ConstantVariable
from .ctx_manager import ContextManagerVariable, WithExitFunctionVariable
from .dicts import DictVariable, SetVariable
from .functions import CellVariable, NestedUserFunctionVariable, UserFunctionVariable, UserMethodVariable
from .iter import ListIteratorVariable
from .lists import (
                    ListVariable,
                    NamedTupleVariable,
                    RangeVariable,
                    SizeVariable,
                    SliceVariable,
                    TupleVariable,
)
from .misc import PythonModuleVariable
from .nn_module import NNModuleVariable
from .sym_node import SymNodeVariable
from .tensor import TensorVariable
from .torch import TorchVariable
from .user_defined import UserDefinedClassVariable, UserDefinedObjectVariable

__all__ = [
    "BoundMethodVariable", "BuiltinVariable", "CellVariable", "ConstantVariable", "ContextManagerVariable",
    "DictVariable", "ListIteratorVariable", "ListVariable", "NNModuleVariable", "NamedTupleVariable",
    "NestedUserFunctionVariable", "NotConstant", "NullVariable", "PythonModuleVariable", "RangeVariable",
    "SetVariable", "SizeVariable", "SliceVariable", "SymNodeVariable", "TensorVariable", "TorchVariable",
    "TupleVariable", "UserDefinedClassVariable", "UserDefinedObjectVariable", "UserFunctionVariable",
    "UserMethodVariable", "VariableBuilder", "VariableTracker", "WithExitFunctionVariable", "wrap_constant_result"
]
