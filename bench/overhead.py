"""Host overhead of a compiled call: where the CPU time of one minicompile forward goes (GPU).

    python bench/overhead.py [--batch 32] [--calls 300] [--rows 25]

The compile-friendly MoE's forward reads 1 GB of weights in ~0.3 ms of GPU time, so the Python around the kernels
(guards, the frame hook, the generated wrapper, Triton's launcher) decides the wall time. This prints the wall time
per call of eager, torch.compile and minicompile, then a cProfile of minicompile's calls sorted by own time.
"""
from __future__ import annotations

import argparse
import copy
import cProfile
import os
import pstats
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
from minidynamo.examples.moe import friendly_from_tutorial, make_moe, make_moe_input


def wall_us(fn, calls: int) -> float:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    base = friendly_from_tutorial(make_moe("tutorial", "reference", seed=0)).cuda().eval()
    x = make_moe_input("reference", batch_size=args.batch, seed=1).cuda()
    models = {"eager": base, "torch.compile": torch.compile(copy.deepcopy(base)),
              "minicompile": minidynamo.minicompile(copy.deepcopy(base))}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in models.items():
            print(f"{name:>14}: {wall_us(lambda model=model: model(x), args.calls):8.1f} us per call (wall, back to back)")
        compiled = models["minicompile"]
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.calls):
            compiled(x)
        torch.cuda.synchronize()
        profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.rows)


if __name__ == "__main__":
    main()
