"""``async_compile``: compile a graph's Triton kernels in parallel, before its first call (mirrors
``torch/_inductor/async_compile.py``).

In:  a loaded ``output_code`` module of a CUDA graph, and each kernel's launch signature -- what its ``run`` will be
called with, pointers written as their dtypes::

    {"triton_per_fused_amax_div_exp_sub_sum_0": [torch.float32, torch.float32, 32, 32]}

Out: nothing to use, but every ``@triton.jit`` function of the module has compiled the variants its first launch
needs -- one per candidate config, so an autotuned reduction times its configs without compiling them one by one.

Why: on the GPU a kernel's first launch compiles it (Triton -> TTIR -> TTGIR -> LLVM -> PTX -> cubin, a tenth of a
second or more), and our launcher compiles one variant after another, in the order ``call`` meets them.  The tutorial
MoE's first call compiled 62 variants that way (H200: 4 s of 12.5 s).  Compiled side by side, they take about as
long as the slowest few.

How: ``fn.warmup(*signature, grid=..., **config)`` runs Triton's launch path without launching: it binds the
arguments, computes the specialization key, compiles and stores the kernel in ``fn``'s cache; then the worker
loads the binary on the device (for ``static_cuda_launcher``, else Triton's ``_init_handles``), which the first
launch would otherwise do.  A dtype stands for a
tensor (Triton wraps it in a ``MockTensor``: a null pointer, so 16-byte aligned, as the caching allocator's tensors
are), ints are the real sizes, so the key is the one the real launch computes and that launch finds the kernel
compiled.  Should a launch differ (a misaligned view), it compiles its own variant, as before: results cannot change.

Threads by default, processes if asked: part of a compile runs in MLIR/LLVM and in ``ptxas`` (a subprocess),
outside the GIL, so a thread pool overlaps them with no pickling of kernels -- up to about 2.2x, since the other
half holds the GIL.  Upstream Inductor uses a pool of worker processes, which also overlaps the Python parts; ours
is ``compile_worker/``: with ``config.compile_workers`` > 0 each thread hands its variant to a worker, then finds it
in Triton's disk cache (off by default: the workers start too slowly to help a first call; see there).
``config.compile_threads`` sets the thread pool's size (1: compile at first launch, as before).  A symbolic-size
kernel is compiled for the sizes of the call it was traced for.  ``wait=False`` only starts the compiles: the
translator does that for the mask-gather kernels it knows a native stretch will launch ([Note: prefetched mask
kernels] in mask_gather.py).  Left out: the CPU, where Triton's interpreter has nothing to compile.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import sympy
import torch

from . import compile_worker, config, static_cuda_launcher
from .compile_worker import CompileJob
from .indexing import is_symbolic

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def compile_threads() -> int:
    """How many kernels compile at once (``config.compile_threads``; None: up to 8, one per core)."""
    if config.compile_threads is not None:
        return max(1, int(config.compile_threads))
    return max(1, min(8, os.cpu_count() or 1))


def pool() -> ThreadPoolExecutor:
    """The process-wide compile pool, created on first use."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(compile_threads(), thread_name_prefix="mininductor-compile")
        return _POOL


def kernel_signature(kernel: Any, graph: Any) -> list | None:
    """What ``kernel``'s launcher is called with, as ``warmup`` takes it: each buffer as its dtype, then the
    sizes.  A symbolic kernel's sizes are those of the call it was traced for (``graph.size_hints``): the variant
    Triton compiles for them serves every size with the same specialization key (divisible by 16 or not, equal
    to 1 or not); another size compiles its own variant at launch.  None where a size has no hint."""
    numels = [kernel.numel] + ([kernel.rnumel] if kernel.kind != "poi" else [])
    sizes = sorted(kernel.size_vars, key=str) + numels
    hints = getattr(graph, "size_hints", None) or {}
    try:
        ints = [int(sympy.sympify(n).subs(hints)) if is_symbolic(n) else int(n) for n in sizes]
    except (TypeError, ValueError):  # a symbol without a hint
        return None
    scalars = getattr(graph, "zero_dim_cpu_tensors", ())  # passed by value: a sample value of their type
    return [(0.5 if graph.get_buffer(name).get_dtype().is_floating_point else 2) if name in scalars
            else graph.get_buffer(name).get_dtype() for name in kernel.call_args()] + ints


def precompile(module: Any, signatures: dict[str, list], wait: bool = True,
               device: int | None = None) -> list[Future]:
    """Compile every candidate config of every kernel in ``signatures`` (name -> ``kernel_signature``) on the
    pool, for CUDA device ``device`` (an index; None: the workers' current one); with ``wait``, return once all
    are done.  A variant that fails to compile is left to its launch, which reports the error (or, when
    autotuning, skips that config) as before.  Where worker processes run (compile_worker/), each thread first
    hands its variant to one of them."""
    jobs = list(_jobs(module, signatures))
    if not jobs:
        return []
    _prepare(launcher for launcher, _, _ in jobs)
    remote = _remote_jobs(module, jobs, device)
    futures = [pool().submit(_compile_variant, launcher, signature, cfg, device, job)
               for (launcher, signature, cfg), job in zip(jobs, remote)]
    if wait:
        for f in futures:
            f.exception()  # wait; errors are the launch's to report
    return futures


def _jobs(module: Any, signatures: dict[str, list]) -> Iterable[tuple[Any, list, dict]]:
    for name, signature in signatures.items():
        launcher = getattr(module, name, None)
        if signature is None or launcher is None or getattr(launcher, "interpret", True):
            continue
        for candidate in getattr(launcher, "candidates", [launcher]):  # a ReductionKindChoice: both
            for cfg in candidate.configs:
                yield candidate, signature, cfg


def _remote_jobs(module: Any, jobs: list, device: int | None) -> list[CompileJob | None]:
    """What each variant's job for a worker process is; all None where no workers run or the module has no file."""
    path = getattr(module, "__file__", None)
    if compile_worker.ready_pool() is None or path is None:
        return [None] * len(jobs)
    try:
        from triton.runtime import driver
        index = device if device is not None else driver.active.get_current_device()
        target = driver.active.get_current_target()
        props = dict(driver.active.utils.get_device_properties(index))
    except Exception:  # noqa: BLE001 - an unknown driver: compile in-process
        return [None] * len(jobs)
    return [CompileJob(path, module.__name__, launcher.fn.__name__,
                       [str(a) if isinstance(a, torch.dtype) else a for a in signature],
                       cfg, (target.backend, target.arch, target.warp_size), props)
            for launcher, signature, cfg in jobs]


def _prepare(launchers: Iterable[Any]) -> None:
    """Create each function's per-device state on this thread: ``device_caches`` is a ``defaultdict`` that two
    threads could each fill, and a kernel compiled into the losing copy would be compiled again at launch."""
    try:
        from triton.runtime import driver
        device = driver.active.get_current_device()
    except Exception:  # noqa: BLE001 - no GPU driver (a test's stand-in): nothing to prepare
        return
    for launcher in launchers:
        caches = getattr(launcher.fn, "device_caches", None)
        if caches is not None:
            caches[device]


def _compile_variant(launcher: Any, signature: list, cfg: dict, device: int | None,
                     job: CompileJob | None) -> None:
    """One variant, on a pool thread: a worker process compiles it into Triton's disk cache if one is free, then
    ``_warmup`` here finds it there and only loads it (or, if no worker did, compiles it itself)."""
    if job is not None:
        pool_ = compile_worker.ready_pool()
        if pool_ is not None:
            pool_.compile(job)
    _warmup(launcher, signature, cfg, device)


def _warmup(launcher: Any, signature: list, cfg: dict, device: int | None = None) -> None:
    with torch.cuda.device(device) if device is not None else contextlib.nullcontext():
        kernel = launcher.fn.warmup(*signature, grid=(1,), **cfg)
        # loading the binary is lazy too: load it for our launcher, or else let Triton load it and build its own
        # launcher (a C module per argument signature on Triton 3.6, compiled with gcc).  Given the device, ``load``
        # makes its context current on this pool thread first: ``torch.cuda.device`` does nothing where the
        # index is already torch's current one, so a fresh thread had no context, the load gave up, and Triton
        # built its launcher instead -- 0.5 s of the tutorial MoE's first graph (docs/benchmarks.md).
        if config.static_cuda_launcher and kernel is not None and \
                static_cuda_launcher.load(kernel, device) is not None:
            return
        init = getattr(kernel, "_init_handles", None)
        if callable(init):
            init()


def signatures_of(kernels: Iterable[Any], graph: Any) -> dict[str, list]:
    """``{kernel name: signature}`` for a graph's generated kernels (symbolic ones map to None)."""
    return {k.name: kernel_signature(k, graph) for k in kernels}


def maybe_precompile(module: Any, kernels: list, graph: Any, device: torch.device,
                     timed: Callable[[str], Any]) -> None:
    """``precompile`` a CUDA graph's kernels when ``config.compile_threads`` allows (not on the interpreter)."""
    if device.type != "cuda" or compile_threads() <= 1 or not kernels:
        return
    compile_worker.warm_pool()  # no-op once started (minidynamo starts it before the first compile)
    with timed("precompile"):
        index = device.index if device.index is not None else torch.cuda.current_device()
        precompile(module, signatures_of(kernels, graph), device=index)
