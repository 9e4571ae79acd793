"""Skinny fp32 matmuls: a Triton template timed against cuBLAS (mirrors ``torch/_inductor/kernel/bmm.py`` and
the choice ``torch/_inductor/select_algorithm.py`` makes).

What goes in: an ``aten.bmm`` or ``aten.mm`` of fp32 tensors on the GPU, with static sizes and at most
``BLOCK_M`` (16) rows per batch -- the compile-friendly MoE's expert matmuls have 4 (its capacity), over weights
of 1024 x 4096 and 4096 x 1024 per expert. What comes out: ``matmul_choice_0 = MatmulChoice(...)`` in the
generated wrapper, and ``buf3 = matmul_choice_0.run(buf1, arg2)`` in ``call``. The first call times cuBLAS
against the template's configurations on the real arguments and keeps the fastest; later calls run only that.
An ``mm`` of at most four rows never gets here on the GPU: it lowers as a reduction kernel ([Note: a skinny mm as
a reduction] in extern_lowering.py).

Why: with four rows, such a product is one read of the weights, so its time is the bandwidth it reaches.
cuBLAS's fp32 kernels for these shapes read at 2.8-3.5 TB/s on an H200, below the 3.6-3.9 of a plain sum; the
template, whose loop Triton software-pipelines through ``tl.dot``, reads the 4096 x 1024 weights in 140 us
against cuBLAS's 190 (``bench/expert_matmul.py``, docs/benchmarks.md). Inductor makes the same kind of choice
(``tuned_bmm``: ATen's kernel and Triton templates, timed) only under ``mode="max-autotune"``; here it is limited
to this narrow class, where one of the two candidates is known to lose badly, so the default mode makes it.

[Note: tf32x3 for skinny fp32 matmuls]  Eager computes an fp32 matmul with fp32 products (TF32 is off by
default). Triton's ``tl.dot`` reaches the tensor cores only through TF32, whose 10-bit mantissa alone would be
far from eager. ``input_precision="tf32x3"`` splits each operand into a TF32 high part and a TF32 remainder
and sums three tensor-core products, ``hi*hi + hi*lo + lo*hi``: measured on an H200 on normal inputs, its
largest error against a float64 product is about cuBLAS's fp32 kernel's (1.3e-6 and 2.3e-6 against 1.5e-6 and
1.9e-6, K = 1024 and 4096, bench/expert_matmul.py), and it is at most 1.7e-6 and 2.4e-6 from eager's; with
exponents spread over 2^-140..2^120 its error is 1.3-3x cuBLAS's (4.0e-7 of the largest value against
1.3e-7) -- within what fp32 sums in another order differ by. Infinities and NaN: a
split of ``inf`` has a NaN remainder, and Triton replaces a NaN in the sum of the two small products by 0
before adding the large one, so an ``inf`` or NaN in either operand gives eager's pattern of infinities (with
their signs) and NaN; a 0 that meets ``inf`` gives NaN, as eager's. Denormal inputs and products are kept.
What differs is a sum that overflows: whether it ends as ``inf`` or NaN depends on the order the terms meet,
as for any reordered sum (``tests/fuzz/lowering.py`` documents that class). ``config.matmul_template =
"never"`` turns the template off.
"""
from __future__ import annotations

import warnings

import torch

from . import config
from .indexing import is_symbolic

BLOCK_M = 16  # tl.dot needs at least 16 rows; a skinny matmul's rows are padded to them (masked)

# (BLOCK_N, BLOCK_K, num_warps, num_stages): the fastest configurations of bench/expert_matmul.py's sweep on an
# H200 for the friendly MoE's two shapes (K, N = 1024, 4096 and 4096, 1024); the first call times both.
CONFIGS = [(64, 32, 2, 6), (128, 32, 2, 3)]

TEMPLATE_NAME = "triton_tem_bmm_tf32x3"
TEMPLATE_SOURCE = '''
# The skinny fp32 matmul template ([Note: tf32x3 for skinny fp32 matmuls] in mininductor/matmul_template.py):
# program (n, batch) computes out[batch, :, n-block] = a[batch] @ b[batch, :, n-block], all M <= BLOCK_M rows.
@triton.jit
def triton_tem_bmm_tf32x3(a_ptr, b_ptr, out_ptr, M, N, K, stride_ab, stride_am, stride_ak, stride_bb, stride_bk,
                          stride_bn, stride_ob, stride_om, stride_on, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, EVEN_N: tl.constexpr, EVEN_K: tl.constexpr):
    n_block, batch = tl.program_id(0), tl.program_id(1)
    rm = tl.arange(0, BLOCK_M)
    rn = n_block * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + batch * stride_ab + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + batch * stride_bb + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in range(0, K, BLOCK_K):
        a_mask = rm[:, None] < M
        b_mask = tl.full([BLOCK_K, BLOCK_N], True, tl.int1) if EVEN_N else rn[None, :] < N
        if not EVEN_K:  # the last step's columns past K read as 0 (0 * 0 adds nothing)
            a_mask = a_mask & (rk[None, :] < K - k)
            b_mask = b_mask & (rk[:, None] < K - k)
        acc += tl.dot(tl.load(a, mask=a_mask, other=0.0), tl.load(b, mask=b_mask, other=0.0),
                      input_precision="tf32x3")
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    out = out_ptr + batch * stride_ob + rm[:, None] * stride_om + rn[None, :] * stride_on
    tl.store(out, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
'''


def use_template(op, a, b, device: torch.device) -> bool:
    """Whether the lowering of ``op(a, b)`` (``aten.bmm``/``aten.mm`` IR inputs) emits a ``MatmulChoice``."""
    if config.matmul_template == "never" or op not in ("bmm", "mm"):
        return False
    if device.type != "cuda" and config.matmul_template != "always":  # the interpreter: only when asked
        return False
    sizes = [*a.get_size(), *b.get_size()]
    if a.get_dtype() != torch.float32 or b.get_dtype() != torch.float32 or any(is_symbolic(s) for s in sizes):
        return False
    m, k = (int(s) for s in a.get_size()[-2:])
    n = int(b.get_size()[-1])
    batch = int(a.get_size()[0]) if op == "bmm" else 1
    if not 0 < m <= BLOCK_M or n == 0 or batch == 0:  # (K = 0 is fine: no step of the loop, zeros stored)
        return False
    # 32-bit offsets in the template: every element of each operand and the output must be addressable
    if max(batch * m * k, batch * k * n, batch * m * n) >= 2 ** 31:
        return False
    # timing costs two Triton compiles and a quarter of a second: only where the read of b takes a while
    return config.matmul_template == "always" or batch * k * n * 4 >= config.matmul_template_min_bytes


class MatmulChoice:
    """``choice.run(a, b)``: ``a @ b`` (3-D ``bmm`` or 2-D ``mm``) into a new buffer of the given layout, by cuBLAS
    or by the template. On the GPU the first call times them and keeps the fastest; under ``"always"`` only the
    template's configurations are candidates (tests), and on the CPU its first configuration runs, interpreted."""

    def __init__(self, kernel, size, stride, device_type: str, mode: str = "auto") -> None:
        self.kernel, self.size, self.stride = kernel, tuple(size), tuple(stride)
        self.interpret = device_type != "cuda"
        self.mode = mode
        self.chosen = None  # a function (a, b, out) -> None
        self.chosen_name = None  # "cuBLAS", or the template's configuration: for people reading the choice

    def run(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_strided(self.size, self.stride, device=a.device, dtype=a.dtype)
        if self.chosen is None:
            self.chosen_name, self.chosen = self._choose(a, b, out)
        self.chosen(a, b, out)
        return out

    def _candidates(self, a, b) -> list[tuple[str, object]]:
        library = torch.bmm if a.dim() == 3 else torch.mm
        cands = [] if self.mode == "always" else [("cuBLAS", lambda a, b, out: library(a, b, out=out))]
        return cands + [(f"template {cfg}", self._template(cfg, a, b)) for cfg in CONFIGS]

    def _choose(self, a, b, out) -> tuple[str, object]:
        """The fastest candidate: each one's median over three interleaved ``do_bench`` timings (as
        ``ReductionKindChoice._choose`` times its variants). Each candidate writes only ``out``."""
        candidates = self._candidates(a, b)
        if self.interpret or len(candidates) == 1:
            return candidates[0]
        from triton.testing import do_bench
        ready = []
        for name, fn in candidates:
            try:
                fn(a, b, out)  # compiles a template configuration
                ready.append((name, fn))
            except Exception as e:  # noqa: BLE001 - a configuration that does not fit: the others run
                warnings.warn(f"mininductor: skipping the matmul candidate {name}: {type(e).__name__}")
        times = {name: [] for name, _ in ready}
        for _ in range(3):
            for name, fn in ready:
                times[name].append(do_bench(lambda fn=fn: fn(a, b, out), warmup=5, rep=20, return_mode="median"))
        return min(ready, key=lambda c: sorted(times[c[0]])[1])

    def _template(self, cfg: tuple, a, b):
        """A launch of the template with one configuration. The grid comes from the static sizes; each call passes
        its arguments' strides, and a GPU call launches the binary compiled for its specialization key."""
        from .direct_launch import DirectLauncher, specialization_key
        from .runtime import KEEP_DENORMALS, interpreted_stdlib
        block_n, block_k, warps, stages = cfg
        batched = a.dim() == 3
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        meta = {"BLOCK_M": BLOCK_M, "BLOCK_N": block_n, "BLOCK_K": block_k, "EVEN_N": n % block_n == 0,
                "EVEN_K": k % block_k == 0}
        grid = ((n + block_n - 1) // block_n, a.shape[0] if batched else 1)
        options = {} if self.interpret else {"num_warps": warps, "num_stages": stages, **KEEP_DENORMALS}
        launchers = {}

        def strides(a, b, out):
            s = lambda t: tuple(t.stride()) if batched else (0, *t.stride())
            return (*s(a), *s(b), *s(out))

        def launch(a, b, out):
            args = (a, b, out, m, n, k, *strides(a, b, out))
            if self.interpret:
                with interpreted_stdlib():
                    self.kernel[grid](*args, **meta)
                return
            key = specialization_key(args)
            direct = launchers.get(key)
            if direct is None:
                compiled = self.kernel.warmup(*args, grid=grid, **meta, **options)
                direct = DirectLauncher.make(self.kernel, compiled, meta, args, grid)
                if direct is None:
                    self.kernel[grid](*args, **meta, **options)
                    return
                launchers[key] = direct
            direct.launch(args, grid)

        return launch
