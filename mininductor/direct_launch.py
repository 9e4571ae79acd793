"""Direct launch: a GPU kernel launched again without Triton's ``JITFunction.run`` (mirrors the launchers of
``torch/_inductor/runtime/triton_heuristics.py``: ``CachingAutotuner`` and ``TritonCompileResult.make_launcher``).

What goes in: a ``KernelLauncher`` (runtime.py) whose kernel Triton has just compiled and launched once, with that
launch's arguments.  What comes out: a ``DirectLauncher`` kept under the arguments' specialization key, which
launches the same binary for later calls with that key ([Note: direct launch]), and, where the launch goes through
torch's C++ launch call, a ``run`` function written out for the kernel's argument list, which the wrapper's
``kernel.run(...)`` calls from then on ([Note: a generated launch]).

Why: the tutorial MoE is host-bound -- about 240 launches per training step, each small -- so what a launch costs
in Python is what the step costs.  ``JITFunction.run`` binds arguments and looks the kernel up on every call
(tens of us); a direct launch skips that, and the generated launch skips re-deriving what the first launch already
established (9.4 -> 4.4 us a launch on an H200 host, torch's launch call alone being 4.3).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from . import config, static_cuda_launcher

if TYPE_CHECKING:
    from .runtime import KernelLauncher


class DirectLauncher:
    """Launch an already compiled Triton kernel without going through ``JITFunction.run``.

    [Note: direct launch]  ``fn[grid](*args)`` goes through ``JITFunction.run``: bind the arguments, compute the
    specialization key (which pointers are 16-byte aligned, which ints are 1 or divisible by 16, which need 64
    bits), look the kernel up, then call ``kernel.run``.  After a launch we keep the compiled kernel under that
    key (``specialization_key``, our cheaper copy of Triton's rule) and later calls with the same key launch it
    directly -- as Inductor's ``CachingAutotuner`` does.  A static kernel's grid never changes; a symbolic kernel's
    grid comes from each call's numels, so one binary serves every size of the same key (the tutorial MoE's
    per-expert kernels see 1-4 rows).  A call with a new key (a misaligned view, a size that is now divisible by
    16) takes the slow path once and adds its binary.

    The launch itself is ours (``static_cuda_launcher``: one ``cuLaunchKernel`` through ctypes) where the kernel
    allows it and every tensor argument is on the kernel's device; otherwise, and whenever a profiler has set
    Triton's launch hooks, it is Triton's ``kernel.run``.  On the MoE direct launches halve the host time of a
    launch (bench/overhead.py).
    """

    __slots__ = ("constexprs", "device", "grid", "hooks", "kernel", "static", "stream_of")

    @staticmethod
    def make(fn, kernel, cfg: dict, args, grid: tuple) -> DirectLauncher | None:
        try:
            from triton.runtime import driver
            names = list(fn.arg_names)
            constexprs = [cfg[name] for name in names[len(args):]]
            # ``run`` is looked up without reading it: on Triton 3.6 reading it builds Triton's C launcher
            has_run = hasattr(type(kernel), "run") or "run" in vars(kernel)
            if len(names) != len(args) + len(constexprs) or not has_run or not all(
                    hasattr(kernel, a) for a in ("function", "packed_metadata", "launch_metadata")):
                return None  # an unknown Triton: keep the general path
            return DirectLauncher(kernel, grid, constexprs, driver.active, args)
        except Exception:  # noqa: BLE001 - an optimisation only: any surprise keeps the general path
            return None

    def __init__(self, kernel, grid, constexprs, active_driver, args) -> None:
        from triton import knobs
        self.kernel = kernel
        self.grid = (*grid, 1, 1)[:3]  # always three dimensions, as kernel.run takes them
        self.constexprs = tuple(constexprs)
        self.device = active_driver.get_current_device()
        # torch's C call where it has one (what Inductor's wrapper calls): Triton's may be a Python method
        self.stream_of = getattr(torch._C, "_cuda_getCurrentRawStream", None) or active_driver.get_current_stream
        self.hooks = knobs.runtime  # read at each launch: a profiler may set launch hooks at any time
        on_device = all(a.is_cuda and a.get_device() == self.device for a in args if isinstance(a, torch.Tensor))
        self.static = static_cuda_launcher.make(kernel, self.device) \
            if config.static_cuda_launcher and on_device else None

    def launch(self, args, grid: tuple) -> None:
        k = self.kernel
        g0, g1, g2 = grid if len(grid) == 3 else (*grid, 1, 1)[:3]
        stream = self.stream_of(self.device)
        enter, exit_ = _hook(self.hooks.launch_enter_hook), _hook(self.hooks.launch_exit_hook)
        bound = args + self.constexprs
        if self.static is not None and enter is None and exit_ is None:
            self.static.launch(bound, (g0, g1, g2), stream)
            return
        metadata = k.launch_metadata((g0, g1, g2), stream, *bound) \
            if enter is not None or exit_ is not None else None
        k.run(g0, g1, g2, stream, k.function, k.packed_metadata, metadata, enter, exit_, *bound)


# [Note: a generated launch]  Once a kernel has been launched directly, most of what ``KernelLauncher.run``
# does on each call only re-derives what is already known: that the numels are not 0, the specialization key
# (computed as a tuple, then looked up), the grid, the launch hooks, the device of each tensor, the value list.
# On an H200 host a launch took 9.4 us that way, of which torch's launch call is 4.3; written out for the one
# kernel, the same checks and launch take 4.4 (bench/host_breakdown.py).  So after the first direct launch through
# torch's C++ launch call we write that function out -- Python source for this kernel's argument list, compiled
# with ``exec`` -- and store it on the launcher as ``run``, where the wrapper's ``kernel.run(...)`` finds it
# before the method.  Inductor does the same: ``TritonCompileResult.make_launcher`` (runtime/triton_heuristics.py)
# generates a ``launcher`` function per compiled kernel.  For a pointwise kernel of symbolic size:
#
#     def run(a0, a1, a2):
#         try:
#             p0, p1, = a0.data_ptr(), a1.data_ptr(),
#             if (p0 | p1) & 15 or a0.get_device() != 0 or a1.get_device() != 0 or \
#                     hooks.launch_enter_hook.calls or hooks.launch_exit_hook.calls:
#                 return slow(a0, a1, a2)
#         except AttributeError:  # not a tensor where the first launch had one; a hook that is no HookChain
#             return slow(a0, a1, a2)
#         if type(a2) is not int or (a2 == 1, a2 % 16 == 0, ...) != (False, True, True, True) or not a2:
#             return slow(a0, a1, a2)
#         launch(0x5bd0..., (a2 + 1023) // 1024, 1, 1, 4, 0, 'OOi', (p0, p1, a2, None, None,), stream(0))
#
# Every condition the general path checks is still checked: the specialization key the binary was compiled for
# (alignment per pointer, Triton's int rule per int), an empty launch, the device of every tensor (a host pointer
# would fault the device), launch hooks set by a profiler.  Anything else -- another key, a hook, a CPU tensor --
# goes to ``slow``, the method itself, which does what it always did (and raises what it always raised).  Only
# kernels launched through torch's call get one; ``config.generated_launch`` (MINICOMPILE_GENERATED_LAUNCH=0)
# turns it off.
def generated_launch(launcher: KernelLauncher, direct: DirectLauncher, args: tuple) -> Callable | None:
    """``launcher.run`` written out for ``direct``'s kernel and the specialization key of ``args`` ([Note: a
    generated launch]); None where its launch is not torch's C++ call or an argument is neither a tensor, an int
    nor a float."""
    static = direct.static
    if static is None or static.torch_launch is None:
        return None
    key, names = specialization_key(args, launcher.unspecialized), [f"a{k}" for k in range(len(args))]
    tensors = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
    ints = [k for k, a in enumerate(args) if type(a) is int]
    floats = [k for k, a in enumerate(args) if type(a) is float]
    if len(tensors) + len(ints) + len(floats) != len(args):
        return None
    device = static.device
    aligned = [f"p{k}" for k in tensors if key[k]]
    misaligned = [f"not p{k} & 15" for k in tensors if not key[k]]
    bad_pointer = ([f"({' | '.join(aligned)}) & 15"] if aligned else []) + misaligned + \
        [f"a{k}.get_device() != {device}" for k in tensors]
    bad_scalar = [f"type(a{k}) is not int or (-2147483648 <= a{k} < 2147483648, a{k} >= 0) != {key[k]!r}"
                  if k in launcher.unspecialized else
                  f"type(a{k}) is not int or (a{k} == 1, a{k} % 16 == 0, -2147483648 <= a{k} < 2147483648, "
                  f"a{k} >= 0) != {key[k]!r}" for k in ints] + [f"type(a{k}) is not float" for k in floats]
    if launcher.symbolic:  # an empty launch does nothing (the method returns early)
        numels = names[-1:] if launcher.kind == "poi" else names[-2:]
        bad_scalar += [f"not {n}" for n in numels]
    values = [f"p{k}" if pointer else f"a{k}" for k, pointer in static.slots] + ["None"] * len(static.nulls)
    # a profiler's launch hooks: Triton keeps them in HookChains, whose ``calls`` list is empty when none is set
    chains = all(isinstance(getattr(getattr(direct.hooks, h, None), "calls", None), list)
                 for h in ("launch_enter_hook", "launch_exit_hook"))
    hooked = ["hooks.launch_enter_hook.calls", "hooks.launch_exit_hook.calls"] if chains else ["hooked()"]
    call = ", ".join(names)
    lines = [f"def run({call}):", "    try:"]
    if tensors:
        lines.append(f"        {', '.join(f'p{k}' for k in tensors)}, = "
                     f"{', '.join(f'a{k}.data_ptr()' for k in tensors)},")
    lines += [f"        if {' or '.join(bad_pointer + hooked)}:",
              f"            return slow({call})",
              "    except AttributeError:  # not a tensor where the first launch had one; a hook that is no HookChain",
              f"        return slow({call})"]
    if bad_scalar:
        lines += [f"    if {' or '.join(bad_scalar)}:",
                  f"        return slow({call})"]
    lines.append(f"    launch({static.handle}, {', '.join(_grid_source(launcher, names))}, {static.warps}, "
                 f"{static.shared}, {static.types!r}, ({', '.join(values)},), stream({device}))")
    scope = {"slow": functools.partial(type(launcher).run, launcher), "launch": static.torch_launch,
             "stream": direct.stream_of, "hooks": direct.hooks, "hooked": functools.partial(_hooked, direct.hooks)}
    exec(compile("\n".join(lines), f"<generated launch of {static.name}>", "exec"), scope)  # noqa: S102
    run = scope["run"]
    run.source = "\n".join(lines)
    return run


def _grid_source(launcher: KernelLauncher, names: list[str]) -> list[str]:
    """The three grid dimensions of ``launcher``'s launch as source: numbers for a static kernel, expressions of
    the numel arguments for a symbolic one (``KernelLauncher._grid``, written out)."""
    cfg = launcher.config
    if not launcher.symbolic:
        return [str(g) for g in (*launcher._grid(cfg, numels=(launcher.xnumel, launcher.rnumel)), 1, 1)[:3]]
    xnumel, rnumel = (names[-1], "1") if launcher.kind == "poi" else (names[-2], names[-1])
    grid = [f"({xnumel} + {cfg['XBLOCK'] - 1}) // {cfg['XBLOCK']}"]
    if launcher.kind == "tile":
        rblocks = f"({rnumel} + {cfg['RBLOCK'] - 1}) // {cfg['RBLOCK']}"
        grid = grid + [rblocks] if launcher.x_first else [rblocks, *grid]
    return (grid + ["1", "1"])[:3]


def _hooked(hooks) -> bool:
    """Has a profiler set one of Triton's launch hooks (``DirectLauncher.launch`` then goes through Triton)?"""
    return _hook(hooks.launch_enter_hook) is not None or _hook(hooks.launch_exit_hook) is not None


def _hook(hook):
    """A launch hook, or None where there is none to call.  Recent Triton keeps an always-present ``HookChain``
    that is usually empty; handing it to the launcher would build launch metadata and call the empty chain
    twice per launch (about a microsecond, on every launch of the MoE's many small kernels)."""
    return None if hook is None or getattr(hook, "calls", True) == [] else hook


def specialization_key(args, unspecialized: frozenset[int] = frozenset()) -> tuple:
    """What Triton specializes a kernel on, per argument: a pointer's 16-byte alignment; an int's being 1,
    being divisible by 16, fitting in 32 bits, its sign; a float not at all; anything else by value.

    [Note: ints a kernel does not specialize on]  An int argument named in the kernel's ``do_not_specialize``
    (the mask gather's row count, a graph kernel's CPU scalar) is compiled once for every value: Triton records
    only its type (32 or 64 bits).  Keyed by the general rule, a value of 1 or a multiple of 16 still made a key
    of its own, and a call with another key than the one the launch was written out for ([Note: a generated
    launch]) took the general path, twice as slow -- the tutorial MoE's experts with one row did.  So such an int
    (its position in ``unspecialized``) is keyed by its range and sign only."""
    # a list comprehension, not a generator: called on every launch, and resuming a generator per argument costs
    # about a fifth of the key's time
    key = [a.data_ptr() % 16 == 0 if isinstance(a, torch.Tensor)
           else (a == 1, a % 16 == 0, -2**31 <= a < 2**31, a >= 0) if type(a) is int
           else float if type(a) is float else a for a in args]  # a float is always an fp32 argument
    for k in unspecialized:
        if type(args[k]) is int:
            key[k] = (-2**31 <= args[k] < 2**31, args[k] >= 0)
    return tuple(key)
