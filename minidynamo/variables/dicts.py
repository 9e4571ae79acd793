"""Dicts (and sets) whose keys are Python constants; values are any trackers.

Mirrors ``torch/_dynamo/variables/dicts.py``.  Keys that are not constants (tensors, modules) are refused.
"""
from __future__ import annotations

from ..exc import raise_observed_exception, unimplemented
from .base import BoundMethodVariable, NotConstant, VariableTracker
from .constant import ConstantVariable
from .lists import ListIteratorVariable, ListVariable, TupleVariable


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
        return self.user_cls({k: v.as_python_constant() for k, v in self.items.items()})

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
        return BoundMethodVariable(self, name)

    def call_method(self, tx, name, args, kwargs):
        handler = getattr(self, f"_m_{name.strip('_')}", None)
        if handler is None:
            unimplemented(f"dict method {name!r}")
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
        return ListIteratorVariable([ConstantVariable(k) for k in self.items])

    def _m_values(self, tx):
        return ListIteratorVariable(list(self.items.values()))

    def _m_items(self, tx):
        return ListIteratorVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()])

    def _m_setitem(self, tx, key, value):
        self.items[const_key(key)] = value
        return ConstantVariable(None)

    def _m_delitem(self, tx, key):
        del self.items[const_key(key)]
        return ConstantVariable(None)

    def _m_pop(self, tx, key, default=None):
        k = const_key(key)
        if k not in self.items and default is None:
            unimplemented(f"KeyError {k!r} while tracing")
        return self.items.pop(k, default)

    def _m_popitem(self, tx):
        if not self.items:
            unimplemented("popitem() on an empty dict while tracing")
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
        return DictVariable(self.items, self.user_cls)

    def reconstruct(self, codegen):
        if self.user_cls is not dict:  # OrderedDict(d) / defaultdict(factory, d)
            codegen.load_const_object(self.user_cls, push_null=True)
            if self.default_factory is not None:
                codegen(self.default_factory)
        for k, v in self.items.items():
            codegen.load_const(k)
            codegen(v)
        codegen.build(dict, len(self.items))
        if self.user_cls is not dict:
            codegen.call(1 + (self.default_factory is not None))

    def _repr_body(self):
        return ", ".join(f"{k!r}: {v!r}" for k, v in self.items.items())


class SetVariable(VariableTracker):
    """A set of Python constants."""

    def __init__(self, items: list[VariableTracker], **kw):
        super().__init__(**kw)
        self.values = {const_key(i) for i in items}

    def python_type(self):
        return set

    def as_python_constant(self):
        return set(self.values)

    def truth(self, tx):
        return bool(self.values)

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return [ConstantVariable(v) for v in self.values]

    def var_getattr(self, tx, name):
        return BoundMethodVariable(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name in ("add", "discard", "remove", "update", "clear"):
            tx.output.side_effects.mutate(self)
            getattr(self.values, name)(*[a.as_python_constant() for a in args])
            return ConstantVariable(None)
        if name == "__contains__":
            return ConstantVariable(const_key(args[0]) in self.values)
        if name == "__len__":
            return ConstantVariable(len(self.values))
        from .constant import fold
        return fold(tx, getattr(set(self.values), name), [a.as_python_constant() for a in args], {})

    def reconstruct(self, codegen):
        for v in self.values:
            codegen.load_const(v)
        codegen.build(set, len(self.values))


def wrap_list(items) -> ListVariable:
    return ListVariable(items)
