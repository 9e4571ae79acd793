"""Helpers shared by several minidynamo test files (``import helpers``: conftest.py puts this folder on sys.path).

``LOG`` is one side-effect log for the programs of ``test_object_lifetimes.py`` and ``test_attributes_and_classes.py``
(generators' ``finally``, ``__del__``, ``__getattribute__`` append to it); ``compare_log`` runs a program plainly
and compiled and checks both logged alike, in order. ``same`` compares nested results (tensors with ``allclose``).
"""
import gc

import torch

import minidynamo

LOG = []


def compare_log(fn, *args):
    """Runs ``fn`` plainly and compiled (``backend="eager"``); both must return alike and log alike, in order."""
    LOG.clear()
    expected = fn(*args)
    gc.collect()
    expected_log = list(LOG)
    LOG.clear()
    got = minidynamo.minicompile(fn, backend="eager")(*args)
    gc.collect()
    assert torch.equal(got, expected)
    assert LOG == expected_log, (LOG, expected_log)
    return expected_log


def fallback_reasons():
    """All eager-fallback reasons of this test, as one string."""
    return " ".join(minidynamo.counters["eager_fallback"])


def break_count():
    """How many graph breaks this test has seen."""
    return sum(minidynamo.counters["graph_break"].values())


def same(a, b) -> bool:
    """``a`` and ``b`` equal, recursively through lists, tuples and dicts; tensors by shape and ``allclose``."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b
