"""Graph breaks: the code that splits a frame where the translator stopped.

In:  the root translator stopped at an instruction it cannot trace (``InstructionTranslator.step`` reached its
``break_offset``), with the stack, the symbolic locals and the side effects recorded so far.  Out: the instructions
of the transformed code: (1) call the graph captured so far, (2) rebuild the stack and replay the side effects,
(3) run the breaking instruction *natively* -- a data-dependent jump takes both branches, a ``FOR_ITER`` both exits --
and (4) return a ``Continuation`` to the resume function of each place it may go on (``continue_at``).  Where a
frame may break at all, and where a break moves to (the start of a 3.12 inlined comprehension, which then runs
natively: ``inlined_comprehension.py``; the start of a ``try`` statement, which runs eagerly from there), is
``break_points.py``'s; so are the two refusals made here, with the stack in hand (inside an ``except`` block, a
closable generator).  The ``with`` regions a break leaves open (grad mode, autocast, record_function exits handed
on, the exit guard around the native instruction, a user context manager's block) are ``reenter_with.py``'s.

    def toy(x):                          transformed toy (the break at ``if``):
        a = torch.sin(x)                     ___graph_out = __compiled_fn_0(x)
        if a.sum() > 0:   # break            if ___graph_out[1] > 0: return Continuation(__resume_at_30_1, a)
            return a * 2                     else:                  return Continuation(__resume_at_38_2, a)
        return a - 1

The resume functions themselves, and the helpers the transformed code calls (``Continuation``, ``GradModeExit``,
``run_exits``...), are in ``resume_execution.py``; the return path without a break is
``convert_frame.compile_and_return``.  Upstream twin: ``torch/_dynamo/symbolic_convert.py``
(``break_graph_if_unsupported``, ``create_call_resume_at``, ``generic_jump``) with ``resume_execution.py``.
"""
from __future__ import annotations

import functools
import types

from bytecode import Instr, Label

from . import bytecode_transformation as bt
from .break_points import JUMPS, refuse_break_in_except_block, refuse_break_making_a_closable_generator
from .bytecode_analysis import livevars_analysis
from .codegen import GRAPH_OUT, LoadedObject, PyCodegen
from .exc import Unsupported, unimplemented
from .exception_table import try_statement_start
from .inlined_comprehension import (
    comprehension_starting_at,
    emit_comprehension,
    locals_handed_on,
)
from .native_stretch import (
    NativeStretch,
    emit_mask_subscript,
    emit_native_stretch,
    equality_mask,
    native_stretch,
    paired_subscript,
    prefetch_mask_kernels,
    stack_effect,
    unmade_mask,
)
from .reenter_with import emit_under_exit_guard, inside_user_with_block, stack_item_for_break
from .resume_execution import (
    Continuation,
    bind_closure,
    compiled_callee,
    compiled_module_call,
    copy_instruction,
    forward_jump_name,
)
from .variables.base import VariableTracker
from .variables.dicts import DictIteratorVariable, DictVariable, DictViewVariable
from .variables.iter import LazyIteratorVariable, ListIteratorVariable
from .variables.lists import BaseListVariable, SliceVariable
from .variables.misc import EqualityMaskVariable
from .variables.sym_node import SymNodeVariable
from .variables.tensor import TensorVariable


def tensors_to_output(values: list[VariableTracker]) -> list[VariableTracker]:
    """The computed tensors and symbolic ints (no source) reachable from ``values``: the graph's outputs."""
    out: dict[int, VariableTracker] = {}
    seen: set[int] = set()  # a list may hold itself (``a.append(a)``)

    def walk(v):
        if not isinstance(v, VariableTracker) or id(v) in seen:
            return
        seen.add(id(v))
        if isinstance(v, (TensorVariable, SymNodeVariable)):
            if v.source is None:
                out.setdefault(id(v), v)
        elif v.source is not None:
            return
        elif isinstance(v, (DictViewVariable, DictIteratorVariable)):
            walk(v.dict_vt)
        elif isinstance(v, LazyIteratorVariable):  # zip, map...: their iterators (and function)
            for it in v.iterators:
                walk(it)
            walk(getattr(v, "fn", None))
        elif isinstance(v, (BaseListVariable, ListIteratorVariable, SliceVariable)):
            for item in v.items:
                walk(item)
        elif isinstance(v, DictVariable):
            for item in v.items.values():
                walk(item)
        elif hasattr(v, "obj"):  # bound methods
            walk(v.obj)
        elif hasattr(v, "call_arg"):  # a callee wrapped at a graph break
            walk(v.call_arg)
        elif hasattr(v, "kwdefaults") and hasattr(v, "closure"):  # a function made in the frame: its defaults
            walk(v.defaults)
            walk(v.kwdefaults)

    for v in values:
        walk(v)
    return list(out.values())


def built_after_side_effects(value: VariableTracker) -> bool:
    """Whether ``value`` reaches an iterator over an input dict, which must be rebuilt after the mutations.

    [Note: dict iterators see the mutated dict]  CPython's dict iterator remembers the dict's size when it is
    made and raises "dictionary changed size during iteration" at its next step if the size differs.  Traced
    code that did ``d["a"] = 3`` and then ``it = iter(d.items())`` made its iterator over the *new* dict; the
    real ``d`` gets the store only when the side effects are applied.  So such an iterator (or a value holding
    one: ``enumerate(d.items())``) is rebuilt after the side effects, every other value before them (a value
    reloaded from its source must be read before the mutation changes it).
    """
    found = False
    seen: set[int] = set()

    def walk(v):
        nonlocal found
        if found or not isinstance(v, VariableTracker) or id(v) in seen:
            return
        seen.add(id(v))
        if isinstance(v, DictIteratorVariable):
            found = v.dict_vt.source is not None
        elif isinstance(v, LazyIteratorVariable):
            for it in v.iterators:
                walk(it)
        elif isinstance(v, (BaseListVariable, ListIteratorVariable)) and v.source is None:
            for item in v.items:
                walk(item)

    walk(value)
    return found


def wrap_callee(tx, v: VariableTracker) -> VariableTracker:
    """The callee of a breaking CALL is compiled when it runs (as PEP 523 would compile its frame)."""
    from .variables import NNModuleVariable, UserFunctionVariable, UserMethodVariable
    from .variables.functions import NestedUserFunctionVariable
    from .variables.nn_module import plain_forward
    ctx = tx.output.ctx
    # (a function made by exec() without ``__name__`` in its globals has ``__module__`` None)
    if (getattr(getattr(v, "fn", None), "__module__", None) or "").startswith("torch"):
        return v  # PyTorch's own Python code runs as it is
    if isinstance(v, UserMethodVariable) and not hasattr(v.fn, "_minidynamo_disable"):
        return LoadedObject(ctx.wrapped(v.fn), v.obj, types.MethodType)
    if isinstance(v, UserFunctionVariable) and not getattr(v.fn, "_minidynamo_disable", False) \
            and not getattr(v.fn, "_minidynamo_graph_break", False):
        if v.source is not None and (v.fn.__closure__ or v.fn.__defaults__ or v.fn.__kwdefaults__):
            # Guards check the callee's code, not its cells: wrap the object found at run time (a closure made
            # again on each call must run with its own cells, not with those of the first one traced).
            return LoadedObject(ctx, v, compiled_callee)
        return LoadedObject(ctx.wrapped(v.fn))
    if isinstance(v, NestedUserFunctionVariable) and v.code.co_varnames[:1] != (".0",):
        # made in this frame: rebuilt on its real cells, then compiled (a 3.11 comprehension's ``.0`` parameter
        # cannot be bound by name, so a comprehension runs natively)
        return LoadedObject(ctx, v, compiled_callee)
    if isinstance(v, NNModuleVariable) and plain_forward(v.module) is not None:
        return LoadedObject(ctx, v, compiled_module_call)
    return v


def callee_slot(inst, stack: list) -> int | None:
    """Index in ``stack`` of the callable a CALL at ``inst`` calls."""
    if inst.opname == "CALL":
        n = inst.arg
        return len(stack) - n - 2 if not _is_null(stack[-n - 2]) else len(stack) - n - 1
    if inst.opname == "CALL_FUNCTION_EX":
        return len(stack) - 2 - (inst.arg & 1)
    return None


def _is_null(v) -> bool:
    from .variables import NullVariable
    return isinstance(v, NullVariable)


def compile_and_break(tx, inst) -> list:
    """At a graph break: run the graph, rebuild the stack, run ``inst`` natively, continue in a resume function.

    The code returned calls the graph captured so far (``emit_graph_call``), saves the live locals and the stack and
    replays the side effects (``emit_saved_state``), then runs ``inst`` natively and returns the ``Continuation`` of
    each place it may go on (``emit_native_and_continue``).  Where nothing may run natively (``eager_rest_of_frame``),
    the one continuation starts at ``inst`` itself.
    """
    refuse_break_in_except_block(tx)
    output = tx.output
    code = output.f_code
    stack = [v if _is_null(v) else stack_item_for_break(tx, v) for v in tx.stack]
    eager_rest = eager_rest_of_frame(tx, inst)
    slot = callee_slot(inst, stack) if eager_rest is None else None
    virtual = virtual_nulls(stack, slot)
    comp = comprehension_starting_at(code, inst.offset) if eager_rest is None else None  # consumed whole natively
    if comp is None and eager_rest is None:
        refuse_break_making_a_closable_generator(tx, inst, stack[slot] if slot is not None else None)
    if slot is not None:
        stack[slot] = wrap_callee(tx, stack[slot])
    next_offset = tx.instructions[tx.ip].offset if tx.ip < len(tx.instructions) else None
    # Only locals some continuation reads before writing are handed on (and so guarded): see bytecode_analysis.
    # (A comprehension run natively reads its locals first: those live at its start.)
    starts = [inst.offset] if eager_rest is not None else [comp.start] if comp is not None else \
        continuation_offsets(tx, inst, next_offset)
    live = sorted(set(tx.symbolic_locals) & live_at(code, starts))
    handed_on = set() if comp is None else \
        locals_handed_on(comp, set(live), live_at(code, [comp.start]), live_at(code, [comp.end]))
    local_vts = [tx.symbolic_locals[n] for n in live]
    cells = cell_stores(tx)
    # the native stretch after a break at any other instruction (emit_native_and_continue: break_at_instruction)
    runs_instruction = eager_rest is None and comp is None and inst.opname not in JUMPS and \
        inst.opname != "FOR_ITER" and not pushes_null(inst)
    stretch = native_stretch(tx, live) if runs_instruction else None
    unmade = leave_mask_unmade(tx, inst, stretch, stack, live, local_vts, cells) if stretch is not None else None
    outputs = tensors_to_output(stack + local_vts + output.side_effects.values_to_reconstruct() +
                                [v for _, v in cells])
    cg = PyCodegen(tx, code, output.f_globals, {id(t): k for k, t in enumerate(outputs)})
    emit_saved_state(cg, live, local_vts, [v for v, is_virtual in zip(stack, virtual) if not is_virtual], cells)
    if tx.kw_names and eager_rest is None:
        cg.append(Instr("KW_NAMES", tuple(tx.kw_names)))
    graph_call = emit_graph_call(tx, outputs)
    if eager_rest is not None:
        resume_offset, reason = eager_rest
        continue_at(tx, cg, resume_offset, virtual, live, run_eagerly=reason)
    else:
        emit_native_and_continue(tx, cg, inst, virtual, live, next_offset, comp, handed_on, stretch, unmade)
    return graph_call + cg.instructions


def leave_mask_unmade(tx, inst, stretch: NativeStretch, stack: list, live: list[str], local_vts: list,
                      cells: list) -> EqualityMaskVariable | None:
    """Where the breaking subscript's mask need not be made by the graph ([Note: masks the graph does not make] in
    native_stretch.py), put its recipe in its place in ``stack`` and ``local_vts`` and return it.  Checked here:
    nothing else the break hands on holds the mask (another stack slot, a container, a cell)."""
    if inst.opname != "BINARY_SUBSCR" or not stack or stack[-1] is not tx.stack[-1]:
        return None
    recipe = unmade_mask(tx, stretch, live)
    if recipe is None:
        return None
    mask = stack[-1]
    others = [v for v in stack[:-1] if not _is_null(v)] + [v for v in local_vts if v is not mask] + \
        tx.output.side_effects.values_to_reconstruct() + [v for _, v in cells]
    if any(v is mask for v in tensors_to_output(others)):
        return None
    stack[-1] = recipe
    local_vts[:] = [recipe if v is mask else v for v in local_vts]
    return recipe


def virtual_nulls(stack: list, callee: int | None) -> list[bool]:
    """Which stack slots are NULLs kept off the real stack.

    [Note: virtual NULLs] A NULL the native instruction does not consume is never pushed: it cannot be saved in a
    local.  The resume function's prologue pushes it back (PUSH_NULL) at the same stack position.  The one NULL a
    breaking call consumes sits just below its callee (slot ``callee``, None when the break runs no call).
    """
    consumed = callee - 1 if callee is not None and callee > 0 and _is_null(stack[callee - 1]) else None
    return [_is_null(v) and k != consumed for k, v in enumerate(stack)]


def eager_rest_of_frame(tx, inst) -> tuple[int, Unsupported] | None:
    """Where the resume function starts, and why it is never translated, when a break may run nothing natively.

    That is when ``inst`` starts a try statement ([Note: a break inside a try block]; the break moved there) or lies
    inside the ``with`` block of a user context manager ([Note: a break inside a user with block]).  The resume
    function then starts at ``inst`` itself (at a call's ``KW_NAMES``/``PRECALL``) and runs eagerly.  None for an
    ordinary break.
    """
    if try_statement_start(tx.output.f_code, inst.offset) == inst.offset:
        return inst.offset, Unsupported("the rest of a frame from a try block with a graph break inside it",
                                        "it runs eagerly: move the code that breaks out of the try block")
    if inside_user_with_block(tx, inst):
        return call_start(tx, inst), Unsupported(
            "the rest of a frame from a graph break inside the `with` block of a user context manager",
            "it runs eagerly: move the code that breaks out of the with block")
    return None


def emit_saved_state(cg: PyCodegen, live: list[str], local_vts: list[VariableTracker], pushed: list,
                     cells: list[tuple[str, VariableTracker]]) -> None:
    """Store the live locals (``___live_<name>``), push the real stack (``pushed``), and apply the side effects.

    Every value is read before any mutation is applied (a value reloaded from its source must be read before the
    mutation changes it), except one that reaches an iterator over an input dict, built after them ([Note: dict
    iterators see the mutated dict]).  The native instruction and the resume function then see every write.
    """
    late_locals = [built_after_side_effects(v) for v in local_vts]
    late_stack = [not _is_null(v) and built_after_side_effects(v) for v in pushed]
    for name, v, late in zip(live, local_vts, late_locals):
        if not late:
            cg(v)
            cg.store_local(f"___live_{name}")
    for v, late in zip(pushed, late_stack):
        if late:
            cg.load_const(None)  # a placeholder, swapped for the value once the side effects are applied
        else:
            cg(v)
    cg.tx.output.side_effects.codegen(cg, cells)
    for name, v, late in zip(live, local_vts, late_locals):
        if late:
            cg(v)
            cg.store_local(f"___live_{name}")
    for k, (v, late) in enumerate(zip(pushed, late_stack)):
        if late:  # the stack may hold a NULL: the value goes into its slot with SWAP, never through a local
            cg(v)
            cg.append(Instr("SWAP", len(pushed) - k + 1), Instr("POP_TOP"))


def emit_graph_call(tx, outputs: list[VariableTracker]) -> list:
    """Compile the graph captured so far, whose outputs are ``outputs``; the code that calls it and stores the
    result in ``___graph_out`` (none when the graph is empty)."""
    output = tx.output
    name, sources = output.compile_subgraph(outputs)
    output.compiled_name = name
    call = PyCodegen(tx, output.f_code, output.f_globals)
    if name is not None:
        call.load_global(name, push_null=True)
        call.load_graph_inputs(sources)
        call.call(len(sources))
        call.append(Instr("STORE_FAST", GRAPH_OUT))
    return call.instructions


def emit_native_and_continue(tx, cg: PyCodegen, inst, virtual: list[bool], live: list[str], next_offset: int | None,
                             comp, handed_on: set[str], stretch: NativeStretch | None,
                             unmade: EqualityMaskVariable | None) -> None:
    """Run the breaking instruction natively, then return the ``Continuation`` of each place it may go on."""
    if inst.opname in JUMPS:
        break_at_jump(tx, cg, inst, virtual, live, next_offset)
    elif inst.opname == "FOR_ITER":
        break_at_for_iter(tx, cg, inst, virtual, live, next_offset)
    elif pushes_null(inst):
        break_at_null_pushing_load(tx, cg, inst, virtual, live, next_offset)
    elif comp is not None:  # the whole comprehension runs natively: [Note: a break inside an inlined comprehension]
        run_native = functools.partial(emit_comprehension, tx, cg, comp, live, handed_on)
        after = virtual[:-1] + [False] * comp.result_on_stack
        emit_under_exit_guard(tx, cg, virtual, run_native, functools.partial(
            continue_at, tx, cg, comp.end, after, sorted(set(live) | handed_on)))
    else:
        break_at_instruction(tx, cg, inst, virtual, live, next_offset, stretch, unmade)


def break_at_jump(tx, cg: PyCodegen, inst, virtual: list[bool], live: list[str], next_offset: int | None) -> None:
    """A data-dependent jump takes both branches: ``bool()`` of the condition runs natively (and may raise)."""
    taken = Label()

    def continuations():
        continue_at(tx, cg, next_offset, virtual[:-1], live)
        cg.append(taken)
        continue_at(tx, cg, inst.argval, virtual[:-1], live)

    run_native = functools.partial(cg.append, Instr(forward_jump_name(inst.opname), taken))
    emit_under_exit_guard(tx, cg, virtual, run_native, continuations)


def break_at_for_iter(tx, cg: PyCodegen, inst, virtual: list[bool], live: list[str], next_offset: int | None) -> None:
    """A ``FOR_ITER`` runs natively (the iterator's ``__next__`` may raise): on in the body, or after the loop."""
    done = Label()

    def continuations():
        continue_at(tx, cg, next_offset, virtual + [False], live)
        cg.append(done)
        if bt.PY312:
            cg.append(Instr("END_FOR"))
        continue_at(tx, cg, for_iter_exit(tx, inst), virtual[:-1], live)

    emit_under_exit_guard(tx, cg, virtual, functools.partial(cg.append, Instr("FOR_ITER", done)), continuations)


def break_at_null_pushing_load(tx, cg: PyCodegen, inst, virtual: list[bool], live: list[str],
                               next_offset: int | None) -> None:
    """A load that pushes a NULL (``LOAD_GLOBAL``, ``LOAD_ATTR``/``LOAD_METHOD`` of a method) runs in its no-NULL form;
    the NULL below the result becomes virtual.  The attribute may be missing (fuzz round 12: grad mode stayed off)."""
    if inst.opname == "LOAD_GLOBAL":
        run_native = functools.partial(cg.load_global, inst.argval, push_null=False)
        after = virtual + [True, False]
    else:
        run_native = functools.partial(cg.load_attr, inst.argval)
        after = virtual[:-1] + [True, False]
    emit_under_exit_guard(tx, cg, virtual, run_native, functools.partial(continue_at, tx, cg, next_offset, after, live))


def break_at_instruction(tx, cg: PyCodegen, inst, virtual: list[bool], live: list[str], next_offset: int | None,
                         stretch: NativeStretch | None, unmade: EqualityMaskVariable | None) -> None:
    """Any other instruction (a call, a subscript...) runs natively; the resume function starts after it, or after
    the ``stretch`` that follows it ([Note: native stretch]), whose mask may be ``unmade``.  The stretch is native
    code too: when ``with`` exits are handed on, it runs inside the exit guard's try block, so an exception in it
    runs them."""
    at_subscript = stretch is not None and inst.opname == "BINARY_SUBSCR"  # the break is a mask subscript too
    paired = paired_subscript(tx, stretch) if at_subscript else None
    # (an unmade mask carries its t and k; its graph no longer has the comparison)
    equality = equality_mask(tx, tx.stack[-1], live) if at_subscript and unmade is None else None
    if stretch is not None:  # both subscripts' kernels start compiling now: [Note: prefetched mask kernels]
        prefetch_mask_kernels(tx, stretch, at_subscript, paired, unmade)
    after = virtual_after(inst, virtual)
    pushed = 0

    def run_native():
        nonlocal pushed
        if bt.PY311 and inst.opname == "CALL":
            cg.append(Instr("PRECALL", inst.arg))
        if at_subscript:  # [Note: shared nonzero] and the Notes after it in native_stretch.py
            emit_mask_subscript(cg, equality, paired)
        else:
            cg.append(copy_instruction(tx.output.f_code, inst.offset))
        if stretch is not None:
            pushed = emit_native_stretch(tx, cg, stretch)

    def continuations():
        if stretch is None:
            continue_at(tx, cg, next_offset, after, live)
        else:
            continue_at(tx, cg, stretch.resume_offset, after + [False] * pushed, sorted(set(live) | stretch.stored))

    emit_under_exit_guard(tx, cg, virtual, run_native, continuations)


def virtual_after(inst, virtual: list[bool]) -> list[bool]:
    """The virtual-NULL marks of the stack after ``inst`` ran natively: the slots below those it popped keep theirs,
    what it pushed is real.  (On 3.11 ``stack_effect`` of ``CALL`` leaves out its arguments: ``PRECALL`` pops them.)"""
    effect = stack_effect(inst)
    if bt.PY311 and inst.opname == "CALL":
        effect -= inst.arg
    return [k < len(virtual) and virtual[k] for k in range(len(virtual) + effect)]


def call_start(tx, inst) -> int:
    """Where a resume function that runs ``inst`` itself starts: a ``CALL`` at its ``KW_NAMES`` (which sets the
    call's keyword names) and, on 3.11, its ``PRECALL``."""
    k = tx.index_of[inst.offset]
    while inst.opname == "CALL" and k > 0 and tx.instructions[k - 1].opname in ("PRECALL", "KW_NAMES"):
        k -= 1
    return tx.instructions[k].offset


def cell_stores(tx) -> list[tuple[str, VariableTracker]]:
    """(name, value) of the frame's cells the traced code assigned, here or in an inlined closure.

    While tracing, a cell lives in its ``CellVariable``; the transformed code's real cells (made by its
    ``MAKE_CELL``, or the function's ``__closure__``) are only written here, at a graph break or the return, so a
    closure or resume function that runs afterwards reads the value.  Cells only read need nothing.
    """
    out = []
    for name, cell in tx.cells.items():
        if not cell.mutated:
            continue
        if cell.value is None:
            unimplemented(f"cell variable {name!r} deleted (del) before a graph break or return",
                          "avoid `del` of a variable a closure captures")
        out.append((name, cell.value))
    return out


def for_iter_exit(tx, inst) -> int:
    """Where an exhausted FOR_ITER continues (3.12 skips the END_FOR its argument names)."""
    if bt.PY312:
        return tx.instructions[tx.index_of[inst.argval] + 1].offset
    return inst.argval


def continuation_offsets(tx, inst, next_offset: int | None) -> list[int]:
    """The offsets a break at ``inst`` may continue at (two for a data-dependent jump or a FOR_ITER)."""
    if inst.opname in JUMPS:
        return [next_offset, inst.argval]
    if inst.opname == "FOR_ITER":
        return [next_offset, for_iter_exit(tx, inst)]
    return [next_offset] if next_offset is not None else []


def live_at(code: types.CodeType, offsets: list[int | None]) -> set[str]:
    out: set[str] = set()
    for offset in offsets:
        if offset is not None:
            out |= livevars_analysis(code, offset)
    return out


def pushes_null(inst) -> bool:
    if inst.opname == "LOAD_METHOD":
        return True
    return inst.opname in ("LOAD_GLOBAL", "LOAD_ATTR") and bool(inst.arg & 1) and \
        (inst.opname == "LOAD_GLOBAL" or bt.PY312)


def continue_at(tx, cg: PyCodegen, offset: int | None, virtual: list[bool], live: list[str],
                run_eagerly: Unsupported | None = None) -> None:
    """Save the stack and return ``Continuation(resume_fn, *stack, *live locals)``.

    ``virtual[k]`` marks stack slot ``k`` as a NULL that is not on the real stack (see [Note: virtual NULLs]).
    ``run_eagerly``: the resume function is never translated, for that reason ([Note: a break inside a try block]).
    """
    output = tx.output
    if offset is None:
        unimplemented("graph break at the last instruction")
    live = sorted(set(live) & livevars_analysis(output.f_code, offset))
    slots = [None if v else f"___stack_{k}" for k, v in enumerate(virtual)]
    stack_names = [n for n in slots if n is not None]
    for n in reversed(stack_names):
        cg.store_local(n)
    resume_name, resume_fn = output.ctx.resume_function(output.f_code, offset, slots, live,
                                                        output.f_globals, output.closure, run_eagerly)
    cg.load_const_object(Continuation, push_null=True)
    cg.load_const_object(output.ctx)
    freevars = resume_fn.__code__.co_freevars
    if freevars:  # bind this frame's cells: see [Note: cells of resume functions]
        cg.load_const_object(bind_closure, push_null=True)
        cg.load_global(resume_name)
        for n in freevars:
            cg.load_closure(n)
        cg.build(tuple, len(freevars))
        cg.call(2)
    else:
        cg.load_global(resume_name)
    params = resume_fn.__code__.co_varnames[:resume_fn.__code__.co_argcount]  # resume_execution.resume_argnames
    for n in params:
        cg.load_local(n if n in stack_names else f"___live_{n}")
    cg.call(2 + len(params))
    cg.append(Instr("RETURN_VALUE"))
