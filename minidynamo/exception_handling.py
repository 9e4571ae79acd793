"""Exceptions and ``with`` blocks while tracing: the exception table, ``raise``, ``BEFORE_WITH`` and ``__exit__``.

In:  an ``ObservedException`` -- the traced code raised (``raise``, ``RERAISE``, an inlined callee, a builtin
folded over constants) -- or a ``with`` statement's ``BEFORE_WITH``.  Out: the translator continues where CPython
would: at the ``except`` handler the exception table names for the current instruction, with the stack cut to the
try block's depth and the exception pushed; or the exception goes on to the caller (and, at the root, the frame
runs eagerly).  A ``with`` block pushes its ``__exit__`` below the block's stack; an exception leaving the block
calls it on the way out.

    try:                         x.sin() raises inside the try range
        y = f(x)            ->   exception_entry_at(offset) -> handler at PUSH_EXC_INFO
    except ValueError:           CHECK_EXC_MATCH ValueError -> POP_JUMP_IF_FALSE ... the except body is traced
        y = x

These are methods of ``InstructionTranslatorBase`` (``symbolic_convert.py``), gathered in a mixin so the exception
machinery reads in one place.  Upstream twin: the exception-table half of ``torch/_dynamo/symbolic_convert.py``
(``exception_handler``, ``PUSH_EXC_INFO``, ``CHECK_EXC_MATCH``, ``RAISE_VARARGS``, ``BEFORE_WITH``,
``setup_or_before_with``); upstream also models ``sys.exc_info()`` and exception chaining, left out here.
"""
from __future__ import annotations

import contextlib
import dis
import inspect
import types

from .exc import ObservedException, unimplemented
from .variables import (
    ConstantVariable,
    ContextManagerVariable,
    WithExitFunctionVariable,
    wrap_constant_result,
)
from .variables.misc import ExceptionVariable, PreviousExceptionVariable, plain_exception_class
from .variables.user_defined import UserDefinedClassVariable, UserDefinedObjectVariable


class ExceptionHandlingMixin:
    """The exception-table, ``raise`` and ``with`` handlers of ``InstructionTranslatorBase``."""

    # --- exceptions raised by the traced code -------------------------------------------------------------------
    def handle_observed_exception(self, e: ObservedException) -> bool:
        """Continue at the user's ``except`` handler covering the current instruction, as CPython would: the stack
        is cut to the try block's depth, then (lasti,) and the exception are pushed.  A ``with`` block the
        exception leaves is exited on the way out ([Note: exceptions leaving a with block]); the compiler's own
        cleanup blocks, which end in ``RERAISE``, are traced too ([Note: cleanup handlers]).  Any other handler:
        False, the exception goes on to the caller."""
        offset, raised = self.current_instruction.offset, e
        while True:
            entry = self.exception_entry_at(offset)
            k = None if entry is None or len(self.stack) < entry.depth else self.index_of[entry.target]
            if k is None or self.instructions[k].opname != "PUSH_EXC_INFO" and not self.is_cleanup_handler(k):
                if e is not raised:
                    raise e  # an __exit__ raised on the way: its exception goes on to the caller
                return False
            if self.instructions[k].opname != "PUSH_EXC_INFO":
                break
            if self.instructions[k + 1].opname != "WITH_EXCEPT_START":
                break
            try:
                self.exit_with_block(entry, e)
            except ObservedException as from_exit:  # __exit__ raised: that exception goes on in place of ``e``
                e = from_exit
            # CPython re-raises from the handler; what catches it there catches the exception leaving the block
            offset = self.exception_entry_at(self.instructions[k + 1].offset).target
        del self.stack[entry.depth:]
        if entry.lasti:
            self.push(ConstantVariable(offset))
        self.push(e.exc_vt)
        self.ip = k
        return True

    def exception_entry_at(self, offset: int):
        return next((x for x in dis.Bytecode(self.f_code).exception_entries if x.start <= offset < x.end), None)

    # [Note: exceptions leaving a with block]  An exception raised inside ``with torch.no_grad():`` (here, or in a
    # function inlined here) and caught outside the block, maybe by a caller, must leave grad mode as it found it:
    # CPython's handler calls ``__exit__`` before the exception goes on.  Skipping it left the graph -- and, through
    # the grad mode the transformed code restores, the caller's process -- with grad disabled.  torch's managers
    # never suppress; a user ``__exit__`` is inlined and must return a constant false (suppressing would resume
    # after the block, which is not traced).
    def exit_with_block(self, entry, e: ObservedException) -> None:
        exit_fn = self.stack[entry.depth - 1]  # BEFORE_WITH pushed it below the block's stack
        del self.stack[entry.depth - 1:]
        if isinstance(exit_fn, WithExitFunctionVariable):
            exit_fn.ctx.exit(self)
        else:
            exc = e.exc_vt
            result = exit_fn.call_function(self, [wrap_constant_result(exc.exc_type), exc, ConstantVariable(None)], {})
            if not result.is_python_constant() or result.as_python_constant():
                unimplemented("a context manager's __exit__ may suppress an exception raised while tracing",
                              "the frame runs eagerly; raise outside the `with` block to trace it")

    def PUSH_EXC_INFO(self, inst):
        exc = self.pop()
        self.push(PreviousExceptionVariable())
        self.push(exc)

    def POP_EXCEPT(self, inst):
        self.pop()

    def CHECK_EXC_MATCH(self, inst):
        classes = self.pop().as_python_constant()
        self.push(ConstantVariable(issubclass(self.stack[-1].python_type(), classes)))

    # [Note: cleanup handlers]  Besides ``except`` clauses (PUSH_EXC_INFO) the compiler makes small handlers that
    # tidy up and re-raise: ``COPY 3; POP_EXCEPT; RERAISE 1`` after an except clause, ``e = None; del e; RERAISE 1``
    # for ``except ... as e``, and on 3.12 the restore of an inlined comprehension's variable (``SWAP 2; POP_TOP;
    # SWAP 2; STORE_FAST i; RERAISE 0``).  They are traced like any code, and ``RERAISE`` raises the traced
    # exception again, so it reaches the next handler out: an unmatched ``except``, a ``finally`` or a failing
    # comprehension inside ``try`` work as in CPython.  Other handlers (a 3.12 generator's StopIteration wrapper)
    # are not traced.
    CLEANUP_OPS = frozenset({"SWAP", "POP_TOP", "COPY", "POP_EXCEPT", "STORE_FAST", "LOAD_CONST", "DELETE_FAST",
                             "STORE_DEREF", "DELETE_DEREF", "RERAISE", "NOP"})

    def is_cleanup_handler(self, k: int) -> bool:
        """Is the handler at instruction ``k`` a straight run of moves and stores ending in ``RERAISE``?"""
        for inst in self.instructions[k:]:
            if inst.opname == "RERAISE":
                return True
            if inst.opname not in self.CLEANUP_OPS:
                return False
        return False

    def RERAISE(self, inst):
        exc = self.pop()
        if inst.arg:
            self.pop()  # the lasti CPython restores; nothing while tracing
        if not isinstance(exc, ExceptionVariable):
            unimplemented(f"re-raising {exc.describe()} while tracing", "the frame runs eagerly so Python raises it")
        raise ObservedException(f"{exc.exc_type.__name__} raised while tracing", exc)

    # --- raising --------------------------------------------------------------------------------------------
    def LOAD_ASSERTION_ERROR(self, inst):
        self.push(wrap_constant_result(AssertionError))

    def RAISE_VARARGS(self, inst):
        if inst.arg != 1:
            unimplemented("re-raising, or `raise ... from ...`, while tracing", "the frame runs eagerly")
        exc = self.pop()
        if isinstance(exc, UserDefinedClassVariable) and plain_exception_class(exc.value):
            exc = ExceptionVariable(exc.value, [])  # `raise ValueError` instantiates the class
        if not isinstance(exc, ExceptionVariable):
            unimplemented(f"raising {exc.describe()} while tracing", "the frame runs eagerly so Python raises it")
        raise ObservedException(f"{exc.exc_type.__name__} raised while tracing", exc)

    # --- with blocks ----------------------------------------------------------------------------------------
    def BEFORE_WITH(self, inst):
        ctx = self.pop()
        if isinstance(ctx, UserDefinedObjectVariable) and not ctx.is_constant:
            return self.enter_user_context(ctx)
        if not isinstance(ctx, ContextManagerVariable):
            unimplemented(f"`with` on {ctx.describe()}",
                          "only torch.no_grad/enable_grad/set_grad_enabled/record_function and context managers "
                          "whose __enter__/__exit__ are Python functions are traced")
        self.push(WithExitFunctionVariable(ctx))
        self.push(ctx.enter(self))

    def enter_user_context(self, ctx: UserDefinedObjectVariable) -> None:
        """``with obj:`` where ``__enter__``/``__exit__`` are Python functions: inline them like any method call.

        The bound ``__exit__`` goes on the stack, where the normal exit path calls it with (None, None, None).
        Generator-based managers (``@contextlib.contextmanager``) are refused: a generator called while tracing is
        run to its end at once, which would run the code after ``yield`` before the body."""
        cls = ctx.python_type()
        if cls.__module__.split(".")[0] == "torch":  # torch.autocast & co. change global state graph nodes lose
            unimplemented(f"`with {cls.__module__}.{cls.__qualname__}(...)` is not traced",
                          "only torch.no_grad/enable_grad/set_grad_enabled/record_function are understood")
        if issubclass(cls, contextlib._GeneratorContextManagerBase):
            unimplemented(f"`with` on a @contextlib.contextmanager ({cls.__name__})",
                          "write the context manager as a class with __enter__/__exit__")
        for name in ("__enter__", "__exit__"):
            if not isinstance(inspect.getattr_static(cls, name, None), types.FunctionType):
                unimplemented(f"`with` on {ctx.describe()}: {name} is not a Python function",
                              "only context managers whose __enter__/__exit__ are Python functions are traced")
        exit_fn = ctx.var_getattr(self, "__exit__")
        entered = ctx.var_getattr(self, "__enter__").call_function(self, [], {})
        self.push(exit_fn)
        self.push(entered)
