"""``TritonOverrides``: what each ``ops.*`` math call becomes in a Triton kernel (mirrors ``TritonOverrides`` in
``torch/_inductor/codegen/triton.py``).

A mixin of ``TritonKernel``: every method takes the names of CSE'd variables and returns the name of a new one,
through the kernel's ``_emit(text, dtype)``.  The simple ops are one line of text each (``triton_ops.py``, read by
``__getattr__``); the ones here need more than a format string:

* ``to_dtype``: fp16/bf16 live in fp32 registers and are rounded where eager rounds ([Note: rounding survives only
  without FP contraction]); bf16 rounding under the interpreter is done with integer ops.
* integer ``floordiv``/``truncdiv``/``remainder`` with C's and Python's conventions reconciled; float ``fmod``
  exact on both sides (libdevice on the GPU, NumPy's under the interpreter); ``truediv``, correctly rounded
  (float floor division is composed from these in ``division_lowering._float_floor_divide``).
* ``round`` and ``signbit``, exact; ``pow``, ``hypot``, ``expm1``/``log1p``/``tanh``/``sinh``/``cosh``, their
  inverses and the ``atan`` family: on the GPU CUDA's libdevice ([Note: libdevice on the GPU]), under the
  interpreter (which has no libdevice) portable formulas with C's answers at the edges ([Note: small-argument math
  without libdevice]).  ``erfc``, ``lgamma`` and ``erfinv`` the same way, in ``triton_special.py``.
"""
from __future__ import annotations

import math

import torch

from .. import config
from .triton_ops import BINARY, GPU_UNARY, INTERPRETED_UNARY, TL_DTYPE, UNARY
from .triton_special import SpecialFunctions


class TritonOverrides(SpecialFunctions):
    """The math half of ``TritonKernel``'s ops handler (needs ``_emit``, ``_dtype``, ``_rounded``, ``interpret``,
    ``constant``)."""

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
        assert not dtype.is_floating_point, "float floor division is division_lowering._float_floor_divide's"
        q = self._emit(f"{a} // {b}", dtype)  # C truncation on GPU, floor in the interpreter: fix both up
        return self._emit(f"tl.where((({b} > 0) & ({q} * {b} > {a})) | (({b} < 0) & ({q} * {b} < {a})), "
                          f"{q} - 1, {q})", dtype)

    def truediv(self, a: str, b: str) -> str:
        """IEEE division, rounded to nearest, as eager's ``/`` on both devices. Triton's fp32 ``/`` on the GPU is
        an approximate division (within 2 ulp): enough for a softmax, but ``6 / 3`` may be 1.9999999, and a
        ``trunc``, ``floor`` or ``==`` after it shows that (lowering fuzz on CUDA: seeds 900325, 900343). So fp32
        divides with ``tl.div_rn`` (unless ``config.division_rounding`` is off). Its fp64 ``/``, and every ``/``
        under the interpreter (NumPy's), is exact."""
        dtype = self._result("float", a, b)
        if dtype != torch.float32 or self.interpret or not config.division_rounding:
            return self._emit(f"{a} / {b}", dtype)
        a, b = (v if self._dtype(v) == dtype else self._emit(f"{v}.to(tl.float32)", dtype) for v in (a, b))
        return self._emit(f"tl.div_rn({a}, {b})", dtype)

    def reciprocal(self, x: str) -> str:
        """``1 / x``, correctly rounded as eager's (``7 / b`` is ``b.reciprocal() * 7`` in eager, and was an ulp
        off in a tenth of the elements with the GPU's approximate ``/``)."""
        return self.truediv(self.constant(1.0, self._result("float", x)), x)

    def truncdiv(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))
        if dtype.is_floating_point:
            return self.trunc(self.truediv(a, b))
        q = self.floordiv(a, b)
        return self._emit(f"tl.where(({q} * {b} != {a}) & (({a} < 0) != ({b} < 0)), {q} + 1, {q})", dtype)

    # [Note: shifts by the width or more]  ``a << b`` and ``a >> b`` with ``b`` negative or at least the type's
    # width are undefined in C and poison in LLVM: compiled for the GPU, ``int32 >> 40`` gave ``a >> 8``. Eager
    # defines them (``BinaryShiftOpsKernels``): a left shift gives 0, a right shift the sign fill (0 or -1, 0 for
    # unsigned types). Both are spelled out here, with the shift itself kept in range so no lane is poison.
    def bitwise_left_shift(self, a: str, b: str) -> str:
        dtype, bad, shift = self._shift(a, b)
        return self._emit(f"tl.where({bad}, 0, {a} << {shift})", dtype)

    def bitwise_right_shift(self, a: str, b: str) -> str:
        dtype, bad, shift = self._shift(a, b)
        fill = f"{a} >> {torch.iinfo(dtype).bits - 1}" if dtype.is_signed else "0"
        return self._emit(f"tl.where({bad}, {fill}, {a} >> {shift})", dtype)

    def _shift(self, a: str, b: str) -> tuple[torch.dtype, str, str]:
        """The shift's dtype, whether ``b`` is out of range, and ``b`` clamped. Eager reads an unsigned ``b`` as
        signed; the values that makes negative are past the width anyway."""
        dtype = _promote(self._dtype(a), self._dtype(b))
        bits = torch.iinfo(dtype).bits
        bad = self._emit(f"({b} < 0) | ({b} >= {bits})" if dtype.is_signed else f"{b} >= {bits}", torch.bool)
        return dtype, bad, self._emit(f"tl.where({bad}, 0, {b})", dtype)

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
            # so there we call CUDA's own fmod through libdevice ([Note: libdevice on the GPU]; never interpreted:
            # the interpreter has no libdevice, PITFALLS.md).
            if self.interpret:
                return self._emit(f"{a} % {b}", dtype)
            return self._emit(f"libdevice.fmod({a}, {b})", dtype)
        return self._emit(f"{a} - {self.truncdiv(a, b)} * {b}", dtype)

    def pow(self, a: str, b: str) -> str:
        """``exp(b * log|a|)`` with C's answers where that formula has none.

        The formula amplifies log's rounding by |b log a| (71 ulp at 1.4e7 ** 5), so fp32 (and fp16/bf16, in fp32
        registers) computes it in fp64 and rounds once.  Then: a negative base (or -0.0) takes the sign of an odd
        integer b (pow(-0.0, -1) is -inf) and is NaN for a fractional one, except -inf (pow(-inf, 0.5) is inf);
        1 for b == 0, for a == 1 (even when b is NaN) and for a == -1 with b = +-inf.

        [Note: a power of one]  The formula is about |b log a| ulp off in fp64, even for b = 1: ``pow(106.54,
        1.0)`` came out one ulp above 106.54, where eager returns its argument (CPU lowering fuzz --int --matmul,
        seed 5907464, whose exponent is a ``tanh`` that rounds to exactly 1). So b = 1 gives ``a``. Other
        exponents have no bit-equal answer to take: eager's vectorised pow (SLEEF, 1 ulp) differs from the
        correctly rounded ``1 / a``, ``a * a`` and ``sqrt(a)`` in 1-2% of elements for -1, 2 and 0.5. On the GPU
        eager's fp32 ``pow(a, 1)`` is ``a`` too, while libdevice's ``powf`` was one ulp off for 29% of 1e5 random
        ``a`` (H200, twenty-fifth session), so fp32 (and fp16/bf16, computed in fp32) takes the same rule there;
        eager's fp64 pow on the GPU is libdevice's own (``pow(-110.84, 1.0)`` is not -110.84 in either)."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            value = self._libdevice("pow", a, b)
            dtype = self._dtype(value)
            if dtype == torch.float64:
                return value
            return self._emit(f"tl.where({b} == 1, {a}.to({TL_DTYPE[dtype]}), {value})", dtype)
        dtype = self._result("float", a, b)
        wide = lambda v: f"{v}.to(tl.float64)" if dtype != torch.float64 else v
        e = lambda text: self._emit(text, torch.float64)
        x, y = e(wide(a)), e(wide(b))
        is_int = self._emit(f"tl.floor({y}) == {y}", torch.bool)
        odd = self._emit(f"{is_int} & (tl.floor({y} * 0.5) * 2.0 != {y})", torch.bool)
        negative = self._emit(f"({x} < 0) | (1.0 / {x} < 0)", torch.bool)  # -0.0 too
        magnitude = e(f"tl.exp({y} * tl.log(tl.abs({x})))")
        signed = e(f"tl.where({negative} & {odd}, -{magnitude}, {magnitude})")
        fractional = e(f"tl.where(({x} < 0) & ({x} != float('-inf')) & ~{is_int}, float('nan'), {signed})")
        one = self._emit(f"({y} == 0) | ({x} == 1) | (({x} == -1) & (tl.abs({y}) == float('inf')))", torch.bool)
        result = e(f"tl.where({one}, 1.0, tl.where({y} == 1.0, {x}, {fractional}))")
        return result if dtype == torch.float64 else self._emit(f"{result}.to({TL_DTYPE[dtype]})", dtype)

    def hypot(self, a: str, b: str) -> str:
        """``big * sqrt(1 + (small / big)^2)``: ``sqrt(a*a + b*b)`` overflowed past 1.8e19 (fp32); an infinite
        side wins over a NaN one, as C's."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("hypot", a, b)
        dtype = self._result("float", a, b)
        e = lambda text: self._emit(text, dtype)
        x, y = e(f"tl.abs({a})"), e(f"tl.abs({b})")
        big, small = e(f"tl.where({x} >= {y}, {x}, {y})"), e(f"tl.where({x} >= {y}, {y}, {x})")  # NaN: in r
        r = e(f"{small} / {big}")
        scaled = e(f"tl.where({big} == 0, {small}, {big} * tl.sqrt(1.0 + {r} * {r}))")  # 0, or NaN
        return e(f"tl.where(({x} == float('inf')) | ({y} == float('inf')), float('inf'), {scaled})")

    def nextafter(self, x: str, y: str, storage: torch.dtype | None = None) -> str:
        """C's ``nextafter``: the next float after ``x`` toward ``y``, one step of ``x``'s bits (a float's bits are
        sign and magnitude, so one up moves away from zero). ``x == y`` gives ``y`` (``nextafter(0.0, -0.0)`` is
        -0.0); a zero gives the smallest denormal with ``y``'s sign; a NaN, NaN. Exact on both devices: integer
        ops only.

        [Note: nextafter of fp16 and bf16]  ``storage`` is the dtype the result is stored in when the values live
        in fp32 registers.  A bf16 value is an fp32 value whose low 16 bits are zero, with the same exponent range,
        so one bf16 step is ``1 << 16`` in the fp32 bits, denormals and infinities included.  fp16 has ten
        mantissa bits, so one step is ``1 << 13`` -- but only among fp16's normal numbers: below 2^-14 fp16's
        denormals are fp32 normals, one step there is 2^-24 in value (exact in fp32), and from an infinity the
        next fp16 is +-65504, not a step of fp32's bits.  Stepping up from 65504 gives 65536, which the fp16 store
        rounds to infinity, as it should.  (Converting to fp16 and stepping its own bits would be shorter, but
        Triton's interpreter converts low-precision denormals wrongly: [Note: bf16 bits under the interpreter].)"""
        dtype = self._result("float", x, y)
        ints, tl_ints = (torch.int64, "tl.int64") if dtype == torch.float64 else (torch.int32, "tl.int32")
        step = {torch.bfloat16: 1 << 16, torch.float16: 1 << 13}.get(storage, 1)
        bits = self._emit(f"{x}.to({tl_ints}, bitcast=True)", ints)
        away = self._emit(f"({y} > {x}) == ({x} > 0)", torch.bool)
        floats = TL_DTYPE[dtype]
        stepped = self._emit(f"tl.where({away}, {bits} + {step}, {bits} - {step}).to({floats}, bitcast=True)", dtype)
        sign = -(2 ** 63) if dtype == torch.float64 else -(2 ** 31)  # the sign bit, as a signed integer
        tiny = self._emit(f"tl.where({y} > 0, {step}, {sign + step}).to({tl_ints}).to({floats}, bitcast=True)", dtype)
        e = lambda text: self._emit(text, dtype)
        moved = e(f"tl.where({x} == 0, {tiny}, {stepped})")
        if storage == torch.float16:
            size = e(f"tl.abs({x})")
            small = self._emit(f"({size} < 6.103515625e-05) | (({size} == 6.103515625e-05) & ~{away})", torch.bool)
            tick = e(f"{x} + tl.where({y} > {x}, 5.960464477539063e-08, -5.960464477539063e-08)")
            tick = e(f"tl.where({tick} == 0, {x} * 0.0, {tick})")  # down to zero keeps x's sign, as C's does
            moved = e(f"tl.where({small}, {tick}, {moved})")
            moved = e(f"tl.where({size} == float('inf'), tl.where({x} > 0, 65504.0, -65504.0), {moved})")
        return e(f"tl.where(({x} != {x}) | ({y} != {y}), {x} + {y}, tl.where({x} == {y}, {y}, {moved}))")

    def round(self, x: str) -> str:
        """Half to even, as eager's (rint).  ``floor(x + 0.5)`` is wrong where ``x + 0.5`` rounds: 0.49999997 gave
        1, the odd 8388609 gave 8388610 (past 2^23 every float is whole and ``x + 0.5`` a tie).  Here the
        fraction ``x - floor(x)`` is exact; a zero result keeps x's sign (round(-0.4) is -0.0)."""
        dtype = self._dtype(x)
        e = lambda text: self._emit(text, dtype)
        whole = e(f"tl.floor({x})")
        fraction = e(f"{x} - {whole}")  # NaN for +-inf: then ``whole`` (inf) is kept below
        even = self._emit(f"tl.floor({whole} * 0.5) * 2.0 == {whole}", torch.bool)
        up = self._emit(f"({fraction} > 0.5) | (({fraction} == 0.5) & ~{even})", torch.bool)
        rounded = e(f"tl.where({up}, {whole} + 1.0, {whole})")
        return e(f"tl.where({rounded} == 0, {x} * 0.0, {rounded})")

    def signbit(self, x: str) -> str:
        """The sign bit, as eager's: set for -0.0 and a negative NaN, which ``x < 0`` misses. fp16/bf16 values
        live in fp32 registers, whose sign bit is theirs."""
        dtype = self._dtype(x)
        if not dtype.is_floating_point:
            return self._emit(f"{x} < 0", torch.bool)
        bits = "tl.int64" if dtype == torch.float64 else "tl.int32"
        return self._emit(f"{x}.to({bits}, bitcast=True) < 0", torch.bool)

    # [Note: libdevice on the GPU]  Compiled for an NVIDIA GPU, the transcendental functions call CUDA's own math
    # library, libdevice, as Inductor does -- and as eager's CUDA kernels do, through the same library: accurate to
    # an ulp or two, and cheap (one call, where the portable formulas below take a series and a branch; they cost
    # the bf16 GELU-tanh a third of its speed).  The interpreter has no libdevice, so there the portable formulas
    # run: the same answers to a few ulp, tested on the CPU.
    #   Triton compiles fp32 libdevice calls flushing denormals to zero (atan(1e-40) gave 0), where eager keeps
    # them; the functions that are x itself near 0 return a denormal x unchanged.
    def _libdevice(self, name: str, *args: str) -> str:
        dtype = self._result("float", *args)
        args = tuple(a if self._dtype(a) == dtype else self._emit(f"{a}.to({TL_DTYPE[dtype]})", dtype) for a in args)
        value = self._emit(f"libdevice.{name}({', '.join(args)})", dtype)
        if dtype != torch.float32 or name not in _IDENTITY_NEAR_ZERO:
            return value
        return self._emit(f"tl.where(tl.abs({args[0]}) < 1.1754943508222875e-38, {args[0]}, {value})", dtype)

    # [Note: small-argument math without libdevice]  ``exp(x) - 1`` is 0 for |x| < 6e-8 where eager's expm1 is
    # x, and ``log(1 + x)``, ``2 / (1 + exp(-2x)) - 1`` (tanh), ``exp(x) - exp(-x)`` and their inverses lose
    # every digit the same way; ``exp(x)`` overflows in ``0.5 * exp(89)`` where cosh(89) does not.  Libdevice
    # (Inductor's choice) is not available interpreted, so these use a short Taylor series below 0.25, where
    # cancellation would cost more than 2 bits, and the plain formula above it -- polynomials and tl.exp/tl.log
    # only, the same on the GPU and under the interpreter.  fp64 takes more terms.
    def _float(self, x: str) -> torch.dtype:
        return self._result("float", x)

    def _poly(self, x: str, coefficients, dtype) -> str:
        """``c0 + c1*x + c2*x^2 + ...`` by Horner's rule."""
        text = repr(float(coefficients[-1]))
        for c in reversed(coefficients[:-1]):
            text = f"{float(c)!r} + {x} * ({text})"
        return self._emit(text, dtype)

    def _terms(self, dtype, fp32: int, fp64: int) -> int:
        return fp64 if dtype == torch.float64 else fp32

    def _odd(self, x: str, magnitude: str, dtype) -> str:
        """``magnitude`` (a function of |x|) given x's sign; +-0 and NaN are x itself (tanh(-0.0) is -0.0)."""
        return self._emit(f"tl.where({x} < 0, -{magnitude}, tl.where({x} > 0, {magnitude}, {x}))", dtype)

    def expm1(self, x: str) -> str:
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("expm1", x)
        dtype = self._float(x)
        n = self._terms(dtype, 8, 14)  # x^n/n! below eps at |x| = 0.25
        series = self._emit(f"{x} * {self._poly(x, [1 / math.factorial(k + 1) for k in range(n)], dtype)}", dtype)
        return self._emit(f"tl.where(tl.abs({x}) < 0.25, {series}, tl.exp({x}) - 1.0)", dtype)

    def log1p(self, x: str) -> str:
        """``2 * atanh(s)``, ``s = x / (2 + x)``: an odd series in |s| < 0.15 for |x| < 0.25."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("log1p", x)
        dtype = self._float(x)
        s = self._emit(f"{x} / (2.0 + {x})", dtype)
        s2 = self._emit(f"{s} * {s}", dtype)
        n = self._terms(dtype, 6, 11)
        series = self._emit(f"2.0 * {s} * {self._poly(s2, [1 / (2 * k + 1) for k in range(n)], dtype)}", dtype)
        return self._emit(f"tl.where(tl.abs({x}) < 0.25, {series}, tl.log(1.0 + {x}))", dtype)

    def tanh(self, x: str) -> str:
        """``-t / (t + 2)`` with ``t = expm1(-2|x|)`` in [-1, 0]: no cancellation, no overflow."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("tanh", x)
        dtype = self._float(x)
        if dtype == torch.float32:
            # in fp32, ``t + 2`` near 1 costs an ulp: tanh(6) was 0.99998766, eager's (correctly rounded)
            # 0.99998772, and tanh(9) 1.0, not 0.99999994 -- which ``floor`` turns into 1 vs 0. fp64 rounds right.
            wide = self._emit(f"{x}.to(tl.float64)", torch.float64)
            return self._emit(f"{self.tanh(wide)}.to(tl.float32)", torch.float32)
        t = self.expm1(self._emit(f"-2.0 * tl.abs({x})", dtype))
        return self._odd(x, self._emit(f"-{t} / ({t} + 2.0)", dtype), dtype)

    def sinh(self, x: str) -> str:
        """``(m + m / (m + 1)) / 2`` with ``m = expm1(|x|)``; past |x| = 20, ``exp(|x|/2)^2 / 2``, which does not
        overflow before sinh does."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("sinh", x)
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        m = self.expm1(a)
        half = self._emit(f"tl.exp(0.5 * {a})", dtype)
        magnitude = self._emit(f"tl.where({a} > 20.0, (0.5 * {half}) * {half}, 0.5 * ({m} + {m} / ({m} + 1.0)))",
                               dtype)
        return self._odd(x, magnitude, dtype)

    def cosh(self, x: str) -> str:
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("cosh", x)
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        half = self._emit(f"tl.exp(0.5 * {a})", dtype)
        return self._emit(f"tl.where({a} > 20.0, (0.5 * {half}) * {half}, 0.5 * (tl.exp({a}) + tl.exp(-{a})))",
                          dtype)

    def asinh(self, x: str) -> str:
        """``log1p(a + a^2 / (1 + sqrt(1 + a^2)))``; past 2^28 (a^2 would overflow or swamp the 1), log(2a)."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("asinh", x)
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        small = self.log1p(self._emit(f"{a} + {a} * {a} / (1.0 + tl.sqrt(1.0 + {a} * {a}))", dtype))
        magnitude = self._emit(f"tl.where({a} > 268435456.0, tl.log({a}) + {math.log(2)!r}, {small})", dtype)
        return self._odd(x, magnitude, dtype)

    def acosh(self, x: str) -> str:
        """``log1p(t + sqrt(2t + t^2))``, ``t = x - 1`` (exact near 1); past 2^28, log(2x)."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("acosh", x)
        dtype = self._float(x)
        t = self._emit(f"{x} - 1.0", dtype)
        small = self.log1p(self._emit(f"{t} + tl.sqrt(2.0 * {t} + {t} * {t})", dtype))
        # x < 1 is NaN (2t + t^2 would overflow to +inf for a huge negative x)
        return self._emit(f"tl.where({x} > 268435456.0, tl.log({x}) + {math.log(2)!r}, "
                          f"tl.where({x} < 1.0, float('nan'), {small}))", dtype)

    def atanh(self, x: str) -> str:
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("atanh", x)
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        magnitude = self._emit(f"0.5 * {self.log1p(self._emit(f'2.0 * {a} / (1.0 - {a})', dtype))}", dtype)
        return self._odd(x, magnitude, dtype)

    def atan(self, x: str) -> str:
        """No libdevice: reduce |x| <= 1 (via 1/x), halve the angle twice, then a short odd series (|v| <= 0.2:
        six terms for fp32, twelve for fp64)."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("atan", x)
        dtype = self._float(x)
        e = lambda text: self._emit(text, dtype)
        y = e(f"tl.where(tl.abs({x}) > 1.0, 1.0 / {x}, {x})")
        u = e(f"{y} / (1.0 + tl.sqrt(1.0 + {y} * {y}))")
        v = e(f"{u} / (1.0 + tl.sqrt(1.0 + {u} * {u}))")
        v2 = e(f"{v} * {v}")
        n = self._terms(dtype, 6, 12)
        series = e(f"4.0 * {v} * {self._poly(v2, [(-1) ** k / (2 * k + 1) for k in range(n)], dtype)}")
        half_pi = 1.5707963267948966
        # below sqrt(3 eps) atan(x) rounds to x; the halvings would cost a denormal its low bits (1e-40: 3e-5 off)
        tiny = 2.0 ** -27 if dtype == torch.float64 else 2.0 ** -12
        return e(f"tl.where(tl.abs({x}) < {tiny}, {x}, tl.where({x} > 1.0, {half_pi} - {series}, "
                 f"tl.where({x} < -1.0, -{half_pi} - {series}, {series})))")

    def asin(self, x: str) -> str:
        """``atan(x / sqrt((1 - x)(1 + x)))``: ``1 - x * x`` would cancel near |x| = 1."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("asin", x)
        dtype = self._float(x)
        return self.atan(self._emit(f"{x} / tl.sqrt((1.0 - {x}) * (1.0 + {x}))", dtype))

    def acos(self, x: str) -> str:
        """``2 atan(sqrt((1 - x) / (1 + x)))``: ``pi/2 - asin(x)`` lost 5e-5 (relative) at x = 0.9999997."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("acos", x)
        dtype = self._float(x)
        return self._emit(f"2.0 * {self.atan(self._emit(f'tl.sqrt((1.0 - {x}) / (1.0 + {x}))', dtype))}", dtype)

    def atan2(self, y: str, x: str) -> str:
        """atan(y / x) moved to x's quadrant, with C's answers for signed zeros (atan2(-0.0, -1) is -pi,
        atan2(0.0, -0.0) is pi) and for two infinities (atan2(inf, -inf) is 3pi/4), where y / x says nothing."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("atan2", y, x)
        dtype = self._result("float", y, x)
        e = lambda text: self._emit(text, dtype)
        base = self.atan(e(f"{y} / {x}"))
        # constants typed like the result: a bare Python float in tl.where(c, 3.14.., -3.14..) is fp32
        pi, half_pi, quarter_pi = (self.constant(v, dtype) for v in (math.pi, math.pi / 2, math.pi / 4))
        y_pos = self._emit(f"({y} > 0) | (({y} == 0) & (1.0 / {y} > 0))", torch.bool)  # y's sign, zeros too
        x_neg = self._emit(f"({x} < 0) | (1.0 / {x} < 0)", torch.bool)
        general = e(f"tl.where({x} > 0, {base}, tl.where({x} < 0, tl.where({y_pos}, {base} + {pi}, {base} - {pi}), "
                    f"tl.where({x} != {x}, {x}, tl.where({y} > 0, {half_pi}, tl.where({y} < 0, -{half_pi}, "
                    f"{x} + {y})))))")  # x zero or NaN: x NaN gives NaN, not +-pi/2
        zero_y = e(f"tl.where({x_neg}, tl.where({y_pos}, {pi}, -{pi}), {y})")
        both_inf = e(f"tl.where({x} > 0, {quarter_pi}, 3.0 * {quarter_pi})")
        return e(f"tl.where(({y} == 0) & ({x} == {x}), {zero_y}, tl.where((tl.abs({x}) == float('inf')) & "
                 f"(tl.abs({y}) == float('inf')), tl.where({y_pos}, {both_inf}, -{both_inf}), {general}))")

    def fmax(self, a: str, b: str) -> str:
        return self._fmin_fmax("fmax", a, b)

    def fmin(self, a: str, b: str) -> str:
        return self._fmin_fmax("fmin", a, b)

    def _fmin_fmax(self, name: str, a: str, b: str) -> str:
        """Compiled for the GPU, ``tl.maximum``/``tl.minimum`` without NaN propagation: LLVM's ``maxnum``, the
        PTX ``max.f32`` that CUDA's ``fmaxf`` (eager's CUDA kernel) compiles to (libdevice has no ``fmax`` in
        Triton 3.6); interpreted, where ``tl.maximum`` is NumPy's NaN-propagating one, the formula in ``BINARY``,
        eager's CPU answer (of two zeros, the first)."""
        fmt, kind = BINARY[name]
        dtype = self._result(kind, a, b)
        if self.interpret or not dtype.is_floating_point:
            return self._emit(fmt.format(a, b), dtype)
        return self._emit(f"tl.{'maximum' if name == 'fmax' else 'minimum'}({a}, {b})", dtype)

    def maximum(self, a: str, b: str) -> str:
        return self._min_max("maximum", a, b)

    def minimum(self, a: str, b: str) -> str:
        return self._min_max("minimum", a, b)

    def _min_max(self, name: str, a: str, b: str) -> str:
        """[Note: maximum of equals] in triton_ops.py: of two zeros, eager's CPU kernel returns the first operand
        (``std::max``), and the formula in ``BINARY`` does too.  Eager's CUDA kernel orders -0.0 below +0.0
        instead (``maximum(-0.0, 0.0)`` and ``maximum(0.0, -0.0)`` are both +0.0, the minimum of them -0.0; so
        ``(-0.0).clamp(min=0)`` and ``relu(-0.0)`` are +0.0), measured on an H200: on the GPU, two zeros are
        told apart by the sign of ``1 / x`` (arithmetic on them, ``-(-a + -b)``, was folded away by the compiler)."""
        fmt, kind = BINARY[name]
        dtype = self._result(kind, a, b)
        pick = fmt.format(a, b)
        if self.interpret or not dtype.is_floating_point:
            return self._emit(pick, dtype)
        keep_a = f"1.0 / {a} > 0" if name == "maximum" else f"1.0 / {a} < 0"  # a is +0.0 (maximum), -0.0 (minimum)
        return self._emit(f"tl.where(({a} == 0) & ({b} == 0), tl.where({keep_a}, {a}, {b}), {pick})", dtype)

    def __getattr__(self, name: str):
        if name in UNARY:
            fmt, kind = UNARY[name]
            if self.interpret and name in INTERPRETED_UNARY:
                fmt = INTERPRETED_UNARY[name]
            elif not self.interpret and name in GPU_UNARY:
                fmt = GPU_UNARY[name]
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


# f(x) rounds to x for every fp32 denormal x (so a flushed libdevice result is replaced by x itself).  tanh is
# too, but it is the hot one (every GELU-tanh): the select cost the bf16 GELU-tanh kernel 4% on an H200 (0.082 ->
# 0.086 ms), so a denormal's tanh is 0 on the GPU, as in torch.compile's kernels.
_IDENTITY_NEAR_ZERO = frozenset({"expm1", "log1p", "sinh", "asinh", "atanh", "atan", "asin"})


def _promote(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    if a == torch.bool:
        return b
    if b == torch.bool:
        return a
    return torch.promote_types(a, b)
