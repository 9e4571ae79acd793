"""The decomposition table: which ATen ops are rewritten into simpler ATen ops before lowering (mirrors
``torch/_inductor/decomposition.py``).

PyTorch's core-ATen decompositions plus the composite ops we would rather fuse than call: softmax and
log_softmax (amax, sub, exp, sum, div), layer_norm (var_mean, sub, rsqrt...), gelu (exact with erf, tanh
approximation), var/std, embedding/index_select (``index``), and the common activation and loss functions.
What stays as one op -- mm/addmm/bmm (extern library calls), amax/sum and var_mean (our reductions; var_mean is one
Welford reduction for both outputs) -- is not listed.

    >>> table = select_decomp_table()
    >>> torch.ops.aten._softmax.default in table
    True
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

_EXTRA = [
    aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.native_group_norm,
    aten._native_batch_norm_legit_no_training, aten.native_batch_norm, aten._native_batch_norm_legit,
    aten.gelu, aten.var, aten.std, aten.std_mean,
    aten.embedding, aten.index_select, aten.silu, aten.hardtanh, aten.hardsigmoid, aten.hardswish, aten.mish,
    aten.elu, aten.leaky_relu, aten.softplus, aten.glu, aten.logsumexp, aten.linalg_vector_norm, aten.norm,
    aten.masked_fill, aten.clamp_min, aten.clamp_max, aten.sigmoid_backward, aten.tanh_backward,
    aten.gelu_backward, aten._softmax_backward_data, aten._log_softmax_backward_data,
    aten.native_layer_norm_backward, aten.threshold_backward, aten.embedding_dense_backward, aten.mse_loss,
    aten.nll_loss_forward, aten.log_sigmoid_forward, aten.addcmul, aten.addcdiv, aten.lerp, aten.slice_scatter,
    aten.select_scatter, aten.addmv, aten.mv, aten.dot, aten.split_with_sizes, aten.unbind, aten.flip,
    aten.repeat,
]

# Ops the core table decomposes that we lower better as they are.
_KEEP = [aten.addmm, aten.baddbmm, aten.bmm, aten.mm, aten.amax, aten.amin, aten.sum, aten.mean, aten.argmax,
         aten.argmin, aten.prod, aten.any, aten.all, aten.max, aten.min, aten.where, aten.clamp, aten.pow,
         aten.var_mean]  # var_mean: one Welford reduction gives both outputs (reduction_lowering.var_mean)


@functools.lru_cache(None)
def _table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for packet in _KEEP:
        for name in packet.overloads():
            table.pop(getattr(packet, name), None)
    return table


def select_decomp_table() -> dict:
    """The table to pass to ``make_fx(..., decomposition_table=...)`` (and to AOTAutograd)."""
    return dict(_table())
