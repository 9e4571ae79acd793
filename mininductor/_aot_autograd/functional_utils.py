"""Functionalization helpers: wrap tensors as ``FunctionalTensor``s and unwrap them with their mutations applied.

What goes in: the (fake) inputs of a graph about to run under ``FunctionalTensorMode``. What comes out: functional
wrappers whose in-place ops are recorded as new values, not applied (``to_fun``); plain tensors holding those new
values (``from_fun``). ``collect_metadata`` and the traced functions (``graph_capture_wrappers.py``) share them.

Mirrors ``torch/_functorch/_aot_autograd/functional_utils.py`` (``to_fun``, ``from_fun``).
"""
from __future__ import annotations

from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch._subclasses.functional_tensor import FunctionalTensor


def to_fun(t: Any) -> Any:
    """Wrap a tensor for functionalization (a FunctionalTensorMode must be active); other values pass through."""
    return FunctionalTensor.to_functional(t) if isinstance(t, torch.Tensor) else t


def from_fun(t: Any) -> Any:
    """Unwrap a functional tensor after applying its pending mutations (``_sync``)."""
    if not isinstance(t, FunctionalTensor):
        return t
    torch._sync(t)
    return torch._from_functional_tensor(t.elem)


def _wrap_inputs(args: list, clone: list[bool]) -> list:
    """Functional wrappers of ``args``; cloned where an input requiring grad may be mutated.

    The clone makes the mutated value a non-leaf, so autograd allows the in-place op and routes its gradient to the
    original input -- exactly what eager autograd does for a mutated non-leaf tensor.
    """
    wrapped = [to_fun(a) for a in args]
    return [_grad_clone(w) if c else w for w, c in zip(wrapped, clone)]


def _grad_clone(t: torch.Tensor) -> torch.Tensor:
    """A clone that stands for ``t`` in autograd whatever the grad mode: a graph called under ``no_grad`` may turn
    it on itself ([Note: enable_grad inside] in runtime_wrappers.py), and then its ops on the input must be recorded.

    [Note: a clone keeps the input's strides]  ``t.clone()`` of an input with gaps (``x[:, 1:]``, strides (3, 1))
    is contiguous, and then ``reshape(-1)`` of the clone is a *view* where eager's of the input is a copy:
    ``a.reshape(-1).copy_(y)`` was traced as a mutation of ``a``, and the compiled program wrote ``a``, which eager
    leaves alone.  The clone is made with the input's own strides: a window of a dense buffer (not
    ``empty_strided``: mininductor makes no buffer with gaps, and a backward compiled for a saved clone with gaps
    read mininductor's dense one wrongly); its ``copy_`` counts as a mutation, which ``collect_metadata``
    discounts.  Upstream clones with ``t.clone()`` (``maybe_to_fresh_input``)."""
    with torch.enable_grad():
        if is_non_overlapping_and_dense_or_false(t) or not no_overlap(t):  # (an ``expand``ed input: a copy)
            return t.clone()
        extent = 1 + sum((n - 1) * st for n, st in zip(t.size(), t.stride()))
        clone = t.new_empty(extent).as_strided(t.size(), t.stride())
        return clone.copy_(t)


def clone_keeping_strides(t: torch.Tensor) -> torch.Tensor:
    """``t.clone()`` at run time, but with ``t``'s strides also where it has gaps (``clone`` makes those
    contiguous): a compiled graph reads its inputs and saved tensors with the strides it was traced for.  The
    compiled forward of a graph that writes ``c = leaf[:, ::2]`` read the contiguous clone of ``c`` that the
    runtime passes it with the strides (3, 2) it was compiled for, and wrote garbage back into ``c``.  (An
    ``expand``ed tensor has no copy with its strides: its contiguous clone holds the same values where a reader
    with stride 0 looks.)"""
    if is_non_overlapping_and_dense_or_false(t) or not no_overlap(t):
        return t.clone()
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def no_overlap(t: torch.Tensor) -> bool:
    """No two elements of ``t`` share memory: with its dims in order of stride, each stride passes the reach of
    the smaller ones.  (Sufficient, not necessary; ``torch._debug_has_internal_overlap`` gives up on most views.)"""
    reach = 0
    for size, stride in sorted(((sz, st) for sz, st in zip(t.size(), t.stride()) if sz > 1), key=lambda d: d[1]):
        if stride <= reach:
            return False
        reach += stride * (size - 1)
    return True
