"""compile_worker: a worker process compiles a GPU kernel into Triton's disk cache, on a machine without a GPU.

The worker never touches a GPU (it answers Triton with a stand-in driver for the parent's target), so the whole
round trip -- start, ready, job, reply -- runs here in CI: the kernel is compiled for an H100/H200 (sm 90) with
Triton's own ``ptxas``.  That the parent then *loads* the cached binary instead of compiling it again needs a GPU:
``test_the_parent_finds_the_workers_kernel_in_the_cache`` checks it there.  Failures must cost nothing but speed:
a job that raises, a worker that dies and one that hangs each make ``compile`` say False (the caller then compiles
in-process) and are counted.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from mininductor import compile_worker, config, metrics
from mininductor.compile_worker import WRAPPER_MARKER, CompileJob, SubprocPool

KERNEL = textwrap.dedent('''
    import triton
    import triton.language as tl

    @triton.jit
    def triton_poi_fused_mul_sin_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
        xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
        xmask = xindex < xnumel
        tmp0 = tl.load(in_ptr0 + xindex, xmask, other=0)
        tl.store(out_ptr0 + xindex, tl.sin(tmp0) * 2.0, xmask)

''') + WRAPPER_MARKER + textwrap.dedent('''
    from mininductor.runtime import KernelLauncher

    triton_poi_fused_mul_sin_0 = KernelLauncher(triton_poi_fused_mul_sin_0, 'poi', xnumel=1000, rnumel=1,
                                                device_type='cuda')
''')  # laid out as a generated module: the kernels, then the wrapper, which a worker never runs
H100 = ("cuda", 90, 32)  # what Triton's driver reports on an H100/H200: (backend, compute capability, warp size)


def _job(path, kernel="triton_poi_fused_mul_sin_0", config_=None) -> CompileJob:
    return CompileJob(str(path), "mininductor_test_worker_module", kernel, ["torch.float32", "torch.float32", 1000],
                      config_ or {"XBLOCK": 256, "num_warps": 4}, H100, {"max_shared_mem": 232448})


def _cached_binaries(cache_dir) -> list[str]:
    return [f for _, _, files in os.walk(cache_dir) for f in files if f.endswith(".cubin")]


@pytest.fixture(autouse=True)
def _no_warm_up_in_flight():
    """Let this process's background warm-up (``warm_pool``, started by an earlier test's first GPU compile) finish
    before a test points ``TRITON_CACHE_DIR`` at its own directory: a warm-up still running then writes
    ``mininductor_warm_up.cubin`` there, and the binary counts below are off by one (seen on the H200 under xdist)."""
    compile_worker._finish_warm_up()


@pytest.fixture
def pool(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    pool = SubprocPool(1)
    assert pool.ready.wait(120), "the worker did not start"
    metrics.reset()
    yield pool
    pool.shutdown()


def test_a_worker_compiles_a_kernel_for_the_gpu_into_tritons_cache(pool, tmp_path):
    # before it said it was ready, the worker warmed Triton up with a kernel of its own
    assert _cached_binaries(tmp_path / "triton") == ["mininductor_warm_up.cubin"]
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL)
    assert pool.compile(_job(path))
    assert sorted(_cached_binaries(tmp_path / "triton")) == ["mininductor_warm_up.cubin",
                                                               "triton_poi_fused_mul_sin_0.cubin"]
    assert (metrics.compile_worker_jobs, metrics.compile_worker_failures) == (1, 0)
    # a second config of the same kernel: a second binary, from the same (still running) worker
    assert pool.compile(_job(path, config_={"XBLOCK": 1024, "num_warps": 8}))
    assert len(_cached_binaries(tmp_path / "triton")) == 3
    assert metrics.compile_worker_jobs == 2 and pool.workers[0].proc.poll() is None


def test_a_failed_job_is_reported_and_the_worker_keeps_serving(pool, tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL)
    assert not pool.compile(_job(path, kernel="no_such_kernel"))
    assert metrics.compile_worker_failures == 1 and "AttributeError" in metrics.compile_worker_errors[0]
    assert pool.compile(_job(path))  # the same worker, still there
    assert metrics.compile_worker_jobs == 1


def test_a_dead_or_hung_worker_is_dropped_and_the_caller_compiles_itself(pool, tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL)
    with config.patch(compile_worker_timeout=0.01):  # no compile takes 10 ms: a "hung" worker
        assert not pool.compile(_job(path))
    assert "worker lost (TimeoutError)" in metrics.compile_worker_errors[-1]
    assert pool.workers[0].proc.poll() is not None  # killed, not returned to the idle queue
    assert not pool.compile(_job(path))  # no worker left: the caller compiles in-process, at once
    assert metrics.compile_worker_failures == 1  # "none free" is not a failure


def test_a_worker_that_dies_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    pool = SubprocPool(1)
    try:
        assert pool.ready.wait(120)
        pool.workers[0].proc.kill()
        pool.workers[0].proc.wait()
        metrics.reset()
        assert not pool.compile(_job(tmp_path / "kernel.py"))
        assert "worker lost (BrokenPipeError)" in metrics.compile_worker_errors[0] or \
            "worker lost (EOFError)" in metrics.compile_worker_errors[0]
    finally:
        pool.shutdown()


def test_no_workers_start_without_a_gpu_or_when_turned_off():
    from mininductor import compile_worker
    if not compile_worker.gpu_present():
        assert compile_worker.warm_pool() is None and compile_worker.ready_pool() is None
    with config.patch(compile_workers=0):
        assert not compile_worker._wanted()


def test_a_worker_never_imports_torch(tmp_path):
    """A job runs the module's kernels, not its wrapper, stands dtypes in for torch's, and refuses the import
    Triton's specialiser would make: importing torch would cost each worker seconds (docs/benchmarks.md)."""
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL)
    job = _job(path)
    script = textwrap.dedent(f'''
        import sys, types
        package = types.ModuleType("mininductor")
        package.__path__ = [{os.path.dirname(os.path.dirname(compile_worker.__file__))!r}]
        sys.modules["mininductor"] = package  # as the worker's __main__ does
        from mininductor.compile_worker import CompileJob, refuse_torch, run_job
        refuse_torch()  # as the worker's __main__ does
        run_job(CompileJob(*{tuple(job.__dict__.values())!r}))
        print("torch imported:", "torch" in sys.modules)
    ''')
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"))
    env.pop("TRITON_INTERPRET", None)
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch imported: False" in result.stdout
    assert _cached_binaries(tmp_path / "triton") == ["triton_poi_fused_mul_sin_0.cubin"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                   torch.int8, torch.uint8, torch.bool, torch.float64])
def test_a_stand_in_dtype_specialises_as_torchs_does(dtype, tmp_path, monkeypatch):
    """The parent finds the worker's binary only if both compute the same cache key, so Triton must read a
    stand-in dtype as it reads torch's, for every dtype kernels take.  Compiled here for sm 90 twice, with the
    same stand-in driver: once as the worker does, once as ``async_compile._warmup`` does; one binary."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    from mininductor import runtime
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    source = KERNEL.replace("tl.sin(tmp0) * 2.0", "tmp0 + tmp0")
    path = tmp_path / "kernel.py"
    path.write_text(source)
    job = CompileJob(str(path), f"mininductor_test_dtype_{str(dtype)[6:]}", "triton_poi_fused_mul_sin_0",
                     [str(dtype), str(dtype), 1000], {"XBLOCK": 256, "num_warps": 4}, H100,
                     {"max_shared_mem": 232448})
    prior = driver._active  # run_job installs a stand-in driver; put back whatever was there (none on a CPU)
    try:
        compile_worker.run_job(job)
        assert len(_cached_binaries(tmp_path / "triton")) == 1
        module = runtime.load_module(source, interpret=False)
        driver.set_active(compile_worker._StandInDriver(GPUTarget(*H100), job.device_properties))
        module.triton_poi_fused_mul_sin_0.fn.warmup(dtype, dtype, 1000, grid=(1,), **job.config)
    finally:
        driver._active = prior
    assert len(_cached_binaries(tmp_path / "triton")) == 1  # found, not compiled a second time


@pytest.mark.skipif(not torch.cuda.is_available(), reason="loading a cached binary needs a GPU")
def test_the_parent_finds_the_workers_kernel_in_the_cache(pool, tmp_path):
    """After the worker's compile, our own ``warmup`` (async_compile's) loads that binary: Triton's cache holds no
    second one for it, and the kernel computes what eager does."""
    from triton.runtime import driver

    from mininductor import async_compile, runtime
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL)
    target = driver.active.get_current_target()
    job = _job(path)
    job = CompileJob(job.path, job.module, job.kernel, job.signature, job.config,
                     (target.backend, target.arch, target.warp_size),
                     dict(driver.active.utils.get_device_properties(torch.cuda.current_device())))
    assert pool.compile(job)
    assert len(_cached_binaries(tmp_path / "triton")) == 2  # the warm-up kernel's, and this one's
    signature = [torch.float32, torch.float32, 1000]
    other = runtime.load_module(KERNEL.replace("2.0", "5.0"), interpret=False)  # compiled here: a second binary
    async_compile._warmup(other.triton_poi_fused_mul_sin_0, signature, job.config)
    assert len(_cached_binaries(tmp_path / "triton")) == 3
    module = runtime.load_module(KERNEL, interpret=False)  # the worker's kernel: found, not compiled again
    async_compile._warmup(module.triton_poi_fused_mul_sin_0, signature, job.config)
    assert len(_cached_binaries(tmp_path / "triton")) == 3
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    module.triton_poi_fused_mul_sin_0.run(x, y, 1000)
    torch.testing.assert_close(y, torch.sin(x) * 2)


def test_triton_warms_up_in_our_process_without_a_gpu(tmp_path, monkeypatch):
    """warm_pool's background warm-up ([Note: a process's first Triton compile]) compiles for an explicit target:
    it needs no GPU and never asks Triton's driver, so it cannot initialise CUDA behind the program's back."""
    from mininductor import compile_worker
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    compile_worker.warm_up_triton()
    assert _cached_binaries(tmp_path / "triton") == ["mininductor_warm_up.cubin"]


def test_warm_pool_warms_triton_up_on_a_background_thread_once(tmp_path, monkeypatch):
    """On a machine with a GPU (stood in for here), ``warm_pool`` -- called when minidynamo or mininductor is
    imported -- starts one warm-up thread per process and, with ``compile_workers`` at its default 0, no workers."""
    from mininductor import compile_worker
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(compile_worker, "gpu_present", lambda: True)
    monkeypatch.setattr(compile_worker, "_WARM_UP", None)
    monkeypatch.setattr(compile_worker, "_POOL", None)
    assert compile_worker.warm_pool() is None  # no worker processes by default
    thread = compile_worker._WARM_UP
    assert thread is not None and not thread.daemon  # the interpreter waits for it rather than stop it in LLVM
    pid = os.fork()  # a fork waits for the warm-up: the child must not inherit a lock held by that thread
    if pid == 0:
        os._exit(0)
    assert not thread.is_alive()
    os.waitpid(pid, 0)
    assert _cached_binaries(tmp_path / "triton") == ["mininductor_warm_up.cubin"]
    compile_worker.warm_pool()
    assert compile_worker._WARM_UP is thread  # once per process
    with config.patch(warm_up_triton=False):
        monkeypatch.setattr(compile_worker, "_WARM_UP", None)
        compile_worker.warm_pool()
        assert compile_worker._WARM_UP is None


def test_kernels_are_built_by_the_ptxas_torch_ships(tmp_path, monkeypatch):
    """[Note: which ptxas]: the ``ptxas`` in torch's ``bin/`` when it has one and the user named none, as upstream
    Inductor chooses (Triton 3.6's own ptxas 12.8.93 miscompiled a fused pooling gradient on an H200)."""
    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)
    assert compile_worker.use_torchs_ptxas(str(tmp_path)) is None  # a CPU build of torch ships none
    ptxas = tmp_path / "bin" / "ptxas"
    ptxas.parent.mkdir()
    ptxas.write_text("#!/bin/sh\n")
    ptxas.chmod(0o644)
    assert compile_worker.use_torchs_ptxas(str(tmp_path)) is None  # not executable: Triton's own stays
    assert "TRITON_PTXAS_PATH" not in os.environ
    ptxas.chmod(0o755)
    assert compile_worker.use_torchs_ptxas(str(tmp_path)) == str(ptxas)
    assert os.environ["TRITON_PTXAS_PATH"] == str(ptxas)
    monkeypatch.setenv("TRITON_PTXAS_PATH", "/opt/cuda/bin/ptxas")  # the user's choice is kept
    assert compile_worker.use_torchs_ptxas(str(tmp_path)) is None
    assert os.environ["TRITON_PTXAS_PATH"] == "/opt/cuda/bin/ptxas"


TORCHS_PTXAS = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")


@pytest.mark.skipif(not (compile_worker.gpu_present() and os.path.isfile(TORCHS_PTXAS)),
                    reason="a CUDA build of torch that ships ptxas, on a machine with a GPU")
def test_triton_compiles_with_torchs_ptxas_once_mininductor_is_imported():
    from triton import knobs
    if os.environ.get("TRITON_PTXAS_PATH") not in (None, TORCHS_PTXAS):
        pytest.skip("TRITON_PTXAS_PATH names another ptxas: the user's choice is kept")
    assert os.environ["TRITON_PTXAS_PATH"] == TORCHS_PTXAS  # set by warm_pool, when mininductor was imported
    assert knobs.nvidia.ptxas.path == TORCHS_PTXAS


def test_the_warm_up_builds_tritons_driver_helpers_too_and_one_failing_step_skips_nothing(monkeypatch):
    """[Note: Triton's driver helpers]: the warm-up thread compiles a kernel, then builds Triton's ``cuda_utils``
    extension (without asking ``driver.active``, which would initialise CUDA); a step that fails -- no libcuda on
    this machine, another Triton -- is swallowed and the next still runs."""
    from mininductor import compile_worker
    steps = []

    def failing():
        steps.append("kernel")
        raise RuntimeError("no GPU compiler here")

    monkeypatch.setattr(compile_worker, "warm_up_triton", failing)
    monkeypatch.setattr(compile_worker, "warm_up_driver", lambda: steps.append("driver"))
    compile_worker._warm_up_quietly()
    assert steps == ["kernel", "driver"]


def test_building_the_driver_helpers_leaves_the_active_driver_alone(monkeypatch):
    """``warm_up_driver`` builds ``cuda_utils`` only: creating ``driver.active`` would ask torch whether CUDA is
    available, initialising it on a background thread before the program may fork."""
    import importlib

    from triton.backends.nvidia import driver as nvidia_driver
    runtime_driver = importlib.import_module("triton.runtime.driver")  # the module, not its ``driver`` object

    from mininductor import compile_worker
    steps = []
    monkeypatch.setattr(runtime_driver.driver, "_default", None)
    monkeypatch.setattr(runtime_driver.driver, "_active", None)
    monkeypatch.setattr(runtime_driver, "_create_driver", lambda: steps.append("driver.active"))
    monkeypatch.setattr(nvidia_driver, "CudaUtils", lambda: steps.append("cuda_utils"))
    compile_worker.warm_up_driver()
    assert steps == ["cuda_utils"]
