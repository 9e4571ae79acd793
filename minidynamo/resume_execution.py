"""Graph breaks: resume functions, continuations, and the helpers the transformed code calls at a break.

When the translator cannot trace instruction ``I``, the transformed code (1) runs the graph captured so far,
(2) rebuilds the stack and runs ``I`` *natively*, then (3) hands the stack and the live locals to a **resume
function**, ``__resume_at_<offset>_<n>``: a copy of the original code whose prologue pushes the saved stack and jumps
to the instruction after ``I``.  The resume function is wrapped by the same compile context, so it is itself
translated, guarded and cached the first time it is called -- as PEP 523 would do for a new frame.

    def toy(x):                          transformed toy:
        a = torch.sin(x)                     ___graph_out = __compiled_fn_0(x)        # graph: a = sin(x), s = a.sum()
        if a.sum() > 0:   # break            if ___graph_out[1] > 0: return Continuation(__resume_at_30_1, a)
            return a * 2                     else:                  return Continuation(__resume_at_38_2, a)
        return a - 1

[Note: trampoline]  Transformed code does not *call* the resume function: it returns a ``Continuation`` and the
wrapper in ``eval_frame`` calls it in a loop.  A graph break inside a loop therefore costs no Python stack depth per
iteration (real Dynamo gives up on such frames; we keep compiling the loop body, see DESIGN.md).
Mirrors ``torch/_dynamo/resume_execution.py``.
"""
from __future__ import annotations

import dis
import functools
import itertools
import types

import torch
from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from . import bytecode_transformation as bt
from .bytecode_analysis import cell_reads_maybe_unbound, real_instructions, uses_zero_arg_super


class Continuation:
    """What transformed code returns at a graph break: call ``fn(*args)`` next (see [Note: trampoline])."""

    __slots__ = ("args", "ctx", "fn")

    def __init__(self, ctx, fn, *args):
        self.ctx = ctx
        self.fn = fn
        self.args = args

    def __repr__(self) -> str:
        return f"Continuation({self.fn.__name__}, {len(self.args)} args)"


class GradModeExit:
    """The ``__exit__`` of a ``torch.no_grad()``/``enable_grad()`` block entered inside a graph: restores ``prev``."""

    def __init__(self, prev: bool):
        self.prev = prev

    def __call__(self, *exc_info) -> bool:
        torch._C._set_grad_enabled(self.prev)
        return False


def enter_record_function(name: str) -> RecordFunctionExit:
    """Re-enter a ``record_function`` region natively after a break; returns its ``__exit__``."""
    rf = torch.autograd.profiler.record_function(name)
    rf.__enter__()
    return RecordFunctionExit(rf)


def enter_autocast(device: str, dtype, enabled: bool, cache_enabled: bool) -> AutocastExit:
    """Re-enter a ``torch.autocast`` block natively after a break (the graph before the break exited it)."""
    mode = torch.amp._enter_autocast(device, dtype, enabled, cache_enabled)
    return AutocastExit(mode)


class AutocastExit:
    """The ``__exit__`` of an autocast block re-entered natively after a graph break.

    Like ``RecordFunctionExit``: only type-guarded in the resume function, and calling it is a graph break, so the
    block is exited natively, by the same object that entered it (autocast keeps a nesting count and a cast cache).
    """

    __slots__ = ("mode",)

    def __init__(self, mode) -> None:
        self.mode = mode

    def __call__(self, *exc_info):
        torch.amp._exit_autocast(self.mode)
        return False

    __call__._minidynamo_disable = True


def run_exits(*exits) -> None:
    """Call ``with`` exits after a native instruction raised ([Note: exits when the native instruction raises])."""
    for exit_fn in exits:
        exit_fn(None, None, None)


class RecordFunctionExit:
    """The ``__exit__`` of a ``record_function`` region that was re-entered natively after a graph break.

    The resume function receives it on its stack.  A bound method ``rf.__exit__`` would be a new object on every
    call (an ``ID_MATCH`` guard that always fails: a recompile per call); this object is only type-guarded, and
    calling it is a graph break (``__call__`` is disabled), so the region closes natively, where it was opened.
    """

    __slots__ = ("rf",)

    def __init__(self, rf) -> None:
        self.rf = rf

    def __call__(self, *exc_info):
        return self.rf.__exit__(*exc_info)

    __call__._minidynamo_disable = True


UNBOUND_LOCAL = "cannot access local variable '{}' where it is not associated with a value"  # CPython's words


def check_cell_bound(cell: types.CellType, name: str) -> None:
    """Raise what CPython raises reading the empty cell variable ``name`` of the original frame
    ([Note: unbound cells in resume functions])."""
    try:
        cell.cell_contents  # noqa: B018 -- read for the ValueError an empty cell raises
    except ValueError:
        raise UnboundLocalError(UNBOUND_LOCAL.format(name)) from None


check_cell_bound._minidynamo_disable = True  # called natively (at a break) it runs as it is, not translated


def abstract_instructions(code: types.CodeType) -> tuple[Bytecode, dict[int, Instr]]:
    """The ``bytecode`` form of ``code`` and, for each ``dis`` offset, its instruction object."""
    bc = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    instrs = [i for i in bc if isinstance(i, Instr)]
    real, index = real_instructions(code)  # an EXTENDED_ARG's offset names the instruction it extends
    assert len(instrs) == len(real), "bytecode and dis disagree on this code object"
    return bc, {offset: instrs[k] for offset, k in index.items()}


def make_resume_code(code: types.CodeType, target_offset: int, stack_slots: list[str | None],
                     local_names: list[str], name: str) -> types.CodeType:
    """A copy of ``code`` that starts at ``target_offset`` with the given stack.

    Its parameters are the saved stack values (``stack_slots``; None is a NULL pushed by the prologue) and then the
    live locals (``local_names``).

    [Note: cells of resume functions]  The resume function must share the *cell objects* of the frame it
    continues: a closure made before the break and the code after it read and write the same variable.  So the
    original's cell variables become free variables (``resume_freevars``: its free variables, then its cells),
    ``MAKE_CELL`` is dropped, and ``COPY_FREE_VARS`` installs them all from the function's ``__closure__``, which
    the transformed code builds at each break from its live cells (``LOAD_CLOSURE``; see ``bind_closure``).
    Upstream's ``ContinueExecutionCache.generate`` turns cellvars into freevars the same way.

    [Note: unbound cells in resume functions]  A free variable read while empty raises ``NameError`` ("cannot
    access free variable"), a cell variable ``UnboundLocalError`` -- CPython tells them apart by the slot's kind,
    so an ``except UnboundLocalError:`` in the original would miss the resume function's error.  So each read
    (``LOAD_DEREF``, ``DELETE_DEREF``) of one of the original's cells that may find it empty
    (``cell_reads_maybe_unbound``) is preceded by ``check_cell_bound(cell, name)``, which raises CPython's
    error.  The translator evaluates the check while tracing (``InstructionTranslatorBase.check_cell_bound``):
    a bound cell costs nothing in the graph.  Upstream raises ``NameError`` here.
    """
    stack_names = [s for s in stack_slots if s is not None]
    bc, by_offset = abstract_instructions(code)
    target = by_offset[target_offset]
    checked = {id(by_offset[o]) for o in cell_reads_maybe_unbound(code, target_offset)}
    label = Label()
    body = []
    active, split = None, {}  # the try block open at each point; a TryBegin split in two: its second half
    for ins in bc:
        if ins is target:
            # [Note: resuming at the first instruction of a try block]  The jump lands before the TryBegin that
            # opens the target's block, not after it: the same instruction, but ``bytecode``'s stack-depth walk
            # only enters a try block through its TryBegin (entered past it, a ``with`` block whose ``try`` always
            # raises got "negative stack size").  A target in the middle of a try block (a break inside a
            # ``with`` block that may raise, fuzz round 12) splits the block there: the first half ends, the
            # jump lands on a copy of its TryBegin -- the same handler and depth, so the same exception table.
            k = len(body)
            while k > 0 and isinstance(body[k - 1], TryBegin):
                k -= 1
            if k == len(body) and active is not None:
                split[active] = TryBegin(active.target, active.push_lasti, active.stack_depth)
                body += [TryEnd(active), label, split[active]]
                active = split[active]
            else:
                body.insert(k, label)
        if isinstance(ins, TryBegin):
            active = ins
        elif isinstance(ins, TryEnd):
            ins.entry = split.get(ins.entry, ins.entry)
            active = None
        if isinstance(ins, Instr) and ins.name == "MAKE_CELL":
            ins = Instr("NOP", location=ins.location)  # only in the (dead) prologue: see break_points.can_break_at
        elif isinstance(ins, Instr) and isinstance(ins.arg, CellVar):
            if id(ins) in checked:
                body += _check_cell_bound_instrs(ins.arg.name, ins.location)
            ins = Instr(ins.name, FreeVar(ins.arg.name), location=ins.location)
        body.append(ins)
    freevars = resume_freevars(code)
    prologue = [Instr("COPY_FREE_VARS", len(freevars))] if freevars else []
    prologue += [Instr("RESUME", 0), *[Instr("PUSH_NULL") if s is None else Instr("LOAD_FAST", s)
                                       for s in stack_slots], Instr("JUMP_FORWARD", label)]
    new = Bytecode(prologue + nop_dead_code(body, prologue))
    new.argnames = resume_argnames(code, stack_names, local_names)
    new.argcount = len(new.argnames)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.freevars = freevars
    new.cellvars = []
    new.filename = code.co_filename
    new.first_lineno = code.co_firstlineno
    new.flags = code.co_flags & ~(0x04 | 0x08)  # no *args / **kwargs
    new.name = name
    new.qualname = name
    return new.to_code(compute_exception_stack_depths=False)


def _check_cell_bound_instrs(name: str, location) -> list[Instr]:
    """``check_cell_bound(<the cell of name>, name)``, its result dropped."""
    call = [Instr("PUSH_NULL"), Instr("LOAD_CONST", check_cell_bound), Instr("LOAD_CLOSURE", FreeVar(name)),
            Instr("LOAD_CONST", name), *bt.create_call(2), Instr("POP_TOP")]
    for ins in call:
        ins.location = location
    return call


def resume_argnames(code: types.CodeType, stack_names: list[str], local_names: list[str]) -> list[str]:
    """The parameters of a resume function of ``code``: the saved stack, then the live locals -- except that a
    method calling ``super()`` keeps its first argument first ([Note: zero-argument super in resume functions])."""
    names = list(stack_names) + list(local_names)
    first = code.co_varnames[0] if code.co_argcount else None
    if uses_zero_arg_super(code) and first in local_names:
        names.remove(first)
        names.insert(0, first)
    return names


def resume_freevars(code: types.CodeType) -> list[str]:
    """The free variables of a resume function of ``code``: all of its cells (see [Note: cells of resume functions])."""
    return list(code.co_freevars) + [n for n in code.co_cellvars if n not in code.co_freevars]


def bind_closure(template: types.FunctionType, cells: tuple) -> types.FunctionType:
    """The resume function ``template`` bound to the live cells of the frame that breaks (a cheap constructor call).

    Every such function object has the same code object, so they share one compile cache and its guards."""
    return types.FunctionType(template.__code__, template.__globals__, template.__name__, None, cells)


def make_function(code: types.CodeType, f_globals: dict, defaults, kwdefaults, cells: tuple) -> types.FunctionType:
    """A function the traced code created (``def``/``lambda``/3.11 comprehension), made real at a graph break or a
    return: its closure is the frame's real cells, so it keeps sharing them with the code that follows."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults, cells or None)
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    return fn


def compiled_callee(ctx, fn: types.FunctionType):
    """The callee of a breaking CALL, compiled by ``ctx`` when it runs: wrapped at run time (not cached by function
    object) because a closure is a new object, with new cells, on every call of the frame that makes it."""
    return ctx.wrap(fn)


def compiled_module_call(ctx, module):
    """The callee of a breaking CALL of a module: ``type(module).forward`` compiled by ``ctx`` and bound to it, read
    when it runs, so a forward replaced on the class since is the one compiled -- or the module itself, called as
    it is, where ``nn.Module.__call__`` would run something else (a forward set on the instance, hooks)."""
    from .variables.nn_module import plain_forward
    forward = plain_forward(module)
    return module if forward is None else types.MethodType(ctx.wrapped(forward), module)


def original_offsets(orig: types.CodeType, resume: types.CodeType) -> dict[int, int]:
    """Map each offset of a resume function's body to the offset of the same instruction in ``orig``.

    The body is a one-for-one copy of ``orig`` (dead instructions became NOPs) after a prologue of
    ``COPY_FREE_VARS``?, ``RESUME``, the stack pushes and a jump; only the offsets differ -- and the cell checks
    inserted before some reads ([Note: unbound cells in resume functions]): the first instruction of a check,
    where a jump or the instruction before it continues, maps to the read it guards, and the others to nothing
    (no break is taken inside a check: ``cell_check_offsets``).  The offset of an ``EXTENDED_ARG`` prefix maps
    too ([Note: offsets of EXTENDED_ARG]): a jump in the copy may need a prefix that the original did not, and a
    break before that jump continues at the prefix.
    """
    old, _ = real_instructions(orig)
    new, new_index = real_instructions(resume)
    checks = cell_check_offsets(resume)
    copied = [k for k, inst in enumerate(new) if inst.offset not in checks]
    skip = len(copied) - len(old)
    position = {k: n for n, k in enumerate(copied)}  # index in ``new`` -> index among the copied instructions
    for k in range(len(new) - 1, -1, -1):  # a check's first instruction: where a jump or a resume lands before
        if new[k].offset in checks and (k == 0 or new[k - 1].offset not in checks):  # the read it guards
            position[k] = position[next(j for j in range(k, len(new)) if new[j].offset not in checks)]
    return {offset: old[position[k] - skip].offset for offset, k in new_index.items()
            if k in position and position[k] >= skip}


@functools.lru_cache(maxsize=1024)
def cell_check_offsets(code: types.CodeType) -> frozenset[int]:
    """The offsets of the instructions of ``code``'s cell checks (``check_cell_bound(cell, name)`` and its
    ``POP_TOP``); none in code that is not a resume function."""
    instrs, _ = real_instructions(code)
    found: set[int] = set()
    for k, inst in enumerate(instrs):
        if inst.opname == "LOAD_CONST" and inst.argval is check_cell_bound and k > 0:
            end = next(j for j in range(k, len(instrs)) if instrs[j].opname == "POP_TOP")
            found.update(i.offset for i in instrs[k - 1:end + 1])
    return frozenset(found)


def enclosing_loop_variables(code: types.CodeType, offset: int) -> frozenset[str]:
    """The variables of the ``for`` loops of ``code`` whose body holds ``offset``: the local each one's ``FOR_ITER``
    stores its item into (``for expert_idx in range(n):``).  A loop that unpacks its item has none."""
    insts = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    names = set()
    for inst, nxt in itertools.pairwise(insts):
        if inst.opname == "FOR_ITER" and inst.offset < offset < inst.argval and nxt.opname in ("STORE_FAST",
                                                                                               "STORE_DEREF"):
            names.add(nxt.argval)
    return frozenset(names)


UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_ABSOLUTE"}
TERMINAL = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}


def nop_dead_code(body: list, prologue: list) -> list:
    """Replace instructions unreachable from the new entry by NOPs.

    The copied original code before the resume point is dead; left as is, its stack effects would be counted from
    an empty stack (the ``bytecode`` package then fails to compute the stack size).  Labels and try blocks stay.
    """
    items = prologue + body
    where = {id(x): k for k, x in enumerate(items) if isinstance(x, Label)}
    handler_of, current = {}, None
    for k, x in enumerate(items):  # the try block (if any) around each position
        if isinstance(x, TryBegin):
            current = x
        elif isinstance(x, TryEnd):
            current = None
        handler_of[k] = current
    live, work = set(), [0]
    while work:
        k = work.pop()
        if k >= len(items) or k in live:
            continue
        live.add(k)
        x = items[k]
        if handler_of.get(k) is not None and isinstance(x, Instr):
            work.append(where[id(handler_of[k].target)])
        if not isinstance(x, Instr):
            work.append(k + 1)
            continue
        if isinstance(x.arg, Label):
            work.append(where[id(x.arg)])
        if x.name not in UNCONDITIONAL and x.name not in TERMINAL:
            work.append(k + 1)
    out = []
    for k, x in enumerate(items[len(prologue):], start=len(prologue)):
        out.append(x if k in live or not isinstance(x, Instr) else Instr("NOP", location=x.location))
    return out


def copy_instruction(code: types.CodeType, offset: int) -> Instr:
    """The instruction at ``offset`` of ``code``, to be run natively in generated code (a new object each time)."""
    name, arg = _instruction_args(code, code.co_filename)[offset]
    return Instr(name, arg) if name not in ("RETURN_VALUE",) else Instr(name)


@functools.lru_cache(maxsize=1024)
def _instruction_args(code: types.CodeType, _filename: str) -> dict[int, tuple[str, object]]:
    """(name, arg) of each instruction of ``code`` in ``bytecode`` form, by ``dis`` offset, once per code object:
    ``Bytecode.from_code`` is slow and a loop body's breaks copy instructions again on every recompile.  (Equal code
    objects from two files compare equal: the file name is part of the key, as in ``bt._prologue_and_signature``.)"""
    _, by_offset = abstract_instructions(code)
    return {offset: (ins.name, ins.arg) for offset, ins in by_offset.items()}


def forward_jump_name(opname: str) -> str:
    """3.11 has direction-specific conditional jumps; generated code only jumps forward."""
    return opname.replace("BACKWARD", "FORWARD") if bt.PY311 else opname
