"""Inlining: running a user function's bytecode against the caller's graph, instead of calling it.

In:  a user function's tracker, its argument trackers, and the calling translator (``tx.inline_user_function``).
Out: the tracker of what the call returns; the callee's tensor operations are nodes of the caller's graph, its
writes side effects of the caller's frame.  A nested translator runs the callee's code object with the same opcode
handlers (``InstructionTranslatorBase``) and ``parent`` set to the caller, so a refusal inside it carries the whole
user stack and breaks the graph at the root frame's ``CALL``.

    def g(x): return x.cos()     f's CALL g  -> InliningInstructionTranslator(g.__code__, {x: TensorVariable})
    def f(x): return g(x) + 1                   runs LOAD_FAST x; LOAD_ATTR cos; CALL 0; RETURN_VALUE
                                             -> TensorVariable(cos), a node of f's graph

A generator function is run to its end when called (``InliningGeneratorTranslator``, [Note: eager generators]).
Upstream twin: ``InliningInstructionTranslator`` and ``InliningGeneratorInstructionTranslator`` in
``torch/_dynamo/symbolic_convert.py``.
"""
from __future__ import annotations

import contextlib

from .bytecode_analysis import closing_runs_code
from .exc import ObservedException, Unsupported, refuse_frame, unimplemented
from .symbolic_convert import InstructionTranslatorBase
from .variables import ConstantVariable, VariableTracker
from .variables.iter import GeneratorResultVariable


class InliningInstructionTranslator(InstructionTranslatorBase):
    """Runs a callee's bytecode against the caller's graph; its RETURN_VALUE just hands back the tracker."""

    def run_inline(self) -> VariableTracker:
        self.return_value = None
        try:
            self.run()
        except ObservedException as e:
            if issubclass(e.exc_vt.python_type(), StopIteration):
                # a StopIteration leaving a function ends whatever iterates over it: `map(f, xs)`, a user
                # `__next__`, a generator (where it becomes a RuntimeError).  Python decides which.
                unimplemented(f"StopIteration escapes {self.f_code.co_name} while tracing",
                              "Python runs the call itself (the StopIteration may end an iteration)")
            raise
        self.output.current_tx = self.parent
        return self.return_value

    def RETURN_VALUE(self, inst):
        self.return_value = self.pop()
        self.done = True

    def STORE_GLOBAL(self, inst):
        unimplemented("assigning a global inside an inlined function", "return the value instead")


class InliningGeneratorTranslator(InliningInstructionTranslator):
    """A generator (``x for x in xs``, a ``def`` with ``yield``) is run to exhaustion when called; the call returns
    an iterator over everything it yielded.  (Upstream also inlines generators; it keeps them lazy.)

    [Note: eager generators]  Python runs a generator's body only as items are asked for: ``any(check(v) for v in
    xs)`` stops at the first true ``check``, and a consumer's own writes interleave with the body's.  Run up front,
    the body's side effects would all happen, and happen first.  So a generator whose run writes anything outside
    itself (a list, an attribute, a global, an enclosing variable, a tensor in place, the global RNG by drawing
    from it: ``SideEffects.writes``) is refused: a graph break at the call, after which Python makes and drives
    the real generator.  A pure body is run up front, at most ``MAX_YIELDS`` items (an endless generator,
    ``while True: yield``, is refused too); its items stay valid only while the code writes nothing the body could
    read: [Note: stale generators] in variables/iter.py.
    """

    MAX_YIELDS = 1000

    def run_inline(self) -> VariableTracker:
        self.yielded: list[VariableTracker] = []
        writes = self.output.side_effects.writes
        try:
            super().run_inline()
        except ObservedException as e:  # a real generator raises it later, only when the item is asked for
            self.refuse(f"generator {self.f_code.co_name} raises {e.exc_vt.python_type().__name__} "
                        "(Python runs it lazily)", "the generator runs in Python")
        except Unsupported:
            if closing_runs_code(self.f_code):
                self.refuse(f"generator {self.f_code.co_name} cannot be traced", "")
            raise
        if self.output.side_effects.writes != writes:
            self.refuse(f"generator {self.f_code.co_name} has side effects (Python runs it lazily)",
                        "build a list first, or move the side effects out of the generator")
        made_at = self.root_tx().current_instruction.offset
        return GeneratorResultVariable(self.yielded, self.f_code.co_name, self.output.side_effects.version(), made_at)

    def refuse(self, reason: str, hint: str):
        """Python must run this generator: a graph break at its call -- or, if closing it runs code (a
        ``finally``), the whole frame runs eagerly ([Note: drops Python must see] in exc.py) -- unless a
        ``@contextlib.contextmanager`` owns the generator: its ``__exit__`` runs the ``finally`` when the ``with``
        block ends, not when Python drops it, so a graph break at the ``with`` keeps CPython's order."""
        if closing_runs_code(self.f_code) and not self.owned_by_a_context_manager():
            refuse_frame(f"{reason}; its close runs code (a `finally` or `with` block) when Python drops it, "
                         "which a resume function would do later", "the frame runs eagerly")
        unimplemented(reason, hint)

    def owned_by_a_context_manager(self) -> bool:
        init = contextlib._GeneratorContextManagerBase.__init__.__code__
        return self.parent is not None and self.parent.f_code is init

    def RETURN_GENERATOR(self, inst):
        self.push(ConstantVariable(None))

    def YIELD_VALUE(self, inst):
        if len(self.yielded) >= self.MAX_YIELDS:
            unimplemented(f"generator {self.f_code.co_name} yields more than {self.MAX_YIELDS} items while tracing")
        self.yielded.append(self.pop())
        self.push(ConstantVariable(None))  # the value `send` would deliver

    def SEND(self, inst):
        unimplemented("`yield from` inside a traced generator")
