"""Division: true division, trunc and floor division, ``remainder`` and ``fmod`` -- the lowerings whose results
depend on where eager's kernels round (a quotient rounded to fp16/bf16 before it is floored) and on which device
checks a zero divisor (the CPU's integer kernels raise ``ZeroDivisionError``, CUDA's divide anyway).

Each is a ``pointwise`` over ``ops``; what makes them a module of their own is the device- and dtype-dependent
choice of the steps, written out in [Note: floor division rounds where ATen's kernel does] below. Upstream keeps
them in ``torch/_inductor/lowering.py`` (``div_mode``, ``div_prim``, ``floordiv``, ``fmod``, ``remainder``).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from . import ir
from .ir import TensorBox
from .lowering import (
    _dtype_for,
    _low_precision,
    _refuse_what_eager_refuses,
    _rounded_scalar,
    _scalar_in_fp32,
    assert_async,
    broadcast_shapes,
    device_of,
    is_float,
    pointwise,
    register_lowering,
)
from .virtualized import V, ops

aten, prims = torch.ops.aten, torch.ops.prims


@register_lowering(aten.div, prims.div, aten.true_divide)
def div(a, b, rounding_mode=None):
    out, compute = _dtype_for((a, b), "default")
    target = V.graph.current_node.target if V.graph.current_node is not None else None
    if target is prims.div.default and not is_float(out):
        rounding_mode = "trunc"
    if rounding_mode is None:
        cuda_scalar = _scalar_divisor(a, b) and device_of([a, b]).type == "cuda"
        if _low_precision(out) and (_scalar_in_fp32("div", (a, b)) or cuda_scalar):
            compute = torch.float32  # [Note: Python scalars in fp16/bf16 ops]
        if cuda_scalar:  # ``x / 3`` is one ulp from ``tl.div_rn(x, 3.0)`` in a fifth of the elements
            inverse = _reciprocal(b, compute)
            return pointwise([a, b], lambda x, y: ops.mul(x, inverse(y)), out, compute)
        return pointwise([a, b], ops.truediv, out, compute)
    if rounding_mode == "floor":
        return floor_divide(a, b)
    if is_float(out):
        return _float_trunc_divide(a, b, out, compute)
    return pointwise([a, b], _zero_divisor_checked(ops.truncdiv, a, b, compute), out, compute)


def _float_trunc_divide(a, b, out: torch.dtype, compute: torch.dtype) -> TensorBox:
    """``trunc(a / b)`` with the roundings eager makes (measured over 1M pairs per case, CPU and H200):

    * A tensor divisor: both devices' kernels divide in the tensor's type, so an fp16/bf16 quotient is rounded
      before it is truncated: 2.9998 (fp32) is 3.0 in fp16, whose trunc is 3, not 2. fp32 and fp64 round nothing.
    * A Python scalar divisor (or a size): CUDA multiplies by the scalar's reciprocal, computed in fp32 (fp64 for
      doubles), as its true division does: ``trunc(x / 0.37)`` and ``trunc(x * (1 / 0.37))`` differ in 29 of 1M
      fp32 elements. The CPU divides, in fp32 for fp16/bf16, unrounded ([Note: Python scalars in fp16/bf16 ops]).
    """
    low = _low_precision(out)
    if low and not isinstance(a, ir.IRNode):  # a scalar dividend is converted to the tensor's type
        a = _rounded_scalar(a, out)
    elif _scalar_divisor(a, b):
        compute = torch.float32 if low else compute
        if device_of([a, b]).type == "cpu":
            return pointwise([a, b], ops.truncdiv, out, compute)
        inverse = _reciprocal(b, compute)
        return pointwise([a, b], lambda x, y: ops.trunc(ops.mul(x, inverse(y))), out, compute)
    if low:
        return pointwise([a, b], lambda x, y: ops.trunc(ops.to_dtype(ops.truediv(x, y), out)), out, compute)
    return pointwise([a, b], ops.truncdiv, out, compute)


@register_lowering(aten.floor_divide)
def floor_divide(a, b):
    out, compute = _dtype_for((a, b), "default")
    if not is_float(out):
        return pointwise([a, b], _zero_divisor_checked(ops.floordiv, a, b, compute, floor=True), out, compute)
    return _float_floor_divide(a, b, out, compute)


def _scalar_divisor(a, b) -> bool:
    """Whether eager's kernel takes the divisor ``b`` as a scalar, read once in fp32 (fp64 for doubles) and never
    rounded to fp16/bf16: a Python number or a size; on CUDA a 0-dim CPU tensor ([Note: CPU scalars] in graph.py,
    ``iter.is_cpu_scalar(2)``); on the CPU any one-element tensor (``iter.is_scalar(2)``: ``x16 // b16[:1]``
    computes in fp32 throughout, where a tensor divisor rounds every step). CUDA's true, trunc and floor
    divisions then multiply by ``1 / b``; the CPU's divide."""
    if not isinstance(b, ir.IRNode):
        return True
    if device_of([a, b]).type == "cuda":  # a CPU scalar's node says CUDA (it is moved or passed by value): ask eager's
        node = V.graph.current_node
        divisor = node.args[1] if node is not None and len(node.args) > 1 else None
        val = divisor.meta.get("val") if isinstance(divisor, torch.fx.Node) else None
        return isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.dim() == 0 \
            and V.graph.env.get(divisor) is b
    return all(size == 1 for size in b.get_size())


def _reciprocal(b, compute: torch.dtype) -> Callable:
    """``1 / b`` as eager's CUDA kernel computes it for a CPU-scalar divisor: a constant for a Python number, else
    in the kernel, from the loaded value (a size, a 0-dim CPU tensor's value)."""
    if isinstance(b, (int, float)):
        value = float(1.0 / torch.tensor(b, dtype=compute))
        return lambda y: ops.constant(value, compute)
    return lambda y: ops.truediv(ops.constant(1.0, compute), y)


def _zero_divisor_checked(op: Callable, a, b, compute: torch.dtype, floor: bool = False) -> Callable:
    """``op`` (integer ``//``, trunc division, ``%`` or ``fmod``) raising ``RuntimeError: ZeroDivisionError`` for
    a zero divisor, as the CPU's kernels do ([Note: value checks] in codegen/triton.py).  CUDA's kernels divide
    anyway, and a GPU kernel gives what they give ([Note: integer division by zero on CUDA]); floating-point
    division has no error (inf or NaN), and a nonzero scalar divisor needs no check."""
    if is_float(compute) or (isinstance(b, (int, float)) and b != 0):
        return op
    if device_of([a, b]).type != "cpu":
        return _as_cuda_divides_by_zero(op, compute, floor)
    if isinstance(b, ir.IRNode):
        _check_every_divisor(a, b, compute)
        return op

    def checked(x, y):  # a scalar divisor of 0: every quotient the kernel computes raises
        ops.device_assert_async(ops.ne(y, ops.constant(0, compute)), "ZeroDivisionError")
        return op(x, y)
    return checked


def _as_cuda_divides_by_zero(op: Callable, compute: torch.dtype, floor: bool) -> Callable:
    """[Note: integer division by zero on CUDA]  ATen's CUDA kernels do not check the divisor, so ``x / 0`` and
    ``x % 0`` are what the GPU's integer division returns, measured on an H200: -1 for types up to 32 bits (which
    C++ divides as ``int``; 255 once cast to uint8); for int64, 2**32 - 1 where ``0 <= x < 2**32``, else -1.
    Floor division then steps one down where ``x < 0`` (its remainder, that same value, is nonzero), and
    ``remainder`` keeps it.  A kernel cannot just divide by zero the same way: to LLVM that is undefined
    behaviour, so it may assume every divisor nonzero and drop a ``y == 0`` test after the division. So the
    kernel divides by 1 where ``y`` is 0 and selects eager's answer there."""
    def fn(x, y):
        zero, one = ops.constant(0, compute), ops.constant(1, compute)
        is_zero = ops.eq(y, zero)
        minus_one = ops.constant(int(torch.tensor(-1).to(compute)), compute)
        at_zero = minus_one
        if compute == torch.int64:
            small = ops.logical_and(ops.ge(x, zero), ops.le(x, ops.constant(2**32 - 1, compute)))
            at_zero = ops.where(small, ops.constant(2**32 - 1, compute), minus_one)
        if floor:
            at_zero = ops.where(ops.lt(x, zero), ops.sub(at_zero, one), at_zero)
        return ops.where(is_zero, at_zero, op(x, ops.where(is_zero, one, y)))
    return fn


def _check_every_divisor(a, b, compute: torch.dtype) -> None:
    """Raise ``ZeroDivisionError`` if any element of the tensor ``b`` is 0: a separate ``all(b != 0)`` reduction
    with the check in its epilogue (as ``aten._assert_async``).  Eager divides every element before a later op
    drops some (``(a // b)[:2]``), so it checks all of ``b``; a check inside the division's kernel saw only the
    quotients that kernel computes.  Where eager computes no quotient (an empty broadcast result), none."""
    shape = broadcast_shapes([x.get_size() for x in (a, b) if isinstance(x, ir.IRNode)])
    if any(s == 0 for s in shape):
        return
    from .reduction_lowering import make_reduction
    nonzero = pointwise([b], lambda y: ops.ne(y, ops.constant(0, compute)), torch.bool, compute)
    assert_async(make_reduction(nonzero, None, False, "all", torch.bool, torch.bool), "ZeroDivisionError")


def _remainder_lowering(name: str) -> Callable:
    def lowering(a, b):
        _refuse_what_eager_refuses(name, [a, b])
        out, compute = _dtype_for((a, b), "default")
        return pointwise([a, b], _zero_divisor_checked(getattr(ops, name), a, b, compute), out, compute)
    return lowering


for _name in ("remainder", "fmod"):
    register_lowering(getattr(aten, _name), getattr(prims, _name))(_remainder_lowering(_name))


def _float_floor_divide(a, b, out: torch.dtype, compute: torch.dtype) -> TensorBox:
    """ATen's ``div_floor_floating``, with the roundings eager makes on this device.

    [Note: floor division rounds where ATen's kernel does]  ``floor(a / b)`` is one off whenever ``a / b`` rounds
    up to a whole number, so ATen divides the exact ``a - fmod(a, b)`` instead, steps one down when the remainder's
    sign disagrees with ``b``'s, and rounds to the nearest whole number.  Every step is a separate operation, and in
    fp16/bf16 the two kernels round different steps to the low-precision type (measured over 1M pairs per case):

    * CUDA runs the steps in fp32 but stores the floor, and the floor plus one, in the tensor's type.  A scalar
      divisor (``_scalar_divisor``) is applied as a multiplication by its fp32 (fp64) reciprocal.
    * The CPU's vectorised kernel computes in the tensor's type: every step rounds.  A scalar divisor takes
      another path, in fp32 throughout.

    Quotients above 2048 (fp16) or 256 (bf16) are where it shows: 1117 / 0.3772 is 2961.3 in fp32, and the
    fp16 floor 2961 is not representable.  fp32 and fp64 round nothing on the way on either device.
    """
    cuda, low = device_of([a, b]).type == "cuda", out in (torch.float16, torch.bfloat16)
    scalar_b = _scalar_divisor(a, b)
    reciprocal = cuda and scalar_b
    if scalar_b:  # a scalar divisor is read in fp32, unrounded ([Note: Python scalars in fp16/bf16 ops])
        compute = torch.float32 if low else compute
    if low and isinstance(a, (int, float)):
        a = float(torch.tensor(a, dtype=out))  # a scalar dividend is converted to the tensor's type first
    rounded = lambda v: ops.to_dtype(v, out) if low else v
    every = rounded if low and not cuda and not scalar_b else (lambda v: v)  # the CPU's vectorised kernel
    floor_step = rounded if cuda or every is rounded else (lambda v: v)
    inverse = _reciprocal(b, compute) if reciprocal else None

    def fn(x, y):
        one, zero = ops.constant(1.0, compute), ops.constant(0.0, compute)
        mod = every(ops.fmod(x, y))  # exact
        if reciprocal:  # a zero divisor takes the true quotient below, as eager's kernel does
            div = every(ops.mul(ops.sub(x, mod), inverse(y)))
        else:
            div = every(ops.truediv(every(ops.sub(x, mod)), y))
        signs_differ = ops.ne(ops.lt(y, zero), ops.lt(mod, zero))
        div = ops.where(ops.logical_and(ops.ne(mod, zero), signs_differ), every(ops.sub(div, one)), div)
        floor = floor_step(ops.floor(div))
        half_up = ops.gt(every(ops.sub(div, floor)), ops.constant(0.5, compute))
        floor = ops.where(half_up, floor_step(ops.add(floor, one)), floor)
        quotient = ops.truediv(x, y)  # b == 0: +-inf or nan; a zero result takes the quotient's sign
        return ops.where(ops.eq(y, zero), quotient,
                         ops.where(ops.ne(div, zero), floor, ops.copysign(zero, quotient)))

    return pointwise([a, b], fn, out, compute)
