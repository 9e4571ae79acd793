"""Host time of one expert's boolean-mask subscripts in the tutorial MoE, piece by piece (GPU; issue #7).

    python bench/mask_subscripts.py [--calls 1000] [--rounds 7]

Per expert the tutorial MoE computes ``expert_mask = flat_indices == expert_idx`` (128 elements at the reference
size: batch 32, top-4) and subscripts two 128-element tensors by it.  The native stretch runs the two subscripts
through ``mask_subscript`` ([Note: shared nonzero] in minidynamo/native_stretch.py); under ``no_grad`` on a GPU
that is a count and two gathers ([Note: mask gather] in mininductor/mask_gather.py), otherwise ``nonzero`` and two
``index_select``s.  This times, under ``no_grad``: the mask alone; ``nonzero``; ``int(m.sum())``; our count, its
launch, the ``item`` it waits on and its allocation; one gather and its launch; ``index_select``; and the mask with
both subscripts through ``mask_subscript`` with the gather on and off.  Each number is the median over
``--rounds`` rounds of ``--calls`` calls with a synchronisation at the end of each round.  Used in
docs/benchmarks.md (thirty-first session, where an earlier form of this script ran as a device script).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minidynamo
from minidynamo.native_stretch import mask_subscript
from mininductor import mask_gather


def per_call_us(fn, calls: int, rounds: int) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/mask_subscripts.py times CUDA kernels: it needs a GPU")
    torch.manual_seed(0)
    flat_indices = torch.randint(0, 32, (128,), device="cuda")
    sample_indices = torch.arange(32, device="cuda")[:, None].expand(-1, 4).flatten()
    flat_probs = torch.rand(128, device="cuda")
    mask = flat_indices == 3
    n = mask_gather.count(mask)
    assert n == int(mask.sum()) and torch.equal(mask_gather.mask_gather(flat_probs, mask, n), flat_probs[mask])
    count_launcher = mask_gather._launcher("mask_count_kernel", 128, 1, None, True)
    gather_launcher = mask_gather._launcher("mask_gather_kernel", 128, 1, torch.float32, True)
    counted = torch.empty(1, dtype=torch.int32, device="cuda")
    gathered = torch.empty(n, device="cuda")
    rows = mask.nonzero().view(-1)

    def both_subscripts():
        m = flat_indices == 3
        mask_subscript(sample_indices, m)
        mask_subscript(flat_probs, m)

    cases = [
        ("the mask: flat_indices == k", lambda: flat_indices == 3),
        ("nonzero", lambda: mask.nonzero()),
        ("int(m.sum())", lambda: int(mask.sum())),
        ("count (mask_gather.count)", lambda: mask_gather.count(mask)),
        ("  its launch", lambda: count_launcher.run(mask, counted, 1, 128)),
        ("  its item", lambda: counted.item()),
        ("  its allocation", lambda: mask_gather._empty((1,), torch.int32, mask)),
        ("gather (mask_gather.mask_gather)", lambda: mask_gather.mask_gather(flat_probs, mask, n)),
        ("  its launch", lambda: gather_launcher.run(mask, flat_probs, gathered, 1, 128)),
        ("index_select", lambda: flat_probs.index_select(0, rows)),
        ("mask + both subscripts, gather", both_subscripts),
    ]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; us per call, median of {args.rounds} rounds")
    with torch.no_grad():
        for name, fn in cases:
            print(f"  {name:<40} {per_call_us(fn, args.calls, args.rounds):8.2f}", flush=True)
        minidynamo.config.mask_gather = False
        print(f"  {'mask + both subscripts, nonzero':<40} {per_call_us(both_subscripts, args.calls, args.rounds):8.2f}")
        minidynamo.config.mask_gather = True


if __name__ == "__main__":
    main()
