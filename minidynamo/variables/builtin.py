"""Python builtins (``len``, ``isinstance``, ``range``, ``zip``, ``min``, ``getattr``, ...) and the ``operator`` module.

``BuiltinVariable(fn).call_function`` dispatches to a ``call_<name>`` handler when one exists, otherwise folds the
builtin over Python constants.  The operators themselves (``binary_op``, ``compare_op``, ``is_op``, ``unary_op``)
live in ``operators.py``; ``operator.add`` & co. reach them through ``OPERATOR_HANDLERS``.  The iterators ``iter``,
``zip``, ``map``, ``filter`` and ``enumerate`` return are in ``iter.py``.
Mirrors ``torch/_dynamo/variables/builtin.py``.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
import types
from collections.abc import Callable

import torch

from ..exc import raise_observed_exception, unimplemented
from .base import BoundMethodVariable, NotConstant, VariableTracker, handler_takes
from .constant import (
    BINARY_OPS,
    COMPARE_OPS,
    ConstantVariable,
    fold,
    holds_state_across_calls,
    raise_as_observed,
)
from .dicts import (
    DictIteratorVariable,
    DictVariable,
    DictViewVariable,
    SetIteratorVariable,
    SetVariable,
    const_key,
)
from .iter import (
    EnumerateVariable,
    FilterVariable,
    ListElementIteratorVariable,
    ListIteratorVariable,
    MapVariable,
    ZipVariable,
)
from .lists import ListVariable, RangeVariable, SliceVariable, TupleVariable
from .operators import binary_op, compare_op, is_op, unary_op
from .sym_node import SymNodeVariable, is_numeric
from .tensor import TensorVariable, call_graph_op

UNTRACEABLE = {print: "`print` writes to stdout (a side effect the graph cannot hold)",
               input: "`input` reads from stdin", open: "`open` touches files", id: "`id` of a traced value",
               breakpoint: "`breakpoint`", exec: "`exec`", eval: "`eval`",
               locals: "`locals()` reads the frame", globals: "`globals()` reads the frame"}


def get_iterator(tx, obj: VariableTracker) -> ListIteratorVariable:
    """``iter(obj)`` (``GET_ITER``): an iterator is itself; a list is walked live; anything else by its items."""
    if isinstance(obj, ListIteratorVariable):
        return obj
    if type(obj) is ListVariable:
        return ListElementIteratorVariable(obj)
    if isinstance(obj, DictVariable):
        return DictIteratorVariable(obj)
    if isinstance(obj, DictViewVariable):
        return DictIteratorVariable(obj.dict_vt, obj.kind)
    if isinstance(obj, SetVariable):
        return SetIteratorVariable(obj)
    return ListIteratorVariable(obj.unpack_var_sequence(tx))


def length_result(result: VariableTracker) -> VariableTracker:
    """What ``len()`` makes of what ``__len__`` returned, as CPython's ``slot_sq_length``: an int (``True`` is 1),
    through ``__index__``; a float is a TypeError and a negative length a ValueError.  A user ``__len__`` returning
    ``2.5`` gave 2.5 where Python raises."""
    if isinstance(result, SymNodeVariable):
        return result
    if not result.is_python_constant():
        unimplemented(f"len() of an object whose __len__ returns {result.describe()}")
    value = result.as_python_constant()
    try:
        length = operator.index(value)
    except TypeError:
        message = f"'{type(value).__name__}' object cannot be interpreted as an integer"
        raise_observed_exception(TypeError, [ConstantVariable(message)], message)
    if length < 0:
        raise_observed_exception(ValueError, [ConstantVariable("__len__() should return >= 0")], "negative len")
    return ConstantVariable(length)


class BuiltinVariable(VariableTracker):
    def __init__(self, fn: Callable, **kw):
        super().__init__(**kw)
        self.fn = fn

    def as_python_constant(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"

    def truth(self, tx) -> bool:
        return self.truth_of_instance_of(tx, type(self.fn))

    def _repr_body(self):
        return getattr(self.fn, "__name__", repr(self.fn))

    def reconstruct(self, codegen):
        if self.source is not None:
            return super().reconstruct(codegen)
        codegen.load_const_object(self.fn)

    def var_getattr(self, tx, name):
        from .builder import wrap_constant_result
        value = getattr(self.fn, name)  # float.fromhex, dict.fromkeys, int.__name__ ...
        return BuiltinVariable(value) if callable(value) else wrap_constant_result(value)

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if fn in UNTRACEABLE:
            unimplemented(UNTRACEABLE[fn], "move it outside the compiled function, or accept a graph break")
        name = getattr(fn, "__name__", "")
        handler = getattr(self, f"call_{name}", None) if getattr(builtins, name, None) is fn else None
        if handler is not None and handler_takes(handler, args, kwargs):  # else folded, or refused, below
            result = handler(tx, *args, **kwargs)
            if result is not None:
                return result
        if fn is object.__setattr__:  # inside a user __setattr__: the plain store, without calling it again
            obj, attr, value = args
            tx.store_attr_raw(obj, attr.as_python_constant(), value)
            return ConstantVariable(None)
        if getattr(fn, "__self__", None) is dict and name == "fromkeys":  # a fresh bound method each time: no `is`
            value = args[1] if len(args) > 1 else ConstantVariable(None)
            return DictVariable({const_key(k): value for k in args[0].unpack_var_sequence(tx)})
        if fn is functools.reduce:
            return self._reduce(tx, *args)
        if fn in OPERATOR_HANDLERS:
            return OPERATOR_HANDLERS[fn](tx, *args)
        if fn in MATH_ON_TENSORS and any(isinstance(a, TensorVariable) for a in args):
            unimplemented(f"math.{name} on a tensor reads its value", "use the torch function instead")
        if isinstance(fn, type) and holds_state_across_calls(fn):  # see [Note: folding a constructor]
            unimplemented(f"constructing a {name} object while tracing: folded, one real object would serve every "
                          "call", "build it outside the compiled function, or let this part run eagerly")
        try:
            a = [x.as_python_constant() for x in args]
            k = {n: v.as_python_constant() for n, v in kwargs.items()}
        except NotConstant:
            unimplemented(f"builtin {name}() with arguments {[x.describe() for x in args]}")
        return fold(tx, fn, a, k)

    def _reduce(self, tx, fn, iterable, initial=None):
        items = iterable.unpack_var_sequence(tx)
        if initial is None and not items:
            raise_observed_exception(TypeError, [ConstantVariable("reduce() of empty iterable with no initial value")],
                                     "functools.reduce of an empty sequence")
        acc = initial if initial is not None else items.pop(0)
        for item in items:
            acc = fn.call_function(tx, [acc, item], {})
        return acc

    # --- handlers: return None to fall back to constant folding --------------------------------------------
    def call_len(self, tx, obj):
        return length_result(obj.call_method(tx, "__len__", [], {}))

    def call_isinstance(self, tx, obj, classes):
        if not classes.is_python_constant():
            unimplemented(f"isinstance with classes {classes.describe()}")
        cls = classes.as_python_constant()
        try:
            t = obj.python_type()
        except Exception:  # noqa: BLE001
            unimplemented(f"isinstance on {obj.describe()}")
        if isinstance(obj, TensorVariable) and t is not None:
            import torch
            t = type(obj.example_value) if not isinstance(obj.example_value, torch._subclasses.FakeTensor) else t
        try:  # a class, a (nested) tuple of them or a union: issubclass takes each, in isinstance's order
            return ConstantVariable(issubclass(t, cls))
        except TypeError:  # isinstance(x, [int]): CPython's words for isinstance (the same on 3.11 and 3.12)
            message = "isinstance() arg 2 must be a type, a tuple of types, or a union"
            raise_observed_exception(TypeError, [ConstantVariable(message)], message)

    def call_type(self, tx, obj):
        from .user_defined import UserDefinedClassVariable, UserDefinedObjectVariable
        if isinstance(obj, UserDefinedObjectVariable):
            return obj.class_tracker(tx)  # with the class's source: its attributes can be guarded and stored
        return UserDefinedClassVariable(obj.python_type())

    def call_range(self, tx, *args):
        bounds = [a.as_python_constant() for a in args]
        try:
            value = range(*bounds)
        except (TypeError, ValueError) as e:  # range(1.5), range(0, 3, 0): CPython's errors, observed
            raise_as_observed(e, f"range raised {type(e).__name__}: {e} while tracing")
        return RangeVariable(value)

    def call_slice(self, tx, *args):
        return SliceVariable(list(args))

    def call_iter(self, tx, obj):
        return get_iterator(tx, obj)

    def call_next(self, tx, it, default=None):
        if not isinstance(it, ListIteratorVariable):
            unimplemented(f"next() on {it.describe()}")
        item = it.next_variable(tx)
        if item is None:
            if default is None:
                unimplemented("StopIteration raised by next() while tracing")
            return default
        return item

    def call_enumerate(self, tx, iterable, start=None):
        s = start.as_python_constant() if start else 0
        return EnumerateVariable(get_iterator(tx, iterable), s)

    def call_zip(self, tx, *iterables, strict=None):
        if strict is not None and strict.as_python_constant():
            seqs = [it.unpack_var_sequence(tx) for it in iterables]
            if len({len(seq) for seq in seqs}) > 1:
                unimplemented("zip(strict=True) over iterables of different lengths")
            return ListIteratorVariable([TupleVariable(list(group)) for group in zip(*seqs)])
        return ZipVariable([get_iterator(tx, it) for it in iterables])

    def call_map(self, tx, fn, *iterables):
        if not iterables:
            message = "map() must have at least two arguments."
            raise_observed_exception(TypeError, [ConstantVariable(message)], message)
        return MapVariable(fn, [get_iterator(tx, it) for it in iterables])

    def call_filter(self, tx, fn, iterable):
        return FilterVariable(fn, [get_iterator(tx, iterable)])

    def call_reversed(self, tx, seq):
        return ListIteratorVariable(list(reversed(seq.unpack_var_sequence(tx))))

    def call_list(self, tx, iterable=None):
        return ListVariable(iterable.unpack_var_sequence(tx) if iterable else [])

    def call_tuple(self, tx, iterable=None):
        return TupleVariable(iterable.unpack_var_sequence(tx) if iterable else [])

    def call_set(self, tx, iterable=None):
        return SetVariable(iterable.unpack_var_sequence(tx) if iterable else [])

    def call_dict(self, tx, arg=None, **kwargs):
        d = DictVariable({})
        d._m_update(tx, arg, **kwargs)
        return d

    def call_sorted(self, tx, iterable, *, key=None, reverse=None):
        lst = ListVariable(iterable.unpack_var_sequence(tx))
        lst._m_sort(tx, key=key, reverse=reverse)
        return lst

    def call_sum(self, tx, iterable, start=None):
        total = start or ConstantVariable(0)
        for item in iterable.unpack_var_sequence(tx):
            total = binary_op(tx, operator.add, total, item)
        return total

    def _minmax(self, tx, args, pick):
        if all(a.is_python_constant() for a in args):  # max(), max(5), max([]) raise CPython's own errors
            return fold(tx, pick, [a.as_python_constant() for a in args], {})
        items = args[0].unpack_var_sequence(tx) if len(args) == 1 else list(args)
        if any(isinstance(i, SymNodeVariable) for i in items) and all(is_numeric(i) for i in items):
            if len({i.python_type() for i in items}) > 1:
                return self._minmax_by_comparison(tx, items, pick)
            sym_pick = torch.sym_min if pick is min else torch.sym_max
            return functools.reduce(lambda x, y: call_graph_op(tx, "call_function", sym_pick, [x, y], {}), items)
        if all(i.is_python_constant() for i in items):
            return fold(tx, pick, [[i.as_python_constant() for i in items]], {})
        unimplemented(f"{pick.__name__}() over tensors compares values", f"use torch.{pick.__name__}imum or torch.{pick.__name__}")

    @staticmethod
    def _minmax_by_comparison(tx, items, pick, keys=None):
        """[Note: min/max over mixed int and float sizes] CPython returns the winning *object*: ``max(n / 2, m)``
        is an int when ``m`` wins and a float when ``n / 2`` does.  ``torch.sym_max`` promotes to float, so over
        mixed types we run CPython's loop instead -- the first item wins ties, a later one replaces it only when
        strictly greater (less, for min) -- and each comparison guards the relation it took (``s1 > s0/2``)."""
        better = operator.gt if pick is max else operator.lt
        best = 0
        for k in range(1, len(items)):
            if compare_op(tx, better, (keys or items)[k], (keys or items)[best]).truth(tx):
                best = k
        return items[best]

    def call_min(self, tx, *args, **kwargs):
        return self._minmax_keyed(tx, args, min, **kwargs) if kwargs else self._minmax(tx, args, min)

    def call_max(self, tx, *args, **kwargs):
        return self._minmax_keyed(tx, args, max, **kwargs) if kwargs else self._minmax(tx, args, max)

    def _minmax_keyed(self, tx, args, pick, key=None, default=None):
        """``max(xs, key=f)``/``max(xs, default=d)``: CPython's loop over the keys (see [Note: min/max over mixed
        int and float sizes]); the winning item is returned.  Over constants it is folded."""
        if len(args) == 1 and args[0].is_python_constant() and (key is None or key.is_python_constant()) and \
                (default is None or default.is_python_constant()):
            return None  # folded: CPython's own errors (max([], key=f) without a default) included
        if default is not None and len(args) != 1:
            return None
        items = args[0].unpack_var_sequence(tx) if len(args) == 1 else list(args)
        if not items:
            return default
        if key is None or key.is_python_constant() and key.as_python_constant() is None:
            keys = items
        else:
            keys = [key.call_function(tx, [i], {}) for i in items]
        return self._minmax_by_comparison(tx, items, pick, keys)

    def call_abs(self, tx, x):
        if isinstance(x, TensorVariable):
            return x.call_method(tx, "abs", [], {})
        return None

    def _all_any(self, tx, iterable, pick):
        return ConstantVariable(pick(i.truth(tx) for i in iterable.unpack_var_sequence(tx)))

    def call_all(self, tx, iterable):
        return self._all_any(tx, iterable, all)

    def call_any(self, tx, iterable):
        return self._all_any(tx, iterable, any)

    def call_bool(self, tx, x=None):
        return ConstantVariable(False if x is None else x.truth(tx))

    def _numeric(self, tx, *args, **kwargs):
        """``int(x)``/``float(x)``/``complex(x)`` of a symbolic int or a tensor; anything else, ``int("ff", 16)``
        included, is folded over constants (and raises what CPython raises, ``int("z")``'s ValueError)."""
        x = args[0] if len(args) == 1 and not kwargs else None
        if isinstance(x, SymNodeVariable) and self.fn is int and x.python_type() is int:
            return x  # int(s0) is s0
        if isinstance(x, TensorVariable):
            x.call_method(tx, f"__{self.fn.__name__}__", [], {})
        return None

    call_int = call_float = call_complex = _numeric

    def attribute_name(self, tx, name: VariableTracker) -> str:
        """The name given to getattr/hasattr/setattr/delattr: a constant str, or the TypeError CPython raises."""
        if not name.is_python_constant():
            unimplemented(f"{self.describe()}() with the attribute name {name.describe()}",
                          "use a constant string as the attribute name")
        n = name.as_python_constant()
        if not isinstance(n, str):  # "attribute name must be string, not 'list'", checked before anything else
            fold(tx, self.fn, [object(), n] + [None] * (self.fn is setattr), {})
        return n

    def call_getattr(self, tx, obj, name, default=None):
        n = self.attribute_name(tx, name)
        if default is None:
            return obj.var_getattr(tx, n)
        return getattr_or_attribute_error(tx, obj, n, default)

    def call_hasattr(self, tx, obj, name):
        n = self.attribute_name(tx, name)
        if attribute_runs_user_code(obj, n):
            found = getattr_or_attribute_error(tx, obj, n, None)
            return ConstantVariable(found is not None)
        return obj_hasattr(tx, obj, n)

    def call_setattr(self, tx, obj, name, value):
        tx.store_attr(obj, self.attribute_name(tx, name), value)
        return ConstantVariable(None)

    def call_vars(self, tx, obj=None):
        from .user_defined import UserDefinedObjectVariable
        if obj is None:
            unimplemented("vars() without an argument reads the frame's locals", "pass the object to vars()")
        if isinstance(obj, UserDefinedObjectVariable) and not obj.built_here and not obj.is_constant:
            return obj.var_getattr(tx, "__dict__")
        return None

    def call_delattr(self, tx, obj, name):
        tx.delete_attr(obj, self.attribute_name(tx, name))
        return ConstantVariable(None)

    def call_dir(self, tx, obj=None):
        if obj is None:
            unimplemented("dir() without an argument reads the frame's locals", "pass the object to dir()")

    def call_callable(self, tx, obj):
        from .functions import BaseUserFunctionVariable
        from .nn_module import NNModuleVariable
        from .torch import TorchVariable
        if isinstance(obj, (BaseUserFunctionVariable, BuiltinVariable, TorchVariable, NNModuleVariable,
                            BoundMethodVariable)):
            return ConstantVariable(True)
        if obj.is_python_constant():
            return ConstantVariable(callable(obj.as_python_constant()))
        from .user_defined import UserDefinedObjectVariable
        if isinstance(obj, (TensorVariable, UserDefinedObjectVariable)):  # callable when its class defines __call__
            return ConstantVariable(any("__call__" in vars(k) for k in obj.python_type().__mro__))
        return ConstantVariable(callable(getattr(obj, "value", None)))

    def call_super(self, tx, *args):
        from .user_defined import SuperVariable
        return SuperVariable.from_call(tx, args)

    def call_str(self, tx, obj=None):
        if isinstance(obj, TensorVariable):
            unimplemented("str() of a tensor reads its values", "format tensors outside the compiled function")
        return self._print_exception(tx, obj)

    def _print_exception(self, tx, obj, spec=None):
        """``str(e)``, ``repr(e)``, ``ascii(e)``, ``format(e, spec)`` of a caught exception whose args are
        constants: Python prints the exception rebuilt from them (``ExceptionVariable.printable``).  None (fold, or
        refuse) for anything else."""
        from .misc import ExceptionVariable
        if not isinstance(obj, ExceptionVariable) or (e := obj.printable()) is None:
            return None
        if spec is not None and not spec.is_python_constant():
            return None
        return fold(tx, self.fn, [e] + ([] if spec is None else [spec.as_python_constant()]), {})

    def call_repr(self, tx, obj):
        return self._print_exception(tx, obj)

    def call_ascii(self, tx, obj):
        return self._print_exception(tx, obj)

    def call_format(self, tx, obj, spec=None):
        return self._print_exception(tx, obj, spec)


def attribute_runs_user_code(obj: VariableTracker, name: str) -> bool:
    """Does reading ``obj.name`` run the user's Python: a property, a descriptor, a user ``__getattr__``?

    [Note: getattr with a default]  ``getattr(obj, name, default)`` and ``hasattr`` swallow ``AttributeError`` and
    nothing else.  Tracing the read and swallowing *any* failure turned a property that graph-breaks (a ``print``)
    or raises ``KeyError`` into the default, and ``hasattr`` on the real object ran the property once, while
    tracing, instead of on every call.  When user code answers, it is traced like any other call: an
    ``AttributeError`` it raises gives the default, and everything else (a graph break, another exception)
    propagates as it would without the default.  The same holds for every tracker: the translator refusing to read
    an attribute that exists (``fn.__defaults__``, ``t._base``) is a graph break, never the default.
    """
    from .nn_module import NNModuleVariable
    from .user_defined import UserDefinedObjectVariable
    if not isinstance(obj, (UserDefinedObjectVariable, NNModuleVariable)):
        return False
    cls = obj.python_type()
    static = inspect.getattr_static(cls, name, None)
    if isinstance(static, property) or isinstance(getattr(type(static), "__get__", None), types.FunctionType):
        return True
    user_getattr = inspect.getattr_static(cls, "__getattr__", None)
    return static is None and isinstance(obj, UserDefinedObjectVariable) and isinstance(user_getattr,
                                                                                      types.FunctionType)


def getattr_or_attribute_error(tx, obj: VariableTracker, name: str, default):
    """``obj.name`` traced; ``default`` when the traced code raises ``AttributeError`` (see [Note: getattr with a
    default])."""
    from ..exc import ObservedException
    try:
        return obj.var_getattr(tx, name)
    except ObservedException as e:
        if issubclass(e.exc_vt.python_type(), AttributeError):
            return default
        raise


def obj_hasattr(tx, obj, name: str) -> VariableTracker:
    from .nn_module import NNModuleVariable
    from .user_defined import UserDefinedObjectVariable
    if isinstance(obj, (UserDefinedObjectVariable, NNModuleVariable)) and not getattr(obj, "is_constant", False):
        return ConstantVariable(object_hasattr(tx, obj, name))
    value = getattr(obj, "value", getattr(obj, "module", None))
    if value is not None and not isinstance(obj, ConstantVariable):
        return ConstantVariable(hasattr(value, name))
    if obj.is_python_constant():
        return ConstantVariable(hasattr(obj.as_python_constant(), name))
    if isinstance(obj, TensorVariable):
        return ConstantVariable(obj.has_attribute(tx, name))
    from .sym_node import SymNodeVariable
    if isinstance(obj, SymNodeVariable):  # an int's attributes are its class's: the value is not needed
        return ConstantVariable(hasattr(obj.python_type(), name))
    unimplemented(f"hasattr on {obj.describe()}")


def object_hasattr(tx, obj, name: str) -> bool:
    """``hasattr(obj, name)`` on a user object or module, as the traced code has changed it so far.

    Asking the real object instead missed ``obj.name = v`` and ``del obj.name`` traced earlier in the frame (their
    stores are replayed after the graph), and its answer for an input was not guarded: another object of the same
    class, with or without the attribute, reused it.  Instance stores and deletions answer first, then the class
    (with its traced stores), then the real object's own attributes, whose presence or absence is guarded."""
    from ..side_effects import DeletedAttribute
    from ..source import AttrSource
    pending = tx.output.side_effects.pending_attr(obj, name)
    if pending is not None and not isinstance(pending, DeletedAttribute):
        return True
    cls = obj.python_type()
    in_class = tx.output.side_effects.pending_class_attr(cls, name)
    if in_class is not None:
        return not isinstance(in_class, DeletedAttribute)
    static = next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)
    slot = type(static).__name__ in ("member_descriptor", "getset_descriptor")  # may be unset: ask the object
    if static is not None and not slot:
        return True
    if pending is not None or getattr(obj, "built_here", False):  # deleted here, or no real object to ask
        if slot:
            unimplemented(f"hasattr({obj.describe()}, {name!r}) on a slot of an object changed while tracing")
        return False
    if obj.source is None:
        unimplemented(f"hasattr on {obj.describe()}")
    present = hasattr(tx.eval_source(obj.source), name)
    tx.output.add_guard("HASATTR", AttrSource(obj.source, name), present)
    return present


def _getitem(tx, obj, index):
    return obj.call_method(tx, "__getitem__", [index], {})


def _setitem(tx, obj, index, value):
    return obj.call_method(tx, "__setitem__", [index, value], {})


def _not(tx, x):
    if isinstance(x, TensorVariable):
        return call_graph_op(tx, "call_function", operator.not_, [x], {})
    return ConstantVariable(not x.truth(tx))


def _with_op(handler: Callable, op: Callable, tx, a, b):
    """``handler(tx, op, a, b)``: an operator's entry in ``OPERATOR_HANDLERS``."""
    return handler(tx, op, a, b)


OPERATOR_HANDLERS: dict[Callable, Callable] = {
    **{fn: functools.partial(_with_op, binary_op, fn) for fn in BINARY_OPS.values()},
    **{fn: functools.partial(_with_op, compare_op, fn) for fn in COMPARE_OPS.values()},
    operator.getitem: _getitem, operator.setitem: _setitem, operator.not_: _not,
    operator.is_: lambda tx, a, b: ConstantVariable(is_op(tx, a, b)),
    operator.is_not: lambda tx, a, b: ConstantVariable(not is_op(tx, a, b)),
    operator.contains: lambda tx, a, b: a.call_method(tx, "__contains__", [b], {}),
    operator.neg: lambda tx, a: unary_op(tx, operator.neg, a),
    operator.pos: lambda tx, a: unary_op(tx, operator.pos, a),
    operator.invert: lambda tx, a: unary_op(tx, operator.invert, a),
    operator.truth: lambda tx, a: ConstantVariable(a.truth(tx)),
}
MATH_ON_TENSORS = {getattr(math, n) for n in dir(math) if callable(getattr(math, n))}
