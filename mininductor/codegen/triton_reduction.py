"""Reductions and scans inside a ``TritonKernel`` (the reduction half of Inductor's ``codegen/triton.py``).

Persistent kernels reduce a whole ``[XBLOCK, RBLOCK]`` block at once (``tl.sum(v, 1)[:, None]``); looped kernels
keep a ``[XBLOCK, RBLOCK]`` accumulator across chunks (declared before the loop, combined inside, reduced after).
Masked lanes hold the reduction's identity (0 for sum, -inf for max...). ``max``/``min`` propagate NaN like
``torch.amax``, which ``tl.max`` alone would drop: compiled, we reduce with a NaN-keeping combine (``_maximum_nan``);
interpreted, where ``tl.reduce`` is slow, with ``tl.max`` plus a NaN check.  ``argmax``/``argmin`` return the first
index of the extreme value, NaN counting as the largest, as eager does.  ``cumsum`` is ``tl.cumsum`` plus a running
carry when looped (``cumprod``: ``tl.cumprod`` times one).

``welford_reduce`` returns a ``(mean, m2, weight)`` triple. Looped, each lane of the ``[XBLOCK, RBLOCK]`` chunk keeps
its own running triple, updated by Welford's step (``_welford_reduce`` in ``output_code.py``'s header: masked lanes
keep weight 0), and ``_welford`` combines a row's lanes after the loop; the row is read once for mean and variance.
Persistent, the row is already in registers and we take two sums instead (Inductor's ``welford_reduce_fallback``):
fewer registers than three accumulators, no extra memory traffic.

[Note: Welford combine] Inductor combines the lanes with ``tl.reduce((mean, m2, weight), 1, welford_combine)``,
Chan et al.'s pairwise merge. A ``tl.reduce`` with a custom combine is hundreds of times slower interpreted, so
``_welford`` writes the same merge of ``k`` parts with ``tl.sum``, on the GPU too (one code path, tested in CI):
``W = sum(w_i)``, ``mean = sum(mean_i * (w_i / W))``, ``m2 = sum(m2_i + w_i * (mean_i - mean)**2)`` -- the same
result in exact arithmetic, and stable (deviations from the final mean, not ``E[x^2] - E[x]^2``). It runs once per
row, after the loop. A lane of weight 0 adds nothing, even beside an inf mean; a NaN in a row makes its mean and
``m2`` NaN, as in eager.
"""
from __future__ import annotations

import torch

from .triton_ops import TL_DTYPE, compute_dtype, identity

INDEX_BIG = 2**31 - 1
# [Note: narrow integer reductions]  Triton's ``tl.max``/``tl.min`` widen an 8- or 16-bit integer block to int32
# before reducing, so the maximum of a ``uint8`` row came back as int32 -- and ``x // x.max()`` then failed to
# compile, since Triton refuses to divide across signedness (lowering fuzz, seed 57864).  The result is narrowed
# back: the extreme of a row of these values is one of them.
NARROW_INTS = (torch.int8, torch.uint8, torch.int16)


class ReductionCodegenMixin:
    """Methods of ``TritonKernel`` (they use its ``_emit``, ``kind``, ``section`` and ``lines``)."""

    # ------------------------------------------------------------------------------------------- scans
    def scan(self, dtype, scan_type: str, value: str) -> str:
        """cumsum / cumprod along the row: in one block (persistent), or chunk by chunk plus the running carry
        (the sum, or the product, of the chunks before)."""
        acc_dtype = compute_dtype(dtype)
        scan, identity_, combine = {"sum": ("tl.cumsum", 0, "+"), "prod": ("tl.cumprod", 1, "*")}[scan_type]
        block = self._emit(f"tl.broadcast_to({value}, [XBLOCK, RBLOCK])", acc_dtype, cse=False)
        masked = self._emit(f"tl.where(xmask & rmask, {block}, {identity_})", acc_dtype, cse=False)
        if self.kind != "red":
            return self._emit(f"{scan}({masked}, 1)", acc_dtype, cse=False)
        carry = f"_carry{next(self._acc)}"
        self.section.pre.append(f"{carry} = tl.full([XBLOCK, 1], {identity_}, {TL_DTYPE[acc_dtype]})")
        out = self._emit(f"{scan}({masked}, 1) {combine} {carry}", acc_dtype, cse=False)
        total = self._final_reduce(scan_type, masked, "rindex", acc_dtype, acc_dtype)
        self.lines.append(f"{carry} = {carry} {combine} {total}")
        return out

    # ------------------------------------------------------------------------------------------- reductions
    def reduction(self, dtype, src_dtype, reduction_type: str, value: str) -> str:
        """Reduce ``value`` along the row; the same reduction of the same value is computed once (a
        decomposed ``var`` and the ``mean`` beside it both sum the row: one ``tl.sum``)."""
        key = f"reduction {reduction_type} {src_dtype} {dtype} {value} {self.mask_stack}"
        hit = self.scope.lookup("cse", key)
        if hit is None:
            hit = self.scope.cse[key] = self._reduction(dtype, src_dtype, reduction_type, value)
        return hit

    def _reduction(self, dtype, src_dtype, reduction_type: str, value: str) -> str:
        if reduction_type == "welford_reduce":
            if self.kind == "red":
                return self._welford_looped(value, compute_dtype(src_dtype))
            return self._welford_fallback(dtype, src_dtype, value)
        acc_dtype = compute_dtype(src_dtype) if reduction_type not in ("any", "all") else torch.bool
        if reduction_type in ("any", "all"):
            value = self._emit(f"({value} != 0).to(tl.int8)", torch.int8)
            acc_dtype = torch.int8
        if self.kind == "red":
            return self._looped_reduction(reduction_type, value, acc_dtype, dtype)
        block = self._emit(f"tl.broadcast_to({value}, [XBLOCK, RBLOCK])", acc_dtype, cse=False)
        init = identity(reduction_type, acc_dtype)
        masked = self._emit(f"tl.where(xmask & rmask, {block}, {init})", acc_dtype, cse=False)
        return self._final_reduce(reduction_type, masked, "rindex", acc_dtype, dtype)

    def _final_reduce(self, rtype: str, block: str, index_block: str, acc_dtype, dtype) -> str:
        emit = lambda text, dt: self._emit(text, dt, cse=False)
        if rtype == "sum" and acc_dtype.is_floating_point:  # [Note: a sum of negative zeros]
            return emit(f"tl.sum({block}, 1)[:, None] + 0.0", acc_dtype)
        if rtype == "sum":
            return emit(f"tl.sum({block}, 1)[:, None]", acc_dtype)
        if rtype == "prod":
            return emit(f"tl.reduce({block}, 1, _prod_combine)[:, None]", acc_dtype)
        if rtype in ("any", "all"):
            fn = "tl.max" if rtype == "any" else "tl.min"
            return emit(f"{fn}({block}, 1)[:, None] != 0", torch.bool)
        fn = "tl.max" if rtype in ("max", "argmax") else "tl.min"
        if acc_dtype.is_floating_point and not self.interpret:  # one pass that keeps NaN (tl.max would drop it)
            combine = "_maximum_nan" if rtype in ("max", "argmax") else "_minimum_nan"
            best = emit(f"tl.reduce({block}, 1, {combine})[:, None]", acc_dtype)
        elif acc_dtype in NARROW_INTS:  # [Note: narrow integer reductions]
            best = emit(f"{fn}({block}, 1)[:, None].to({TL_DTYPE[acc_dtype]})", acc_dtype)
        else:
            best = emit(f"{fn}({block}, 1)[:, None]", acc_dtype)
        if acc_dtype.is_floating_point and self.interpret:  # interpreted, tl.reduce is slow: a NaN check beside
            has_nan = emit(f"tl.max(({block} != {block}).to(tl.int8), 1)[:, None] > 0", torch.bool)
            best = emit(f"tl.where({has_nan}, float('nan'), {best})", acc_dtype)
        if rtype in ("max", "min"):
            return best
        hit = f"({block} == {best}) | (({block} != {block}) & ({best} != {best}))"
        return emit(f"tl.min(tl.where({hit}, {index_block}, {INDEX_BIG}), 1)[:, None].to(tl.int64)",
                    torch.int64)

    def _looped_reduction(self, rtype, value, acc_dtype, dtype) -> str:
        k = next(self._acc)
        acc, tl_acc = f"_acc{k}", TL_DTYPE[acc_dtype]
        init = identity(rtype, acc_dtype)
        self.section.pre.append(f"{acc} = tl.full([XBLOCK, RBLOCK], {init}, {tl_acc})")
        v = self._emit(f"tl.broadcast_to({value}, [XBLOCK, RBLOCK])", acc_dtype, cse=False)
        lines = self.lines
        index_acc = None
        if rtype in ("argmax", "argmin"):
            index_acc = f"_acc{k}_index"
            self.section.pre.append(f"{index_acc} = tl.full([XBLOCK, RBLOCK], {INDEX_BIG}, tl.int32)")
            cmp = ">" if rtype == "argmax" else "<"
            take = f"(({v} {cmp} {acc}) | (({v} != {v}) & ({acc} == {acc})) | ({index_acc} == {INDEX_BIG}))"
            lines.append(f"{index_acc} = tl.where(xmask & rmask & {take}, rindex, {index_acc})")
            lines.append(f"{acc} = tl.where(xmask & rmask & {take}, {v}, {acc})")
        else:
            combine = {
                "sum": f"{acc} + {v}", "prod": f"{acc} * {v}",
                "max": f"tl.where(({acc} > {v}) | ({acc} != {acc}), {acc}, {v})",
                "min": f"tl.where(({acc} < {v}) | ({acc} != {acc}), {acc}, {v})",
                "any": f"{acc} | {v}", "all": f"{acc} & {v}",
            }[rtype]
            lines.append(f"{acc} = tl.where(xmask & rmask, {combine}, {acc})")
        self._in_post = True
        try:
            return self._final_reduce(rtype, acc, index_acc, acc_dtype, dtype)
        finally:
            self._in_post = False

    # ------------------------------------------------------------------------------------------- Welford
    def _welford_fallback(self, dtype, src_dtype, value) -> tuple[str, str, str]:
        """A persistent kernel has the whole row in registers: ``sum`` for the mean, then the sum of squared
        deviations -- two reductions but one read, and fewer registers than Welford's three accumulators
        (Inductor's ``welford_reduce_fallback``). The first sum is shared with any plain sum of the same row."""
        acc_dtype = compute_dtype(src_dtype)
        total = self.reduction(dtype, src_dtype, "sum", value)
        weight = self.constant(self.rnumel, acc_dtype)
        mean = self.truediv(total, weight)
        delta = self.sub(value, mean)
        return mean, self.reduction(dtype, src_dtype, "sum", self.mul(delta, delta)), weight

    def _welford_looped(self, value, acc_dtype) -> tuple[str, str, str]:
        """Per lane of the ``[XBLOCK, RBLOCK]`` chunk, a running mean, ``m2`` and weight updated by Welford's
        step (``_welford_reduce``; masked lanes keep weight 0), combined across lanes after the loop
        (``_welford``). The row is read once for mean and variance, where two sums read it twice."""
        k, tl_acc = next(self._acc), TL_DTYPE[acc_dtype]
        accs = [f"_acc{k}_{part}" for part in ("mean", "m2", "weight")]
        self.section.pre += [f"{acc} = tl.zeros([XBLOCK, RBLOCK], {tl_acc})" for acc in accs]
        v = self._emit(f"tl.broadcast_to({value}, [XBLOCK, RBLOCK])", acc_dtype, cse=False)
        # Every lane a chunk updates has seen exactly one element per earlier chunk (only the last chunk is
        # ragged), so its new weight is the chunk number + 1 for all of them: one scalar reciprocal per chunk
        # instead of a division per element (measured on an H200: the division made the loop compute-bound).
        rcp = "1.0 / (roffset // RBLOCK + 1)"
        self.lines.append(f"{', '.join(accs)} = _welford_reduce({v}, {', '.join(accs)}, xmask & rmask, {rcp})")
        results = [f"tmp{next(self._tmp)}" for _ in accs]
        self.section.post.append(f"{', '.join(results)} = _welford({', '.join(accs)})")
        self.dtypes.update((r, acc_dtype) for r in results)
        return tuple(results)
