"""Native stretches: a graph break that also runs the next data-dependent subscript natively, in the same frame.

In:  the translator at a graph break (``graph_break.compile_and_break``), after the breaking instruction.
Out: the few instructions that follow it, when they only move locals and end in a subscript of a tensor by a
boolean tensor; ``emit_native_stretch`` copies them into the transformed code, and the resume function starts
after them.

[Note: native stretch]  A data-dependent op is often followed by another: the tutorial MoE reads

    expert_samples = sample_indices[expert_mask]    # break: the size depends on the mask's values
    expert_weights = flat_probs[expert_mask]        # and again

Breaking at the first and resuming would start a frame whose graph is empty, only to break at the second -- a frame
entry, guard checks and a resume function per expert for nothing.  So after the native instruction of a break we look
ahead: if the next few instructions are LOAD_FAST/STORE_FAST/LOAD_CONST and end in a subscript of a tensor by a
boolean tensor (which would break the graph again), they run natively too.  Running the program's own bytecode is
always correct; the look-ahead only decides where the next frame starts, so it needs no guard.  The second break is
recorded like the first, after it (explain and the counters show both).  Upstream resumes after each break.  When
the break hands on ``with`` exits (the MoE's loop sits in ``record_function("MoE_Experts")``), the stretch runs
inside the exit guard's try block with the breaking instruction, so an exception in either runs the exits.

[Note: shared nonzero]  Both subscripts of a stretch run through ``mask_subscript(a, m)`` instead of ``a[m]``.  A
boolean-mask subscript is ``a[m.nonzero(as_tuple=True)]``, and ``nonzero`` must wait for the device to know how
many elements it finds: each subscript is a synchronisation.  When the second subscript uses the same mask, unchanged
(the same object, the same ``_version``), its indices are the first one's, so ``mask_subscript`` keeps them and the
second subscript is a plain gather: the tutorial MoE syncs once per expert instead of twice (eager syncs twice).
Anything unusual (a subclass, a 0-d mask, a shape or device that ``a[m]`` would reject or convert) takes ``a[m]``
itself, so values, errors and gradients are eager's.  Upstream gets the same effect when it keeps ``nonzero`` in
the graph (``capture_dynamic_output_shape_ops``) and CSEs it.  Under ``no_grad`` a CUDA tensor's subscripts share
the mask's count instead, and each gathers its rows without indices ([Note: mask gather] in
mininductor/mask_gather.py): one sync per expert still, and no ``nonzero`` -- and where the mask is ``t == k``,
as each expert's is, the counts of a whole loop come from one table of ``t``'s values: one sync per loop
([Note: equality masks counted once]).
"""
from __future__ import annotations

import collections
import contextlib
import dis
import operator
import threading
import traceback
import weakref

import torch

from . import config
from .bytecode_analysis import livevars_analysis
from .codegen import PyCodegen
from .exc import Unsupported
from .output_graph import writes_in_place
from .resume_execution import copy_instruction
from .variables.builder import LazyVariableTracker
from .variables.constant import ConstantVariable
from .variables.misc import EqualityMaskVariable
from .variables.sym_node import SymNodeVariable
from .variables.tensor import TensorVariable

MAX_INSTRUCTIONS = 8
_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK")


class NativeStretch:
    """Instructions to run natively, where to resume after them, the locals they read and store, and the break
    they stand for."""

    def __init__(self, instructions: list, resume_offset: int, read: set[str], stored: set[str],
                 error: Unsupported, subscript: tuple = (None, None), subscripted: str | None = None,
                 handed: list | None = None) -> None:
        self.instructions, self.resume_offset = instructions, resume_offset
        self.read, self.stored, self.error = read, stored, error
        self.subscript = subscript  # the variables of its mask subscript's tensor and mask, where known
        self.subscripted = subscripted  # the live local that subscript's tensor was read from, if it was
        self.handed = handed or []  # the variables it stores in locals or leaves on the stack, where known


def native_stretch(tx, live: list[str]) -> NativeStretch | None:
    """The instructions after ``tx``'s breaking one, up to and including the next boolean-mask subscript, when
    they only move locals; None otherwise.  ``live``: the locals the break hands on (their values are known)."""
    code = tx.output.f_code
    cells = set(code.co_cellvars) | set(code.co_freevars)
    stack: list = [None]  # the breaking instruction's result: a real value we know nothing about
    origin: list = [None]  # per stack slot, the live local it was read from (None: made here, or a constant)
    stored: dict[str, object] = {}
    read: set[str] = set()
    for j in range(tx.ip, min(tx.ip + MAX_INSTRUCTIONS, len(tx.instructions) - 1)):
        ins = tx.instructions[j]
        if ins.opname == "STORE_FAST" and stack and ins.argval not in cells:
            stored[ins.argval] = stack.pop()
            origin.pop()
        elif ins.opname in _LOADS and ins.argval in stored:
            stack.append(stored[ins.argval])
            origin.append(None)
        elif ins.opname in _LOADS and ins.argval in live and ins.argval not in cells:
            read.add(ins.argval)
            stack.append(tx.symbolic_locals.get(ins.argval))
            origin.append(ins.argval)
        elif ins.opname == "LOAD_CONST":
            stack.append(None)
            origin.append(None)
        elif ins.opname == "BINARY_SUBSCR" and len(stack) >= 2 and _tensor_dtype(stack[-2]) is not None and \
                _tensor_dtype(stack[-1]) == torch.bool:
            error = Unsupported("data-dependent output shape: `getitem` returns a shape that depends on tensor values",
                                "keep shapes fixed: use masks with torch.where, or fixed-size top-k/scatter instead "
                                "of boolean indexing / nonzero", [_frame_summary(code, ins, tx.lineno)])
            return NativeStretch(tx.instructions[tx.ip:j + 1], tx.instructions[j + 1].offset, read, set(stored), error,
                                 (stack[-2], stack[-1]), origin[-2], [*stored.values(), *stack[:-2]])
        else:
            return None
    return None


def emit_mask_subscript(cg: PyCodegen, equality: tuple[str, str | int] | None = None,
                        paired: str | None = None) -> None:
    """In place of ``BINARY_SUBSCR`` (stack: ``a, m`` -> ``a[m]``): call ``mask_subscript(a, m)``; where the mask
    is ``t == k`` (``equality``: the live local holding ``t``, and ``k``'s live local or its value),
    ``mask_subscript(a, m, t, k)`` ([Note: equality masks counted once]); where the stretch's subscript takes
    the live local ``paired`` by the same mask, that tensor too, last ([Note: both subscripts in one launch])."""
    cg.store_local("___mask_m")
    cg.store_local("___mask_a")
    cg.load_const_object(mask_subscript, push_null=True)
    cg.load_local("___mask_a")
    cg.load_local("___mask_m")
    if equality is None and paired is None:
        cg.call(2)
        return
    t, k = equality if equality is not None else (None, None)
    for value in (t, k, paired):
        if value is None or type(value) is int:
            cg.load_const(value)
        else:
            cg.load_local(f"___live_{value}")
    cg.call(5)


def paired_subscript(tx, stretch: NativeStretch) -> str | None:
    """The live local the stretch's subscript takes, when its mask is the breaking subscript's own (the same
    variable, so the same tensor): the two can be gathered in one launch ([Note: both subscripts in one launch])."""
    mask = tx.stack[-1] if tx.stack else None
    return stretch.subscripted if mask is not None and stretch.subscript[1] is mask else None


def equality_mask(tx, mask, live: list[str]) -> tuple[str, str | int] | None:
    """``(t, k)`` when the tracked tensor ``mask`` is ``t == k`` of an integer tensor held by the live local ``t``
    and an int -- a constant, or the value of the live local ``k`` -- as the graph computes it; None otherwise.
    See [Note: equality masks counted once]."""
    node = mask.proxy.node if isinstance(mask, TensorVariable) else None
    if node is None or node.kwargs or len(node.args) != 2 or not (
            node.op == "call_function" and node.target in (operator.eq, torch.eq)
            or node.op == "call_method" and node.target == "eq"):
        return None
    t_node, k_arg = node.args
    if not isinstance(t_node, torch.fx.Node) and isinstance(k_arg, torch.fx.Node):
        t_node, k_arg = k_arg, t_node  # k == t
    tracked = {name: _tracked(tx, name) for name in live}
    held = {id(v.as_proxy().node): name for name, v in tracked.items()
            if isinstance(v, (TensorVariable, SymNodeVariable))}
    t = held.get(id(t_node))
    if t is None or not isinstance(tracked[t], TensorVariable) or tracked[t].example_value.dtype not in INT_RANGES:
        return None
    if type(k_arg) is int:
        return t, k_arg
    k = held.get(id(k_arg)) if isinstance(k_arg, torch.fx.Node) else None
    return (t, k) if k is not None and isinstance(tracked[k], SymNodeVariable) else None


def _tracked(tx, name: str):
    """The variable of local ``name``; for an input read by the traced code, the one it was read as (a
    ``LazyVariableTracker`` never read stays as it is: reading it now would add guards)."""
    v = tx.symbolic_locals.get(name)
    if isinstance(v, LazyVariableTracker):
        return tx.output.source_cache.get(v.source.name(), v)
    return v


_last = threading.local()  # .mask: (weakref to the last mask, its _version, its true count, its nonzero indices)


def mask_subscript(a, m, t=None, k=None, b=None):
    """``a[m]``, sharing ``m``'s count or nonzero indices with the previous call on the same unchanged mask
    ([Note: shared nonzero]); ``t, k``: the translator saw ``m`` made as ``t == k`` ([Note: equality masks counted
    once]); ``b``: the next subscript will be ``b[m]`` ([Note: both subscripts in one launch]).

    With a 1-D mask, ``a[m]`` takes ``a``'s rows at ``m.nonzero()``.  On a contiguous ``a`` that is
    ``a.index_select(0, rows)``: the same values, dtype and (contiguous) layout, through a simpler op than
    advanced indexing -- about half its host time, paid twice per expert of the tutorial MoE (advanced indexing
    that records a gradient, the training forward's ``flat_probs[mask]``, took 38 us on an H200 host).  Its
    backward is ``index_add`` where eager's is an accumulating ``index_put``: both add each row's gradient
    into its own row (``nonzero``'s rows are distinct, so no two additions meet and the order cannot change a
    bit), so the gradients are equal.  Only under ``torch.use_deterministic_algorithms`` does the subscript keep
    ``a[rows]``, so that it raises or passes exactly where eager's does.  Under ``no_grad``, a CUDA tensor's
    rows need no index at all: the mask is counted once and mininductor's mask gather copies them ([Note: mask
    gather] in mininductor/mask_gather.py)."""
    if type(m) is EqualityMask:
        return equality_subscript(a, m, b)
    if type(a) is not torch.Tensor or type(m) is not torch.Tensor or m.dtype != torch.bool:
        return a[m]
    rank = m.dim()  # (called per expert of the MoE: the checks are ordered and written for a 1-D mask's speed)
    if rank == 0 or a.dim() < rank or (a.shape[0] != m.shape[0] if rank == 1 else a.shape[:rank] != m.shape) or \
            a.device != m.device:
        return a[m]
    last = getattr(_last, "mask", None)
    if last is not None and (last[0]() is not m or last[1] != m._version):
        last = None
    if rank == 1 and (a.is_cuda or GATHER_ON_CPU) and config.mask_gather and not torch.is_grad_enabled() and \
            a.is_contiguous():
        gather = _mask_gather()
        if gather is not None and gather.supports(a, m):
            pending, _last.pending = getattr(_last, "pending", None), None
            if last is None:
                n = equality_count(t, k, m) if t is not None else None
                last = _last.mask = (weakref.ref(m), m._version, gather.count(m) if n is None else n, None)
            elif pending is not None and pending[0]() is a and pending[1] == a._version and pending[2]() is m:
                return pending[3]  # gathered with the previous subscript
            n = last[2] if last[2] is not None else len(last[3])
            if b is not None and gather.pairs(a, b, m):
                out, other = gather.mask_gather_pair(a, b, m, n)
                _last.pending = (weakref.ref(b), b._version, weakref.ref(m), other)  # for the next subscript
                return out
            return gather.mask_gather(a, m, n)
    if last is not None and last[3] is not None:
        index = last[3]
    else:
        index = m.nonzero().view(-1) if rank == 1 else m.nonzero(as_tuple=True)
        _last.mask = (weakref.ref(m), m._version, None, index)
    if rank == 1 and a.is_contiguous() and not (
            a.requires_grad and torch.is_grad_enabled() and torch.are_deterministic_algorithms_enabled()):
        return a.index_select(0, index)
    return a[index]


# [Note: both subscripts in one launch]  The stretch's two subscripts take the same mask (``sample_indices[mask]``,
# ``flat_probs[mask]``); with the mask's count known, each was an allocation and a launch of the gather kernel,
# with the Python around them.  The translator sees both at the break (``paired_subscript``: the stretch's
# subscript reads a live local, by the very variable the breaking subscript's mask is) and hands that second
# tensor to the first call, which gathers both in one launch (``mask_gather_pair``) and keeps the second result
# for the call that follows.  That call takes it only if it subscripts the same tensor, unchanged (its
# ``_version``), by the same unchanged mask; otherwise it gathers as before and the kept result is dropped.
# Between the two calls the stretch only moves locals, so the result is always taken; the check is what keeps it
# right whatever runs in between.  Both results are new contiguous tensors, as eager's.  A pair that also counted
# the mask in its launch (cutting its outputs with ``resize_``) was tried in the thirty-fourth session and gained
# nothing measurable while every expert still waited for its count; docs/benchmarks.md, thirty-fifth session,
# has this one's numbers.


# [Note: equality masks counted once]  The tutorial MoE's loop makes each expert's mask as ``flat_indices ==
# expert_idx`` and subscripts by it.  A mask subscript must know how many elements are true before it can allocate
# its result, so every expert's stretch counted its mask and waited for the device: a launch, an allocation and
# an ``item``, about 21 us of an expert's 140 us of host time on an H200 host, and the one point per expert where
# the host waited for the GPU.  Those 32 counts are one table of ``flat_indices``'s values.  So where the mask of
# a stretch's breaking subscript is ``t == k`` -- an integer tensor ``t`` that a live local holds, and an int
# ``k``, a constant or a live local's value (``equality_mask``, at translation) -- the transformed code passes
# ``t`` and ``k`` on, and ``equality_count`` answers from a table of ``t``'s values and their counts (a ``Counter``
# of ``t.tolist()``: one wait for the whole loop) when the table is known to describe the values the graph compared:
#
# * ``t`` is the object the table was made from, with the same ``_version`` and storage.  Every in-place write
#   PyTorch makes bumps the version -- eager's ops, and our graphs' writes ([Note: input mutations]) -- as
#   autograd's checks of saved tensors rely on;
# * and nothing but our code ran since the previous stretch that came through here: the trampoline counts the
#   continuations it follows (``hops``).  A stretch's continuation leads straight to the frame whose stretch comes
#   next (one hop); any other graph break ran user code natively in between (two or more), and a call from outside
#   starts over.  That rules out what the version cannot see, a write through ``.data`` or a DLPack alias made by
#   user code between two iterations.
#
# The table is made at the second stretch in a row that sees ``t`` unchanged: the first counts its mask as before
# (a single ``t == k`` gains nothing from a table), and at the second, ``t`` is known not to have changed since
# the first -- so not since this frame's graph compared it.  Later ones read the table.  A count from the table is
# exact under these conditions; should one ever be wrong, it would size the result wrongly, and the gather kernel
# writes no row beyond the count it is given (``nrows``), so nothing is written out of bounds.  Measured on an H200
# host: docs/benchmarks.md, thirty-fifth session.  Upstream has no counterpart: it keeps ``nonzero`` in the graph
# (``capture_dynamic_output_shape_ops``) or breaks there, and syncs once per subscript.
INT_RANGES = {dtype: (torch.iinfo(dtype).min, torch.iinfo(dtype).max)
              for dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)}


class _EqualityCounts(threading.local):
    hops = 2  # continuations the trampoline followed since the last counted stretch (2: "not straight after one")
    tensor = None  # a weak reference to the t the table describes
    state = None  # (t._version, t.data_ptr()) when it was first seen
    table: collections.Counter | None = None  # {value: count} of t, made at the second stretch


equality_counts = _EqualityCounts()


def equality_count(t, k, m=None) -> int | None:
    """How many elements of ``m`` are true, read from the table of ``t``'s values where ``m`` is ``t == k`` (None:
    a mask left unmade) and the table describes ``t``'s values as the graph compared them; None: count ``m``
    ([Note: equality masks counted once])."""
    counts = equality_counts
    hops, counts.hops = counts.hops, 0
    if not config.equality_counts or type(t) is not torch.Tensor or type(k) is not int:
        return None
    low, high = INT_RANGES.get(t.dtype, (1, 0))  # k outside t's dtype would wrap around in t == k: no table
    if not low <= k <= high or m is not None and (t.shape != m.shape or t.device != m.device):
        return None
    state = (t._version, t.data_ptr())
    if hops != 1 or counts.tensor is None or counts.tensor() is not t or counts.state != state:
        counts.tensor, counts.state, counts.table = weakref.ref(t), state, None
        return None
    if counts.table is None:  # t has at most mask_gather.MAX_MASK elements (m's shape): read once, counted here
        counts.table = collections.Counter(t.tolist())
    return counts.table.get(k, 0)


# [Note: masks the graph does not make]  With its count read from the table, an expert's mask was still made by the
# graph before the break: ``flat_indices == expert_idx``, a kernel of 128 elements -- an allocation, a launch, an
# output, and the expert's index passed in as a device scalar -- whose only readers are the stretch's two
# subscripts.  The gather can compare ``t == k`` itself.  So where the breaking subscript's mask is ``t == k``
# (``equality_mask``) and nothing but the stretch's subscripts reads it, the graph does not output it (dead code
# elimination then drops the comparison, and ``k`` as an input if nothing else reads it), and the transformed code
# hands on a recipe, ``EqualityMask(t, k)``, in its place (``unmade_mask``, at translation; one object for the
# stack slot and every local that held the mask).  ``mask_subscript`` then gathers the rows where ``t == k`` in one
# launch (``equality_subscript``) when the table gives the count; otherwise -- no table yet, a CPU tensor, anything
# unusual -- it makes the mask with eager's own ``t == k``, once per recipe, and goes on as for any mask.  The
# recipe means what the graph's mask meant only while ``t`` is as the graph compared it: no node after the
# comparison writes in place, and between the graph and the stretch only the transformed code runs (it saves
# locals and replays side effects, stores of Python values; an attribute store, which could run a user's setter,
# refuses).  And only the stretch's subscripts may see the recipe: no other stack slot, container or cell, no
# local live after the stretch or that the stretch stores it in.  Under grad mode (the training forward) the graph
# still makes the mask, as the subscripts there use ``nonzero`` anyway; ``config.unmade_masks``.  8.5-10.7% off
# the tutorial MoE's eval forward on H200 hosts (docs/benchmarks.md, thirty-sixth session).  Upstream keeps the
# comparison in its graph.
class EqualityMask:
    """``t == k``, which the graph did not make ([Note: masks the graph does not make])."""

    __slots__ = ("__weakref__", "count", "k", "t", "tensor")

    def __init__(self, t, k) -> None:
        self.t, self.k = t, k
        self.count: int | None = -1  # its true elements, once the table is asked (None: it could not tell)
        self.tensor: torch.Tensor | None = None  # the mask, once made

    def made(self):
        """The mask itself, made once: ``t == k`` as eager makes it."""
        if self.tensor is None:
            self.tensor = self.t == self.k
        return self.tensor


def equality_subscript(a, m: EqualityMask, b=None):
    """``a[t == k]`` for the recipe ``m``: gathered comparing in the kernel when the table gives the count, through
    the made mask otherwise; ``b``: the next subscript will be ``b[t == k]`` (see ``mask_subscript``)."""
    if m.tensor is not None:  # made already: as for any mask
        return mask_subscript(a, m.tensor, None, None, b)
    t = m.t
    pending, _last.pending = getattr(_last, "pending", None), None
    if pending is not None and pending[2]() is m and pending[0]() is a and pending[1] == a._version and \
            not torch.is_grad_enabled():
        return pending[3]  # gathered with the previous subscript (checked first: the stretch's second call)
    if type(a) is torch.Tensor and type(t) is torch.Tensor and t.dim() == 1 and \
            a.dim() >= 1 and a.shape[0] == t.shape[0] and a.device == t.device and (a.is_cuda or GATHER_ON_CPU) and \
            config.mask_gather and not torch.is_grad_enabled() and a.is_contiguous():
        gather = _mask_gather()
        if m.count == -1:  # asked once per recipe: asking consumes the hop ([Note: equality masks counted once])
            m.count = equality_count(t, m.k)
        if m.count is not None and gather is not None and gather.supports(a, t):
            if b is not None and gather.pairs(a, b, t):
                out, other = gather.mask_gather_pair(a, b, t, m.count, key=m.k)
                _last.pending = (weakref.ref(b), b._version, weakref.ref(m), other)
                return out
            return gather.mask_gather(a, t, m.count, key=m.k)
    return mask_subscript(a, m.made(), None, None, b)


def unmade_mask(tx, stretch: NativeStretch, live: list[str]) -> EqualityMaskVariable | None:
    """The recipe that stands for the breaking subscript's mask (the top of ``tx.stack``) when the graph need not
    make it ([Note: masks the graph does not make]); None otherwise.  The caller makes sure that no stack slot,
    container or cell holds the mask; this checks the rest."""
    if not (config.unmade_masks and config.mask_gather) or torch.is_grad_enabled() or not tx.stack:
        return None
    mask = tx.stack[-1]
    equality = equality_mask(tx, mask, live)
    if equality is None or any(v is mask for v in stretch.handed) or \
            any(kind == "attr" for kind, _ in tx.output.side_effects.order):
        return None
    after = livevars_analysis(tx.output.f_code, stretch.resume_offset)
    if any(name in after and tx.symbolic_locals.get(name) is mask for name in live):
        return None
    nodes = list(tx.output.graph.nodes)
    if any(writes_in_place(node) for node in nodes[nodes.index(mask.proxy.node):]):
        return None  # t may have changed since the graph compared it
    t, k = equality
    return EqualityMaskVariable(_tracked(tx, t), _tracked(tx, k) if type(k) is str else ConstantVariable(k))


# The mask gather runs on CUDA tensors; on the CPU its kernels would be interpreted (tests turn this on).
GATHER_ON_CPU = False
_mask_gather_module: list = []  # [mininductor.mask_gather or None], once looked for


def _mask_gather():
    """mininductor's mask gather (a module with ``supports`` and ``mask_gather``), or None without it."""
    if not _mask_gather_module:
        try:
            from mininductor import mask_gather
        except ImportError:  # no Triton: eager's ops
            mask_gather = None
        _mask_gather_module.append(mask_gather)
    return _mask_gather_module[0]


def emit_native_stretch(tx, cg: PyCodegen, stretch: NativeStretch) -> int:
    """Put the locals the stretch reads in their real slots, copy its instructions, keep ``___live_`` copies of
    what it stores (``continue_at`` hands those on), and keep its break for the frame's record.  Returns its net
    stack effect."""
    for name in sorted(stretch.read):
        cg.load_local(f"___live_{name}")
        cg.store_local(name)
    pushed = 0
    for ins in stretch.instructions:
        if ins is stretch.instructions[-1]:  # the boolean-mask subscript: [Note: shared nonzero]
            emit_mask_subscript(cg)
        else:
            cg.append(copy_instruction(tx.output.f_code, ins.offset))
        pushed += stack_effect(ins)
    for name in sorted(stretch.stored):
        cg.load_local(name)
        cg.store_local(f"___live_{name}")
    tx.output.stretch_breaks.append(stretch.error)  # recorded after the break itself: convert_frame.record_breaks
    return pushed


def stack_effect(inst) -> int:
    if inst.arg is not None:
        return dis.stack_effect(dis.opmap[inst.opname], inst.arg, jump=False)
    return dis.stack_effect(dis.opmap[inst.opname])


def prefetch_mask_kernels(tx, stretch: NativeStretch, at_subscript: bool, paired: str | None,
                          unmade: EqualityMaskVariable | None = None) -> None:
    """Let mininductor start compiling the mask-gather kernels that the break's own subscript (when
    ``at_subscript``: its tensor and mask are the top of ``tx.stack``) and the stretch's will launch at run time --
    one kernel for both where they are ``paired`` ([Note: prefetched mask kernels] in mininductor/mask_gather.py),
    and the one that compares ``t == k`` itself where the mask is left ``unmade`` (its recipe).
    Only a head start: where ``mask_subscript`` will not gather (grad mode, no mininductor) nothing starts, and
    anything that goes wrong is left to the launch."""
    if not config.mask_gather or torch.is_grad_enabled():
        return
    gather = _mask_gather()
    if gather is None:
        return
    breaking = tuple(tx.stack[-2:]) if at_subscript and len(tx.stack) >= 2 else (None, None)
    subscripts = [(*breaking, stretch.subscript[0])] if paired is not None else [breaking, stretch.subscript]
    t = _example_value(unmade.t) if unmade is not None else None
    for a, m, *pair in subscripts:
        a, m, b = _example_value(a), _example_value(m), _example_value(pair[0]) if pair else None
        if isinstance(a, torch.Tensor) and isinstance(m, torch.Tensor):
            with contextlib.suppress(Exception):  # a head start only: the launch compiles what it needs
                gather.prefetch(a, m, b if isinstance(b, torch.Tensor) else None, t)


def _example_value(v):
    """The value of a tracked tensor (a fake tensor) or of a tensor input not looked at yet (the real one)."""
    if isinstance(v, LazyVariableTracker):
        return v.value
    if isinstance(v, TensorVariable):
        return v.example_value
    return None


def _tensor_dtype(v) -> torch.dtype | None:
    """The dtype of a tracked tensor (or of a tensor input not looked at yet); None for anything else."""
    value = _example_value(v)
    return value.dtype if isinstance(value, torch.Tensor) else None


def _frame_summary(code, ins, lineno: int) -> traceback.FrameSummary:
    return traceback.FrameSummary(code.co_filename, ins.lineno or lineno, code.co_name, lookup_line=True)
