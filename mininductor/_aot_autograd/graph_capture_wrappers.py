"""The functions AOTAutograd traces with ``make_fx``: the functionalized forward and the joint forward+backward.

What goes in: ``fn`` (``gm``, parameters lifted), its ``ViewAndMutationMeta`` and fake inputs. What comes out: an
ATen ``GraphModule``, functional (no in-place op on an input: a mutated input's new value is an extra output),
decomposed with the decomposition table:

* ``trace_forward`` (inference): ``(*primals) -> (*outputs, *new values of mutated inputs)``;
* ``trace_joint`` (training): ``(*primals, *tangents) -> (*forward outputs, *grads of primals)``, the backward
  written by ``torch.autograd.grad`` itself ([Note: the joint graph]); ``partitioners.py`` then cuts it in two.

Mirrors ``torch/_functorch/_aot_autograd/graph_capture_wrappers.py`` (``create_joint``,
``create_functionalized_fn``); the ``make_fx`` calls are upstream's ``dispatch_and_compile_graph.py``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.fx
import torch.nn.attention
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from mininductor.eager_functions import EagerFunctions

from .functional_utils import _grad_clone, _wrap_inputs, from_fun, to_fun
from .schemas import ViewAndMutationMeta


def create_forward_fn(fn: Callable, meta: ViewAndMutationMeta) -> Callable:
    """``forward(primals) -> [*tensor outputs, *new values of mutated inputs]`` without any in-place op on inputs."""

    def forward(primals: list) -> list:
        f_args = _wrap_inputs(primals, [False] * len(primals))
        flat_outs = pytree.tree_leaves(fn(*f_args))
        outs = [o for o in flat_outs if isinstance(o, torch.Tensor)]
        return [from_fun(o) for o in outs] + [from_fun(f_args[i]) for i in meta.mutated_inputs]

    return forward


def create_joint(fn: Callable, meta: ViewAndMutationMeta) -> Callable:
    """``joint(primals, tangents) -> [*forward outputs, *grads of primals]`` ([Note: the joint graph]).

    One tangent per forward output that requires grad (user outputs first, then mutated inputs). A grad is None
    where the primal does not require grad or does not influence any output.
    """

    def joint(primals: list, tangents: list) -> list:
        clone = [rg and i in meta.mutated_inputs for i, rg in enumerate(meta.input_requires_grad)]
        f_primals = [to_fun(p) for p in primals]
        f_args = [_grad_clone(p) if c else p for p, c in zip(f_primals, clone)]
        flat_outs = pytree.tree_leaves(fn(*f_args))
        fw_outs = [o for o in flat_outs if isinstance(o, torch.Tensor)] + [f_args[i] for i in meta.mutated_inputs]
        grads = _autograd_grad(fw_outs, meta.fw_output_requires_grad, f_primals, [to_fun(t) for t in tangents])
        return [from_fun(o) for o in fw_outs] + [from_fun(g) for g in grads]

    return joint


def _autograd_grad(outs: list, out_rg: list[bool], primals: list, tangents: list) -> list:
    """``torch.autograd.grad`` over the outputs that require grad, with None for primals that get no gradient."""
    diff_outs = [o for o, rg in zip(outs, out_rg) if rg]
    wrt = [i for i, p in enumerate(primals) if isinstance(p, torch.Tensor) and p.requires_grad]
    grads: list = [None] * len(primals)
    if diff_outs and wrt:
        with torch.enable_grad():
            try:
                found = torch.autograd.grad(diff_outs, [primals[i] for i in wrt], tangents, allow_unused=True)
            except RuntimeError as e:
                if any(m in str(e) for m in EAGER_BACKWARD_ERRORS):
                    raise BackwardFailsInEager(str(e)) from e
                raise
        for i, g in zip(wrt, found):
            grads[i] = g
    return grads


# autograd's own checks that fail in the backward of a forward eager ran: a saved tensor changed in place since;
# a derivative formula whose result does not fit its input (``x.scatter_(2, index, src)`` with ``src`` larger than
# ``index``: ScatterBackward0 returns the gradient of ``src`` in ``index``'s shape)
EAGER_BACKWARD_ERRORS = ("modified by an inplace operation", "returned an invalid gradient")


class BackwardFailsInEager(RuntimeError):
    """The joint graph's ``autograd.grad`` hit autograd's own check that a tensor saved for backward was not
    changed in place since: ``y[1:3] = y[1:3] * x[0]`` saves the slice for ``x``'s gradient, then overwrites it.

    [Note: a backward that eager refuses]  Eager runs such a forward and raises only at ``.backward()`` -- and not
    at all if the program never asks for that gradient.  Tracing the backward ahead of time would raise at compile
    time instead (upstream's AOTAutograd does: BackendCompilerFailed).  So ``aot_module`` hands back ``gm`` itself
    for this graph: eager autograd records its history and raises, or not, exactly where eager does."""


# [Note: the joint graph]
# make_fx records every ATen op that reaches the dispatcher below autograd. While ``joint`` runs, the forward's ops
# are recorded first; then ``torch.autograd.grad`` walks the autograd graph that the forward built on the (fake,
# functional) tensors and calls each op's derivative formula -- those backward ops are recorded too. Decompositions
# apply to both halves, and functionalization turns ``index_add_``/``scatter_``/``copy_`` into their out-of-place
# forms. ``_set_grad_enabled(False)`` regions of ``gm`` simply build no autograd history, so they get no gradient.
def trace_joint(fn: Callable, meta: ViewAndMutationMeta, fake_args: list, decompositions: dict) -> torch.fx.GraphModule:
    tangents = [torch.empty_like(v, memory_format=torch.contiguous_format)
                for v, rg in zip(meta.fw_output_vals, meta.fw_output_requires_grad) if rg]
    # [Note: attention in training] A fused attention kernel saves its logsumexp for its own backward, but its
    # decomposition returns the probabilities in that slot, so decomposing the forward and not the backward gives
    # wrong gradients. The math backend is made of bmm/softmax, whose backward decomposes cleanly and fuses.
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        return _make_fx(create_joint(fn, meta), decompositions, fake_args, tangents)


def trace_forward(fn: Callable, meta: ViewAndMutationMeta, fake_args: list,
                  decompositions: dict) -> torch.fx.GraphModule:
    return _make_fx(create_forward_fn(fn, meta), decompositions, fake_args)


@contextlib.contextmanager
def tensor_meta_without_guards():
    """make_fx without the size guards of its ``tensor_meta`` records.

    [Note: tensor_meta records no guards]  ``make_fx`` stores a ``tensor_meta`` beside each node's ``val`` --
    "best effort", its source says: "prefer using val!" -- and computing its ``is_contiguous`` flag asks whether
    a size is 1 or the numel below 2.  With symbolic sizes those questions guard: the last piece of
    ``torch.split(x, 2)`` (``s0 - 6`` rows) got the guards ``Ne(s0 - 6, 1)`` and ``s1*(s0 - 6) >= 2``, and the
    symbolic compile refused the graph (tracing specialised a size).  Nothing we compile reads ``tensor_meta``
    (lowering reads ``val``), so its questions are answered from the size hints without recording a guard."""
    from torch.fx.experimental import proxy_tensor
    original = proxy_tensor._extract_tensor_metadata

    def extract(val):
        shape_env = getattr(getattr(val, "fake_mode", None), "shape_env", None)
        if shape_env is None:
            return original(val)
        with shape_env.suppress_guards():
            return original(val)

    proxy_tensor._extract_tensor_metadata = extract
    try:
        yield
    finally:
        proxy_tensor._extract_tensor_metadata = original


def _make_fx(fn: Callable, decompositions: dict, *args: list) -> torch.fx.GraphModule:
    with enable_python_dispatcher(), FunctionalTensorMode(), EagerFunctions(), tensor_meta_without_guards():
        # [Note: one_hot's layout]
        gm = make_fx(fn, decomposition_table=decompositions)(*args)
    gm.graph._codegen = torch.fx.graph.CodeGen()  # flat placeholders (primals_1, ...), not make_fx's pytree lists
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm
