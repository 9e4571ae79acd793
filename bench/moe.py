"""MoE benchmark on the GPU: eager vs torch.compile vs minicompile, in one process.

    python bench/moe.py [--out results.json] [--quick] [--train-check]

For each MoE kind (the tutorial MoE, compiled unmodified, and its compile-friendly twin), batch size and dtype it
builds the reference-sized model (input 1024, hidden 4096, 32 experts, top-4, capacity 4), then for each of
eager / torch.compile / minicompile:

* the first call's wall time (compilation included: "compile s"),
* correctness against eager (max abs difference of the outputs),
* the median of CUDA-event timings of an eval forward, and of a train step (forward with the aux loss, MSE
  backward, grad clipping, AdamW), after warm-up (20 train steps for every compiler: the routing changes as the
  weights do, and minicompile's recompiles during warm-up and timing are reported),
* for minicompile, the counts that explain the time: frames, graphs, graph breaks, recompiles, eager fallbacks,
  generated kernels and ATen fallbacks.

``--train-check`` also runs the tutorial MoE's 20-step training run (``train_steps``) eagerly and under
minicompile from the same seed and reports the largest relative loss difference (issue: training).
Results are recorded in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
import mininductor
from minidynamo.examples.moe import friendly_from_tutorial, make_moe, make_moe_input, train_steps

DEVICE = "cuda"
SIZE = "reference"
TRAIN_WARMUP = 20  # train steps before timing (see run_case)


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def cuda_median_ms(fn, iters: int = 30, warmup: int = 5) -> float:
    """Median of per-call CUDA-event timings (each call is bracketed by its own events)."""
    for _ in range(warmup):
        fn()
    sync()
    if DEVICE != "cuda":  # --smoke on CPU: wall clock
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def build(kind: str, dtype: torch.dtype) -> torch.nn.Module:
    tutorial = make_moe("tutorial", SIZE, seed=0)
    model = tutorial if kind == "tutorial" else friendly_from_tutorial(tutorial)
    return model.to(device=DEVICE, dtype=dtype)


def compilers(kind: str):
    yield "eager", lambda m: m
    yield "torch.compile", lambda m: torch.compile(m)
    yield "minicompile", lambda m: minidynamo.minicompile(m)
    if kind == "friendly" and DEVICE == "cuda":  # one graph, no CPU syncs: CUDA graphs apply
        yield "torch.compile reduce-overhead", lambda m: torch.compile(m, mode="reduce-overhead")
        yield "minicompile reduce-overhead", lambda m: minidynamo.minicompile(m, mode="reduce-overhead")


def minicompile_counts() -> dict:
    c = minidynamo.counters
    return {"frames": c["frames"]["ok"], "graphs": c["stats"]["unique_graphs"],
            "graph_breaks": sum(c["graph_break"].values()), "recompiles": c["recompiles"]["total"],
            "eager_fallbacks": sum(c["eager_fallback"].values()),
            "kernels": mininductor.metrics.generated_kernel_count, "aten_fallbacks": mininductor.metrics.fallback_count}


def train_step_fn(model, opt, x, y):
    def step():
        out, aux = model(x)
        loss = torch.nn.functional.mse_loss(out, y) + 1e-2 * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        opt.step()
    return step


def run_case(kind: str, batch: int, dtype: torch.dtype, train: bool, iters: int) -> list[dict]:
    rows = []
    x = make_moe_input(SIZE, batch_size=batch, seed=1, dtype=dtype).to(DEVICE)
    base = build(kind, dtype).eval()
    try:
        with torch.no_grad():
            expected = base(x)[0]
    except RuntimeError as e:  # the tutorial MoE is fp32-only as written: its output buffer is torch.zeros(...)
        row = {"kind": kind, "batch": batch, "dtype": str(dtype).replace("torch.", ""), "compiler": "eager",
               "error": f"eager itself fails: {str(e)[:200]}"}
        print(json.dumps(row), flush=True)
        return [row]
    for name, compile_fn in compilers(kind):
        minidynamo.reset()
        mininductor.metrics.reset()
        torch._dynamo.reset()
        row = {"kind": kind, "batch": batch, "dtype": str(dtype).replace("torch.", ""), "compiler": name}
        model = copy.deepcopy(base).eval()
        compiled = compile_fn(model)
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sync()
                t0 = time.perf_counter()
                out = compiled(x)[0]
                sync()
                row["compile_s"] = round(time.perf_counter() - t0, 2)
                row["max_abs_diff"] = (out.float() - expected.float()).abs().max().item()
                row["forward_ms"] = round(cuda_median_ms(lambda compiled=compiled: compiled(x), iters), 3)
                # and again after the timed calls (which take the direct kernel-launch path)
                row["max_abs_diff_after"] = (compiled(x)[0].float() - expected.float()).abs().max().item()
            if name.startswith("minicompile"):
                row.update(minicompile_counts())
            if train and "reduce-overhead" not in name:
                model.train()
                opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
                y = torch.randn(batch, expected.shape[-1], device=DEVICE, dtype=dtype)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    step = train_step_fn(compiled, opt, x, y)
                    t0 = time.perf_counter()
                    step()
                    sync()
                    row["train_compile_s"] = round(time.perf_counter() - t0, 2)
                    # The weights change every step and so does the routing: the tutorial MoE meets new (expert,
                    # case) pairs -- one row, more rows than capacity -- for a while, and minicompile translates
                    # each once. Every compiler gets the same TRAIN_WARMUP steps, then the timed ones; recompiles
                    # still happening while timed are reported beside the time.
                    before = minidynamo.counters["recompiles"]["total"]
                    for _ in range(TRAIN_WARMUP):
                        step()
                    row["train_recompiles_in_warmup"] = minidynamo.counters["recompiles"]["total"] - before
                    before = minidynamo.counters["recompiles"]["total"]
                    row["train_step_ms"] = round(cuda_median_ms(step, max(5, iters // 3), warmup=0), 3)
                    row["train_recompiles_timed"] = minidynamo.counters["recompiles"]["total"] - before
                if name.startswith("minicompile"):
                    row["train_counts"] = minicompile_counts()
        except Exception as e:  # noqa: BLE001 - a benchmark reports a failure and goes on
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def train_check() -> dict:
    """The tutorial MoE's 20-step training run, eager vs minicompile, from the same seed (fp32, no TF32)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    result = {}
    for name in ("eager", "minicompile"):
        minidynamo.reset()
        model = make_moe("tutorial", SIZE, seed=0).to(DEVICE)
        subject = model if name == "eager" else minidynamo.minicompile(model)
        opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            dims = (model.gate.in_features, model.experts[0].net[-1].out_features)
            result[name] = train_steps(subject, 20, bsz=32, optimizer=opt, dims=dims, seed=0)
            result[f"{name}_s"] = round(time.perf_counter() - t0, 2)
    rel = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(result["minicompile"], result["eager"])]
    result["max_rel_diff"] = max(rel)
    print(json.dumps({"train_check": result}), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--quick", action="store_true", help="fp32 batch 32 only")
    parser.add_argument("--train-check", action="store_true")
    parser.add_argument("--kinds", default="friendly,tutorial")
    parser.add_argument("--smoke", action="store_true", help="small sizes on the CPU (checks the script runs)")
    args = parser.parse_args()
    global DEVICE, SIZE, TRAIN_WARMUP
    if args.smoke:
        DEVICE, SIZE, TRAIN_WARMUP = "cpu", "small", 2
    print(json.dumps({"device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", "torch": torch.__version__,
                      "triton": __import__("triton").__version__, "python": sys.version.split()[0]}), flush=True)
    cases = [(32 if DEVICE == "cuda" else 16, torch.float32, True)]
    if not args.quick and not args.smoke:
        cases += [(256, torch.float32, False), (32, torch.bfloat16, False)]
    rows = []
    for kind in args.kinds.split(","):
        for batch, dtype, train in cases:
            rows += run_case(kind, batch, dtype, train, iters=3 if args.smoke else 30)
    results = {"rows": rows}
    if args.train_check:
        results["train_check"] = train_check()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
