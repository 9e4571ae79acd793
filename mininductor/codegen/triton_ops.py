"""How each simple ``ops.*`` call reads in Triton source: one format string per op (the ops that need more
are methods of ``TritonOverrides`` in ``triton_overrides.py``, after Inductor's class of that name).

Every formula here runs both compiled and under ``TRITON_INTERPRET=1``: no ``libdevice`` (which the interpreter
cannot run), so what needs it is a method that calls it on the GPU only ([Note: libdevice on the GPU]).
NaN follows eager: ``maximum``/``minimum`` propagate NaN (``tl.maximum`` would drop it).

[Note: maximum of equals]  Of two equal operands eager's ``maximum(a, b)``/``minimum(a, b)`` return ``a``
(``std::max``), which only shows for signed zeros: ``maximum(-0.0, 0.0)`` is ``-0.0`` and ``x.clamp(min=0.0)``
keeps ``x = -0.0``. So the formulas pick ``b`` only where it is strictly larger (smaller) or NaN.
"""
from __future__ import annotations

import math

import torch

TL_DTYPE = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16",
    torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}

# name -> (format, result kind). kind: "same" (promoted input dtype), "float" (a float result),
# "bool" (a comparison). Formats use {0}, {1}, {2} for the operands.
UNARY = {
    "abs": ("tl.abs({0})", "same"),
    "neg": ("-{0}", "same"),
    "exp": ("tl.exp({0})", "float"),
    "exp2": ("tl.exp2({0})", "float"),
    "log": ("tl.log({0})", "float"),
    "log2": ("tl.log2({0})", "float"),
    "log10": ("tl.log({0}) * 0.4342944819032518", "float"),
    "sqrt": ("tl.sqrt({0})", "float"),
    "rsqrt": ("tl.rsqrt({0})", "float"),
    "sin": ("tl.sin({0})", "float"),
    "cos": ("tl.cos({0})", "float"),
    "tan": ("tl.sin({0}) / tl.cos({0})", "float"),
    "sigmoid": ("1.0 / (1.0 + tl.exp(-{0}))", "float"),
    "erf": ("tl.erf({0})", "float"),
    "floor": ("tl.floor({0})", "same"),
    "ceil": ("tl.ceil({0})", "same"),
    "trunc": ("tl.where({0} < 0, tl.ceil({0}), tl.floor({0}))", "same"),
    "sign": ("({0} > 0).to({t}) - ({0} < 0).to({t})", "same"),
    "relu": ("tl.where({0} < 0, 0, {0})", "same"),
    "bitwise_not": ("~{0}", "same"),
    "logical_not": ("{0} == 0", "bool"),
    "isnan": ("{0} != {0}", "bool"),
    "isinf": ("tl.abs({0}) == float('inf')", "bool"),
    "isfinite": ("tl.abs({0}) < float('inf')", "bool"),
}

# Under Triton's interpreter these run as NumPy float32 ufuncs, whose SIMD versions vary with the CPU (and NumPy 2.5
# rewrote sin/cos): on one lent GPU machine's CPU an interpreted float32 sin differed from eager by 1.5e-4. Interpreted
# kernels compute them in float64 and round once, which is as close to eager as float32 allows on every CPU.
INTERPRETED_UNARY = {
    "sin": "tl.sin({0}.to(tl.float64)).to({t})",
    "cos": "tl.cos({0}.to(tl.float64)).to({t})",
    "tan": "(tl.sin({0}.to(tl.float64)) / tl.cos({0}.to(tl.float64))).to({t})",
}

# Compiled for the GPU: eager's CUDA relu returns +0.0 for -0.0, its CPU kernel -0.0 ([Note: maximum of equals]).
GPU_UNARY = {
    "relu": "tl.where({0} <= 0, 0, {0})",
}

BINARY = {
    "add": ("{0} + {1}", "same"),
    "sub": ("{0} - {1}", "same"),
    "mul": ("{0} * {1}", "same"),
    "maximum": ("tl.where(({1} > {0}) | ({1} != {1}), {1}, {0})", "same"),  # [Note: maximum of equals]
    "minimum": ("tl.where(({1} < {0}) | ({1} != {1}), {1}, {0})", "same"),
    # fmax/fmin ignore a NaN operand (NaN only when both are); of two zeros eager's CPU kernel returns the first
    "fmax": ("tl.where(({1} > {0}) | ({0} != {0}), {1}, {0})", "same"),
    "fmin": ("tl.where(({1} < {0}) | ({0} != {0}), {1}, {0})", "same"),
    "eq": ("{0} == {1}", "bool"),
    "ne": ("{0} != {1}", "bool"),
    "lt": ("{0} < {1}", "bool"),
    "le": ("{0} <= {1}", "bool"),
    "gt": ("{0} > {1}", "bool"),
    "ge": ("{0} >= {1}", "bool"),
    "logical_and": ("({0} != 0) & ({1} != 0)", "bool"),
    "logical_or": ("({0} != 0) | ({1} != 0)", "bool"),
    "logical_xor": ("({0} != 0) ^ ({1} != 0)", "bool"),
    "bitwise_and": ("{0} & {1}", "same"),
    "bitwise_or": ("{0} | {1}", "same"),
    "bitwise_xor": ("{0} ^ {1}", "same"),
    "copysign": ("tl.where(({1} < 0) | ((1.0 / {1}) < 0), -tl.abs({0}), tl.abs({0}))", "float"),
}

REDUCTION_IDENTITY = {
    "sum": "0", "prod": "1", "any": "0", "all": "1",
    "max": "float('-inf')", "min": "float('inf')",
}


def identity(reduction_type: str, dtype: torch.dtype) -> str:
    if reduction_type in ("max", "argmax") and not dtype.is_floating_point:
        return str(torch.iinfo(dtype).min) if dtype != torch.bool else "0"
    if reduction_type in ("min", "argmin") and not dtype.is_floating_point:
        return str(torch.iinfo(dtype).max) if dtype != torch.bool else "1"
    if reduction_type == "argmax":
        return "float('-inf')"
    if reduction_type == "argmin":
        return "float('inf')"
    return REDUCTION_IDENTITY[reduction_type]


def constant_repr(value, dtype: torch.dtype) -> str:
    if isinstance(value, bool) or dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        # An fp16/bf16 constant holds a value of that type, as eager converts a scalar to the tensor's type
        # (``x16 - 2049`` subtracts 2048); it lives in fp32 registers like every fp16/bf16 value.
        value = float(torch.tensor(float(value), dtype=dtype))
        if math.isnan(value):
            return "float('nan')"
        if value in (float("inf"), float("-inf")):
            return f"float('{value}')"
        return repr(value)
    info = torch.iinfo(dtype)  # eager wraps an out-of-range scalar (int8 tensor < 300 compares with 44)
    return str((int(value) - info.min) % (info.max - info.min + 1) + info.min)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp16/bf16 values live in fp32 registers; they are rounded by ``to_dtype`` and on store."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
