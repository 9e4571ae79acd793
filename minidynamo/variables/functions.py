"""User functions, methods, closures and lambdas: traced by *inlining* their bytecode into the caller's graph.

Calling a ``UserFunctionVariable`` binds the argument trackers to the callee's parameters and runs a nested
``InliningInstructionTranslator`` over the callee's code; whatever it returns is the call's result.  Functions made
while tracing (``def`` inside the frame, lambdas, 3.11 comprehensions) are ``NestedUserFunctionVariable``s that carry
their closure cells.  Mirrors ``torch/_dynamo/variables/functions.py``.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import types

from ..exc import unimplemented
from ..source import ClosureCellSource, DefaultsSource
from .base import NotConstant, VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .lists import TupleVariable


class CellVariable(VariableTracker):
    """A closure cell.  ``value`` is None while the cell is empty."""

    def __init__(self, value: VariableTracker | None = None, **kw):
        super().__init__(**kw)
        self.value = value
        self.mutated = False

    def get(self) -> VariableTracker:
        if self.value is None:
            unimplemented("reading an empty closure cell (free variable referenced before assignment)")
        return self.value

    def set(self, value: VariableTracker) -> None:
        self.value = value
        self.mutated = True


def bind_args(code: types.CodeType, name: str, defaults: list, kwdefaults: dict, args: list, kwargs: dict) -> dict:
    """Map call arguments onto a code object's parameters (what CPython does when it builds a frame)."""
    nargs, nkw = code.co_argcount, code.co_kwonlyargcount
    npos = code.co_posonlyargcount
    names = code.co_varnames
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    bound: dict[str, VariableTracker] = {}
    for pname, a in zip(names[:nargs], args):
        bound[pname] = a
    extra = list(args[nargs:])
    if extra and not has_varargs:
        unimplemented(f"{name}() takes {nargs} positional arguments but {len(args)} were given")
    kw = dict(kwargs)
    for pname in names[npos:nargs + nkw]:
        if pname in kw:
            if pname in bound:
                unimplemented(f"{name}() got multiple values for argument {pname!r}")
            bound[pname] = kw.pop(pname)
    first_default = nargs - len(defaults)
    for k, pname in enumerate(names[:nargs]):
        if pname not in bound:
            if k >= first_default:
                bound[pname] = defaults[k - first_default]
            else:
                unimplemented(f"{name}() missing required argument {pname!r}")
    for pname in names[nargs:nargs + nkw]:
        if pname not in bound:
            if pname not in kwdefaults:
                unimplemented(f"{name}() missing required keyword-only argument {pname!r}")
            bound[pname] = kwdefaults[pname]
    idx = nargs + nkw
    if has_varargs:
        bound[names[idx]] = TupleVariable(extra)
        idx += 1
    if kw and not has_varkw:
        unimplemented(f"{name}() got unexpected keyword arguments {sorted(kw)}")
    if has_varkw:
        bound[names[idx]] = DictVariable(kw)
    return bound


class BaseUserFunctionVariable(VariableTracker):
    def get_code(self) -> types.CodeType:
        raise NotImplementedError

    def get_globals(self) -> dict:
        raise NotImplementedError

    def bind(self, tx, args, kwargs) -> tuple[dict, dict]:
        """(bound locals, closure cells by free-variable name)."""
        raise NotImplementedError

    def call_function(self, tx, args, kwargs):
        return tx.inline_user_function(self, args, kwargs)

    def python_type(self):
        return types.FunctionType

    def truth(self, tx) -> bool:
        """A function or bound method is always true: neither type defines ``__bool__`` or ``__len__``
        (``step = hook or default``)."""
        return self.truth_of_instance_of(tx, self.python_type())


class UserFunctionVariable(BaseUserFunctionVariable):
    """A real ``def`` function object (a global, an attribute, a default...)."""

    def __init__(self, fn: types.FunctionType, **kw):
        super().__init__(**kw)
        self.fn = fn

    def get_code(self):
        return self.fn.__code__

    def get_globals(self):
        return self.fn.__globals__

    def as_python_constant(self):
        return self.fn

    def describe(self):
        return f"function {self.fn.__qualname__}"

    def _repr_body(self):
        return self.fn.__qualname__

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.fn, name))
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        if self.fn is dataclasses.asdict and len(args) == 1 and not kwargs:
            return dataclass_asdict(tx, args[0])
        return super().call_function(tx, args, kwargs)


    def _wrap_real(self, tx, value, source):
        from .builder import VariableBuilder, wrap_constant_result
        if source is not None:
            return VariableBuilder(tx, source)(value)
        return wrap_constant_result(value)

    def bind(self, tx, args, kwargs):
        fn = self.fn
        src = self.source
        defaults = [self._wrap_real(tx, v, src and DefaultsSource(src, k))
                    for k, v in enumerate(fn.__defaults__ or ())]
        kwdefaults = {n: self._wrap_real(tx, v, src and DefaultsSource(src, n))
                      for n, v in (fn.__kwdefaults__ or {}).items()}
        bound = bind_args(fn.__code__, fn.__name__, defaults, kwdefaults, args, kwargs)
        cells = {}
        root = tx.root_tx()
        shared = {id(c): n for n, c in zip(root.f_code.co_freevars, getattr(tx.output, "closure", None) or ())}
        for k, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or ())):
            root_name = shared.get(id(cell))
            if root_name is not None and root.cells[root_name].mutated:
                # The frame assigned this very cell while tracing (a resume function and a closure made before
                # the break share it); the write is pending, so the callee runs natively after it is applied.
                unimplemented(f"calling {fn.__qualname__}, whose cell {name!r} the compiled frame assigned",
                              "the call runs after a graph break, once the cell holds the new value")
            cells[name] = tx.output.root_cell_for(tx, fn, k, cell, src and ClosureCellSource(src, k))
        return bound, cells


def dataclass_asdict(tx, obj: VariableTracker) -> VariableTracker:
    """``dataclasses.asdict(obj)``: the fields, recursively, as a dict.  The real one deep-copies every value it
    does not recurse into, which is the identity for Python constants; anything else (a tensor) is refused."""
    from .user_defined import UserDefinedObjectVariable
    if not (isinstance(obj, UserDefinedObjectVariable) and dataclasses.is_dataclass(obj.python_type())):
        if obj.is_python_constant() and isinstance(obj.as_python_constant(), (int, float, bool, str, type(None))):
            return obj
        unimplemented(f"dataclasses.asdict deep-copies {obj.describe()}", "build the dict by hand")
    return DictVariable({f.name: dataclass_asdict(tx, obj.var_getattr(tx, f.name))
                         for f in dataclasses.fields(obj.python_type())})


class UserMethodVariable(UserFunctionVariable):
    """A function bound to ``obj`` (``obj.method``): ``obj`` becomes the first argument."""

    def __init__(self, fn, obj: VariableTracker, **kw):
        super().__init__(fn, **kw)
        self.obj = obj

    def bind(self, tx, args, kwargs):
        return super().bind(tx, [self.obj, *args], kwargs)

    def as_python_constant(self):
        raise NotConstant(repr(self))  # a bound method is not its function: `{k.m: 1}`, `j.m == k.m`

    def describe(self):
        return f"method {self.fn.__qualname__}"

    def python_type(self):
        return types.MethodType

    def reconstruct(self, codegen):
        if self.source is not None:
            return super().reconstruct(codegen)
        codegen.load_const_object(types.MethodType, push_null=True)
        codegen.load_const_object(self.fn)
        codegen(self.obj)
        codegen.call(2)


class NestedUserFunctionVariable(BaseUserFunctionVariable):
    """A function created while tracing by MAKE_FUNCTION (inner ``def``, ``lambda``, 3.11 comprehension)."""

    def __init__(self, code: types.CodeType, f_globals: dict, defaults: TupleVariable | None,
                 kwdefaults: DictVariable | None, closure: TupleVariable | None, qualname: str, **kw):
        super().__init__(**kw)
        self.code = code
        self.f_globals = f_globals
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure
        self.qualname = qualname

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.f_globals

    def describe(self):
        return f"function {self.qualname}"

    def _repr_body(self):
        return self.qualname

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(self.code.co_name if name == "__name__" else self.qualname)
        return super().var_getattr(tx, name)

    def bind(self, tx, args, kwargs):
        defaults = self.defaults.items if self.defaults else []
        kwdefaults = self.kwdefaults.items if self.kwdefaults else {}
        bound = bind_args(self.code, self.code.co_name, defaults, kwdefaults, args, kwargs)
        cells = dict(zip(self.code.co_freevars, self.closure.items if self.closure else []))
        return bound, cells

    def reconstruct(self, codegen):
        """A real function with the same code whose closure is the compiled frame's real cells (``LOAD_CLOSURE``),
        so it still shares them with the code after a graph break (or with the caller, when returned)."""
        from ..resume_execution import make_function
        root = codegen.tx.root_tx()
        names = []
        for cell in self.closure.items if self.closure else []:
            name = next((n for n, c in root.cells.items() if c is cell), None)
            if name is None:
                unimplemented(f"the function {self.qualname} captures a variable of an inlined function",
                              "define the function in the compiled function itself, or outside it")
            names.append(name)
        codegen.load_const_object(make_function, push_null=True)
        codegen.load_const_object(self.code)
        codegen.load_const_object(self.f_globals)
        for part in (self.defaults, self.kwdefaults):
            if part is None:
                codegen.load_const(None)
            else:
                codegen(part)
        for name in names:
            codegen.load_closure(name)
        codegen.build(tuple, len(names))
        codegen.call(5)


class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)``: calling it prepends the stored arguments."""

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict, value=None, **kw):
        super().__init__(**kw)
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        # the real partial read from the frame, None for one made while tracing: what ``is`` compares
        # (builtin.identity_value), not ``fn``, which two different partials may share
        self.value = value

    def truth(self, tx) -> bool:
        return self.truth_of_instance_of(tx, type(self.value) if self.value is not None else functools.partial)

    def python_type(self):
        return functools.partial

    def call_function(self, tx, args, kwargs):
        return self.fn.call_function(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def var_getattr(self, tx, name):
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(self.kwargs)
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen):
        """``functools.partial(fn, *args, **kwargs)`` again (a partial made in the frame, live at a graph break)."""
        if self.source is not None:
            return super().reconstruct(codegen)
        codegen.load_const_object(make_partial, push_null=True)
        codegen(self.fn)
        codegen(TupleVariable(self.args))
        codegen(DictVariable(self.kwargs))
        codegen.call(3)


def make_partial(fn, args: tuple, kwargs: dict):
    import functools
    return functools.partial(fn, *args, **kwargs)
