"""Counters and small helpers shared by the stages (mirrors the bits of ``torch/_dynamo/utils.py`` we need)."""
from __future__ import annotations

import collections
import itertools

from torch.nn import ModuleList

# counters["frames"]["total"|"ok"], counters["stats"]["unique_graphs"], counters["recompiles"]["total"],
# counters["graph_break"][reason], counters["eager_fallback"][reason] -- the names of torch._dynamo.utils.counters.
counters: collections.defaultdict[str, collections.Counter] = collections.defaultdict(collections.Counter)

_unique_ids = itertools.count()


def unique_id(prefix: str) -> str:
    return f"{prefix}_{next(_unique_ids)}"


def istype(obj, *types) -> bool:
    return type(obj) in types


# --- tuple iterators (a loop's iterator handed to a resume function: see variables/iter.TupleIteratorVariable) ---
tuple_iterator = type(iter(()))


def tuple_iterator_state(it) -> tuple[tuple, int]:
    """The tuple behind a ``tuple_iterator`` and its position, read without advancing it (its ``__reduce__``)."""
    reduced = it.__reduce__()  # (iter, (items,), index); once exhausted: (iter, ((),))
    return reduced[1][0], reduced[2] if len(reduced) > 2 else 0


def tuple_iterator_len(it) -> int:
    """How many items ``it`` has left (upstream: ``torch._dynamo.utils.tuple_iterator_len``)."""
    items, index = tuple_iterator_state(it)
    return len(items) - index


def tuple_iterator_getitem(it, k: int):
    """The ``k``-th item ``it`` has left, without advancing it (upstream: ``tuple_iterator_getitem``)."""
    items, index = tuple_iterator_state(it)
    return items[index + k]


def iterator_at(iterable, n: int):
    """``iter(iterable)`` with ``n`` items taken: a list or dict iterator rebuilt at a graph break."""
    it = iter(iterable)
    advance_iterator(it, n)
    return it


def advance_iterator(it, n: int) -> None:
    """Take ``n`` items from ``it``: what the transformed code does for the items its graph already used."""
    for _ in range(n):
        next(it)


def module_list_item(container, index):
    """``container[index]``, read by a guard function or a transformed frame for a module list indexed at run time
    (``self.experts[expert_idx]``: ``DynamicGetItemSource``).

    [Note: reading a module list's item]  ``ModuleList.__getitem__`` is Python (``operator.index``, a range check,
    ``str``), about 1-4 us, and the tutorial MoE reads an expert through it twice per loop iteration (its guards,
    then its graph's inputs).  For a plain ``ModuleList`` and an int in range its answer is
    ``_modules[str(index)]``, read here directly; anything else (a subclass, which may define its own
    ``__getitem__``, a negative or out-of-range index, another container) goes through ``container[index]``."""
    if type(container) is ModuleList and type(index) is int and 0 <= index < len(container._modules):
        return container._modules[str(index)]
    return container[index]
