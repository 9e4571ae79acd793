"""Host time of one compiled call of the compile-friendly MoE, layer by layer (GPU; issue #7).

    python bench/host_breakdown.py [--size small|reference] [--calls 40]

The friendly MoE's forward is one graph: on the GPU its kernels take the same time under minicompile and
torch.compile (bench/profile_moe.py), so a gap between the two is host time.  At ``--size small`` (the default)
the kernels are tiny and a call's wall time *is* its host time.  This prints, per call, the host time of

* eager, torch.compile and minicompile (the whole call: frame, guards, AOT wrapper, graph);
* minicompile's compiled graph alone (``CompiledGraph``), its generated ``call``, and that ``call`` with every
  Triton launch made a no-op (what is left: cuBLAS/ATen calls, allocations, views);
* one launch, piece by piece (the launch generated for the kernel, the general ``KernelLauncher.run`` it skips,
  the specialization key, ``DirectLauncher.launch``, the static launcher through torch's C++ launch call and
  through our ctypes call, the ``cuLaunchKernel`` call alone), beside eager's ``torch.add(out=)`` and
  ``torch.addmm``.

Each number is the best of ``--rounds`` rounds of ``--calls`` calls, timed without synchronising (a round is
short enough not to fill the launch queue) and synchronised between rounds.  Used in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import copy
import gc
import importlib
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
from minidynamo.examples.moe import friendly_from_tutorial, make_moe, make_moe_input

compile_fx = importlib.import_module("mininductor.compile_fx")  # the module: the package exports the function
runtime = importlib.import_module("mininductor.runtime")
direct_launch = importlib.import_module("mininductor.direct_launch")


def host_us(fn, calls: int, rounds: int) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    gc.collect()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def compiled_graph_of(compiled, x):
    """The ``CompiledGraph`` one call of ``compiled`` runs, and the arguments it passes."""
    seen = []
    original = compile_fx.CompiledGraph.__call__

    def spy(self, *args):
        seen.append((self, args))
        return original(self, *args)
    compile_fx.CompiledGraph.__call__ = spy
    try:
        compiled(x)
    finally:
        compile_fx.CompiledGraph.__call__ = original
    return seen[-1]


def launch_args_of(graph, graph_args, launcher) -> tuple:
    """The arguments ``graph``'s call hands ``launcher`` (its generated launch takes exactly those)."""
    fast, seen = launcher.run, []
    launcher.run = lambda *a: (seen.append(a), fast(*a))
    try:
        graph.call(list(graph_args))
    finally:
        launcher.run = fast
    return seen[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small", choices=["small", "reference"])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    model = friendly_from_tutorial(make_moe("tutorial", args.size, seed=0)).cuda().eval()
    x = make_moe_input(args.size, batch_size=32, seed=1).cuda()
    mini, tc = minidynamo.minicompile(copy.deepcopy(model)), torch.compile(copy.deepcopy(model))
    rows = {}
    time_it = lambda fn, calls=args.calls: host_us(fn, calls, args.rounds)
    with torch.no_grad():
        tc(x)
        graph, graph_args = compiled_graph_of(mini, x)
        rows["eager"] = time_it(lambda: model(x))
        rows["torch.compile"] = time_it(lambda: tc(x))
        rows["minicompile"] = time_it(lambda: mini(x))
        rows["  its CompiledGraph"] = time_it(lambda: graph(*graph_args))
        rows["  its call(args)"] = time_it(lambda: graph.call(list(graph_args)))
        launchers = {n: v for n, v in vars(graph.module).items() if isinstance(v, runtime.KernelLauncher)}
        run = runtime.KernelLauncher.run
        generated = {n: vars(v).pop("run") for n, v in launchers.items() if "run" in vars(v)}
        runtime.KernelLauncher.run = lambda self, *a: None
        try:
            rows["  its call(args), launches as no-ops"] = time_it(lambda: graph.call(list(graph_args)))
        finally:
            runtime.KernelLauncher.run = run
            for n, fast in generated.items():
                launchers[n].run = fast
        print(f"one call: {len(launchers)} Triton kernels; guards, frame and AOT wrapper outside CompiledGraph")
        name, launcher = next((n, v) for n, v in launchers.items() if v.kind == "poi" and "run" in vars(v))
        direct = next(iter(launcher._direct.values()))
        launch_args = launch_args_of(graph, graph_args, launcher)
        a = torch.randn(8, 4, 64, device="cuda")
        b, c = torch.empty_like(a), torch.randn(32, 32, device="cuda")
        bound, stream = launch_args + direct.constexprs, direct.stream_of(direct.device)
        many = 200
        rows[f"one launch ({name}): its generated launch"] = time_it(lambda: launcher.run(*launch_args), many)
        rows["  KernelLauncher.run (the general path)"] = \
            time_it(lambda: runtime.KernelLauncher.run(launcher, *launch_args), many)
        rows["  specialization_key"] = time_it(lambda: direct_launch.specialization_key(launch_args), many)
        rows["  DirectLauncher.launch"] = time_it(lambda: direct.launch(launch_args, direct.grid), many)
        static = direct.static
        if static is not None:
            via_torch = static.torch_launch
            rows["  static launcher's launch (torch's C++ call)" if via_torch else "  static launcher's launch"] = \
                time_it(lambda: static.launch(bound, direct.grid, stream), many)
            if via_torch is not None:  # the same launch through our ctypes call ([Note: the launch call])
                static.torch_launch = None
                try:
                    rows["  static launcher's launch (ctypes call)"] = \
                        time_it(lambda: static.launch(bound, direct.grid, stream), many)
                finally:
                    static.torch_launch = via_torch
            rows["  cuLaunchKernel through ctypes, alone"] = time_it(lambda: static._launch(direct.grid, stream), many)
        rows["eager torch.add(a, 1, out=b)"] = time_it(lambda: torch.add(a, 1, out=b), many)
        rows["eager torch.addmm (32x32)"] = time_it(lambda: torch.addmm(c[0], c, c), many)
        rows["torch.empty_strided"] = time_it(lambda: torch.empty_strided((32, 32), (32, 1), device="cuda"), many)
        rows["runtime.reinterpret_tensor"] = time_it(lambda: runtime.reinterpret_tensor(c, (16, 64), (64, 1), 0), many)
    print(f"host time per call, {torch.cuda.get_device_name()}, torch {torch.__version__}, size {args.size}:")
    for label, us in rows.items():
        print(f"  {label:48s} {us:8.1f} us")


if __name__ == "__main__":
    main()
