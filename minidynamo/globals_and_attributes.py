"""Names looked up in a module or an object while tracing: globals, imports and attributes.

``LOAD_GLOBAL``/``STORE_GLOBAL``, ``IMPORT_NAME``/``IMPORT_FROM``, and ``LOAD_ATTR``, ``LOAD_METHOD``, ``STORE_ATTR``,
``DELETE_ATTR``, ``LOAD_SUPER_ATTR``.  In:  a name, and for an attribute the object's tracker on the translator's
stack.  Out: the value's tracker pushed (a global or a builtin wrapped by ``VariableBuilder`` with its source, so
guards can check it next time; an attribute as ``var_getattr`` says it would be), or, for a store or a delete, a
side effect that the transformed code replays on the real module or object (``SideEffects``).  A load makes no
graph node by itself: ``x.sin`` is a bound method of a ``TensorVariable``, and only calling it adds ``sin`` to the
graph.

    self.scale = s * 2   ... BINARY_OP *       -> graph: mul = s * 2
                         LOAD_FAST self; STORE_ATTR scale -> side effect: self.scale = mul, after the graph
    return self.scale    LOAD_ATTR scale        -> the pending value, mul (a read sees the write before it)

A store follows Python's rules: a class's own ``__setattr__`` or a property's setter is Python code, inlined like
any user function; another data descriptor is refused (the frame breaks there), and a name that a class with
``__slots__`` has no slot for raises ``AttributeError`` as CPython does.
On 3.11 a method call loads with ``LOAD_METHOD``; on 3.12 ``LOAD_ATTR`` with its low bit set does, and
``super().name`` is one instruction, ``LOAD_SUPER_ATTR``.

These are methods of ``InstructionTranslatorBase`` (``symbolic_convert.py``), gathered in a mixin as
``container_building.py`` gathers the container opcodes.  Upstream twin: the ``LOAD_ATTR``/``STORE_ATTR``
and ``LOAD_GLOBAL``/``IMPORT_NAME`` handlers of ``torch/_dynamo/symbolic_convert.py``.
"""
from __future__ import annotations

import importlib
import inspect
import sys
import types

import torch

from .bytecode_transformation import PY312
from .exc import raise_observed_exception, unimplemented
from .source import GlobalSource, ImportSource, ModuleGlobalSource
from .variables import (
    BuiltinVariable,
    ConstantVariable,
    NullVariable,
    PythonModuleVariable,
    VariableBuilder,
    VariableTracker,
    wrap_constant_result,
)
from .variables.user_defined import SuperVariable, UserDefinedClassVariable, UserDefinedObjectVariable


class GlobalsAndAttributesMixin:
    """The global, import and attribute opcodes of ``InstructionTranslatorBase``."""

    # --- globals and imports --------------------------------------------------------------------------------
    def LOAD_GLOBAL(self, inst):
        if inst.arg & 1:
            self.push(NullVariable())
        self.push(self.load_global(inst.argval))

    def load_global(self, name: str) -> VariableTracker:
        root = self.f_globals is self.output.f_globals
        if root and name in self.output.side_effects.global_stores:
            return self.output.side_effects.global_stores[name]
        if name in self.f_globals:
            return VariableBuilder(self, self.global_source(name))(self.f_globals[name])
        builtins_dict = self.f_globals.get("__builtins__", __builtins__)
        builtins_dict = getattr(builtins_dict, "__dict__", builtins_dict)
        if name not in builtins_dict:
            unimplemented(f"name {name!r} is not defined", "the frame runs eagerly so Python raises NameError")
        if root:
            self.output.add_guard("BUILTIN_NOT_SHADOWED", None, name)
        value = builtins_dict[name]
        if isinstance(value, type) and issubclass(value, BaseException) or not callable(value):
            return wrap_constant_result(value)
        return BuiltinVariable(value)

    def global_source(self, name: str):
        if self.f_globals is self.output.f_globals:
            return GlobalSource(name)
        module_name = self.f_globals.get("__name__")
        module = sys.modules.get(module_name)
        if module is None or module.__dict__ is not self.f_globals:
            unimplemented(f"globals of a function not defined in an importable module ({module_name})")
        return ModuleGlobalSource(module_name, name)

    def STORE_GLOBAL(self, inst):
        if self.f_globals is not self.output.f_globals:
            unimplemented("assigning a global of another module", "return the value and assign it outside")
        self.output.side_effects.store_global(inst.argval, self.pop())

    def IMPORT_NAME(self, inst):
        fromlist = self.pop().as_python_constant()
        level = self.pop().as_python_constant()
        module = importlib.__import__(inst.argval, self.f_globals, None, fromlist, level)
        self.push(PythonModuleVariable(module, source=ImportSource(module.__name__)))

    def IMPORT_FROM(self, inst):
        self.push(self.stack[-1].var_getattr(self, inst.argval))

    # --- attributes -----------------------------------------------------------------------------------------
    def LOAD_ATTR(self, inst):
        obj = self.pop()
        if PY312 and inst.arg & 1:  # method form: [NULL, attribute] (we never split off self)
            self.push(NullVariable())
        self.push(obj.var_getattr(self, inst.argval))

    def LOAD_METHOD(self, inst):  # 3.11
        obj = self.pop()
        self.push(NullVariable())
        self.push(obj.var_getattr(self, inst.argval))

    def STORE_ATTR(self, inst):
        obj = self.pop()
        value = self.pop()
        self.store_attr(obj, inst.argval, value)

    def store_attr(self, obj: VariableTracker, name: str, value: VariableTracker) -> None:
        """``obj.name = value`` by Python's rules: a class's ``__setattr__`` or a property setter is inlined like any
        user function; a plain store is a side effect replayed on the real object (``SideEffects``)."""
        from .variables.functions import UserMethodVariable
        from .variables.nn_module import NNModuleVariable
        if isinstance(obj, UserDefinedClassVariable):
            return obj.store_attr(self, name, value)
        if not isinstance(obj, (UserDefinedObjectVariable, NNModuleVariable)) or getattr(obj, "is_constant", False):
            unimplemented(f"setting attribute {name!r} on {obj.describe()}")
        cls = obj.python_type()
        setattr_fn = inspect.getattr_static(cls, "__setattr__")
        if not issubclass(cls, torch.nn.Module) and setattr_fn is not object.__setattr__:
            if not isinstance(setattr_fn, types.FunctionType):
                unimplemented(f"assigning {name!r} runs {cls.__name__}.__setattr__ (not a Python function)",
                              "assign it outside the compiled function")
            UserMethodVariable(setattr_fn, obj).call_function(self, [ConstantVariable(name), value], {})
            return
        static = inspect.getattr_static(cls, name, None)
        if isinstance(static, property) and isinstance(static.fset, types.FunctionType):
            UserMethodVariable(static.fset, obj).call_function(self, [value], {})
            return
        self.store_attr_raw(obj, name, value)

    def store_attr_raw(self, obj: VariableTracker, name: str, value: VariableTracker) -> None:
        """``object.__setattr__(obj, name, value)``: data descriptors still run, ``__setattr__`` does not."""
        from .variables.nn_module import NNModuleVariable
        if not isinstance(obj, (UserDefinedObjectVariable, NNModuleVariable)) or getattr(obj, "is_constant", False):
            unimplemented(f"setting attribute {name!r} on {obj.describe()}")
        cls = obj.python_type()
        static = inspect.getattr_static(cls, name, None)
        if hasattr(static, "__set__") and not isinstance(static, types.MemberDescriptorType):  # (__slots__)
            unimplemented(f"assigning {name!r} runs Python code ({cls.__name__}.{name} is a "
                          f"{type(static).__name__} descriptor)", "assign it outside the compiled function")
        if not isinstance(static, types.MemberDescriptorType) and not any("__dict__" in vars(k) for k in cls.__mro__):
            # instances of a class with __slots__ (and no __dict__ slot) take only their slots
            if static is not None:
                unimplemented(f"assigning {name!r}, a class attribute of {cls.__name__} whose instances have no "
                              "__dict__", "Python raises its AttributeError itself")
            message = f"'{cls.__name__}' object has no attribute '{name}'"
            raise_observed_exception(AttributeError, [ConstantVariable(message)], message)
        self.output.side_effects.store_attr(obj, name, value)

    def DELETE_ATTR(self, inst):
        self.delete_attr(self.pop(), inst.argval)

    def delete_attr(self, obj: VariableTracker, name: str) -> None:
        """``del obj.name``: a side effect like a store (the generated code deletes it from the real object)."""
        if not isinstance(obj, UserDefinedObjectVariable) or obj.is_constant:
            unimplemented(f"deleting attribute {name!r} of {obj.describe()}")
        cls = obj.python_type()
        static = inspect.getattr_static(cls, name, None)
        if cls.__delattr__ is not object.__delattr__ or hasattr(static, "__delete__") or hasattr(static, "__set__"):
            unimplemented(f"deleting {name!r} runs Python code ({cls.__name__} has __delattr__ or a descriptor)",
                          "delete it outside the compiled function")
        if not obj.has_instance_attr(self, name):
            unimplemented(f"{cls.__name__} object has no attribute {name!r} to delete",
                          "the frame runs eagerly so Python raises AttributeError")
        self.output.side_effects.delete_attr(obj, name)

    def LOAD_SUPER_ATTR(self, inst):  # 3.12: super().name
        self_vt = self.pop()
        cls_vt = self.pop()
        self.pop()  # the global `super`
        attr = SuperVariable(cls_vt.as_python_constant(), self_vt).var_getattr(self, inst.argval)
        if inst.arg & 1:
            self.push(NullVariable())
        self.push(attr)
