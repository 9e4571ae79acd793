"""``compile_worker``: worker processes that compile Triton kernels for us (mirrors
``torch/_inductor/compile_worker/subproc_pool.py``; the worker's loop is ``__main__.py``, as upstream's).

In:  a ``CompileJob`` -- which kernel of which generated ``output_code`` module, the arguments its first launch
     will pass (``async_compile.kernel_signature``), one candidate config, and the GPU it is for::

         CompileJob(path=".../c3f2....py", module="mininductor_cache_3f2..._gpu", kernel="triton_poi_fused_eq_2",
                    signature=["torch.float32", "torch.bool", 1024], config={"XBLOCK": 1024, ...},
                    target=("cuda", 90, 32), device_properties={"max_shared_mem": 232448, ...})

Out: nothing to use: the kernel is now in Triton's on-disk cache, so when ``async_compile`` runs the same
     ``warmup`` in our process, Triton finds the binary there and only loads it.

Why: ``async_compile`` compiles a graph's kernels on threads, but threads stop helping at about 2.2x: half of a
Triton compile (the Python front end, parts of the MLIR passes) holds the GIL.  Processes each have their own.

How:
* Plain ``subprocess.Popen([python, ".../compile_worker/__main__.py"])``, as upstream, not ``multiprocessing``:
  its ``spawn`` would re-import the user's main script, and ``fork`` would copy a process that holds a CUDA context.
  The worker imports Triton only, neither torch nor the compiler: it runs a generated module's kernels without
  its wrapper (``_load_kernels``; the kernels need only Triton) and stands dtypes in for torch's
  (``_StandInDtype``).  It then compiles one small kernel to warm Triton up (its first compile in a process costs
  ~0.8 s more than the next ones) before it says it is ready.
* A job and its reply are pickles, each after its length, over the worker's stdin and stdout.  The worker moves
  its own ``stdout`` to ``stderr`` first, so a ``print`` inside Triton cannot corrupt the stream.
* **The worker never touches the GPU.**  It installs a stand-in Triton driver (``_StandInDriver``) that answers
  with the parent's target (e.g. ``cuda``, sm 90) and device properties.  Compiling needs only the compiler and
  ``ptxas``; a CUDA context would cost each worker half a gigabyte of GPU memory.  The same is why this file can be
  tested on a machine without a GPU.
* Started ahead of time, when minidynamo or mininductor is imported on a machine with an NVIDIA GPU (as upstream
  starts its pool when ``torch._inductor`` is imported).  Until one is ready, ``async_compile``'s thread compiles
  the kernel itself, as before.
* **Off by default** (``config.compile_workers = 0``), by measurement (H200 host, docs/benchmarks.md).  Workers
  used to import torch and needed 5-8 s to start, longer than the tutorial MoE's whole first call; without torch
  they start in about a second.  Eight of them then compiled all 24 of its kernel variants, but its first call was
  no faster (2.96-3.01 s against 2.76-3.04 s): a graph waits for its slowest kernel either way, and the part only
  our process can do -- loading the binary and building its launcher, ~0.15 s for each new argument signature on
  Triton 3.6 -- stays on the critical path.  Worth it in a long session that compiles much after its start, such
  as a training run's recompiles.  What did make the first call faster is the warm-up in our own process
  (``warm_up_triton``).
* Before anything compiles, ``warm_pool`` points Triton at the ``ptxas`` torch ships, as upstream does
  (``use_torchs_ptxas``, [Note: which ptxas]); the workers inherit the choice with the environment.
* A worker costs speed, never correctness or a crash: one that fails a job, dies, or takes longer than
  ``config.compile_worker_timeout`` is counted (``metrics.compile_worker_failures``), a dead or hung one is
  dropped, and the thread compiles the kernel in our process as it always did.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

_HEADER = struct.Struct("<Q")  # a message is its length (8 bytes, little-endian), then its pickle


@dataclass(frozen=True)
class CompileJob:
    """One kernel variant to compile: the ``@triton.jit`` function ``kernel`` of the generated module at ``path``
    (a ``ReductionKindChoice``'s two candidates are two functions), warmed up with ``signature`` (a dtype written
    as ``"torch.float32"``) and ``config``, for ``target`` = (backend, arch, warp size)."""
    path: str
    module: str
    kernel: str
    signature: list
    config: dict
    target: tuple
    device_properties: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ parent side
class _Worker:
    """One worker process and its two pipes.  Only one thread talks to a worker at a time (the pool's idle queue
    hands it out), so sends and receives never interleave."""

    def __init__(self) -> None:
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # has mininductor/
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        env.pop("TRITON_INTERPRET", None)  # a worker compiles for the GPU
        env["MINICOMPILE_COMPILE_WORKERS"] = "0"  # and never starts workers of its own
        cache_dir = _triton_cache_dir()
        if cache_dir:  # the same on-disk cache as ours, even where it was set in code, not in the environment
            env["TRITON_CACHE_DIR"] = cache_dir
        main = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")
        self.proc = subprocess.Popen([sys.executable, main], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, close_fds=True)

    def send(self, message: Any) -> None:
        data = pickle.dumps(message)
        self.proc.stdin.write(_HEADER.pack(len(data)) + data)
        self.proc.stdin.flush()

    def receive(self, timeout: float) -> Any:
        """The next message, or ``TimeoutError`` after ``timeout`` seconds, or ``EOFError`` if the worker died."""
        deadline = time.monotonic() + timeout
        (size,) = _HEADER.unpack(self._read(_HEADER.size, deadline))
        return pickle.loads(self._read(size, deadline))

    def _read(self, n: int, deadline: float) -> bytes:
        fd, chunks = self.proc.stdout.fileno(), []
        while n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(fd, n)
            if not chunk:
                raise EOFError("the compile worker exited")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def kill(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.proc.kill()
            self.proc.wait(timeout=5)

    def close(self) -> None:
        """Closing its stdin tells the worker to exit (it also exits if we die: its read sees the end)."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001
            self.kill()


class SubprocPool:
    """``pool.compile(job)`` runs ``job`` on an idle worker and says whether it compiled; ``False`` whenever none
    was ready or anything went wrong -- the caller then compiles in-process, as without a pool."""

    def __init__(self, workers: int) -> None:
        self.pid = os.getpid()  # a fork of our process must not talk to our workers
        self.workers = [_Worker() for _ in range(workers)]
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self.ready = threading.Event()  # set once the first worker is ready (tests wait on it)
        for w in self.workers:
            threading.Thread(target=self._await_ready, args=(w,), daemon=True,
                             name="mininductor-worker-start").start()

    def _await_ready(self, worker: _Worker) -> None:
        from .. import config
        with contextlib.suppress(Exception):  # a worker that cannot start is simply never used
            if worker.receive(config.compile_worker_start_timeout) == "ready":
                self._idle.put(worker)
                self.ready.set()
                return
        worker.kill()

    def compile(self, job: CompileJob) -> bool:
        from .. import config, metrics
        if os.getpid() != self.pid:
            return False
        try:
            worker = self._idle.get_nowait()
        except queue.Empty:  # none ready yet: compiling now beats waiting for one to start
            return False
        try:
            worker.send(job)
            ok, error = worker.receive(config.compile_worker_timeout)
        except Exception as e:  # noqa: BLE001 - died, hung, or a broken pipe: drop it
            worker.kill()
            ok, error = False, f"worker lost ({type(e).__name__})"
        else:
            self._idle.put(worker)
        if ok:
            metrics.compile_worker_jobs += 1
        else:
            metrics.compile_worker_failures += 1
            metrics.compile_worker_errors.append(f"{job.kernel}: {error}")
        return ok

    def shutdown(self) -> None:
        for w in self.workers:
            w.close()


_POOL: SubprocPool | None = None
_POOL_LOCK = threading.Lock()


def compile_workers() -> int:
    """How many worker processes (``config.compile_workers``, 0 by default)."""
    from .. import config
    return max(0, int(config.compile_workers or 0))


def warm_pool() -> SubprocPool | None:
    """Once per process, where a GPU will compile kernels: warm Triton up in our own process on a background thread
    ([Note: a process's first Triton compile], [Note: Triton's driver helpers]; ``config.warm_up_triton``), and
    start the workers if ``config.compile_workers`` > 0."""
    from .. import config
    global _POOL, _WARM_UP
    with _POOL_LOCK:
        if _gpu_compiles():
            use_torchs_ptxas()  # before anything compiles, and before workers inherit the environment
        if _WARM_UP is None and config.warm_up_triton and _gpu_compiles():
            # not a daemon: the interpreter waits for it at exit rather than stop it inside LLVM
            _WARM_UP = threading.Thread(target=_warm_up_quietly, name="mininductor-triton-warm-up")
            _WARM_UP.start()
            os.register_at_fork(before=_finish_warm_up)
        if _POOL is None and _wanted():
            _POOL = SubprocPool(compile_workers())
            atexit.register(_POOL.shutdown)
        return _POOL


_WARM_UP: threading.Thread | None = None


def _finish_warm_up() -> None:
    """Before ``os.fork()`` (a DataLoader's workers, ``multiprocessing``): let the warm-up finish first.  A child gets
    only the forking thread, so a lock the warm-up thread held at that moment -- an import's, LLVM's -- would stay
    held in the child forever, and the child's first Triton compile could hang.  It delays a fork by at most the
    warm-up's ~1 s, and only in the first seconds after import."""
    thread = _WARM_UP
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def _gpu_compiles() -> bool:
    return os.environ.get("TRITON_INTERPRET") != "1" and gpu_present()


def _wanted() -> bool:
    return compile_workers() > 0 and os.name == "posix" and _gpu_compiles()


def gpu_present() -> bool:
    """An NVIDIA GPU on this machine and a CUDA build of torch -- asked without initialising CUDA (which
    ``torch.cuda.is_available()`` does, and a process that forks afterwards could not use CUDA in the child)."""
    import torch
    return torch.version.cuda is not None and os.path.exists("/dev/nvidiactl")


def ready_pool() -> SubprocPool | None:
    """The pool if it was started in this process (``warm_pool``), else None."""
    return _POOL if _POOL is not None and _POOL.pid == os.getpid() else None


def _triton_cache_dir() -> str | None:
    try:
        from triton import knobs
        return knobs.cache.dir
    except Exception:  # noqa: BLE001 - an older Triton: the environment (inherited) decides
        return None


# ------------------------------------------------------------------------------------------------ which ptxas
def use_torchs_ptxas(torch_dir: str | None = None) -> str | None:
    """Compile with the ``ptxas`` torch ships (``torch/bin/ptxas``) unless ``TRITON_PTXAS_PATH`` already names one;
    returns the ``ptxas`` set, or None where the choice is left to Triton.

    [Note: which ptxas]  ``ptxas`` turns a kernel's PTX into machine code, and its optimiser has bugs that depend
    on its version.  Triton 3.6 bundles ptxas 12.8.93, and on an H200 that version miscompiled one of our fused
    kernels: an average pooling's gradient fused with the ``cos`` of sin's backward, whose slow path libdevice
    inlines as a loop over local memory.  A third of the gradient came out wrong, in the same PTX that ptxas
    13.0.88 compiles right (docs/debugging.md).  A CUDA 13 build of torch ships that newer ptxas in ``torch/bin``,
    and upstream Inductor points Triton at it before compiling (``_set_triton_ptxas_path`` in
    ``torch/_inductor/codecache.py``); we do the same, so our kernels are built by the ptxas torch.compile's are
    built by.  A path the user set is kept, and Triton's cache key includes the ptxas version, so binaries built
    by the other ptxas are never reused."""
    if os.environ.get("TRITON_PTXAS_PATH"):
        return None
    if torch_dir is None:
        import torch
        torch_dir = os.path.dirname(torch.__file__)
    path = os.path.join(torch_dir, "bin", "ptxas")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None
    os.environ["TRITON_PTXAS_PATH"] = path
    return path


# ------------------------------------------------------------------------------------------------ warming up
def warm_up_triton() -> None:
    """Compile one tiny kernel for an sm_90 GPU, with no GPU needed (an explicit target: the driver is never asked).

    [Note: a process's first Triton compile]  The first compile in a process costs ~0.8 s more than the next ones
    (measured on CPU and on an H200 host): lazy imports of Triton's compiler and its NVIDIA backend, loading the
    MLIR dialects, setting LLVM up, the first ``ptxas`` run.  It hardly depends on the kernel or on which GPU it
    is for.  A worker pays it before it says it is ready; our own process pays it on a background thread started
    at import (``warm_pool``), while the program builds its model, instead of in its first compiled call.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    kernel = _warm_up_kernel()
    triton.compile(ASTSource(kernel, {"x_ptr": "*fp32", "n": "i32", "XBLOCK": "constexpr"}, {(2,): 64}),
                   target=GPUTarget("cuda", 90, 32))


@functools.cache
def _warm_up_kernel() -> Any:
    import triton
    import triton.language as tl

    with interpret_mode(False):  # a compiled kernel, even in the CPU tests

        @triton.jit
        def mininductor_warm_up(x_ptr, n, XBLOCK: tl.constexpr):
            i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
            tl.store(x_ptr + i, tl.load(x_ptr + i, i < n) * 2.0, i < n)

    return mininductor_warm_up


@contextlib.contextmanager
def interpret_mode(enabled: bool):
    """Set ``TRITON_INTERPRET`` while ``@triton.jit`` decorators run (Triton reads it then): compiled functions
    with ``enabled=False`` even where ``TRITON_INTERPRET=1`` is set (the CPU tests).  Here rather than in
    ``runtime`` (which uses it to load generated modules), because ``runtime`` imports torch and a worker must not."""
    prior = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if enabled else "0"
    try:
        yield
    finally:
        if prior is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = prior


def warm_up_driver() -> None:
    """Build Triton's CUDA driver helpers (a C extension) now, without touching the GPU.

    [Note: Triton's driver helpers]  The first ``triton.runtime.driver.active`` of a process creates Triton's CUDA
    driver, whose helpers -- loading a binary, reading device properties -- are a small C extension
    (``cuda_utils``) that Triton compiles with ``gcc`` the first time on a machine and then finds in its cache.
    With an empty cache that was 0.35-0.5 s of the tutorial MoE's first graph on an H200 host, on the main thread,
    waiting in ``async_compile`` for the first kernels' device (docs/benchmarks.md).  Building the extension needs
    no GPU and no CUDA context (loading it opens ``libcuda``; nothing calls ``cuInit``), so the warm-up thread
    builds it; ``driver.active`` then finds it built.  ``driver.active`` itself stays untouched here: deciding
    which driver is active asks ``torch.cuda.is_available()``, which initialises CUDA and would make a later
    ``fork`` of the program unsafe."""
    from triton.backends.nvidia.driver import CudaUtils
    CudaUtils()


def _warm_up_quietly() -> None:
    # only a warm-up: an unknown Triton API (or no libcuda, in the CPU tests) costs the time it would have saved
    for step in (warm_up_triton, warm_up_driver):
        with contextlib.suppress(Exception):
            step()


# ------------------------------------------------------------------------------------------------ worker side
class _StandInDriver:
    """What Triton's ``warmup`` and ``compile`` ask of the active driver, answered without a GPU: the target and
    device properties the parent sent.  Launching or loading a kernel is never asked of a worker."""

    def __init__(self, target: Any, device_properties: dict) -> None:
        self.target = target
        props = dict(device_properties)
        self.utils = types.SimpleNamespace(get_device_properties=lambda device: props)

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


# The line of a generated module where its kernels end and its wrapper (launchers, call(args), which need torch)
# begins: codegen/wrapper.py writes it, a worker runs the module's text above it.
WRAPPER_MARKER = "# ---- the wrapper: launchers and call(args); only this part needs torch"


def _load_kernels(path: str, name: str) -> Any:
    """A generated module's kernels, once per worker: the file's text above ``WRAPPER_MARKER`` run under the
    module's name and file (Triton keys its cache on a kernel's source and line, so they must be the parent's).
    Not the wrapper below it: that part imports torch, which would cost each worker seconds at start-up."""
    if name not in sys.modules:
        with open(path) as f:
            kernels = f.read().split(WRAPPER_MARKER)[0]
        module = types.ModuleType(name)
        module.__file__ = path
        with interpret_mode(False):  # a worker compiles for the GPU
            exec(compile(kernels, path, "exec"), module.__dict__)  # noqa: S102 - our own generated code
        sys.modules[name] = module
    return sys.modules[name]


class _StandInDtype:
    """``torch.float32`` and friends for Triton's ``warmup``, without importing torch: Triton wraps an argument
    whose class is named ``dtype`` in a module named ``torch`` as a tensor of that dtype, and reads the dtype's
    name from ``str()``.  One object per name, kept for the process's life (``stand_in_dtype``), as torch's are:
    Triton's specialiser (``specialize.cc``) remembers each dtype's name under the dtype's hash, which for a plain
    object is its address, so a freed stand-in whose address a new one reused would be read as the old dtype
    (a test saw it: another binary, and the parent's lookup missed)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


_StandInDtype.__name__ = "dtype"
_StandInDtype.__module__ = "torch"


@functools.cache
def stand_in_dtype(name: str) -> _StandInDtype:
    return _StandInDtype(name)


class _RefuseTorch:
    """An import hook that makes ``import torch`` fail in a worker.  Triton's argument specialiser imports torch
    the first time it runs, if it can, only to recognise ``torch.Tensor`` (Triton 3.6, ``specialize.cc``); a
    worker passes stand-ins, never tensors, and importing torch would cost it seconds (eight workers importing it
    at once made a first call's compiles take 11 s instead of 2 on an H200 host)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise ImportError("a compile worker does not import torch (compile_worker._RefuseTorch)")


def refuse_torch() -> None:
    """Called first thing in a worker (``__main__.py``)."""
    if not any(isinstance(f, _RefuseTorch) for f in sys.meta_path):
        sys.meta_path.insert(0, _RefuseTorch())


def run_job(job: CompileJob) -> None:
    """Compile ``job`` into Triton's on-disk cache (in a worker process, where torch is not imported)."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver
    fn = getattr(_load_kernels(job.path, job.module), job.kernel)  # the @triton.jit function itself
    driver.set_active(_StandInDriver(GPUTarget(*job.target), job.device_properties))
    args = [stand_in_dtype(a) if isinstance(a, str) and a.startswith("torch.") else a for a in job.signature]
    fn.warmup(*args, grid=(1,), **job.config)
