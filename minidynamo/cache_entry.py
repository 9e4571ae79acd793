"""Cache entries: the compiled versions of one code object, and how a call picks the one to run.

In:  a call's frame locals.  Out: the first entry (in compile order) whose guard function passes, or None (a miss:
the frame is translated again).  ``CacheEntries`` is the list ``eval_frame`` keeps per code object; it answers the
same question as a plain scan, faster when a code object has many entries told apart by one local's value.

    >>> entries.lookup({'expert_idx': 3, ...}, G)       # doctest: +SKIP
    CacheEntry(... guards: L['expert_idx'] EQUALS_MATCH == 3, ...)

Mirrors upstream's per-code-object cache (``torch/csrc/dynamo/cache_entry.h``, ``extra_state.cpp``: a list of
entries, each a guard manager plus the transformed code, tried in order).
"""
from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

from .guards import GuardManager, is_frame_input
from .source import LocalSource, Source
from .utils import tuple_iterator_getitem

# The types whose ``==`` agrees with their hash, so a dict lookup finds every value an EQUALS_MATCH accepts.
INDEXABLE_TYPES = (int, float, str, bool, bytes, type(None))


@dataclasses.dataclass
class CacheEntry:
    """One compiled version of a code object: valid while ``guard_manager.check(L, G)`` holds."""

    guard_manager: GuardManager
    code: types.CodeType
    fn: Callable
    graph_module: Any
    compiled_fn_name: str | None
    compile_time: float
    orig_code: types.CodeType
    broke: bool = False  # the translation broke the graph at its ``break_offset`` (see [Note: break hints])
    stretch_breaks: list = dataclasses.field(default_factory=list)  # breaks its native stretch stands for

    @property
    def guards(self):
        return self.guard_manager.guards

    def fn_for(self, fn: types.FunctionType) -> Callable:
        """The transformed code as a function with ``fn``'s closure and defaults.

        The cache is keyed by code object, and many function objects share one code: closures made again on each
        call, and resume functions bound to the cells of the frame that broke (see [Note: cells of resume
        functions]).  Running ``self.fn`` for them would read the cells of the first one compiled."""
        if fn.__closure__ is self.fn.__closure__ and fn.__defaults__ is self.fn.__defaults__ and \
                fn.__kwdefaults__ is self.fn.__kwdefaults__:
            return self.fn
        new_fn = types.FunctionType(self.code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        new_fn.__kwdefaults__ = fn.__kwdefaults__
        return new_fn

    def pinned_inputs(self) -> dict[Source, tuple[type, Any]]:
        """``{source: (type, value)}`` for each frame input this entry pins with an EQUALS_MATCH guard: a local
        (``L['expert_idx']``) or the next item of a loop iterator it receives (see ``is_frame_input``)."""
        return {g.source: (type(g.expected), g.expected) for g in self.guards
                if g.kind == "EQUALS_MATCH" and is_frame_input(g.source) and type(g.expected) in INDEXABLE_TYPES}


_MISSING = object()


def input_value(source: Source, f_locals: dict) -> Any:
    """The value of a frame-input source for these locals (``_MISSING`` where it has none)."""
    if type(source) is LocalSource:
        return f_locals.get(source.local_name, _MISSING)
    try:
        return tuple_iterator_getitem(f_locals[source.base.local_name], source.index)
    except Exception:  # noqa: BLE001 - not a tuple_iterator, or too short: no entry pins this
        return _MISSING


class CacheEntries(list):
    """The entries of one code object, in compile order, indexed by the value of one frame input.

    [Note: cache entries indexed by a constant]  The resume function of a loop with a graph break can have an entry
    per loop index, when its graph specialises on it (``configs[i]`` of a Python list, ``range(i)``).  The tutorial
    MoE's expert loop once had ~60 (an entry per expert, times the size variants, before its experts shared entries:
    [Note: a module list indexed by a symbolic int]) and runs 32 times per forward: trying them in order cost ~30
    failing guard functions per iteration, ~1 ms per forward.  An entry whose guards include ``L['i'] == 3``
    cannot run for any other value, so the entries are indexed by that input: ``by_value[(int, 3)]`` lists the
    entries that pin it to 3 *and* every entry that does not pin it, in compile order, and a value no entry pins
    gets only the latter.  Running the first candidate whose guards pass is then exactly what the plain scan would
    run.  A resumed loop's variable, the next item of the iterator the resume function receives, is pinned the same
    way (``is_frame_input``). The key is the input pinned by most entries, re-chosen at every append (a compile:
    rare); only constants whose hash agrees with ``==`` are indexed.  Entries are only ever appended
    (``eval_frame``), which keeps the index in step.  (Upstream has no index: its guards are C++, and a miss costs
    tens of nanoseconds.)

    [Note: most recently hit first]  Within a candidate list, an entry whose guards pass moves to the front, as
    upstream's ``ExtraState::move_to_front`` does: consecutive calls usually take the same entry (expert after
    expert with a full capacity's rows), and it is then the first one tried.  Any entry whose guards pass is a
    correct one, so the order changes only which correct entry runs, never a result.  The tutorial MoE's loop body
    tried 2.2 guard functions per call in compile order.  The lists are rebuilt in compile order at every append;
    ``self`` itself keeps compile order, which is what explain and the notebooks show.
    """

    def __init__(self, entries=()):
        super().__init__(entries)
        self.key_source: Source | None = None
        self.by_value: dict[tuple[type, Any], list[CacheEntry]] = {}
        self.unpinned: list[CacheEntry] = list(self)
        self._reindex()

    def append(self, entry: CacheEntry) -> None:
        super().append(entry)
        self._reindex()

    def _reindex(self) -> None:
        pinned = [e.pinned_inputs() for e in self]
        counts: dict[str, int] = {}
        for constants in pinned:
            for name in constants:
                counts[name] = counts.get(name, 0) + 1
        self.key_source = max(counts, key=counts.get) if counts else None
        keys = [c.get(self.key_source) for c in pinned]
        self.unpinned = [e for e, k in zip(self, keys) if k is None]
        self.by_value = {k: [e for e, k2 in zip(self, keys) if k2 is None or k2 == k] for k in set(keys) - {None}}

    def candidates(self, f_locals: dict) -> list[CacheEntry]:
        """The entries that may pass for these locals, most recently hit first (see the Notes)."""
        if self.key_source is None:
            return self.unpinned
        value = input_value(self.key_source, f_locals)
        try:
            return self.by_value.get((type(value), value), self.unpinned)
        except TypeError:  # an unhashable value: no entry pins this local to it
            return self.unpinned

    def lookup(self, f_locals: dict, f_globals: dict) -> CacheEntry | None:
        """The first candidate whose guards pass, or None; it moves to the front of its candidate list."""
        candidates = self.candidates(f_locals)
        for k, entry in enumerate(candidates):
            if entry.guard_manager.check(f_locals, f_globals):
                if k:  # [Note: most recently hit first]
                    candidates.insert(0, candidates.pop(k))
                return entry
        return None
