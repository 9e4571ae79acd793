"""Step 9 of the tour: the MoE timing table, eager / torch.compile / minicompile x {eval forward, train step}.

Each cell is the median wall-clock ms of several calls, after warm-up calls that are not counted (compiling,
autotuning, caches); a row's calls are timed in rounds that take the three compilers in a shuffled order.
minicompile's cells reuse the wrappers steps 7 and 8 compiled and warmed up, so they hold no compile time.
``MINICOMPILE_DEMO_QUICK=1`` skips torch.compile (30+ s per model on CPU). The footnotes under the table say what
the numbers mean on CPU, where minicompile's kernels run in Triton's interpreter.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from minidynamo.examples.tour.console import clip, progress, quiet_warnings
from minidynamo.examples.tour.moe_compile import MOE, CompiledMoE
from minidynamo.examples.tour.settings import DEVICE, MOE_SIZE, QUICK

TRAIN_WARMUP = 20 if DEVICE == "cuda" else 2  # train steps before timing: see _time_row
ROUNDS = 5 if DEVICE == "cuda" else 1  # each row's timed calls, in rounds over the three compilers: see _time_row
COMPILERS = ("eager", "torch.compile", "minicompile")


def time_moe() -> None:
    """Median ms of an eval forward and of a train step (AdamW), eager / torch.compile / minicompile."""
    if not MOE:
        raise RuntimeError("no MoE was compiled (steps 7 and 8)")
    fwd_iters, train_iters = (20, 10) if DEVICE == "cuda" else (5, 3)
    with _one_cpu_thread():
        rows = [(kind, phase, _time_row(kind, phase, fwd_iters if phase == "eval forward" else train_iters))
                for kind in MOE for phase in ("eval forward", "train step")]
    print(f"\n   MoE timing table: ms per call, median of {fwd_iters} forwards / {train_iters} train steps "
          f"({MOE_SIZE} size, {DEVICE})")
    print(f"   {'model':<10}{'phase':<14}{'eager':>10}{'torch.compile':>15}{'minicompile':>13}")
    for kind, phase, cells in rows:
        print(f"   {kind:<10}{phase:<14}{cells[0]:>10}{cells[1]:>15}{cells[2]:>13}")
    _print_footnotes()


def _print_footnotes() -> None:
    if DEVICE == "cpu":
        print("   * on CPU minicompile's kernels run in Triton's interpreter (TRITON_INTERPRET=1: each kernel is\n"
              "     Python over NumPy, program by program), so its column measures the interpreter, not the\n"
              "     generated code; run on a GPU to compare compilers (bench/moe.py, docs/benchmarks.md).")
        print("   * CPU timings use one intra-op thread: on a shared machine, spinning OpenMP threads made eager\n"
              "     times swing by 100x from run to run.")
    print(f"   * each row times the three compilers in {ROUNDS} round(s), in a shuffled order each round, after\n"
          f"     warm-up calls; train steps after {TRAIN_WARMUP} warm-up steps for every compiler: each step\n"
          "     changes the weights, so the routing, and the tutorial MoE meets (expert, case) pairs it has not\n"
          "     compiled yet (one row, or more rows than its capacity) for a while; each costs minicompile a\n"
          "     translation.")
    if QUICK:
        print("   * torch.compile skipped: MINICOMPILE_DEMO_QUICK is set (unset it for the full table).")


def _time_row(kind: str, phase: str, iters: int) -> list[str]:
    """One row's three cells.  Each compiler is warmed up first (compiles, autotuning; ``TRAIN_WARMUP`` steps for a
    train step), then called ``iters`` times in ``ROUNDS`` rounds, each round timing all three in a shuffled order:
    a host that slows down for a while (the pool of compile workers torch.compile starts, still busy after its
    first call) then slows the three alike, not whichever was timed at that moment."""
    entry = MOE[kind]
    train = phase != "eval forward"
    entry.model.train(train)  # once per row, outside the timed calls: see _forward
    calls: dict[str, Callable[[], Any]] = {}
    cells = {"torch.compile": "skipped"} if QUICK else {}
    for compiler in COMPILERS:
        if compiler in cells:
            continue
        try:
            fn = _compiled_for(entry, compiler)
            with progress(f"warming up {compiler} {kind} MoE {phase}", quiet=compiler == "eager"), quiet_warnings():
                call = _train_step(fn, entry) if train else _forward(fn, entry)
                for _ in range(TRAIN_WARMUP if train else 2):
                    call()
            calls[compiler] = call
        except Exception as e:  # noqa: BLE001 -- one failing cell must not lose the table
            print(f"     {compiler} {kind} {phase} failed: {type(e).__name__}: {clip(str(e), 100)}")
            cells[compiler] = "failed"
    times: dict[str, list[float]] = {compiler: [] for compiler in calls}
    order = random.Random(0)
    with quiet_warnings():
        for _ in range(ROUNDS):
            for compiler in order.sample(list(calls), len(calls)):
                if compiler in cells:  # failed in an earlier round
                    continue
                try:
                    times[compiler] += [_timed_ms(calls[compiler]) for _ in range(max(1, iters // ROUNDS))]
                except Exception as e:  # noqa: BLE001
                    print(f"     {compiler} {kind} {phase} failed: {type(e).__name__}: {clip(str(e), 100)}")
                    cells[compiler] = "failed"
    for compiler, ms in times.items():
        cells.setdefault(compiler, f"{statistics.median(ms):.2f}")
    return [cells[compiler] for compiler in COMPILERS]


@contextlib.contextmanager
def _one_cpu_thread():
    """On CPU, time with ``torch.set_num_threads(1)`` (see the footnote); on a GPU change nothing."""
    prior = torch.get_num_threads()
    if DEVICE == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prior)


def _compiled_for(entry: CompiledMoE, compiler: str) -> Callable:
    if compiler == "eager":
        return entry.model
    if compiler == "minicompile":
        return entry.compiled  # compiled and warmed up by steps 7/8: no compile time in its cells
    if entry.torch_compiled is None:
        entry.torch_compiled = torch.compile(entry.model)  # one wrapper per model: eval and train share it
    return entry.torch_compiled


def _forward(fn: Callable, entry: CompiledMoE) -> Callable[[], Any]:
    """One eval forward under ``no_grad``.  The model is put in eval mode by ``_time_row``, once per row: ``eval()``
    walks every submodule through ``nn.Module.__setattr__`` (the reference tutorial MoE has 163), which took a
    sizeable part of a compiled forward's time when it was called inside each timed call."""
    def forward():
        with torch.no_grad():
            return fn(entry.x)

    return forward


def _train_step(fn: Callable, entry: CompiledMoE) -> Callable[[], Any]:
    """One step of ``moe.train_steps``'s loop on a fixed batch: forward, MSE + aux loss, backward, clip, AdamW."""
    opt = torch.optim.AdamW(entry.model.parameters(), lr=5e-4)
    y = torch.randn(entry.x.shape[0], entry.model.gate.in_features, device=DEVICE)  # both MoEs: out == in dim

    def step():
        outputs, aux = fn(entry.x)
        loss = torch.nn.functional.mse_loss(outputs, y) + 1e-2 * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(entry.model.parameters()), 1.0)
        opt.step()

    return step


def _timed_ms(fn: Callable[[], Any]) -> float:
    """One call's wall-clock ms, the device idle before it and waited for after it."""
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return (time.perf_counter() - t0) * 1e3


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # GPU work is asynchronous: wait for it, or we time the launches only
