"""Guards: the conditions under which a compiled frame may be reused, generated as readable Python.

In:  the guards the translator installed while it read inputs (each knows its ``Source`` and the user line that
created it).  Out: a ``GuardManager`` whose ``check(L, G)`` is one generated Python function, and which can say
*which* guard failed (expected vs actual) when the cache misses -- what ``TORCH_LOGS=recompiles`` prints upstream.

    >>> print(show_guards(fn))              # doctest: +SKIP
    L['x']           TENSOR_MATCH   Tensor(float32, cpu, shape=[4, 8], stride=[8, 1], requires_grad=False)
    G['torch']       ID_MATCH       <module 'torch'>
    (global)         GRAD_MODE      torch.is_grad_enabled() is True

Upstream builds guards in C++ (``torch/_dynamo/guards.py`` + ``guards.cpp``); we keep every check a line of Python.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import traceback
import types
from typing import Any, Callable

import torch

from .source import Source


@dataclasses.dataclass
class TensorMeta:
    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple
    stride: tuple
    requires_grad: bool

    @staticmethod
    def of(t: torch.Tensor, fake: torch.Tensor | None = None) -> "TensorMeta":
        """``t``'s metadata; where ``fake`` has a symbolic size or stride, that entry is the symbol's name (a str),
        which ``tensor_match`` skips: the ShapeEnv's guards (SHAPE_ENV) check those."""
        if fake is None:
            return TensorMeta(type(t), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t.requires_grad)
        return TensorMeta(type(t), t.dtype, t.device, _entries(fake.shape), _entries(fake.stride()), t.requires_grad)

    def key(self) -> tuple:
        return (self.type, self.dtype, self.device, self.shape, self.stride, self.requires_grad)

    def __str__(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        shape, stride = ", ".join(map(str, self.shape)), ", ".join(map(str, self.stride))
        return (f"{self.type.__name__}({dt}, {self.device}, shape=[{shape}], "
                f"stride=[{stride}], requires_grad={self.requires_grad})")


def _entries(values) -> tuple:
    return tuple(v if isinstance(v, int) else str(v.node.expr) if not v.node.expr.is_number else int(v)
                 for v in values)


def _dims_match(actual: tuple, expected: tuple) -> bool:
    """Equal, except that a symbolic entry (a str such as 's0') matches any value."""
    if actual == expected:
        return True
    return len(actual) == len(expected) and all(type(e) is str or a == e for a, e in zip(actual, expected))


def tensor_match(t: Any, meta: TensorMeta) -> bool:
    return (type(t) is meta.type and t.dtype == meta.dtype and t.device == meta.device
            and _dims_match(tuple(t.shape), meta.shape) and _dims_match(t.stride(), meta.stride)
            and t.requires_grad == meta.requires_grad)


def no_aliasing(*tensors) -> bool:
    return len({id(t) for t in tensors}) == len(tensors)


@dataclasses.dataclass
class Guard:
    """One condition.  ``kind`` uses upstream's names (TENSOR_MATCH, ID_MATCH, EQUALS_MATCH, ...)."""

    kind: str
    source: Source | None
    expected: Any = None
    user_frame: traceback.FrameSummary | None = None
    extra: tuple = ()  # NO_TENSOR_ALIASING: the other sources

    def key(self) -> tuple:
        return (self.kind, self.source.name() if self.source else None, tuple(s.name() for s in self.extra))

    def name(self) -> str:
        return self.source.name() if self.source else "(global)"

    def describe_expected(self) -> str:
        if self.kind == "ID_MATCH":
            return f"is {short_repr(self.expected)}"
        if self.kind == "TYPE_MATCH":
            return f"type is {self.expected.__qualname__}"
        if self.kind == "NN_MODULE":
            return f"type is {self.expected.__qualname__}, no hooks"
        if self.kind == "CLOSURE_MATCH":
            return f"__code__ is {short_repr(self.expected)}" if isinstance(self.expected, types.CodeType) \
                else f"is {short_repr(self.expected)}"
        if self.kind == "EQUALS_MATCH":
            return f"== {self.expected!r} ({type(self.expected).__name__})"
        if self.kind in ("LIST_LENGTH",):
            return f"len == {self.expected}"
        if self.kind == "DICT_KEYS":
            return f"keys == {list(self.expected)}"
        if self.kind == "GRAD_MODE":
            return f"torch.is_grad_enabled() is {self.expected}"
        if self.kind == "DEFAULT_DTYPE":
            return f"torch.get_default_dtype() is {self.expected}"
        if self.kind == "BUILTIN_NOT_SHADOWED":
            return f"{self.expected!r} not in G"
        if self.kind == "NO_TENSOR_ALIASING":
            return "distinct from " + ", ".join(s.name() for s in self.extra)
        return str(self.expected)

    def where(self) -> str:
        if not self.user_frame:
            return ""
        fs = self.user_frame
        return f"{fs.filename.rsplit('/', 1)[-1]}:{fs.lineno} {(fs.line or '').strip()}"

    def __str__(self) -> str:
        where = self.where()
        return f"{self.name():<34} {self.kind:<20} {self.describe_expected()}" + (f"   # {where}" if where else "")


def short_repr(obj: Any) -> str:
    r = repr(obj)
    if len(r) > 60:
        r = r[:57] + "..."
    if isinstance(obj, torch.nn.Module):
        r = f"<{type(obj).__name__} at {id(obj):#x}>"
    return r


class GuardManager:
    """Compiles a list of guards into one Python function, ``check(L, G) -> bool``."""

    def __init__(self, guards: list[Guard]):
        self.guards = guards
        self.closure: dict[str, Any] = {"___tensor_match": tensor_match, "___no_aliasing": no_aliasing,
                                        "___grad_enabled": torch.is_grad_enabled,
                                        "___default_dtype": torch.get_default_dtype, "sys": sys,
                                        "torch": torch, "math": math}
        self.exprs = [self._expr(k, g) for k, g in enumerate(guards)]
        self.source = self._render()
        exec(compile(self.source, "<minidynamo guards>", "exec"), self.closure)
        self.check: Callable[[dict, dict], bool] = self.closure["___guard"]

    def _expr(self, k: int, g: Guard) -> str:
        v = f"___v{k}"
        self.closure[v] = g.expected
        s = g.source.name() if g.source else None
        if g.kind == "TENSOR_MATCH":
            return f"___tensor_match({s}, {v})"
        if g.kind == "ID_MATCH":
            return f"{s} is {v}"
        if g.kind == "NN_MODULE":
            return f"type({s}) is {v} and not ({s}._forward_hooks or {s}._forward_pre_hooks)"
        if g.kind == "CLOSURE_MATCH":
            return f"getattr({s}, '__code__', None) is {v}" if isinstance(g.expected, types.CodeType) else f"{s} is {v}"
        if g.kind == "TYPE_MATCH":
            return f"type({s}) is {v}"
        if g.kind == "EQUALS_MATCH":
            self.closure[f"___t{k}"] = type(g.expected)
            return f"type({s}) is ___t{k} and {s} == {v}"
        if g.kind == "LIST_LENGTH":
            return f"len({s}) == {v}"
        if g.kind == "DICT_KEYS":
            return f"list({s}.keys()) == {v}"
        if g.kind == "GRAD_MODE":
            return f"___grad_enabled() is {v}"
        if g.kind == "DEFAULT_DTYPE":
            return f"___default_dtype() is {v}"
        if g.kind == "BUILTIN_NOT_SHADOWED":
            return f"{v} not in G"
        if g.kind == "SHAPE_ENV":  # a relation over sizes and int arguments, e.g. 2 <= L['x'].size()[0]
            return g.expected
        if g.kind == "NO_TENSOR_ALIASING":
            return f"___no_aliasing({', '.join([s] + [o.name() for o in g.extra])})"
        raise AssertionError(g.kind)

    def _render(self) -> str:
        lines = ["def ___guard(L, G):", "    try:"]
        for g, e in zip(self.guards, self.exprs):
            lines.append(f"        if not ({e}):  # {g.kind}")
            lines.append("            return False")
        lines += ["    except Exception:", "        return False", "    return True"]
        return "\n".join(lines)

    def check_kinds(self, f_locals: dict, f_globals: dict, kinds: tuple) -> bool:
        """Do the guards of these kinds hold (the others are not looked at)?"""
        scope = dict(self.closure, L=f_locals, G=f_globals)
        for g, e in zip(self.guards, self.exprs):
            if g.kind in kinds:
                try:
                    if not eval(e, scope):
                        return False
                except Exception:  # noqa: BLE001 - a guard that raises has failed
                    return False
        return True

    def first_failure(self, f_locals: dict, f_globals: dict) -> str | None:
        """Why ``check`` failed, in words: the first failing guard, expected vs actual."""
        scope = dict(self.closure, L=f_locals, G=f_globals)
        for g, e in zip(self.guards, self.exprs):
            try:
                ok = eval(e, scope)
            except Exception as ex:  # noqa: BLE001 - a guard that raises has failed
                ok, err = False, ex
            else:
                err = None
            if not ok:
                return f"{g.name()} {g.kind}: expected {g.describe_expected()}, got {describe_actual(g, scope, err)}"
        return None

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.guards)


def describe_actual(g: Guard, scope: dict, err: Exception | None) -> str:
    if err is not None:
        return f"error {type(err).__name__}: {err}"
    if g.source is None:
        return "the opposite"
    try:
        val = eval(g.source.name(), scope)
    except Exception as ex:  # noqa: BLE001
        return f"error {ex}"
    if g.kind == "TENSOR_MATCH" and isinstance(val, torch.Tensor):
        return str(TensorMeta.of(val))
    if g.kind == "TYPE_MATCH":
        return f"type {type(val).__qualname__}"
    if g.kind == "LIST_LENGTH":
        return f"len {len(val)}"
    if g.kind == "DICT_KEYS":
        return f"keys {list(val.keys())}"
    return short_repr(val) + f" ({type(val).__name__})"
