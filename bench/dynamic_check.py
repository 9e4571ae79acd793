"""Dynamic shapes on the GPU: one symbolic compile serves every size, with the same answers as eager.

    python bench/dynamic_check.py

The test suite checks this under Triton's interpreter on CPU; this runs the same kind of programs on CUDA tensors,
where Triton's JIT specialises integer arguments (1, multiples of 16) and the direct launcher must follow the
sizes. Prints one line per program: sizes tried, max abs difference, compiles, kernels, fallbacks.
"""
from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
import mininductor

SIZES = [2, 3, 8, 16, 17, 1000, 4096, 5, 33]


def programs():
    w = torch.randn(64, 32, device="cuda")
    g, b = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
    yield "pointwise chain", lambda x: torch.sigmoid(x * 2 + 1) * x, 64
    yield "softmax rows", lambda x: torch.softmax(x, -1), 64
    yield "sum over batch", lambda x: x.sum(0), 64
    yield "layer_norm", lambda x: F.layer_norm(x, (64,), g, b), 64
    yield "relu(x @ w)", lambda x: torch.relu(x @ w), 64
    yield "view and transpose", lambda x: (x.view(-1, 8, 8).transpose(1, 2) + 1).reshape(-1, 64), 64


def main() -> None:
    worst = 0.0
    for name, fn, width in programs():
        minidynamo.reset()
        mininductor.metrics.reset()
        compiled = minidynamo.minicompile(fn, dynamic=True)
        diffs = []
        for n in SIZES:
            x = torch.randn(n, width, device="cuda")
            for _ in range(2):  # the second call takes the direct launch path
                got = compiled(x)
            diffs.append((got - fn(x)).abs().max().item())
        m = mininductor.metrics
        worst = max(worst, max(diffs))
        print(f"{name:20s} sizes {SIZES} max|diff| {max(diffs):.2e} frames {minidynamo.counters['frames']['ok']} "
              f"symbolic compiles {getattr(m, 'symbolic_compiles', '?')} specialisations "
              f"{getattr(m, 'specialisations', '?')} kernels {m.generated_kernel_count} fallbacks "
              f"{getattr(m, 'symbolic_fallbacks', [])}", flush=True)
    print("OK" if worst < 1e-4 else f"MISMATCH {worst}")


if __name__ == "__main__":
    main()
