"""Building and unpacking containers while tracing: ``BUILD_*``, ``LIST_APPEND`` and friends, ``UNPACK_*``, f-strings.

In:  the values on the translator's stack.  Out: a ``TupleVariable``, ``ListVariable``, ``SetVariable``,
``DictVariable``, ``SliceVariable`` or constant string pushed in their place -- or, for ``UNPACK_*``, the items of
one sequence pushed one by one.  No graph node is made: a tuple of tensors is a Python tuple of ``TensorVariable``s,
and only the tensors inside it are graph values.

    ys = [x, *xs, x.sin()]   BUILD_LIST 1       -> ListVariable([x])
                             LIST_EXTEND 1      -> ListVariable([x, xs[0], xs[1]])
                             ... CALL 0         -> graph: sin = x.sin()
                             LIST_APPEND 1      -> ListVariable([x, xs[0], xs[1], sin])
    a, *rest = ys            UNPACK_EX 1        -> stack [ListVariable(rest), x]

The compiler builds comprehensions, ``f(*args, **kwargs)`` calls and f-strings out of the same instructions, so
these handlers serve them too.  A graph break between ``BUILD_LIST`` and its last ``LIST_APPEND`` leaves a
half-built container on the stack ([Note: containers built across a graph break]).

These are methods of ``InstructionTranslatorBase`` (``symbolic_convert.py``), gathered in a mixin so the
container-building opcodes read in one place, as ``exception_handling.py`` gathers the exception table's.
Upstream twin: the ``BUILD_*``, ``*_APPEND``/``*_UPDATE``, ``UNPACK_*`` and ``FORMAT_VALUE`` handlers of
``torch/_dynamo/symbolic_convert.py``.
"""
from __future__ import annotations

from .exc import unimplemented
from .variables import (
    ConstantVariable,
    DictVariable,
    ListVariable,
    SetVariable,
    SliceVariable,
    TupleVariable,
    VariableTracker,
)
from .variables.constant import fold
from .variables.misc import ExceptionVariable
from .variables.sym_node import SymNodeVariable
from .variables.tensor import TensorVariable


class ContainerBuildingMixin:
    """The container-building, unpacking and f-string handlers of ``InstructionTranslatorBase``."""

    def LIST_TO_TUPLE(self, inst):  # 3.11
        self.push(TupleVariable(self.pop().unpack_var_sequence(self)))

    def BUILD_TUPLE(self, inst):
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        self.push(SetVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst):
        items = self.popn(2 * inst.arg)
        d = DictVariable({})
        for k, v in zip(items[::2], items[1::2]):
            d._m_setitem(self, k, v)
        self.push(d)

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_python_constant()
        values = self.popn(inst.arg)
        self.push(DictVariable(dict(zip(keys, values))))

    def BUILD_SLICE(self, inst):
        self.push(SliceVariable(self.popn(inst.arg)))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        self.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))

    def FORMAT_VALUE(self, inst):
        """[Note: formatting a symbolic number]  ``f"{x.shape[0]}"`` with a dynamic size needs the digits, which
        only this call's value has: the size is specialised (the ShapeEnv guards ``s0 == 5``), as upstream's
        ``LazySymNodeFormatString`` does with ``evaluate_expr``, and the string is a constant -- no graph break.
        A call with another size fails the guard and compiles again.  Upstream defers the specialisation until the
        string is used; here it happens at once (a string built and never read still guards its size).
        ``str(n)``, ``format(n, spec)`` and ``"%d" % n`` specialise the same way (``as_python_constant``)."""
        spec = self.pop().as_python_constant() if inst.arg & 0x04 else ""
        value = self.pop()
        if isinstance(value, ExceptionVariable) and (v := value.printable()) is not None:
            pass  # f"{e}" of a caught exception with constant args: printed by Python, rebuilt
        elif isinstance(value, SymNodeVariable):
            v = value.as_python_constant()  # [Note: formatting a symbolic number]
        elif isinstance(value, TensorVariable) or not value.is_python_constant():
            unimplemented(f"formatting {value.describe()} in an f-string", "format only Python constants")
        else:
            v = value.as_python_constant()
        v = {0: lambda v: v, 1: str, 2: repr, 3: ascii}[inst.arg & 3](v)  # !s, !r, !a
        self.push(fold(self, format, [v, spec], {}))  # f"{'a':d}" raises the ValueError CPython raises

    def _container_being_built(self, depth: int) -> VariableTracker:
        """The list/set/dict that ``LIST_APPEND``/``MAP_ADD``/... add to, ``depth`` slots down the stack.

        [Note: containers built across a graph break]  ``[x, *xs, f(x)]`` builds its list on the stack: BUILD_LIST,
        LIST_EXTEND, then LIST_APPEND once ``f(x)`` returns.  A graph break at ``f`` hands the half-built list to
        the resume function as an argument, so there it is an *input* (it has a source) and the append is a
        mutation of a real list that generated code must replay -- a plain ``items.append`` would be dropped.
        A fresh container (no source) is left alone: counting it as a write would make a pure generator that
        builds a list look impure ([Note: eager generators]).
        """
        container = self.stack[-depth]
        if container.source is not None:
            self.output.side_effects.mutate(container)
        return container

    def LIST_APPEND(self, inst):
        v = self.pop()
        self._container_being_built(inst.arg).items.append(v)

    def LIST_EXTEND(self, inst):
        v = self.pop()
        self._container_being_built(inst.arg).items.extend(v.unpack_var_sequence(self))

    def SET_ADD(self, inst):
        v = self.pop()
        self.stack[-inst.arg].call_method(self, "add", [v], {})

    def SET_UPDATE(self, inst):
        v = self.pop()
        for item in v.unpack_var_sequence(self):
            self.stack[-inst.arg].call_method(self, "add", [item], {})

    def MAP_ADD(self, inst):
        v = self.pop()
        k = self.pop()
        self._container_being_built(inst.arg)._m_setitem(self, k, v)

    def DICT_UPDATE(self, inst):  # {**m}
        v = self.pop()
        self._check_double_star_mapping(v)
        self._container_being_built(inst.arg)._m_update(self, v)

    def DICT_MERGE(self, inst):  # f(**a, **b)
        """Unlike ``DICT_UPDATE``, a key met twice is an error: CPython raises ``TypeError: f() got multiple values
        for keyword argument 'k'``.  The translator refuses instead, so Python runs the call and raises it."""
        v = self.pop()
        self._check_double_star_mapping(v)
        kwargs = self._container_being_built(inst.arg)
        for key in v.items:
            if key in kwargs.items:
                unimplemented(f"`**` unpacking repeats the keyword argument {key!r} (Python raises TypeError here)",
                              "pass each keyword argument once")
        kwargs._m_update(self, v)

    @staticmethod
    def _check_double_star_mapping(v: VariableTracker) -> None:
        """``{**x}`` / ``f(**x)`` need a mapping; a list of pairs is a ``TypeError`` in Python, not ``dict(pairs)``."""
        if not isinstance(v, DictVariable):
            unimplemented(f"`**` unpacking of {v.describe()} (only dicts are unpacked while tracing)",
                          "unpack a dict; Python raises TypeError for a non-mapping")

    def UNPACK_SEQUENCE(self, inst):
        items = self.pop().unpack_var_sequence(self)
        if len(items) != inst.arg:
            unimplemented(f"unpacking {len(items)} values into {inst.arg} names",
                          "the frame runs eagerly so Python raises ValueError")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst):
        items = self.pop().unpack_var_sequence(self)
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            unimplemented("not enough values to unpack")
        middle = ListVariable(items[before:len(items) - after])
        result = items[:before] + [middle] + items[len(items) - after:]
        self.stack.extend(reversed(result))
