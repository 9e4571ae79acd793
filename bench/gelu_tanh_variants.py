"""The bf16 GELU-tanh kernel with four ways of computing its ``tanh`` (GPU): speed against equality with eager.

    python bench/gelu_tanh_variants.py

Why: the bf16 GELU-tanh is the one pointwise case of ``bench/kernels.py`` under 90% of copy bandwidth. Its kernel
is ALU-bound on libdevice's accurate ``tanh`` (torch.compile's too). This script answers whether a cheaper ``tanh``
would do: each variant is the decomposition's formula ``0.5 x (1 + tanh(u))``, ``u = sqrt(2/pi) (x + 0.044715 x^3)``,
written by hand as one Triton kernel, timed with ``do_bench`` (best of 3) against a copy of the same bytes, and
compared element by element with eager's ``F.gelu(x, approximate="tanh")``. docs/benchmarks.md records the result
and the decision (ninth session).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice
from triton.testing import do_bench

N = 1 << 26
SQRT_2_OVER_PI = 0.7978845608028654


@triton.jit
def _gelu_tanh(x_ptr, out_ptr, n, VARIANT: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    if VARIANT == "libdevice":
        out = 0.5 * x * (1.0 + libdevice.tanh(u))
    elif VARIANT == "exp":
        out = 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * u) + 1.0))
    elif VARIANT == "exp2":
        out = 0.5 * x * (2.0 - 2.0 / (libdevice.exp2(2.8853900817779268 * u) + 1.0))  # 2u * log2(e)
    else:  # "sigmoid": 1 + tanh(u) == 2 sigmoid(2u)
        out = x / (1.0 + tl.exp(-2.0 * u))
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask)


VARIANTS = {"libdevice": "libdevice tanh (ours, torch.compile's)", "exp": "1 - 2 / (exp(2u) + 1)",
            "exp2": "1 - 2 / (exp2(2u log2 e) + 1)", "sigmoid": "x * sigmoid(2u)"}


def run_variant(variant: str, x: torch.Tensor, out: torch.Tensor, block: int = 1024) -> float:
    """Milliseconds per call (best of three ``do_bench`` medians); ``out`` holds the result."""
    def launch():
        _gelu_tanh[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), VARIANT=variant, BLOCK=block, num_warps=4)

    launch()
    torch.cuda.synchronize()
    return min(do_bench(launch, rep=300) for _ in range(3))


def main() -> None:
    print(torch.cuda.get_device_name(), "| torch", torch.__version__, "| triton", triton.__version__)
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float32):
        x = (torch.randn(N, device="cuda") * 3.0).to(dtype)
        expected = F.gelu(x, approximate="tanh")
        copy_ms = min(do_bench(x.clone, rep=300) for _ in range(3))
        eager_ms = do_bench(lambda x=x: F.gelu(x, approximate="tanh"))
        print(f"\n{dtype}: copy {copy_ms:.4f} ms, eager {eager_ms:.4f} ms")
        out = torch.empty_like(x)
        for variant, text in VARIANTS.items():
            ms = run_variant(variant, x, out)
            differ = (out != expected).sum().item()
            print(f"  {text:40s} {ms:.4f} ms  {100 * copy_ms / ms:4.0f}% of copy  "
                  f"outputs != eager: {differ} ({100 * differ / N:.2f}%)")


if __name__ == "__main__":
    main()
