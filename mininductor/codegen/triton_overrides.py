"""``TritonOverrides``: what each ``ops.*`` math call becomes in a Triton kernel (mirrors ``TritonOverrides`` in
``torch/_inductor/codegen/triton.py``).

A mixin of ``TritonKernel``: every method takes the names of CSE'd variables and returns the name of a new one,
through the kernel's ``_emit(text, dtype)``.  The simple ops are one line of text each (``triton_ops.py``, read by
``__getattr__``); the ones here need more than a format string:

* ``to_dtype``: fp16/bf16 live in fp32 registers and are rounded where eager rounds ([Note: rounding survives only
  without FP contraction]); bf16 rounding under the interpreter is done with integer ops.
* integer ``floordiv``/``truncdiv``/``remainder`` with C's and Python's conventions reconciled; float ``fmod``
  exact on both sides (libdevice on the GPU, NumPy's under the interpreter); ``div_rn``, correctly rounded division
  (float floor division is composed from these in ``lowering._float_floor_divide``).
* ``atan``/``asin``/``acos``/``atan2``, which Triton lacks without libdevice (absent under the interpreter).
"""
from __future__ import annotations

import torch

from .triton_ops import BINARY, INTERPRETED_UNARY, TL_DTYPE, UNARY


class TritonOverrides:
    """The math half of ``TritonKernel``'s ops handler (needs ``_emit``, ``_dtype``, ``_rounded``, ``interpret``)."""

    def to_dtype(self, value: str, dtype: torch.dtype, src_dtype=None) -> str:
        src = self._dtype(value)
        if dtype == src:
            return value
        if dtype in (torch.float16, torch.bfloat16):
            # [Note: rounding survives only without FP contraction]  LLVM may narrow ``fp32 op`` between two
            # round trips to an fp16 op, then fuse ``x * 3 - 1`` into one fp16 FMA: one rounding where eager
            # rounds twice (H200: 10 of 91 elements 1 ulp off).  So a kernel that computes with a rounded value
            # compiles with ``enable_fp_fusion=False``, as Inductor's do under ``emulate_precision_casts``
            # (``_emit`` sets ``rounds_low_precision`` when a rounded tmp is an operand).  A rounding that only
            # reaches a store (the last cast of a bf16 GELU) leaves nothing to narrow: contraction stays on.
            if self._rounded.get(value) == dtype:
                return value  # rounded already: rounding again changes nothing
            rounded = self._round_bf16(value) if dtype == torch.bfloat16 and self.interpret else \
                self._emit(f"{value}.to({TL_DTYPE[dtype]}).to(tl.float32)", torch.float32)
            self._rounded[rounded] = dtype
            return rounded
        if dtype == torch.bool:
            return self._emit(f"{value} != 0", torch.bool)
        return self._emit(f"{value}.to({TL_DTYPE[dtype]})", dtype)

    def _round_bf16(self, value: str) -> str:
        """fp32 -> nearest-even bf16 (kept in fp32) with integer ops: the interpreter's own cast truncates."""
        if self._rounded.get(value) == torch.bfloat16:
            return value
        rounded, self._rounded = self._rounded, {}  # its own lines read ``value``: not a computation with it
        try:
            return self._round_bf16_bits(value)
        finally:
            self._rounded = rounded

    def _round_bf16_bits(self, value: str) -> str:
        value = self._emit(f"{value}.to(tl.float32)", torch.float32) if self._dtype(value) != torch.float32 \
            else value
        bits = self._emit(f"{value}.to(tl.int32, bitcast=True)", torch.int32)
        rounded = self._emit(f"(({bits} + 0x7FFF + (({bits} >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)",
                             torch.float32)
        return self._emit(f"tl.where({value} != {value}, {value}, {rounded})", torch.float32)

    def where(self, cond: str, a: str, b: str) -> str:
        return self._emit(f"tl.where({cond}, {a}, {b})", _promote(self._dtype(a), self._dtype(b)))

    def floordiv(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))  # integers: floats are lowered step by step
        assert not dtype.is_floating_point, "float floor division is lowering._float_floor_divide's"
        q = self._emit(f"{a} // {b}", dtype)  # C truncation on GPU, floor in the interpreter: fix both up
        return self._emit(f"tl.where((({b} > 0) & ({q} * {b} > {a})) | (({b} < 0) & ({q} * {b} < {a})), "
                          f"{q} - 1, {q})", dtype)

    def div_rn(self, a: str, b: str) -> str:
        """IEEE division, rounded to nearest, as eager's ``/``: Triton's fp32 ``/`` on the GPU is an approximate
        division (within 2 ulp), which is enough for a softmax but not where the quotient is floored.  Its fp64
        ``/``, and every ``/`` under the interpreter (NumPy's), is already exact."""
        dtype = _promote(self._dtype(a), self._dtype(b))
        return self._emit(f"tl.div_rn({a}, {b})" if dtype == torch.float32 and not self.interpret else f"{a} / {b}",
                          dtype)

    def truncdiv(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))
        if dtype.is_floating_point:
            return self.trunc(self._emit(f"{a} / {b}", dtype))
        q = self.floordiv(a, b)
        return self._emit(f"tl.where(({q} * {b} != {a}) & (({a} < 0) != ({b} < 0)), {q} + 1, {q})", dtype)

    def remainder(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))
        if dtype.is_floating_point:  # ATen's: fmod, moved to the sign of b (exact; a - floor(a/b)*b is not)
            mod = self.fmod(a, b)
            return self._emit(f"tl.where(({mod} != 0) & (({mod} < 0) != ({b} < 0)), {mod} + {b}, {mod})", dtype)
        return self._emit(f"{a} - {self.floordiv(a, b)} * {b}", dtype)

    def fmod(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))
        if dtype.is_floating_point:
            # Eager's std::fmod is exact. Interpreted, ``%`` is np.fmod (exact). Compiled for an NVIDIA GPU,
            # Triton's ``%`` on floats computes ``a - trunc(a / b) * b`` (``fmod(-21.0, 0.6)`` gave 0.6, not ~0),
            # so there we call CUDA's own fmod through libdevice -- the one libdevice call we make, never
            # interpreted (the interpreter has no libdevice; PITFALLS.md).
            if self.interpret:
                return self._emit(f"{a} % {b}", dtype)
            return self._emit(f"libdevice.fmod({a}, {b})", dtype)
        return self._emit(f"{a} - {self.truncdiv(a, b)} * {b}", dtype)

    def atan(self, x: str) -> str:
        """No libdevice: reduce |x| <= 1 (via 1/x), halve the angle twice, then a short odd series."""
        e = lambda text: self._emit(text, torch.float32)
        y = e(f"tl.where(tl.abs({x}) > 1.0, 1.0 / {x}, {x})")
        u = e(f"{y} / (1.0 + tl.sqrt(1.0 + {y} * {y}))")
        v = e(f"{u} / (1.0 + tl.sqrt(1.0 + {u} * {u}))")
        v2 = e(f"{v} * {v}")
        series = e(f"4.0 * {v} * (1.0 + {v2} * (-1.0 / 3 + {v2} * (1.0 / 5 + {v2} * (-1.0 / 7 + {v2} * "
                   f"(1.0 / 9 + {v2} * (-1.0 / 11))))))")
        half_pi = 1.5707963267948966
        return e(f"tl.where({x} > 1.0, {half_pi} - {series}, tl.where({x} < -1.0, -{half_pi} - {series}, {series}))")

    def asin(self, x: str) -> str:
        return self.atan(self._emit(f"{x} / tl.sqrt(1.0 - {x} * {x})", torch.float32))

    def acos(self, x: str) -> str:
        return self._emit(f"1.5707963267948966 - {self.asin(x)}", torch.float32)

    def atan2(self, y: str, x: str) -> str:
        base = self.atan(self._emit(f"{y} / {x}", torch.float32))
        pi = 3.141592653589793
        return self._emit(f"tl.where({x} > 0, {base}, tl.where({x} < 0, tl.where({y} >= 0, {base} + {pi}, "
                          f"{base} - {pi}), tl.where({y} > 0, {pi / 2}, tl.where({y} < 0, {-pi / 2}, 0.0))))",
                          torch.float32)

    def __getattr__(self, name: str):
        if name in UNARY:
            fmt, kind = UNARY[name]
            if self.interpret and name in INTERPRETED_UNARY:
                fmt = INTERPRETED_UNARY[name]
            return lambda a: self._emit(fmt.format(a, t=TL_DTYPE[self._result(kind, a)]), self._result(kind, a))
        if name in BINARY:
            fmt, kind = BINARY[name]
            return lambda a, b: self._emit(fmt.format(a, b), self._result(kind, a, b))
        raise AttributeError(name)

    def _result(self, kind: str, *values) -> torch.dtype:
        if kind == "bool":
            return torch.bool
        dtype = self._dtype(values[0])
        for v in values[1:]:
            dtype = _promote(dtype, self._dtype(v))
        if kind == "float" and not dtype.is_floating_point:
            return torch.float32
        return dtype


def _promote(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    if a == torch.bool:
        return b
    if b == torch.bool:
        return a
    return torch.promote_types(a, b)
