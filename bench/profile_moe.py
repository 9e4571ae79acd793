"""Where the MoE's time goes: a torch.profiler kernel table for each compiler (GPU).

    python bench/profile_moe.py [--kind friendly|tutorial] [--batch 32] [--dtype float32] [--rows 15]

Runs a few warmed-up eval forwards of the reference-sized MoE under eager, torch.compile and minicompile and prints
the profiler's table of GPU kernels sorted by total CUDA time: which kernels (cuBLAS, generated Triton, ATen
fallbacks) take the time, and how many launches there are. ``record_function`` regions of the tutorial MoE show
up as rows too (they still appear in the compiled run). Used to explain the numbers in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
import mininductor
from minidynamo.examples.moe import friendly_from_tutorial, make_moe, make_moe_input


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", default="friendly")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rows", type=int, default=15)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    tutorial = make_moe("tutorial", "reference", seed=0)
    base = tutorial if args.kind == "tutorial" else friendly_from_tutorial(tutorial)
    base = base.to(device="cuda", dtype=dtype).eval()
    x = make_moe_input("reference", batch_size=args.batch, seed=1, dtype=dtype).cuda()
    for name, compile_fn in (("eager", lambda m: m), ("torch.compile", torch.compile),
                             ("minicompile", minidynamo.minicompile)):
        minidynamo.reset()
        mininductor.metrics.reset()
        model = compile_fn(copy.deepcopy(base))
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(5):
                model(x)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    model(x)
                torch.cuda.synchronize()
        print(f"\n===== {args.kind} batch {args.batch} {args.dtype}: {name} (10 forwards) =====")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=70))
        if name == "minicompile":  # what ran compiled, and what did not
            print({k: dict(v) for k, v in minidynamo.counters.items()})
            print("kernels:", mininductor.metrics.generated_kernel_count, "ATen fallbacks:",
                  mininductor.metrics.fallback_ops)
            for message in sorted({str(w.message)[:300] for w in caught}):
                print("warning:", message)


if __name__ == "__main__":
    main()
