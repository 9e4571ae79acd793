"""Host overhead of the translator's runtime on the tutorial MoE (CPU; issue #7).

    python bench/overhead_translator.py [--calls 200] [--rows 25] [--inputs 4] [--no-profile]

The tutorial MoE (a Python loop over 32 experts with boolean-mask indexing, compiled unmodified) runs as a chain of
graphs and resume functions.  On the GPU its kernels take ~1.8 ms, but every frame the trampoline enters costs
host time: binding the arguments, trying cache entries' guard functions, calling the transformed code, building
the ``Continuation``.  This script isolates that cost: the model is small (kernels are cheap on CPU) and compiled
with ``backend="eager"`` (each graph runs its ops as eager would), so ``compiled - eager`` per call is the
translator's runtime overhead.  It prints

* eager and minicompile wall time per eval forward (``torch.no_grad``; the best of several rounds),
* what one call does: frames entered (per code object), cache entries whose guards were tried, graph calls,
* the time spent in guard functions per call (measured by re-running, in a loop, exactly the checks one call ran),
* the compile-time counters (``minidynamo.counters``: graphs, breaks, recompiles),
* a cProfile of compiled calls sorted by own time.

Routing follows the reference size (32 experts, top-4, capacity 4, batch 32); widths are small (64/128/64).  The
inputs cycle through ``--inputs`` batches so that empty, partly filled and overflowing experts all occur.
Collect garbage before timing: right after importing minidynamo (sympy, fx) the young generations hold ~400k
objects, and the full collections they trigger made *eager* look 10-25x slower in a first version of this script.
For the same reason (outliers of 20x) the ops run on one intra-op thread.
"""
from __future__ import annotations

import argparse
import collections
import copy
import cProfile
import gc
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
from minidynamo import eval_frame
from minidynamo.examples.moe import MoE
from minidynamo.utils import tuple_iterator

SIZES = {"input_dim": 64, "num_experts": 32, "top_k": 4, "expert_capacity": 4, "hidden_dim": 128, "output_dim": 64}
BATCH = 32


def per_call_ms(models: dict, inputs: list, calls: int, rounds: int = 7) -> dict[str, float]:
    """Wall time per forward of each model: the best of ``rounds`` rounds of ``calls`` forwards (inputs cycled).

    Rounds of the models alternate, and the minimum is reported: on a shared machine the noise only adds time."""
    for model in models.values():
        for x in inputs * 3:
            model(x)
    gc.collect()  # after imports and compiling, young generations are full: a collection would land in a round
    best = {name: float("inf") for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            t0 = time.perf_counter()
            for k in range(calls):
                model(inputs[k % len(inputs)])
            best[name] = min(best[name], (time.perf_counter() - t0) / calls * 1e3)
    return best


def trace_one_call(compiled, x) -> tuple[collections.Counter, list]:
    """Run one call with the frame hook instrumented: frames entered per code name, and every guard check made."""
    frames: collections.Counter = collections.Counter()
    checks: list = []  # (check function, f_locals, f_globals)
    ctx = compiled._ctx
    entries = [e for es in ctx.cache.values() for e in es]
    originals = {id(e): e.guard_manager.check for e in entries}

    def spy(check):
        def wrapped(f_locals, f_globals):
            checks.append((check, snapshot(f_locals), f_globals))
            return check(f_locals, f_globals)
        return wrapped

    run_frame = eval_frame.CompileContext.run_frame

    def counting_run_frame(self, fn, args, kwargs):
        frames[fn.__name__] += 1
        return run_frame(self, fn, args, kwargs)

    for e in entries:
        e.guard_manager.check = spy(e.guard_manager.check)
    eval_frame.CompileContext.run_frame = counting_run_frame
    try:
        compiled(x)
    finally:
        eval_frame.CompileContext.run_frame = run_frame
        for e in entries:
            e.guard_manager.check = originals[id(e)]
    return frames, checks


def snapshot(f_locals: dict) -> dict:
    """The locals as the guards saw them: a loop's iterator is copied (the call goes on to advance it)."""
    return {k: copy.copy(v) if type(v) is tuple_iterator else v for k, v in f_locals.items()}


def guard_time_ms(checks: list, repeat: int = 200) -> float:
    """Time of exactly the checks one call ran, re-run in a loop (warm caches: in a real call, between torch ops,
    the same checks were measured to cost about three times as much)."""
    t0 = time.perf_counter()
    for _ in range(repeat):
        for check, f_locals, f_globals in checks:
            check(f_locals, f_globals)
    return (time.perf_counter() - t0) / repeat * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny ops: intra-op threads only add noise on a loaded 2-core machine
    torch.manual_seed(0)
    eager = MoE(**SIZES).eval()
    inputs = [torch.randn(BATCH, SIZES["input_dim"]) for _ in range(args.inputs)]
    minidynamo.reset()
    compiled = minidynamo.minicompile(copy.deepcopy(eager), backend="eager")
    with torch.no_grad():
        for x in inputs:  # compile every path the inputs take, and check the results
            torch.testing.assert_close(compiled(x)[0], eager(x)[0])
        compile_counters = {k: dict(v) for k, v in minidynamo.counters.items()}
        times = per_call_ms({"eager": eager, "minicompile": compiled}, inputs, args.calls)
        t_eager, t_compiled = times["eager"], times["minicompile"]
        frames, checks = trace_one_call(compiled, inputs[0])
        t_guards = guard_time_ms(checks)
        print(f"eager        {t_eager:7.3f} ms per forward")
        print(f"minicompile  {t_compiled:7.3f} ms per forward  (overhead {t_compiled - t_eager:+.3f} ms, "
              f"{t_compiled / t_eager:.2f}x eager)")
        passed = sum(bool(check(f_locals, f_globals)) for check, f_locals, f_globals in checks)
        print(f"one call: {sum(frames.values())} frames entered, {len(checks)} guard functions run, {passed} passed "
              f"({t_guards:.3f} ms re-run warm), cache entries {sum(len(v) for v in compiled._ctx.cache.values())}")
        print("frames per code object:", dict(frames))
        print("compile counters:", compile_counters)
        if args.no_profile:
            return
        profiler = cProfile.Profile()
        profiler.enable()
        for k in range(args.calls // 4):
            compiled(inputs[k % len(inputs)])
        profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.rows)


if __name__ == "__main__":
    main()
