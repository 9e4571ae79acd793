"""Functionalization helpers: wrap tensors as ``FunctionalTensor``s and unwrap them with their mutations applied.

What goes in: the (fake) inputs of a graph about to run under ``FunctionalTensorMode``. What comes out: functional
wrappers whose in-place ops are recorded as new values, not applied (``to_fun``); plain tensors holding those new
values (``from_fun``). ``collect_metadata`` and the traced functions (``graph_capture_wrappers.py``) share them.

Mirrors ``torch/_functorch/_aot_autograd/functional_utils.py`` (``to_fun``, ``from_fun``).
"""
from __future__ import annotations

from typing import Any

import torch
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
    it on itself ([Note: enable_grad inside] in runtime_wrappers.py), and then its ops on the input must be recorded."""
    with torch.enable_grad():
        return t.clone()
