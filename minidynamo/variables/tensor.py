"""Tensors: an FX proxy (the node that computes it) plus a fake tensor (its shape, dtype and device).

Every operation on a ``TensorVariable`` becomes an FX node, and also runs on the fake tensors so the translator knows
the result's metadata without computing anything.  An operation whose *output shape depends on data* (``nonzero``,
boolean-mask indexing) or that needs a *value* (``.item()``, ``bool(t)``) cannot be known from fake tensors: it is
refused here (later stages turn that refusal into a graph break).  Mirrors ``torch/_dynamo/variables/tensor.py`` and
``wrap_fx_proxy`` in ``torch/_dynamo/variables/builder.py``.
"""
from __future__ import annotations

import contextlib
import operator
from typing import Any

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols
from torch.utils._pytree import tree_map

from ..dynamic_shapes import concrete, is_symbolic
from ..exc import refuse_frame, unimplemented
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable
from .ctx_manager import tracing_autocast

# Attributes answered from the fake tensor's metadata (static in this stage, guarded by TENSOR_MATCH).
CONSTANT_ATTRS = {"dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse", "layout", "is_quantized",
                  "is_meta", "itemsize", "is_leaf",
                  "is_nested"}  # nn.MultiheadAttention's forward asks: a graph break per call before
GRAPH_ATTRS = {"T", "mT", "H", "mH", "real", "imag", "data"}
# Methods answered from metadata, never put in the graph.
CONSTANT_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous", "is_floating_point",
                    "is_complex", "element_size", "get_device", "__len__", "type_as_constant", "storage_offset"}
DATA_DEPENDENT_METHODS = {
    "item": "`.item()` reads a tensor's value", "tolist": "`.tolist()` reads a tensor's values",
    "numpy": "`.numpy()` leaves PyTorch", "__bool__": "`bool(t)` reads a tensor's value",
    "__int__": "`int(t)` reads a tensor's value", "__float__": "`float(t)` reads a tensor's value",
    "__index__": "using a tensor as a Python index reads its value", "data_ptr": "`data_ptr()` is a runtime address",
    "backward": "`.backward()` inside a compiled region", "__repr__": "printing a tensor reads its values",
    "__str__": "printing a tensor reads its values", "__format__": "formatting a tensor reads its values",
}
VALUE_HINT = "keep the value as a tensor (e.g. torch.where instead of if, tensor ops instead of .item())"


class TensorVariable(VariableTracker):
    def __init__(self, proxy: torch.fx.Proxy, example_value: torch.Tensor, **kw):
        super().__init__(**kw)
        self.proxy = proxy
        self.example_value = example_value

    def as_proxy(self):
        return self.proxy

    def as_fake(self):
        return self.example_value

    def python_type(self):
        return type(self.example_value) if not isinstance(self.example_value, torch._subclasses.FakeTensor) \
            else (torch.nn.Parameter if isinstance(self.example_value, torch.nn.Parameter) else torch.Tensor)

    def describe(self):
        ev = self.example_value
        return f"tensor {self.proxy.node.name} ({str(ev.dtype).replace('torch.', '')}{list(ev.shape)})"

    def _repr_body(self):
        return self.proxy.node.name

    def truth(self, tx):
        unimplemented("data-dependent branch: `if` on a tensor's value",
                      "use torch.where / torch.cond, or compute the condition outside the compiled function")

    def has_unpack_var_sequence(self, tx):
        return self.example_value.dim() > 0

    def unpack_var_sequence(self, tx):
        if self.example_value.dim() == 0:
            unimplemented("iterating over a 0-d tensor")
        # The graph reads row i as x[i] (upstream's nodes); the fake rows are made as Tensor.__iter__ makes the
        # real ones, by one unbind: multi-output views, which autograd refuses to use once x is written in place
        # (`for row in x: x.add_(1); x + row` raises in eager; tracing meets the same error: grad_leaves_of).
        rows = run_fake(tx, "call_function", torch.unbind, [self.as_fake()], {})
        return [wrap_fx_result(tx, tx.output.create_proxy("call_function", operator.getitem, (self.as_proxy(), i), {}),
                               row) for i, row in enumerate(rows)]

    # --- attributes ---------------------------------------------------------------------------------------
    def var_getattr(self, tx, name):
        ev = self.example_value
        if name == "shape":
            return self._constant_method(tx, "size", [], {})
        if name in CONSTANT_ATTRS:
            value = getattr(ev, name)
            return ConstantVariable(value() if callable(value) else value)
        if name in GRAPH_ATTRS:
            return call_graph_op(tx, "call_function", getattr, [self, ConstantVariable(name)], {})
        if name == "grad" and self.source is not None:
            from ..source import AttrSource
            from .builder import VariableBuilder
            return VariableBuilder(tx, AttrSource(self.source, "grad"))(tx.eval_source(self.source).grad)
        if name in ("__class__",):
            from .user_defined import UserDefinedClassVariable
            return UserDefinedClassVariable(self.python_type())
        if callable(getattr(torch.Tensor, name, None)):
            return BoundMethodVariable(self, name)
        if not self.has_attribute(tx, name):  # getattr(x, "missing", default) gives the default, as eager
            from ..exc import raise_observed_exception
            message = f"'{self.python_type().__name__}' object has no attribute '{name}'"
            raise_observed_exception(AttributeError, [ConstantVariable(message)], message)
        unimplemented(f"tensor attribute {name!r}", "read it outside the compiled function")

    def has_attribute(self, tx, name: str) -> bool:
        """Does the tensor have attribute ``name``: from its class, or in an input's own ``__dict__``?  A tensor the
        graph made has none of its own; an input's absence is guarded (HASATTR), as another call's tensor may
        carry one."""
        if any(name in vars(k) for k in self.python_type().__mro__):
            return True
        if self.source is None:
            return False
        from ..source import AttrSource
        present = hasattr(tx.eval_source(self.source), name)
        tx.output.add_guard("HASATTR", AttrSource(self.source, name), present)
        return present

    # --- methods ------------------------------------------------------------------------------------------
    def call_method(self, tx, name, args, kwargs):
        if name in DATA_DEPENDENT_METHODS:
            unimplemented(f"{DATA_DEPENDENT_METHODS[name]}: its value is not known while tracing", VALUE_HINT)
        if name in AUTOGRAD_STATE_METHODS:
            # it changes what autograd does with *this* tensor object; a graph node would compute nothing and
            # be dropped as dead code, so ``y.grad`` stayed None after backward.  Eager runs it on the real tensor.
            unimplemented(f"`Tensor.{name}()` changes the tensor's autograd state",
                          "the graph breaks there; call it outside the compiled function to keep one graph")
        if name == "requires_grad_":
            return self.requires_grad_(*args, **kwargs)
        if name in CONSTANT_METHODS:
            return self._constant_method(tx, name, args, kwargs)
        if name in ("type",) and not args and not kwargs:
            return ConstantVariable(self.example_value.type())
        if name == "__getitem__":
            if len(args) == 1 and is_sym_int(args[0]):
                # [Note: a symbolic int index]  ``x[x.shape[0] - 1]``: Tensor.__getitem__ turns a SymInt index into
                # a plain int (a guard ``s0 - 1 == 2``: one recompile per size); ``select`` keeps it symbolic and
                # only guards that it is in range.  Same result, same view, same IndexError when out of range.
                # The range is checked here, as a guard on the relation: some torch versions' fake ``select``
                # does not check a symbolic index (torch 2.11 compiled ``x[x.shape[0]]`` to a view past the end).
                index, size = args[0].sym_num, self.example_value.shape[0] if self.example_value.dim() else 0
                if not (-size <= index) or not (index < size):
                    unimplemented(f"index {index} is out of range for a dimension of size {size}",
                                  "eager raises the IndexError")
                return call_graph_op(tx, "call_function", torch.select, [self, ConstantVariable(0), *args], {})
            if len(args) == 1 and _leading_sym_int(args[0]):  # ``x[n - 1, 1:]`` is ``x[n - 1][1:]``: as above
                first, rest = args[0].items[0], args[0].items[1:]
                row = self.call_method(tx, "__getitem__", [first], {})
                return row.call_method(tx, "__getitem__", [type(args[0])(list(rest))], {}) if rest else row
            return call_graph_op(tx, "call_function", operator.getitem, [self, *args], {})
        if name == "__setitem__":
            call_graph_op(tx, "call_function", operator.setitem, [self, *args], {})
            return ConstantVariable(None)
        result = call_graph_op(tx, "call_method", name, [self, *args], kwargs)
        if is_inplace_method(name) and isinstance(result, TensorVariable):
            return self  # x.add_(y) returns x itself
        return result

    def requires_grad_(self, requires_grad: VariableTracker | None = None) -> VariableTracker:
        """``x.requires_grad_(flag)``, as upstream's ``method_requires_grad_``: a no-op when ``x`` already has
        that flag, else a graph break -- the flag of the tensor object itself changes (an input's, seen by the
        caller), which a graph cannot do (AOTAutograd refused ``requires_grad_(False)`` of an input leaf)."""
        flag = True if requires_grad is None else requires_grad.as_python_constant()
        if bool(flag) == self.example_value.requires_grad:
            return self
        unimplemented("`Tensor.requires_grad_()` changes the tensor's requires_grad flag",
                      "the graph breaks there; set it outside the compiled function to keep one graph")

    def _constant_method(self, tx, name, args, kwargs):
        if name == "__len__":
            if self.example_value.dim() == 0:
                unimplemented("len() of a 0-d tensor")
            name, args = "size", [ConstantVariable(0)]
        a = [x.as_python_constant() for x in args]
        k = {n: v.as_python_constant() for n, v in kwargs.items()}
        value = getattr(self.example_value, name)(*a, **k)
        if is_symbolic(value):  # a symbolic size: it stays a node of the graph (sym_node.py)
            return call_graph_op(tx, "call_method", name, [self, *args], kwargs)
        value = concrete(value)
        if isinstance(value, torch.Size):
            from .lists import SizeVariable
            return SizeVariable([ConstantVariable(int(s)) for s in value])
        if isinstance(value, tuple):
            from .lists import TupleVariable
            return TupleVariable([ConstantVariable(v) for v in value])
        return ConstantVariable(value)


def is_inplace_method(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__")


# --------------------------------------------------------------------------------------------------------------
# Putting an operation in the graph.
# --------------------------------------------------------------------------------------------------------------
def is_sym_int(vt: VariableTracker) -> bool:
    from .sym_node import SymNodeVariable  # sym_node imports this module
    return isinstance(vt, SymNodeVariable) and vt.python_type() is int


def _leading_sym_int(index: VariableTracker) -> bool:
    """An index tuple that starts with a symbolic int and holds only basic indices after it (ints, slices, None,
    ``...``): ``x[i, rest]`` is then ``x[i][rest]`` (a tensor or list among ``rest`` is advanced indexing: left
    to ``getitem``)."""
    from .lists import SliceVariable, TupleVariable
    if type(index) is not TupleVariable or not index.items or not is_sym_int(index.items[0]):
        return False
    return all(isinstance(v, SliceVariable) or is_sym_int(v) or
               isinstance(v, ConstantVariable) and (v.value is None or v.value is Ellipsis or type(v.value) is int)
               for v in index.items[1:])


def grad_leaves_of(fake_args: list) -> list:
    """The tensors among an op's arguments that are leaves requiring grad (see ``check_no_new_grad_leaf``).

    Autograd refuses some tensors outright: a row of ``for row in x`` (a view made by ``unbind``, which returns
    several views) once ``x`` was written in place.  Eager raises its RuntimeError at the first use of the row;
    the fake tensor raises it here, reading ``is_leaf``.  The whole frame runs eagerly, so Python raises it: at a
    graph break the row would be the graph's ``x[i]``, which autograd accepts (TensorVariable.unpack_var_sequence)."""
    try:
        return [a for a in fake_args if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf]
    except RuntimeError as e:
        refuse_frame(f"autograd refuses an argument: {str(e).splitlines()[0][:200]}", "eager raises this error")


def call_graph_op(tx, kind: str, target: Any, args: list, kwargs: dict) -> VariableTracker:
    """Add one FX node and run it on fake tensors; wrap what it returns (``wrap_fx_proxy`` upstream)."""
    proxy_args, proxy_kwargs = [a.as_proxy() for a in args], {k: v.as_proxy() for k, v in kwargs.items()}
    fake_args, fake_kwargs = [a.as_fake() for a in args], {k: v.as_fake() for k, v in kwargs.items()}
    grad_leaves = grad_leaves_of(fake_args)
    check_bool_subtraction(target, fake_args)
    check_in_place_result_type(target, fake_args)
    check_matmul_dtypes(tx, target, fake_args)
    if writes_in_place(target, kwargs) or draws_random(target):
        tx.output.side_effects.writes += 1  # see [Note: eager generators]
    example = run_fake(tx, kind, target, fake_args, fake_kwargs)
    check_no_new_grad_leaf(target, example, grad_leaves)
    proxy = tx.output.create_proxy(kind, target, tuple(proxy_args), proxy_kwargs)
    return wrap_fx_result(tx, proxy, example)


IN_PLACE_OPERATORS = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
                      operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                      operator.ilshift, operator.irshift, operator.imatmul}


def writes_in_place(target: Any, kwargs: dict) -> bool:
    """``x.add_(1)``, ``x[i] = v``, ``x += y``, ``torch.relu_(x)``, ``torch.add(a, b, out=c)``: a tensor changes."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return ("out" in kwargs or target in IN_PLACE_OPERATORS or
            isinstance(name, str) and name.endswith("_") and not name.endswith("__"))


RANDOM_OPS = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal",
              "bernoulli", "multinomial", "poisson", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
              "feature_alpha_dropout", "rrelu", "native_dropout"}


def draws_random(target: Any) -> bool:
    """``torch.randn``, ``F.dropout``...: the op advances the global RNG, so when it runs changes what it draws
    (and what later draws get).  Dropout counts even in eval mode: at worst a needless graph break."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return name in RANDOM_OPS


SUBTRACTIONS = {operator.sub, operator.isub, torch.sub, torch.subtract, torch.rsub, "sub", "sub_", "subtract",
                "subtract_", "rsub", "__sub__", "__isub__", "__rsub__"}


def check_bool_subtraction(target: Any, fake_args: list) -> None:
    """Eager refuses ``x - True`` and ``x - mask`` (a bool operand of a subtraction: ``sub_check`` in ATen); the
    meta function fake tensors run checks only two bool tensors.  Traced, the graph would compute ``x - 1``
    (a backend lowers the op without the check), so it is a graph break: eager raises the error itself."""
    try:
        if target not in SUBTRACTIONS:
            return
    except TypeError:  # an unhashable target: not a subtraction
        return
    bools = [a for a in fake_args[:2] if type(a) is bool or isinstance(a, torch.Tensor) and a.dtype is torch.bool]
    if len(bools) == 1:
        unimplemented("subtraction with a bool operand (eager raises: use ~ or logical_not for masks)")


IN_PLACE_MULTIPLICATIONS = {operator.imul, torch.Tensor.mul_, torch.Tensor.multiply_, torch.Tensor.addcmul_,
                            "mul_", "multiply_", "__imul__", "addcmul_"}


def check_in_place_result_type(target: Any, fake_args: list) -> None:
    """Eager refuses ``i.mul_(1.5)`` on an integer ``i`` (the result type, float, cannot be cast back to
    ``i``'s dtype: ``canCast`` in ATen's TensorIterator), and so do the fake kernels of ``add_``, ``div_`` and
    the rest, but not ``mul_``'s (nor ``addcmul_``'s).  Traced, the graph would compute the float product and
    copy it back truncated, so it is a graph break: eager raises the error itself."""
    try:
        if target not in IN_PLACE_MULTIPLICATIONS:
            return
    except TypeError:  # an unhashable target: not one of these
        return
    self, others = fake_args[0], fake_args[1:3 if target in (torch.Tensor.addcmul_, "addcmul_") else 2]
    if not isinstance(self, torch.Tensor) or not all(isinstance(o, (torch.Tensor, bool, int, float, complex))
                                                      for o in others):
        return
    result = self.dtype
    for other in others:
        result = torch.promote_types(result, torch.result_type(self, other))
    if not torch.can_cast(result, self.dtype):
        unimplemented(f"in-place op whose result type {result} cannot be cast to {self.dtype} (eager raises)")


MATMULS = {operator.matmul, operator.imatmul, torch.matmul, torch.mm, torch.bmm, torch.mv, torch.addmm, torch.addmv,
           torch.nn.functional.linear, "matmul", "mm", "bmm", "mv", "addmm", "addmv", "__matmul__", "__rmatmul__"}


def check_matmul_dtypes(tx, target: Any, fake_args: list) -> None:
    """Eager refuses ``a @ b`` when the two tensors' dtypes differ (``expected m1 and m2 to have the same dtype``;
    ``linear`` and ``addmm`` check their bias too), and the meta functions fake tensors run for ``mm``, ``bmm``,
    ``mv`` and ``addmm`` do not: the float64 result would let a compiled graph raise only when it runs, past the
    user's ``except``, or not at all when its result is dead.  So it is a graph break: eager raises the error.
    Under autocast the operands are cast to one dtype first: nothing to refuse."""
    if any(enabled for enabled, _ in tx.output.autocast_state):
        return
    try:
        if target not in MATMULS:
            return
    except TypeError:  # an unhashable target: not one of these
        return
    dtypes = {a.dtype for a in fake_args[:3] if isinstance(a, torch.Tensor)}
    if len(dtypes) > 1:
        unimplemented(f"matrix product of tensors of dtypes {sorted(map(str, dtypes))} (eager raises)")


AUTOGRAD_STATE_METHODS = frozenset({"retain_grad", "register_post_accumulate_grad_hook"})


def check_no_new_grad_leaf(target: Any, example: Any, grad_leaves: list) -> None:
    """Refuse an op that makes a new tensor requiring grad of its own: ``torch.ones(2, requires_grad=True)``,
    ``torch.zeros(3).requires_grad_()``.  Such a leaf of the autograd graph cannot be an intermediate of a compiled
    graph: a backend that compiles for inference (no *input* requires grad) would return results without
    ``grad_fn``.  As upstream ("factory functions that return tensors that require grad", ``requires_grad_``), it
    is a graph break: eager makes the tensor.  ``grad_leaves``: the arguments that were such leaves already (an
    in-place op on a parameter returns it: allowed).  A view is no new leaf either: under ``no_grad`` a view of a
    parameter (``self.b1[:, None]``) is a leaf that requires grad because its base does.  (Views are told apart
    first: ``is_leaf`` of a view made under ``no_grad`` whose base was then written in place raises -- eager never
    asks -- an internal error in ``y[:2].mul_(2)`` under ``no_grad``, fuzz round 12.)"""
    if isinstance(example, torch.Tensor) and example.requires_grad and not example._is_view() and \
            example.is_leaf and not any(example is a for a in grad_leaves):
        what = getattr(target, "__name__", target)
        unimplemented(f"`{what}` makes a tensor that requires grad inside the compiled function",
                      "create it outside the compiled function (or as an nn.Parameter of a module)")


def _symbolic_dispatch(args: list, kwargs: dict):
    """[Note: composite ops on symbolic sizes]  An op whose C++ kernel is composite (``F.pad`` -> ``aten.pad`` ->
    ``constant_pad_nd``, ``split``, ``max_pool1d``, ``upsample_nearest1d``) reads ``self.sizes()`` as plain ints;
    on a fake tensor of size ``s0`` that is ``int(s0)``, which *specialises* the symbol (a guard ``s0 == 3``): one
    graph per size under ``dynamic=True``.  The Python dispatcher routes such ops to their Python (SymInt-aware)
    decompositions instead, as upstream's ``get_fake_value`` does.  Only where a size is a symbol: static traces
    keep the C++ kernels (faster, and unchanged)."""
    def symbolic(v):
        return is_symbolic(v) or isinstance(v, torch.Tensor) and is_symbolic(tuple(v.shape))
    leaves = torch.utils._pytree.tree_leaves((args, kwargs))
    if any(symbolic(v) for v in leaves):
        return enable_python_dispatcher()
    return contextlib.nullcontext()


def run_fake(tx, kind: str, target: Any, args: list, kwargs: dict) -> Any:
    output = tx.output
    try:
        with output.fake_mode, no_dispatch_cache(output.fake_mode), torch.set_grad_enabled(output.grad_enabled), \
                tracing_autocast(output), _symbolic_dispatch(args, kwargs):
            if kind == "call_method":
                result = getattr(args[0], target)(*args[1:], **kwargs)
            else:
                result = target(*args, **kwargs)
    except (DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode) as e:
        what = getattr(target, "__name__", target)
        unimplemented(f"data-dependent output shape: `{what}` returns a shape that depends on tensor values ({e})",
                      "keep shapes fixed: use masks with torch.where, or fixed-size top-k/scatter instead of "
                      "boolean indexing / nonzero")
    except Exception as e:  # noqa: BLE001 - eager will raise the real error, or we learn what to support
        what = getattr(target, "__name__", target)
        unimplemented(f"`{what}` failed on fake tensors: {type(e).__name__}: {str(e).splitlines()[0][:200]}",
                      "if eager raises the same error, fix the program; otherwise this op is not supported yet")
    if free_unbacked_symbols(result):
        # With a ShapeEnv, fake nonzero()/x[mask] return a size 'u0' known only at run time.  We keep those
        # data-dependent ops as graph breaks (upstream's default, capture_dynamic_output_shape_ops=False).
        what = getattr(target, "__name__", target)
        unimplemented(f"data-dependent output shape: `{what}` returns a shape that depends on tensor values",
                      "keep shapes fixed: use masks with torch.where, or fixed-size top-k/scatter instead of "
                      "boolean indexing / nonzero")
    return result


@contextlib.contextmanager
def no_dispatch_cache(fake_mode):
    """Run fake ops without FakeTensorMode's dispatch cache (see [Note: no fake dispatch cache while tracing]).

    [Note: no fake dispatch cache while tracing]  The cache is meant to be invisible: a hit rebuilds the output
    that dispatching would have made (``fake_tensor_cache_crosscheck_enabled`` checks exactly that).  But each
    translation has its own ShapeEnv (see [Note: one ShapeEnv per translation]), and an op on symbolic sizes is
    cached on that ShapeEnv, so a translation's ops mostly miss, and a miss costs the dispatch plus building the
    entry plus a second, synthesised output to validate it.  On the tutorial MoE's first call: 228 hits, 726
    misses; without the cache, translation was 12-15% faster.  mininductor's AOT does the same ([Note: no fake
    dispatch cache in AOT] in ``mininductor/aot_autograd.py``)."""
    if not hasattr(fake_mode, "cache_enabled"):  # a torch without the cache: nothing to turn off
        yield
        return
    prior, fake_mode.cache_enabled = fake_mode.cache_enabled, False
    try:
        yield
    finally:
        fake_mode.cache_enabled = prior


def _item_proxy(proxy: torch.fx.Proxy, i: int) -> torch.fx.Proxy:
    item = proxy[i]
    for key in ("stack_trace", "user_frame"):  # the user line that read the size, for the printed graph
        if key in proxy.node.meta:
            item.node.meta[key] = proxy.node.meta[key]
    return item


def wrap_symbolic(tx, proxy: torch.fx.Proxy, example: Any) -> VariableTracker:
    """A node whose value is a symbolic int (or a size/tuple holding some): items become SymNodeVariables."""
    from .lists import SizeVariable, TupleVariable
    from .sym_node import wrap_sym
    if isinstance(example, (torch.Size, tuple, list)):
        proxy.node.meta["example_value"] = example
        items = [wrap_sym(_item_proxy(proxy, i), v) for i, v in enumerate(example)]
        return SizeVariable(items) if isinstance(example, torch.Size) else TupleVariable(items)
    return wrap_sym(proxy, example)


def wrap_fx_result(tx, proxy: torch.fx.Proxy, example: Any) -> VariableTracker:
    """Wrap the fake result of a node: tensors, tuples of tensors, structseqs (topk), or Python values."""
    from .lists import ListVariable, NamedTupleVariable, SizeVariable, TupleVariable

    if isinstance(example, torch.Tensor):
        proxy.node.meta["example_value"] = example
        return TensorVariable(proxy, example)
    if is_symbolic(example):
        return wrap_symbolic(tx, proxy, example)
    if isinstance(example, (tuple, list)) and any(isinstance(e, torch.Tensor) for e in example):
        proxy.node.meta["example_value"] = example
        items = [wrap_fx_result(tx, proxy[i], e) for i, e in enumerate(example)]
        if isinstance(example, list):
            return ListVariable(items)
        if type(example) is tuple:
            return TupleVariable(items)
        return NamedTupleVariable(items, type(example))
    # A Python value: the node computed nothing the graph needs.
    tx.output.remove_node_if_pure(proxy.node)
    example = concrete(example)
    if isinstance(example, torch.Size):
        return SizeVariable([ConstantVariable(int(s)) for s in example])
    from .builder import wrap_constant_result
    return wrap_constant_result(tree_map(lambda v: v, example))
