"""``V`` and ``ops``: the virtualized globals that make one ``inner_fn`` mean many things.

A ``Pointwise``'s body is a plain Python function over ``ops.*``::

    def inner_fn(index):
        return ops.sin(ops.add(ops.load("buf0", index[0]), ops.constant(1.0, torch.float32)))

Which handler ``ops`` dispatches to decides what running it does: print it (``ir_pre_fusion.txt``), record the
buffers and indices it reads (``dependencies.py``), or emit Triton lines (``codegen/triton.py``). ``V.graph`` is the
``GraphLowering`` being built, ``V.kernel`` the kernel being generated. Mirrors ``torch/_inductor/virtualized.py``.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any


class _Virtualized(threading.local):
    """Holds the current ops handler, graph and kernel; swap them with ``set_*`` context managers."""

    def __init__(self) -> None:
        self._ops: Any = None
        self._graph: Any = None
        self._kernel: Any = None

    @property
    def ops(self) -> Any:
        if self._ops is None:
            raise RuntimeError("no ops handler is installed (use V.set_ops_handler)")
        return self._ops

    @property
    def graph(self) -> Any:
        return self._graph

    @property
    def kernel(self) -> Any:
        return self._kernel

    @contextlib.contextmanager
    def _swap(self, attr: str, value: Any):
        prior = getattr(self, attr)
        setattr(self, attr, value)
        try:
            yield value
        finally:
            setattr(self, attr, prior)

    def set_ops_handler(self, handler: Any):
        return self._swap("_ops", handler)

    def set_graph_handler(self, graph: Any):
        return self._swap("_graph", graph)

    def set_kernel_handler(self, kernel: Any):
        return self._swap("_kernel", kernel)


V = _Virtualized()


class _OpsProxy:
    """``ops.add(a, b)`` calls ``V.ops.add(a, b)``: the name is looked up on whichever handler is installed."""

    def __getattr__(self, name: str) -> Any:
        # resolved at call time, so ``ops.sin`` can be passed around before a handler is installed
        def dispatch(*args, **kwargs):
            return getattr(V.ops, name)(*args, **kwargs)
        dispatch.__name__ = name
        return dispatch


ops = _OpsProxy()
