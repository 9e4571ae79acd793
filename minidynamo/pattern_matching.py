"""``match`` statements while tracing: ``MATCH_SEQUENCE``, ``MATCH_MAPPING``, ``MATCH_KEYS``, ``MATCH_CLASS``, ``GET_LEN``.

In:  the subject of a ``match`` (and a pattern's keys or class) on the translator's stack.  Out: what CPython's
matching instructions push -- a bool, the values a pattern captures, or ``None`` for no match -- so the compiler's
own jumps between the ``case`` blocks pick the block CPython would.  The answers are Python constants, decided from
the subject's *type* and the pattern's keys and attributes: a ``case`` is chosen while tracing and never becomes a
graph node (a tensor's values cannot choose one; its type, its attributes and a dict's keys can).

    match cfg:                    LOAD_FAST cfg
        case {"act": a}:     ->   MATCH_MAPPING    -> True (cfg is a DictVariable)
            ...                   MATCH_KEYS       -> TupleVariable([cfg["act"]]), bound to a
        case Point(x, y):    ->   MATCH_CLASS 2    -> TupleVariable([p.x, p.y]) via Point.__match_args__

These are methods of ``InstructionTranslatorBase`` (``symbolic_convert.py``), gathered in a mixin like
``exception_handling.py``'s.  Upstream twin: the ``MATCH_*`` handlers of ``torch/_dynamo/symbolic_convert.py``;
CPython's ``match_class`` and ``match_keys`` in ``Python/ceval.c`` define the rules followed here.
"""
from __future__ import annotations

import collections.abc

from .exc import Unsupported, unimplemented
from .variables import BuiltinVariable, ConstantVariable, DictVariable, TupleVariable, VariableTracker
from .variables.builtin import getattr_or_attribute_error

# ``case int(v):``: builtins whose one positional sub-pattern matches the subject itself (CPython's
# ``_Py_TPFLAGS_MATCH_SELF``).
SELF_MATCHING_TYPES = frozenset({bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple})
SELF_MATCH = object()


def match_positional(cls: type, count: int):
    """The attributes ``count`` positional sub-patterns of ``case cls(...)`` name (CPython's ``match_class``):
    ``cls.__match_args__``, or, for the builtins that match themselves (int, str, tuple...), the subject."""
    if count == 0:
        return ()
    match_args = getattr(cls, "__match_args__", None)  # looked up on the class, as CPython does
    if match_args is None and cls in SELF_MATCHING_TYPES and count == 1:
        return SELF_MATCH
    if not isinstance(match_args, tuple) or count > len(match_args):
        unimplemented(f"`match` class pattern {cls.__name__}() with {count} positional sub-patterns (a TypeError)")
    return match_args[:count]


class PatternMatchingMixin:
    """The ``match``-statement handlers of ``InstructionTranslatorBase``."""

    def _subject_type(self, subject: VariableTracker) -> type:
        try:
            return subject.python_type()
        except Unsupported:
            unimplemented(f"`match` on {subject.describe()}", "match on Python constants and containers")

    def MATCH_SEQUENCE(self, inst):
        t = self._subject_type(self.stack[-1])
        is_seq = issubclass(t, collections.abc.Sequence) and not issubclass(t, (str, bytes, bytearray))
        self.push(ConstantVariable(is_seq))

    def MATCH_MAPPING(self, inst):
        self.push(ConstantVariable(issubclass(self._subject_type(self.stack[-1]), collections.abc.Mapping)))

    def GET_LEN(self, inst):
        self.push(self.stack[-1].call_method(self, "__len__", [], {}))

    def MATCH_KEYS(self, inst):  # subject, keys -> subject, keys, (values...) or None
        subject, keys = self.stack[-2], self.stack[-1].as_python_constant()
        if not isinstance(subject, DictVariable):
            unimplemented(f"`match` of a mapping pattern on {subject.describe()}", "match on a plain dict")
        found = all(k in subject.items for k in keys)
        self.push(TupleVariable([subject.items[k] for k in keys]) if found else ConstantVariable(None))

    def MATCH_CLASS(self, inst):  # subject, cls, keyword names -> tuple of attributes, or None
        names = self.pop().as_python_constant()
        cls_vt, subject = self.pop(), self.pop()
        cls = cls_vt.as_python_constant() if cls_vt.is_python_constant() else None
        if not isinstance(cls, type):
            unimplemented(f"`match` class pattern on {cls_vt.describe()}", "match on a class")
        matched = BuiltinVariable(isinstance).call_function(self, [subject, cls_vt], {}).as_python_constant()
        if not matched:
            self.push(ConstantVariable(None))
            return
        positional = match_positional(cls, inst.arg)
        if positional is SELF_MATCH:  # case int(v): the subject itself
            attrs, values = list(names), [subject]
        else:
            attrs, values = list(positional) + list(names), []
        if len(set(attrs)) != len(attrs):
            unimplemented(f"`match` class pattern {cls.__name__} names an attribute twice (a TypeError)")
        missing = object()
        for name in attrs:
            value = getattr_or_attribute_error(self, subject, name, missing)
            if value is missing:
                self.push(ConstantVariable(None))
                return
            values.append(value)
        self.push(TupleVariable(values))
