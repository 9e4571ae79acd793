"""ATen op -> IR: ``register_lowering`` and the pointwise and creation lowerings
(mirrors ``torch/_inductor/lowering.py``; views live in ``view_lowering.py``, reductions in
``reduction_lowering.py``, matmuls and convolution in ``extern_lowering.py``, indexing in ``index_lowering.py``,
``cat`` and padding in ``pad_lowering.py``).

A lowering takes ``TensorBox``es and Python scalars and returns a ``TensorBox`` (or a list of them)::

    @register_lowering(aten.sin)
    def sin(x): return pointwise([x], ops.sin)   # Pointwise(inner_fn=lambda i: ops.sin(load_x(i)))

Output dtypes come from the FX node's ``meta['val']`` (what eager would return), so type promotion is exact.
fp16/bf16 values are computed in fp32 by codegen and rounded where eager would round (``ops.to_dtype``).
An op with no lowering becomes a ``FallbackKernel`` in ``graph.py``: counted, never an error.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from . import config, ir
from .indexing import as_size, is_float_size, is_symbolic, known_true
from .ir import Pointwise, TensorBox
from .virtualized import V, ops

aten, prims = torch.ops.aten, torch.ops.prims
lowerings: dict[Any, Callable] = {}


def register_lowering(*targets) -> Callable:
    """Register ``fn`` for every overload of each op packet (or for the given overloads)."""
    def decorator(fn):
        for target in targets:
            if isinstance(target, torch._ops.OpOverloadPacket):
                for name in target.overloads():
                    if name == "out" or name.endswith("_out"):  # out= variants write an argument: fall back
                        continue
                    lowerings[getattr(target, name)] = fn
            else:
                lowerings[target] = fn
        return fn
    return decorator


# ----------------------------------------------------------------------------------------- helpers
def meta_val():
    node = V.graph.current_node if V.graph is not None else None
    return None if node is None else node.meta.get("val")


def out_dtype(default: torch.dtype | None = None) -> torch.dtype:
    val = meta_val()
    if isinstance(val, torch.Tensor):
        return val.dtype
    if isinstance(val, (list, tuple)) and val and isinstance(val[0], torch.Tensor):
        return val[0].dtype
    assert default is not None, "no meta['val'] to read the output dtype from"
    return default


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def broadcast_shapes(shapes: Sequence[Sequence[int]]) -> list:
    """Eager's broadcasting, on int or symbolic sizes. Two different sizes broadcast only where the ShapeEnv
    knows them equal for every size: the trace guarded that the program needed them equal (``Eq(Min(s27, s77),
    s17)``: a diagonal times a vector), and the plainer of the two is kept. Else differing means an error."""
    shapes = [list(s) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        sizes = [s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0]
        others = sorted({x for x in sizes if not (isinstance(x, int) and x == 1)}, key=_plainness)
        if any(not _known_equal(others[0], x) for x in others[1:]):
            raise RuntimeError(f"cannot broadcast sizes {sizes}")
        out.append(others[0] if others else 1)
    return out


def _plainness(size) -> tuple[int, str]:
    """Sort key: ints first, then the expression with the fewest operations (a symbol before a ``Min``)."""
    return (0, str(size)) if isinstance(size, int) else (1 + sympy.count_ops(size), str(size))


def _known_equal(a, b) -> bool:
    """Whether two sizes are equal for every size the graph serves (``statically_true`` of ``Eq``)."""
    return a == b or (is_symbolic(a) or is_symbolic(b)) and known_true(sympy.Eq(a, b))


def expand_to(x: TensorBox, size: Sequence[int]) -> ir.IRNode:
    from .view_lowering import expand
    return x if list(x.get_size()) == list(size) else expand(x, size)


def promote(args) -> torch.dtype:
    """Eager's type promotion of ``args`` (tensors as meta tensors, so 0-dim tensors rank like eager)."""
    from .indexing import size_hint
    metas = [torch.empty([size_hint(s) for s in a.get_size()], dtype=a.get_dtype(), device="meta")
             if isinstance(a, ir.IRNode) else _scalar_example(a) for a in args]
    result = metas[0] if isinstance(metas[0], torch.Tensor) else torch.tensor(metas[0]).dtype
    for m in metas[1:]:
        result = torch.result_type(torch.empty((), dtype=result, device="meta") if isinstance(result, torch.dtype)
                                   else result, m)
    return result if isinstance(result, torch.dtype) else result.dtype


def _scalar_example(a):
    """A symbolic size used as a scalar (``x * x.shape[0]``) promotes like a Python int."""
    import sympy
    if isinstance(a, sympy.Basic):
        return 2.0 if is_float_size(a) else 2  # ``1.0 / s77`` promotes like a Python float
    return a


def device_of(args) -> torch.device:
    """The device of the first tensor argument (a graph runs on one device; CPU scalars are moved to it)."""
    for a in args:
        if isinstance(a, ir.IRNode):
            return a.get_device()
    return V.graph.device


def origins_of(args) -> set:
    out = set()
    for a in args:
        if isinstance(a, ir.IRNode):
            storage = a.storage() if isinstance(a, TensorBox) else None
            if storage is not None and not storage.is_realized():
                out |= storage.origins
    return out


def pointwise(args: Sequence, fn: Callable, dtype: torch.dtype, compute_dtype: torch.dtype | None = None,
              cast_inputs: bool = True) -> TensorBox:
    """Broadcast ``args`` (TensorBoxes and scalars) and apply ``fn`` elementwise (``fn`` takes ops values)."""
    compute_dtype = compute_dtype or dtype
    shape = broadcast_shapes([a.get_size() for a in args if isinstance(a, ir.IRNode)])
    loaders = [_make_arg_loader(a, shape, compute_dtype if cast_inputs else None) for a in args]

    def inner_fn(index):
        result = fn(*[load(index) for load in loaders])
        return ops.to_dtype(result, dtype) if compute_dtype != dtype or _emulate_cast(dtype) else result

    return TensorBox.create(Pointwise(device_of(args), dtype, inner_fn, shape, origins=origins_of(args)))


def _emulate_cast(dtype: torch.dtype) -> bool:
    """Round a low-precision result after its op, as eager does (``config.emulate_precision_casts``)."""
    return dtype in (torch.float16, torch.bfloat16) and config.emulate_precision_casts


def _make_arg_loader(a, shape, dtype):
    if isinstance(a, ir.IRNode):
        load = expand_to(a, shape).make_loader()
        if dtype is None or a.get_dtype() == dtype:
            return load
        return lambda index: ops.to_dtype(load(index), dtype)
    const_dtype = dtype or (torch.float32 if isinstance(a, float) or is_float_size(a) else torch.bool
                            if isinstance(a, bool) else torch.int64)
    import sympy
    if isinstance(a, sympy.Basic):  # a symbolic size as a scalar: read at run time, like an index expression
        return lambda index: ops.index_expr(a, const_dtype)
    return lambda index: ops.constant(a, const_dtype)


def _dtype_for(args, kind: str) -> tuple[torch.dtype, torch.dtype]:
    """(output dtype, compute dtype) of a pointwise op of ``kind`` on ``args``."""
    out = out_dtype(default=None if meta_val() is not None else _guess_dtype(args, kind))
    if kind == "compare":
        return out, promote(args)
    if kind == "logical":
        return out, torch.bool
    return out, out


def _guess_dtype(args, kind):
    if kind in ("compare", "logical"):
        return torch.bool
    d = promote(args)
    return d if kind != "float" or d.is_floating_point else torch.get_default_dtype()


def make_pointwise_lowering(op_name: str, kind: str = "default") -> Callable:
    def lowering(*args, **kwargs):
        if kwargs:  # an overload with options we do not model (round(decimals=2)...): fall back
            raise NotImplementedError(f"{op_name} with {sorted(kwargs)}")
        _refuse_what_eager_refuses(op_name, args)
        out, compute = _dtype_for(args, kind)
        return pointwise(args, getattr(ops, op_name) if isinstance(op_name, str) else op_name, out, compute)
    return lowering


_UNARY = ["abs", "neg", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos",
          "tan", "tanh", "sigmoid", "erf", "erfc", "erfinv", "lgamma", "asin", "acos", "atan", "sinh", "cosh",
          "asinh", "acosh", "atanh", "floor", "ceil", "trunc", "round", "sign", "reciprocal", "relu", "bitwise_not"]
_BINARY = ["maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "bitwise_and", "bitwise_or", "bitwise_xor",
           "copysign", "bitwise_left_shift", "bitwise_right_shift"]  # remainder, fmod: _remainder_lowering
_COMPARE = ["eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "signbit"]
_INTEGER_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                 "bitwise_right_shift"}
# Dtypes eager's kernels do not implement ('"hypot_cpu" not implemented for 'Short''), though the trace accepts
# them: a lowering would compute a value (or fail to compile a kernel), so the op falls back and eager raises.
_FLOAT_ONLY = {"hypot"}
_NO_BOOL = {"remainder", "fmod", "floor", "ceil", "trunc", "round", "hypot"}


def _refuse_what_eager_refuses(op_name: str, args) -> None:
    dtypes = [a.get_dtype() for a in args if isinstance(a, ir.IRNode)]
    if op_name in _INTEGER_ONLY and any(d.is_floating_point for d in dtypes):
        # '"bitwise_and_cpu" not implemented for 'Float'': the kernel failed to compile
        refused = "a floating-point"
    elif op_name in _FLOAT_ONLY and not any(d.is_floating_point for d in dtypes):
        refused = "an integer"
    elif op_name in _NO_BOOL and torch.bool in dtypes:
        refused = "a bool"
    else:
        return
    raise NotImplementedError(f"{op_name} of {refused} tensor (eager raises)")


_LOGICAL = ["logical_and", "logical_or", "logical_xor", "logical_not"]

for _name in _UNARY + _BINARY:
    for _ns in (aten, prims):
        if hasattr(_ns, _name):
            register_lowering(getattr(_ns, _name))(make_pointwise_lowering(_name))
# ``a << s`` traces to the dunder overloads, not to bitwise_left_shift: the same op (integers only in eager)
register_lowering(aten.__lshift__)(make_pointwise_lowering("bitwise_left_shift"))
register_lowering(aten.__rshift__)(make_pointwise_lowering("bitwise_right_shift"))


@register_lowering(aten.nextafter)
def nextafter(a, b):
    out, compute = _dtype_for((a, b), "default")
    if not out.is_floating_point:  # eager refuses integers: the fallback raises its error
        raise NotImplementedError(f"nextafter of {out}")
    # fp16/bf16 values live in fp32 registers: the op steps their bits ([Note: nextafter of fp16 and bf16])
    storage = out if out in (torch.float16, torch.bfloat16) else None
    return pointwise([a, b], lambda x, y: ops.nextafter(x, y, storage), out, compute)


@register_lowering(aten.abs)
def abs_(x):
    if x.get_dtype() == torch.bool:  # eager: '"abs_cpu" not implemented for 'Bool''; the fallback raises it
        raise NotImplementedError("abs of a bool tensor (eager raises)")
    return make_pointwise_lowering("abs")(x)


def _rounding(name: str) -> Callable:
    float_lowering = make_pointwise_lowering(name)

    def lowering(x, *args, decimals=0):
        if args or decimals:
            raise NotImplementedError(f"{name} to {decimals or args} decimals")
        _refuse_what_eager_refuses(name, [x])
        if not x.get_dtype().is_floating_point:  # an integer is already whole (tl.floor takes floats only)
            return pointwise([x], lambda v: v, x.get_dtype())
        return float_lowering(x, *args)
    return lowering


for _name in ("floor", "ceil", "trunc", "round"):
    register_lowering(getattr(aten, _name))(_rounding(_name))
for _name in _COMPARE:
    for _ns in (aten, prims):
        if hasattr(_ns, _name):
            register_lowering(getattr(_ns, _name))(make_pointwise_lowering(_name, "compare"))
for _name in _LOGICAL:
    register_lowering(getattr(aten, _name))(make_pointwise_lowering(_name, "logical"))
register_lowering(aten.square)(lambda x: make_pointwise_lowering(lambda a: ops.mul(a, a))(x))
register_lowering(prims.neg, prims.abs)(make_pointwise_lowering("neg"))
lowerings[prims.abs.default] = make_pointwise_lowering("abs")


def _low_precision(dtype: torch.dtype) -> bool:
    return dtype in (torch.float16, torch.bfloat16)


def _scalar_in_fp32(op: str, args) -> bool:
    """Whether eager's fp16/bf16 kernel for ``op`` reads its Python scalar operand (and ``alpha``) in fp32.

    [Note: Python scalars in fp16/bf16 ops]  Eager converts a scalar operand to the tensor's type
    (``iter.scalar_value<scalar_t>``), so ``x16 - 2049`` subtracts 2048 and ``x16 % 0.3`` divides by 0.2998: an
    fp16/bf16 ``ops.constant`` is rounded (``constant_repr``).  Some kernels have a scalar fast path that reads
    it in fp32 (``opmath``) instead and round only their result: mul and div on both devices (CPU:
    ``original_scalar_value<opmath_t>``; CUDA: ``opmath_symmetric_gpu_kernel_with_scalars``), and add/sub and
    their ``alpha`` on CUDA (the ufunc's ``CUDAFunctorOnOther``); measured on CPU, read from ATen for CUDA.
    The CPU's fast path also takes a 0-dim tensor as mul's or div's second operand (``x16 * torch.tensor(0.1)``
    multiplies by the fp32 0.1)."""
    cuda = device_of(args).type == "cuda"
    if op in ("mul", "div") and not cuda and isinstance(args[1], ir.IRNode) and len(args[1].get_size()) == 0:
        return True
    import sympy
    if not any(isinstance(a, (int, float, sympy.Basic)) for a in args):  # a size is a Python number too
        return False
    return op in ("mul", "div") or (op in ("add", "sub") and cuda)


def _rounded_scalar(value, dtype: torch.dtype):
    """A Python scalar as eager's kernel converts it to a low-precision tensor's type."""
    return float(torch.tensor(float(value), dtype=dtype)) if _low_precision(dtype) else value


@register_lowering(aten.mul, prims.mul)
def mul(a, b):
    out, compute = _dtype_for((a, b), "default")
    if _low_precision(out) and _scalar_in_fp32("mul", (a, b)):  # [Note: Python scalars in fp16/bf16 ops]
        compute = torch.float32
    return pointwise([a, b], ops.mul, out, compute)


def _refuse_bool_sub(*args) -> None:
    """Eager refuses ``x - True`` and ``x - mask`` ("Subtraction ... with a bool tensor is not supported"), but
    only in its CPU/CUDA kernel: the trace accepts them. The fallback raises eager's error."""
    if any(isinstance(a, bool) or (isinstance(a, ir.IRNode) and a.get_dtype() == torch.bool) for a in args):
        raise NotImplementedError("sub with a bool operand (eager raises)")


def _add_sub(name: str) -> Callable:
    def lowering(a, b, alpha=1):
        if name == "sub":
            _refuse_bool_sub(a, b)
        out, compute = _dtype_for((a, b), "default")
        if name == "add" and out == torch.bool:
            # eager's True + True is True; Triton's int1 add wraps to False (Inductor lowers it as logical_or too)
            return make_pointwise_lowering("logical_or", "logical")(a, b)
        if alpha == 1:
            return pointwise([a, b], getattr(ops, name), out, compute)
        return _axpy(a, b, alpha, lambda x, y: getattr(ops, name)(x, y), out, compute, name)
    return lowering


def _axpy(a, b, alpha, combine: Callable, out: torch.dtype, compute: torch.dtype, name: str) -> TensorBox:
    """``combine(a, b * alpha)`` as one op, rounded once: eager's add/sub/rsub with ``alpha`` is one kernel, whose
    fp16/bf16 alpha (and scalar operand) is converted to the tensor's type on the CPU and read in fp32 on CUDA
    ([Note: Python scalars in fp16/bf16 ops])."""
    if _low_precision(out):
        if not _scalar_in_fp32(name, (a, b, float(alpha))):
            alpha = _rounded_scalar(alpha, out)
            a, b = (_rounded_scalar(v, out) if isinstance(v, (int, float)) else v for v in (a, b))
        compute = torch.float32
    return pointwise([a, b], lambda x, y: combine(x, ops.mul(y, ops.constant(alpha, compute))), out, compute)


register_lowering(aten.add, prims.add)(_add_sub("add"))
register_lowering(aten.sub, prims.sub)(_add_sub("sub"))


@register_lowering(aten.rsub)
def rsub(a, b, alpha=1):
    _refuse_bool_sub(a, b)
    out, compute = _dtype_for((a, b), "default")
    return _axpy(b, a, alpha, ops.sub, out, compute, "sub")


@register_lowering(aten._assert_async)
def assert_async(cond, msg: str = "Expected Tensor with single nonzero value, but got zero") -> None:
    """``torch._assert_async(cond, msg)``: raise ``RuntimeError(msg)`` unless the one-element ``cond`` is nonzero
    -- a device-side assert on CUDA, as eager's.  Decompositions check values with it (``one_hot``'s classes,
    ``binary_cross_entropy``'s probabilities); as a fallback it would cost a host sync and a fallback each.
    Lowered like Inductor's, to a kernel with ``ops.device_assert_async`` ([Note: value checks] in
    codegen/triton.py): usually the epilogue of the ``all`` reduction that computes ``cond``."""
    def check(c):
        ops.device_assert_async(ops.to_dtype(c, torch.bool), msg)
        return c
    checked = pointwise([cond], check, cond.get_dtype())
    V.graph.assertions.append(checked.storage().realize())


@register_lowering(aten.pow, prims.pow)
def pow_(a, b):
    out, compute = _dtype_for((a, b), "default")
    if isinstance(b, int) and b < 0 and not is_float(out):
        raise NotImplementedError("integer pow with a negative exponent (eager raises)")
    if isinstance(b, (int, float)) and not isinstance(a, (int, float)) and float(b).is_integer() and abs(b) <= 64:
        return pointwise([a], lambda x: _pow_int(x, int(b), compute), out, compute)
    if isinstance(b, float) and b == 0.5:
        return pointwise([a], ops.sqrt, out, compute)
    if not is_float(out):  # ops.pow is exp(b*log(a)): float-only, so like Inductor an integer pow runs eagerly
        raise NotImplementedError("integer pow with a tensor or large exponent")
    return pointwise([a, b], ops.pow, out, compute)


def _pow_int(x, n: int, dtype):
    """x**n by repeated squaring: exact for integers and negative bases, like eager."""
    if n == 0:
        return ops.constant(1, dtype)
    result, base, k = None, x, abs(n)
    while k:
        if k & 1:
            result = base if result is None else ops.mul(result, base)
        k >>= 1
        if k:
            base = ops.mul(base, base)
    return ops.reciprocal(result) if n < 0 else result


@register_lowering(aten.where, prims.where)
def where(cond, a, b):
    out = out_dtype(default=promote([a, b]))
    return pointwise([cond, a, b], lambda c, x, y: ops.where(c, ops.to_dtype(x, out), ops.to_dtype(y, out)),
                     out, cast_inputs=False)


@register_lowering(aten.clamp, aten.clamp_min, aten.clamp_max, aten.hardtanh)
def clamp(x, min=None, max=None):
    target = V.graph.current_node.target if V.graph.current_node is not None else None
    if target in (aten.clamp_max.default, aten.clamp_max.Tensor):
        min, max = None, min
    out, compute = _dtype_for((x,), "default")
    args = [x] + [v for v in (min, max) if v is not None]

    def fn(v, *bounds):
        bounds = list(bounds)
        if min is not None:
            v = ops.maximum(v, bounds.pop(0))
        if max is not None:
            v = ops.minimum(v, bounds.pop(0))
        return v
    return pointwise(args, fn, out, compute)


@register_lowering(aten._to_copy, prims.convert_element_type, aten.to)
def to_copy(x, dtype=None, *args, **kwargs):
    if isinstance(dtype, torch.device) or kwargs.get("device") not in (None, x.get_device()):
        raise NotImplementedError("device copies fall back")
    dtype = dtype if isinstance(dtype, torch.dtype) else kwargs.get("dtype") or x.get_dtype()
    if dtype == x.get_dtype():
        return clone(x)
    return pointwise([x], lambda v: ops.to_dtype(v, dtype), dtype, cast_inputs=False)


@register_lowering(aten.clone, aten.contiguous, prims.clone)
def clone(x, *args, **kwargs):
    return pointwise([x], lambda v: v, x.get_dtype())


@register_lowering(prims.copy_strided)
def copy_strided(x, stride):
    """A copy laid out with ``stride`` (the decomposition of an op whose output follows an input's layout,
    ``torch.lerp`` of a column-major input)."""
    out = clone(x)
    out.storage().realize([as_size(s) for s in stride])
    return out


@register_lowering(aten.alias, aten.detach, aten.lift_fresh_copy, aten.lift_fresh, prims.view_of)
def alias(x, *args):
    return x


@register_lowering(aten.copy)
def copy(dst, src, non_blocking=False):
    dtype = dst.get_dtype()
    src = expand_to(src, dst.get_size()) if isinstance(src, ir.IRNode) else src
    return pointwise([src], lambda v: ops.to_dtype(v, dtype), dtype, cast_inputs=False) \
        if isinstance(src, ir.IRNode) else full(dst.get_size(), src, dtype=dtype, device=dst.get_device())


@register_lowering(aten.copy_)
def copy_(dst, src, non_blocking=False):
    """After functionalization, ``copy_(graph_input, new_value)`` writes a mutation back into an input."""
    buf = ir.unwrap_view_to_buffer(dst)
    if not isinstance(buf, ir.InputBuffer):
        raise NotImplementedError("copy_ into a non-input falls back")
    storage = src.storage() if isinstance(src, TensorBox) else None
    if storage is not None and src.data is storage and \
            V.graph.reinplaced.get(getattr(storage.data, "name", None)) == buf.get_name():
        return src  # the scatter already wrote into this input (reinplace.py): nothing to copy
    value = copy(dst, src)
    value.realize()
    V.graph.mutations.append((buf.get_name(), value))
    return value


# ----------------------------------------------------------------------------------------- creation
@register_lowering(aten.full, prims.full)
def full(size, fill_value, dtype=None, layout=None, device=None, pin_memory=None, **kwargs):
    dtype = dtype or out_dtype(default=torch.get_default_dtype())
    device = torch.device(device) if device is not None else V.graph.device
    if isinstance(fill_value, ir.IRNode):
        return pointwise([expand_to(fill_value, size)], lambda v: v, dtype)
    return TensorBox.create(Pointwise(device, dtype, lambda index: ops.constant(fill_value, dtype), list(size)))


@register_lowering(aten.zeros, aten.empty, aten.empty_strided, aten.ones, aten.new_zeros, aten.new_ones,
                   aten.new_empty, aten.new_empty_strided, aten.zeros_like, aten.ones_like, aten.empty_like,
                   aten.full_like, aten.new_full, aten.scalar_tensor, prims.scalar_tensor, prims.empty_strided,
                   aten.empty_permuted)
def creation(*args, **kwargs):
    val = meta_val()
    target = V.graph.current_node.target
    name = target._opname if hasattr(target, "_opname") else str(target)
    value = 1 if "ones" in name else 0
    if name in ("full_like", "new_full"):
        value = args[1]
    if name == "scalar_tensor":
        value = args[0]
    return full(list(val.shape), value, dtype=val.dtype, device=val.device)


@register_lowering(aten.fill, aten.fill_)
def fill(x, value):
    return full(x.get_size(), value, dtype=x.get_dtype(), device=x.get_device())


@register_lowering(prims.iota)
def iota(length, *, start, step, dtype, device, requires_grad=False):
    return TensorBox.create(Pointwise(device, dtype, lambda index: ops.index_expr(start + index[0] * step, dtype),
                                      [length]))


@register_lowering(aten.arange)
def arange(*args, **kwargs):
    """``arange(end)``, ``arange(start, end)``, ``arange(start, end, step)``.  Read by position: a symbolic bound
    is a sympy expression, and counting only the numbers took ``arange(-1, s0 + 2)`` for ``arange(-1)``'s
    start 0 (a reflection pad's indices, off by one, under ``dynamic=True``)."""
    val = meta_val()
    start = args[0] if len(args) > 1 else kwargs.get("start", 0)
    step = args[2] if len(args) > 2 else kwargs.get("step", 1)
    if any(isinstance(v, float) for v in (start, step)):
        dtype = val.dtype
        return TensorBox.create(Pointwise(val.device, dtype, lambda index: ops.add(
            ops.constant(start, dtype), ops.mul(ops.index_expr(index[0], dtype), ops.constant(step, dtype))),
            list(val.shape)))
    return iota(val.shape[0], start=start, step=step, dtype=val.dtype, device=val.device)
