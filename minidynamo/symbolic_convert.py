"""Symbolic execution of bytecode: one handler per opcode, over a stack of VariableTrackers.

In:  a code object, its globals, and trackers for its arguments.  Out: an FX graph (in ``OutputGraph``) and, for the
root frame, the instructions of the transformed code.  The translator is a small interpreter: ``step`` fetches the
next instruction and calls the method named exactly like the opcode (``LOAD_FAST``, ``BINARY_OP``, ``CALL``...).  Where
CPython would compute a value, the handler asks the trackers what the value *would be*; tensor operations become FX
nodes.  Calls to user functions are inlined by a nested ``InliningInstructionTranslator`` (``inlining.py``); the
exception table, ``raise`` and ``with`` blocks are handled by ``ExceptionHandlingMixin`` (``exception_handling.py``),
building and unpacking containers by ``ContainerBuildingMixin`` (``container_building.py``), ``match`` statements by
``PatternMatchingMixin`` (``pattern_matching.py``), globals, imports and attributes by
``GlobalsAndAttributesMixin`` (``globals_and_attributes.py``); at a graph break the root translator hands over to
``graph_break.compile_and_break``.

    def f(x):               LOAD_FAST x        -> stack [TensorVariable(x)]
        return x.sin() + 1  LOAD_ATTR sin      -> stack [NULL, BoundMethod(x.sin)]
                            CALL 0             -> graph: sin = x.sin()
                            LOAD_CONST 1; BINARY_OP + -> graph: add = sin + 1
                            RETURN_VALUE       -> compile the graph, emit the transformed code

Each handler's opcode is documented at https://docs.python.org/3/library/dis.html (3.11 and 3.12 differ: PRECALL,
LOAD_METHOD and KW_NAMES vs. the method bit of LOAD_ATTR, RETURN_CONST, BINARY_SLICE, END_FOR ...; ``dis``
normalises jump targets and names so most handlers are shared).  Mirrors ``torch/_dynamo/symbolic_convert.py``.
"""
from __future__ import annotations

import dis
import inspect
import linecache
import operator
import traceback
import types
from typing import Any

import torch

from . import config
from .bytecode_transformation import PY312, Instruction, decode, offset_index
from .container_building import ContainerBuildingMixin
from .exc import ObservedException, Unsupported, refuse_frame, unimplemented
from .exception_handling import ExceptionHandlingMixin
from .globals_and_attributes import GlobalsAndAttributesMixin
from .pattern_matching import PatternMatchingMixin
from .resume_execution import UNBOUND_LOCAL, check_cell_bound
from .source import LocalSource
from .variables import (
    BuiltinVariable,
    CellVariable,
    ConstantVariable,
    DictVariable,
    ListIteratorVariable,
    NestedUserFunctionVariable,
    NullVariable,
    SliceVariable,
    TupleVariable,
    VariableTracker,
    wrap_constant_result,
)
from .variables.base import NotConstant
from .variables.builder import LazyVariableTracker
from .variables.builtin import get_iterator
from .variables.constant import BINARY_OPS, COMPARE_OPS
from .variables.misc import ExceptionVariable
from .variables.operators import binary_op, compare_op, is_op, unary_op
from .variables.tensor import TensorVariable
from .variables.user_defined import SuperVariable

GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | \
    inspect.CO_ITERABLE_COROUTINE
_AUTOGRAD_FUNCTION_APPLY = torch.autograd.Function.apply.__func__  # the classmethod's function
# [Note: torch._disable_dynamo]  ``Optimizer.zero_grad``/``step``/``add_param_group``, ``nn.Module.register_*``...
# are wrapped by ``torch._disable_dynamo``: its ``inner`` caches ``torch._dynamo.disable(fn)`` on ``fn`` at the
# first call (``fn.__dynamo_disable = ...``) and calls it.  Inlined, that wrapper is traced as if it were the
# function; the wrapped function is meant to run eagerly, so calling it is a graph break, whether or not eager
# already called it once, and its frame is never translated (eval_frame runs it as it is).
DISABLE_DYNAMO_CODE = torch._disable_dynamo(lambda: None).__code__


# Instructions that move stack values without looking at them (see [Note: lazy values on the stack]).
STACK_MOVES = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST", "POP_TOP", "COPY", "SWAP", "NOP", "RESUME",
                         "PUSH_NULL", "LOAD_CONST", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                         "CACHE", "EXTENDED_ARG", "COPY_FREE_VARS"})

# Set by ``minidynamo.step_through`` while it records a translation: called as ``step_observer(tx)`` in place of
# ``tx.step()``, so it can snapshot the translator before and after each instruction and see a break as it happens.
step_observer = None


def run_handler(handler, inst) -> None:
    """Run one opcode handler; a value it could take only as a Python constant makes a graph break there.

    [Note: a value that must be a constant]  Many handlers fold Python operations over constants (a set's
    ``add``, ``range(...)``, a builtin's arguments) and call ``as_python_constant()`` on what they are given;
    a tensor or another traced value there raises ``NotConstant``.  Uncaught, that was an internal error and the
    whole frame ran eagerly (``{t % 3 for t in xs}`` with a tensor among ``xs``).  Refused here instead, like any
    other instruction the translator cannot follow: the restart stops before the instruction, which runs
    natively at the break, so no half-done change of the first attempt survives.
    """
    try:
        handler(inst)
    except NotConstant as e:
        unimplemented(f"{inst.opname} needs a Python constant, got {e}",
                      "the instruction runs in Python at a graph break; keep tensors out of it to stay in one graph")


class InstructionTranslatorBase(ExceptionHandlingMixin, ContainerBuildingMixin, PatternMatchingMixin,
                                GlobalsAndAttributesMixin):
    def __init__(self, f_code: types.CodeType, f_globals: dict, symbolic_locals: dict, cells: dict, output,
                 parent: InstructionTranslatorBase | None = None):
        self.f_code = f_code
        self.f_globals = f_globals
        self.symbolic_locals: dict[str, Any] = symbolic_locals
        self.cells: dict[str, CellVariable] = cells
        self.output = output
        self.parent = parent
        self.instructions: list[Instruction] = decode(f_code)
        self.index_of = offset_index(self.instructions)
        self.stack: list[VariableTracker] = []
        self.ip = 0
        self.lineno = f_code.co_firstlineno
        self.kw_names: tuple = ()
        self.done = False
        self.current_instruction: Instruction | None = None

    # --- where we are -------------------------------------------------------------------------------------
    def frame_summary(self) -> traceback.FrameSummary:
        line = linecache.getline(self.f_code.co_filename, self.lineno).strip()
        return traceback.FrameSummary(self.f_code.co_filename, self.lineno, self.f_code.co_name, line=line,
                                      lookup_line=False)

    def user_stack(self) -> list[traceback.FrameSummary]:
        frames, tx = [], self
        while tx is not None:
            frames.append(tx.frame_summary())
            tx = tx.parent
        return list(reversed(frames))

    def eval_source(self, source) -> Any:
        return source.get_value(self.output.f_locals, self.output.f_globals)

    # --- the loop -----------------------------------------------------------------------------------------
    def run(self) -> None:
        while not self.done:
            try:
                if step_observer is None:
                    self.step()
                else:
                    step_observer(self)  # it calls self.step() itself, looking before and after (step_through)
            except ObservedException as e:
                try:
                    handled = self.handle_observed_exception(e)
                except Unsupported as refusal:  # a user __exit__ that may suppress it: say where, as step() does
                    if not refusal.user_stack:
                        refusal.user_stack = self.user_stack()
                    raise
                if not handled:
                    raise  # to the caller's frame (its CALL may sit in a try block), else a refusal

    def step(self) -> None:
        inst = self.instructions[self.ip]
        self.current_instruction = inst
        self.ip += 1
        if inst.lineno is not None:
            self.lineno = inst.lineno
        self.output.current_tx = self
        if config.debug >= 4:
            print(f"[minidynamo] {'  ' * self.depth()}{inst!r:<50} stack={self.stack}")
        handler = getattr(self, inst.opname, None)
        if inst.opname not in STACK_MOVES:
            self.realize_stack()
        try:
            if handler is None:
                unimplemented(f"opcode {inst.opname} is not supported", "rewrite this line with simpler Python")
            run_handler(handler, inst)
            self.output.stamp_shape_guards()  # guards on symbolic sizes remember this line
        except Unsupported as e:
            if not e.user_stack:
                e.user_stack = self.user_stack()
            if self.parent is None and getattr(e, "root_offset", None) is None:
                e.root_offset = inst.offset  # where the root frame would break (a CALL, for inlined callees)
            raise

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()

    # --- stack helpers --------------------------------------------------------------------------------------
    def realize_stack(self) -> None:
        """Wrap (and guard) the lazy inputs on the stack: the next instruction looks at them.

        [Note: lazy values on the stack]  ``LOAD_FAST`` of an input nobody has looked at pushes it unwrapped, and
        instructions that only move values (``STORE_FAST``, ``POP_TOP``, ``COPY``, ``SWAP``, jumps) keep it so.
        An input that is only moved around is never guarded: a resume function's prologue pushes the saved
        stack, and a loop item stored into a variable the body never reads must not specialise the code.
        """
        for k, v in enumerate(self.stack):
            if isinstance(v, LazyVariableTracker):
                self.stack[k] = v.realize(self)

    def push(self, v: VariableTracker) -> None:
        self.stack.append(v)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump(self, inst: Instruction) -> None:
        self.ip = self.index_of[inst.argval]

    # --- trivial opcodes ---------------------------------------------------------------------------------------
    def NOP(self, inst): pass
    RESUME = CACHE = PRECALL = EXTENDED_ARG = COPY_FREE_VARS = NOP

    def POP_TOP(self, inst):
        self.pop()

    def PUSH_NULL(self, inst):
        self.push(NullVariable())

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # --- locals and cells ---------------------------------------------------------------------------
    def LOAD_CONST(self, inst):
        value = inst.argval
        self.push(ConstantVariable(value) if isinstance(value, types.CodeType) else wrap_constant_result(value))

    def RETURN_CONST(self, inst):  # 3.12
        self.LOAD_CONST(inst)
        self.RETURN_VALUE(inst)

    def LOAD_FAST(self, inst):
        name = inst.argval
        if name not in self.symbolic_locals:
            unimplemented(f"local variable {name!r} referenced before assignment",
                          "the frame runs eagerly so Python raises UnboundLocalError")
        self.push(self.symbolic_locals[name])  # possibly lazy: see [Note: lazy values on the stack]

    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):  # 3.12 inlined comprehensions save the outer binding
        name = inst.argval
        if name in self.f_code.co_cellvars and name in self.cells:
            # [Note: a comprehension variable that is a cell]  When the outer variable is a cell, its slot holds
            # the cell object itself: this saves the cell and empties the slot, the comprehension makes its own
            # cell (MAKE_CELL) or uses the slot as a plain local, and STORE_FAST puts the outer cell back.  So
            # `[lambda: i for i in ...]` closes over a cell of its own, not the function's `i`.
            self.push(self.cells.pop(name))
            return
        value = self.symbolic_locals.pop(name, None)
        if isinstance(value, LazyVariableTracker):
            value = value.realize(self)
        self.push(value if value is not None else NullVariable())

    def STORE_FAST(self, inst):
        value = self.pop()
        if isinstance(value, CellVariable) and inst.argval in self.f_code.co_cellvars:
            self.cells[inst.argval] = value  # the cell LOAD_FAST_AND_CLEAR saved goes back into its slot
            self.symbolic_locals.pop(inst.argval, None)
            return
        if isinstance(value, NullVariable):
            self.symbolic_locals.pop(inst.argval, None)
        else:
            self.symbolic_locals[inst.argval] = value

    def DELETE_FAST(self, inst):
        self.symbolic_locals.pop(inst.argval, None)

    def MAKE_CELL(self, inst):
        name = inst.argval
        if name not in self.cells:
            self.cells[name] = CellVariable(self.symbolic_locals.pop(name, None))

    def LOAD_CLOSURE(self, inst):
        self.push(self.cells[inst.argval])

    def LOAD_DEREF(self, inst):
        cell = self.cells[inst.argval]
        if isinstance(cell.value, LazyVariableTracker):
            cell.value = cell.value.realize(self)
        self.push(cell.get())

    def STORE_DEREF(self, inst):
        cell = self.cells[inst.argval]
        if cell.source is not None and not self.is_root_cell(cell):
            unimplemented(f"assigning to the enclosing function's variable {inst.argval!r} (nonlocal)",
                          "return the new value instead of assigning a nonlocal")
        cell.set(self.pop())  # a cell of the compiled frame: written for real by graph_break.cell_stores
        if inst.argval in self.f_code.co_freevars:  # an enclosing function's variable (nonlocal)
            self.output.side_effects.writes += 1
        self.output.side_effects.cell_writes += 1

    def check_cell_bound(self, cell: VariableTracker, name: VariableTracker) -> VariableTracker:
        """A resume function's check before it reads one of the original frame's cells ([Note: unbound cells in
        resume functions]).  A cell holding a value passes (the ``LOAD_DEREF`` after the check reads it, and its
        guards fail on a call where the cell is empty; a ``DELETE_DEREF`` is refused at the break or return after
        it: ``graph_break.cell_stores``); an empty one raises ``UnboundLocalError`` in the traced code, guarded to
        be empty on entry when the trace did not empty it.  Unhandled there, the frame runs eagerly (a break
        inside the check could not resume at an instruction of the original)."""
        if not isinstance(cell, CellVariable):
            refuse_frame(f"a cell check on {cell.describe()}")
        if cell.value is not None:
            return ConstantVariable(None)
        if not cell.mutated and isinstance(cell.source, LocalSource):
            self.output.add_guard("CELL_EMPTY", cell.source)
        var = name.as_python_constant()
        exc = ExceptionVariable(UnboundLocalError, [ConstantVariable(UNBOUND_LOCAL.format(var))])
        e = ObservedException(f"local variable {var!r} read while unbound", exc,
                              "the frame runs eagerly so Python raises it")
        e.whole_frame = True
        raise e

    def DELETE_DEREF(self, inst):
        self.output.side_effects.cell_writes += 1
        cell = self.cells[inst.argval]
        cell.value = None
        cell.mutated = True

    def root_tx(self) -> InstructionTranslatorBase:
        tx = self
        while tx.parent is not None:
            tx = tx.parent
        return tx

    def is_root_cell(self, cell) -> bool:
        """Is ``cell`` one of the compiled frame's own cell or free variables (a write the frame can replay)?"""
        return any(c is cell for c in self.root_tx().cells.values())

    # --- operators ------------------------------------------------------------------------------------------
    def BINARY_OP(self, inst):
        b = self.pop()
        a = self.pop()
        self.push(binary_op(self, BINARY_OPS[inst.argrepr], a, b))

    def COMPARE_OP(self, inst):
        b = self.pop()
        a = self.pop()
        op = inst.argval if isinstance(inst.argval, str) else dis.cmp_op[inst.arg >> 4]
        self.push(compare_op(self, COMPARE_OPS[op.replace("bool(", "").rstrip(")")], a, b))

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        self.push(ConstantVariable(is_op(self, a, b) != bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container = self.pop()
        item = self.pop()
        result = container.call_method(self, "__contains__", [item], {})
        self.push(ConstantVariable(result.as_python_constant() != bool(inst.arg)))

    def UNARY_NEGATIVE(self, inst):
        self.push(unary_op(self, operator.neg, self.pop()))

    def UNARY_POSITIVE(self, inst):
        self.push(unary_op(self, operator.pos, self.pop()))

    def UNARY_INVERT(self, inst):
        self.push(unary_op(self, operator.invert, self.pop()))

    def UNARY_NOT(self, inst):
        v = self.pop()
        if isinstance(v, TensorVariable):
            v.truth(self)
        self.push(ConstantVariable(not v.truth(self)))

    def BINARY_SUBSCR(self, inst):
        index = self.pop()
        obj = self.pop()
        self.push(obj.call_method(self, "__getitem__", [index], {}))

    def STORE_SUBSCR(self, inst):
        index = self.pop()
        obj = self.pop()
        value = self.pop()
        obj.call_method(self, "__setitem__", [index, value], {})

    def DELETE_SUBSCR(self, inst):
        index = self.pop()
        obj = self.pop()
        obj.call_method(self, "__delitem__", [index], {})

    def BINARY_SLICE(self, inst):  # 3.12
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        self.push(obj.call_method(self, "__getitem__", [SliceVariable([start, end])], {}))

    def STORE_SLICE(self, inst):  # 3.12
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        value = self.pop()
        obj.call_method(self, "__setitem__", [SliceVariable([start, end]), value], {})

    def CALL_INTRINSIC_1(self, inst):  # 3.12
        if inst.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            self.push(TupleVariable(self.pop().unpack_var_sequence(self)))
        elif inst.argrepr == "INTRINSIC_UNARY_POSITIVE":
            self.UNARY_POSITIVE(inst)
        else:
            unimplemented(f"intrinsic {inst.argrepr}")

    # --- control flow --------------------------------------------------------------------------------------
    def JUMP_FORWARD(self, inst):
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_ABSOLUTE = JUMP = JUMP_FORWARD

    def _pop_jump(self, inst, jump_if: bool):
        cond = self.pop()
        if cond.truth(self) == jump_if:
            self.jump(inst)

    def POP_JUMP_IF_TRUE(self, inst):
        self._pop_jump(inst, True)

    def POP_JUMP_IF_FALSE(self, inst):
        self._pop_jump(inst, False)

    def _pop_jump_none(self, inst, jump_if_none: bool):
        v = self.pop()
        is_none = isinstance(v, ConstantVariable) and v.value is None
        if is_none == jump_if_none:
            self.jump(inst)

    def POP_JUMP_IF_NONE(self, inst):
        self._pop_jump_none(inst, True)

    def POP_JUMP_IF_NOT_NONE(self, inst):
        self._pop_jump_none(inst, False)

    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE  # 3.11
    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst):  # 3.11
        if self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):  # 3.11
        if not self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    def GET_ITER(self, inst):
        self.push(get_iterator(self, self.pop()))

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, ListIteratorVariable):
            unimplemented(f"iterating over {it.describe()}")
        item = it.next_variable(self)
        if item is not None:
            self.push(item)
            return
        self.pop()
        self.jump(inst)
        if PY312:  # CPython 3.12 jumps past the END_FOR that the target names
            self.ip += 1

    def END_FOR(self, inst):  # 3.12
        self.popn(2)

    # --- calls --------------------------------------------------------------------------------------------
    def KW_NAMES(self, inst):
        self.kw_names = self.f_code.co_consts[inst.arg]

    def CALL(self, inst):
        args = self.popn(inst.arg)
        second = self.pop()
        first = self.pop()
        fn, args = (second, args) if isinstance(first, NullVariable) else (first, [second, *args])
        kwargs = {}
        if self.kw_names:
            n = len(self.kw_names)
            kwargs = dict(zip(self.kw_names, args[len(args) - n:]))
            args = args[:len(args) - n]
            self.kw_names = ()
        self.push(self.call_function(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs_vt = self.pop() if inst.arg & 1 else DictVariable({})
        args_vt = self.pop()
        fn = self.pop()
        null = self.pop()
        if not isinstance(null, NullVariable):
            self.push(null)
        if not isinstance(kwargs_vt, DictVariable):
            unimplemented(f"**kwargs from {kwargs_vt.describe()}")
        self.push(self.call_function(fn, args_vt.unpack_var_sequence(self), dict(kwargs_vt.items)))

    def call_function(self, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
        if isinstance(fn, BuiltinVariable) and fn.fn is super and not args:
            return SuperVariable.from_call(self, args)
        return fn.call_function(self, args, kwargs)

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_python_constant()
        closure = self.pop() if inst.arg & 0x08 else None
        if inst.arg & 0x04:
            self.pop()  # annotations
        kwdefaults = self.pop() if inst.arg & 0x02 else None
        defaults = self.pop() if inst.arg & 0x01 else None
        self.push(NestedUserFunctionVariable(code, self.f_globals, defaults, kwdefaults, closure, code.co_qualname))

    def inline_user_function(self, fn_vt, args: list, kwargs: dict) -> VariableTracker:
        code = fn_vt.get_code()
        real = getattr(fn_vt, "fn", None)
        if getattr(real, "_minidynamo_graph_break", False):
            unimplemented("minidynamo.graph_break() was called", "remove the call to trace one graph")
        if real is check_cell_bound:
            return self.check_cell_bound(*args)
        if getattr(real, "_minidynamo_disable", False):
            unimplemented(f"{real.__qualname__} is marked minidynamo.disable", "it runs eagerly")
        if code is DISABLE_DYNAMO_CODE:
            unimplemented(f"`{code.co_qualname}` of a function wrapped by torch._disable_dynamo",
                          "it runs eagerly (see [Note: torch._disable_dynamo])")
        if real is _AUTOGRAD_FUNCTION_APPLY:
            # Inlined, apply reaches autograd's own machinery (``_is_setup_context_defined``, the C++
            # ``_FunctionBase.apply``), which is no graph material (an internal error, the frame ran eagerly);
            # and tracing the forward alone would lose the user's backward (upstream traces both as a
            # higher-order op).  Eager runs it, with its backward; the graphs around it are compiled.
            unimplemented("custom torch.autograd.Function.apply (its backward is user code)",
                          "the graph breaks around it; gradients flow through it as in eager")
        if code.co_flags & (GENERATOR_FLAGS & ~inspect.CO_GENERATOR):
            unimplemented(f"calling coroutine function {code.co_name}", "use a plain function")
        if self.depth() >= config.max_inline_depth:
            unimplemented(f"inlining deeper than {config.max_inline_depth} calls (recursion?)")
        bound, cells = fn_vt.bind(self, args, kwargs)
        from .inlining import InliningGeneratorTranslator, InliningInstructionTranslator
        cls = InliningGeneratorTranslator if code.co_flags & inspect.CO_GENERATOR else InliningInstructionTranslator
        tx = cls(code, fn_vt.get_globals(), bound, cells, self.output, parent=self)
        return tx.run_inline()

    # --- imports, returns ---------------------------------------------------------------------------------------
    def RETURN_GENERATOR(self, inst):
        unimplemented("generator functions are not traced", "return a list instead of yielding")

    def RETURN_VALUE(self, inst):
        raise NotImplementedError


class InstructionTranslator(InstructionTranslatorBase):
    """The root frame's translator: at RETURN_VALUE it compiles the graph and produces the transformed code.

    On a restart after a failure (``break_offset`` set), reaching that instruction compiles the graph so far and
    emits a graph break instead of tracing it (``graph_break.compile_and_break``).
    """

    def __init__(self, *args, break_offset: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.output_instructions: list | None = None
        self.break_offset = break_offset
        self.broke = False  # reached break_offset (and broke the graph there)

    def step(self) -> None:
        inst = self.instructions[self.ip]
        if inst.offset != self.break_offset:
            return super().step()
        from .graph_break import compile_and_break
        self.current_instruction = inst
        self.ip += 1
        if inst.lineno is not None:
            self.lineno = inst.lineno
        self.output.current_tx = self
        self.output_instructions = compile_and_break(self, inst)
        self.done = self.broke = True

    def RETURN_VALUE(self, inst):
        from .convert_frame import compile_and_return
        self.output_instructions = compile_and_return(self, self.pop())
        self.done = True
