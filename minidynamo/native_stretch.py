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
mininductor/mask_gather.py): one sync per expert still, and no ``nonzero``.
"""
from __future__ import annotations

import contextlib
import dis
import threading
import traceback
import weakref

import torch

from . import config
from .codegen import PyCodegen
from .exc import Unsupported
from .resume_execution import copy_instruction
from .variables.builder import LazyVariableTracker
from .variables.tensor import TensorVariable

MAX_INSTRUCTIONS = 8
_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK")


class NativeStretch:
    """Instructions to run natively, where to resume after them, the locals they read and store, and the break
    they stand for."""

    def __init__(self, instructions: list, resume_offset: int, read: set[str], stored: set[str],
                 error: Unsupported, subscript: tuple = (None, None)) -> None:
        self.instructions, self.resume_offset = instructions, resume_offset
        self.read, self.stored, self.error = read, stored, error
        self.subscript = subscript  # the variables of its mask subscript's tensor and mask, where known


def native_stretch(tx, live: list[str]) -> NativeStretch | None:
    """The instructions after ``tx``'s breaking one, up to and including the next boolean-mask subscript, when
    they only move locals; None otherwise.  ``live``: the locals the break hands on (their values are known)."""
    code = tx.output.f_code
    cells = set(code.co_cellvars) | set(code.co_freevars)
    stack: list = [None]  # the breaking instruction's result: a real value we know nothing about
    stored: dict[str, object] = {}
    read: set[str] = set()
    for j in range(tx.ip, min(tx.ip + MAX_INSTRUCTIONS, len(tx.instructions) - 1)):
        ins = tx.instructions[j]
        if ins.opname == "STORE_FAST" and stack and ins.argval not in cells:
            stored[ins.argval] = stack.pop()
        elif ins.opname in _LOADS and ins.argval in stored:
            stack.append(stored[ins.argval])
        elif ins.opname in _LOADS and ins.argval in live and ins.argval not in cells:
            read.add(ins.argval)
            stack.append(tx.symbolic_locals.get(ins.argval))
        elif ins.opname == "LOAD_CONST":
            stack.append(None)
        elif ins.opname == "BINARY_SUBSCR" and len(stack) >= 2 and _tensor_dtype(stack[-2]) is not None and \
                _tensor_dtype(stack[-1]) == torch.bool:
            error = Unsupported("data-dependent output shape: `getitem` returns a shape that depends on tensor values",
                                "keep shapes fixed: use masks with torch.where, or fixed-size top-k/scatter instead "
                                "of boolean indexing / nonzero", [_frame_summary(code, ins, tx.lineno)])
            return NativeStretch(tx.instructions[tx.ip:j + 1], tx.instructions[j + 1].offset, read, set(stored), error,
                                 (stack[-2], stack[-1]))
        else:
            return None
    return None


def emit_mask_subscript(cg: PyCodegen) -> None:
    """In place of ``BINARY_SUBSCR`` (stack: ``a, m`` -> ``a[m]``): call ``mask_subscript(a, m)``."""
    cg.store_local("___mask_m")
    cg.store_local("___mask_a")
    cg.load_const_object(mask_subscript, push_null=True)
    cg.load_local("___mask_a")
    cg.load_local("___mask_m")
    cg.call(2)


_last = threading.local()  # .mask: (weakref to the last mask, its _version, its true count, its nonzero indices)


def mask_subscript(a, m):
    """``a[m]``, sharing ``m``'s count or nonzero indices with the previous call on the same unchanged mask
    ([Note: shared nonzero]).

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
            if last is None:
                last = _last.mask = (weakref.ref(m), m._version, gather.count(m), None)
            return gather.mask_gather(a, m, last[2] if last[2] is not None else len(last[3]))
    if last is not None and last[3] is not None:
        index = last[3]
    else:
        index = m.nonzero().view(-1) if rank == 1 else m.nonzero(as_tuple=True)
        _last.mask = (weakref.ref(m), m._version, None, index)
    if rank == 1 and a.is_contiguous() and not (
            a.requires_grad and torch.is_grad_enabled() and torch.are_deterministic_algorithms_enabled()):
        return a.index_select(0, index)
    return a[index]


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


def prefetch_mask_kernels(subscripts: list[tuple]) -> None:
    """Let mininductor start compiling the mask-gather kernels that these mask subscripts (pairs of variables:
    tensor, mask) will launch at run time ([Note: prefetched mask kernels] in mininductor/mask_gather.py).  Only a
    head start: where ``mask_subscript`` will not gather (grad mode, no mininductor) nothing starts, and anything
    that goes wrong is left to the launch."""
    if not config.mask_gather or torch.is_grad_enabled():
        return
    gather = _mask_gather()
    if gather is None:
        return
    for a, m in subscripts:
        a, m = _example_value(a), _example_value(m)
        if isinstance(a, torch.Tensor) and isinstance(m, torch.Tensor):
            with contextlib.suppress(Exception):  # a head start only: the launch compiles what it needs
                gather.prefetch(a, m)


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
