"""async_compile: the GPU precompiles each kernel's variants with the arguments its first launch will pass.

The compile itself needs a GPU; on CPU we check the logic: the signatures match what ``call`` really launches with,
every candidate config is warmed up on the pool, failures are left to the launch, and CPU graphs are untouched.
"""
import contextlib
import threading
import types

import torch

from mininductor import async_compile, config, metrics, runtime
from mininductor.compile_fx import compile_fx

from .utils import assert_same


class _StandInFn:
    """Records ``warmup`` calls as a ``@triton.jit`` function would receive them."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.calls, self.fail_on, self.lock = [], fail_on, threading.Lock()

    def warmup(self, *args, grid, **cfg):
        with self.lock:
            self.calls.append((args, grid, cfg))
        if cfg.get("XBLOCK") == self.fail_on:
            raise RuntimeError("out of resources")


def _launcher(fn, configs, interpret=False):
    return types.SimpleNamespace(fn=fn, configs=configs, interpret=interpret)


def test_every_config_of_every_gpu_kernel_is_warmed_up_and_failures_are_left_to_the_launch():
    fn0, fn1, fn_cpu = _StandInFn(fail_on=64), _StandInFn(), _StandInFn()
    module = types.SimpleNamespace(
        k0=_launcher(fn0, [{"XBLOCK": 32, "num_warps": 4}, {"XBLOCK": 64, "num_warps": 8}]),
        k1=_launcher(fn1, [{"XBLOCK": 1024, "num_warps": 4}]),
        k_symbolic=_launcher(_StandInFn(), [{"XBLOCK": 8}]),
        k_cpu=_launcher(fn_cpu, [{"XBLOCK": 8}], interpret=True))
    sig = [torch.float32, torch.float16, 32, 128]
    futures = async_compile.precompile(module, {"k0": sig, "k1": sig[:1] + [1024], "k_symbolic": None,
                                                "k_cpu": sig, "not_in_module": sig})
    assert len(futures) == 3 and all(f.done() for f in futures)
    assert sorted(c[2]["XBLOCK"] for c in fn0.calls) == [32, 64]  # the one that failed was still tried
    assert all(args == tuple(sig) and grid == (1,) for args, grid, _ in fn0.calls)
    assert fn1.calls == [((torch.float32, 1024), (1,), {"XBLOCK": 1024, "num_warps": 4})]
    assert fn_cpu.calls == []  # the interpreter compiles nothing


def test_signatures_are_what_the_first_launch_passes(monkeypatch):
    seen = {}

    def capture(module, kernels, graph, device, timed):
        seen.update(async_compile.signatures_of(kernels, graph))

    monkeypatch.setattr(async_compile, "maybe_precompile", capture)
    launched = {}
    run = runtime.KernelLauncher.run

    def record(self, *args):
        launched[self.fn.__name__] = [a.dtype if isinstance(a, torch.Tensor) else a for a in args]
        return run(self, *args)

    monkeypatch.setattr(runtime.KernelLauncher, "run", record)

    def f(x, w):
        y = torch.softmax(x @ w, dim=-1)  # an extern mm, then reductions
        return (y * 2).to(torch.float16), y.sum(0)

    metrics.reset()
    x, w = torch.randn(8, 16), torch.randn(16, 32)
    gm = torch.fx.symbolic_trace(f)
    out = compile_fx(gm, [x, w])(x, w)
    assert_same(out[0], f(x, w)[0], 1e-3, 1e-3)
    assert launched and seen == launched


def test_a_symbolic_kernel_is_warmed_up_for_the_sizes_it_was_traced_for(monkeypatch):
    """A symbolic-size graph's kernels take the sizes as ints: precompiled with the traced call's sizes, the
    signature is what that call's first launch passes (so the launch finds the variant compiled)."""
    import minidynamo
    seen, launched = {}, {}

    def capture(module, kernels, graph, device, timed):
        seen.update(async_compile.signatures_of(kernels, graph))

    monkeypatch.setattr(async_compile, "maybe_precompile", capture)
    run = runtime.KernelLauncher.run

    def record(self, *args):
        launched.setdefault(self.fn.__name__, [a.dtype if isinstance(a, torch.Tensor) else a for a in args])
        return run(self, *args)

    monkeypatch.setattr(runtime.KernelLauncher, "run", record)
    metrics.reset()
    minidynamo.reset()
    compiled = minidynamo.minicompile(lambda x: (x.sin() * 2).sum(-1), dynamic=True)
    x = torch.randn(5, 24)
    assert_same(compiled(x), (x.sin() * 2).sum(-1), 1e-5, 1e-5)
    assert metrics.symbolic_compiles == 1
    assert launched and seen == launched
    assert any(5 in sig and 24 in sig for sig in seen.values())  # the sizes, read from the traced call


def test_cpu_graphs_and_one_thread_compile_nothing_ahead(monkeypatch):
    calls = []
    monkeypatch.setattr(async_compile, "precompile", lambda *a, **k: calls.append(a))
    kernel = types.SimpleNamespace(name="k")
    async_compile.maybe_precompile(object(), [kernel], None, torch.device("cpu"), metrics.timed)
    with config.patch(compile_threads=1):
        async_compile.maybe_precompile(object(), [kernel], None, torch.device("cuda"), metrics.timed)
    assert calls == []
    assert async_compile.compile_threads() >= 1


def test_a_precompiled_kernel_is_loaded_for_our_launcher_on_the_graphs_device(monkeypatch):
    """A pool thread loads each compiled variant for the static launcher on the graph's device (``load`` makes that
    device's context current on the thread); Triton's own launcher -- a C module compiled with gcc -- is built only
    where our launcher cannot take the kernel.  A fresh thread used to have no context, so the load gave up and
    the gcc build ran for the first graph's kernels (docs/benchmarks.md)."""
    from mininductor import static_cuda_launcher
    loads, inits = [], []

    class Kernel:
        def __init__(self, launchable):
            self.launchable = launchable

        def _init_handles(self):
            inits.append(self)

    def load(kernel, device=None):
        loads.append(device)
        return object() if kernel.launchable else None

    monkeypatch.setattr(static_cuda_launcher, "load", load)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    ok, other = Kernel(True), Kernel(False)
    for kernel, device in ((ok, 3), (other, 0)):
        fn = types.SimpleNamespace(warmup=lambda *a, grid, kernel=kernel, **cfg: kernel)
        async_compile._warmup(_launcher(fn, []), [torch.float32, 8], {"XBLOCK": 8}, device)
    assert loads == [3, 0] and inits == [other]
    with config.patch(static_cuda_launcher=False):
        async_compile._warmup(_launcher(types.SimpleNamespace(warmup=lambda *a, grid, **cfg: ok), []),
                              [torch.float32, 8], {"XBLOCK": 8}, 1)
    assert loads == [3, 0] and inits == [other, ok]
