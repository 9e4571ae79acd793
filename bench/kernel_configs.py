"""Time every launch config of each generated kernel of bench/kernels.py's cases (GPU): how we chose the defaults.

    python bench/kernel_configs.py [--only "layer_norm"] [--inductor-code DIR]

For each case it compiles with mininductor (persistent reductions, then forced looped ones: ``VARIANTS``), records
each kernel launch's arguments, then times the kernel alone under a wide set of configs (``XBLOCK``, ``RBLOCK``,
``num_warps``) with ``triton.testing.do_bench``, next to the config our launcher picked and to the whole
``torch.compile`` call. ``--inductor-code`` writes Inductor's generated code per case, to compare the configs it
chose. Results guide ``runtime.candidate_configs``; docs/benchmarks.md records what we changed.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from kernels import bench, cases, copy_bandwidth, nbytes
from triton.testing import do_bench

import mininductor
from mininductor import runtime

# the code-generation choices compared (each a mininductor.config.patch); the last two loop over rows longer than
# 1024, with a Welford variance (the row read twice by a norm) and with the two-pass one (three times)
VARIANTS = [{"eviction_policies": False}, {"eviction_policies": True},
            {"eviction_policies": True, "persistent_reduction_max": 1024, "welford_looped": True},
            {"eviction_policies": True, "persistent_reduction_max": 1024, "welford_looped": False}]


STAGES = [None]  # software-pipelining stages of looped kernels tried (None: Triton's default); --stages widens it


def wide_configs(kind: str, xnumel: int, rnumel: int) -> list[dict]:
    if kind == "per":
        r = runtime.next_power_of_2(rnumel)
        return [{"XBLOCK": xb, "RBLOCK": r, "num_warps": w} for xb in (1, 2, 4, 8, 16) for w in (2, 4, 8, 16, 32)
                if xb * r <= 32768 and w * 32 <= xb * r and xnumel % xb == 0]
    if kind == "red":
        return [{"XBLOCK": xb, "RBLOCK": rb, "num_warps": w, **({"num_stages": st} if st else {})}
                for xb in (1, 2, 4, 8) for rb in (512, 1024, 2048, 4096) for w in (4, 8, 16) for st in STAGES
                if xb * rb <= 16384 and xnumel % xb == 0 and rnumel % rb == 0]
    if kind == "tile":
        return [{"XBLOCK": a, "RBLOCK": b, "num_warps": w} for a in (16, 32, 64, 128, 256) for b in (16, 32, 64, 128)
                for w in (2, 4, 8) if 512 <= a * b <= 16384]
    return [{"XBLOCK": xb, "num_warps": w} for xb in (256, 512, 1024, 2048, 4096) for w in (2, 4, 8, 16)
            if xnumel % xb == 0]


def record_launches() -> list:
    """Patch ``KernelLauncher.run`` to remember each launcher and the arguments of its first launch."""
    seen = []
    original = runtime.KernelLauncher.run

    def run(self, *args):
        if all(s[0] is not self for s in seen):
            seen.append((self, args))
        return original(self, *args)

    runtime.KernelLauncher.run = run
    return seen


def sweep(name, fn, args, copy_gbs, knobs: dict) -> None:
    seen = record_launches()
    torch._dynamo.reset()
    with mininductor.config.patch(**knobs), torch.no_grad():
        mini = torch.compile(fn, backend=mininductor.compile_fx)
        expected = fn(*args)
        mini(*args)
        whole = bench(mini, args)
    b = nbytes(args, expected)
    print(f"\n== {name} ({knobs}): whole call {whole:.4f} ms, "
          f"{100 * b / whole / 1e6 / copy_gbs:.1f}% of copy")
    for launcher, largs in seen:
        rows = []
        for cfg in wide_configs(launcher.kind, launcher.xnumel, launcher.rnumel):
            try:
                rows.append((do_bench(lambda cfg=cfg, k=launcher, a=largs: k._launch(cfg, a), warmup=25, rep=100,
                                      return_mode="median"), cfg))
            except Exception as e:  # noqa: BLE001  (out of resources etc.)
                print(f"   {cfg}: {type(e).__name__}")
        rows.sort(key=lambda r: r[0])
        print(f"  {launcher.fn.__name__} [{launcher.kind}] x={launcher.xnumel} r={launcher.rnumel} "
              f"picked {launcher.config}")
        for ms, cfg in rows[:6]:
            print(f"     {ms:.4f} ms {100 * b / ms / 1e6 / copy_gbs:5.1f}%  {cfg}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=None)
    parser.add_argument("--inductor-code", default=None)
    parser.add_argument("--variants", default=None, help="indices into VARIANTS, e.g. 0,1")
    parser.add_argument("--stages", action="store_true", help="also try num_stages 1, 2, 3 on looped kernels")
    opts = parser.parse_args()
    if opts.stages:
        STAGES[:] = [None, 1, 2, 3]
    torch.backends.cuda.matmul.allow_tf32 = False
    copy_gbs = copy_bandwidth()
    original_run = runtime.KernelLauncher.run
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  copy bandwidth {copy_gbs:.0f} GB/s")
    for name, fn, args in cases():
        if opts.only and not any(o in name for o in opts.only.split(",")):
            continue
        torch._dynamo.reset()
        with torch.no_grad():
            inductor = torch.compile(fn)
            if opts.inductor_code:
                from torch._inductor.utils import run_and_get_code
                _, code = run_and_get_code(inductor, *args)
                os.makedirs(opts.inductor_code, exist_ok=True)
                with open(os.path.join(opts.inductor_code, name.replace(" ", "_") + ".py"), "w") as f:
                    f.write("\n\n# ----\n".join(code))
            inductor(*args)
            ms = bench(inductor, args)
        print(f"\n#### {name}: torch.compile {ms:.4f} ms "
              f"{100 * nbytes(args, fn(*args)) / ms / 1e6 / copy_gbs:.1f}% of copy")
        for k, knobs in enumerate(VARIANTS):
            if opts.variants and str(k) not in opts.variants.split(","):
                continue
            try:
                sweep(name, fn, args, copy_gbs, knobs)
            finally:
                runtime.KernelLauncher.run = original_run


if __name__ == "__main__":
    main()
