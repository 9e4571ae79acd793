"""Plain user classes and objects: attribute reads, methods, properties, ``super()``, and construction.

Attribute lookup follows Python's order: pending stores made while tracing, the instance ``__dict__``, then the
class (properties and methods are inlined; ``staticmethod``/``classmethod`` unwrap).  Objects built while tracing
(``Point(1, 2)``, dataclasses) live only in the tracer unless they escape, which is refused.
Mirrors ``torch/_dynamo/variables/user_defined.py``.
"""
from __future__ import annotations

import collections
import functools
import inspect
import types

import torch

from ..exc import raise_observed_exception, refuse_frame, unimplemented
from ..source import AttrSource, GetItemSource
from .base import VariableTracker
from .constant import ConstantVariable, holds_state_across_calls


def is_data_descriptor(static) -> bool:
    """A data descriptor (property, a class with ``__set__``) wins over the instance ``__dict__``."""
    return hasattr(type(static), "__set__") or hasattr(type(static), "__delete__")


def is_library_class(cls: type) -> bool:
    """A builtin or torch class, whose constructor is folded over constants.  A class written in Python by exec()
    without ``__name__`` in its globals also says ``__module__ == "builtins"``: only a C (non-heap) type counts."""
    heap_type = bool(cls.__flags__ & (1 << 9))  # Py_TPFLAGS_HEAPTYPE: made by a class statement or type()
    return cls.__module__ == "torch" or cls.__module__ == "builtins" and not heap_type


def lookup_class_attribute(tx, obj: VariableTracker, cls: type, name: str, static) -> VariableTracker:
    """``obj.name`` where ``name`` is found on the class (``static`` = ``inspect.getattr_static`` result)."""
    from .builder import VariableBuilder, wrap_constant_result
    from .functions import UserFunctionVariable, UserMethodVariable

    cls_src = AttrSource(obj.source, "__class__") if obj.source is not None else None
    pending = tx.output.side_effects.pending_class_attr(cls, name)
    if pending is not None:
        return pending
    if static is None:
        if inspect.getattr_static(cls, "__getattr__", None) is not None and name != "__getattr__":
            getattr_fn = inspect.getattr_static(cls, "__getattr__")
            if isinstance(getattr_fn, types.FunctionType):
                return UserMethodVariable(getattr_fn, obj).call_function(tx, [ConstantVariable(name)], {})
        if getattr(obj, "built_here", False) and getattr(cls, "__getattr__", None) is None:
            # every attribute of an object built in this frame is known here: the read raises, as in Python
            message = f"{cls.__name__!r} object has no attribute {name!r}"
            raise_observed_exception(AttributeError, [ConstantVariable(message)], message)
        unimplemented(f"{cls.__name__} object has no attribute {name!r}",
                      "the frame runs eagerly so Python raises AttributeError itself")
    # [Note: guarding what the class holds]  What a method call inlines is read from the class, so the class
    # attribute is guarded: replacing it (``M.helper = ...``, ``mock.patch.object``) recompiles instead of running
    # the old method's graph. A method is guarded through the object (``L['self'].helper.__func__``), which also
    # catches one set on the instance later; a property, a data descriptor no instance can shadow, through the class.
    if isinstance(static, property):
        if not isinstance(static.fget, types.FunctionType):
            unimplemented(f"property {name!r} implemented in C")
        if cls_src is not None:
            tx.output.add_guard("ID_MATCH", AttrSource(cls_src, name), static)
        return UserMethodVariable(static.fget, obj).call_function(tx, [], {})
    if isinstance(static, staticmethod):
        if obj.source is not None:
            tx.output.add_guard("ID_MATCH", AttrSource(obj.source, name), static.__func__)
        return UserFunctionVariable(static.__func__, source=cls_src and AttrSource(cls_src, name))
    if isinstance(static, (classmethod, types.FunctionType)):
        fn = static.__func__ if isinstance(static, classmethod) else static
        if obj.source is not None:
            tx.output.add_guard("ID_MATCH", AttrSource(AttrSource(obj.source, name), "__func__"), fn)
        bound = UserDefinedClassVariable(cls, source=cls_src) if isinstance(static, classmethod) else obj
        return UserMethodVariable(fn, bound)
    if isinstance(getattr(type(static), "__get__", None), types.FunctionType):
        return call_descriptor_get(tx, obj, cls, name, static)
    if type(static).__name__ in ("wrapper_descriptor", "method_descriptor", "getset_descriptor",
                                 "member_descriptor"):
        if obj.source is not None:
            real = tx.eval_source(obj.source)
            try:
                value = getattr(real, name)
            except Exception as e:  # noqa: BLE001 - an unset __slots__ member, a raising C getter: Python's error
                unimplemented(f"reading {name!r} of a {cls.__name__} object raises {type(e).__name__}: {e}",
                              "the frame runs eagerly so Python raises it itself")
            return VariableBuilder(tx, AttrSource(obj.source, name))(value)
        unimplemented(f"C attribute {name!r} of {cls.__name__}")
    value = getattr(cls, name)
    if obj.source is not None:
        return VariableBuilder(tx, AttrSource(obj.source, name))(value)
    if isinstance(value, types.FunctionType):
        return UserFunctionVariable(value)
    if isinstance(value, torch.Tensor):
        unimplemented(f"tensor class attribute {name!r} of {cls.__name__} on an object built while tracing")
    return wrap_constant_result(value)


def call_descriptor_get(tx, obj: VariableTracker, cls: type, name: str, descriptor) -> VariableTracker:
    """``obj.name`` where the class holds a user descriptor: inline ``type(descriptor).__get__(descriptor, obj, cls)``.

    The descriptor is read from ``type(obj).__dict__`` (reading ``type(obj).name`` would call ``__get__`` again)."""
    from ..source import GetItemSource
    from .builder import VariableBuilder
    from .functions import UserMethodVariable
    if obj.source is not None:
        src = GetItemSource(AttrSource(AttrSource(obj.source, "__class__"), "__dict__"), name)
        if name not in cls.__dict__:
            unimplemented(f"descriptor {name!r} inherited from a base class of {cls.__name__}")
        descr_vt = VariableBuilder(tx, src)(descriptor)
    else:
        descr_vt = UserDefinedObjectVariable(descriptor)
    cls_vt = obj.class_tracker(tx) if isinstance(obj, UserDefinedObjectVariable) else UserDefinedClassVariable(cls)
    return UserMethodVariable(type(descriptor).__get__, descr_vt).call_function(tx, [obj, cls_vt], {})


class UserDefinedClassVariable(VariableTracker):
    def __init__(self, value: type, **kw):
        super().__init__(**kw)
        self.value = value

    def as_python_constant(self):
        return self.value

    def python_type(self):
        return type(self.value)

    def describe(self):
        return f"class {self.value.__qualname__}"

    def truth(self, tx) -> bool:
        """A class is true unless its metaclass says otherwise (``if exc_type:`` in an ``__exit__``)."""
        return self.truth_of_instance_of(tx, type(self.value))

    def _repr_body(self):
        return self.value.__qualname__

    def reconstruct(self, codegen):
        if self.source is not None:
            return super().reconstruct(codegen)
        codegen.load_const_object(self.value)

    def var_getattr(self, tx, name):
        from .builder import VariableBuilder, wrap_constant_result
        from .functions import UserFunctionVariable, UserMethodVariable
        pending = tx.output.side_effects.pending_class_attr(self.value, name)
        if pending is not None:
            return pending
        static = inspect.getattr_static(self.value, name, None)
        if isinstance(static, staticmethod):
            return UserFunctionVariable(static.__func__)
        if isinstance(static, classmethod):
            return UserMethodVariable(static.__func__, self)
        if self.value is torch.Tensor and type(static).__name__ in ("method_descriptor", "wrapper_descriptor"):
            return TensorMethodDescriptorVariable(name)
        if static is None and not hasattr(self.value, name):
            unimplemented(f"class {self.value.__name__} has no attribute {name!r}")
        value = getattr(self.value, name)
        if self.source is not None:
            return VariableBuilder(tx, AttrSource(self.source, name))(value)
        if isinstance(value, types.FunctionType):
            return UserFunctionVariable(value)
        return wrap_constant_result(value)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``Counted.instances = n`` / ``type(self).instances += 1``: a side effect on the real class object."""
        cls = self.value
        static = inspect.getattr_static(type(cls), name, None)
        if type(cls).__setattr__ is not type.__setattr__ or hasattr(static, "__set__"):
            unimplemented(f"assigning {name!r} on class {cls.__name__} runs its metaclass's code")
        if self.source is None or cls.__module__ == "builtins":
            unimplemented(f"setting attribute {name!r} on class {cls.__name__} (reached without a source to guard)",
                          "assign it through the class's global name, outside the compiled function")
        tx.output.side_effects.store_attr(self, name, value)

    def make_named_tuple(self, tx, args, kwargs) -> VariableTracker:
        """``P(1, b=x)``: the arguments bound as the generated ``__new__`` binds them (defaults, keywords); a call
        it would refuse (``P(1, 2, 3)``) raises CPython's TypeError over constants, or is refused."""
        from .base import call_real_or_refuse
        from .lists import NamedTupleVariable
        cls = self.value
        if not getattr(cls.__new__, "__module__", "").startswith("namedtuple_"):
            unimplemented(f"constructing {cls.__name__}, a named tuple with its own __new__")
        try:
            bound = inspect.signature(cls).bind(*args, **kwargs)
        except TypeError:
            call_real_or_refuse(cls, args, kwargs, f"{cls.__name__}()")
        bound.apply_defaults()
        return NamedTupleVariable([v if isinstance(v, VariableTracker) else ConstantVariable(v)
                                   for v in bound.arguments.values()], cls)

    def call_function(self, tx, args, kwargs):
        cls = self.value
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            return self.make_named_tuple(tx, args, kwargs)
        if cls is functools.partial:
            from .functions import PartialVariable
            return PartialVariable(args[0], list(args[1:]), dict(kwargs))
        if cls in (collections.OrderedDict, dict) and not kwargs and len(args) <= 1:
            from .dicts import DictVariable
            d = DictVariable({}, user_cls=cls)
            if args:
                d._m_update(tx, args[0])
            return d
        if cls is collections.defaultdict:  # defaultdict(factory, data, **more)
            from .dicts import DictVariable
            d = DictVariable({}, user_cls=cls)
            d.default_factory = args[0] if args else None
            if len(args) > 1 or kwargs:
                d._m_update(tx, *args[1:], **kwargs)
            return d
        from .iter import ITERTOOLS_HANDLERS
        if cls in ITERTOOLS_HANDLERS:
            return ITERTOOLS_HANDLERS[cls](tx, *args, **kwargs)
        if cls is torch.Size:
            from .lists import SizeVariable
            return SizeVariable(args[0].unpack_var_sequence(tx) if args else [])
        from .misc import ExceptionVariable, plain_exception_class
        if plain_exception_class(cls) and not kwargs:
            return ExceptionVariable(cls, list(args))
        if is_library_class(cls) and holds_state_across_calls(cls):
            unimplemented(f"constructing a {cls.__qualname__} object while tracing: folded, one real object would "
                          "serve every call", "build it outside the compiled function, or let this part run eagerly")
        if all(a.is_python_constant() for a in [*args, *kwargs.values()]) and \
                is_library_class(cls) and not issubclass(cls, BaseException):
            from .constant import fold
            return fold(tx, cls, [a.as_python_constant() for a in args],
                        {k: v.as_python_constant() for k, v in kwargs.items()})
        if issubclass(cls, torch.nn.Module):
            unimplemented(f"constructing module {cls.__name__} inside the compiled function",
                          "construct modules outside and pass them in")
        if getattr(cls, "__del__", None) is not None:  # made while tracing, it would never be dropped for real
            refuse_frame(f"a {cls.__qualname__} object (its class has __del__) made in the frame: Python runs "
                         "__del__ when it drops the object, a graph or a resume function would not",
                         "the frame runs eagerly; see [Note: drops Python must see]")
        if cls.__new__ is object.__new__ and isinstance(getattr(cls, "__init__", None), types.FunctionType):
            obj = UserDefinedObjectVariable(None, cls=cls, cls_vt=self)
            from .functions import UserMethodVariable
            UserMethodVariable(cls.__init__, obj).call_function(tx, args, kwargs)
            return obj
        unimplemented(f"constructing {cls.__qualname__} objects while tracing",
                      "build the object outside the compiled function and pass it in")


class TensorMethodDescriptorVariable(VariableTracker):
    """``torch.Tensor.sum`` read from the class: ``torch.Tensor.sum(x, 1)`` is the same graph node as ``x.sum(1)``."""

    def __init__(self, name: str, **kw):
        super().__init__(**kw)
        self.name = name

    def as_python_constant(self):
        return getattr(torch.Tensor, self.name)

    def describe(self):
        return f"torch.Tensor.{self.name}"

    def _repr_body(self):
        return self.name

    def reconstruct(self, codegen):
        codegen.load_const_object(torch.Tensor)
        codegen.load_attr(self.name)

    def call_function(self, tx, args, kwargs):
        from .tensor import TensorVariable
        if not args or not isinstance(args[0], TensorVariable):
            unimplemented(f"torch.Tensor.{self.name} called on {args[0].describe() if args else 'nothing'}",
                          f"call it as a method of a tensor: x.{self.name}(...)")
        return args[0].call_method(tx, self.name, list(args[1:]), kwargs)


class UserDefinedObjectVariable(VariableTracker):
    """A plain Python object: a real one read from the frame (``value``), or one built while tracing."""

    def __init__(self, value, source=None, is_constant: bool = False, cls: type | None = None,
                 cls_vt: UserDefinedClassVariable | None = None):
        super().__init__(source=source)
        self.value = value
        self.cls = cls or type(value)
        self.is_constant = is_constant
        self.built_here = value is None
        self.cls_vt = cls_vt  # the class tracker this object was built from (it carries the class's source)

    def class_tracker(self, tx) -> VariableTracker:
        """``type(obj)`` / ``obj.__class__``: with a source where one is known, so class attributes can be guarded
        and stored to."""
        from .builder import VariableBuilder, wrap_constant_result
        if self.cls_vt is not None:
            return self.cls_vt
        if self.source is not None and not self.is_constant:
            return VariableBuilder(tx, AttrSource(self.source, "__class__"))(self.cls)
        return wrap_constant_result(self.cls)

    def has_instance_attr(self, tx, name: str) -> bool:
        """Is ``name`` in the object's ``__dict__`` (as changed while tracing)?"""
        from ..side_effects import DeletedAttribute
        pending = tx.output.side_effects.pending_attr(self, name)
        if pending is not None:
            return not isinstance(pending, DeletedAttribute)
        if self.built_here or name not in getattr(self.value, "__dict__", {}):
            return False
        self.var_getattr(tx, name)  # reading it guards it (and so that it exists)
        return True

    def python_type(self):
        return self.cls

    def as_python_constant(self):
        if self.is_constant:
            return self.value
        return super().as_python_constant()

    def truth(self, tx):
        if self.built_here or not (hasattr(self.cls, "__bool__") or hasattr(self.cls, "__len__")):
            return True
        unimplemented(f"truth of a {self.cls.__name__} object")

    def describe(self):
        return f"{self.cls.__name__} object"

    def _repr_body(self):
        return self.cls.__qualname__

    def var_getattr(self, tx, name):
        from ..side_effects import DeletedAttribute
        from .builder import VariableBuilder, wrap_constant_result
        if not self.is_constant and inspect.getattr_static(self.cls, "__getattribute__") is not \
                object.__getattribute__:
            # every read, even of a stored attribute, goes through the user's method: the lookups below would skip it
            unimplemented(f"{self.cls.__name__} overrides __getattribute__",
                          "Python reads the attribute itself (a graph break)")
        pending = tx.output.side_effects.pending_attr(self, name)
        if pending is not None and not isinstance(pending, DeletedAttribute):
            return pending
        if name == "__class__":
            return self.class_tracker(tx)
        if name == "__dict__" and tx.output.side_effects.attr_stores.get(id(self)):
            unimplemented(f"reading __dict__ of a {self.cls.__name__} object after storing attributes on it",
                          "read the attributes by name")
        if self.is_constant:  # an object computed from constants (torch.finfo(...), ...): read it now
            from .builtin import BuiltinVariable
            value = getattr(self.value, name)
            return BuiltinVariable(value) if callable(value) and not isinstance(value, type) \
                else wrap_constant_result(value)
        if not self.built_here and pending is None:  # after `del obj.name` only the class can answer
            d = getattr(self.value, "__dict__", {})
            if name in d and not is_data_descriptor(inspect.getattr_static(self.cls, name, None)):
                if self.source is not None:
                    return VariableBuilder(tx, AttrSource(self.source, name))(d[name])
                return wrap_constant_result(d[name])
        static = inspect.getattr_static(self.cls, name, None)
        return lookup_class_attribute(tx, self, self.cls, name, static)

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def call_function(self, tx, args, kwargs):
        call = inspect.getattr_static(self.cls, "__call__", None)
        if not isinstance(call, types.FunctionType):
            unimplemented(f"calling {self.describe()} (not a Python function: {type(call).__name__})",
                          "call it outside the compiled function")
        from .functions import UserMethodVariable
        return UserMethodVariable(call, self).call_function(tx, args, kwargs)

    def reconstruct(self, codegen):
        if self.source is not None:
            return super().reconstruct(codegen)
        if self.is_constant:
            return codegen.load_const_object(self.value)
        unimplemented(f"a {self.cls.__name__} object built inside the compiled function escapes it",
                      "build the object outside the compiled function, or return plain tensors")


class SuperVariable(VariableTracker):
    """``super()`` inside a method: attribute lookup starts after ``cls`` in ``type(obj).__mro__``."""

    def __init__(self, cls: type, obj: VariableTracker):
        super().__init__()
        self.cls = cls
        self.obj = obj

    @staticmethod
    def from_call(tx, args) -> SuperVariable:
        if len(args) == 2:
            return SuperVariable(args[0].as_python_constant(), args[1])
        cls_cell = tx.cells.get("__class__")
        first = tx.f_code.co_varnames[0] if tx.f_code.co_argcount else None
        if cls_cell is None or first is None:
            unimplemented("zero-argument super() outside a method")
        if hasattr(cls_cell.value, "realize"):
            cls_cell.value = cls_cell.value.realize(tx)
        if first in tx.cells:  # a closure captures self: super() reads the cell's content
            cell = tx.cells[first]
            if hasattr(cell.get(), "realize"):
                cell.value = cell.value.realize(tx)
            self_vt = cell.get()
        else:
            self_vt = tx.symbolic_locals[first]
            if hasattr(self_vt, "realize"):
                self_vt = tx.symbolic_locals[first] = self_vt.realize(tx)
        return SuperVariable(cls_cell.get().as_python_constant(), self_vt)

    def var_getattr(self, tx, name):
        from .functions import UserFunctionVariable, UserMethodVariable
        mro = self.obj.python_type().__mro__
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                static = klass.__dict__[name]
                if self.obj.source is not None and isinstance(static, (types.FunctionType, staticmethod)):
                    # [Note: guarding what the class holds]: type(obj).__mro__[k].__dict__[name] is the function
                    mro_src = AttrSource(AttrSource(self.obj.source, "__class__"), "__mro__")
                    held = GetItemSource(AttrSource(GetItemSource(mro_src, mro.index(klass)), "__dict__"), name)
                    tx.output.add_guard("ID_MATCH", held, static)
                if isinstance(static, types.FunctionType):
                    return UserMethodVariable(static, self.obj)
                if isinstance(static, staticmethod):
                    return UserFunctionVariable(static.__func__)
                if klass in (object, torch.nn.Module) and name == "__init__":
                    return NoOpVariable()
                if klass is object and name == "__setattr__":
                    from .builtin import BuiltinVariable
                    from .functions import PartialVariable
                    return PartialVariable(BuiltinVariable(object.__setattr__), [self.obj], {})
                unimplemented(f"super().{name} resolved to {type(static).__name__}")
        unimplemented(f"super() has no attribute {name!r}")


class NoOpVariable(VariableTracker):
    def call_function(self, tx, args, kwargs):
        return ConstantVariable(None)
