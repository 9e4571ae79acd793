"""``static_cuda_launcher``: the parameter layout and packing, on the CPU with a stand-in driver (the bytes a
launch hands ``cuLaunchKernel`` are read back from the real ctypes buffer); on a GPU
(``MININDUCTOR_TEST_DEVICE=cuda``), real kernels launched through it agree with eager and Triton builds no launcher
of its own."""
from __future__ import annotations

import ctypes
import struct
import threading
import types

import pytest
import torch

import minidynamo
from mininductor import config, metrics
from mininductor import static_cuda_launcher as scl

from .utils import DEVICE, check

POINTWISE = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}


def test_layout_skips_constexprs_and_fills_tritons_trailing_pointers():
    # two trailing 8-byte parameters (Triton's scratch pointers) are passed as NULL
    slots, fmt = scl.param_layout(POINTWISE, [8, 8, 4, 8, 8])
    assert slots == [(0, True), (1, True), (2, False)]
    assert struct.calcsize(fmt) == 5 * 8
    # an int argument Triton specialized because it was 1 is a constexpr: not a parameter
    slots, _ = scl.param_layout({"a": "*i64", "n": "constexpr", "m": "i64", "s": "fp32"}, [8, 8, 4])
    assert slots == [(0, True), (2, False), (3, False)]


@pytest.mark.parametrize("signature, sizes", [
    (POINTWISE, [8, 8, 8]),  # the driver says xnumel is 8 bytes: we disagree, so Triton launches it
    (POINTWISE, [8, 8]),  # fewer parameters than arguments
    ({"x": "*fp16", "s": "fp16"}, [8, 2]),  # a half-precision scalar: left to Triton
    ({"x": "*fp32", "t": ("i32", "i32")}, [8, 4, 4]),  # a tuple argument
    ({"d": "tensordesc<fp32[16, 16]>"}, [128]),  # a tensor descriptor
])
def test_layout_refuses_what_it_does_not_handle(signature, sizes):
    assert scl.param_layout(signature, sizes) is None


class StandInDriver:
    """The part of libcuda a launch uses: records each ``cuLaunchKernel`` with the parameter bytes it got."""

    def __init__(self, result: int = 0):
        self.result, self.launches = result, []

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        sizes = [8, 8, 4, 8, 8]
        values = [ctypes.string_at(params[k], size) for k, size in enumerate(sizes)]
        # the handles come as c_void_p objects, the counts as ints (see _load_driver)
        self.launches.append(((function.value, gx, gy, gz, bx, by, bz, shared, stream.value or 0, extra), values))
        return self.result

    def cuGetErrorString(self, result, text):
        ctypes.cast(text, ctypes.POINTER(ctypes.c_char_p))[0] = b"an illegal memory access was encountered"
        return 0


def stand_in_kernel(lib) -> scl.StaticallyLaunchedCudaKernel:
    loaded = types.SimpleNamespace(lib=lib, name="triton_poi_fused_sin_0", function=0xF00, threads=128,
                                   shared=512, param_sizes=[8, 8, 4, 8, 8])
    return scl.StaticallyLaunchedCudaKernel(loaded, POINTWISE, device=0)


class Pointer:
    def __init__(self, address, device=0):
        self.address, self.device = address, device

    def data_ptr(self):
        return self.address

    def get_device(self):
        return self.device


def test_launch_packs_each_argument_where_its_parameter_points():
    lib = StandInDriver()
    launcher = stand_in_kernel(lib)
    launcher.launch((Pointer(0x7000_0000_1000), Pointer(0x7000_0000_2000), 1000, 128), (8, 1, 1), stream=77)
    launcher.launch((Pointer(0x10), Pointer(0x20), 2**31 - 1, 128), (3, 2, 1), stream=0)
    (shape, values), (shape2, values2) = lib.launches
    assert shape == (0xF00, 8, 1, 1, 128, 1, 1, 512, 77, None)
    assert [struct.unpack("=Q", values[0])[0], struct.unpack("=Q", values[1])[0]] == [0x7000_0000_1000,
                                                                                         0x7000_0000_2000]
    assert struct.unpack("=i", values[2])[0] == 1000 and values[3] == values[4] == bytes(8)  # NULL scratch
    assert shape2[1:4] == (3, 2, 1) and struct.unpack("=i", values2[2])[0] == 2**31 - 1


def test_torchs_launch_call_gets_a_type_letter_and_a_value_per_parameter():
    # [Note: the launch call]: the same launch through torch's C++ call, recorded by a stand-in for it
    calls = []
    lib = StandInDriver()
    loaded = types.SimpleNamespace(lib=lib, name="k", function=0xF00, threads=128, shared=512,
                                   param_sizes=[8, 8, 4, 8, 4, 8, 8, 8])
    signature = {"a": "*fp32", "b": "*i64", "n": "i32", "m": "i64", "s": "fp32", "t": "fp64", "X": "constexpr"}
    launcher = scl.StaticallyLaunchedCudaKernel(loaded, signature, device=0,
                                                torch_launch=lambda *call: calls.append(call))
    launcher.launch((Pointer(0x1000), Pointer(0x2000), 7, 2**40, 0.5, -1.25, 128), (4, 2, 1), stream=77)
    assert calls == [(0xF00, 4, 2, 1, 4, 512, "OOilfdOO", (0x1000, 0x2000, 7, 2**40, 0.5, -1.25, None, None), 77)]
    assert lib.launches == []  # the ctypes call is not made
    with pytest.raises(ValueError, match="argument 0 is on"):  # our device check still comes first
        launcher.launch((Pointer(16, device=-1), Pointer(32), 4, 5, 1.0, 2.0, 128), (1, 1, 1), stream=0)
    assert len(calls) == 1


def test_torchs_launch_call_is_used_for_device_0_only(monkeypatch):
    monkeypatch.setattr(config, "static_launch_via_torch", True)
    assert scl.torch_launch_call(1) is None  # torch's call would make device 0's context current
    monkeypatch.setattr(config, "static_launch_via_torch", False)
    assert scl.torch_launch_call(0) is None
    monkeypatch.setattr(config, "static_launch_via_torch", True)
    assert scl.torch_launch_call(0) is getattr(getattr(torch._C, "_StaticCudaLauncher", None), "_launch_kernel",
                                                None)


def test_a_tensor_of_another_device_is_refused_before_the_launch():
    # a host pointer handed to a kernel would fault and end the CUDA context; Triton's launcher raises instead
    lib = StandInDriver()
    with pytest.raises(ValueError, match="argument 1 is on"):
        stand_in_kernel(lib).launch((Pointer(16), Pointer(32, device=-1), 4, 128), (1, 1, 1), stream=0)
    assert lib.launches == []


def test_a_failed_launch_raises_with_the_drivers_message():
    launcher = stand_in_kernel(StandInDriver(result=700))
    with pytest.raises(scl.CudaDriverError, match="cuLaunchKernel.*illegal memory access.*700"):
        launcher.launch((Pointer(16), Pointer(32), 4, 128), (1, 1, 1), stream=0)


def test_only_plain_kernels_are_launchable():
    def kernel(**meta):
        fields = {"num_ctas": 1, "global_scratch_size": 0, "profile_scratch_size": 0, **meta}
        return types.SimpleNamespace(metadata=types.SimpleNamespace(**fields), kernel=b"cubin",
                                     src=types.SimpleNamespace(signature=POINTWISE))
    assert scl.launchable(kernel())
    for meta in ({"num_ctas": 2}, {"global_scratch_size": 64}, {"launch_cooperative_grid": True},
                 {"launch_pdl": True}, {"cluster_dims": (2, 1, 1)}):
        assert not scl.launchable(kernel(**meta)), meta


def test_without_a_driver_or_a_plain_kernel_nothing_is_loaded():
    assert scl.load(object()) is None  # no metadata: not launchable, whether or not this machine has a driver


# --- the generated launch ([Note: a generated launch] in direct_launch.py), on the CPU --------------------------------


def generated_and_general(kind="poi", symbolic=True, x_first=False, device=-1, first_args=None,
                          unspecialized=frozenset()):
    """A ``KernelLauncher`` whose kernel was launched once with ``first_args`` (CPU tensors: device -1), with a
    stand-in for torch's launch call that records each call in ``calls``; returns ``(launcher, generated run,
    calls)``."""
    from triton import knobs

    from mininductor import direct_launch, runtime
    calls = []
    sig = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}
    sizes = [8, 8, 4, 8, 8]
    if kind == "tile":
        sig = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "rnumel": "i32", "XBLOCK": "constexpr",
               "RBLOCK": "constexpr"}
        sizes = [8, 8, 4, 4, 8, 8]
    loaded = types.SimpleNamespace(lib=StandInDriver(), name="k", function=0xF00, threads=128, shared=512,
                                   param_sizes=sizes)
    static = scl.StaticallyLaunchedCudaKernel(loaded, sig, device=device,
                                              torch_launch=lambda *call: calls.append(call))
    launcher = object.__new__(runtime.KernelLauncher)
    cfg = {"XBLOCK": 32, "RBLOCK": 8} if kind == "tile" else {"XBLOCK": 32}
    launcher.__dict__.update(fn=None, kind=kind, xnumel=100, rnumel=24, symbolic=symbolic, x_first=x_first,
                             empty=False, interpret=False, config=cfg, configs=[cfg], tuned=True, _direct={},
                             unspecialized=unspecialized)
    direct = object.__new__(direct_launch.DirectLauncher)
    constexprs = tuple(cfg.values())
    direct.kernel, direct.constexprs, direct.device, direct.hooks, direct.static = None, constexprs, device, \
        knobs.runtime, static
    direct.stream_of = lambda device: 77
    direct.grid = (*launcher._grid(cfg, first_args), 1, 1)[:3]
    launcher._direct[direct_launch.specialization_key(first_args, unspecialized)] = direct
    return launcher, direct_launch.generated_launch(launcher, direct, first_args), calls


@pytest.fixture
def no_compiles(monkeypatch):
    """A launch with a new specialization key compiles: here it is recorded instead."""
    from mininductor import runtime
    compiles = []
    monkeypatch.setattr(runtime.KernelLauncher, "_launch", lambda self, cfg, args: compiles.append(args))
    monkeypatch.setattr(config, "direct_launch", False)
    return compiles


def both_ways(launcher, generated, calls, compiles, args):
    """What the general path and the generated function each do with ``args``: (launch calls, compiles)."""
    from mininductor import runtime
    done = []
    for run in (lambda *a: runtime.KernelLauncher.run(launcher, *a), generated):
        del calls[:], compiles[:]
        try:
            run(*args)
            done.append((list(calls), [len(a) for a in compiles]))
        except ValueError as e:
            done.append(("raised", str(e)))
    return done


def test_the_generated_launch_does_what_the_general_path_does(no_compiles):
    x, out = torch.zeros(300), torch.zeros(300)
    launcher, generated, calls = generated_and_general(first_args=(x, out, 128))
    assert "launch(3840, (a2 + 31) // 32, 1, 1, 4, 512, 'OOiOO', (p0, p1, a2, None, None,), stream(-1))" \
        in generated.source
    cases = [
        (x, out, 128),  # the first launch's arguments
        (x, out, 48),  # another size of the same key: its own grid, same binary
        (out, x, 2**30),  # other tensors, still aligned
        (x, out, 0),  # empty: nothing launched
        (x, out, 50),  # not a multiple of 16: another key, compiled
        (x, out, 1),  # 1 is specialized
        (x, out, 2**31),  # needs 64 bits
        (x[1:], out, 32),  # a misaligned pointer
        (x, 2.0, 32),  # a float where the kernel had a tensor
        (x, out, 32.0),  # a float where it had an int
    ]
    outcomes = [both_ways(launcher, generated, calls, no_compiles, args) for args in cases]
    for args, (general, mine) in zip(cases, outcomes):
        assert mine == general, (args, general, mine)
    launched = [general[0][0][1:4] if general[0] else None for general, _ in outcomes[:4]]
    assert launched == [(4, 1, 1), (2, 1, 1), (2**25, 1, 1), None]
    assert [len(general[1]) for general, _ in outcomes[4:8]] == [1, 1, 1, 1]  # each compiled, none launched


def test_an_int_the_kernel_does_not_specialize_on_takes_the_generated_launch_for_every_value(no_compiles):
    """[Note: ints a kernel does not specialize on]: the mask gather's row count is in its kernel's
    ``do_not_specialize``; 1, 16 and 50 rows launch the one binary, through the generated launch."""
    x, out = torch.zeros(300), torch.zeros(300)
    launcher, generated, calls = generated_and_general(first_args=(x, out, 50), unspecialized=frozenset({2}))
    assert "type(a2) is not int or (-2147483648 <= a2 < 2147483648, a2 >= 0) != (True, True)" in generated.source
    for n in (1, 16, 50):
        general, mine = both_ways(launcher, generated, calls, no_compiles, (x, out, n))
        assert mine == general and general[1] == [] and len(general[0]) == 1  # launched, nothing compiled
    general, mine = both_ways(launcher, generated, calls, no_compiles, (x, out, 2**31))  # 64 bits: another binary
    assert mine == general and general[1] == [3]


def test_a_generated_launch_leaves_a_foreign_tensor_and_launch_hooks_to_the_general_path(no_compiles):
    from triton import knobs
    x, out = torch.zeros(64), torch.zeros(64)
    # a launcher of device 0 handed CPU tensors: the general path's device check raises, before any launch
    launcher, generated, calls = generated_and_general(device=0, first_args=(x, out, 64))
    general, mine = both_ways(launcher, generated, calls, no_compiles, (x, out, 64))
    assert general == mine == ("raised", "k: argument 0 is on cpu, not on cuda:0")
    # a profiler's launch hook: the general path launches through Triton's kernel.run, so must the generated one
    launcher, generated, calls = generated_and_general(first_args=(x, out, 64))
    seen = []
    direct = next(iter(launcher._direct.values()))
    direct.kernel = types.SimpleNamespace(launch_metadata=lambda *a: "meta", function=1, packed_metadata=2,
                                          run=lambda *a: seen.append(a[:4]))
    hooks = knobs.runtime.launch_enter_hook.calls
    hooks.append(lambda metadata: None)
    try:
        both_ways(launcher, generated, calls, no_compiles, (x, out, 64))
    finally:
        hooks.pop()
    assert seen == [(2, 1, 1, 77), (2, 1, 1, 77)] and calls == []


@pytest.mark.parametrize("x_first", [False, True])
@pytest.mark.parametrize("symbolic", [False, True])
def test_a_generated_tile_launch_has_the_general_paths_grid(no_compiles, symbolic, x_first):
    x, out = torch.zeros(2400), torch.zeros(2400)
    launcher, generated, calls = generated_and_general("tile", symbolic, x_first, first_args=(x, out, 100, 24))
    general, mine = both_ways(launcher, generated, calls, no_compiles, (x, out, 100, 24))
    assert general == mine and general[0][0][1:4] == ((4, 3, 1) if x_first else (3, 4, 1))


# --- on a GPU --------------------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(DEVICE != "cuda", reason="launches real kernels (MININDUCTOR_TEST_DEVICE=cuda)")


@pytest.fixture(autouse=True)
def static_launcher_on(monkeypatch):
    """On by default (config.static_cuda_launcher), but MINICOMPILE_STATIC_CUDA_LAUNCHER=0 turns it off: these tests
    turn it on."""
    monkeypatch.setattr(config, "static_cuda_launcher", True)


@gpu
@pytest.mark.parametrize("fn, args", [
    (lambda x: torch.sin(x) * 2, (torch.randn(1000),)),  # pointwise, static size
    (lambda x: torch.softmax(x, -1), (torch.randn(64, 3000),)),  # a reduction (persistent or looped)
    (lambda x, y: (x.t() + y).relu(), (torch.randn(300, 200), torch.randn(200, 300))),  # a tile
    (lambda x: x[x.shape[0] // 2 + 1:].exp() + x.sum(), (torch.randn(4097),)),  # a misaligned view
])
def test_kernels_launch_through_the_static_launcher(fn, args):
    check(fn, *args)
    assert metrics.static_launcher_kernels >= 1 and metrics.triton_launcher_kernels == 0


@gpu
def test_a_cpu_scalar_reaches_the_kernel_as_an_fp32_argument():
    from .utils import compile_fn
    metrics.reset()
    x = torch.randn(500, device="cuda")
    compiled = compile_fn(lambda x, s: x * s + 1, x, torch.tensor(0.5))
    for value in (0.5, -3.25):  # the same binary: a float argument is not specialized
        torch.testing.assert_close(compiled(x, torch.tensor(value)), x * value + 1)
    assert metrics.static_launcher_kernels == 1 and metrics.triton_launcher_kernels == 0


@gpu
def test_symbolic_sizes_and_a_thread_without_cuda_state():
    metrics.reset()
    minidynamo.reset()
    compiled = minidynamo.minicompile(lambda x: torch.nn.functional.gelu(x) * x.shape[0], dynamic=True)
    for rows in (5, 17, 64, 3):
        x = torch.randn(rows, 33, device="cuda")
        torch.testing.assert_close(compiled(x), torch.nn.functional.gelu(x) * rows)
    results = {}

    def in_a_new_thread():  # a thread that has made no CUDA call yet when it launches
        try:
            x = torch.randn(9, 33, device="cuda")
            # assert_close's float32 tolerances: allclose's default atol of 1e-8 fails where gelu's 1 + erf(x/√2)
            # cancels (x near -4: one ulp of erf moves the result by about 1e-6), which a random input can reach
            results["ok"] = torch.allclose(compiled(x), torch.nn.functional.gelu(x) * 9, rtol=1.3e-6, atol=1e-5)
        except Exception as e:  # noqa: BLE001 - reported by the assert below, not lost in the thread
            results["error"] = repr(e)
    thread = threading.Thread(target=in_a_new_thread)
    thread.start()
    thread.join()
    assert results == {"ok": True}, results
    counts = (metrics.static_launcher_kernels, metrics.triton_launcher_kernels, metrics.generated_kernel_count)
    assert counts[0] >= 1 and counts[1] == 0, counts  # (static, Triton's, generated)


@gpu
@pytest.mark.parametrize("via_torch", [True, False])
def test_both_launch_calls_agree_with_eager(monkeypatch, via_torch):
    # torch's C++ call (the default where torch has it) and our ctypes call ([Note: the launch call])
    monkeypatch.setattr(config, "static_launch_via_torch", via_torch)
    metrics.reset()
    minidynamo.reset()
    x, y = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    c = 2.0 if via_torch else 3.0  # a different graph for each case: a cached one would keep its launchers

    def fn(x, y, n):
        return (x[:n] * n).sin() * c + y[:n].exp()
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n in (5, 17, 2000):
        torch.testing.assert_close(compiled(x, y, n), fn(x, y, n))
    assert metrics.static_launcher_kernels >= 1 and metrics.triton_launcher_kernels == 0


@gpu
def test_switched_off_triton_launches_as_before(monkeypatch):
    monkeypatch.setattr(config, "static_cuda_launcher", False)
    check(lambda x: torch.cos(x) + 3, torch.randn(777))
    assert metrics.static_launcher_kernels == 0 and metrics.triton_launcher_kernels >= 1


@gpu
def test_later_launches_of_a_kernel_go_through_its_generated_launch(monkeypatch):
    # [Note: a generated launch]: after a kernel's first launch, calls with the same specialization key never reach
    # KernelLauncher.run (the general path); one of another key (here a size not divisible by 16) does, once
    from mininductor import runtime
    general = []
    real_run = runtime.KernelLauncher.run
    monkeypatch.setattr(runtime.KernelLauncher, "run", lambda self, *a: (general.append(a[-1]), real_run(self, *a)))
    metrics.reset()
    minidynamo.reset()

    def fn(x):
        return torch.nn.functional.gelu(x) * x.shape[0] + 1

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows in (64, 48, 16, 64):  # 33 * rows: each a multiple of 16, one key
        x = torch.randn(rows, 33, device="cuda")
        torch.testing.assert_close(compiled(x), fn(x), rtol=1.3e-6, atol=1e-5)
    assert general == [64 * 33] and metrics.generated_launches == metrics.static_launcher_kernels == 1
    x = torch.randn(5, 33, device="cuda")
    torch.testing.assert_close(compiled(x), fn(x), rtol=1.3e-6, atol=1e-5)
    assert general == [64 * 33, 5 * 33] and metrics.static_launcher_kernels == 2 and metrics.generated_launches == 1
