"""Dynamic shapes: which sizes are traced as symbols, and the guards that keep a symbolic graph valid.

In:  a tensor (or int) read from the frame, its source, and the compile context's ``dynamic`` setting.  Out: which of
its dimensions become symbols (``s0``, ``s1``...) in the frame's ``ShapeEnv``, and -- after tracing -- the relations
the trace assumed about them (``2 <= L['x'].size()[0]``, ``L['x'].size()[0] > 4``), as readable guards with the user
line that caused each.

    dynamic=None (default)   call 1: x is [3, 2] -> static graph, remember "L['x'] had [3, 2]"
                             call 2: x is [4, 2] -> guard fails; dim 0 changed -> recompile with dim 0 = s0
                             call 3: x is [5, 2] -> the s0 graph's guards pass: no recompile
    dynamic=True             every dimension of every input tensor (and every int argument) is a symbol at once
    dynamic=False            always static; only ``mark_dynamic`` makes a symbol

The symbols, their ranges and the guards live in PyTorch's own ``ShapeEnv``
(``torch/fx/experimental/symbolic_shapes.py``): we create the symbols, run ops on fake tensors with symbolic sizes,
and ask it for its guards (``produce_guards``).  The per-code-object memory of sizes is upstream's "automatic
dynamic" (``torch/_dynamo/variables/builder.py``, ``torch/_dynamo/pgo.py``).

[Note: sizes 0 and 1 stay static]  As upstream, a size of 0 or 1 is never made a symbol: broadcasting and
contiguity rules differ for those sizes, so a graph traced for ``s0 >= 2`` would be wrong for them.  A symbolic
graph therefore carries the guard ``2 <= L['x'].size()[0]``; a call with size 1 compiles its own static graph.
Marking a size-1 dimension dynamic is an error (``ConstraintViolationError``), as upstream.

[Note: what stays static]  Parameters and buffers of modules (upstream: ``force_parameter_static_shapes``), ints
read from attributes (module hyperparameters; only int *arguments* become symbolic), floats (upstream specialises
them too), and a tensor whose number of dimensions changed.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import re
import types
from typing import Any

import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch.fx.experimental import symbolic_shapes
from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

from . import config
from .exc import ConstraintViolationError
from .guards import INT64_MAX, INT64_MIN
from .source import GetItemSource, LocalSource, Source, TupleIteratorGetItemSource
from .utils import counters


def mark_dynamic(t: torch.Tensor, index: int | list[int]) -> None:
    """Trace dimension(s) ``index`` of ``t`` as symbols from the first compile (``torch._dynamo.mark_dynamic``)."""
    dims = [index] if isinstance(index, int) else list(index)
    t._minidynamo_dynamic_dims = set(getattr(t, "_minidynamo_dynamic_dims", set())) | set(dims)


def mark_static(t: torch.Tensor, index: int | list[int] | None = None) -> None:
    """Never make dimension(s) ``index`` (default: all) of ``t`` symbolic (``torch._dynamo.mark_static``)."""
    dims = range(t.dim()) if index is None else ([index] if isinstance(index, int) else index)
    t._minidynamo_static_dims = set(getattr(t, "_minidynamo_static_dims", set())) | set(dims)


class ShapeEnv(symbolic_shapes.ShapeEnv):
    """PyTorch's ``ShapeEnv``, finding the frame it labels its records with without importing half of PyTorch.

    [Note: the ShapeEnv's user frame]  When it makes a symbol or a range, the ShapeEnv notes "where" for its log
    lines and error messages: the first frame on the stack outside a list of PyTorch files
    (``symbolic_shapes.uninteresting_files``).  Building that list imports ``torch.export``, AOTAutograd's
    partitioner and networkx -- about 0.2 s of the tutorial MoE's first call, for nothing we use (our guards carry
    our own user lines: ``OutputGraph.user_frame``).  Here the frame is the first one outside the ``torch``
    package: in a translation, a minidynamo or mininductor line.  It only labels messages; no decision reads it.
    """

    def _get_user_frame(self) -> types.FrameType | None:
        frame = inspect.currentframe().f_back  # our caller: this method is not the place to report
        while frame is not None and _is_torch_file(frame.f_code.co_filename):
            frame = frame.f_back
        return frame

    def _get_stack_summary(self, is_debug: bool = False, framework_loc: str | None = None) -> tuple[Any, str]:
        """[Note: a guard made in the autograd engine's thread]  A training compile traces the backward by running
        ``torch.autograd.grad`` over fake tensors. For CUDA tensors the engine runs it in its own device thread, so
        a C++ backward formula that guards a symbolic size (``F.pad``'s backward: ``n >= 0``) reaches the ShapeEnv
        with no Python frame outside torch on the stack. The place is then ``SLoc(None, ...)``, which torch 2.11's
        ``produce_guards`` fails to format ("'NoneType' object has no attribute 'filename'"; torch 2.13 prints
        nothing). We name it. CPU tensors never show this: their backward runs in the calling thread."""
        from torch._guards import SLoc

        sloc, extra = super()._get_stack_summary(is_debug, framework_loc)
        if sloc.framework_loc is None:
            sloc = SLoc("no Python frame outside torch (the autograd engine's device thread)", sloc.maybe_user_loc)
        return sloc, extra


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _is_torch_file(filename: str) -> bool:
    return filename.startswith(_TORCH_DIR) or filename == "<string>"


@dataclasses.dataclass
class FrameStateEntry:
    """What one input looked like when its frame was first compiled, and which of its sizes have changed since."""

    size: tuple | int
    dynamic_dims: set = dataclasses.field(default_factory=set)
    specialised: bool = False  # an int that went dynamic, then the program needed its value: keep it static


# --------------------------------------------------------------------------------------------------------------
# Which dimensions are symbols.
# --------------------------------------------------------------------------------------------------------------
def dynamic_dims_for_tensor(output, source: Source, value: torch.Tensor, is_module_state: bool) -> set[int]:
    marked = set(getattr(value, "_minidynamo_dynamic_dims", set()))
    static = set(getattr(value, "_minidynamo_static_dims", set()))
    for d in marked:
        if value.shape[d] in (0, 1):
            raise ConstraintViolationError(
                f"mark_dynamic({source.name()}, {d}): the size is {value.shape[d]}, and sizes 0 and 1 are always "
                f"specialised (see [Note: sizes 0 and 1 stay static]); mark a dimension whose size is >= 2")
    dynamic = getattr(output.ctx, "dynamic", None)
    if is_module_state or dynamic is False:
        automatic = set()
    elif dynamic is True:
        automatic = set(range(value.dim()))
    else:
        automatic = _changed_dims(output, source, tuple(value.shape))
    zero_one = {d for d in range(value.dim()) if value.shape[d] in (0, 1)}
    return marked | (automatic - static - zero_one)


def _changed_dims(output, source: Source, shape: tuple) -> set[int]:
    """Automatic dynamic: the dimensions of ``source`` whose size differs from an earlier compile of this frame."""
    state = frame_state(output, source.name())
    entry = state.get(source.name())
    if entry is None or not isinstance(entry.size, tuple) or len(entry.size) != len(shape):
        state[source.name()] = FrameStateEntry(shape)  # first sight (or a new ndim: start over, static)
        return set()
    for d, (old, new) in enumerate(zip(entry.size, shape)):
        if old != new and d not in entry.dynamic_dims:
            entry.dynamic_dims.add(d)
            log_became_dynamic(output, f"{source.name()}.size()[{d}]", old, new)
    return set(entry.dynamic_dims)


def int_is_dynamic(output, source: Source, value: int) -> bool:
    """Is the int argument at ``source`` traced as a symbol?  Only plain arguments (and items of them) qualify.

    Under automatic dynamic an int that changed becomes a symbol even when it is now 0 or 1 (upstream creates
    unspecialised ints with ``do_not_specialize_zero_one``): a counter read as 0, then 1, compiles twice, the
    second time for every value.  Sizes keep 0 and 1 specialised.  An int beyond int64 (``2 ** 70``) is never
    a symbol: a graph computes symbols as int64 (its SYMINT_MATCH guard sends it to a compile of its own)."""
    if type(value) is not int or not _is_argument(source) or not INT64_MIN <= value <= INT64_MAX:
        return False
    dynamic = getattr(output.ctx, "dynamic", None)
    if dynamic is not None:
        return dynamic and value not in (0, 1)
    state = frame_state(output, source.name())
    entry = state.get(source.name())
    if entry is None or not isinstance(entry.size, int):
        state[source.name()] = entry = FrameStateEntry(value)
        if not is_resumed_loop_variable(output, source):
            return False
        entry.dynamic_dims.add(0)  # [Note: a resumed loop's variable]
        _log(output, source.name(), f"{output.f_code.co_name}: {source.name()} is a resumed loop's variable; it is "
             "dynamic (a symbol) from this first compile")
        return True
    if entry.specialised:
        return False
    if entry.size != value and not entry.dynamic_dims:
        entry.dynamic_dims.add(0)
        log_became_dynamic(output, source.name(), entry.size, value)
    return bool(entry.dynamic_dims)


def is_resumed_loop_variable(output, source: Source) -> bool:
    """Is ``source`` the variable of a loop the frame resumes inside, or the next item of that loop's iterator?

    [Note: a resumed loop's variable] A graph break inside ``for expert_idx in range(n):`` resumes once per
    iteration with ``expert_idx`` as an argument, and the rest of the iteration runs to the next item of the loop's
    iterator (``___tuple_iterator_getitem(L['___stack_1'], 0)``). Automatic dynamic would compile the first
    iteration with both as constants and make them symbols only when the next call brings other values -- which it
    always does: that is what a loop variable is. So they are symbols from the resume function's first compile,
    which saves a translation and a graph per loop (the small tutorial MoE: 4 entries for its loop body instead of
    5; at reference size a row count changes on the same call, so the count stays). A loop variable the program
    specialises anyway (``configs[i]``, ``range(i)``) gets EQUALS_MATCH guards from the next compile on, as other
    ints do (``remember_specialised_ints``)."""
    ctx = output.ctx
    if ctx is None or output.f_code not in ctx.resume_origin:
        return False
    if type(source) is TupleIteratorGetItemSource:
        return True
    return type(source) is LocalSource and source.local_name in ctx.loop_variables.get(output.f_code, ())


def _is_argument(source: Source) -> bool:
    """An int passed in (``L['n']``, ``L['sizes'][1]``), or the next item of a resumed loop's iterator: the loop
    variable, which changes every iteration (see [Note: loops resumed with their iterator])."""
    while isinstance(source, (GetItemSource, TupleIteratorGetItemSource)):
        source = source.base
    return isinstance(source, LocalSource)


def frame_state(output, name: str = "") -> dict[str, FrameStateEntry]:
    """The remembered sizes of ``name``'s frame.  A resume function shares its original function's memory for the
    user's locals (``L['x']`` is the same variable in both), so a size that became dynamic in ``forward`` is
    dynamic in the resume functions after a graph break from their first compile; its stack slots
    (``L['___stack_0']``) are its own."""
    ctx = output.ctx
    if ctx is None:
        return {}
    code = output.f_code
    if not name.startswith("L['___"):
        code = frame_state_key(ctx, code)
    return ctx.frame_state.setdefault(code, {})


def frame_state_key(ctx, code):
    """The code object whose size memory ``code`` uses: a resume function's original function."""
    return ctx.resume_origin[code][0] if code in ctx.resume_origin else code


def log_became_dynamic(output, what: str, old: Any, new: Any) -> None:
    msg = (f"{output.f_code.co_name}: {what} changed {old} -> {new} since the last compile; "
           f"it is now dynamic (a symbol) so later values reuse this graph")
    _log(output, what, msg)
    if output.ctx is not None:
        key = frame_state_key(output.ctx, output.f_code)
        output.ctx.generations[key] = output.ctx.generations.get(key, 0) + 1


def _log(output, what: str, msg: str) -> None:
    counters["automatic_dynamic"][what] += 1
    if output.ctx is not None:
        output.ctx.dynamic_log.append(msg)
    if config.log_recompiles or config.debug >= 1:
        print(f"[minidynamo] automatic dynamic: {msg}")


def symbolic_context(value: torch.Tensor, dynamic: set[int]) -> StatelessSymbolicContext:
    """Tell the fake mode which dimensions are symbols; every other one is a plain int."""
    sizes = [DimDynamic.DYNAMIC if d in dynamic else DimDynamic.STATIC for d in range(value.dim())]
    return StatelessSymbolicContext(dynamic_sizes=sizes)


# --------------------------------------------------------------------------------------------------------------
# Guards from the ShapeEnv.
# --------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ShapeGuardSource(TorchSource):
    """Our source, in the shape ``ShapeEnv`` expects (a ``torch._guards.Source`` with a ``name`` property)."""

    text: str

    @property
    def name(self) -> str:
        return self.text

    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


@dataclasses.dataclass(frozen=True)
class ExprSource(Source):
    """A guard's subject written as an expression (``L['x'].size()[0]``): evaluated like any other source."""

    text: str

    def name(self) -> str:
        return self.text


def is_symbolic(v: Any) -> bool:
    """A SymInt/SymBool/SymFloat whose value is not known while tracing (not specialised to a number)."""
    if isinstance(v, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return not v.node.expr.is_number
    if isinstance(v, (tuple, list, torch.Size)):
        return any(is_symbolic(x) for x in v)
    return False


def concrete(v: Any) -> Any:
    """A value with no symbol left in it, as plain Python numbers (a fake op may return ``SymInt(0)``)."""
    if isinstance(v, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return {torch.SymInt: int, torch.SymBool: bool, torch.SymFloat: float}[type(v)](v)
    if isinstance(v, torch.Size):
        return torch.Size([concrete(x) for x in v])
    if type(v) in (tuple, list):
        return type(v)(concrete(x) for x in v)
    return v


def symbolic_guards(output) -> list:
    """Our guards for the ShapeEnv's knowledge: EQUALS_MATCH for int arguments the trace specialised after all
    (``range(n)``), SHAPE_ENV for every other relation, each with the user line that caused it."""
    from .guards import Guard
    guards, specialised = [], set()
    for source, sym in output.int_symbols:
        value = output.shape_env.replace(sym)
        if value.is_number:  # guarded on the argument's own source: a cache index can read it (cache_entry.py)
            specialised.add(f"{source.name()} == {int(value)}")
            guards.append(Guard("EQUALS_MATCH", source, int(value), output.symbol_frames.get(sym)))
    for expr, frame in shape_guards(output):
        if expr not in specialised:
            guards.append(Guard("SHAPE_ENV", ExprSource(_subject(expr)), expr, frame))
    return guards


def _subject(expr: str) -> str:
    """What a relation is about, for the printed guard's first column: its first source (``L['x'].size()[0]``)."""
    match = re.search(r"(?:L|G)\[[^\]]+\](?:\.\w+\(\)\[\d+\])?", expr)
    return match.group(0) if match else "(shape)"


def shape_guards(output) -> list[tuple[str, Any]]:
    """The relations the trace assumed, as ``(python expression over L/G, user frame)`` pairs."""
    env = output.shape_env
    if not getattr(env, "backed_var_to_val", None) and not env.var_to_sources:
        return []
    check_marked_dims(output)
    remember_specialised_ints(output)
    fakes = [fake for _, fake in output.symbolic_inputs]
    sources = [ShapeGuardSource(src.name()) for src, _ in output.symbolic_inputs]
    exprs = env.produce_guards(fakes, sources)
    return [(e, _frame_of(output, e)) for e in exprs]


def remember_specialised_ints(output) -> None:
    """An int argument traced as a symbol that the program specialised anyway (``self.experts[i]``, ``range(n)``)
    gains nothing from being symbolic: later compiles guard it with EQUALS_MATCH, which ``recompile`` can read as
    "another code path" (see [Note: recompile limit per code path] in eval_frame.py)."""
    for source, sym in output.int_symbols:
        name = source.name()
        entry = frame_state(output, name).get(name)
        if entry is not None and output.shape_env.replace(sym).is_number:
            entry.specialised = True


def check_marked_dims(output) -> None:
    """A ``mark_dynamic`` dimension the program specialised (``if x.shape[0] == 4``) is an error, as upstream."""
    for name, sym in output.marked_symbols:
        value = output.shape_env.replace(sym)
        if value.is_number:
            raise ConstraintViolationError(
                f"{name} was marked dynamic, but the program specialised it to the constant {value} "
                "(e.g. it compared it with ==, or used it where Python needs a plain int)")


def _frame_of(output, expr: str):
    """The user line behind a produced guard: the first recorded ShapeEnv guard over the same symbols."""
    env = output.shape_env
    syms = {s for s, srcs in env.var_to_sources.items() if any(src.name in expr for src in srcs)}
    for guard, frame in output.shape_guard_frames:
        free = guard.expr.free_symbols
        if free and free <= syms:
            return frame
    return next((output.symbol_frames[s] for s in syms if s in output.symbol_frames), None)
