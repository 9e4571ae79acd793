"""First-call compile time of the MoE, split by phase (issue #7).

    python bench/compile_time.py                       # CUDA if available, else CPU; reference routing
    python bench/compile_time.py --size reference      # the real reference dims (input 1024, hidden 4096)
    python bench/compile_time.py --torch-compile       # also time torch.compile's first call, same model
    python bench/compile_time.py --profile /tmp/prof   # also write a cProfile of each first call there
    python bench/compile_time.py --timeline            # GPU: when each graph waited for its kernels, and for which

Each case (MoE kind x compiler) runs in a fresh Python process, so every first call pays what a user's first call
pays: the caches (FxGraphCache, our module cache in memory, Triton's in-process kernel cache) start empty. The
on-disk code caches are set to a fresh directory too (``MINICOMPILE_CACHE_DIR``, ``TRITON_CACHE_DIR``) unless
``--warm-disk`` is given. Imports (torch, triton, torch._dynamo, minicompile) are done before the clock starts, and
reported on their own: torch.compile imports ``torch._dynamo`` when called; minicompile's ShapeEnv does too.

Sizes: ``routing`` is the reference routing (32 experts, top-4, capacity 4, batch 32) with small dims (32/64/32),
which keeps Triton's interpreter fast on the CPU; ``reference`` adds the real dims; ``small`` is the tests' model.

The first call (eval mode, ``no_grad``) is split into exclusive phases (``mininductor.metrics.timed``):

    translation   minidynamo: bytecode -> FX graphs, guards, resume functions (convert_frame, less the backend)
    backend       compile_fx itself: FxGraphCache keys, dynamic-shape dispatch
    aot           AOTAutograd / make_fx with the decomposition table: FX -> ATen graph
    lowering      GraphLowering: ATen -> IR
    scheduling    Scheduler: dependencies, fusion
    codegen       WrapperCodeGen + TritonKernel: output_code.py source
    load          write + import output_code.py (decorating its @triton.jit kernels)
    precompile    compiling a graph's kernels before its first call (GPU: mininductor.async_compile)
    first_launch  each kernel's first launch: Triton's compile and autotuning on the GPU, the interpreter on CPU
    run           everything else: the compiled graphs' other work, eager code between graphs, guards

On CUDA it also times ``triton.compile`` per kernel variant (summed over threads, so it can exceed the wall time
when kernels compile in parallel) and lists the slowest.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PHASES = ["translation", "backend", "aot", "lowering", "scheduling", "codegen", "load", "precompile",
          "first_launch", "run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="tutorial,friendly")
    parser.add_argument("--size", default="routing", choices=["routing", "reference", "small"])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--torch-compile", action="store_true", help="also time torch.compile's first call")
    parser.add_argument("--profile", default=None, help="directory for a cProfile of each first call")
    parser.add_argument("--warm-disk", action="store_true", help="keep the on-disk code caches of earlier runs")
    parser.add_argument("--out", default=None, help="write the rows as JSON lines here")
    parser.add_argument("--timeline", action="store_true",
                        help="also list each graph's precompile (GPU): when it started, how long it waited, and "
                             "each of its variants' triton.compile seconds")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # "kind:compiler", in the child process
    args = parser.parse_args()
    if args.one:
        kind, compiler = args.one.split(":")
        print("ROW " + json.dumps(measure(kind, compiler, args)), flush=True)
        return
    rows = []
    compilers = ["minicompile"] + (["torch.compile"] if args.torch_compile else [])
    for kind in args.kinds.split(","):
        for compiler in compilers:
            rows.append(run_child(kind, compiler, args))
            print_row(rows[-1])
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


def run_child(kind: str, compiler: str, args) -> dict:
    """Run one case in a fresh interpreter (cold in-memory caches) and return its row."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", f"{kind}:{compiler}", "--size", args.size]
    cmd += ["--device", args.device] if args.device else []
    cmd += ["--profile", args.profile] if args.profile else []
    cmd += ["--timeline"] if args.timeline else []
    env = dict(os.environ)
    if not args.warm_disk:
        scratch = tempfile.mkdtemp(prefix="compile_time_")
        env["MINICOMPILE_CACHE_DIR"] = os.path.join(scratch, "minicompile")
        env["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
    proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if line.startswith("ROW "):
            return json.loads(line[4:])
    return {"kind": kind, "compiler": compiler, "error": (proc.stderr or proc.stdout)[-2000:]}


def print_row(row: dict) -> None:
    if "error" in row:
        print(f"{row['kind']:9s} {row['compiler']:14s} ERROR\n{row['error']}")
        return
    print(f"\n{row['kind']} / {row['compiler']} on {row['device']}: first call {row['first_call_s']:.2f} s "
          f"(imports before it {row['import_s']:.2f} s), second call {row['second_call_s'] * 1e3:.1f} ms, "
          f"max abs diff vs eager {row['max_abs_diff']:.2e}")
    phases = row.get("phases")
    if phases:
        print("  " + "  ".join(f"{k} {phases.get(k, 0.0):.2f}" for k in PHASES))
    if "counts" in row:
        print("  " + "  ".join(f"{k} {v}" for k, v in row["counts"].items()))
    for error in row.get("worker_errors", []):
        print(f"  compile worker failed: {error}")
    if row.get("triton_compile"):
        t = row["triton_compile"]
        print(f"  triton.compile: {t['variants']} variants, {t['sum_s']:.2f} s summed over threads; slowest: "
              + ", ".join(f"{name} {s:.2f}s" for name, s in t["slowest"]))
    for g in row.get("timeline", []):
        print(f"  precompile at {g['at_s']:.2f} s: {g['wait_s']:.2f} s for " + ", ".join(
            f"{name} {s:.2f}" for name, s in g["variants"]))


# ------------------------------------------------------------------------------------------------ child process
def measure(kind: str, compiler: str, args) -> dict:
    t0 = time.perf_counter()
    import torch
    import torch._dynamo
    sys.path.insert(0, ROOT)
    import minidynamo
    import mininductor
    from minidynamo.examples import moe
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    import_s = time.perf_counter() - t0
    model, x = build(moe, kind, args.size, device)
    triton_times = _time_triton_compile() if device == "cuda" else None
    timeline = []
    if compiler == "minicompile":
        _instrument_minicompile(mininductor, timeline if args.timeline else None)
        compiled = minidynamo.minicompile(model)
    else:
        compiled = torch.compile(model)
    profiler = cProfile.Profile() if args.profile else None
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        timeline.append(time.perf_counter())  # the first call starts (the clock of "at")
        first_s = _timed_call(compiled, x, device, profiler)
        second_s = _timed_call(compiled, x, device, None)
        out = compiled(x)[0]
        expected = model(x)[0]
    row = {"kind": kind, "compiler": compiler, "size": args.size, "device": _device_name(torch, device),
           "import_s": round(import_s, 3), "first_call_s": round(first_s, 3), "second_call_s": round(second_s, 5),
           "max_abs_diff": (out.float() - expected.float()).abs().max().item()}
    if compiler == "minicompile":
        row["phases"] = _phases(mininductor.metrics.phase_times, first_s)
        row["counts"] = _counts(minidynamo, mininductor)
        if mininductor.metrics.compile_worker_errors:
            row["worker_errors"] = mininductor.metrics.compile_worker_errors[:3]
    if triton_times is not None:
        row["triton_compile"] = _summarise_triton(triton_times)
        if args.timeline and compiler == "minicompile":
            row["timeline"] = _timeline(timeline, triton_times)
    if profiler is not None:
        os.makedirs(args.profile, exist_ok=True)
        profiler.dump_stats(os.path.join(args.profile, f"{kind}_{compiler}_{args.size}.prof"))
    return row


def build(moe, kind: str, size: str, device: str):
    import torch
    if size == "routing":
        moe.MOE_SIZES["routing"] = moe.MoESize(input_dim=32, num_experts=32, top_k=4, expert_capacity=4,
                                               hidden_dim=64, output_dim=32, batch_size=32)
    tutorial = moe.make_moe("tutorial", size, seed=0)
    model = tutorial if kind == "tutorial" else moe.friendly_from_tutorial(tutorial)
    model = model.to(device).eval()
    x = moe.make_moe_input(size, seed=1).to(device)
    with torch.no_grad():
        model(x)  # eager warm-up: cuBLAS handles, allocator; neither compiler should pay for them
    return model, x


def _timed_call(fn, x, device: str, profiler) -> float:
    import torch
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    fn(x)
    if device == "cuda":
        torch.cuda.synchronize()
    if profiler is not None:
        profiler.disable()
    return time.perf_counter() - t0


def _instrument_minicompile(mininductor, timeline: list | None) -> None:
    """Time translation (convert_frame, exclusive of the backend) and each kernel's first launch; with a
    ``timeline`` list, append (start, end) of each graph's precompile (one that waits) to it."""
    from minidynamo import eval_frame
    from mininductor import async_compile, runtime
    timed = mininductor.metrics.timed
    convert = eval_frame.convert_frame

    def convert_frame(*a, **k):
        with timed("translation"):
            return convert(*a, **k)

    eval_frame.convert_frame = convert_frame
    run = runtime.KernelLauncher.run

    def launcher_run(self, *a):
        if getattr(self, "_bench_launched", False):
            return run(self, *a)
        self._bench_launched = True
        with timed("first_launch"):
            return run(self, *a)

    runtime.KernelLauncher.run = launcher_run
    if timeline is None:
        return
    precompile = async_compile.precompile

    def timed_precompile(*a, wait=True, **k):
        t0 = time.perf_counter()
        try:
            return precompile(*a, wait=wait, **k)
        finally:
            if wait:  # a prefetch (the mask kernels) returns at once: nothing waits for it here
                timeline.append((t0, time.perf_counter()))

    async_compile.precompile = timed_precompile


def _phases(times: dict, first_s: float) -> dict:
    phases = {k: round(v, 3) for k, v in times.items()}
    phases["run"] = round(first_s - sum(times.values()), 3)
    return phases


def _counts(minidynamo, mininductor) -> dict:
    c, m = minidynamo.counters, mininductor.metrics
    return {"graphs": c["stats"]["unique_graphs"], "recompiles": c["recompiles"]["total"],
            "graph_breaks": sum(c["graph_break"].values()), "fx_graph_cache_hits": m.fx_graph_cache_hits,
            "kernels": m.generated_kernel_count, "aten_fallbacks": m.fallback_count,
            "worker_compiles": m.compile_worker_jobs, "worker_failures": m.compile_worker_failures,
            "static_launcher_kernels": m.static_launcher_kernels, "triton_launcher_kernels": m.triton_launcher_kernels}


def _time_triton_compile() -> list:
    """Wrap ``triton.compiler.compile`` (what ``JITFunction`` calls to build a kernel variant) to time each call."""
    import triton.compiler
    times, lock, original = [], threading.Lock(), triton.compiler.compile

    def compile(src, *a, **k):
        t0 = time.perf_counter()
        try:
            return original(src, *a, **k)
        finally:
            name = getattr(getattr(src, "fn", None), "__name__", str(src)[:40])
            with lock:
                times.append((name, time.perf_counter() - t0, t0))

    triton.compiler.compile = compile
    return times


def _summarise_triton(times: list) -> dict:
    slowest = sorted(times, key=lambda t: -t[1])[:5]
    return {"variants": len(times), "sum_s": round(sum(t for _, t, _ in times), 3),
            "slowest": [(n, round(t, 3)) for n, t, _ in slowest]}


def _timeline(marks: list, times: list) -> list[dict]:
    """Each precompile of the first call: its start (seconds into the call), its wall time, and the variants
    whose ``triton.compile`` started inside it (name, seconds)."""
    start, spans = marks[0], marks[1:]
    return [{"at_s": round(t0 - start, 3), "wait_s": round(t1 - t0, 3),
             "variants": [(n, round(dt, 3)) for n, dt, at in times if t0 <= at <= t1]} for t0, t1 in spans]


def _device_name(torch, device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


if __name__ == "__main__":
    main()
