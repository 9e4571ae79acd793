"""Where the tutorial MoE's host time goes, layer by layer (GPU; issue #7).

    python bench/tutorial_layers.py [--mode default|reduce-overhead] [--train] [--calls 20] [--size reference]

The tutorial MoE's loop runs, per expert, a frame (its guard check), a compiled graph, and a boolean-mask
subscript natively (one ``nonzero``, which waits for the GPU, and two ``index_select``s: [Note: shared nonzero]
in minidynamo/native_stretch.py; under ``no_grad`` a mask count, which waits, and two mask gathers instead:
[Note: mask gather] in mininductor/mask_gather.py -- since the thirty-fifth session the counts of all but the first
expert come from one table, [Note: equality masks counted once], and both gathers are one launch, [Note: both
subscripts in one launch]). Its kernels are tiny, so its time is host time. This wraps each of those
layers in a ``perf_counter`` and prints, per forward (or train step with ``--train``): the time spent inside it,
its calls, and the time per call. The outermost call of a layer is timed, so nested layers are parts of the
one above (a ``CudaGraphRunner`` is part of its ``CompiledGraph``, a replay part of its runner). Timing
changes what it measures by a few per cent; ratios between layers are what it is for.

With ``--mode reduce-overhead`` it also counts the tensors copied into CUDA graphs' static buffers per forward
and lists each compiled graph's recordings (size signatures, parameter sets). With ``--train``, the step's
phases (forward, backward, clip + AdamW) are timed with a ``synchronize`` between them. Eager's forward (or
step) is timed in the same process first, for scale. Used in docs/benchmarks.md (twenty-seventh session).
"""
from __future__ import annotations

import argparse
import collections
import copy
import gc
import importlib
import itertools
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
from minidynamo import native_stretch
from minidynamo.cache_entry import CacheEntries
from minidynamo.examples.moe import make_moe, make_moe_input
from mininductor import cudagraphs, mask_gather, metrics

compile_fx = importlib.import_module("mininductor.compile_fx")  # the module: the package exports the function
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


class Layers:
    """``perf_counter`` around methods, outermost calls only per label: ``time[label]`` seconds, ``calls[label]``."""

    def __init__(self) -> None:
        self.time: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self.depth: collections.Counter = collections.Counter()
        self.undo: list = []

    def wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            self.depth[label] += 1
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.depth[label] -= 1
                if not self.depth[label]:
                    self.time[label] += time.perf_counter() - t0
                    self.calls[label] += 1
        setattr(owner, name, timed)
        self.undo.append((owner, name, original))

    def restore(self) -> None:
        for owner, name, original in reversed(self.undo):
            setattr(owner, name, original)


def train_step(model, x, y):
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=5e-4)

    def phases() -> list[float]:
        t = [time.perf_counter()]
        out, aux = model(x)
        loss = torch.nn.functional.mse_loss(out, y) + 1e-2 * aux
        sync()
        t.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        sync()
        t.append(time.perf_counter())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sync()
        t.append(time.perf_counter())
        return [(b - a) * 1e3 for a, b in itertools.pairwise(t)]
    return phases


def run_calls(fn, calls: int) -> float:
    """ms per call, a ``synchronize`` at the end."""
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="default", choices=["default", "reduce-overhead"])
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--size", default="reference" if DEVICE == "cuda" else "small")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if DEVICE == "cpu":  # one intra-op thread: spinning OpenMP threads swing eager's CPU times by 100x
        torch.set_num_threads(1)
    base = make_moe("tutorial", args.size, seed=0).to(DEVICE).train(args.train)
    x = make_moe_input(args.size, seed=1).to(DEVICE)
    y = torch.randn(x.shape[0], base.experts[0].net[-1].out_features, device=DEVICE)
    eager = copy.deepcopy(base)
    mini = minidynamo.minicompile(copy.deepcopy(base), mode=None if args.mode == "default" else args.mode)
    if args.train:
        steps = {"eager": train_step(eager, x, y), "minicompile": train_step(mini, x, y)}
        for step in steps.values():
            for _ in range(25):  # the routing changes with the weights: meet the row-count cases first
                step()
        for name, step in steps.items():
            rows = [step() for _ in range(max(3, args.calls // 3))]
            med = [statistics.median(r[i] for r in rows) for i in range(3)]
            print(f"{name:>11}: forward {med[0]:.2f}  backward {med[1]:.2f}  clip + AdamW {med[2]:.2f} ms")
        measure(steps["minicompile"], "step", args)
        return
    with torch.no_grad():
        for _ in range(5):
            mini(x)
        print(f"eager forward {run_calls(lambda: eager(x), args.calls):.3f} ms")
        measure(lambda: mini(x), "forward", args)


def measure(one, per: str, args) -> None:
    """Run ``one`` ``args.calls`` times with every layer timed, and print the table."""
    layers = Layers()
    layers.wrap(CacheEntries, "lookup", "guard lookup (frame entry)")
    layers.wrap(compile_fx.CompiledGraph, "__call__", "CompiledGraph (graph call)")
    layers.wrap(cudagraphs.CudaGraphRunner, "__call__", "  CudaGraphRunner")
    layers.wrap(torch.cuda.CUDAGraph, "replay", "    CUDAGraph.replay")
    layers.wrap(torch.Tensor, "nonzero", "nonzero (waits for the GPU)")
    layers.wrap(torch.Tensor, "index_select", "index_select (mask subscripts)")
    layers.wrap(mask_gather, "count", "mask count (waits for the GPU)")
    layers.wrap(native_stretch, "equality_count", "mask count from a table")
    layers.wrap(mask_gather, "mask_gather", "mask gather (mask subscripts)")
    layers.wrap(mask_gather, "mask_gather_pair", "mask gather, two subscripts")
    metrics.cudagraph_input_copies = 0
    gc.collect()
    try:
        ms = run_calls(one, args.calls)
    finally:
        layers.restore()
    mode = "" if args.mode == "default" else f", mode {args.mode}"
    print(f"minicompile {per}{mode}: {ms:.3f} ms (instrumented), {DEVICE}, size {args.size}, torch {torch.__version__}")
    for label, seconds in layers.time.items():
        n = layers.calls[label]
        print(f"  {label:34s} {seconds / args.calls * 1e3:7.3f} ms per {per}  {n / args.calls:6.1f} calls  "
              f"{seconds / n * 1e6:7.1f} us each")
    if args.mode == "reduce-overhead":
        print(f"  tensors copied into static buffers: {metrics.cudagraph_input_copies / args.calls:.1f} per {per}")
        for graph in (o for o in gc.get_objects() if isinstance(o, compile_fx.CompiledGraph)):
            variants = [len(v) for v in graph._runners.values()]
            print(f"  a graph of {graph.n_inputs} inputs: {len(variants)} size signatures, parameter sets {variants}")

if __name__ == "__main__":
    main()
