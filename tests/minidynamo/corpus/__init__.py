"""The minidynamo behaviour corpus: small programs, each one run eagerly, by real Dynamo and by minidynamo.

What goes in: plain Python functions (or factories of ``nn.Module``/callables) registered with ``@program(...)``.
What comes out: ``PROGRAMS``, a dict ``"category.name" -> Program`` that the ``test_corpus_*.py`` files parametrize
over.  The category is the module's name (``arith``, ``containers``, ...).

Why: this is the spirit of PyTorch's ``test/dynamo`` ``make_test`` tests -- a function, its inputs, and the rule
"compiled == eager, and the graph/op counts equal real Dynamo's".  Each program is data, so one helper
(``conftest.check_program``) runs them all the same way.

Tiny example::

    @program(lambda: (t(3, 4), 2))
    def scale_then_add(x, n):
        return x * n + 1

Inputs are made fresh for every run by the ``args`` factory, after seeding torch's RNG, so eager, real Dynamo and
minidynamo see equal inputs and a mutated input can be compared afterwards.
"""
from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable
from typing import Any

import torch

CATEGORIES = (
    "arith", "torch_fns", "tensor_methods", "builtins_", "containers", "functions", "classes",
    "modules", "control_flow", "strings", "globals_", "mutation", "contexts",
)


@dataclasses.dataclass
class Program:
    """One corpus program: the callable (or a factory for it), its inputs, and how strictly to count."""

    name: str
    fn: Callable
    args: Callable[[], tuple]
    kwargs: Callable[[], dict] | None = None
    factory: bool = False  # fn() builds the callable under test (an nn.Module, a closure...)
    exact_ops: bool = True  # op_count must equal real Dynamo's (see the `relax` reason when False)
    relax: str = ""
    globals_: Callable[[], dict] | None = None  # names reset in fn.__globals__ before a run, compared after
    grad: bool = False  # also compare gradients of the inputs after backward()
    calls: int = 2  # call the compiled function this many times (fresh, different inputs each time)

    def make_callable(self) -> Callable:
        return self.fn() if self.factory else self.fn

    def module_globals(self) -> dict:
        return self.fn.__globals__


PROGRAMS: dict[str, Program] = {}


def program(args: Callable[[], tuple] = lambda: (), **options: Any) -> Callable:
    """Register the decorated function as a corpus program of its module's category."""

    def register(fn: Callable) -> Callable:
        category = fn.__module__.rsplit(".", 1)[-1]
        name = f"{category.rstrip('_')}.{fn.__name__}"
        assert name not in PROGRAMS, f"duplicate corpus program {name}"
        if not options.get("exact_ops", True):
            assert options.get("relax"), f"{name}: say why op counts are relaxed"
        PROGRAMS[name] = Program(name=name, fn=fn, args=args, **options)
        return fn

    return register


def t(*shape: int, dtype: torch.dtype = torch.float32, requires_grad: bool = False) -> torch.Tensor:
    """A random tensor from torch's (seeded) global RNG."""
    x = torch.randn(*shape, dtype=dtype) if dtype.is_floating_point else torch.randint(0, 10, shape, dtype=dtype)
    return x.requires_grad_(requires_grad)


def load(*categories: str) -> None:
    """Import category modules (registration happens at import)."""
    for category in categories or CATEGORIES:
        importlib.import_module(f"{__name__}.{category}")


def load_all() -> dict[str, Program]:
    load()
    return PROGRAMS


def select(*categories: str) -> list[Program]:
    load(*categories)
    wanted = {c.rstrip("_") for c in categories}
    return [p for p in PROGRAMS.values() if p.name.split(".")[0] in wanted]


def _self_check() -> None:  # pragma: no cover - a debugging aid: python -m corpus
    for p in load_all().values():
        print(p.name)
    print(len(PROGRAMS), "programs", file=sys.stderr)
