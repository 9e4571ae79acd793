"""Special functions in a Triton kernel: ``erfc``, ``lgamma`` and ``erfinv`` (mirrors the ``erfc``/``lgamma``/
``erfinv`` methods of ``TritonOverrides`` in ``torch/_inductor/codegen/triton.py``).

On the GPU each is CUDA's libdevice function, as eager's CUDA kernel calls the same ([Note: libdevice on the
GPU]).  Triton's interpreter has no libdevice, so there each is computed in fp64 from what it has (``tl.exp``,
``tl.log``, ``tl.sin``, ``tl.erf``, ``tl.sqrt``, ``tl.floor``) and rounded once to the result's dtype:

* ``erfc``: ``1 - erf(|x|)`` below 3, a continued fraction above (``1 - erf`` is 0 from 3.9 in fp32);
* ``lgamma``: Lanczos' approximation from 0.5 up, the reflection formula below, C's answers at the poles;
* ``erfinv``: a closed-form first guess, then Halley steps on ``erf(y) = x``, written with ``erfc`` near +-1
  where ``erf(y) - x`` would cancel.

A mixin of ``TritonOverrides`` (needs ``_emit``, ``_libdevice``, ``_float``, ``_odd``, ``interpret``).
"""
from __future__ import annotations

import math

import torch

from .triton_ops import TL_DTYPE

# Lanczos' approximation with g = 7 and nine terms (the widely published set): Gamma(z + 1) =
# sqrt(2 pi) * t**(z + 0.5) * exp(-t) * A(z), t = z + g + 0.5, A(z) = c0 + sum_k c_k / (z + k); about 1e-15
# relative to Gamma for z >= -0.5.
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


class SpecialFunctions:
    """``erfc``, ``lgamma`` and ``erfinv`` for ``TritonOverrides``."""

    def _in_fp64(self, x: str) -> tuple[torch.dtype, str]:
        """The result dtype of a float op on ``x``, and ``x`` as an fp64 variable."""
        return self._float(x), self._emit(f"{x}.to(tl.float64)", torch.float64)

    def _from_fp64(self, value: str, dtype: torch.dtype) -> str:
        return value if dtype == torch.float64 else self._emit(f"{value}.to({TL_DTYPE[dtype]})", dtype)

    def erfc(self, x: str) -> str:
        """The complementary error function, without the cancellation of ``1 - erf(x)``, which is 0 from ``x =
        3.9`` (fp32; fp64: 5.9) where the answer is still a normal number (``erfc(9) = 4.1e-37``). Under the
        interpreter, in fp64 whatever the dtype: below ``|x| = 3``, ``1 - erf(|x|)`` is within 2.4e-12 of the
        answer; from 3 on, the continued fraction ``exp(-a^2) / (sqrt(pi) * (a + (1/2) / (a + 1 / (a + (3/2) /
        ...))))``, 24 levels deep, evaluated from the bottom up, within 6e-14 (the rounding of ``a^2``); a
        negative ``x`` gives ``2 - erfc(-x)``."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("erfc", x)
        dtype, wide = self._in_fp64(x)
        return self._from_fp64(self._erfc64(wide), dtype)

    def _erfc64(self, x: str) -> str:
        e = lambda text: self._emit(text, torch.float64)
        a = e(f"tl.abs({x})")
        fraction = a
        for k in range(24, 0, -1):
            fraction = e(f"{a} + {k / 2} / {fraction}")
        tail = e(f"tl.exp(-{a} * {a}) / ({math.sqrt(math.pi)!r} * {fraction})")
        positive = e(f"tl.where({a} < 3.0, 1.0 - tl.erf({a}), {tail})")
        return e(f"tl.where({x} < 0, 2.0 - {positive}, {positive})")

    def lgamma(self, x: str) -> str:
        """``log|Gamma(x)|``.  Under the interpreter, in fp64: for ``x >= 0.5`` Lanczos' approximation, ``(z +
        0.5) log(t) - t + log(sqrt(2 pi) A(z))`` with ``z = x - 1``, within a few 1e-15 (absolute near the zeros
        at 1 and 2, relative elsewhere); below 0.5 the reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)``, the
        sine taken of the distance from ``x`` to the nearest integer (exact in fp64, and -1e-30's is 1e-30, not
        1 - 1e-30 rounded to 1), so that no ``pi * x`` is rounded.  C's edges: +inf at 0, -0, the negative integers and +-inf; NaN stays NaN."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("lgamma", x)
        dtype, a = self._in_fp64(x)
        e = lambda text: self._emit(text, torch.float64)
        reflected = e(f"tl.where({a} < 0.5, 1.0 - {a}, {a})")  # >= 0.5 either way
        lanczos = self._lanczos_lgamma(reflected)
        distance = e(f"tl.abs({a} - tl.floor({a} + 0.5))")  # to the nearest integer: exact, even for -1e-30
        small = e(f"tl.log({math.pi!r} / tl.sin({math.pi!r} * {distance})) - {lanczos}")
        value = e(f"tl.where({a} < 0.5, {small}, {lanczos})")
        pole = e(f"(({a} <= 0) & ({a} == tl.floor({a}))) | (tl.abs({a}) == float('inf'))")
        return self._from_fp64(e(f"tl.where({pole}, float('inf'), {value})"), dtype)

    def _lanczos_lgamma(self, x: str) -> str:
        e = lambda text: self._emit(text, torch.float64)
        z = e(f"{x} - 1.0")
        series = e(" + ".join([repr(_LANCZOS[0])] + [f"{c!r} / ({z} + {k}.0)" for k, c in enumerate(_LANCZOS)
                                                     if k]))
        t = e(f"{z} + {_LANCZOS_G + 0.5!r}")
        return e(f"({z} + 0.5) * tl.log({t}) - {t} + tl.log({math.sqrt(2 * math.pi)!r} * {series})")

    def erfinv(self, x: str) -> str:
        """The inverse error function.  Under the interpreter, in fp64, on ``a = |x|``: Winitzki's closed form
        (within 2e-3) as the first guess ``y``, then three Halley steps on ``f(y) = erf(y) - a``, cubically
        convergent: ``y -= u / (1 + y u)`` with ``u = f / f'`` and ``f' = 2 / sqrt(pi) exp(-y^2)``.  From ``a =
        0.5`` on, ``f`` is ``(1 - a) - erfc(y)``: ``1 - a`` is exact there, where ``erf(y) - a`` would lose the
        digits of a ``y`` near the tails.  C's edges: +-inf at +-1, NaN beyond and for NaN, -0 at -0."""
        if not self.interpret:  # [Note: libdevice on the GPU]
            return self._libdevice("erfinv", x)
        dtype, wide = self._in_fp64(x)
        e = lambda text: self._emit(text, torch.float64)
        a = e(f"tl.abs({wide})")
        log_term = e(f"tl.log((1.0 - {a}) * (1.0 + {a}))")
        k = 0.147  # Winitzki's constant
        b = e(f"{2 / (math.pi * k)!r} + 0.5 * {log_term}")
        y = e(f"tl.sqrt(tl.sqrt({b} * {b} - {log_term} / {k!r}) - {b})")
        for _ in range(3):
            f = e(f"tl.where({a} < 0.5, tl.erf({y}) - {a}, (1.0 - {a}) - {self._erfc64(y)})")
            u = e(f"{f} / ({2 / math.sqrt(math.pi)!r} * tl.exp(-{y} * {y}))")
            y = e(f"{y} - {u} / (1.0 + {y} * {u})")
        edges = e(f"tl.where({a} == 1.0, float('inf'), tl.where({a} > 1.0, float('nan'), {y}))")
        return self._from_fp64(self._odd(wide, edges, torch.float64), dtype)
