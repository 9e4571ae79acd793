"""Step 10 of the tour: ``torch.profiler`` over one compiled eval forward of the tutorial MoE.

It lists the model's ``record_function`` regions (``MoE_Routing``, ``MoE_Experts``) and the generated kernels by
name. On a GPU each Triton kernel is a device kernel launch the profiler records; on CPU it runs in Triton's
interpreter, a Python call the profiler does not see, so the step says what it saw instead and why.
"""

from __future__ import annotations

import torch

from minidynamo.examples.tour.console import quiet_warnings
from minidynamo.examples.tour.moe_compile import KERNEL_NAME, compiled_moe, kernel_names
from minidynamo.examples.tour.settings import DEVICE
from minidynamo.examples.tour.timing import sync


def profile_moe() -> None:
    """One compiled eval forward of the tutorial MoE under ``torch.profiler``: regions and kernels it saw."""
    from torch.profiler import ProfilerActivity, profile

    entry = compiled_moe("tutorial")
    entry.model.eval()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    with torch.no_grad(), quiet_warnings():
        entry.compiled(entry.x)  # warm: only the run itself is profiled
        with profile(activities=activities) as prof:
            entry.compiled(entry.x)
            sync()
    events = prof.key_averages()
    regions = [e for e in events if e.key.startswith("MoE_")]
    print("   record_function regions: " + (", ".join(f"{e.key} x{e.count}" for e in regions) or "none"))
    seen = [e.key for e in events if KERNEL_NAME.search(e.key)]
    print(f"   generated kernels seen by the profiler: {len(seen)}" + (f": {', '.join(seen[:4])}, ..." if seen else ""))
    if DEVICE == "cpu":
        _explain_cpu_profile(events, kernel_names(entry.compiled_graphs))


def _explain_cpu_profile(events, kernels: list[str]) -> None:
    busiest = sorted(events, key=lambda e: e.count, reverse=True)[:6]
    print("   most frequent events: " + ", ".join(f"{e.key} x{e.count}" for e in busiest))
    print("   On CPU each Triton kernel runs in Triton's interpreter: a Python call, not a device kernel launch,\n"
          "   so the profiler records only the aten ops around it (empty buffers, copies) and the extern mm.\n"
          f"   On a GPU the same run lists the kernels by name, e.g. {', '.join(kernels[:2]) or 'triton_...'}:\n"
          "   the name spells the fused ATen ops, and output_code.py maps each kernel to its source lines.")
