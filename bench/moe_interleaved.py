"""The tutorial MoE's forward and train step, eager / torch.compile / minicompile timed in turn (GPU).

    python bench/moe_interleaved.py [--rounds 5] [--calls 20] [--steps 10] [--no-torch-compile] [--reduce-overhead]
                                    [--batch N]
                                    [--launcher-ab | --generated-launch-ab | --mask-gather-ab | --unfused-addmm-ab |
                                     --skinny-mm-ab | --fuse-scatters-ab | --equality-counts-ab | --pair-ab |
                                     --unmade-masks-ab]

Shared GPU hosts drift by 2x within minutes (docs/benchmarks.md), so a table of one pass per compiler compares
hosts as much as compilers. Here every round times each compiler once, back to back in a shuffled order, and each
compiler's median over the rounds is reported: ratios taken this way are what the docs compare. Wall time per call with a sync at
the end of each batch of calls (the tutorial MoE syncs inside every forward anyway: one ``nonzero`` per expert).

``--launcher-ab`` adds minicompile with Triton's launcher beside our own (``static_cuda_launcher.py``, the default) in
the same rounds: the kernels' direct launchers are dropped and rebuilt under each setting before its timing;
``--generated-launch-ab`` does the same with and without the launch written out per kernel ([Note: a generated
launch] in mininductor/direct_launch.py); ``--mask-gather-ab`` with and without the native stretch's mask gather
([Note: mask gather] in mininductor/mask_gather.py; it only acts under ``no_grad``, so only the forward differs);
``--unfused-addmm-ab`` adds a second minicompile of the model compiled with ``addmm`` kept whole ([Note: a bias
added by its consumer] in mininductor/extern_lowering.py; a config knob, so its graphs are compiles of their own);
``--skinny-mm-ab`` likewise with the few-row ``mm``s kept as cuBLAS calls ([Note: a skinny mm as a reduction]);
``--fuse-scatters-ab`` likewise with each ``index_add_`` a kernel of its own ([Note: a scatter ends its producer's
kernel] in mininductor/scheduler.py); ``--equality-counts-ab`` the same compiled model with each expert's mask
counted on its own, not read from one table of ``flat_indices``'s values ([Note: equality masks counted once] in
minidynamo/native_stretch.py; under ``no_grad`` only, so only the forward differs); ``--pair-ab`` the same compiled
model with an expert's two mask subscripts gathered by a launch each, not both in one ([Note: both subscripts in
one launch]; ``mask_gather.pairs`` refused for the second; forward only too); ``--unmade-masks-ab`` adds a second
minicompile of the model compiled with every expert's mask made by its graph ([Note: masks the graph does not
make]; a translation-time knob, so a compile of its own; forward only).
The train step is the document's: forward with the aux loss, MSE, backward, grad clipping, AdamW, after warm-up
steps; gradients of the first step are checked against eager first. ``--reduce-overhead`` adds both compilers in
``mode="reduce-overhead"`` to the forward's rounds (CUDA graphs; not to the train step).
"""
from __future__ import annotations

import argparse
import copy
import os
import random
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
from minidynamo.examples.moe import make_moe, make_moe_input
from mininductor import config, mask_gather, runtime


def use_launchers(static: bool, generated: bool = True) -> None:
    """Switch launchers for kernels already compiled: drop every direct launcher (and the launch generated for it),
    so the next call rebuilds it."""
    config.static_cuda_launcher, config.generated_launch = static, generated
    for name, module in list(sys.modules.items()):
        if name.startswith("mininductor_cache_"):
            for obj in vars(module).values():
                for launcher in getattr(obj, "candidates", [obj]):
                    if isinstance(launcher, runtime.KernelLauncher):
                        launcher._direct.clear()
                        vars(launcher).pop("run", None)


def wall_ms(fn, calls: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e3


def train_step(model, x, y):
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=5e-4)

    def step():
        out, aux = model(x)
        loss = torch.nn.functional.mse_loss(out, y) + 1e-2 * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    return step


def interleave(cases: dict, rounds: int, calls: int) -> dict[str, float]:
    """``{name: median ms}``: each round times every case once, in an order shuffled per round (seeded: a fixed
    order favoured or slowed a case by its position, up to 15% in the thirty-fifth session). A case is ``(fn,
    before)``; ``before`` (or None) runs ahead of each timing, untimed."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    order = random.Random(0)
    for _ in range(rounds):
        for name in order.sample(list(cases), len(cases)):
            fn, before = cases[name]
            if before is not None:
                before()
            fn()
            times[name].append(wall_ms(fn, calls))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    # one A/B at a time: each sets the knobs of "minicompile" before its rounds, and a second would overwrite them
    ab = parser.add_mutually_exclusive_group()
    ab.add_argument("--launcher-ab", action="store_true")
    ab.add_argument("--generated-launch-ab", action="store_true")
    ab.add_argument("--mask-gather-ab", action="store_true")
    ab.add_argument("--unfused-addmm-ab", action="store_true")
    ab.add_argument("--skinny-mm-ab", action="store_true")
    ab.add_argument("--fuse-scatters-ab", action="store_true")
    ab.add_argument("--equality-counts-ab", action="store_true")
    ab.add_argument("--pair-ab", action="store_true")
    ab.add_argument("--unmade-masks-ab", action="store_true")
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--batch", type=int, default=None, help="default: the reference size's 32")
    parser.add_argument("--reduce-overhead", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    base = make_moe("tutorial", "reference", seed=0).cuda()
    x = make_moe_input("reference", batch_size=args.batch, seed=1).cuda()
    y = torch.randn(x.shape[0], 1024, device="cuda")
    models = {"eager": copy.deepcopy(base), "minicompile": minidynamo.minicompile(copy.deepcopy(base))}
    if not args.no_torch_compile:
        models["torch.compile"] = torch.compile(copy.deepcopy(base))
    if args.reduce_overhead:
        models["minicompile reduce-overhead"] = minidynamo.minicompile(copy.deepcopy(base), mode="reduce-overhead")
        if not args.no_torch_compile:
            models["torch.compile reduce-overhead"] = torch.compile(copy.deepcopy(base), mode="reduce-overhead")
    forward_only = {name for name in models if name.endswith("reduce-overhead")}
    before = {name: None for name in models}
    if args.launcher_ab:  # the same compiled model, launched each way
        models["minicompile, Triton's launcher"] = models["minicompile"]
        before["minicompile"] = lambda: use_launchers(True)
        before["minicompile, Triton's launcher"] = lambda: use_launchers(False)
    if args.generated_launch_ab:  # the same compiled model, with and without launches generated per kernel
        models["minicompile, no generated launch"] = models["minicompile"]
        before["minicompile"] = lambda: use_launchers(True)
        before["minicompile, no generated launch"] = lambda: use_launchers(True, generated=False)
    if args.mask_gather_ab:  # the same compiled model, the stretch's subscripts gathered each way
        models["minicompile, no mask gather"] = models["minicompile"]
        before["minicompile"] = lambda: setattr(minidynamo.config, "mask_gather", True)
        before["minicompile, no mask gather"] = lambda: setattr(minidynamo.config, "mask_gather", False)
    if args.equality_counts_ab:  # the same compiled model, each mask counted on its own
        models["minicompile, every mask counted"] = models["minicompile"]
        before["minicompile"] = lambda: setattr(minidynamo.config, "equality_counts", True)
        before["minicompile, every mask counted"] = lambda: setattr(minidynamo.config, "equality_counts", False)
    if args.pair_ab:  # the same compiled model, each mask subscript gathered by a launch of its own
        pairs = mask_gather.pairs
        models["minicompile, subscripts apart"] = models["minicompile"]
        before["minicompile"] = lambda: setattr(mask_gather, "pairs", pairs)
        before["minicompile, subscripts apart"] = lambda: setattr(mask_gather, "pairs", lambda a, b, m: False)
    if args.unfused_addmm_ab:  # another compile of the model, whose addmm stays one extern call
        models["minicompile, addmm kept"] = minidynamo.minicompile(copy.deepcopy(base))
        before["minicompile"] = lambda: setattr(config, "unfused_addmm", "gpu")
        before["minicompile, addmm kept"] = lambda: setattr(config, "unfused_addmm", "never")
    if args.fuse_scatters_ab:  # another compile of the model, whose index_add_ runs as a kernel of its own
        models["minicompile, scatter alone"] = minidynamo.minicompile(copy.deepcopy(base))
        before["minicompile"] = lambda: setattr(config, "fuse_scatters", True)
        before["minicompile, scatter alone"] = lambda: setattr(config, "fuse_scatters", False)
    if args.unmade_masks_ab:  # another compile of the model, whose graphs make every expert's mask
        models["minicompile, masks made"] = minidynamo.minicompile(copy.deepcopy(base))
        before["minicompile"] = lambda: setattr(minidynamo.config, "unmade_masks", True)
        before["minicompile, masks made"] = lambda: setattr(minidynamo.config, "unmade_masks", False)
    if args.skinny_mm_ab:  # another compile of the model, whose few-row mm stay cuBLAS calls
        models["minicompile, cuBLAS mm"] = minidynamo.minicompile(copy.deepcopy(base))
        before["minicompile"] = lambda: setattr(config, "skinny_mm", "gpu")
        before["minicompile, cuBLAS mm"] = lambda: setattr(config, "skinny_mm", "never")

    with torch.no_grad():
        for model in models.values():
            model.eval()
        expected = models["eager"](x)[0]
        for name, model in models.items():
            if before[name] is not None:
                before[name]()
            diff = (model(x)[0] - expected).abs().max().item()
            print(f"forward {name:>32}: max abs diff vs eager {diff:.2e}", flush=True)
        forward = interleave({n: (lambda m=m: m(x), before[n]) for n, m in models.items()}, args.rounds, args.calls)

    grads = {}
    steps = {}
    for name, model in models.items():
        if name in forward_only:
            continue
        model.train()
        if before[name] is not None:
            before[name]()
        if name not in steps and model not in (models[n] for n in steps):  # an A/B alias trains once
            out, aux = model(x)
            (torch.nn.functional.mse_loss(out, y) + 1e-2 * aux).backward()
            grads[name] = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
            steps[name] = train_step(model, x, y)
            for _ in range(20):  # the routing changes as the weights do: let every compiler meet its cases first
                steps[name]()
    for name, g in grads.items():  # an expert no sample chose has no gradient, in eager and compiled alike
        pairs = list(zip(g, grads["eager"]))
        worst = max(((a - b).abs().max().item() for a, b in pairs if a is not None and b is not None), default=0.0)
        missing = sum((a is None) != (b is None) for a, b in pairs)
        print(f"first-step gradients {name:>20}: max abs diff vs eager {worst:.2e}, "
              f"{missing} gradients present in one but not the other", flush=True)
    step_cases = {n: (steps.get(n, steps["minicompile"]), before[n]) for n in models if n not in forward_only}
    train = interleave(step_cases, max(3, args.rounds - 2), args.steps)

    device = torch.cuda.get_device_name()
    print(f"\ntutorial MoE, reference size, batch {x.shape[0]}, fp32, {device}, torch {torch.__version__}; "
          f"median of {args.rounds} interleaved rounds")
    print(f"| {'compiler':<32} | forward ms | train step ms |\n|---|---|---|")
    for name in models:
        step = f"{train[name]:13.3f}" if name in train else f"{'':13}"
        print(f"| {name:<32} | {forward[name]:10.3f} | {step} |")


if __name__ == "__main__":
    main()
