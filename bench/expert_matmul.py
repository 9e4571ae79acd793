"""The compile-friendly MoE's two expert matmuls: cuBLAS against Triton kernels of our own (GPU; issue #7).

    python bench/expert_matmul.py [--sweep]

``bias + a @ w`` with ``a`` [32 experts, 4 rows, K] and ``w`` [32, K, N]: the two shapes of the reference MoE
(K, N = 1024, 4096 and 4096, 1024). Four rows per expert make these memory-bound: each is one read of ``w``, 537 MB
in fp32, and the floor is that read at the bandwidth of ``w.sum()``, printed first. Timed with
``triton.testing.do_bench`` (median), in fp32 and bf16:

* ``baddbmm``: what eager and torch.compile run, one cuBLAS call after ATen copies the bias into the output;
* ``bmm + add``: cuBLAS's plain product, then the add (what mininductor runs since the twenty-fourth session,
  with the add fused into the next kernel: [Note: baddbmm as bmm and an add]);
* ``fma``: a Triton kernel of our own with exact fp32 products, each program one column block of one expert,
  multiplying a [4, BK] slice of ``a`` into a [BK, BN] tile of ``w`` and summing over K at the end; the next tile is
  loaded before the current one is used;
* ``tf32x3`` (fp32) / ``dot`` (bf16): the same loop through ``tl.dot`` with the rows padded to 16, which Triton
  software-pipelines. ``tf32x3`` splits each fp32 operand into two TF32 halves and sums three tensor-core products:
  about fp32's accuracy, and eager's infinities and NaN (Triton drops the NaN an infinite input's split makes).
  Since the twenty-fifth session mininductor runs this loop, ``mininductor/matmul_template.py``, where its first
  call finds it faster than cuBLAS ([Note: tf32x3 for skinny fp32 matmuls]).

``--sweep`` tries block shapes, warps and pipeline depths for the two Triton kernels (a few minutes); without it,
the best configurations the twenty-fourth session found on an H200 run. Recorded in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def expert_matmul(A, W, C, M, K, s_ae, s_am, s_ak, s_we, s_wk, s_wn, s_ce, s_cm, s_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr):
    """C[e, :, n-block] = A[e] @ W[e, :, n-block]; K must be a multiple of BK, N of BN."""
    n_block, e = tl.program_id(0), tl.program_id(1)
    rm, rn, rk = tl.arange(0, BM), n_block * BN + tl.arange(0, BN), tl.arange(0, BK)
    a_ptr = A + e * s_ae + rm[:, None] * s_am + rk[None, :] * s_ak
    w_ptr = W + e * s_we + rk[:, None] * s_wk + rn[None, :] * s_wn
    if DOT:
        acc = tl.zeros([BM, BN], tl.float32)
        for _ in range(0, K, BK):
            acc += tl.dot(tl.load(a_ptr, mask=rm[:, None] < M, other=0.0), tl.load(w_ptr), input_precision=PRECISION)
            a_ptr += BK * s_ak
            w_ptr += BK * s_wk
    else:  # products in fp32, partial sums kept per k until the end: no reduction inside the loop
        partial = tl.zeros([BM, BK, BN], tl.float32)
        w_next = tl.load(w_ptr)
        for k0 in range(0, K, BK):
            w = w_next
            w_ptr += BK * s_wk
            w_next = tl.load(w_ptr, mask=k0 + BK + rk[:, None] < K, other=0.0)
            a = tl.load(a_ptr, mask=rm[:, None] < M, other=0.0)
            a_ptr += BK * s_ak
            partial += a[:, :, None].to(tl.float32) * w[None, :, :].to(tl.float32)
        acc = tl.sum(partial, axis=1)
    tl.store(C + e * s_ce + rm[:, None] * s_cm + rn[None, :] * s_cn, acc.to(C.dtype.element_ty),
             mask=rm[:, None] < M)


def run_triton(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, cfg: tuple) -> torch.Tensor:
    dot, bn, bk, warps, stages = cfg
    (experts, m, k), n = a.shape, w.shape[2]
    c = torch.empty(experts, m, n, device=a.device, dtype=a.dtype)
    precision = "tf32x3" if a.dtype == torch.float32 else "ieee"
    expert_matmul[(n // bn, experts)](a, w, c, m, k, *a.stride(), *w.stride(), *c.stride(), BM=16 if dot else 4,
                                      BN=bn, BK=bk, DOT=dot, PRECISION=precision, num_warps=warps,
                                      num_stages=stages)
    return c + bias


# (dot, BN, BK, warps, stages): the best found per dtype, (K, N) and kernel on an H200 (twenty-fourth session)
BEST = {
    (torch.float32, 1024, 4096): [(True, 64, 32, 2, 6), (False, 256, 8, 2, 1)],
    (torch.float32, 4096, 1024): [(True, 128, 32, 2, 3), (False, 64, 16, 8, 2)],
    (torch.bfloat16, 1024, 4096): [(True, 256, 32, 4, 2), (False, 512, 8, 8, 2)],
    (torch.bfloat16, 4096, 1024): [(True, 256, 32, 4, 5), (False, 64, 32, 2, 2)],
}


def sweep_configs(dtype: torch.dtype) -> list[tuple]:
    size = 4 if dtype == torch.float32 else 2
    dots = [(True, bn, bk, nw, ns) for bn, bk, nw, ns in itertools.product((64, 128, 256), (32, 64), (2, 4, 8),
                                                                            (2, 3, 4, 6))
            if bn * bk * size * ns <= 200_000]
    fmas = [(False, bn, bk, nw, ns) for bn, bk, nw, ns in itertools.product((64, 128, 256, 512), (4, 8, 16, 32),
                                                                             (2, 4, 8), (1, 2))
            if bn * bk // (nw * 8) <= 128 and bn * bk >= 512]
    return dots + fmas


def median_us(fn, rep_ms: int = 60) -> float:
    """Median of per-launch CUDA-event times (Triton's ``do_bench`` empties the L2 cache before each)."""
    return triton.testing.do_bench(fn, warmup=10, rep=rep_ms, return_mode="median") * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", action="store_true", help="search the Triton kernels' configurations")
    args = parser.parse_args()
    print(torch.__version__, triton.__version__, torch.cuda.get_device_name())
    w = torch.randn(32, 1024, 4096, device="cuda")
    floor = median_us(w.sum)
    print(f"w.sum() of 537 MB: {floor:.1f} us, {w.numel() * 4 / floor / 1e6:.2f} TB/s")
    del w
    for dtype, (k, n) in itertools.product((torch.float32, torch.bfloat16), ((1024, 4096), (4096, 1024))):
        bench_shape(dtype, k, n, args.sweep)


def bench_shape(dtype: torch.dtype, k: int, n: int, sweep: bool) -> None:
    a = torch.randn(32, 4, k, device="cuda", dtype=dtype)
    w = torch.randn(32, k, n, device="cuda", dtype=dtype) / k ** 0.5
    bias = torch.randn(32, 1, n, device="cuda", dtype=dtype)
    reference = torch.baddbmm(bias.double(), a.double(), w.double())
    megabytes = w.numel() * w.element_size() / 1e6
    cases = {"baddbmm": lambda: torch.baddbmm(bias, a, w), "bmm + add": lambda: torch.bmm(a, w) + bias}
    timed = []
    for cfg in sweep_configs(dtype) if sweep else BEST[(dtype, k, n)]:
        try:
            timed.append((median_us(lambda cfg=cfg: run_triton(a, w, bias, cfg), rep_ms=25), cfg))
        except Exception as e:  # noqa: BLE001 - a configuration that does not fit (shared memory, registers)
            print(f"  skipped {cfg}: {type(e).__name__}")
    for dot in (True, False):
        mine = sorted(t for t in timed if t[1][0] == dot)
        if mine:
            name = ("tf32x3" if dtype == torch.float32 else "dot") if dot else "fma"
            cases[f"{name} {mine[0][1][1:]}"] = lambda cfg=mine[0][1]: run_triton(a, w, bias, cfg)
    print(f"{str(dtype)[6:]} K={k} N={n}:")
    for name, fn in cases.items():
        us = median_us(fn)
        error = (fn().double() - reference).abs().max().item()
        print(f"  {name:28s} {us:7.1f} us  {megabytes / us:5.2f} TB/s  max error {error:.2e}")
    a[0, 0, 0] = float("inf")  # one infinite input: row 0 of expert 0 is +-inf (or NaN where a 0 weight meets it)
    eager = torch.baddbmm(bias, a, w)[0, 0, :8].tolist()
    for name, fn in cases.items():
        print(f"  an inf in a, {name:16s} row 0: {[f'{v:g}' for v in fn()[0, 0, :4].tolist()]} (eager "
              f"{[f'{v:g}' for v in eager[:4]]})")

if __name__ == "__main__":
    main()
