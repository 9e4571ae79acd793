"""Sequences: tuples, lists, torch.Size, named tuples, ranges and slices (their iterators: ``iter.py``).

A container tracker holds trackers for its items, so ``[x, y]`` with tensors ``x, y`` stays a Python list while its
items stay in the graph.  Lists are mutated in place (see [Note: mutable trackers]); a list that came from the
frame's inputs reports its mutation to ``SideEffects`` so the generated code updates the real list.
Mirrors ``torch/_dynamo/variables/lists.py``.
"""
from __future__ import annotations

import functools
import operator
from typing import NoReturn

import torch

from ..exc import raise_observed_exception, unimplemented
from .base import (
    NotConstant,
    VariableTracker,
    builtin_container_attribute,
    call_real_or_refuse,
    handler_takes,
)
from .constant import ConstantVariable, fold, raise_as_observed
from .sym_node import is_numeric


class BaseListVariable(VariableTracker):
    container = tuple

    def __init__(self, items: list[VariableTracker], **kw):
        super().__init__(**kw)
        self.items = list(items)

    def python_type(self):
        return self.container

    def as_python_constant(self):
        return self.container([i.as_python_constant() for i in self.items])

    def as_proxy(self):
        return self.container([i.as_proxy() for i in self.items])

    def as_fake(self):
        return self.container([i.as_fake() for i in self.items])

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return list(self.items)

    def truth(self, tx):
        return len(self.items) > 0

    def var_getattr(self, tx, name):
        return builtin_container_attribute(self, tx, name)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        try:
            idx = index.as_python_constant()
        except NotConstant:
            unimplemented(f"indexing a {self.container.__name__} with {index.describe()}",
                          "index Python containers with Python ints or slices")
        if isinstance(idx, slice):
            try:
                return self.new_like(self.items[idx])
            except TypeError as e:  # lst[0:"a"]: CPython's TypeError (fuzz round 12: an internal error)
                raise_as_observed(e, f"slice {idx!r}: {e}")
        try:
            return self.items[operator.index(idx)]
        except (IndexError, TypeError):
            pass
        kind = list if isinstance(self, ListVariable) else tuple
        try:  # the error CPython raises, in its words for this kind of sequence ("tuple index out of range")
            kind(self.items)[idx]
        except (IndexError, TypeError) as e:
            raise_as_observed(e, f"{kind.__name__} index {idx!r}: {e}")

    def _matching(self, tx, x: VariableTracker, first_only: bool, positions: range | None = None) -> list[int]:
        """Indices of the items (among ``positions``) equal to ``x`` as ``list.index``/``count``/``remove``
        compare: ``is``, then ``==``.  An ``==`` between a tensor and another tensor or a number is elementwise (and
        its truth an error): refused; with a string or None it is False (``tensor_never_equal``)."""
        from .operators import identical_or_equal, tensor_never_equal
        from .tensor import TensorVariable
        hits = []
        for k in range(len(self.items)) if positions is None else positions:
            item = self.items[k]
            if item is not x and (isinstance(item, TensorVariable) or isinstance(x, TensorVariable)) and not \
                    tensor_never_equal(item, x):
                unimplemented("`==` between tensors in list.index/count compares values")
            if identical_or_equal(tx, item, x):
                hits.append(k)
                if first_only:
                    break
        return hits

    def new_like(self, items):
        return type(self)(items)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__":
            from .operators import contains
            return contains(tx, self.items, args[0])
        if name in ("index", "count") and all(v.is_python_constant() for v in [self, *args, *kwargs.values()]):
            return fold(tx, getattr(self.as_python_constant(), name), [a.as_python_constant() for a in args],
                        {n: v.as_python_constant() for n, v in kwargs.items()})
        if name == "count" and len(args) == 1:
            return ConstantVariable(len(self._matching(tx, args[0], first_only=False)))
        if name == "index" and 1 <= len(args) <= 3 and not kwargs:
            window = slice(*[a.as_python_constant() for a in args[1:]], None)  # index(x[, start[, stop]])
            hits = self._matching(tx, args[0], first_only=True, positions=range(len(self.items))[window])
            if not hits:
                self.raise_not_found("index", args[0])
            return ConstantVariable(hits[0])
        return super().call_method(tx, name, args, kwargs)

    def raise_not_found(self, method: str, x: VariableTracker) -> NoReturn:
        """CPython's ``ValueError`` for ``index``/``remove`` of a value the sequence lacks, catchable by the traced
        code.  Its words name the value and differ across Python versions ("3 is not in list" before 3.13), so for
        a constant they come from the same call on an empty sequence; a value that is not a constant (whose repr is
        not known while tracing) gets CPython's generic words."""
        kind = "list" if isinstance(self, ListVariable) else "tuple"
        message = f"{kind}.{method}(x): x not in {kind}"
        if x.is_python_constant():
            try:
                getattr([] if kind == "list" else (), method)(x.as_python_constant())
            except ValueError as e:
                message = str(e)
        raise_observed_exception(ValueError, [ConstantVariable(message)], f"{kind}.{method}: {message}")

    def reconstruct(self, codegen):
        for item in self.items:
            codegen(item)
        codegen.build(self.container, len(self.items))

    def _repr_body(self):
        return ", ".join(repr(i) for i in self.items)


class TupleVariable(BaseListVariable):
    container = tuple


class ListVariable(BaseListVariable):
    container = list

    def call_method(self, tx, name, args, kwargs):
        mutators = {"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort", "__setitem__",
                    "__delitem__", "__iadd__", "__imul__"}
        if name not in mutators:
            if name == "copy":
                return ListVariable(self.items)
            return super().call_method(tx, name, args, kwargs)
        handler = getattr(self, f"_m_{name.strip('_')}")
        if not handler_takes(handler, args, kwargs):
            call_real_or_refuse(getattr([], name), args, kwargs, f"list.{name}()")
        tx.output.side_effects.mutate(self)
        return handler(tx, *args, **kwargs)

    def _m_append(self, tx, v):
        self.items.append(v)
        return ConstantVariable(None)

    def _m_extend(self, tx, v):
        self.items.extend(v.unpack_var_sequence(tx))
        return ConstantVariable(None)

    def _m_iadd(self, tx, v):
        self._m_extend(tx, v)
        return self

    def _m_imul(self, tx, n):
        self._list_op(operator.imul, n.as_python_constant())  # ``xs *= 2`` repeats the items of the same list
        return self

    def _list_op(self, op, *args):
        """``op(self.items, *args)``: the Python list of trackers does the work, and what it raises (``pop from
        empty list``, an index out of range) is what the real list raises: the traced code's own exception."""
        try:
            return op(self.items, *args)
        except (IndexError, TypeError, ValueError) as e:
            raise_as_observed(e, f"list {op.__name__}: {e}")

    def _m_insert(self, tx, i, v):
        self._list_op(list.insert, i.as_python_constant(), v)
        return ConstantVariable(None)

    def _m_pop(self, tx, i=None):
        return self._list_op(list.pop, *([] if i is None else [i.as_python_constant()]))

    def _m_remove(self, tx, v):
        hits = self._matching(tx, v, first_only=True)
        if not hits:
            self.raise_not_found("remove", v)
        del self.items[hits[0]]
        return ConstantVariable(None)

    def _m_clear(self, tx):
        self.items.clear()
        return ConstantVariable(None)

    def _m_reverse(self, tx):
        self.items.reverse()
        return ConstantVariable(None)

    def _m_sort(self, tx, *, key=None, reverse=None):
        """[Note: sorting symbolic sizes]  ``sorted(x.shape)`` with a dynamic size: list.sort asks only ``a < b``,
        so the same sort run over positions, each ``<`` answered by the ShapeEnv (which guards the relation it
        took, ``s0 < 4``), makes the comparisons CPython makes on the real values, in the same order: the same
        stable result, valid for every size the guards admit."""
        from .operators import compare_op  # operators imports this module
        if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
            keys = [key.call_function(tx, [i], {}) for i in self.items]
        else:
            keys = list(self.items)
        reverse = bool(reverse.as_python_constant()) if reverse else False
        if all(k.is_python_constant() for k in keys):
            values = [k.as_python_constant() for k in keys]
            position_key = values.__getitem__
        elif all(is_numeric(k) for k in keys):  # symbolic sizes among them: see [Note: sorting symbolic sizes]
            position_key = functools.cmp_to_key(lambda a, b: -1 if compare_op(tx, operator.lt, keys[a], keys[b])
                                                 .truth(tx) else 1)
        else:
            unimplemented("sorting by values that are not constants (tensors compare by value)",
                          "sort indices or constants, or use torch.sort / torch.argsort")
        try:  # a stable sort of the positions, as list.sort is (reverse=True keeps equal items in order too)
            order = sorted(range(len(keys)), key=position_key, reverse=reverse)
        except TypeError as e:  # '<' not supported between instances of 'str' and 'int'
            raise_as_observed(e, f"list.sort: {e}")
        self.items[:] = [self.items[k] for k in order]
        return ConstantVariable(None)

    def _m_setitem(self, tx, key, value):
        idx = key.as_python_constant()
        self._list_op(operator.setitem, idx, value.unpack_var_sequence(tx) if isinstance(idx, slice) else value)
        return ConstantVariable(None)

    def _m_delitem(self, tx, key):
        self._list_op(operator.delitem, key.as_python_constant())
        return ConstantVariable(None)


class SizeVariable(TupleVariable):
    """``tensor.shape``: a tuple of ints and, for dynamic dimensions, ``SymNodeVariable``s."""

    container = torch.Size

    def new_like(self, items):
        return SizeVariable(items)

    def as_proxy(self):
        return tuple(i.as_proxy() for i in self.items)

    def call_method(self, tx, name, args, kwargs):
        if name == "numel":
            from .operators import binary_op
            n = ConstantVariable(1)
            for i in self.items:
                n = binary_op(tx, operator.mul, n, i)  # stays symbolic when a size is
            return n
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen):
        codegen.load_const_object(torch.Size, push_null=True)
        for item in self.items:
            codegen(item)
        codegen.build(tuple, len(self.items))
        codegen.call(1)


class NamedTupleVariable(TupleVariable):
    """A named tuple or a structseq such as ``torch.return_types.topk`` (``.values``, ``.indices``)."""

    def __init__(self, items, tuple_cls, **kw):
        super().__init__(items, **kw)
        self.tuple_cls = tuple_cls

    def python_type(self):
        return self.tuple_cls

    def fields(self) -> list[str]:
        if hasattr(self.tuple_cls, "_fields"):
            return list(self.tuple_cls._fields)
        return list(getattr(self.tuple_cls, "__match_args__", ()))

    def new_like(self, items):
        return TupleVariable(items)

    def as_python_constant(self):
        return self.tuple_cls(*[i.as_python_constant() for i in self.items])

    def var_getattr(self, tx, name):
        if name in self.fields():
            return self.items[self.fields().index(name)]
        if name == "_fields":
            return ConstantVariable(tuple(self.fields()))
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen):
        codegen.load_const_object(self.tuple_cls, push_null=True)
        for item in self.items:
            codegen(item)
        if hasattr(self.tuple_cls, "_fields"):
            codegen.call(len(self.items))
        else:  # structseq: built from one sequence
            codegen.build(tuple, len(self.items))
            codegen.call(1)


class RangeVariable(BaseListVariable):
    def __init__(self, r: range, **kw):
        super().__init__([ConstantVariable(v) for v in r], **kw)
        self.range = r

    def python_type(self):
        return range

    def as_python_constant(self):
        return self.range

    def getitem(self, tx, index):
        return fold(tx, operator.getitem, [self.range, index.as_python_constant()], {})  # a range, or an int

    def reconstruct(self, codegen):
        codegen.load_const_object(range, push_null=True)
        for v in (self.range.start, self.range.stop, self.range.step):
            codegen.load_const(v)
        codegen.call(3)


class SliceVariable(VariableTracker):
    def __init__(self, items: list[VariableTracker], **kw):
        super().__init__(**kw)
        self.items = items

    def python_type(self):
        return slice

    def as_python_constant(self):
        return slice(*[i.as_python_constant() for i in self.items])

    def as_proxy(self):
        return slice(*[i.as_proxy() for i in self.items])

    def as_fake(self):
        return slice(*[i.as_fake() for i in self.items])

    def var_getattr(self, tx, name):
        if name in ("start", "stop", "step"):
            items = self.items + [ConstantVariable(None)] * (3 - len(self.items))
            if len(self.items) == 1:
                items = [ConstantVariable(None), self.items[0], ConstantVariable(None)]
            return items[("start", "stop", "step").index(name)]
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen):
        for item in self.items:
            codegen(item)
        codegen.build(slice, len(self.items))
