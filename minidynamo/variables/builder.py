"""VariableBuilder: turn a real Python value read from the frame (with its ``Source``) into a tracker + guards.

This is where guards are born: a tensor input gets TENSOR_MATCH and becomes a graph placeholder; an int gets
EQUALS_MATCH and is folded as a constant (or, once its value has changed, becomes a symbolic int
input: ``dynamic_shapes.py``); a function, module or class gets ID_MATCH; a list gets TYPE_MATCH and
LIST_LENGTH and its items are wrapped one by one.  Mirrors ``VariableBuilder`` in
``torch/_dynamo/variables/builder.py``.
"""
from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import types
from typing import Any

import torch

from ..dynamic_shapes import int_is_dynamic
from ..source import AttrSource, GetItemSource, Source
from ..utils import tuple_iterator
from .base import VariableTracker
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable, SetVariable
from .iter import TupleIteratorVariable
from .lists import (
    ListVariable,
    NamedTupleVariable,
    RangeVariable,
    SliceVariable,
    TupleVariable,
)

# C functions of these modules are pure over Python values: folded over constants, operators dispatched.
PURE_C_MODULES = ("builtins", "math", "_operator", "operator", "itertools", "functools", "_functools", "cmath")


class LazyVariableTracker:
    """An input not looked at yet: wrapped (and guarded) only when the code first reads it."""

    def __init__(self, source: Source, value: Any):
        self.source = source
        self.value = value

    def realize(self, tx) -> VariableTracker:
        return VariableBuilder(tx, self.source)(self.value)


class VariableBuilder:
    def __init__(self, tx, source: Source):
        self.tx = tx
        self.source = source

    def __call__(self, value: Any) -> VariableTracker:
        cache = self.tx.output.source_cache
        key = self.source.name()
        if key not in cache:
            cache[key] = self._wrap_aliased(value)
        return cache[key]

    def _wrap_aliased(self, value: Any) -> VariableTracker:
        """[Note: aliased inputs]  One mutable object reached by two sources (``f(lst, lst)``, a local handed to a
        resume function under two names) is one tracker: ``a.append(1)`` must show in ``len(b)``, ``a is b`` must
        hold.  The second source is guarded to be the first object (DUPLICATE_INPUT); the other way round,
        ``OutputGraph.guard_list`` guards the objects it saw as distinct to stay distinct (NO_ALIASING), so a
        call that aliases them recompiles.  Upstream: ``SideEffects.id_to_variable`` and its duplicate-input
        guards."""
        seen = self.tx.output.object_by_id.get(id(value))
        if seen is not None:
            self.tx.output.add_guard("DUPLICATE_INPUT", self.source, None, (seen[1].source,))
            return seen[1]
        wrapping = self.tx.output.__dict__.setdefault("inputs_being_wrapped", set())
        if id(value) in wrapping:  # a dict or list that holds itself: wrapping it item by item never ends
            from ..exc import unimplemented
            unimplemented(f"an input {type(value).__name__} that contains itself ({self.source.name()})",
                          "pass the parts the code reads instead")
        wrapping.add(id(value))
        try:
            vt = self._wrap(value)
        finally:
            wrapping.discard(id(value))
        if is_aliasable(vt):
            self.tx.output.object_by_id[id(value)] = (value, vt)
        return vt

    def guard(self, kind: str, expected: Any = None) -> None:
        self.tx.output.add_guard(kind, self.source, expected)

    def _wrap(self, value: Any) -> VariableTracker:
        from .builtin import BuiltinVariable
        from .ctx_manager import wrap_context_manager_class
        from .functions import UserFunctionVariable
        from .misc import PythonModuleVariable
        from .nn_module import NNModuleVariable
        from .torch import TorchVariable, is_torch_callable
        from .user_defined import UserDefinedClassVariable, UserDefinedObjectVariable

        src = self.source
        if isinstance(value, torch.Tensor):
            return self.tx.output.add_graph_input(self.tx, src, value)
        if type(value) is int and int_is_dynamic(self.tx.output, src, value):
            return self.tx.output.add_symint_input(self.tx, src, value)  # see dynamic_shapes.py
        if is_constant_value(value) and not isinstance(value, enum.Enum):
            self.guard("EQUALS_MATCH", value)
            return ConstantVariable(value, source=src)
        if isinstance(value, torch.nn.Module):
            # [Note: module guards] Like upstream's inlined modules, a module is guarded by its type (and the
            # absence of hooks), not its identity: everything traced reads from it (parameters, flags such as
            # `training`, submodules) gets its own guard, so another instance of the same shape reuses the graph.
            from ..guards import ModuleSpec
            self.guard("NN_MODULE", ModuleSpec.of(value))
            return NNModuleVariable(value, source=src)
        if type(value) in (list, tuple) or isinstance(value, tuple) and hasattr(type(value), "_fields"):
            self.guard("TYPE_MATCH", type(value))
            self.guard("LIST_LENGTH", len(value))
            items = [VariableBuilder(self.tx, GetItemSource(src, i))(v) for i, v in enumerate(value)]
            if type(value) is list:
                return ListVariable(items, source=src)
            if type(value) is tuple:
                return TupleVariable(items, source=src)
            return NamedTupleVariable(items, type(value), source=src)
        if type(value) is dict:
            self.guard("TYPE_MATCH", dict)
            self.guard("DICT_KEYS", list(value.keys()))
            if not all(is_constant_value(k) for k in value):
                from ..exc import unimplemented
                unimplemented("a dict input with non-constant keys")
            return DictVariable({k: VariableBuilder(self.tx, GetItemSource(src, k))(v) for k, v in value.items()},
                                source=src)
        if isinstance(value, (set, frozenset)) and all(is_constant_value(v) for v in value):
            # [Note: a set's guard holds a copy]  The guard keeps the value it compares with; kept by reference,
            # a set the frame goes on to fill (a comprehension's set, handed to the loop's resume function) changed
            # with it, so the guard passed for any later contents and the entry rebuilt the set it was traced
            # with: ``{v.item() for v in ...}`` after a break lost its later elements (a wrong answer on 3.11,
            # fuzz of the break paths).  The type is guarded too: ``{1} == frozenset({1})``.
            self.guard("TYPE_MATCH", type(value))
            self.guard("EQUALS_MATCH", type(value)(value))
            return SetVariable([ConstantVariable(v) for v in value], type(value), source=src)
        if isinstance(value, range):
            self.guard("EQUALS_MATCH", value)
            return RangeVariable(value, source=src)
        if type(value) is tuple_iterator:  # a loop's iterator, handed to a resume function
            self.guard("TYPE_MATCH", tuple_iterator)
            return TupleIteratorVariable(value, source=src)
        if isinstance(value, slice):
            self.guard("EQUALS_MATCH", value)
            return SliceVariable([ConstantVariable(v) for v in (value.start, value.stop, value.step)], source=src)
        if isinstance(value, enum.Enum):
            self.guard("ID_MATCH", value)
            return ConstantVariable(value, source=src)
        if isinstance(value, types.ModuleType):
            self.guard("ID_MATCH", value)
            return PythonModuleVariable(value, source=src)
        if is_torch_callable(value):
            self.guard("ID_MATCH", value)
            return TorchVariable(value, source=src)
        unwrapped = unwrap_compiled(value)
        if isinstance(unwrapped, types.FunctionType):
            # the code is what we inline; defaults and closure cells are guarded when they are read
            self.guard("CLOSURE_MATCH", unwrapped.__code__ if unwrapped is value else value)
            return UserFunctionVariable(unwrapped, source=src)
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            # a bound method is a fresh object on every attribute read: guard the function it binds, not it
            self.tx.output.add_guard("ID_MATCH", AttrSource(src, "__func__"), value.__func__)
            from .functions import UserMethodVariable
            obj = VariableBuilder(self.tx, AttrSource(src, "__self__"))(value.__self__)
            return UserMethodVariable(value.__func__, obj, source=src)
        if type(value) is functools.partial:
            from .functions import PartialVariable
            self.guard("TYPE_MATCH", functools.partial)
            fn = VariableBuilder(self.tx, AttrSource(src, "func"))(value.func)
            # a tuple of constants (``()`` when the partial binds keywords only) is one ConstantVariable
            args = VariableBuilder(self.tx, AttrSource(src, "args"))(value.args).unpack_var_sequence(self.tx)
            kwargs = VariableBuilder(self.tx, AttrSource(src, "keywords"))(value.keywords).items
            return PartialVariable(fn, args, kwargs, value=value, source=src)
        if is_builtin_iterator_class(value):
            # [Note: builtin iterator classes as inputs]  ``reversed`` / ``zip`` / ``enumerate`` reach a resume
            # function as a stack value (``reversed(x.tolist())`` breaks between loading ``reversed`` and calling
            # it).  Wrapped as a class, its call was folded over the constant list into ONE real iterator baked
            # into the code: the second call found it exhausted.  It is the builtin LOAD_GLOBAL would give.
            self.guard("ID_MATCH", value)
            return BuiltinVariable(value, source=src)
        if isinstance(value, type):
            self.guard("ID_MATCH", value)
            ctx = wrap_context_manager_class(value, src)
            return ctx or UserDefinedClassVariable(value, source=src)
        if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)) and \
                getattr(value, "__module__", None) in PURE_C_MODULES:
            self.guard("ID_MATCH", value)
            return BuiltinVariable(value, source=src)
        self.guard("TYPE_MATCH", type(value))
        return UserDefinedObjectVariable(value, source=src)


def is_builtin_iterator_class(value: Any) -> bool:
    """``reversed``, ``zip``, ``enumerate``, ``map``, ``filter``: builtin classes whose instances are iterators."""
    return isinstance(value, type) and getattr(value, "__module__", None) == "builtins" and \
        getattr(builtins, value.__name__, None) is value and hasattr(value, "__next__")


def is_aliasable(vt: VariableTracker) -> bool:
    """A list, dict, user object, module or partial read from the frame: mutable (or compared with ``is``), so which
    names share it matters (a module too: ``m.count += 1`` then ``NET.count``, fuzz round 13)."""
    from .functions import PartialVariable
    from .nn_module import NNModuleVariable
    from .user_defined import UserDefinedObjectVariable
    return type(vt) in (ListVariable, DictVariable, UserDefinedObjectVariable, PartialVariable, NNModuleVariable) \
        and vt.source is not None


def unwrap_compiled(fn):
    """A function already wrapped by ``minicompile`` is traced through (its original code is inlined)."""
    return getattr(fn, "_minidynamo_orig", fn)


def wrap_constant_result(value: Any) -> VariableTracker:
    """Wrap a value computed at trace time from constants (no source, no guard)."""
    if isinstance(value, torch.Size):
        from .lists import SizeVariable
        return SizeVariable([ConstantVariable(int(v)) for v in value])
    if type(value) is tuple:
        return TupleVariable([wrap_constant_result(v) for v in value])
    if type(value) is list:
        return ListVariable([wrap_constant_result(v) for v in value])
    if type(value) is dict:
        return DictVariable({k: wrap_constant_result(v) for k, v in value.items()})
    if isinstance(value, range):
        return RangeVariable(value)
    if isinstance(value, slice):
        return SliceVariable([ConstantVariable(v) for v in (value.start, value.stop, value.step)])
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return NamedTupleVariable([wrap_constant_result(v) for v in value], type(value))
    if isinstance(value, (set, frozenset)):
        return SetVariable([ConstantVariable(v) for v in value], type(value))
    if is_constant_value(value) or isinstance(value, enum.Enum):
        return ConstantVariable(value)
    if isinstance(value, type):
        from .ctx_manager import wrap_context_manager_class
        from .user_defined import UserDefinedClassVariable
        return wrap_context_manager_class(value, None) or UserDefinedClassVariable(value)
    if isinstance(value, types.FunctionType):
        # in the closure of a function read from a class: ``@torch.no_grad()`` over a method keeps the method in
        # ``func`` and ``ctx_factory = no_grad_instance.clone`` -- functions to inline, as VariableBuilder makes
        # them
        from .functions import UserFunctionVariable
        return UserFunctionVariable(value)
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        from .functions import UserMethodVariable
        return UserMethodVariable(value.__func__, wrap_constant_result(value.__self__))
    if dataclasses.is_dataclass(value) or True:
        from .user_defined import UserDefinedObjectVariable
        return UserDefinedObjectVariable(value, source=None, is_constant=True)
