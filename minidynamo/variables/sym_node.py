"""Symbolic ints: a size (or an int argument) whose value is a symbol of the frame's ``ShapeEnv``.

``x.shape[0]`` of a dynamic dimension is a ``SymNodeVariable``: an FX node (``sym_size`` / ``getitem`` /
``operator.mul`` ...) plus the ``torch.SymInt`` the fake tensors computed for it (``s0``, ``2*s0``...).  Arithmetic
on it adds more nodes, so ``x.reshape(-1) * x.shape[0]`` stays valid for every size.  Where Python itself needs a
value -- ``if n > 4:``, ``range(n)`` -- the ShapeEnv answers with the value of this call *and records a guard*: a
branch guards the relation (``s0 > 4``), a ``range`` specialises the size (``s0 == 5``).  Mirrors
``torch/_dynamo/variables/tensor.py`` (``SymNodeVariable``).
"""
from __future__ import annotations

import operator

import torch

from .base import VariableTracker

SYM_TYPES = (torch.SymInt, torch.SymBool, torch.SymFloat)
PYTHON_TYPE = {torch.SymInt: int, torch.SymBool: bool, torch.SymFloat: float}
# x += 1 on an int makes a new int: the graph gets the pure operator (an in-place name would look impure to DCE)
OUT_OF_PLACE = {getattr(operator, f"i{n.rstrip('_')}"): getattr(operator, n) for n in
                ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and_", "or_", "xor", "lshift", "rshift")}


class SymNodeVariable(VariableTracker):
    def __init__(self, proxy: torch.fx.Proxy, sym_num, **kw):
        super().__init__(**kw)
        self.proxy = proxy
        self.sym_num = sym_num

    def as_proxy(self):
        return self.proxy

    def as_fake(self):
        return self.sym_num

    def python_type(self):
        return PYTHON_TYPE[type(self.sym_num)]

    def is_python_constant(self) -> bool:
        return False  # so folding takes the symbolic path; as_python_constant() still works, by specialising

    def as_python_constant(self):
        """Python needs a plain value here: specialise (the ShapeEnv records ``s0 == <value>`` as a guard)."""
        return self.python_type()(self.sym_num)

    def var_getattr(self, tx, name):
        """``n.bit_length()``, ``n.real``: what a plain number has needs the value; specialise (a guard pins it).
        A name the type lacks raises CPython's AttributeError without pinning anything."""
        from .constant import ConstantVariable
        if not hasattr(self.python_type(), name):
            from ..exc import raise_observed_exception
            message = f"'{self.python_type().__name__}' object has no attribute '{name}'"
            raise_observed_exception(AttributeError, [ConstantVariable(message)], message)
        return ConstantVariable(self.as_python_constant()).var_getattr(tx, name)

    def truth(self, tx) -> bool:
        return bool(self.sym_num)  # a guard on the relation (s0 > 4), not on the value

    def describe(self):
        return f"symbolic {self.python_type().__name__} {self.sym_num.node.expr}"

    def _repr_body(self):
        return f"{self.proxy.node.name}={self.sym_num.node.expr}"

    def reconstruct(self, codegen):
        codegen.load_const(self.as_python_constant())  # only reached when it is not a graph output


def wrap_sym(proxy: torch.fx.Proxy, value, source=None) -> VariableTracker:
    """The tracker for a node whose fake value is ``value``: symbolic stays a node, a known number is folded."""
    from ..dynamic_shapes import is_symbolic
    from .constant import ConstantVariable
    if isinstance(value, SYM_TYPES) and is_symbolic(value):
        proxy.node.meta["example_value"] = value
        return SymNodeVariable(proxy, value, source=source)
    if isinstance(value, SYM_TYPES):
        value = PYTHON_TYPE[type(value)](value)
    return ConstantVariable(value)


def is_numeric(v: VariableTracker) -> bool:
    return isinstance(v, SymNodeVariable) or v.is_python_constant() and type(v.as_python_constant()) in (int, float,
                                                                                                           bool)
