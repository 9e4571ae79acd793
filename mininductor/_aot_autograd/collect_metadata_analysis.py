"""collect_metadata: run the graph once on fake, functional inputs and record what it mutates and returns.

What goes in: ``fn`` (``gm``, its parameters lifted to inputs) and fake inputs. What comes out: a
``ViewAndMutationMeta`` (``schemas.py``): the inputs ``fn`` mutates in place (data only: a metadata mutation such
as ``t_()`` raises), which outputs require grad, the outputs that are views made under ``no_grad``, and the fake
values of the forward's outputs. Why: the joint graph's signature (one tangent per output that requires grad, one
extra output per mutated input) must be known before it is traced.

Mirrors ``torch/_functorch/_aot_autograd/collect_metadata_analysis.py``
(``run_functionalized_fw_and_collect_metadata``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

from mininductor.decomposition import EagerFunctions

from .functional_utils import _wrap_inputs, from_fun
from .schemas import ViewAndMutationMeta


def collect_metadata(fn: Callable, fake_args: list) -> ViewAndMutationMeta:
    """Run ``fn`` once on fake, functional inputs and record mutations and ``requires_grad`` of every output."""
    requires_grad = [isinstance(a, torch.Tensor) and a.requires_grad for a in fake_args]
    with enable_python_dispatcher(), FunctionalTensorMode(), EagerFunctions():
        f_args = _wrap_inputs(fake_args, requires_grad)
        flat_outs, out_spec = pytree.tree_flatten(fn(*f_args))
        if any(isinstance(o, (torch.SymInt, torch.SymFloat, torch.SymBool)) for o in flat_outs):
            # kept as a constant it would be the symbol itself (``s77``) on every call: refuse, so the caller
            # compiles per shape, where sizes are plain ints (specialize.py)
            raise NotImplementedError("a symbolic size among the outputs (only tensors travel through the graphs)")
        for a in f_args:
            if isinstance(a, FunctionalTensor):
                torch._sync(a)
        mutated = [i for i, a in enumerate(f_args) if _has_data_mutation(a, i)]
        outputs = [ViewAndMutationMeta.TENSOR if isinstance(o, torch.Tensor) else o for o in flat_outs]
        tensors = [o for o in flat_outs if isinstance(o, torch.Tensor)]
        no_grad_views = [k for k, o in enumerate(tensors) if o.requires_grad and o.grad_fn is None and o._is_view()]
        out_rg = [o.requires_grad and k not in no_grad_views for k, o in enumerate(tensors)]
        mut_rg = [f_args[i].requires_grad for i in mutated]
        vals = [from_fun(o) for o in tensors] + [from_fun(f_args[i]) for i in mutated]
    return ViewAndMutationMeta(len(fake_args), mutated, requires_grad, outputs, out_rg, mut_rg, out_spec, vals,
                               no_grad_views)


def _has_data_mutation(a: Any, index: int) -> bool:
    if not isinstance(a, FunctionalTensor):
        return False
    if torch._functionalize_has_metadata_mutation(a.elem):
        raise NotImplementedError(
            f"input {index} has its metadata (shape/strides) mutated in place (e.g. t_(), resize_()); "
            "minicompile's AOTAutograd only supports data mutations. Hint: use the out-of-place op.")
    return torch._functionalize_has_data_mutation(a.elem)
