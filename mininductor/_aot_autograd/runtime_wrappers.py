"""What runs at call time around the compiled graphs: the autograd.Function and the wrappers that restore eager's
semantics the functional graphs left out.

What goes in: the compiled forward (and a way to compile the backward) and the graph's ``ViewAndMutationMeta``.
What comes out: ``runtime(*args)``, returning what ``gm`` returns:

* ``make_inference_runtime``: the forward under ``no_grad``;
* ``make_autograd_runtime``: forward and backward as one ``torch.autograd.Function`` (upstream's
  ``CompiledFunction``), so a compiled graph is one node of eager's autograd graph; a second backward through its
  gradients raises ([Note: double backward]);
* both copy mutated inputs' new values back into the real inputs ([Note: input mutations]) and put constant
  outputs back in ``gm``'s output structure;
* outputs that are views are re-made outside the Function, so in-place ops on them work as in eager
  ([Note: outputs that are views]);
* ``eager_if_inputs_alias``: a mutating graph called with inputs that share memory runs ``gm`` eagerly
  ([Note: aliased inputs of a mutating graph]).

Mirrors ``torch/_functorch/_aot_autograd/runtime_wrappers.py`` (``RuntimeWrapper``, ``AOTDispatchAutograd``'s
``CompiledFunction``, ``gen_alias_from_base``, ``AOTSyntheticBaseWrapper``).
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from .functional_utils import clone_keeping_strides, no_overlap
from .schemas import ViewAndMutationMeta


# [Note: input mutations]
# The compiled graphs are functional: an input mutated by ``gm`` comes back as an extra output holding its new
# value, and the runtime copies it into the real input afterwards. The copy happens outside the autograd.Function:
# under grad mode, when the new value requires grad, so the input's autograd history becomes "copy of that output"
# and gradients flow through the graph to the input's old value, as they would in eager; otherwise under no_grad,
# so e.g. an optimizer's in-place update of a parameter stays invisible to autograd, as in eager.  A leaf that
# requires grad is always written under no_grad: eager refuses any other in-place change of it, so the program
# made this one under ``torch.no_grad()`` (the new value may still require grad: it is computed from the leaf).
# So is a view of such a leaf (``_of_a_leaf_with_grad``).
def _apply_mutations(args: tuple, meta: ViewAndMutationMeta, new_values: list) -> None:
    for i, new in zip(meta.mutated_inputs, new_values):
        if new is args[i]:  # the graph wrote into the input itself (mininductor's reinplace.py): a kernel
            torch.autograd.graph.increment_version(new)  # autograd did not see, so say it changed, as copy_ would
            continue
        if new.requires_grad and torch.is_grad_enabled() and not _of_a_leaf_with_grad(args[i]):
            args[i].copy_(new)
        else:
            with torch.no_grad():
                args[i].copy_(new)


# [Note: outputs that alias mutated inputs]
# ``b.index_add_(...); return b[::2]`` (or ``return b``) returns, in eager, a view of ``b`` (``b`` itself): a later
# write through it changes ``b``.  The functional graph returns a view of ``b``'s *new value*, a buffer of its own
# that the runtime then copies into ``b`` ([Note: input mutations]), so the output was a copy: right values, but
# no alias.  As upstream's runtime wrapper (``gen_alias_from_base``, output type ``alias_of_input`` /
# ``is_input``), such an output is re-made after the copy-back, from the input itself: ``b`` for ``return b``,
# else ``as_strided`` with the geometry of a plain fake run (``collect_metadata``).  In training, the view is
# made under grad mode when eager's output has a history, so that history is the input's new one -- the
# copy of the graph's new value -- and its gradient reaches the graph through the input, as in eager; the
# Function's own output for it is dropped (its gradient arrives as zeros).
def _regenerate_mutated_aliases(args: tuple, outs: list, meta: ViewAndMutationMeta) -> list:
    for k, (i, geometry) in meta.mutated_input_aliases.items():
        base = args[i]
        if geometry is None:
            outs[k] = base
            continue
        size, stride, offset = geometry
        if not meta.output_requires_grad[k] and k not in meta.no_grad_views:
            base = base.detach()  # ``b.detach().div_(2)``: an alias that eager's autograd does not see as a view
        with torch.set_grad_enabled(meta.output_requires_grad[k]):  # False also for a view eager made under no_grad
            outs[k] = base.as_strided(size, stride, base.storage_offset() + offset)
    return outs


def _of_a_leaf_with_grad(t: torch.Tensor) -> bool:
    """A leaf that requires grad, or a view of one: eager refuses to change either in place under grad mode, so
    the program changed it under ``no_grad`` (``c = leaf[:, ::2]`` passed in, ``with torch.no_grad(): c.copy_(y)``;
    the copy-back under grad mode raised "a view of a leaf Variable that requires grad")."""
    base = t if t._base is None else t._base
    return base.is_leaf and base.requires_grad


def _user_outputs(meta: ViewAndMutationMeta, tensors: list) -> Any:
    """Put the compiled graph's tensors back between the constant outputs, in ``gm``'s output structure."""
    if meta.all_tensors:  # the usual case: nothing to put back, and (mostly) a flat list
        return meta.unflatten(tensors)
    it = iter(tensors)
    flat = [next(it) if c is meta.TENSOR else c for c in meta.outputs]
    return meta.unflatten(flat)


def _unalias_mutated_inputs(saved: list, mutated: list) -> list:
    """A saved tensor that shares memory with an input we are about to overwrite is saved as a copy.

    The backward needs the value from *before* the mutation (and autograd would rightly refuse a tensor whose version
    changed after it was saved).
    """
    if not mutated:
        return saved
    storages = {m.untyped_storage().data_ptr() for m in mutated}
    return [clone_keeping_strides(s) if isinstance(s, torch.Tensor) and s.untyped_storage().data_ptr() in storages
            else s for s in saved]


def make_inference_runtime(compiled_fw: Callable, meta: ViewAndMutationMeta) -> Callable:
    def runtime(*args):
        # no output requires grad (that is why this is the inference path), whatever the caller's grad mode: an
        # ATen graph run as it is (aot_eager) has lost gm's ``set_grad_enabled(False)`` regions, and under the
        # caller's grad mode its ``exp`` of an input that requires grad would record history eager did not
        with torch.no_grad():
            outs = list(compiled_fw(*args))
        n = meta.num_tensor_outputs
        _apply_mutations(args, meta, outs[n:])
        user_outs = _without_grad(outs[:n], meta)
        if meta.mutated_input_aliases:
            user_outs = _regenerate_mutated_aliases(args, user_outs, meta)
        return _user_outputs(meta, user_outs)

    return runtime


def _without_grad(outs: list, meta: ViewAndMutationMeta) -> list:
    """The inference path's outputs, none requiring grad -- but a view of an input that requires grad takes
    ``requires_grad`` from its base even when made under ``no_grad``: ``x.detach()`` (``aten.alias(x)`` in an ATen
    graph run as it is, a reinterpreted input buffer in a compiled one) came back requiring grad where eager's
    does not (translator fuzz round 10).  Such an output is detached; the views eager itself made under
    ``no_grad`` (``meta.no_grad_views``) require grad, as eager's do ([Note: views made under no_grad])."""
    return [_no_grad_view(o) if k in meta.no_grad_views else o.detach() if o.requires_grad else o
            for k, o in enumerate(outs)]


def _no_grad_view(o: torch.Tensor) -> torch.Tensor:
    """``o`` as a view made under ``no_grad`` of a tensor that requires grad ([Note: views made under no_grad])."""
    if o.requires_grad:  # a view of an input that requires grad: already one
        return o
    with torch.no_grad():
        return o.detach().requires_grad_().as_strided(o.size(), o.stride(), o.storage_offset())


def _distinct_non_differentiable(outs: list, without_grad: list[int], with_grad: list[int]) -> list:
    """An output without grad that *is* an output with grad (``y`` and ``y.detach()`` compiled to one buffer) is
    returned as a detached alias of it: ``mark_non_differentiable`` marks objects, so it would take ``y`` too.
    So is one that is a *view* (``aten.alias(y)``, what ``y.detach()`` becomes in an ATen graph run as it is): a
    view returned by an ``autograd.Function`` takes ``requires_grad`` from its base whatever it is marked.
    ``without_grad``/``with_grad``: the positions of the outputs of each kind; ``outs`` is changed in place."""
    differentiable = {id(outs[k]) for k in with_grad}
    for k in without_grad:
        if outs[k]._is_view() or id(outs[k]) in differentiable:
            outs[k] = outs[k].detach()
    return outs


def _refuse_double_backward(grads: tuple) -> tuple:
    """[Note: double backward]  Under ``create_graph=True`` eager's input gradients require grad (they are
    functions of the inputs); ours come from a backward graph that autograd did not record, so they would look
    constant, and a loss built on them (a gradient penalty) would silently miss that term.  As upstream
    (``CompiledFunctionBackward``) and ``once_differentiable``, they are returned as requiring grad, through a node
    that raises if a second backward reaches it.  (``once_differentiable`` alone decides from the incoming
    gradients, which do not require grad in ``torch.autograd.grad(loss, x, create_graph=True)``.)"""
    tensors = [g for g in grads if g is not None]
    err = torch._C._functions.DelayedError(
        b"minicompile: double backward (create_graph=True, then a backward through the gradients) of a compiled "
        b"graph is not supported; compute the gradient penalty eagerly (minidynamo.disable)", len(tensors))
    wrapped = err(*[g.detach().requires_grad_() for g in tensors])
    wrapped = iter(wrapped if isinstance(wrapped, tuple) else (wrapped,))  # one tensor comes back bare
    return tuple(None if g is None else next(wrapped) for g in grads)


# [Note: outputs that are views]
# An output of an ``autograd.Function`` that is a view (of an intermediate buffer, of an input, of another output)
# is marked as "created in a custom Function", and autograd refuses any in-place op on it -- but in eager,
# ``y = f(x)`` returning ``(x * 2).view(-1)`` may be changed with ``y.add_(1)`` (autograd rebases its history).
# As upstream's runtime wrappers (``gen_alias_from_base``), such an output is re-made *outside* the Function, as a
# view (``as_strided``: same size, strides and storage offset) of a tensor autograd knows as an ordinary one:
#   * the input it aliases (its gradient then flows to the input directly, as in eager; a view of a leaf that
#     requires grad refuses in-place ops with eager's own error) -- unless two elements of that input share
#     memory (an ``expand``ed input): ``as_strided``'s gradient is taken over the storage, so ``x.select(1, 0)``
#     of an ``x`` with stride 0 gave every element of ``x`` the gradient, where eager gives only column 0.
#     Where inputs share a storage (``f(a, a[0])``), the input is the one the graph made the view from
#     (``meta.output_of_input``): a view of ``a`` re-made from ``a[0]`` lost the gradient of the elements
#     outside ``a[0]`` (AOT fuzz round).  Not when the view's history does not reach the input
#     (``meta.cut_from_input``: ``t0 = a[1:]`` made under no_grad, then ``t0.select(0, 0)``; eager's gradient
#     stops at ``t0``, and the re-made view gave ``a`` one: AOT fuzz round);
#   * another output that is no view (``return a.view(3, 2), a``: an in-place change of one shows in the other);
#   * else its base buffer, returned by the Function as an extra output; the backward turns the base's gradient
#     back into the view's tangent.  Only for a base that is contiguous, and views of it none of which holds an
#     element twice (not an ``expand``).  Views of it may overlap each other (``t = c[:4]`` and its rows ``t[0]``,
#     ``t[1]``): [Note: overlapping views of one base].  Other views stay as they are: an in-place op on them
#     raises, never a wrong gradient.
# The view outputs of the Function itself are dropped: their gradients arrive as None ([Note: outputs the backward
# does not reach]).
#
# [Note: overlapping views of one base]  The user's views of a base all feed the base's gradient, so at an element
# two views share, the base's gradient is the sum of both views' contributions.  Reading it back at each view's
# positions would give that sum to both tangents, and the backward graph (which maps every tangent through the
# same base) would count it twice.  Any split of the sum among the views holding the element gives the backward
# the same total, since its map from tangents to input gradients is linear and goes through the base; so the
# first view in output order takes the element's gradient and the others get zero there.  (Found by the
# translator fuzz, seed 20700387: ``for row in t`` before a break returns ``t`` and its rows, and ``t.add_(1)``
# after it raised, autograd refusing an in-place write to a view made inside a custom Function.)
#
# [Note: views made under no_grad]  ``y = x * 2; with torch.no_grad(): v = y.t()``: eager's ``v`` requires grad
# (a view takes the flag from its base) but has no ``grad_fn``; no gradient flows through it.  The graph returns
# it as an output that needs no gradient, so the Function gave it ``requires_grad=False``.  It is re-made under
# ``no_grad``, as eager made it, from what it aliases: the input, or an output that is no view (``return v, y``),
# or else (``y`` is not returned) a detached alias of its buffer made to require grad: the same flags as eager's
# (``requires_grad``, no ``grad_fn``, a view), and a gradient never reaches ``x`` through it, as in eager.
def _storage_key(t: torch.Tensor) -> int:
    """Which storage ``t`` is a view of (its ``StorageImpl``; ``data_ptr`` is 0 for every empty tensor)."""
    return t.untyped_storage()._cdata


def _views_of_one_base(views: list[torch.Tensor]) -> bool:
    """Views of one contiguous base, none of which has two elements at one address (no ``expand``)."""
    return all(v._base is views[0]._base and v._base.is_contiguous() and no_overlap(v) for v in views)


def _disjoint_spans(views: list[torch.Tensor]) -> bool:
    """No two of ``views`` share an element (sufficient: the memory spans of different views do not meet)."""
    spans = sorted((v.storage_offset(), v.storage_offset() + sum(st * (sz - 1) for sz, st in zip(v.size(), v.stride())))
                   for v in views if v.numel())
    return all(end < start for (_, end), (start, _) in itertools.pairwise(spans))


@dataclasses.dataclass
class OutputAliasPlan:
    """For one call: which user outputs are re-made as views, and of what (see [Note: outputs that are views])."""

    # user output index -> ("input", i) | ("output", j) | ("base", index into ``bases``) | ("detached", k), with
    # the view's geometry
    views: dict[int, tuple[str, int, tuple]]
    bases: list[torch.Tensor]  # base buffers returned as extra outputs of the Function
    overlapping: frozenset[int] = frozenset()  # indices into ``bases`` whose views share elements

    @staticmethod
    def of(args: tuple, outs: list, requires_grad: list[bool], meta: ViewAndMutationMeta,
           with_grad: list[int]) -> OutputAliasPlan:
        """The plan for this call's ``outs``; ``with_grad``: the positions of the outputs that require grad (the
        only ones a view of which is re-made), read once by the caller."""
        views = [k for k in with_grad if outs[k]._is_view() and k not in meta.mutated_input_aliases]
        if not views and not meta.no_grad_views:  # the usual case, decided without reading any input
            return NO_ALIASES
        plan = OutputAliasPlan({}, [])
        inputs = {_storage_key(a): i for i, a in enumerate(args)
                  if isinstance(a, torch.Tensor) and a.requires_grad and i not in meta.mutated_inputs
                  and no_overlap(a)}
        plain = {_storage_key(o): j for j, (o, rg) in enumerate(zip(outs, requires_grad))
                 if rg and not o._is_view()}
        by_storage = collections.defaultdict(list)
        for k in views:
            by_storage[_storage_key(outs[k])].append(outs[k])
        of_one_base = {ptr for ptr, group in by_storage.items() if _views_of_one_base(group)}
        base_index: dict[int, int] = {}
        any_input = {_storage_key(a): i for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
        for k in meta.no_grad_views:  # re-made under no_grad, as eager made them ([Note: views made under no_grad])
            if k not in meta.mutated_input_aliases:
                o, ptr = outs[k], _storage_key(outs[k])
                geometry = (tuple(o.size()), tuple(o.stride()), o.storage_offset())
                source = ("input", any_input[ptr]) if ptr in any_input else \
                    ("output", plain[ptr]) if ptr in plain else ("detached", k)
                plan.views[k] = (*source, geometry)
        for k in views:
            o = outs[k]
            geometry = (tuple(o.size()), tuple(o.stride()), o.storage_offset())
            ptr = _storage_key(o)
            if ptr in inputs:  # the input the graph made it from (several may share the storage)
                i = meta.output_of_input.get(k, inputs[ptr])
                if _storage_key(args[i]) == ptr and args[i].requires_grad and i not in meta.mutated_inputs \
                        and no_overlap(args[i]) and k not in meta.cut_from_input:
                    plan.views[k] = ("input", i, geometry)
            elif ptr in plain:
                plan.views[k] = ("output", plain[ptr], geometry)
            elif ptr in of_one_base:
                if ptr not in base_index:
                    base_index[ptr] = len(plan.bases)
                    plan.bases.append(o._base)
                plan.views[k] = ("base", base_index[ptr], geometry)
        plan.overlapping = frozenset(b for ptr, b in base_index.items() if not _disjoint_spans(by_storage[ptr]))
        return plan

    def regenerate(self, args: tuple, outs: list, bases: tuple) -> list:
        """The user outputs, with the planned ones re-made as ordinary autograd views."""
        for k, (kind, index, (size, stride, offset)) in self.views.items():
            if kind == "detached":
                outs[k] = _no_grad_view(outs[k])
                continue
            source = {"input": args, "output": outs, "base": bases}[kind][index]
            with torch.set_grad_enabled(outs[k].requires_grad):
                outs[k] = source.as_strided(size, stride, offset)
        return outs

    def tangents_of_views(self, grad_outs: list, base_grads: tuple) -> list:
        """A view re-made from a base buffer gets its gradient through that base: read it back at its positions.

        Where views of the base overlap, an element's gradient is handed to the first view holding it and zeros
        to the others ([Note: overlapping views of one base])."""
        unclaimed: dict[int, torch.Tensor] = {}  # overlapping bases: the gradient no view has taken yet
        for k, (kind, index, (size, stride, offset)) in self.views.items():
            if kind != "base":
                continue
            offset -= self.bases[index].storage_offset()
            if base_grads[index] is None:  # the user's views of it reached no loss: neither does this output
                continue
            if index not in self.overlapping:
                grad_outs[k] = base_grads[index].contiguous().as_strided(size, stride, offset)
                continue
            if index not in unclaimed:
                unclaimed[index] = base_grads[index].clone(memory_format=torch.contiguous_format)
            positions = unclaimed[index].as_strided(size, stride, offset)
            grad_outs[k] = positions.clone()
            positions.zero_()
        return grad_outs


NO_ALIASES = OutputAliasPlan({}, [])  # the plan of a call none of whose outputs is a view (shared: never changed)


# [Note: input mutations in training]
# A training forward that changes an input (the tutorial MoE's ``outputs.index_add_`` once per expert) would
# return the new value in a fresh buffer, a copy of the input plus the scatter, and the runtime would ``copy_`` it
# back ([Note: input mutations]): two extra passes over the input in the forward, and in the backward autograd's
# ``CopyBackwards`` (a zero-filled gradient for the overwritten value, then a sum with ours).  So, as for
# inference graphs (reinplace.py), the scatter may write into the input itself when nothing else reads the input's
# old value -- nothing saved for the backward does, or reinplace.py leaves the copy.  The Function then tells
# autograd with ``ctx.mark_dirty``: the input's history now ends in this node, exactly what eager's in-place op does
# (``IndexAddBackward`` there), and the backward graph's gradient for that input is its old value's.  Candidates
# are the mutations whose new value requires grad (``_in_place_candidates`` in aot_autograd.py).  What autograd
# refuses in a custom Function's in-place write but eager allows -- a view (eager rebases its base's history) or a
# leaf that requires grad (a write eager made under ``no_grad``) -- gets the old path at call time: the graph writes
# into a clone (recorded by autograd), which is copied back.  Upstream keeps such mutations in the copy-back
# epilogue (``keep_input_mutations`` covers inference and inputs without grad); this is a deviation, for the
# host time of three ops per expert.
def make_autograd_runtime(compiled_fw: Callable, compile_bw: Callable[[], Callable], meta: ViewAndMutationMeta,
                          num_grads: list[bool], in_place: frozenset[int] = frozenset(),
                          saved_ints: list[int] = (), *, grad_deps: list[frozenset[int]]) -> Callable:
    """Wrap the forward/backward pair in a ``torch.autograd.Function`` (upstream: ``CompiledFunction``).

    ``num_grads[i]`` says whether the backward graph returns a gradient for input ``i``; ``in_place`` lists the
    mutated inputs the forward may write in place ([Note: input mutations in training]); ``saved_ints``, which of
    the values saved for the backward are ints (``x[:n]``'s ``n``: kept on ``ctx``, since ``save_for_backward``
    takes tensors only); ``grad_deps[i]``, the tangents input ``i``'s gradient is computed from
    ([Note: outputs the backward does not reach]).
    """
    n_fw = meta.num_fw_outputs
    fw_rg = meta.fw_output_requires_grad
    tangent_vals = [v for v, rg in zip(meta.fw_output_vals, fw_rg) if rg]
    static_shapes = [tuple(v.shape) if all(type(d) is int for d in v.shape) else None for v in tangent_vals]
    runtime_shapes = None in static_shapes  # a symbolic size: read each call's output shapes
    # positions, read once: the forward's outputs with and without grad, and the user outputs with grad
    with_grad, without_grad = [k for k, rg in enumerate(fw_rg) if rg], [k for k, rg in enumerate(fw_rg) if not rg]
    user_with_grad = [k for k in with_grad if k < meta.num_tensor_outputs]
    mutated = meta.mutated_inputs
    new_value_slots = [(i, meta.num_tensor_outputs + k) for k, i in enumerate(meta.mutated_inputs) if i in in_place]
    cut = _inputs_without_gradient(meta, num_grads)

    plans: list[OutputAliasPlan] = []  # forward -> runtime: how to re-make this call's aliased outputs

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.set_materialize_grads(False)  # [Note: outputs the backward does not reach]
            outs = list(compiled_fw(*args))
            if runtime_shapes:
                ctx.tangent_shapes = [outs[k].shape for k in with_grad]
            if new_value_slots:
                dirty = [args[i] for i, slot in new_value_slots if outs[slot] is args[i]]
                if dirty:
                    ctx.mark_dirty(*dirty)
            fw_outs, saved = outs[:n_fw], outs[n_fw:]
            if without_grad:  # outputs eager computed without grad: detached where needed, and marked
                fw_outs = _distinct_non_differentiable(fw_outs, without_grad, with_grad)
                ctx.mark_non_differentiable(*[fw_outs[k] for k in without_grad])
            if mutated:
                saved = _unalias_mutated_inputs(saved, [args[i] for i in mutated])
            if saved_ints:
                ctx.saved_ints = [(k, saved[k]) for k in saved_ints]
                saved = [v for k, v in enumerate(saved) if k not in saved_ints]
            ctx.save_for_backward(*saved)
            ctx.plan = plan = OutputAliasPlan.of(args, fw_outs[:meta.num_tensor_outputs], fw_rg, meta, user_with_grad)
            plans.append(plan)
            return (*fw_outs, *plan.bases) if plan.bases else tuple(fw_outs)

        @staticmethod
        def backward(ctx, *grad_outs):
            if not torch.is_grad_enabled():  # the usual backward (no create_graph): no context manager to enter
                return gradients(ctx, grad_outs)
            with torch.no_grad():
                grads = gradients(ctx, grad_outs)
            if any(ctx.needs_input_grad):
                return _refuse_double_backward(grads)
            return grads

    def gradients(ctx, grad_outs: tuple) -> tuple:
        """The backward graph's input gradients for these output gradients (run with grad mode off)."""
        grad_outs = ctx.plan.tangents_of_views(list(grad_outs[:n_fw]), grad_outs[n_fw:])
        tangents = [g for g, rg in zip(grad_outs, fw_rg) if rg]
        unreached = frozenset(k for k, g in enumerate(tangents) if g is None)
        if unreached:
            shapes = ctx.tangent_shapes if runtime_shapes else static_shapes
            tangents = [torch.zeros(shapes[k], dtype=v.dtype, device=v.device) if k in unreached else g
                        for k, (g, v) in enumerate(zip(tangents, tangent_vals))]
        tangents = [g.contiguous() for g in tangents]
        saved = ctx.saved_tensors
        if saved_ints:
            saved = list(saved)
            for k, value in ctx.saved_ints:
                saved.insert(k, value)
        grads = iter(compile_bw()(*saved, *tangents))
        grads = tuple(next(grads) if has else None for has in num_grads)
        if unreached:
            grads = tuple(None if g is None or deps and deps <= unreached else g
                          for g, deps in zip(grads, grad_deps))
        return grads

    def runtime(*args):
        fn_args = _writable_inputs(args, new_value_slots) if new_value_slots else args
        if cut:
            fn_args = tuple(a.detach() if i in cut else a for i, a in enumerate(fn_args))
        # [Note: enable_grad inside]  Some outputs require grad (``meta``), so autograd must record this node even
        # when the caller runs under ``no_grad`` and ``gm`` turned grad mode on itself (``with torch.enable_grad():``
        # inside): ``apply`` under no_grad would return plain tensors.  Outputs eager computed without grad are
        # marked non-differentiable in ``forward``, so they stay plain either way.
        if torch.is_grad_enabled():  # the usual case: no context manager to enter
            outs = CompiledFunction.apply(*fn_args)
        else:
            with torch.enable_grad():
                outs = CompiledFunction.apply(*fn_args)
        n = meta.num_tensor_outputs
        user_outs = plans.pop().regenerate(args, list(outs[:n]), outs[n_fw:])
        _apply_mutations(args, meta, list(outs[n:n_fw]))
        if meta.mutated_input_aliases:
            user_outs = _regenerate_mutated_aliases(args, user_outs, meta)
        return _user_outputs(meta, user_outs)

    return runtime


# [Note: outputs the backward does not reach]
# ``y, z = f(x, w)`` with only ``y`` in the loss: eager's backward never reaches the ops that made ``z``, and a
# parameter only ``z`` depends on keeps ``.grad`` None.  An ``autograd.Function`` is one node for all its outputs:
# autograd calls its backward with a zero gradient for ``z`` (``materialize_grads``), our backward graph then
# returns a zero gradient for that parameter, and ``.grad`` became a tensor of zeros -- which an optimizer with
# weight decay or momentum does not treat as "no gradient" (translator fuzz seed 21400194: a graph before a break
# returned the rows of a Linear's output and, separately, the function's result).  So the Function takes
# ``set_materialize_grads(False)``: an output the backward does not reach arrives as None.  The backward graph
# still needs a tensor there, so it gets zeros of the output's shape, and an input whose gradient is computed only
# from such tangents (``grad_deps``, read off the joint graph once: ``tangent_dependencies``) gets None, as in
# eager.  A gradient computed from no tangent at all (a decomposed ``zeros_like``, a ``floor``'s) is kept: eager
# gives zeros there when the input reaches a used output.  Upstream did the same later (pytorch#186355: undefined
# grad outputs kept, unused branches pruned, input gradients that depend only on them masked).
def tangent_dependencies(joint: torch.fx.GraphModule, num_primals: int, num_fw_outputs: int) -> list[frozenset[int]]:
    """For each input gradient the joint graph returns, the indices of the tangents it is computed from."""
    placeholders = list(joint.graph.find_nodes(op="placeholder"))
    deps: dict[torch.fx.Node, frozenset[int]] = {p: frozenset([k]) for k, p in enumerate(placeholders[num_primals:])}
    for node in joint.graph.nodes:
        if node not in deps:
            deps[node] = frozenset().union(*(deps[a] for a in node.all_input_nodes))
    grads = list(joint.graph.find_nodes(op="output")[0].args[0])[num_fw_outputs:]
    return [deps[g] if isinstance(g, torch.fx.Node) else frozenset() for g in grads]


# [Note: inputs the graph gives no gradient]
# An input may require grad and still get no gradient from the graph: a resume graph of a break inside
# ``with torch.no_grad():`` reads ``t`` (made by the previous graph, requiring grad) only under no_grad.  Eager
# builds no edge from its result to ``t``'s history, so ``t``'s producer is never reached by the backward and
# ``x.grad`` stays None.  Handed to ``CompiledFunction.apply`` as it is, ``t`` becomes an edge of our node, whose
# backward returns None for it -- and the previous graph's ``CompiledFunction`` then receives that undefined
# gradient materialised as zeros (autograd's ``materialize_grads``), so ``x.grad`` became zeros.  The joint graph
# says at compile time which inputs get no gradient (upstream's ``_aot_autograd`` returns None for them too); they
# are passed detached, so no edge is made.  Mutated inputs and inputs an output aliases keep their edge (their
# history is rewritten or re-made); and when no input would be left with one, all keep theirs, so that outputs
# still require grad as eager's do.
def _inputs_without_gradient(meta: ViewAndMutationMeta, num_grads: list[bool]) -> frozenset[int]:
    """The inputs to detach before ``apply`` ([Note: inputs the graph gives no gradient]); usually none."""
    keep = set(meta.mutated_inputs) | set(meta.output_of_input.values())
    cut = frozenset(i for i, (rg, has) in enumerate(zip(meta.input_requires_grad, num_grads))
                    if rg and not has and i not in keep)
    if not any(rg and i not in cut for i, rg in enumerate(meta.input_requires_grad)):
        return frozenset()
    return cut


def _writable_inputs(args: tuple, slots: list[tuple[int, int]]) -> tuple:
    """``args``, with a clone in place of each input the forward may write in place but autograd would refuse to
    see written by a custom Function: a view, or a leaf that requires grad ([Note: input mutations in training]).
    The clone's new value is then copied back by ``_apply_mutations``, as for a graph that writes no input."""
    if not any(args[i]._is_view() or (args[i].is_leaf and args[i].requires_grad) for i, _ in slots):
        return args
    args = list(args)
    for i, _ in slots:
        if args[i]._is_view() or (args[i].is_leaf and args[i].requires_grad):
            args[i] = clone_keeping_strides(args[i])
    return tuple(args)


def eager_if_inputs_alias(compiled: Callable, gm: torch.fx.GraphModule) -> Callable:
    """[Note: aliased inputs of a mutating graph]  The graph was traced on fake inputs that share no memory, so
    its functional form reads ``b`` as it was before ``a.add_(1)`` -- wrong when the caller passes ``a`` and
    ``a[:]`` (upstream's AOTAutograd regenerates both from a "synthetic base").  Left out here: when two tensor
    inputs of a graph that mutates an input share storage, ``gm`` itself runs, eagerly, in-place ops in order.
    (Also applied by compile_fx to inference graphs traced without AOTAutograd: ``_guard_aliased_inputs``.)"""
    def runtime(*args):
        storages = [a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)]
        if len(set(storages)) != len(storages):
            return gm(*args)
        return compiled(*args)

    return runtime
