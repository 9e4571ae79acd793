"""Dicts (and sets) whose keys are Python constants; values are any trackers.

Mirrors ``torch/_dynamo/variables/dicts.py``.  Keys that are not constants (tensors, modules) are refused.
"""
from __future__ import annotations

from collections import OrderedDict, defaultdict

from ..exc import raise_observed_exception, unimplemented
from .base import (
    NotConstant,
    VariableTracker,
    builtin_container_attribute,
    call_real_or_refuse,
    handler_takes,
)
from .constant import ConstantVariable, fold
from .iter import ListIteratorVariable
from .lists import ListVariable, TupleVariable


def const_key(key: VariableTracker):
    try:
        k = key.as_python_constant()
        hash(k)
        return k
    except (NotConstant, TypeError):
        unimplemented(f"dict key {key.describe()}", "use strings or ints as dict keys in compiled code")


class DictVariable(VariableTracker):
    def __init__(self, items: dict, user_cls: type = dict, **kw):
        super().__init__(**kw)
        self.items = dict(items)  # python-constant key -> VariableTracker
        self.user_cls = user_cls
        self.default_factory: VariableTracker | None = None  # defaultdict

    def python_type(self):
        return self.user_cls

    def as_python_constant(self):
        items = {k: v.as_python_constant() for k, v in self.items.items()}
        if self.user_cls is defaultdict:  # defaultdict(factory, items): its factory is part of its value
            return defaultdict(self.default_factory.as_python_constant() if self.default_factory else None, items)
        return self.user_cls(items)

    def as_proxy(self):
        return {k: v.as_proxy() for k, v in self.items.items()}

    def as_fake(self):
        return {k: v.as_fake() for k, v in self.items.items()}

    def truth(self, tx):
        return len(self.items) > 0

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return [ConstantVariable(k) for k in self.items]

    def var_getattr(self, tx, name):
        return builtin_container_attribute(self, tx, name)

    def call_method(self, tx, name, args, kwargs):
        real = getattr(self.user_cls(), name, None)
        handler = getattr(self, f"_m_{name.strip('_')}", None) if real is not None else None
        if handler is None:
            unimplemented(f"dict method {name!r}")
        if not handler_takes(handler, args, kwargs):
            call_real_or_refuse(real, args, kwargs, f"{self.user_cls.__name__}.{name}()")
        if name in ("__setitem__", "__delitem__", "pop", "popitem", "clear", "update", "setdefault"):
            tx.output.side_effects.mutate(self)
        return handler(tx, *args, **kwargs)

    def _m_getitem(self, tx, key):
        k = const_key(key)
        if k not in self.items and self.default_factory is not None:
            tx.output.side_effects.mutate(self)
            self.items[k] = self.default_factory.call_function(tx, [], {})
        if k not in self.items:
            raise_observed_exception(KeyError, [key], f"KeyError {k!r} while tracing")
        return self.items[k]

    def _m_get(self, tx, key, default=None):
        return self.items.get(const_key(key), default or ConstantVariable(None))

    def _m_contains(self, tx, key):
        return ConstantVariable(const_key(key) in self.items)

    def _m_len(self, tx):
        return ConstantVariable(len(self.items))

    def _m_keys(self, tx):
        return DictViewVariable(self, "keys")

    def _m_values(self, tx):
        return DictViewVariable(self, "values")

    def _m_items(self, tx):
        return DictViewVariable(self, "items")

    def _m_setitem(self, tx, key, value):
        self.items[const_key(key)] = value
        return ConstantVariable(None)

    def _m_delitem(self, tx, key):
        k = const_key(key)
        if k not in self.items:
            raise_observed_exception(KeyError, [key], f"KeyError {k!r} while tracing")
        del self.items[k]
        return ConstantVariable(None)

    def _m_pop(self, tx, key, default=None):
        k = const_key(key)
        if k not in self.items and default is None:
            raise_observed_exception(KeyError, [key], f"KeyError {k!r} while tracing")
        return self.items.pop(k, default)

    def _m_popitem(self, tx):
        if not self.items:
            message = "dictionary is empty" if issubclass(self.user_cls, OrderedDict) else "popitem(): dictionary is empty"
            raise_observed_exception(KeyError, [ConstantVariable(message)], f"KeyError {message!r} while tracing")
        k, v = self.items.popitem()
        return TupleVariable([ConstantVariable(k), v])

    def _m_setdefault(self, tx, key, default=None):
        return self.items.setdefault(const_key(key), default or ConstantVariable(None))

    def _m_update(self, tx, other=None, **kwargs):
        if other is not None:
            if isinstance(other, DictVariable):
                self.items.update(other.items)
            else:
                for pair in other.unpack_var_sequence(tx):
                    k, v = pair.unpack_var_sequence(tx)
                    self.items[const_key(k)] = v
        self.items.update(kwargs)
        return ConstantVariable(None)

    def _m_clear(self, tx):
        self.items.clear()
        return ConstantVariable(None)

    def _m_copy(self, tx):
        copy = DictVariable(self.items, self.user_cls)
        copy.default_factory = self.default_factory  # a defaultdict's copy keeps its factory
        return copy

    def reconstruct(self, codegen):
        if self.user_cls is not dict:  # OrderedDict(d) / defaultdict(factory, d)
            codegen.load_const_object(self.user_cls, push_null=True)
            if self.user_cls is defaultdict:  # defaultdict(factory, items): the factory may be None
                codegen(self.default_factory or ConstantVariable(None))
        for k, v in self.items.items():
            codegen.load_const(k)
            codegen(v)
        codegen.build(dict, len(self.items))
        if self.user_cls is not dict:
            codegen.call(1 + (self.user_cls is defaultdict))

    def _repr_body(self):
        return ", ".join(f"{k!r}: {v!r}" for k, v in self.items.items())


class DictViewVariable(VariableTracker):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view of the dict, not an iterator.

    A view can be iterated again and again, has a ``len``, answers ``in``, sees later insertions, and
    (keys, items) combines with sets by ``&``, ``|``, ``-``, ``^``.  Tracking it as an iterator would make a second
    ``for`` over it see nothing.  Mirrors ``DictKeysVariable``/``DictValuesVariable``/``DictItemsVariable`` in
    ``torch/_dynamo/variables/dicts.py``.
    """

    def __init__(self, dict_vt: DictVariable, kind: str, **kw):
        super().__init__(**kw)
        self.dict_vt = dict_vt
        self.kind = kind  # "keys", "values" or "items"

    def python_type(self):
        return type(getattr({}, self.kind)())

    def view_items(self) -> list[VariableTracker]:
        """The view's items now (the dict may have changed since the view was made)."""
        items = self.dict_vt.items
        if self.kind == "keys":
            return [ConstantVariable(k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVariable([ConstantVariable(k), v]) for k, v in items.items()]

    def as_python_set(self) -> set:
        """The view as a Python set, for set operators (keys and constant items only)."""
        if self.kind == "values":
            unimplemented("set operators on dict.values()")
        return {const_key(i) for i in self.view_items()}

    def truth(self, tx):
        return len(self.dict_vt.items) > 0

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return self.view_items()

    def var_getattr(self, tx, name):
        return builtin_container_attribute(self, tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return ConstantVariable(len(self.dict_vt.items))
        if name == "__contains__":
            from .operators import contains
            return contains(tx, self.view_items(), args[0])
        if name == "__iter__":
            return DictIteratorVariable(self.dict_vt, self.kind)
        if name == "isdisjoint" and self.kind != "values":
            other = {const_key(i) for i in args[0].unpack_var_sequence(tx)}
            return ConstantVariable(self.as_python_set().isdisjoint(other))
        unimplemented(f"method {name!r} of dict.{self.kind}()")

    def reconstruct(self, codegen):
        codegen.load_const_object(getattr(dict, self.kind), push_null=True)
        codegen(self.dict_vt)
        codegen.call(1)

    def _repr_body(self):
        return f"{self.kind} of {self.dict_vt!r}"


class DictIteratorVariable(ListIteratorVariable):
    """``iter(d)`` / ``iter(d.items())``...: walks the dict's keys in order, reading each value when it is reached.

    As CPython's dict iterators: a value stored into the dict during the loop is the one seen, and a change of
    the dict's size during the loop raises ``RuntimeError`` (inside the trace, so ``except`` can catch it).
    Rebuilt at a graph break as the real dict's iterator (upstream rebuilds a snapshot of the items left, which
    would miss a change the rest of the loop makes).
    """

    def __init__(self, dict_vt: DictVariable, kind: str = "keys", **kw):
        super().__init__([], **kw)
        self.dict_vt = dict_vt
        self.kind = kind
        self.keys = list(dict_vt.items)

    def python_type(self):
        return type(iter(getattr({}, self.kind)()))

    def next_variable(self, tx) -> VariableTracker | None:
        items = self.dict_vt.items
        if len(items) != len(self.keys):
            raise_observed_exception(RuntimeError, [ConstantVariable("dictionary changed size during iteration")],
                                     "dictionary changed size during iteration")
        if list(items) != self.keys:
            unimplemented("dict keys replaced during iteration over the dict")
        if self.index >= len(self.keys):
            return None
        k = self.keys[self.index]
        self.index += 1
        if self.kind == "keys":
            return ConstantVariable(k)
        if self.kind == "values":
            return items[k]
        return TupleVariable([ConstantVariable(k), items[k]])

    def unpack_var_sequence(self, tx):
        return self.drain(tx)

    def reconstruct(self, codegen):
        """The real dict's own iterator, advanced as far: it goes on seeing (and objecting to) the dict's changes."""
        from ..utils import iterator_at
        codegen.load_const_object(iterator_at, push_null=True)
        codegen(DictViewVariable(self.dict_vt, self.kind))
        codegen.load_const(self.index)
        codegen.call(2)

    def _repr_body(self):
        return f"{self.kind} {self.index}/{len(self.keys)}"


# the methods that change a set in place; binary_op sends ``s |= t`` (and ``&=``, ``-=``, ``^=``) to the dunders
SET_MUTATORS = frozenset({"add", "discard", "remove", "update", "clear", "pop", "difference_update",
                          "intersection_update", "symmetric_difference_update",
                          "__ior__", "__iand__", "__isub__", "__ixor__"})


class SetVariable(VariableTracker):
    """A set (or frozenset: ``user_cls``) of Python constants."""

    def __init__(self, items: list[VariableTracker], user_cls: type = set, **kw):
        super().__init__(**kw)
        self.values = {const_key(i) for i in items}
        self.user_cls = user_cls
        self.version = 0  # changes with every mutation: a set iterator must notice (SetIteratorVariable)

    def python_type(self):
        return self.user_cls

    def as_python_constant(self):
        return self.user_cls(self.values)

    def truth(self, tx):
        return bool(self.values)

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return [ConstantVariable(v) for v in self.values]

    def var_getattr(self, tx, name):
        return builtin_container_attribute(self, tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name in SET_MUTATORS and self.user_cls is set:
            tx.output.side_effects.mutate(self)
            self.version += 1
            # ``self.values`` itself does the work -- never a copy of it: ``s.pop()`` must shrink ``s`` -- and
            # raises what the real set raises (KeyError for ``remove`` of a missing item, ``pop`` of an empty set)
            result = fold(tx, getattr(self.values, name), [a.as_python_constant() for a in args],
                          {n: v.as_python_constant() for n, v in kwargs.items()})
            return self if name.startswith("__i") else result  # ``s |= t`` leaves ``s`` bound to the same set
        if name == "__contains__":
            return ConstantVariable(const_key(args[0]) in self.values)
        if name == "__len__":
            return ConstantVariable(len(self.values))
        return fold(tx, getattr(self.as_python_constant(), name), [a.as_python_constant() for a in args], {})

    def reconstruct(self, codegen):
        if self.user_cls is not set:
            codegen.load_const_object(self.user_cls, push_null=True)
        for v in self.values:
            codegen.load_const(v)
        codegen.build(set, len(self.values))
        if self.user_cls is not set:
            codegen.call(1)


class SetIteratorVariable(ListIteratorVariable):
    """``iter(s)`` over a set: its items as they were when the loop began, and CPython's ``RuntimeError`` at the
    next step once the set's size has changed (``s.add`` in the loop).  A change that keeps the size is refused:
    which item the real iterator gives next depends on the hash table.  Not rebuilt at a graph break (a snapshot
    would not see the rest of the loop's changes, and the real set's order need not be ours): the frame runs
    eagerly."""

    def __init__(self, set_vt: SetVariable, **kw):
        super().__init__(set_vt.unpack_var_sequence(None), **kw)
        self.set_vt = set_vt
        self.size, self.version = len(set_vt.values), set_vt.version

    def python_type(self):
        return type(iter(set()))

    def next_variable(self, tx) -> VariableTracker | None:
        if len(self.set_vt.values) != self.size:
            message = "Set changed size during iteration"
            raise_observed_exception(RuntimeError, [ConstantVariable(message)], message)
        if self.set_vt.version != self.version:
            unimplemented("a set changed (keeping its size) during iteration over it")
        return super().next_variable(tx)

    def unpack_var_sequence(self, tx):
        return self.drain(tx)

    def reconstruct(self, codegen):
        unimplemented("an iterator over a set is alive at a graph break", "iterate over sorted(s) or list(s)")


def wrap_list(items) -> ListVariable:
    return ListVariable(items)
