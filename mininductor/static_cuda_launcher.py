"""``static_cuda_launcher``: launch a compiled Triton kernel with one CUDA driver call, from Python (GPU only).

Mirrors ``torch/_inductor/runtime/static_triton_launcher.py`` (``StaticallyLaunchedCudaKernel``; the file was
``static_cuda_launcher.py`` before), which does the same in C++.  In: a ``CompiledKernel`` that Triton compiled (``fn.warmup(...)`` returns one without launching it) and a
launch's arguments.  Out: the kernel running on the current stream.

Why it exists.  A kernel launch is, in the end, one driver call::

    cuLaunchKernel(function, gridX, gridY, gridZ, 32 * num_warps, 1, 1, shared_bytes, stream, params, NULL)

where ``function`` is the kernel loaded from its cubin (``cuModuleLoadData`` + ``cuModuleGetFunction``) and
``params`` is an array of pointers, one to each argument's bytes.  Triton 3.6 builds that call as a small C
extension per argument signature (``make_launcher`` in its CUDA driver), and compiling that C with ``gcc`` takes
0.15-0.2 s the first time each signature is met: on the tutorial MoE's first call, that was a good share of the
time spent waiting for kernels (docs/benchmarks.md).  Upstream Inductor avoids it with a launcher written once in
C++; we write ours once in Python, with ``ctypes``, so there is nothing to compile.

[Note: the kernel's parameters]  What goes into ``params`` follows the kernel's signature, which Triton records in
``kernel.src.signature`` (argument name -> type: ``"*fp32"``, ``"i32"``, ``"fp32"``, ``"constexpr"``):

* a ``constexpr`` is compiled into the kernel and is not a parameter -- our ``XBLOCK``/``RBLOCK``, and an int
  argument that Triton specialized because it was 1;
* a pointer (``*fp32``) is the tensor's ``data_ptr()``, 8 bytes; ints and floats are their C type;
* after the user's arguments, Triton appends pointers of its own (scratch memory for the kernel, a profiler
  buffer): we pass NULL, and only launch kernels that asked for no scratch memory.

Rather than trust our reading of one Triton version, each loaded kernel asks the driver for its real parameter
list (``cuFuncGetParamInfo``: offset and size of every parameter) and is used only when the two agree.  Anything
we do not handle -- tensor descriptors, tuples, clusters, cooperative or PDL launches, scratch memory, a size
that disagrees, no GPU driver -- returns None, and the caller launches through Triton as before.

Left out (upstream's C++ launcher has them): bf16/fp16/bool scalar arguments.

On by default since the CUDA suite passed with it (``config.static_cuda_launcher``; ``MINICOMPILE_STATIC_CUDA_LAUNCHER=0``
launches everything through Triton instead): see chapter 8.
"""
from __future__ import annotations

import contextlib
import ctypes
import struct
import threading
import weakref
from typing import Any

# Triton's scalar types we pass, as ``struct`` codes; every parameter gets an 8-byte slot in our buffer.
_SCALAR_CODES = {"i32": "i4x", "u32": "I4x", "i64": "q", "u64": "Q", "fp32": "f4x", "fp64": "d"}
_SIZES = {"i": 4, "I": 4, "q": 8, "Q": 8, "f": 4, "d": 8}

# CUDA driver enums (cuda.h) used below.
_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
_CUDA_ERROR_INVALID_CONTEXT = 201


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's error string)."""


class OutOfResources(RuntimeError):
    """The kernel needs more shared memory or threads than the device gives one block (like Triton's error of
    the same name, so autotuning skips such a config)."""


# ---------------------------------------------------------------------------------------------------------
# The driver, through ctypes.
# ---------------------------------------------------------------------------------------------------------

_DRIVER: Any = None
_DRIVER_LOCK = threading.Lock()


def driver() -> Any:
    """``libcuda`` with the argument types of the calls we make (None where there is no CUDA driver)."""
    global _DRIVER
    with _DRIVER_LOCK:
        if _DRIVER is None:
            try:
                _DRIVER = _load_driver()
            except (OSError, AttributeError):  # no libcuda, or one too old for cuFuncGetParamInfo (CUDA < 12.4)
                _DRIVER = False
        return _DRIVER or None


def _load_driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    signatures = {
        "cuModuleLoadData": [ctypes.POINTER(p), ctypes.c_char_p],
        "cuModuleGetFunction": [ctypes.POINTER(p), p, ctypes.c_char_p],
        "cuModuleUnload": [p],
        "cuFuncGetAttribute": [ctypes.POINTER(i), i, p],
        "cuFuncSetAttribute": [p, i, i],
        "cuFuncGetParamInfo": [p, s, ctypes.POINTER(s), ctypes.POINTER(s)],
        "cuCtxGetCurrent": [ctypes.POINTER(p)],
        "cuCtxSetCurrent": [p],
        "cuCtxGetDevice": [ctypes.POINTER(i)],
        "cuDevicePrimaryCtxRetain": [ctypes.POINTER(p), i],
        "cuDeviceGetAttribute": [ctypes.POINTER(i), i, i],
        "cuGetErrorString": [i, ctypes.POINTER(ctypes.c_char_p)],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    # cuLaunchKernel(f, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes, stream, params, extra) runs on
    # every launch, and ctypes converting eleven declared argument types costs three times the call itself: it is
    # called undeclared, with the pointers as ready-made c_void_p objects and the counts as Python ints (C ints).
    lib.cuLaunchKernel.restype = ctypes.c_int
    return lib


def ensure_context(lib: Any, device: int) -> None:
    """Make ``device``'s primary context (the one PyTorch uses) current on this thread if none is: the driver
    API acts on the calling thread's context, and a thread that has not touched CUDA yet has none."""
    context = ctypes.c_void_p()
    check(lib, lib.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
    if not context.value:
        check(lib, lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
        check(lib, lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")


def check(lib: Any, result: int, call: str) -> None:
    """Raise ``CudaDriverError`` for a failed driver call."""
    if result != 0:
        text = ctypes.c_char_p()
        lib.cuGetErrorString(result, ctypes.byref(text))
        message = text.value.decode() if text.value else f"error {result}"
        raise CudaDriverError(f"{call} failed: {message} (CUDA driver error {result})")


# ---------------------------------------------------------------------------------------------------------
# Loading a kernel, and the parameter layout.
# ---------------------------------------------------------------------------------------------------------


def param_layout(signature: dict[str, Any], param_sizes: list[int]) -> tuple[list[tuple[int, bool]], str] | None:
    """``(slots, fmt)`` for a kernel with this Triton ``signature`` whose parameters the driver says have these
    byte sizes, or None if we cannot launch it ([Note: the kernel's parameters]).

    ``slots`` lists, per kernel parameter we fill, ``(index of the launch argument, is_pointer)``; ``fmt`` is the
    ``struct`` format that packs their values into 8-byte slots, then NULL for Triton's own trailing pointers.
    """
    slots, codes = [], []
    for index, ty in enumerate(signature.values()):
        if ty == "constexpr":
            continue
        if not isinstance(ty, str):  # a tuple argument: not handled
            return None
        code = "Q" if ty.startswith("*") else _SCALAR_CODES.get(ty)
        if code is None:  # bf16/fp16/bool scalars, tensor descriptors
            return None
        slots.append((index, ty.startswith("*")))
        codes.append(code)
    extra = len(param_sizes) - len(codes)
    sizes = [_SIZES[c[0]] for c in codes] + [8] * extra
    if extra < 0 or sizes != list(param_sizes):
        return None
    return slots, "=" + "".join(codes) + "8x" * extra


class LoadedKernel:
    """A ``CompiledKernel``'s cubin loaded in the current CUDA context: the function handle and launch shape."""

    def __init__(self, kernel: Any, lib: Any) -> None:
        meta = kernel.metadata
        self.lib, self.name = lib, meta.name
        module = ctypes.c_void_p()
        check(lib, lib.cuModuleLoadData(ctypes.byref(module), kernel.kernel), f"cuModuleLoadData({self.name})")
        self.module = module.value
        weakref.finalize(self, _unload, lib, self.module).atexit = False
        function = ctypes.c_void_p()
        check(lib, lib.cuModuleGetFunction(ctypes.byref(function), module, self.name.encode()),
              f"cuModuleGetFunction({self.name})")
        self.function = function.value
        self.threads = meta.num_warps * getattr(meta, "warp_size", 32)
        self.shared = meta.shared
        self._allow_shared_memory()
        if self.threads > self._attribute(_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK):
            raise OutOfResources(f"{self.name}: {self.threads} threads per block is more than the device allows")
        self.param_sizes = self._param_sizes()

    def _attribute(self, attribute: int) -> int:
        value = ctypes.c_int()
        check(self.lib, self.lib.cuFuncGetAttribute(ctypes.byref(value), attribute, self.function),
              "cuFuncGetAttribute")
        return value.value

    def _allow_shared_memory(self) -> None:
        """Past 48 KB of dynamic shared memory a kernel must opt in (as Triton's ``load_binary`` does)."""
        if self.shared <= 48 * 1024:
            return
        device, optin = ctypes.c_int(), ctypes.c_int()
        check(self.lib, self.lib.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice")
        check(self.lib, self.lib.cuDeviceGetAttribute(
            ctypes.byref(optin), _CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device), "cuDeviceGetAttribute")
        static = self._attribute(_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        if self.shared > optin.value - static:
            raise OutOfResources(f"{self.name}: {self.shared} bytes of shared memory is more than the device allows")
        check(self.lib, self.lib.cuFuncSetAttribute(
            self.function, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin.value - static), "cuFuncSetAttribute")

    def _param_sizes(self) -> list[int]:
        """The byte size of each of the kernel's parameters, as the driver reads them from the cubin."""
        sizes, offset, size = [], ctypes.c_size_t(), ctypes.c_size_t()
        while self.lib.cuFuncGetParamInfo(self.function, len(sizes), ctypes.byref(offset), ctypes.byref(size)) == 0:
            sizes.append(size.value)
        return sizes


def _unload(lib: Any, module: int) -> None:
    with contextlib.suppress(Exception):  # at interpreter exit the driver may already be gone
        lib.cuModuleUnload(module)


_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # CompiledKernel -> {device: LoadedKernel}
_LOAD_LOCK = threading.Lock()


def launchable(kernel: Any) -> bool:
    """Whether ``kernel`` (a Triton ``CompiledKernel``) asks for nothing this launcher leaves out."""
    meta = getattr(kernel, "metadata", None)
    src = getattr(kernel, "src", None)
    return meta is not None and isinstance(getattr(src, "signature", None), dict) \
        and getattr(meta, "num_ctas", 1) == 1 and tuple(getattr(meta, "cluster_dims", (1, 1, 1))) in ((1, 1, 1), ()) \
        and not getattr(meta, "launch_cooperative_grid", False) and not getattr(meta, "launch_pdl", False) \
        and not getattr(meta, "global_scratch_size", 0) and not getattr(meta, "profile_scratch_size", 0) \
        and not getattr(meta, "tensordesc_meta", None) and isinstance(getattr(kernel, "kernel", None), bytes)


def load(kernel: Any, device: int | None = None) -> LoadedKernel | None:
    """``kernel``'s binary loaded on ``device`` (default: the device of this thread's current context; once per
    kernel and device), or None where we cannot launch it.  Raises ``OutOfResources`` for a kernel too large for
    the device, as Triton's first launch would."""
    lib = driver()
    if lib is None or not launchable(kernel):
        return None
    if device is not None:
        ensure_context(lib, device)
    current = ctypes.c_int()
    if lib.cuCtxGetDevice(ctypes.byref(current)) != 0 or device not in (None, current.value):
        return None  # no context on this thread, or another device's: leave the kernel to Triton
    device = current.value
    with _LOAD_LOCK:
        per_device = _LOADED.setdefault(kernel, {})
        if device not in per_device:
            loaded = LoadedKernel(kernel, lib)
            usable = param_layout(kernel.src.signature, loaded.param_sizes) is not None
            per_device[device] = loaded if usable else None
        return per_device[device]


# ---------------------------------------------------------------------------------------------------------
# Launching.
# ---------------------------------------------------------------------------------------------------------


class StaticallyLaunchedCudaKernel:
    """``launch(args, grid, stream)``: one ``cuLaunchKernel`` with ``args`` packed as the kernel expects.

    ``args`` are the launch's arguments in the kernel's order, constexprs included (they are skipped).  The values
    are packed with one ``struct.pack_into`` into a buffer whose slot addresses ``params`` holds; a lock keeps two
    threads launching the same kernel from packing into it at once.  Where torch has its C++ launch call
    (``torch_launch``), that call packs the values and calls the driver instead: [Note: the launch call].
    """

    __slots__ = ("buffer", "device", "fmt", "function", "handle", "launch_fn", "lib", "lock", "name", "nulls",
                 "params", "shared", "slots", "stream", "threads", "torch_launch", "types", "warps")

    def __init__(self, loaded: LoadedKernel, signature: dict[str, Any], device: int,
                 torch_launch: Any = None) -> None:
        layout = param_layout(signature, loaded.param_sizes)
        assert layout is not None, "load() returns only kernels whose parameters we can pack"
        self.slots, self.fmt = layout
        # for torch's launch call: a type letter per parameter we fill, then NULL for Triton's own pointers
        self.types = "".join("O" if ty.startswith("*") else _TORCH_TYPES[ty]
                             for ty in signature.values() if ty != "constexpr")
        self.nulls = (None,) * (len(loaded.param_sizes) - len(self.slots))
        self.types += "O" * len(self.nulls)
        self.handle, self.warps = loaded.function, loaded.threads // 32
        self.torch_launch = torch_launch
        self.name, self.function = loaded.name, ctypes.c_void_p(loaded.function)
        self.threads, self.shared = loaded.threads, loaded.shared
        self.buffer = ctypes.create_string_buffer(max(8, struct.calcsize(self.fmt)))
        base = ctypes.addressof(self.buffer)
        count = len(loaded.param_sizes)
        self.params = (ctypes.c_void_p * max(1, count))(*[base + 8 * k for k in range(count)])
        self.lib, self.launch_fn = loaded.lib, loaded.lib.cuLaunchKernel
        self.lock = threading.Lock()
        self.device = device
        self.stream = ctypes.c_void_p(0)  # the stream of the last launch, as the pointer cuLaunchKernel takes

    def launch(self, args, grid: tuple[int, int, int], stream: int) -> None:
        values = [self._pointer(args[k], k) if pointer else args[k] for k, pointer in self.slots]
        if self.torch_launch is not None:
            self.torch_launch(self.handle, grid[0], grid[1], grid[2], self.warps, self.shared, self.types,
                              (*values, *self.nulls), stream)
            return
        with self.lock:
            struct.pack_into(self.fmt, self.buffer, 0, *values)
            result = self._launch(grid, stream)
            if result == _CUDA_ERROR_INVALID_CONTEXT:  # a thread that has not used CUDA yet: give it the context
                ensure_context(self.lib, self.device)
                result = self._launch(grid, stream)
        if result != 0:
            check(self.lib, result, f"cuLaunchKernel({self.name})")

    def _pointer(self, tensor, index: int) -> int:
        """A tensor argument's address, which must be memory of the kernel's device: a host pointer would make the
        kernel fault (an illegal memory access that ends the process's CUDA context) where Triton's launcher, which
        checks every pointer, raises.  A compiled graph called without guards (``compile_fx_inner``'s result) can
        be handed CPU tensors."""
        if tensor.get_device() != self.device:
            raise ValueError(f"{self.name}: argument {index} is on {tensor.device}, not on cuda:{self.device}")
        return tensor.data_ptr()

    def _launch(self, grid: tuple[int, int, int], stream: int) -> int:
        if self.stream.value != (stream or None):
            self.stream = ctypes.c_void_p(stream)
        return self.launch_fn(self.function, grid[0], grid[1], grid[2], self.threads, 1, 1, self.shared,
                              self.stream, self.params, None)


def make(kernel: Any, device: int) -> StaticallyLaunchedCudaKernel | None:
    """A launcher for ``kernel`` on ``device``, or None where Triton's own launcher must be used."""
    loaded = load(kernel, device)
    if loaded is None:
        return None
    return StaticallyLaunchedCudaKernel(loaded, kernel.src.signature, device, torch_launch_call(device))


# [Note: the launch call]  Packing the arguments and calling ``cuLaunchKernel`` through ctypes costs 8.0-8.8 us of
# host time per launch on the H200 hosts; torch's C++ launcher (``torch._C._StaticCudaLauncher._launch_kernel``,
# the call upstream's ``StaticallyLaunchedCudaKernel.run`` makes) does the same packing and call in 6.2-6.9 us
# (bench/host_breakdown.py).  The tutorial MoE's forward makes about 130 launches, so we hand the launch to it
# where torch has it: the same ``(function, grid, num_warps, shared bytes, types, values, stream)``, with a type
# letter per parameter ('O' for a pointer, which we pass as an int after our device check; 'i', 'l', 'f', ...
# for scalars; None for Triton's trailing pointers).  Everything before the call -- loading the cubin, checking
# the parameter list, the device check -- stays ours.  Two cases keep the ctypes call: a torch without the C++
# launcher, and a kernel of a device other than 0 -- in a thread with no CUDA context, torch's call makes device
# 0's context current, where ours makes the kernel's device's (``ensure_context``).
# ``config.static_launch_via_torch`` (``MINICOMPILE_TORCH_LAUNCH=0``) turns it off.
_TORCH_TYPES = {"i32": "i", "u32": "I", "i64": "l", "u64": "K", "fp32": "f", "fp64": "d"}  # Triton type -> letter


def torch_launch_call(device: int) -> Any:
    """torch's C++ launch call for kernels of ``device``, or None where the ctypes call is used instead."""
    from . import config
    if not config.static_launch_via_torch or device != 0:
        return None
    import torch
    return getattr(getattr(torch._C, "_StaticCudaLauncher", None), "_launch_kernel", None)
