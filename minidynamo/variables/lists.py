"""Sequences: tuples, lists, torch.Size, named tuples, ranges, slices, and list iterators.

A container tracker holds trackers for its items, so ``[x, y]`` with tensors ``x, y`` stays a Python list while its
items stay in the graph.  Lists are mutated in place (see [Note: mutable trackers]); a list that came from the
frame's inputs reports its mutation to ``SideEffects`` so the generated code updates the real list.
Mirrors ``torch/_dynamo/variables/lists.py``.
"""
from __future__ import annotations

import operator
import types
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
            return self.new_like(self.items[idx])
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
        from .builtin import identical_or_equal, tensor_never_equal
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
            from .builtin import contains
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
        if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
            keys = [key.call_function(tx, [i], {}) for i in self.items]
        else:
            keys = list(self.items)
        if not all(k.is_python_constant() for k in keys):
            unimplemented("sorting by values that are not constants (tensors compare by value)",
                          "sort indices or constants, or use torch.sort / torch.argsort")
        values = [k.as_python_constant() for k in keys]
        try:  # a stable sort of the positions, as list.sort is (reverse=True keeps equal items in order too)
            order = sorted(range(len(values)), key=values.__getitem__,
                           reverse=bool(reverse.as_python_constant()) if reverse else False)
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
            from .builtin import binary_op
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


class ListIteratorVariable(VariableTracker):
    """An iterator over known items (``iter(list)``, ``enumerate``, ``zip``, ``dict.items()``), unrolled."""

    def __init__(self, items: list[VariableTracker], index: int = 0, **kw):
        super().__init__(**kw)
        self.items = list(items)
        self.index = index

    def python_type(self):
        return type(iter([]))

    def next_variable(self, tx) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest

    def drain(self, tx) -> list[VariableTracker]:
        """The items left, one ``next_variable`` at a time: for iterators whose next step does more than index
        a list (guards, a container that may change, a lazily built item)."""
        rest = []
        while (item := self.next_variable(tx)) is not None:
            rest.append(item)
        return rest

    def reconstruct(self, codegen):
        for item in self.items[self.index:]:
            codegen(item)
        codegen.build(tuple, len(self.items) - self.index)
        codegen.get_iter()

    def _repr_body(self):
        return f"{self.index}/{len(self.items)}"


class GeneratorResultVariable(ListIteratorVariable):
    """What a traced generator returns: the items its body yielded when it was called ([Note: eager generators]).

    [Note: stale generators]  Those items are what the body computes *at the call*.  Python computes each when
    it is asked for, reading the variables, lists and tensors it uses then: ``g = (x * k for _ in xs); k = 10;
    list(g)`` multiplies by 10, and ``xs.append(3)`` before the loop adds an item.  So taking an item checks
    that the traced code wrote nothing since the call (``SideEffects.version``); if it did, the translation
    starts again and breaks the graph at the call itself (``root_offset``), where Python makes the real,
    lazy generator.  A generator's own methods (``send``, ``throw``, ``close``) are refused the same way, and so
    is handing an unfinished one to Python (``reconstruct``): what runs next may change what its body reads.
    """

    def __init__(self, items: list[VariableTracker], name: str, version: tuple, made_at: int, **kw):
        super().__init__(items, **kw)
        self.name = name
        self.version = version
        self.made_at = made_at  # offset of the root frame's instruction that made it
        # the body runs on to its end (or its error) at the ``next`` after the last item, not at the last item
        self.finished = False

    def python_type(self):
        return types.GeneratorType

    def refuse(self, reason: str) -> NoReturn:
        from ..exc import Unsupported
        e = Unsupported(f"generator {self.name} {reason}", "Python makes the generator and runs it lazily")
        e.root_offset = self.made_at
        e.break_earlier = True  # [Note: a break moved earlier] in convert_frame.py
        raise e

    def check_fresh(self, tx) -> None:
        if not self.finished and tx.output.side_effects.version() != self.version:
            self.refuse("is run after the code changed state its body may read (Python runs it lazily)")

    def next_variable(self, tx):
        self.check_fresh(tx)
        item = super().next_variable(tx)
        self.finished = item is None
        return item

    def unpack_var_sequence(self, tx):
        self.check_fresh(tx)
        self.finished = True
        return super().unpack_var_sequence(tx)

    def reconstruct(self, codegen):
        """Handed to Python (at a graph break, or returned) a generator must be the real one: whatever runs next
        may change what its body reads, or call its own methods.  Only a finished one is a plain iterator."""
        if not self.finished:
            self.refuse("is handed to Python unfinished (a graph break or the frame's return)")
        super().reconstruct(codegen)

    def var_getattr(self, tx, name):
        if name in GENERATOR_ONLY:
            self.refuse(f"attribute {name!r} (a traced generator is a list of its items)")
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name in GENERATOR_ONLY:
            self.refuse(f"method {name!r} (a traced generator is a list of its items)")
        return super().call_method(tx, name, args, kwargs)


# what a generator has and the list iterator a traced one is rebuilt as has not
GENERATOR_ONLY = frozenset(n for n in dir(types.GeneratorType) if n not in dir(iter([])))


class ListElementIteratorVariable(ListIteratorVariable):
    """``iter(lst)`` over a list made or read in the frame: it walks the list's items *as they are now*.

    Like CPython's ``list_iterator`` it holds the list and an index, so items appended inside the loop are
    visited and removed ones are not (a snapshot would see neither).  Rebuilt at a graph break as the real list's
    iterator, advanced as far, for the same reason (upstream rebuilds a snapshot of the items left, which misses
    what the rest of the loop appends); the resume function then runs its ``FOR_ITER`` natively.
    """

    def __init__(self, list_vt: ListVariable, **kw):
        super().__init__([], **kw)
        self.list_vt = list_vt
        self.items = list_vt.items  # the list's own item list: it changes with the list

    def reconstruct(self, codegen):
        from ..utils import iterator_at
        codegen.load_const_object(iterator_at, push_null=True)
        codegen(self.list_vt)
        codegen.load_const(self.index)
        codegen.call(2)


class LazyIteratorVariable(ListIteratorVariable):
    """``zip``, ``map``, ``filter``, ``enumerate``: each ``next`` takes items from the underlying iterators then.

    Unrolled up front, ``zip(it, it)`` would drain ``it`` into its first argument and pair nothing, ``map(f, xs)``
    would call ``f`` on every item before the first ``next`` (printing, appending in the wrong order), and an
    iterator shared with the loop body would look exhausted.  Like CPython's, these objects hold their iterators
    and pull from them on demand.  Upstream: ``ZipVariable``, ``MapVariable``, ``FilterVariable``
    (``torch/_dynamo/variables/lists.py``).  At a graph break they are rebuilt as the same builtin over the
    (rebuilt) iterators, so what is left is still taken lazily.
    """

    builtin: type = zip

    def __init__(self, iterators: list[ListIteratorVariable], **kw):
        super().__init__([], **kw)
        self.iterators = list(iterators)

    def python_type(self):
        return self.builtin

    def produce(self, tx) -> VariableTracker | None:
        raise NotImplementedError

    def next_variable(self, tx) -> VariableTracker | None:
        return self.produce(tx)

    def unpack_var_sequence(self, tx):
        return self.drain(tx)

    def next_group(self, tx) -> list[VariableTracker] | None:
        """One item from each iterator, in order; None as soon as one is exhausted (as CPython's zip/map), or at
        once when there is none (``zip()`` is empty, not endless)."""
        if not self.iterators:
            return None
        group = []
        for it in self.iterators:
            item = it.next_variable(tx)
            if item is None:
                return None
            group.append(item)
        return group

    def reconstruct_args(self, codegen) -> int:
        for it in self.iterators:
            codegen(it)
        return len(self.iterators)

    def reconstruct(self, codegen):
        codegen.load_const_object(self.builtin, push_null=True)
        codegen.call(self.reconstruct_args(codegen))

    def _repr_body(self):
        return f"{self.builtin.__name__} of {len(self.iterators)}"


class ZipVariable(LazyIteratorVariable):
    builtin = zip

    def produce(self, tx):
        group = self.next_group(tx)
        return None if group is None else TupleVariable(group)


class MapVariable(LazyIteratorVariable):
    builtin = map

    def __init__(self, fn: VariableTracker, iterators: list[ListIteratorVariable], **kw):
        super().__init__(iterators, **kw)
        self.fn = fn

    def produce(self, tx):
        group = self.next_group(tx)
        return None if group is None else self.fn.call_function(tx, group, {})

    def reconstruct_args(self, codegen):
        codegen(self.fn)
        return 1 + super().reconstruct_args(codegen)


class FilterVariable(MapVariable):
    builtin = filter

    def produce(self, tx):
        while (item := self.iterators[0].next_variable(tx)) is not None:
            is_none = isinstance(self.fn, ConstantVariable) and self.fn.value is None
            keep = item if is_none else self.fn.call_function(tx, [item], {})
            if keep.truth(tx):
                return item
        return None


class EnumerateVariable(LazyIteratorVariable):
    builtin = enumerate

    def __init__(self, iterator: ListIteratorVariable, start: int, **kw):
        super().__init__([iterator], **kw)
        self.count = start

    def produce(self, tx):
        item = self.iterators[0].next_variable(tx)
        if item is None:
            return None
        self.count += 1
        return TupleVariable([ConstantVariable(self.count - 1), item])

    def reconstruct_args(self, codegen):
        codegen(self.iterators[0])
        codegen.load_const(self.count)
        return 2


class TupleIteratorVariable(ListIteratorVariable):
    """A ``tuple_iterator`` read from the frame: its items are looked at (and guarded) one at a time.

    [Note: loops resumed with their iterator]  A graph break inside ``for i in range(n)`` hands the loop's
    iterator to the resume function (rebuilt as ``iter(tuple(rest))``).  Treated as an opaque object, its
    ``FOR_ITER`` would be one more graph break per iteration, and one more frame: the body's resume function
    returns to run ``FOR_ITER`` natively, then enters the body's start in a frame of its own.  Upstream Dynamo
    traces such an input (``TupleIteratorVariable``, ``TUPLE_ITERATOR_LEN`` guards); so do we, lazily:
    ``FOR_ITER`` peeks at the next item the real iterator holds (``TupleIteratorGetItemSource``, guarded only as
    it is used) and guards ``len >= k`` items left -- or ``len == k`` where the trace saw the loop end -- so the
    entry does not depend on how many iterations remain.  The real iterator is advanced by the transformed code
    (a side effect, ``advance_iterator``), so the object the resume function receives, or the caller still
    holds, is where CPython would leave it.
    """

    def __init__(self, value, **kw):
        super().__init__([], **kw)
        self.value = value
        self.consumed = 0

    def python_type(self):
        return type(self.value)

    def describe(self) -> str:
        return "tuple_iterator"

    def next_variable(self, tx) -> VariableTracker | None:
        from ..source import TupleIteratorGetItemSource
        from ..utils import tuple_iterator_getitem, tuple_iterator_len
        from .builder import VariableBuilder
        if tuple_iterator_len(self.value) <= self.consumed:
            self._guard_len(tx, "==", self.consumed)
            return None
        k = self.consumed
        self.consumed += 1
        self._guard_len(tx, ">=", self.consumed)
        tx.output.side_effects.advance_iterator(self)
        return VariableBuilder(tx, TupleIteratorGetItemSource(self.source, k))(tuple_iterator_getitem(self.value, k))

    def unpack_var_sequence(self, tx):
        return self.drain(tx)

    def _guard_len(self, tx, op: str, n: int) -> None:
        """Pin what the trace relied on; a later step of the trace replaces the guard with a stronger one."""
        from ..guards import Guard
        g = Guard("TUPLE_ITERATOR_LEN", self.source, (op, n), tx.output.user_frame())
        tx.output.guards[g.key()] = g

    def reconstruct(self, codegen):
        self.source.reconstruct(codegen)  # the real iterator (advanced by the side effects)

    def _repr_body(self):
        return f"{self.consumed} taken"

