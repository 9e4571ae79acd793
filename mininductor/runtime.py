"""Runtime: the on-disk code cache and the kernel launcher (grids, block sizes, autotuning)
(mirrors ``torch/_inductor/codecache.py`` and ``runtime/triton_heuristics.py``).

* ``load_module(source, interpret)`` writes ``output_code.py`` under ``config.cache_dir`` (Triton's JIT reads
  kernel source from a real file) and imports it -- with ``TRITON_INTERPRET=1`` for CPU graphs, so the same
  kernels run on CPU tensors through Triton's interpreter.
* ``KernelLauncher`` picks ``XBLOCK``/``RBLOCK``/``num_warps`` from the kernel kind and sizes, computes the grid
  ``(cdiv(xnumel, XBLOCK),)`` and launches. Interpreted, a program costs milliseconds, so blocks are huge.
  Under ``mode="max-autotune"`` the first call times a few configs and keeps the fastest. On a GPU its later
  launches of a compiled kernel are ``direct_launch.py``'s.

CUDA graphs (``mode="reduce-overhead"``) are in ``cudagraphs.py``.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy
import torch

from . import config, metrics
from .compile_worker import interpret_mode  # torch-free, so a compile worker can use it too
from .direct_launch import DirectLauncher, generated_launch, specialization_key
from .indexing import next_power_of_2


def empty_strided(size, stride, *, device, dtype):
    return torch.empty_strided(size, stride, device=device, dtype=dtype)


# [Note: allocating on the GPU]  A CUDA graph's wrapper allocates with torch's C++ ``_empty_strided_cuda(size,
# stride, dtype)``, as Inductor's does: about 1 us of host time against 2-4.5 us for ``torch.empty_strided(...,
# device='cuda:0')``, which parses its keyword arguments and the device string on every call (the tutorial MoE's
# forward allocates about a hundred buffers).  It allocates on the *current* device, so the wrapper's ``call``
# first checks that the current device is the graph's (``current_cuda_device``, one C call) and otherwise runs
# itself again under ``torch.cuda.device(index)`` -- where Inductor's wrapper enters a ``_DeviceGuard`` on every
# call.  Where torch lacks either function, the wrapper keeps ``empty_strided``.
empty_strided_cuda = getattr(torch._C._dynamo.guards, "_empty_strided_cuda", None)
current_cuda_device = getattr(torch._C, "_cuda_getDevice", None)


def _cuda_option_exists(name: str) -> bool:
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return False
    return name in getattr(CUDAOptions, "__dataclass_fields__", {})


# [Note: denormals in libdevice]  Triton links CUDA's libdevice with nvvm-reflect's flush-to-zero flag on
# (``enable_reflect_ftz``, True by default), so ``erfcf``, ``tanhf``, ``expm1f``... flush denormal arguments and
# results to zero. Eager's CUDA kernels, built by nvcc without ``--ftz``, keep them: ``erfc(10.)`` is 1.4e-45
# there and was 0 in our kernels, and an ``xlogy`` after it turned that into -inf against 0 (GPU lowering fuzz
# --zero, seed 5504346, twenty-fourth session); ``tanh(1e-40)`` is 1e-40, not 0. So every GPU kernel compiles
# with the flag off, where this Triton has it. The interpreter computes with NumPy, which keeps denormals.
KEEP_DENORMALS: dict = {"enable_reflect_ftz": False} if _cuda_option_exists("enable_reflect_ftz") else {}


def reinterpret_tensor(tensor, size, stride, offset):
    """A strided view ``offset`` elements past ``tensor``'s first element (not its storage's)."""
    return torch.as_strided(tensor, size, stride, tensor.storage_offset() + offset)


def aten_entry(op: torch._ops.OpOverload) -> Callable:
    """``op``'s C++ entry, which its ``__call__`` forwards to ([Note: extern calls] in codegen/wrapper.py)."""
    entry = getattr(op, "_op", None)
    return entry if callable(entry) else op


def ensure_layout(tensor, size, stride):
    """An extern or fallback result with the strides the kernels were generated for. Tracing predicts them
    (fake tensors); should a library choose others at run time, copy rather than read the wrong elements."""
    if tuple(tensor.stride()) == tuple(stride) or tensor.numel() <= 1:
        return tensor
    out = torch.empty_strided(size, stride, dtype=tensor.dtype, device=tensor.device)
    out.copy_(tensor)
    return out


_STDLIB_SWAPS: list | None = None


@contextlib.contextmanager
def interpreted_stdlib():
    """Let interpreted kernels call ``tl.sum``/``tl.max``/... even when Triton was imported without
    ``TRITON_INTERPRET=1`` (those helpers are then compiled-only ``JITFunction``s): swap in interpreted twins
    for the duration of a launch. [Note: Triton decides compiled vs interpreted when a function is decorated.]"""
    global _STDLIB_SWAPS
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    if _STDLIB_SWAPS is None:
        _STDLIB_SWAPS = [(tl, name, obj, InterpretedFunction(obj.fn)) for name, obj in vars(tl).items()
                         if isinstance(obj, JITFunction)]
        _fix_interpreter_index()
    saved = _snapshot_lang(tl)
    for module, name, _, interpreted in _STDLIB_SWAPS:
        setattr(module, name, interpreted)
    try:
        with numpy.errstate(all="ignore"):  # masked-off lanes may divide by zero; their results are dropped
            yield
    finally:
        for module, name, original, _ in _STDLIB_SWAPS:
            setattr(module, name, original)
        _restore_lang(saved)


def _snapshot_lang(tl) -> list[tuple[object, dict]]:
    """The attributes of ``triton.language`` (and the classes it patches) before an interpreted launch.

    [Note: interpreter patches leak]  Triton's interpreter runs a kernel with ``tl.program_id``, ``tl.tensor``'s
    operators etc. swapped for NumPy versions, and undoes that when the kernel ends -- but a *device function*
    called from it (our interpreted ``tl.sum`` twins) patches again and never undoes it (Triton <= 3.6).  The
    next *compiled* kernel in the process then fails to build (``'ir.value' object has no attribute 'dtype'``),
    so a process that runs a CPU graph and then a GPU graph broke.  We put back whatever changed."""
    objects = [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype,
               getattr(tl.core, "tensor_descriptor_base", None)]
    return [(obj, dict(vars(obj))) for obj in objects if obj is not None]


def _restore_lang(saved: list[tuple[object, dict]]) -> None:
    for obj, before in saved:
        now = vars(obj)
        for name in [n for n in now if n not in before and not isinstance(now[n], types.ModuleType)]:
            delattr(obj, name)  # (a submodule imported meanwhile stays: it is an import, not a patch)
        for name, value in before.items():
            if now.get(name, _MISSING) is not value:
                setattr(obj, name, value)


_MISSING = object()


def _fix_interpreter_index() -> None:
    """Triton <= 3.6's interpreter turns a scalar argument into a 1-element array and defines ``__index__`` as
    ``int(array)``, which NumPy >= 2.5 refuses for 1-d arrays: ``range(0, rnumel, RBLOCK)`` then fails.
    Triton 3.7+ squeezes first; on older versions we wrap its patching to do the same (so does PyTorch)."""
    import triton.runtime.interpreter as interp
    original = getattr(interp, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_minicompile_fixed", False):
        return

    def index(self) -> int:
        return int(numpy.asarray(self.handle.data).reshape(-1)[0])

    def patch_lang_tensor(tensor, *scope):  # (tensor) on older Triton, (tensor, scope) on 3.5-3.6
        original(tensor, *scope)
        if scope and hasattr(scope[0], "set_attr"):
            scope[0].set_attr(tensor, "__index__", index)  # restored with the rest when the launch ends
        else:
            tensor.__index__ = index

    patch_lang_tensor._minicompile_fixed = True
    interp._patch_lang_tensor = patch_lang_tensor


def load_module(source: str, interpret: bool):
    """Write ``source`` to the code cache (named by its hash) and import it -- once per process, device kind and
    autotuning: the module's launchers choose their candidate configs when it is imported, and under
    ``mode="max-autotune"`` they take more of them, so a graph compiled under both modes gets a module for each
    (the second reused the first's launchers, untimed)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:20]
    os.makedirs(config.cache_dir, exist_ok=True)
    path = os.path.join(config.cache_dir, f"c{key}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    name = f"mininductor_cache_{key}_{'cpu' if interpret else 'gpu'}" + \
        ("_autotune" if config.mode == "max-autotune" else "")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if interpret:
        _fix_interpreter_index()
    with interpret_mode(interpret):
        spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


# ------------------------------------------------------------------------------------------------ launcher
# Elements: below this a kernel is latency-bound and its config hardly matters -- no autotuning (every candidate
# is one more Triton compile on the first call; the MoE has dozens of such kernels), except in mode="max-autotune".
SMALL_KERNEL = 1 << 20


# The hints of a matmul lowered as a reduction (codegen/tiling.reduction_hint), and the block sizes each takes.
MATMUL_HINTS = {"skinny_mm": "inner", "outer_mm": "outer"}


def candidate_configs(kind: str, xnumel: int, rnumel: int, hint: str = "inner", interpret: bool = False) -> list[dict]:
    """The block sizes a kernel may be launched with (the first is the default; the GPU times them all once).

    The code generator reads them too: when every candidate block divides a static size, the kernel's mask on
    that axis is always true and is written as a constant (``tl.full(..., True)``), which Triton folds away.
    """
    matmul = hint in MATMUL_HINTS
    configs = _configs(kind, xnumel, rnumel, MATMUL_HINTS.get(hint, hint), interpret)
    small = xnumel * rnumel < SMALL_KERNEL and config.mode != "max-autotune"
    # a matmul's reduction takes the rule's config untimed: the tutorial MoE makes dozens of them, and timing
    # their candidates doubled its first call ([Note: a skinny mm as a reduction] in extern_lowering.py)
    return configs[:1] if small or matmul else configs


def _configs(kind: str, xnumel: int, rnumel: int, hint: str, interpret: bool) -> list[dict]:
    x, r = next_power_of_2(xnumel), next_power_of_2(rnumel)
    if interpret:
        cap = config.interpret_block_max
        if kind == "poi":
            return [{"XBLOCK": min(x, cap)}]
        if kind == "tile":
            return [{"XBLOCK": min(x, 256), "RBLOCK": min(r, 256)}]
        rblock = min(r, cap, config.looped_reduction_rblock or cap)
        return [{"XBLOCK": max(1, min(x, cap // rblock)), "RBLOCK": rblock}]
    if kind == "poi":
        if x <= 1024:
            return [{"XBLOCK": max(x, 128), "num_warps": 4}]
        if config.mode != "max-autotune":
            return [{"XBLOCK": 1024, "num_warps": 4}]
        return [{"XBLOCK": 1024, "num_warps": 4}, {"XBLOCK": 2048, "num_warps": 8},
                {"XBLOCK": 512, "num_warps": 4}, {"XBLOCK": 4096, "num_warps": 8}]
    if kind == "tile":  # 8192^2 transpose-add on an H200: 64x64 190.9 us, 64x32 191.6, 32x64 193.1, 32x32 193.7
        return [{"XBLOCK": 64, "RBLOCK": 64, "num_warps": 8}, {"XBLOCK": 32, "RBLOCK": 32, "num_warps": 4},
                {"XBLOCK": 32, "RBLOCK": 128, "num_warps": 8}, {"XBLOCK": 128, "RBLOCK": 32, "num_warps": 8},
                {"XBLOCK": 64, "RBLOCK": 32, "num_warps": 4}]
    if kind == "per":
        xblock = max(1, min(x, 2048 // r if r < 2048 else 1))
        warps = max(1, min(16, (xblock * r) // 512))
        cands = [{"XBLOCK": xblock, "RBLOCK": r, "num_warps": warps}]
        for w in (warps // 2, warps * 2):  # the neighbours: 1-2% either way on an H200 (bench/kernel_configs.py)
            if 1 <= w <= 32 and w * 32 <= xblock * r:
                cands.append({"XBLOCK": xblock, "RBLOCK": r, "num_warps": w})
        return cands
    if config.looped_reduction_rblock:
        return [{"XBLOCK": 1, "RBLOCK": config.looped_reduction_rblock, "num_warps": 4}]
    if hint == "outer" and r <= 64:  # a few rows (a split column reduction's partials): one step of the loop
        return [{"XBLOCK": min(x, 128), "RBLOCK": r, "num_warps": 4}]
    if hint == "outer":  # columns: a few contiguous outputs per program, many rows per step
        return [{"XBLOCK": 32, "RBLOCK": 128, "num_warps": 8}, {"XBLOCK": 64, "RBLOCK": 64, "num_warps": 8},
                {"XBLOCK": 16, "RBLOCK": 256, "num_warps": 8}, {"XBLOCK": 128, "RBLOCK": 32, "num_warps": 8},
                {"XBLOCK": 64, "RBLOCK": 8, "num_warps": 8}, {"XBLOCK": 32, "RBLOCK": 64, "num_warps": 4}]
    return [{"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8}, {"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 16},
            {"XBLOCK": 1, "RBLOCK": 1024, "num_warps": 4}, {"XBLOCK": 2, "RBLOCK": 1024, "num_warps": 8},
            {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 16},  # the best two-loop layer_norm, 8192-long fp32 rows
            {"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 8},  # the best Welford one
            {"XBLOCK": 2, "RBLOCK": 4096, "num_warps": 16}]  # the best RMSNorm (a sum of squares, then the output)


class ValueCheckFailed(RuntimeError):
    """A value eager refuses, found by an interpreted kernel's ``ops.device_assert_async`` ([Note: value checks]
    in codegen/triton.py): a zero integer divisor ("ZeroDivisionError"), a class past ``one_hot``'s
    ``num_classes``, a probability outside [0, 1] in ``binary_cross_entropy`` or ``bernoulli``. Eager's CPU
    kernels raise ``RuntimeError`` for each, with the same message.  The caller's data is wrong, not our
    compile: nothing retries it (``specialize.SymbolicCompiled``)."""


class IndexOutOfRange(IndexError, ValueCheckFailed):
    """An index outside its dimension, found by an interpreted kernel ([Note: out-of-range indices] in
    codegen/triton.py).  Eager raises ``IndexError`` for ``x[i]``, ``index_select`` or ``embedding`` and
    ``RuntimeError`` for ``gather``, ``scatter`` or ``index_add``: this is both, so either ``except`` catches it."""


class KernelLauncher:
    """``launcher.run(*args)`` launches ``fn`` over ``xnumel`` (and ``rnumel``) with a chosen config.  On a GPU,
    after the first direct launch, the instance's own ``run`` -- a launch written out for the kernel -- takes over
    and calls this method only for what it does not expect ([Note: a generated launch])."""

    def __init__(self, fn, kind: str, xnumel: int, rnumel: int, device_type: str, hint: str = "inner",
                 symbolic: bool = False, fp_fusion: bool = True, x_first: bool = False, device_asserts: bool = False,
                 timed: bool = True):
        # xnumel/rnumel: the sizes (for a symbolic kernel, the size hints) the configs are chosen from
        self.fn, self.kind, self.xnumel, self.rnumel = fn, kind, xnumel, rnumel
        # fp_fusion=False: compiled without FP contraction ([Note: rounding survives only without FP contraction])
        self.fp_fusion = fp_fusion
        # device_asserts: the kernel checks its indices with tl.device_assert ([Note: out-of-range indices])
        self.device_asserts = device_asserts
        # symbolic: the kernel's last arguments are this call's numels; the grid is computed from them
        self.symbolic = symbolic
        # the positions of the int arguments Triton compiles once for every value: [Note: ints a kernel does not
        # specialize on] in direct_launch.py
        self.unspecialized = frozenset(p.num for p in getattr(fn, "params", ()) if getattr(p, "do_not_specialize", False))
        # x_first: a tile kernel whose programs walk blocks of rows on grid axis 0 (tiling.stores_run_along_x)
        self.x_first = x_first
        self.empty = 0 in (xnumel, rnumel)
        self.interpret = device_type != "cuda"
        self.hint = hint
        self.configs = self._candidate_configs()
        if not timed:  # it writes in place: [Note: kernels that write in place are not timed]
            self.configs = self.configs[:1]
        self.config = self.configs[0]
        # after a GPU launch, per specialization key of the arguments: see [Note: direct launch]
        self._direct: dict[tuple, DirectLauncher] = {}
        # Like Inductor's reductions, GPU kernels with several candidate configs time them on the first call;
        # mode="max-autotune" also widens the pointwise candidates (see _candidate_configs).
        self.tuned = self.interpret or len(self.configs) == 1

    def _candidate_configs(self) -> list[dict]:
        configs = candidate_configs(self.kind, self.xnumel, self.rnumel, self.hint, self.interpret)
        if self.interpret:  # compile options: the interpreter has no contraction to turn off, no asserts to keep
            return configs
        options = dict(KEEP_DENORMALS) if self.fp_fusion else {**KEEP_DENORMALS, "enable_fp_fusion": False}
        if self.device_asserts:
            # debug=True keeps tl.device_assert; Triton's debug mode would also trap integer overflow, which eager
            # lets wrap around: sanitize_overflow=False leaves integer arithmetic as it was
            options.update(debug=True, sanitize_overflow=False)
        return [{**cfg, **options} for cfg in configs]  # compile options, passed like num_warps

    def _numels(self, args) -> tuple[int, int]:
        if not self.symbolic:
            return self.xnumel, self.rnumel
        return (args[-1], 1) if self.kind == "poi" else (args[-2], args[-1])

    def _grid(self, cfg: dict, args=(), numels: tuple[int, int] | None = None) -> tuple:
        xnumel, rnumel = numels or self._numels(args)
        grid = ((xnumel + cfg["XBLOCK"] - 1) // cfg["XBLOCK"],)
        if self.kind == "tile":  # blocks of columns on axis 0, unless x_first (see TritonKernel._header)
            rblocks = ((rnumel + cfg["RBLOCK"] - 1) // cfg["RBLOCK"],)
            grid = grid + rblocks if self.x_first else rblocks + grid
        return grid

    def _launch(self, cfg: dict, args):
        grid = self._grid(cfg, args)
        meta = dict(cfg)
        if self.interpret:
            meta.pop("num_warps", None)
            with interpreted_stdlib():
                try:
                    self.fn[grid](*args, **meta)
                except Exception as e:
                    if isinstance(e.__cause__, ValueCheckFailed):  # from _check_index or _check_values:
                        raise e.__cause__ from None  # raise what eager raises
                    raise
        else:
            if config.static_cuda_launcher:  # compile (or find) the kernel without launching, launch it ourselves
                kernel = self.fn.warmup(*args, grid=grid, **meta)
                direct = DirectLauncher.make(self.fn, kernel, cfg, args, grid)
                if direct is not None and direct.static is not None:
                    direct.launch(args, grid)
                    return kernel
            return self.fn[grid](*args, **meta)  # the compiled kernel (Triton 3.x returns it)
        return None

    def run(self, *args) -> None:
        numels = self._numels(args) if self.symbolic else None
        if (0 in numels) if self.symbolic else self.empty:  # an empty tensor: nothing to compute
            return
        if self._direct:
            direct = self._direct.get(specialization_key(args, self.unspecialized))
            if direct is not None:
                direct.launch(args, self._grid(self.config, args, numels) if self.symbolic else direct.grid)
                return
        if not self.tuned:
            self.config = self._autotune(args)
            if self.kind == "red" and not self.interpret:
                self.config = self._pick_stages(self.config, args)
            self.tuned = True
        kernel = self._launch(self.config, args)
        if not self.interpret and config.direct_launch:
            direct = DirectLauncher.make(self.fn, kernel, self.config, args, self._grid(self.config, args))
            if direct is not None and len(self._direct) < 64:
                key = specialization_key(args, self.unspecialized)
                self._direct[key] = direct
                if direct.static is not None:
                    metrics.static_launcher_kernels += 1
                else:
                    metrics.triton_launcher_kernels += 1
                if "run" not in vars(self) and config.generated_launch:
                    fast = generated_launch(self, direct, args)
                    if fast is not None:  # later calls find it before the method: [Note: a generated launch]
                        self.run = fast
                        metrics.generated_launches += 1

    def _autotune(self, args) -> dict:
        """Time each candidate by running it: harmless for a kernel that only writes buffers of its own.

        [Note: kernels that write in place are not timed]  A scatter writes into a buffer it did not allocate: a
        graph input it was reinplaced into (reinplace.py), or a copy an earlier kernel made.  Timed, such a kernel
        runs a dozen times per candidate, and an accumulating scatter (``index_add_``, ``index_put_(...,
        accumulate=True)``: ``tl.atomic_add``) adds its values each time -- the graph's result was wrong under
        ``mode="max-autotune"``, which times every candidate of a kernel of more than 1024 elements (found by
        reading this code, thirty-fourth session).  So the wrapper builds its launcher with ``timed=False``, which
        keeps the first candidate, the default.  Upstream's autotuner instead copies the arguments a kernel
        mutates before timing it and restores them after (``restore_value`` in ``triton_heuristics.py``)."""
        best, best_ms = self.configs[0], float("inf")
        for k, cfg in enumerate(self.configs):
            try:
                ms = _bench(lambda cfg=cfg: self._launch(cfg, args))
            except Exception as e:  # noqa: BLE001  (a config that does not compile, e.g. out of resources)
                warnings.warn(f"mininductor: skipping config {cfg} of {self.fn}: {type(e).__name__}")
                continue
            # the first candidate is the default (for tiles, the one measured best on an H200): another must beat
            # it by more than the 1% that one timing of ten launches varies by, or noise would pick the config
            if ms < best_ms * (0.99 if best is self.configs[0] and k else 1.0):
                best, best_ms = cfg, ms
        return best

    def _pick_stages(self, cfg: dict, args, rounds: int = 3) -> dict:
        """``cfg`` with the pipeline depth that runs it faster: Triton's default or one stage.

        [Note: pipeline stages]  ``num_stages`` is how many iterations of a kernel's loop Triton's software
        pipeliner keeps in flight (loads issued for iteration k+1 while k computes); it changes nothing in a kernel
        with no loop, so only looped reductions ask.  Which depth wins depends on the loop: on an H200 a looped
        RMSNorm over 8192-long fp32 rows ran 0.8% faster with one stage (Inductor's default for reductions),
        while the looped softmax ran 1.5% slower with it than with Triton's default of three
        (docs/benchmarks.md).  The gap is smaller than what one ``_bench`` timing varies by, so the two are timed
        as ``ReductionKindChoice`` times its variants: interleaved ``do_bench`` medians.  Asked once, for the
        config ``_autotune`` chose; about a tenth of a second, plus one more compile.
        """
        if len(self.configs) == 1 or "num_stages" in cfg:  # a small kernel is not tuned; a set depth stays
            return cfg
        from triton.testing import do_bench
        one = {**cfg, "num_stages": 1}
        try:
            self._launch(one, args)  # compiles it
        except Exception:  # noqa: BLE001  (out of resources, say): the default depth stays
            return cfg
        times: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(rounds):
            for k, c in enumerate((cfg, one)):
                times[k].append(do_bench(lambda c=c: self._launch(c, args), warmup=10, rep=40,
                                         return_mode="median"))
        return one if sorted(times[1])[rounds // 2] < sorted(times[0])[rounds // 2] else cfg


class ReductionKindChoice:
    """``choice.run(*args)``: a persistent reduction and its looped twin; the first call keeps the faster.

    [Note: persistent or looped]  A persistent reduction keeps a whole row in registers and reads it once; a looped
    one walks the row in chunks and reads it again per pass (from L2, which still holds it).  Which is faster
    depends on the row and the chip in ways no fixed rule captured: on an H200, 8192 fp32 columns (32 KB rows) ran
    faster looped for softmax, layer_norm and RMSNorm, while 16384 fp32 columns and 8192 bf16 columns ran faster
    persistent (docs/benchmarks.md).  So, like Inductor, which adds a whole-row block to a looped reduction's
    autotuning candidates, we time both: each launcher first picks its own best config, then the two are timed and
    the loser is never launched again.  The twin only exists where timing is harmless (the kernel writes only its
    own outputs) and the rows are long (``config.reduction_kind_autotune_min``); see ``_looped_twin`` in
    codegen/wrapper.py.
    """

    def __init__(self, persistent: KernelLauncher, looped: KernelLauncher) -> None:
        self.candidates = [persistent, looped]
        self.chosen: KernelLauncher | None = None
        self.interpret = persistent.interpret

    def run(self, *args) -> None:
        if self.chosen is None:
            self.chosen = self._choose(args)
        self.chosen.run(*args)

    def _choose(self, args, rounds: int = 3) -> KernelLauncher:
        """The faster variant: each one's median over ``rounds`` interleaved ``do_bench`` timings.  ``do_bench``
        empties the L2 cache before each launch, as a real step finds it; timed back to back (``_bench``), a long
        row sum's two variants tie, though with a cold L2 the persistent one is 4% faster.  ~0.3 s, once."""
        from triton.testing import do_bench
        times: dict[int, list[float]] = {}
        for launcher in self.candidates:
            try:
                launcher.run(*args)  # compiles, and picks the launcher's own config
                times[id(launcher)] = []
            except Exception as e:  # noqa: BLE001  (a variant that does not compile: the other one runs)
                warnings.warn(f"mininductor: skipping the {launcher.kind} variant of {launcher.fn}: "
                              f"{type(e).__name__}")
        ready = [launcher for launcher in self.candidates if id(launcher) in times]
        if len(ready) < 2:
            return ready[0] if ready else self.candidates[0]
        for _ in range(rounds):
            for launcher in ready:
                times[id(launcher)].append(do_bench(lambda launcher=launcher: launcher.run(*args), warmup=10,
                                                    rep=40, return_mode="median"))
        return min(ready, key=lambda launcher: sorted(times[id(launcher)])[len(times[id(launcher)]) // 2])


def _bench(fn, reps: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


# ------------------------------------------------------------------------------------------------ outputs
def unflattener(spec) -> Callable[[list], Any]:
    """A function that rebuilds ``spec``'s structure from its flat leaves.  Nearly every graph returns a flat list
    or tuple: for those the type itself does it, where ``pytree.tree_unflatten`` walks the spec on each call (a few
    microseconds, paid twice per call of a graph -- 37 graphs per forward of the tutorial MoE)."""
    import torch.utils._pytree as pytree
    try:
        children = spec.children() if callable(getattr(spec, "children", None)) else spec.children_specs
        flat = spec.type in (list, tuple) and all(c.is_leaf() for c in children)
    except Exception:  # noqa: BLE001 - another pytree version: the general path is always right
        flat = False
    return spec.type if flat else lambda leaves: pytree.tree_unflatten(list(leaves), spec)
