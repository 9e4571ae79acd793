"""The decomposition table: which ATen ops are rewritten into simpler ATen ops before lowering (mirrors
``torch/_inductor/decomposition.py``).

PyTorch's core-ATen decompositions plus the composite ops we would rather fuse than call: softmax and
log_softmax (amax, sub, exp, sum, div), layer_norm (var_mean, sub, rsqrt...), gelu (exact with erf, tanh
approximation), var/std, and the common activation and loss functions.
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
    aten.silu, aten.hardtanh, aten.hardsigmoid, aten.hardswish, aten.mish,
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
         aten.var_mean,  # var_mean: one Welford reduction gives both outputs (reduction_lowering.var_mean)
         aten.embedding, aten.index_select]  # as x[i] they would accept a negative index, which eager refuses


@functools.lru_cache(None)
def _table() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    for packet in _KEEP:
        for name in packet.overloads():
            table.pop(getattr(packet, name), None)
    table[aten.slice_scatter.default] = slice_scatter
    table[aten._scaled_dot_product_flash_attention_for_cpu.default] = scaled_dot_product_flash_attention_for_cpu
    return table


def scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p: float = 0.0, is_causal: bool = False,
                                               *, attn_mask=None, scale=None):
    """What ``F.scaled_dot_product_attention`` runs on the CPU, as the math kernel, with the op's own layout.

    Upstream's decomposition (which Inductor excludes) ends in ``permute(2, 0, 1, 3).contiguous().permute(1, 2,
    0, 3)``, mimicking an older flash kernel that allocated (N, L, H, E): its output had strides (24, 8, 48, 1)
    where eager's and the op's meta are row-major (120, 40, 8, 1). The math kernel's output is row-major
    already."""
    output, attn = aten._scaled_dot_product_attention_math.default(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, dropout_mask=None,
        scale=scale, enable_gqa=query.size(1) != key.size(1))
    return output.contiguous(), attn


def slice_scatter(input, src, dim: int = 0, start=None, end=None, step: int = 1):
    """``input`` with ``src`` written into ``input[start:end:step]`` along ``dim``, as a ``where`` over a mask.

    Upstream's decomposition, except that it decides its shortcuts (a slice that covers the whole dim is a plain
    copy; a bound at the edge needs no mask) only when they are statically known: with a symbolic dim size
    (``slice_backward`` of ``w[:4]`` with ``w``'s ``s8`` rows) asking ``s8 == 4`` would add a guard, and the
    symbolic compile would refuse (specialize.py). Masking a bound that happens to be the edge is still right."""
    from torch._decomp.decompositions import _normalize_start_end
    from torch._prims_common import canonicalize_dim
    from torch.fx.experimental.symbolic_shapes import statically_known_true as known
    dim = canonicalize_dim(input.ndim, dim)
    dim_size = input.shape[dim]
    start, end = _normalize_start_end(input, dim, start, end)
    src_size = list(input.shape)
    src_size[dim] = (end - start + (step - 1)) // step
    src = src.expand(src_size)
    if known(start == 0) and known(end == dim_size) and step == 1:
        return src.clone()
    idx = torch.arange(dim_size, device=input.device)
    indices: list = [None] * input.dim()
    indices[dim] = (idx - start) // step
    mask = torch.ones(dim_size, device=input.device, dtype=torch.bool)
    if not known(start == 0):
        mask = torch.logical_and(mask, idx >= start)
    if not known(end == dim_size):
        mask = torch.logical_and(mask, idx < end)
    if step != 1:
        mask = torch.logical_and(mask, (idx - start) % step == 0)
    mask = mask.view([-1 if d == dim else 1 for d in range(input.dim())])
    return aten.where(mask, aten._unsafe_masked_index(src, mask, indices, 0), input)


def select_decomp_table() -> dict:
    """The table to pass to ``make_fx(..., decomposition_table=...)`` (and to AOTAutograd)."""
    return dict(_table())
