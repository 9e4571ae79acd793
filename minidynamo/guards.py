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
import functools
import math
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

import torch

from .source import DynamicGetItemSource, LocalSource, Source, TupleIteratorGetItemSource


@dataclasses.dataclass
class TensorMeta:
    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple
    stride: tuple
    requires_grad: bool

    @staticmethod
    def of(t: torch.Tensor, fake: torch.Tensor | None = None) -> TensorMeta:
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
    # The cheap reads first; torch.Size compares equal to a tuple, so no copy is made on the common path.
    return (type(t) is meta.type and t.dtype is meta.dtype and t.requires_grad is meta.requires_grad
            and (t.shape == meta.shape or _dims_match(tuple(t.shape), meta.shape))
            and (t.stride() == meta.stride or _dims_match(t.stride(), meta.stride)) and t.device == meta.device)


# NO_TENSOR_ALIASING: the tensor inputs are distinct objects; NO_ALIASING: so are the lists, dicts, user objects and
# modules (see [Note: aliased inputs] in variables/builder.py).  DUPLICATE_INPUT: an input is the same object as another.
ALIASING_KINDS = ("NO_TENSOR_ALIASING", "NO_ALIASING")
# what a symbolic int can hold: a graph computes it as an int64 (SYMINT_MATCH, dynamic_shapes.int_is_dynamic)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# guards whose expression reads their source more than once: the check function reads it into a local first
_READ_SEVERAL_TIMES = ("NN_MODULE", "SYMINT_MATCH", "EQUALS_MATCH")


def no_aliasing(*tensors) -> bool:
    return len({id(t) for t in tensors}) == len(tensors)


@dataclasses.dataclass(frozen=True)
class ModuleSpec:
    """What an NN_MODULE guard expects: the module's type and the ids of its forward (pre-)hooks, in order.

    Each ``register_forward_hook`` gets a fresh id, so equal ids mean the same registrations: adding or removing
    a hook fails the guard (a recompile), and the hooks themselves are guarded where they are read."""

    type: type
    pre_hooks: tuple = ()
    hooks: tuple = ()

    @staticmethod
    def of(m: torch.nn.Module) -> ModuleSpec:
        return ModuleSpec(type(m), tuple(m._forward_pre_hooks), tuple(m._forward_hooks))

    def __str__(self) -> str:
        if not (self.pre_hooks or self.hooks):
            return f"type is {self.type.__qualname__}, no hooks"
        return f"type is {self.type.__qualname__}, pre-hooks {list(self.pre_hooks)}, hooks {list(self.hooks)}"


@dataclasses.dataclass
class Guard:
    """One condition.  ``kind`` uses upstream's names (TENSOR_MATCH, ID_MATCH, EQUALS_MATCH, ...)."""

    kind: str
    source: Source | None
    expected: Any = None
    user_frame: traceback.FrameSummary | None = None
    extra: tuple = ()  # NO_TENSOR_ALIASING / NO_ALIASING: the other sources; DUPLICATE_INPUT: the first one

    def key(self) -> tuple:
        return (self.kind, self.source.name() if self.source else None, tuple(s.name() for s in self.extra))

    def name(self) -> str:
        return self.source.name() if self.source else "(global)"

    def describe_expected(self) -> str:
        if self.kind == "ID_MATCH":
            return f"is {short_repr(self.expected)}"
        if self.kind == "TYPE_MATCH":
            return f"type is {self.expected.__qualname__}"
        if self.kind == "SYMINT_MATCH":
            return "type is int, within int64"
        if self.kind == "NN_MODULE":
            return str(self.expected)
        if self.kind == "NO_GLOBAL_MODULE_HOOKS":
            return "no global module hooks"
        if self.kind == "CLOSURE_MATCH":
            return f"__code__ is {short_repr(self.expected)}" if isinstance(self.expected, types.CodeType) \
                else f"is {short_repr(self.expected)}"
        if self.kind == "EQUALS_MATCH":
            return f"== {self.expected!r} ({type(self.expected).__name__})"
        if self.kind in ("LIST_LENGTH",):
            return f"len == {self.expected}"
        if self.kind == "TUPLE_ITERATOR_LEN":
            return "items left {} {}".format(*self.expected)
        if self.kind == "DICT_KEYS":
            return f"keys == {list(self.expected)}"
        if self.kind == "GRAD_MODE":
            return f"torch.is_grad_enabled() is {self.expected}"
        if self.kind == "DEFAULT_DTYPE":
            return f"torch.get_default_dtype() is {self.expected}"
        if self.kind == "AUTOCAST":
            return "autocast (enabled, dtype) for cpu, cuda == " + ", ".join(f"({e}, {d})" for e, d in self.expected)
        if self.kind == "BUILTIN_NOT_SHADOWED":
            return f"{self.expected!r} not in G"
        if self.kind == "HASATTR":
            return "present" if self.expected else "absent"
        if self.kind == "CELL_EMPTY":
            return "the cell holds no value"
        if self.kind in ALIASING_KINDS:
            return "distinct from " + ", ".join(s.name() for s in self.extra)
        if self.kind == "DUPLICATE_INPUT":
            return f"is {self.extra[0].name()}"
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

    def __init__(self, guards: list[Guard], tensor_values: dict[str, torch.Tensor] | None = None):
        """``tensor_values``: the tensors the TENSOR_MATCHes were made from, by source name (the frame's values
        at compile time); with them, the tensor checks run in C++ ([Note: tensor checks in one call])."""
        from .utils import module_list_item, tuple_iterator_getitem, tuple_iterator_len
        from .variables.ctx_manager import autocast_state  # imported here: variables/ imports this module
        from .variables.nn_module import any_global_module_hooks
        self.guards = guards
        self.closure: dict[str, Any] = {"___tensor_match": tensor_match, "___no_aliasing": no_aliasing,
                                        "___grad_enabled": torch.is_grad_enabled,
                                        "___default_dtype": torch.get_default_dtype, "sys": sys,
                                        "___global_module_hooks": any_global_module_hooks,
                                        "___autocast_state": autocast_state,
                                        "___autocast_enabled": torch.is_autocast_enabled,
                                        "___autocast_dtype": torch.get_autocast_dtype,
                                        "___dims_match": _dims_match,
                                        "___tuple_iterator_len": tuple_iterator_len,
                                        "___tuple_iterator_getitem": tuple_iterator_getitem,
                                        "___module_list_item": module_list_item,
                                        "torch": torch, "math": math}
        self.exprs = [self._expr(k, g) for k, g in enumerate(guards)]
        self.tensor_checks = tensor_checks(guards, tensor_values)
        if self.tensor_checks is not None:
            self.closure["___check_tensors"] = self.tensor_checks.check
            self.closure["___check_tensors_elsewhere"] = tensor_checks_elsewhere(
                [g.expected for g in guards if g.kind == "TENSOR_MATCH"])
        self.source = self._render()
        exec(compile(self.source, "<minidynamo guards>", "exec"), self.closure)  # noqa: S102 - the generated check
        self.check: Callable[[dict, dict], bool] = self.closure["___guard"]

    def _expr(self, k: int, g: Guard, spell: Callable[[Source], str] | None = None, part: str | None = None) -> str:
        """The guard as a Python expression; ``spell`` writes a source (by default: its full name); ``part``, for a
        TENSOR_MATCH split in two, which half ([Note: guard order and shared prefixes])."""
        v = f"___v{k}"
        self.closure[v] = g.expected
        name_of = spell or (lambda src: src.name())
        s = name_of(g.source) if g.source else None
        if g.kind in ALIASING_KINDS:
            return f"___no_aliasing({', '.join([s] + [name_of(o) for o in g.extra])})"
        if g.kind == "DUPLICATE_INPUT":
            return f"{s} is {name_of(g.extra[0])}"
        if g.kind == "TENSOR_MATCH" and spell is not None:
            return self._inline_tensor_match(k, g.expected, s, part)
        if spell is not None and g.kind in _READ_SEVERAL_TIMES and not s.isidentifier():
            s, first = f"___r{k}", f"(___r{k} := {s})"  # read once ([Note: guard order and shared prefixes])
        else:
            first = s
        if g.kind == "AUTOCAST" and spell is not None:
            return self._inline_autocast(k, g.expected)
        if g.kind == "TENSOR_MATCH":
            return f"___tensor_match({s}, {v})"
        if g.kind == "ID_MATCH":
            return f"{s} is {v}"
        if g.kind == "NN_MODULE":
            spec: ModuleSpec = g.expected
            self.closure[v] = spec.type
            if not (spec.pre_hooks or spec.hooks):
                return f"type({first}) is {v} and not ({s}._forward_hooks or {s}._forward_pre_hooks)"
            self.closure[f"___p{k}"], self.closure[f"___h{k}"] = spec.pre_hooks, spec.hooks
            return f"type({first}) is {v} and tuple({s}._forward_pre_hooks) == ___p{k} and tuple({s}._forward_hooks) == ___h{k}"
        if g.kind == "NO_GLOBAL_MODULE_HOOKS":
            return "not ___global_module_hooks()"
        if g.kind == "CLOSURE_MATCH":
            return f"getattr({s}, '__code__', None) is {v}" if isinstance(g.expected, types.CodeType) else f"{s} is {v}"
        if g.kind == "TYPE_MATCH":
            return f"type({s}) is {v}"
        if g.kind == "SYMINT_MATCH":  # an int argument traced as a symbol: graphs compute it as an int64
            return f"type({first}) is int and {INT64_MIN} <= {s} <= {INT64_MAX}"
        if g.kind == "EQUALS_MATCH":
            self.closure[f"___t{k}"] = type(g.expected)
            return f"type({first}) is ___t{k} and {s} == {v}"
        if g.kind == "LIST_LENGTH":
            return f"len({s}) == {v}"
        if g.kind == "TUPLE_ITERATOR_LEN":
            op, n = g.expected
            return f"___tuple_iterator_len({s}) {op} {n}"
        if g.kind == "DICT_KEYS":
            return f"list({s}.keys()) == {v}"
        if g.kind == "GRAD_MODE":
            return f"___grad_enabled() is {v}"
        if g.kind == "DEFAULT_DTYPE":
            return f"___default_dtype() is {v}"
        if g.kind == "AUTOCAST":
            return f"___autocast_state() == {v}"
        if g.kind == "BUILTIN_NOT_SHADOWED":
            return f"{v} not in G"
        if g.kind == "HASATTR":  # hasattr(L['x'], 'missing') is False
            return f"hasattr({name_of(g.source.base)}, {g.source.member!r}) is {v}"
        if g.kind == "CELL_EMPTY":  # a cell the frame received empty: its name is missing from the frame's locals
            return f"{g.source.local_name!r} not in L"
        if g.kind == "SHAPE_ENV":  # a relation over sizes and int arguments, e.g. 2 <= L['x'].size()[0]
            return g.expected
        raise AssertionError(g.kind)

    def _inline_tensor_match(self, k: int, meta: TensorMeta, s: str, part: str | None = None) -> str:
        """``tensor_match`` written out in the check function, with the expected values as its constants.

        [Note: inlined tensor checks]  A check function runs on every frame entry, and in the tutorial MoE's loop
        a third of its lines are TENSOR_MATCHes: written out (no call, no reads of a ``TensorMeta``), each costs
        about half.  ``tensor_match`` stays the reference (``first_failure`` uses it); a test
        checks that the two agree.  Symbolic sizes and strides (str entries) go through ``___dims_match``.

        ``part="early"`` is the half that tells a frame input's entries apart -- ``requires_grad``, and the shape
        where no size is symbolic -- and ``part="rest"`` the other checks, reading the tensor the early half
        stored in ``___tK`` ([Note: guard order and shared prefixes])."""
        names = {}
        for field in ("type", "dtype", "requires_grad", "shape", "stride", "device"):
            names[field] = f"___v{k}_{field}"
            self.closure[names[field]] = getattr(meta, field)
        t = f"___t{k}"

        def dims(actual: str, field: str) -> str:
            expected = getattr(meta, field)
            if any(type(d) is str for d in expected):
                return f"___dims_match(tuple({actual}), {names[field]})"
            return f"{actual} == {names[field]}"
        static_shape = not any(type(d) is str for d in meta.shape)
        if part == "early":
            return f"({t} := {s}).requires_grad is {names['requires_grad']}" + \
                (f" and {t}.shape == {names['shape']}" if static_shape else "")
        if part == "rest":
            return (f"type({t}) is {names['type']} and {t}.dtype is {names['dtype']} and "
                    + ("" if static_shape else f"{dims(f'{t}.shape', 'shape')} and ")
                    + f"{dims(f'{t}.stride()', 'stride')} and {t}.device == {names['device']}")
        return (f"type({t} := {s}) is {names['type']} and {t}.dtype is {names['dtype']} and "
                f"{t}.requires_grad is {names['requires_grad']} and {dims(f'{t}.shape', 'shape')} and "
                f"{dims(f'{t}.stride()', 'stride')} and {t}.device == {names['device']}")

    def _inline_autocast(self, k: int, expected: tuple) -> str:
        """The AUTOCAST guard as identity checks of each device's flag and dtype (no tuple is built)."""
        from .variables.ctx_manager import AUTOCAST_DEVICES
        parts = []
        for device, (enabled, dtype) in zip(AUTOCAST_DEVICES, expected):
            self.closure[f"___v{k}_{device}"] = dtype
            parts.append(f"___autocast_enabled({device!r}) is {enabled} and "
                         f"___autocast_dtype({device!r}) is ___v{k}_{device}")
        return " and ".join(parts)

    def _render(self) -> str:
        """The check function's source: cheap, discriminating guards first; shared source prefixes read once.

        [Note: guard order and shared prefixes]  A cache lookup runs the check of every entry until one passes,
        so a failing check must fail fast.  The resume function of a loop over a Python list of settings can
        have one entry per loop index, tried on every iteration (see also [Note: cache entries indexed by a
        constant]): ``L['i'] == 3`` must decide before anything else is looked at.  So the EQUALS_MATCH of a frame
        input (a local, or a resumed loop's next item) comes first, even before the ambient state (grad mode,
        autocast: the same for every entry, so it never tells them apart).  Next come the ShapeEnv's relations
        (``5 <= L['expert_samples'].size()[0]``): the entries of a symbolic loop body differ by them (0 rows, 1,
        2..4, 5+), and a size read is cheap.  Then what else tells such entries apart at the cost of an attribute
        read: whether a loop's iterator is exhausted (TUPLE_ITERATOR_LEN of a frame input: the loop's last
        iteration), and the early half of each frame input's TENSOR_MATCH -- its ``requires_grad`` (``outputs``
        records history from the first expert on) and its shape where every size is static (an entry for one
        row); the rest of that TENSOR_MATCH (type, dtype, strides, device) stays in its place below, so a passing
        check reads nothing twice.  Evaluated before the TENSOR_MATCH that checks the value is a tensor at all, a
        relation or attribute read on something else raises, and a guard that raises has failed: order never
        changes the verdict, only how soon it comes.  (In the tutorial MoE's loop body the other entries' checks
        used to fail at a TENSOR_MATCH fifteen lines down.)  Then shallow sources first and, at
        each depth, exact-value guards (EQUALS_MATCH, ID_MATCH, TYPE_MATCH) before TENSOR_MATCH.  A prefix such
        as ``L['self']._modules['experts']._modules['3']`` that several guards read is evaluated once,
        into a local, just before the first guard that needs it -- and so is a module's global that several read
        (``sys.modules['torch.nn.modules.linear'].__dict__['F']``, for ``F`` and ``F.linear``); a guard that reads
        its source twice (a module's type and its hooks, an int's type and range) reads it into a local as it goes
        (``type(___r7 := L['self'].expert_capacity) is ___t7 and ___r7 == ___v7``).
        """
        lines = ["def ___guard(L, G):", "    try:"]
        names: dict[str, str] = {}  # source name -> the local that holds it
        uses = _prefix_uses(self.guards)
        spell = lambda src: _cse(src, names, uses, lines)
        parts = []  # (rank, guard index, part): a frame input's TENSOR_MATCH is written as two halves
        tensors = [k for k, g in enumerate(self.guards) if g.kind == "TENSOR_MATCH"] \
            if self.tensor_checks is not None else []
        checked = {self.guards[k].source.name() for k in tensors}  # sources the C++ check covers
        for k, g in enumerate(self.guards):
            if g.kind == "TENSOR_MATCH" and is_frame_input(g.source):
                parts.append(((-2, 2), k, "early"))
                if not tensors:
                    parts.append((_guard_rank(g), k, "rest"))
            elif k not in tensors and not (tensors and g.kind == "NO_TENSOR_ALIASING" and all(
                    src.name() in checked for src in (g.source, *g.extra))):
                parts.append((_guard_rank(g), k, None))
        if tensors:  # after every other guard of one input, before the relations between inputs
            parts.append((((1 << 20) - 1, 0), -1, "tensors"))
        for _, k, part in sorted(parts, key=lambda p: p[0]):
            if part == "tensors":
                args = ", ".join(f"___t{k}" if is_frame_input(self.guards[k].source) else spell(self.guards[k].source)
                                 for k in tensors)
                lines.append(f"        if not (___check_tensors({args}) or ___check_tensors_elsewhere({args})):"
                             f"  # TENSOR_MATCH x {len(tensors)}")
                lines.append("            return False")
                continue
            g = self.guards[k]
            expr = self._expr(k, g, spell, part)
            lines.append(f"        if not ({expr}):  # {g.kind}" + (f" ({part})" if part else ""))
            lines.append("            return False")
        lines += ["    except Exception:", "        return False", "    return True"]
        return "\n".join(lines)

    def on_same_code_path(self, f_locals: dict, f_globals: dict) -> bool:
        """Would this entry run the same code path as a call with these locals?  Its constants (EQUALS_MATCH:
        a loop index), its loop iterators' lengths (inside the loop or after it) and its tensors'
        ``requires_grad`` (whether autograd records) hold; sizes and the rest are not looked at.  See
        [Note: recompile limit per code path] in eval_frame.py."""
        scope = dict(self.closure, L=f_locals, G=f_globals)
        for g, e in zip(self.guards, self.exprs):
            if g.kind == "TENSOR_MATCH":
                e = f"{g.source.name()}.requires_grad is {g.expected.requires_grad}"
            elif g.kind not in ("EQUALS_MATCH", "TUPLE_ITERATOR_LEN"):
                continue
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


# [Note: tensor checks in one call]  A loop body's check function holds about ten TENSOR_MATCHes (its inputs, each
# expert's four parameters), each half a dozen attribute reads and comparisons: written out in Python
# ([Note: inlined tensor checks]) they were the larger part of a passing check's time.  torch ships the same check
# in C++: ``torch._C._dynamo.guards.TensorGuards``, built from example tensors (it keeps their Python type, dispatch
# keys, dtype, device, ``requires_grad``, sizes and strides, ``None`` for a symbolic entry, and no reference to the
# tensors), whose ``check(*tensors)`` compares all of them in one call -- what upstream's generated check functions
# called as ``___check_tensors`` before its guards moved to C++ altogether.  So an entry's TENSOR_MATCHes become
# one ``___check_tensors(...)`` line, placed after every other guard of a single input.  It also refuses one
# tensor passed in two places, so it stands for the NO_TENSOR_ALIASING of the same tensors.  It is stricter than
# ``tensor_match`` in one way: it also compares dispatch keys (a conjugated or inference tensor fails where
# ``tensor_match`` would pass), which can only add a recompile, never a wrong reuse.  Those keys are read through
# the thread's dispatch state (a ``TorchDispatchMode`` adds the Python key to every tensor), which would make a
# call under a mode, or the first call after compiling under one, miss; so where the C++ check fails and that
# state is not what it was at compile time, the Python ``tensor_match``es decide instead
# (``___check_tensors_elsewhere``), as they did before.  ``tensor_match`` stays the readable definition, which
# ``first_failure`` and ``show_guards`` use; a frame input's TENSOR_MATCH keeps its early half in Python, as a
# cheap discriminator ([Note: guard order and shared prefixes]).  The C++ check is built only when the values the
# guards came from are at hand, every one passes its TENSOR_MATCH, and the check accepts them; otherwise the
# Python lines stay.
def tensor_checks(guards: list[Guard], values: dict[str, torch.Tensor] | None) -> Any:
    """One ``TensorGuards`` for the TENSOR_MATCHes of ``guards``, in order, or None (see the Note)."""
    matches = [g for g in guards if g.kind == "TENSOR_MATCH"]
    make = _tensor_guards_class()
    if not matches or values is None or make is None:
        return None
    try:
        tensors = [values[g.source.name()] for g in matches]
        if not all(tensor_match(t, g.expected) for t, g in zip(tensors, matches)):
            return None
        symbolic = lambda dims: [None if type(d) is str else d for d in dims]
        checks = make(*tensors, dynamic_dims_sizes=[symbolic(g.expected.shape) for g in matches],
                      dynamic_dims_strides=[symbolic(g.expected.stride) for g in matches])
        return checks if checks.check(*tensors) else None
    except Exception:  # noqa: BLE001 - a torch without this class, or a value it refuses: the Python checks stay
        return None


@functools.cache
def _tensor_guards_class() -> Any:
    """torch's ``TensorGuards``, where it compares ``requires_grad`` as ``tensor_match`` does (older versions
    compared it only under grad mode, which would let a frame compiled under ``no_grad`` for a tensor that does not
    require grad serve one that does), else None."""
    make = getattr(getattr(getattr(torch._C, "_dynamo", None), "guards", None), "TensorGuards", None)
    if make is None:
        return None
    try:
        with torch.no_grad():
            probe = make(torch.zeros(1), dynamic_dims_sizes=[[1]], dynamic_dims_strides=[[1]])
            return make if not probe.check(torch.zeros(1, requires_grad=True)) else None
    except Exception:  # noqa: BLE001 - another signature: the Python checks stay
        return None


def _dispatch_state() -> tuple[int, int]:
    """The thread's dispatch keys added and removed (modes, autocast, inference mode), as two numbers."""
    return (torch._C._dispatch_tls_local_include_set().raw_repr(),
            torch._C._dispatch_tls_local_exclude_set().raw_repr())


def tensor_checks_elsewhere(metas: list[TensorMeta]) -> Callable[..., bool]:
    """The TENSOR_MATCHes in Python, for calls whose dispatch state differs from the compile's (see the Note):
    there, the C++ check's verdict says nothing about the tensors."""
    compiled_in = _dispatch_state()

    def check(*tensors) -> bool:
        return _dispatch_state() != compiled_in and len({id(t) for t in tensors}) == len(tensors) and all(
            tensor_match(t, meta) for t, meta in zip(tensors, metas))
    return check


_EXACT_KINDS = {"EQUALS_MATCH", "ID_MATCH", "TYPE_MATCH", "SYMINT_MATCH", "CLOSURE_MATCH", "NN_MODULE", "LIST_LENGTH",
                "DICT_KEYS", "TUPLE_ITERATOR_LEN"}


def is_frame_input(source: Source | None) -> bool:
    """A value read straight from the frame's locals: ``L['i']``, or the next items of a loop iterator it
    received (``___tuple_iterator_getitem(L['___stack_1'], 0)``: the loop variable of a resumed loop)."""
    if type(source) is TupleIteratorGetItemSource:
        source = source.base
    return type(source) is LocalSource


def _depth(source: Source | None) -> int:
    depth = 0
    while source is not None and hasattr(source, "base"):
        source, depth = source.base, depth + 1
    return depth


def _guard_rank(g: Guard) -> tuple[int, int]:
    """Sort key of a guard in the check function (see [Note: guard order and shared prefixes])."""
    if g.kind == "EQUALS_MATCH" and is_frame_input(g.source):
        return (-2, 0)  # L['expert_idx'] == 3: what tells the entries of a loop's resume function apart
    if g.kind == "SHAPE_ENV":
        return (-2, 1)  # 2 <= L['rows'].size()[0] <= 4: what tells a symbolic entry's cases apart, and cheap
    if g.kind == "TUPLE_ITERATOR_LEN" and is_frame_input(g.source):
        return (-2, 2)  # items left == 0: the loop's last iteration (with the early halves of TENSOR_MATCHes)
    if g.source is None:
        return (-1, 0)  # grad mode, default dtype: one call each
    if g.kind in ALIASING_KINDS or g.kind == "DUPLICATE_INPUT":
        return (1 << 20, 0)  # a relation between several inputs: after each input's own guards
    return (_depth(g.source), 0 if g.kind in _EXACT_KINDS else 1)


def _prefixes(source: Source) -> list[Source]:
    out = []
    while hasattr(source, "base"):
        source = source.base
        out.append(source)
    return out


def _prefix_uses(guards: list[Guard]) -> dict[str, int]:
    """How many guards read each source prefix (only those read more than once are worth a local)."""
    uses: dict[str, int] = {}
    for g in guards:
        for src in [g.source, *g.extra] if g.source else []:
            for prefix in [src, *_prefixes(src)]:
                uses[prefix.name()] = uses.get(prefix.name(), 0) + 1
    return uses


def _cse(source: Source, names: dict, uses: dict, lines: list[str]) -> str:
    """Spell ``source`` using locals for shared prefixes, emitting each local's assignment once."""
    full = source.name()
    if full in names:
        return names[full]
    base = getattr(source, "base", None)
    base_full = base.name() if base is not None else ""
    if base is None or not full.startswith(base_full):  # L['x'], G['w'], getattr(...) forms: spelled out
        text = full
    elif type(source) is DynamicGetItemSource:  # [Note: reading a module list's item] in utils.py
        text = f"___module_list_item({_cse(base, names, uses, lines)}, {_cse(source.index, names, uses, lines)})"
    else:
        text = _cse(base, names, uses, lines) + full[len(base_full):]
    # a root spelled as more than a dict lookup (a module's global: ``sys.modules[...].__dict__['F']``) is shared too
    if (base is not None or not full.startswith(("L[", "G["))) and uses.get(full, 0) > 1:
        names[full] = f"___s{len(names)}"
        lines.append(f"        {names[full]} = {text}")
        return names[full]
    return text


def describe_actual(g: Guard, scope: dict, err: Exception | None) -> str:
    if err is not None:
        return f"error {type(err).__name__}: {err}"
    if g.source is None:
        return "the opposite"
    if g.kind == "HASATTR":
        return "present" if eval(f"hasattr({g.source.base.name()}, {g.source.member!r})", scope) else "absent"
    if g.kind == "CELL_EMPTY":
        return "the cell holds a value"
    try:
        val = eval(g.source.name(), scope)
    except Exception as ex:  # noqa: BLE001
        return f"error {ex}"
    if g.kind == "TENSOR_MATCH" and isinstance(val, torch.Tensor):
        return str(TensorMeta.of(val))
    if g.kind == "TYPE_MATCH":
        return f"type {type(val).__qualname__}"
    if g.kind == "SYMINT_MATCH":
        return f"{short_repr(val)} ({type(val).__name__})"
    if g.kind == "LIST_LENGTH":
        return f"len {len(val)}"
    if g.kind == "TUPLE_ITERATOR_LEN":
        return f"{scope['___tuple_iterator_len'](val)} items left"
    if g.kind == "DICT_KEYS":
        return f"keys {list(val.keys())}"
    return short_repr(val) + f" ({type(val).__name__})"
