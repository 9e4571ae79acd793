"""Counters and small helpers shared by the stages (mirrors the bits of ``torch/_dynamo/utils.py`` we need)."""
from __future__ import annotations

import collections
import itertools

# counters["frames"]["total"|"ok"], counters["stats"]["unique_graphs"], counters["recompiles"]["total"],
# counters["graph_break"][reason], counters["eager_fallback"][reason] -- the names of torch._dynamo.utils.counters.
counters: collections.defaultdict[str, collections.Counter] = collections.defaultdict(collections.Counter)

_unique_ids = itertools.count()


def unique_id(prefix: str) -> str:
    return f"{prefix}_{next(_unique_ids)}"


def istype(obj, *types) -> bool:
    return type(obj) in types
