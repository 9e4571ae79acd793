"""Backends: what a captured FX graph is handed to.  A backend is ``backend(gm, example_inputs) -> callable``.

``"eager"`` runs the FX graph as is; ``"aot_eager"`` runs it through our mini AOTAutograd (forward/backward graphs
run eagerly); ``"inductor"`` is mininductor's ``compile_fx``.  Any callable with that signature works, including the
real ``torch._inductor.compile_fx.compile_fx``.  Mirrors ``torch/_dynamo/backends/registry.py``.
"""
from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable

import torch


def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    from mininductor.aot_autograd import aot_eager as _aot_eager
    return _aot_eager(gm, example_inputs)


def inductor(gm: torch.fx.GraphModule, example_inputs: list, mode: str | None = None,
             options: dict | None = None) -> Callable:
    try:
        from mininductor import compile_fx
    except ImportError as e:
        _warn_once(f"mininductor is not available ({e}); backend 'inductor' runs the graph eagerly")
        return gm.forward
    if mode is None and not options:
        return compile_fx(gm, example_inputs)
    return compile_fx(gm, example_inputs, mode=mode, options=options)


_BACKENDS: dict[str, Callable] = {"eager": eager, "aot_eager": aot_eager, "inductor": inductor}


def warm_up_inductor() -> None:
    """Let mininductor warm Triton up in the background now, ahead of the first compile, and start its compile
    workers if configured (``mininductor.compile_worker.warm_pool``; upstream starts its pool when
    ``torch._inductor`` is imported).  Called when minidynamo is imported and when a program asks for "inductor";
    does nothing after the first time, or without an NVIDIA GPU (asked without importing mininductor, so a CPU
    machine does not pay for that import here)."""
    if not os.path.exists("/dev/nvidiactl"):
        return
    try:
        from mininductor.compile_worker import warm_pool
    except ImportError:
        return
    warm_pool()


@functools.lru_cache(None)
def _warn_once(msg: str) -> None:
    warnings.warn(msg)


def register_backend(name: str, fn: Callable) -> Callable:
    _BACKENDS[name] = fn
    return fn


def list_backends() -> list[str]:
    return sorted(_BACKENDS)


def lookup_backend(backend, mode: str | None = None, options: dict | None = None) -> Callable:
    if callable(backend):
        return backend
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {list_backends()} or pass a callable")
    if backend == "inductor":
        warm_up_inductor()
    if backend == "inductor" and (mode or options):
        return functools.partial(inductor, mode=mode, options=options)
    return _BACKENDS[backend]
