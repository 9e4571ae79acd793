"""Differential fuzzing of the few-row ``mm`` lowered as a reduction ([Note: a skinny mm as a reduction] in
mininductor/extern_lowering.py), against eager PyTorch.

    .venv/bin/python tests/fuzz/skinny_mm.py SEED COUNT            # skinny_mm="always": the lowering on the CPU
    .venv/bin/python tests/fuzz/skinny_mm.py SEED COUNT --never    # the same programs through the extern mm
    .venv/bin/python tests/fuzz/skinny_mm.py SEED COUNT --small    # small_mm="always": any rows, and bmm

Not collected by pytest; a developer's tool (about 0.3 s a program on a CPU). ``tests/fuzz/lowering.py --matmul``
rarely makes an fp32 matmul of at most four rows (150 of its programs reached this lowering 0 times), so each
program here is one: ``f(a) @ b`` then ``g``, with 0-4 rows, K of 0 to 130, fp32 or fp64, either operand
transposed, an ``inf``/NaN/0 written into ``a`` one time in five, ``f`` one of none/GELU/exp/``2a``/a row gather
(the producers the reduction fuses or realises), ``g`` one of none/GELU/ReLU/+bias/``addmm``/a row sum/a second
matmul after GELU (the consumers), and gradients of every input two times in five. Prints each mismatch with its
seed and case, then the counts and how many matmuls took the reduction. ``--small`` fuzzes [Note: a small matmul
as a reduction] instead: up to 40 rows, and a batch of 1-3 (``bmm``, and ``baddbmm`` for the ``addmm`` consumer)
one time in three.

Known differences: eager's vectorised CPU ``gelu(inf)`` is NaN where ours is ``inf`` (as in
tests/fuzz/lowering.py); with an injected ``inf`` before or after a GELU, such seeds differ with ``--never`` too.
"""
from __future__ import annotations

import os
import random
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import minidynamo
from mininductor import config, extern_lowering, metrics

PRODUCERS = ["none", "gelu", "exp", "mul2", "gather"]
CONSUMERS = ["none", "gelu", "relu", "bias", "addmm", "sum", "mm2"]


def program(seed: int) -> tuple[list[torch.Tensor], object, bool, str]:
    """The inputs, the function, whether to check gradients, and the case's description."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    small = "--small" in sys.argv
    m = rng.choice([0, 1, 5, 17, 40] if small else [0, 1, 2, 3, 4])
    k, n = rng.choice([0, 1, 3, 16, 33, 130]), rng.choice([1, 2, 7, 32, 65])
    batch = (rng.choice([1, 3]),) if small and rng.random() < 1 / 3 else ()
    dtype = rng.choice([torch.float32, torch.float64])
    grad = rng.random() < 0.4
    a = torch.randn(*batch, m, k, dtype=dtype) if rng.random() < 0.7 else \
        torch.randn(*batch, k, m, dtype=dtype).transpose(-1, -2)
    b = torch.randn(*batch, k, n, dtype=dtype) if rng.random() < 0.5 else \
        torch.randn(*batch, n, k, dtype=dtype).transpose(-1, -2)
    special = rng.random() < 0.2 and k > 0
    if special:
        a = a.clone()
        a[..., rng.randrange(m) if m else 0:, rng.randrange(k)] = \
            rng.choice([float("inf"), -float("inf"), float("nan"), 0.0])
    bias, c = torch.randn(n, dtype=dtype), torch.randn(n, 5, dtype=dtype)
    rows = torch.randint(0, max(m, 1), (m,))
    before, after = rng.choice(PRODUCERS[:-1] if batch else PRODUCERS), rng.choice(CONSUMERS)

    def f(a, b, bias, c):
        x = {"none": lambda: a, "gelu": lambda: F.gelu(a), "exp": lambda: a.exp(), "mul2": lambda: a * 2,
             "gather": lambda: a[rows]}[before]()
        if after == "addmm":
            return torch.baddbmm(bias, x, b) if batch else torch.addmm(bias, x, b)
        y = x @ b
        return {"none": lambda: y, "gelu": lambda: F.gelu(y), "relu": lambda: y.relu(), "bias": lambda: y + bias,
                "sum": lambda: y.sum(-1), "mm2": lambda: F.gelu(y + bias) @ c}[after]()
    case = f"{'x'.join(map(str, batch)) + ' batches of ' if batch else ''}{m}x{k} @ {k}x{n} {str(dtype)[6:]} {before} -> {after}{' grad' if grad else ''}" + \
        (" (inf/NaN/0 in a)" if special else "")
    return [a, b, bias, c], f, grad, case


def check(seed: int) -> str | None:
    args, f, grad, case = program(seed)
    ours = [t.detach().clone().requires_grad_(grad) for t in args]
    theirs = [t.detach().clone().requires_grad_(grad) for t in args]
    minidynamo.reset()
    metrics.reset()
    try:
        out, expected = minidynamo.minicompile(f)(*ours), f(*theirs)
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4, equal_nan=True)
        if grad and expected.numel():
            weights = torch.randn_like(expected)
            out.backward(weights)
            expected.backward(weights)
            for mine, eager in zip(ours, theirs):
                torch.testing.assert_close(mine.grad, eager.grad, atol=1e-3, rtol=1e-3, equal_nan=True)
    except Exception as e:  # noqa: BLE001 - a mismatch or a failure: printed with its seed
        return f"seed {seed}: {case}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return None


def main() -> None:
    start, count = int(sys.argv[1]), int(sys.argv[2])
    config.skinny_mm = "never" if "--never" in sys.argv else "always"
    config.small_mm = "always" if "--small" in sys.argv else "never"
    config.unfused_addmm = "always"
    warnings.simplefilter("ignore")
    lowered = [0]
    original = extern_lowering.mm_as_reduction

    def counted(a, b):
        lowered[0] += 1
        return original(a, b)
    extern_lowering.mm_as_reduction = counted
    bad = 0
    for seed in range(start, start + count):
        problem = check(seed)
        if problem:
            bad += 1
            print(problem, flush=True)
    print({"programs": count, "bad": bad, "matmuls lowered as reductions": lowered[0]})


if __name__ == "__main__":
    main()
