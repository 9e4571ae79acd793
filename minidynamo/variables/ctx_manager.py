"""Context managers the graph understands: ``torch.no_grad``, ``torch.enable_grad``, ``torch.set_grad_enabled``,
``torch.autograd.profiler.record_function`` / ``torch.profiler.record_function``.

Entering one changes the tracer's state *and* records the change in the graph, so the compiled graph does what
eager did: ``no_grad`` becomes ``torch._C._set_grad_enabled(False)`` ... ``_set_grad_enabled(True)`` nodes, and a
``record_function`` region becomes the profiler's enter/exit ops (so ``torch.profiler`` still shows the region).
``BEFORE_WITH`` calls ``enter``; the ``__exit__`` it pushes is a ``WithExitFunctionVariable``.
Mirrors ``torch/_dynamo/variables/ctx_manager.py``.
"""
from __future__ import annotations

import torch

from ..exc import unimplemented
from .base import VariableTracker
from .constant import ConstantVariable


class ContextManagerVariable(VariableTracker):
    def enter(self, tx) -> VariableTracker:
        raise NotImplementedError

    def exit(self, tx) -> None:
        raise NotImplementedError

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return WithExitFunctionVariable(self) if name == "__exit__" else _EnterVariable(self)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        # used as a decorator: @torch.no_grad() def f(...)
        unimplemented("a context manager used as a decorator inside the compiled function")


class _EnterVariable(VariableTracker):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def call_function(self, tx, args, kwargs):
        return self.ctx.enter(tx)


class GradModeVariable(ContextManagerVariable):
    def __init__(self, target: bool, **kw):
        super().__init__(**kw)
        self.target = target
        self.prev: bool | None = None

    @staticmethod
    def create(tx, target: bool, initially_applied: bool = False) -> "GradModeVariable":
        var = GradModeVariable(target)
        if initially_applied:  # torch.set_grad_enabled(False) takes effect when called
            var.prev = tx.output.grad_enabled
            set_grad_mode(tx, target)
        return var

    def enter(self, tx):
        if self.prev is None:
            self.prev = tx.output.grad_enabled
            set_grad_mode(tx, self.target)
        return ConstantVariable(None)

    def exit(self, tx):
        set_grad_mode(tx, self.prev)

    def describe(self):
        return f"grad mode {self.target}"


def set_grad_mode(tx, enabled: bool) -> None:
    if tx.output.grad_enabled != enabled:
        tx.output.create_proxy("call_function", torch._C._set_grad_enabled, (enabled,), {})
        tx.output.grad_enabled = enabled


class RecordFunctionVariable(ContextManagerVariable):
    def __init__(self, name: str, **kw):
        super().__init__(**kw)
        self.name = name
        self.handle = None

    def enter(self, tx):
        self.handle = tx.output.create_proxy(
            "call_function", torch.ops.profiler._record_function_enter_new, (self.name, None), {})
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.create_proxy("call_function", torch.ops.profiler._record_function_exit._RecordFunction,
                               (self.handle,), {})

    def describe(self):
        return f"record_function({self.name!r})"


class WithExitFunctionVariable(VariableTracker):
    """The ``__exit__`` pushed by BEFORE_WITH; the normal exit path calls it with (None, None, None)."""

    def __init__(self, ctx: ContextManagerVariable):
        super().__init__()
        self.ctx = ctx

    def call_function(self, tx, args, kwargs):
        self.ctx.exit(tx)
        return ConstantVariable(None)


class ContextManagerClassVariable(VariableTracker):
    """The class itself (``torch.no_grad``): calling it makes the context manager tracker."""

    def __init__(self, cls: type, **kw):
        super().__init__(**kw)
        self.cls = cls

    def as_python_constant(self):
        return self.cls

    def describe(self):
        return f"context manager {self.cls.__qualname__}"

    def call_function(self, tx, args, kwargs):
        cls = self.cls
        if cls is torch.no_grad:
            return GradModeVariable.create(tx, False)
        if cls is torch.enable_grad:
            return GradModeVariable.create(tx, True)
        if cls is torch.set_grad_enabled:
            return GradModeVariable.create(tx, args[0].as_python_constant(), initially_applied=True)
        name = (args[0] if args else kwargs["name"]).as_python_constant()
        return RecordFunctionVariable(name)


def record_function_classes() -> tuple:
    import torch.profiler as torch_profiler

    return (torch.autograd.profiler.record_function, torch_profiler.record_function)


def wrap_context_manager_class(value, source) -> VariableTracker | None:
    if value in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled) or value in record_function_classes():
        return ContextManagerClassVariable(value, source=source)
    return None
