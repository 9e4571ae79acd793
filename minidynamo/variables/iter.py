"""Iterators: what ``iter(xs)``, ``zip``, ``map``, ``filter``, ``enumerate``, a traced generator and ``itertools``
give back while tracing.

In:  the trackers an iterator walks (a list's items, other iterators, a function to map) -- or, for an input
``tuple_iterator``, the real object.  Out: one tracker per ``next_variable(tx)``, None when exhausted; that is all
``FOR_ITER``, ``next()`` and unpacking ask.  Most iterators are lazy, like CPython's, so items appended inside the
loop are seen and ``zip(it, it)`` pairs as Python pairs; a generator is the exception: its body runs up front
([Note: eager generators] in inline_translator.py).  At a graph break each is rebuilt as the real iterator,
advanced as far as the trace took it.

    for i, x in enumerate(xs):     GET_ITER   -> EnumerateVariable(ListElementIteratorVariable(xs), 0)
        ...                        FOR_ITER   -> TupleVariable([ConstantVariable(0), xs[0]])

Mirrors ``torch/_dynamo/variables/iter.py`` (``ZipVariable``, ``MapVariable``, ``FilterVariable``,
``ItertoolsVariable``) and the iterator half of ``torch/_dynamo/variables/lists.py`` (``ListIteratorVariable``,
``TupleIteratorVariable``).  Dict and set iterators live with their containers in ``dicts.py``.
"""
from __future__ import annotations

import itertools
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from .base import VariableTracker
from .constant import ConstantVariable
from .lists import TupleVariable

if TYPE_CHECKING:
    from .lists import ListVariable


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
    (``torch/_dynamo/variables/iter.py``).  At a graph break they are rebuilt as the same builtin over the
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



def _itertools_product(tx, *iterables, repeat=None):
    seqs = [it.unpack_var_sequence(tx) for it in iterables]
    n = repeat.as_python_constant() if repeat is not None else 1
    return ListIteratorVariable([TupleVariable(list(group)) for group in itertools.product(*seqs, repeat=n)])


def _itertools_chain(tx, *iterables):
    return ListIteratorVariable([item for it in iterables for item in it.unpack_var_sequence(tx)])


def _itertools_accumulate(tx, iterable, func=None, *, initial=None):
    from .operators import binary_op
    items = iterable.unpack_var_sequence(tx)
    out = [initial] if initial is not None and not (initial.is_python_constant()
                                                     and initial.as_python_constant() is None) else []
    for item in items:
        if not out:
            out.append(item)
        elif func is None or func.is_python_constant() and func.as_python_constant() is None:
            out.append(binary_op(tx, operator.add, out[-1], item))
        else:
            out.append(func.call_function(tx, [out[-1], item], {}))
    return ListIteratorVariable(out)


# itertools classes called while tracing: computed eagerly over the trackers (upstream: ItertoolsVariable).
ITERTOOLS_HANDLERS: dict[type, Callable] = {
    itertools.product: _itertools_product, itertools.chain: _itertools_chain,
    itertools.accumulate: _itertools_accumulate,
}
