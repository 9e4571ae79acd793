"""collect_metadata: run the graph once on fake, functional inputs and record what it mutates and returns.

What goes in: ``fn`` (``gm``, its parameters lifted to inputs) and fake inputs. What comes out: a
``ViewAndMutationMeta`` (``schemas.py``): the inputs ``fn`` mutates in place (data only: a metadata mutation such
as ``t_()`` raises ``MetadataMutation``), which outputs require grad, the outputs that are views made under ``no_grad``, and the fake
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

from mininductor.eager_functions import EagerFunctions

from .functional_utils import _wrap_inputs, from_fun
from .schemas import ViewAndMutationMeta


def collect_metadata(fn: Callable, fake_args: list) -> ViewAndMutationMeta:
    """Run ``fn`` once on fake, functional inputs and record mutations and ``requires_grad`` of every output."""
    requires_grad = [isinstance(a, torch.Tensor) and a.requires_grad for a in fake_args]
    with enable_python_dispatcher(), FunctionalTensorMode(), EagerFunctions() as eager_functions:
        f_args = _wrap_inputs(fake_args, requires_grad)
        # mutations before the graph runs: a clone with gaps is made by ``copy_`` ([Note: a clone keeps the input's
        # strides] in functional_utils.py)
        already = [torch._functionalize_mutation_counter(a.elem) if isinstance(a, FunctionalTensor) else 0
                   for a in f_args]
        history = [a.grad_fn if isinstance(a, torch.Tensor) else None for a in f_args]
        flat_outs, out_spec = pytree.tree_flatten(fn(*f_args))
        if any(isinstance(o, (torch.SymInt, torch.SymFloat, torch.SymBool)) for o in flat_outs):
            # kept as a constant it would be the symbol itself (``s77``) on every call: refuse, so the caller
            # compiles per shape, where sizes are plain ints (specialize.py)
            raise NotImplementedError("a symbolic size among the outputs (only tensors travel through the graphs)")
        for a in f_args:
            if isinstance(a, FunctionalTensor):
                torch._sync(a)
        mutated = [i for i, a in enumerate(f_args) if _has_data_mutation(a, i, already[i])]
        _refuse_as_strided_of_shifted_inputs(fake_args, f_args, mutated, eager_functions.as_strided_storages)
        outputs = [ViewAndMutationMeta.TENSOR if isinstance(o, torch.Tensor) else o for o in flat_outs]
        tensors = [o for o in flat_outs if isinstance(o, torch.Tensor)]
        no_grad_views = [k for k, o in enumerate(tensors) if o.requires_grad and _no_grad_fn(o) and o._is_view()]
        out_rg = [o.requires_grad and k not in no_grad_views for k, o in enumerate(tensors)]
        # a mutation autograd never saw (under ``no_grad``, or through a ``detach()``ed alias) leaves the input's
        # history as it was: the new value is then no differentiable output (upstream's
        # ``mutations_under_no_grad_or_inference_mode``, ``mutations_hidden_from_autograd``).  Counted as one, its
        # tangent gave a leaf changed under ``no_grad`` a zero gradient where eager's is None.
        mut_rg = [f_args[i].requires_grad and f_args[i].grad_fn is not history[i] for i in mutated]
        vals = [from_fun(o) for o in tensors] + [from_fun(f_args[i]) for i in mutated]
        # which input each output shares memory with: the functional inputs have a storage each, also where the
        # caller's inputs share one (``f(a, a[0])``), so this tells which one the graph made the output from
        storages = {a.untyped_storage()._cdata: i for i, a in reversed(list(enumerate(f_args)))
                    if isinstance(a, torch.Tensor)}
        of_input = {k: storages[o.untyped_storage()._cdata] for k, o in enumerate(tensors)
                    if o.untyped_storage()._cdata in storages}
        aliases = {k: i for k, i in of_input.items() if i in mutated}
        cut_off = [k for k, i in of_input.items()
                   if out_rg[k] and history[i] is not None and not _reaches(tensors[k], history[i])]
    return ViewAndMutationMeta(len(fake_args), mutated, requires_grad, outputs, out_rg, mut_rg, out_spec, vals,
                               no_grad_views, _eager_geometry(fn, fake_args, aliases, out_rg) if aliases else {},
                               of_input, cut_off)


def _reaches(t: torch.Tensor, node) -> bool:
    """Does ``t``'s autograd history reach the autograd node ``node`` (an input's)?  Not when ``t`` is a view of
    a view made under ``no_grad`` (``with torch.no_grad(): t0 = a[1:]``, then ``t0.select(0, 0)``): its history
    ends at ``t0``, which stands as a leaf of its own."""
    todo, seen = [None if _no_grad_fn(t) else t.grad_fn], set()
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        if fn is node:
            return True
        seen.add(fn)
        todo.extend(f for f, _ in fn.next_functions)
    return False


def _no_grad_fn(t: torch.Tensor) -> bool:
    """``t.grad_fn is None`` -- also for a view made under ``no_grad`` whose base was changed in place since,
    where reading ``grad_fn`` raises ("A view was created in no_grad mode and its base ... has been modified
    inplace"), in eager too: such a view gets no gradient either."""
    try:
        return t.grad_fn is None
    except RuntimeError:
        return True


class AliasOfMutatedInput(NotImplementedError):
    """An output that aliases a mutated input in a way the runtime cannot re-make ([Note: outputs that alias
    mutated inputs] in runtime_wrappers.py): ``aot_module`` then runs the graph eagerly."""


class AsStridedOfShiftedInput(NotImplementedError):
    """``as_strided`` of a mutated input that starts past its storage's first element ([Note: as_strided of a
    shifted input]): ``aot_module`` runs the graph eagerly, with a warning."""


def _refuse_as_strided_of_shifted_inputs(fake_args: list, f_args: list, mutated: list[int],
                                         as_strided_storages: set[int]) -> None:
    """[Note: as_strided of a shifted input]  ``a = y[2:10]`` (storage offset 2) passed in, ``a.mul_(2)``, then
    ``a.as_strided((2,), (1,), 3)``: eager reads storage elements 3 and 4 (``a[1]``, ``a[2]``).
    Functionalization replays the view on ``a``'s new value, a fresh buffer whose storage starts at ``a[0]``
    (or on the clone standing for an input that requires grad, the same), and read ``a[3]``, ``a[4]``: wrong
    values in every backend, and a window that starts before ``a`` escaped ``_outside_its_input`` and lost
    its gradient.  ``as_strided``'s offset counts from the storage, and a mutated input's storage is not the
    caller's in the trace: such a graph runs eagerly.  (Inputs at offset 0 are traced with their own strides,
    [Note: a clone keeps the input's strides], so their offsets agree.)"""
    for i in mutated:
        if fake_args[i].storage_offset() != 0 and f_args[i].untyped_storage()._cdata in as_strided_storages:
            raise AsStridedOfShiftedInput(f"as_strided of input {i}, which the graph mutates and which starts at "
                                          f"storage offset {fake_args[i].storage_offset()}: the trace cannot "
                                          "replay its storage offsets")


class MetadataMutation(NotImplementedError):
    """An in-place change of an input's shape or strides (``y.t_()``, ``y.unsqueeze_(0)``): no functional graph
    returns it (upstream replays it on the input with ``as_strided_``), so ``aot_module`` runs the graph eagerly,
    with a warning."""


def _eager_geometry(fn: Callable, fake_args: list, aliases: dict[int, int],
                    out_rg: list[bool]) -> dict[int, tuple[int, tuple | None]]:
    """``{output: (input, geometry)}`` for the outputs that alias a mutated input, read from a plain (not
    functionalized) fake run: the functional run's views of a mutated input have the strides of its new value's
    buffer (``b.t()`` written by ``index_add_``, then ``b[::2]``: strides (8, 1) where eager's are (2, 3)).
    Geometry None: the output is the input itself.  [Note: outputs that alias mutated inputs]"""
    plain = [a.detach() if isinstance(a, torch.Tensor) else a for a in fake_args]  # no autograd checks: fakes
    with torch.no_grad():
        tensors = [o for o in pytree.tree_leaves(fn(*plain)) if isinstance(o, torch.Tensor)]
    found = {}
    for k, i in aliases.items():
        o, base = tensors[k], plain[i]
        geometry = (tuple(o.size()), tuple(o.stride()), o.storage_offset() - base.storage_offset())
        if o.untyped_storage()._cdata != base.untyped_storage()._cdata or \
                any(isinstance(v, torch.SymInt) for v in (*geometry[0], *geometry[1], geometry[2])):
            raise AliasOfMutatedInput(f"output {k} aliases mutated input {i}, and its place in the input is not "
                                      "known (symbolic sizes?)")
        root = base if base._base is None else base._base
        if out_rg[k] and o is not base and not (o._is_view() and o._base is root):
            raise AliasOfMutatedInput(
                f"output {k} shares memory with mutated input {i} but is no view of it for autograd (made through "
                "``detach()``), and has a gradient of its own")
        found[k] = (i, None if o is base else geometry)
    return found


def _has_data_mutation(a: Any, index: int, already: int) -> bool:
    if not isinstance(a, FunctionalTensor):
        return False
    if torch._functionalize_has_metadata_mutation(a.elem):
        raise MetadataMutation(
            f"input {index} has its metadata (shape/strides) mutated in place (e.g. t_(), resize_()); "
            "minicompile's AOTAutograd only supports data mutations. Hint: use the out-of-place op.")
    return torch._functionalize_has_data_mutation(a.elem) and torch._functionalize_mutation_counter(a.elem) > already
