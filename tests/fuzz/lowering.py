"""Differential fuzzing of mininductor's lowerings: random small programs, compiled against eager PyTorch.

    .venv/bin/python tests/fuzz/lowering.py SEED COUNT            # inference: values, dtypes, shapes
    .venv/bin/python tests/fuzz/lowering.py SEED COUNT --grad     # training: values and input gradients
    .venv/bin/python tests/fuzz/lowering.py SEED COUNT --zero     # sizes of 0 and 1 more often
    .venv/bin/python tests/fuzz/lowering.py SEED COUNT --dynamic  # dynamic=True, at two shapes
    .venv/bin/python tests/fuzz/lowering.py SEED COUNT --grad --dynamic  # training, dynamic=True
    python tests/fuzz/lowering.py SEED COUNT --device cuda  # any mode, on a GPU: real Triton kernels vs eager CUDA
    .venv/bin/python tests/fuzz/lowering.py SEED COUNT --dynamic --int  # an int input used as a size (any mode)
    .venv/bin/python tests/fuzz/lowering.py SEED COUNT --matmul  # mostly library matmuls (any mode)
    .venv/bin/python tests/fuzz/lowering.py SEED COUNT --scatter  # reductions and scatters (any mode)

Not collected by pytest (no ``test_`` file); a developer's tool, run by hand (about 0.1 s a program on a CPU,
through Triton's interpreter; the seventeenth session ran about 8,000 inference, 6,000 gradient and 7,500
``--dynamic`` programs). Each seed is a program: one to three inputs (float16/bfloat16/float32/float64, integers,
bool; broadcast, column-major, with gaps, sometimes holding NaN, infinities and signed zeros) and one to six steps
drawn from unary, binary, reduction, scan, view and pooling ops, and library matmuls (``x @ x.T``, ``addmm``,
``baddbmm`` with a broadcast bias, on transposed and strided operands). A program eager refuses is skipped; every
other one must give eager's results. A mismatch or an error is printed with its seed and steps; rerun one seed with
``SEED 1`` to look at it. The last line counts programs and the ATen ops that fell back (no lowering: correct, but not
compiled).

Known differences that are not bugs (left out of the op lists, or reported as a mismatch to be read): the sign bit
of a NaN (``signbit``, ``copysign``: eager's CPU kernels and NumPy make NaNs with different signs, and CUDA a third
way); eager's CPU ``cosh``/``sinh`` overflow to inf below float32's largest value (seed 9720254 of --matmul, in bfloat16), its vectorised ``gelu(inf)`` is
NaN, its vectorised ``gelu`` is -0.0 from x = -5.5274 down (its ``erf`` reaches -1), where its scalar path and ours
give -1.6e-7 (a ``g / g`` after it shows it: NaN against 1; seed 47066 of --dynamic), and its bfloat16
``erf(1e-30)`` is 0, where we return the finite (or infinite) answer; its fp32 ``erfc(10.05)`` is 0 where float64's
7.5e-46 rounds to the smallest denormal, 1.4e-45 (ours), which a ``where(v > 0)`` after it shows (seed 6810219 of
--grad --int --dynamic); ill-conditioned chains (``sin`` of a ``expm1``
of 1e5, or of an fp64 ``expm1`` of 102, 2e44: seed 9100164 of --grad --int --dynamic; ``sin`` of an ``exp2`` of 192, 8e57, one ulp apart: seed 6600050 of --grad --zero --int --dynamic; ``sin`` of an fp64
``cosh`` of 297, 4e128: seed 9770034 of --matmul --grad; ``cos``
after two fp32 ``addcmul``s, whose gradients eager's and ours both miss float64's by more than their size: seed
6410030 of --grad --dynamic; after an fp32 ``addcmul`` or ``baddbmm``, seeds 9701311 and 9710153 of --grad, where
both miss float64's gradient by 400 and 2,000 on scales of 480 and 1,450, ours and eager's 0.06 and 20 apart;
a bfloat16 ``pow`` of values near 1e38 after ``logit`` and ``atan``, whose condition number ``|y ln x|`` of about
90 turns one bfloat16 ulp of its inputs into a 3x difference: seed 9720096 of --matmul) amplify one-ulp
differences; eager's CPU ``prod`` of float16 multiplies in float16 (an overflow to inf, then
inf * 0 is NaN), its ``cumsum`` of float32 adds in float64 and its ``var``/``std`` of float32 accumulate in
float64 (a squared deviation past 3.4e38 stays finite there; seed 963892 of --zero --int, and 9202832 of
--zero --dynamic, a ``digamma`` of it), where we, like eager's CUDA kernels, use float32 (a
``cosh`` after a long ``cumsum`` shows it); eager's ``softplus`` (and ``mish``) of x below -88 is a float32 denormal
where its decomposition ``log1p(exp(x))`` (ours and upstream's) is 0, which a ``logical_or`` or ``all`` after it
shows; an op eager refuses for a dtype (``log_softmax`` of a bool tensor) but runs without complaint on an empty
tensor, where our trace refuses it always; eager's CPU ``logsumexp`` of bfloat16 rounds every step to bfloat16,
where its decomposition (ours and upstream's) computes in float32 and rounds once, an ulp apart, which a
``div_floor`` after it can turn into 1 (seed 41300); eager's vectorised CPU ``addcmul`` fuses its multiply and
add (one rounding) where the interpreter rounds twice, an ulp apart, which ``cos`` of a large value, a
``remainder`` or ``logit``'s pole at 1 amplifies (seeds 925493, 925562, 941283 of --int); the interpreter's
fp32 ``exp2`` (NumPy's) is 0 below 2^-149.5, where eager rounds to the smallest denormal, which a ``log2`` after it
shows as -inf against -149 (seed 1600052); a ``prod`` whose row both overflows and underflows is inf, 0 or NaN
depending on the order of its products, which differs from eager's vectorised order (seed 2201679 of --zero
--int); eager's fp32 ``expm1(-17)`` is -1.0 where the correctly rounded answer, ours, is -0.99999994, which an
``asin`` after it turns into -pi/2 against -1.57045 (seed 2205897 of --zero --int); the ``var`` of fp64 values
that differ by a few ulp of their mean (1.87e16, whose ulp is 4) is noise of about ulp^2 in any order of
operations: exactly 1.75, eager's 2.0, our Welford combine's 14.0 (seed 2300270 of --grad --int --dynamic); eager's
fp64 ``tanh(-19.04)`` is -0.9999999999999999 where the correctly rounded answer (ours) is -1, so a negative base
raised to it is NaN in eager and ``1 / x`` in ours (seed 5907464 of --int --matmul); a bf16 CPU matmul of inputs
holding NaN is NaN at two more outputs in ours than in eager's, the same ATen op called with other strides (seed
5902469 of --int --matmul). On CUDA (``--device cuda``): eager's fp16/bf16 ``cumsum``
and ``cumprod`` round every partial sum (product) to the tensor's type in its parallel scan's order, where ours
computes in fp32 and rounds each output once (seeds 1400406, 1400955, 1412646 of the twenty-third session, and the
fp16 ``cumsum`` of 7500345, 7503120 and 7508173 of --matmul, twenty-sixth; ours is the closer to float64); its
``sigmoid`` and ``tan`` use the accurate ``expf``/``tanf`` where ours use Triton's fast
``exp``, ``sin`` and ``cos`` (a few ulp; a ``floor`` after them can show it); its ``softmax`` is an ulp from ours
(ours the closer to float64), which a ``floor_divide`` after it can show (seed 7105392 of --matmul, twenty-fifth
session); its fp32 ``addcmul`` rounds other than ours, ``a + (0.5 * a) * b`` with two roundings, and is not a
single FMA either (26% of 1e6 random elements differ from the fused result), an ulp apart, which a
``remainder`` after it amplifies (seed 7100488 of --matmul). On either device: eager's ``bmm`` of an empty
product skips its check that both operands have one dtype, where ours raises as for any other shape (seed
7507385 of --matmul --zero). Twenty-seventh session: an ``fmod(1, d)`` of a product ``d`` of about 6e-18 (a
quotient of 1.7e17) turns the last-ulp difference between our order of products and eager's into 2% (seed
9202074 of --zero --dynamic); the interpreter's fp64 ``expm1`` past 0.25 is ``exp(x) - 1`` (at most 1.7 ulp
from the exact value where eager's is within 0.5), which a ``gt`` between nearly equal values after it shows
(seed 9201171 of --zero --dynamic).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import minidynamo
from mininductor import metrics
from tests.mininductor.utils import _clone, assert_same, compile_fn

FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int32, torch.int64, torch.int8, torch.uint8, torch.int16]
UNARY = ["sin", "cos", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "neg", "floor", "ceil", "round",
         "trunc", "reciprocal", "exp2", "expm1", "log1p", "log2", "erf", "relu", "sign", "frac", "square", "atan",
         "asin", "acos", "sinh", "cosh", "asinh", "atanh", "lgamma", "isnan", "isinf", "isfinite", "logical_not",
         "gelu", "silu", "softplus", "hardtanh", "leaky_relu", "elu", "nan_to_num", "digamma", "erfc", "erfinv",
         "log10", "hardsigmoid", "hardswish", "mish", "logit", "sgn", "deg2rad", "bitwise_not"]
BINARY = ["add", "sub", "mul", "div", "div_floor", "div_trunc", "remainder", "fmod", "pow", "maximum", "minimum",
          "fmax", "fmin", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor", "floor_divide", "hypot", "where", "lerp", "xlogy", "lshift",
          "rshift", "clamp_t", "addcmul", "nextafter", "heaviside", "matmul_bt"]
REDUCTIONS = ["sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "var", "std", "logsumexp", "softmax",
              "log_softmax", "any", "all", "max_dim", "min_dim", "norm", "cumsum", "cumprod", "sum_dtype",
              "count_nonzero", "aminmax", "nansum", "var_mean"]
VIEWS = ["t", "slice", "unsqueeze", "expand", "flip", "permute", "reshape", "cat", "stack", "narrow", "select",
         "roll", "repeat", "pad", "diag", "tril", "transpose_contig", "index_select", "gather", "maxpool", "avgpool",
         "adaptive_max", "adaptive_avg", "gram", "gram_t", "baddbmm"]  # (a new op goes in another list: the
# seeds that tests replay must keep drawing the programs they drew; --scatter draws the scatters)
# Ops without a derivative, or whose derivative is not defined where random inputs land (kinks, poles, domains):
# the --grad programs leave them out.
NOT_DIFFERENTIABLE = {
    "floor", "ceil", "round", "trunc", "sign", "isnan", "isinf", "isfinite", "logical_not", "sgn", "bitwise_not",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "lshift", "rshift", "div_floor", "div_trunc", "floor_divide", "argmax", "argmin", "any", "all",
    "count_nonzero", "nextafter", "heaviside", "min_dim", "frac", "remainder", "fmod", "digamma", "lgamma", "erfinv",
    "logit", "atanh", "asin", "acos", "hardtanh", "hardsigmoid", "hardswish", "relu", "leaky_relu", "nan_to_num",
    "cumprod", "prod", "amax", "amin", "aminmax", "maximum", "minimum", "fmax", "fmin", "max_dim", "clamp_t",
    "xlogy", "pow", "rsqrt", "sqrt", "log", "log2", "log10", "reciprocal", "div", "std", "norm", "atan2", "hypot",
    "index_select", "gather"}


# ------------------------------------------------------------------------------------------------ the ops
def unary(name: str, x: torch.Tensor) -> torch.Tensor:
    F = torch.nn.functional
    functional = {"gelu": F.gelu, "silu": F.silu, "softplus": F.softplus, "hardtanh": F.hardtanh,
                  "leaky_relu": F.leaky_relu, "elu": F.elu, "hardsigmoid": F.hardsigmoid,
                  "hardswish": F.hardswish, "mish": F.mish}
    return functional[name](x) if name in functional else getattr(torch, name)(x)


def binary(name: str, a, b) -> torch.Tensor:
    special = {
        "div_floor": lambda: torch.div(a, b, rounding_mode="floor"),
        "div_trunc": lambda: torch.div(a, b, rounding_mode="trunc"),
        "where": lambda: torch.where(a > 0, a, b),
        "lerp": lambda: torch.lerp(a, b, 0.3),
        "lshift": lambda: a << b,
        "rshift": lambda: a >> b,
        "clamp_t": lambda: torch.clamp(a, min=b),
        "addcmul": lambda: torch.addcmul(a, a, b, value=0.5),
        "matmul_bt": lambda: a @ (b.transpose(-1, -2) if b.dim() >= 2 else b),
    }
    return special[name]() if name in special else getattr(torch, name)(a, b)


def reduction(name: str, x: torch.Tensor, dim: int, keepdim: bool) -> torch.Tensor:
    wide = torch.float64 if x.dtype.is_floating_point else torch.int64
    special = {
        "max_dim": lambda: torch.max(x, dim, keepdim=keepdim)[0],
        "min_dim": lambda: torch.min(x, dim, keepdim=keepdim)[1],
        "softmax": lambda: torch.softmax(x, dim),
        "log_softmax": lambda: torch.log_softmax(x, dim),
        "cumsum": lambda: torch.cumsum(x, dim),
        "cumprod": lambda: torch.cumprod(x, dim),
        "sum_dtype": lambda: torch.sum(x, dim, dtype=wide),
        "count_nonzero": lambda: torch.count_nonzero(x, dim),
        "aminmax": lambda: torch.aminmax(x, dim=dim, keepdim=keepdim)[0],
        "norm": lambda: torch.linalg.vector_norm(x, 2, dim, keepdim=keepdim),
        "var_mean": lambda: torch.var_mean(x, dim, keepdim=keepdim, correction=0)[0],
    }
    return special[name]() if name in special else getattr(torch, name)(x, dim, keepdim=keepdim)


def view(name: str, x: torch.Tensor, r: int) -> torch.Tensor:
    d = r % x.dim()
    views = {
        "t": lambda: x.transpose(0, -1),
        "slice": lambda: x[..., 1::2] if x.shape[-1] > 1 else x,
        "unsqueeze": lambda: x.unsqueeze(d),
        "expand": lambda: x.unsqueeze(0).expand(3, *x.shape),
        "flip": lambda: x.flip(d),
        "permute": lambda: x.permute(*reversed(range(x.dim()))),
        "reshape": lambda: x.reshape(-1),
        "cat": lambda: torch.cat([x, x * 2], d),
        "stack": lambda: torch.stack([x, x], d),
        "narrow": lambda: x.narrow(d, 0, max(1, x.shape[d] // 2)),
        "select": lambda: x.select(d, x.shape[d] - 1),
        "roll": lambda: torch.roll(x, 1, d),
        "repeat": lambda: x.repeat(2, *[1] * (x.dim() - 1)),
        "pad": lambda: torch.nn.functional.pad(x, (1, 2), value=3) if x.dtype != torch.bool else x,
        "diag": lambda: torch.diagonal(x, 0, 0, -1) if x.dim() >= 2 else x,
        "tril": lambda: torch.tril(x) if x.dim() >= 2 else x,
        "transpose_contig": lambda: x.transpose(0, -1).contiguous(),
        "index_select": lambda: x.index_select(d, torch.tensor([x.shape[d] - 1, 0, 0]) % max(x.shape[d], 1)),
        "gather": lambda: torch.gather(x, d, torch.arange(x.numel()).reshape(x.shape) * 7 % max(x.shape[d], 1)),
        # (C, H, W) only: windows with padding, ceil_mode and both divisors, from r
        "maxpool": lambda: F.max_pool2d(x, 2 + r % 2, 1 + r % 3 // 2, 1, ceil_mode=r % 5 < 2) if x.dim() == 3 else x,
        "avgpool": lambda: F.avg_pool2d(x, 3, 1 + r % 2, 1, ceil_mode=r % 5 < 2, count_include_pad=r % 3 == 0)
        if x.dim() == 3 else x,
        # output sizes from r: uneven windows, and outputs larger than the input
        "adaptive_max": lambda: F.adaptive_max_pool2d(x, (1 + r % 4, 2 + r % 7)) if x.dim() == 3 else x,
        "adaptive_avg": lambda: F.adaptive_avg_pool2d(x, (2 + r % 5, 1 + r % 3)) if x.dim() == 3 else x,
        # library calls (mm, bmm, dot, addmm, baddbmm) on transposed and strided operands
        "gram": lambda: x @ x.transpose(-1, -2) if x.dim() >= 2 else x @ x,
        "gram_t": lambda: x.transpose(-1, -2) @ x if x.dim() >= 2 else x @ x,
        "baddbmm": lambda: _biased_product(x, r),
        # scatters (kernels that store through indices; the one after a reduction ends its kernel). Into zeros,
        # at most two sources meet at an element (0 + a + b: the same whichever addition runs first); into x,
        # none meet (x + a + b would round differently in another order, which GPU atomics do not fix)
        "index_add": lambda: x.new_zeros(x.shape).index_add(d, _pairs(x.shape[d]), x),
        # (alpha in fp16/bf16: eager's CPU kernel rounds alpha * source first in a slice's scalar tail only,
        # [Note: index_add's alpha in fp16/bf16] in mininductor/decomposition.py; seed 9850119 met it)
        "index_add_self": lambda: x.index_add(d, torch.arange(x.shape[d]).flip(0), x.flip(d),
                                              alpha=1 if x.dtype in (torch.float16, torch.bfloat16) else 2),
        "scatter_add": lambda: x.new_zeros(x.shape).scatter_add(d, _pairs(x.shape[d]).reshape(
            [-1 if k == d else 1 for k in range(x.dim())]).expand(x.shape), x * 3),
    }
    return views[name]()


def _pairs(n: int) -> torch.Tensor:
    """``n`` indices into ``range(n)`` that hit no element more than twice: 0, 1, .., then again from 0."""
    return torch.arange(n) % max(1, (n + 1) // 2)


def _biased_product(x: torch.Tensor, r: int) -> torch.Tensor:
    """``bias + x @ x^T`` (``baddbmm`` for 3 dims, ``addmm`` for 2), the bias one column of ``x``, broadcast."""
    if x.dim() not in (2, 3) or x.shape[-1] == 0:
        return x
    beta, alpha = (1, 1) if r % 3 else (0.5, 2)
    op = torch.baddbmm if x.dim() == 3 else torch.addmm
    return op(x[..., :1], x, x.transpose(-1, -2), beta=beta, alpha=alpha)


# Views sized by the program's int input ``n`` (``--int``): slices, pads, fills and reshapes that take it as a size.
INT_VIEWS = ["head", "narrow", "pad", "new_ones", "reshape", "repeat"]


def int_view(name: str, x: torch.Tensor, n: int) -> torch.Tensor:
    views = {
        "head": lambda: x[:n],
        "narrow": lambda: x.narrow(-1, 0, min(n, x.shape[-1])),
        "pad": lambda: F.pad(x, (0, n)) if x.dtype != torch.bool else x,
        "new_ones": lambda: x.new_ones(n, *x.shape[1:]) * x[:1],
        "reshape": lambda: x.reshape(n, -1) if x.numel() % n == 0 else x,
        "repeat": lambda: x.repeat(n, *[1] * (x.dim() - 1)),
    }
    return views[name]()


# ------------------------------------------------------------------------------------------------ programs
def make_input(rng: random.Random, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        t = torch.randn(shape, dtype=torch.float64) * rng.choice([1, 3, 100])
        if rng.random() < 0.15 and t.numel():
            flat = t.view(-1)
            for _ in range(max(1, flat.numel() // 8)):
                flat[rng.randrange(flat.numel())] = rng.choice(
                    [0.0, float("nan"), float("inf"), -float("inf"), -0.0, 1e-30])
        t = t.to(dtype)
    elif dtype == torch.bool:
        t = torch.rand(shape) < 0.5
    else:
        t = torch.randint(0, 50, shape, dtype=dtype) if dtype == torch.uint8 else \
            torch.randint(-20, 20, shape, dtype=dtype)
    layout = rng.random()
    if layout < 0.2 and t.dim() >= 2:
        return t.transpose(0, 1).contiguous().transpose(0, 1)  # column-major
    if layout < 0.35:  # every other element of a bigger tensor: gaps
        window = tuple(slice(0, None, 2) for _ in shape)
        big = torch.zeros([s * 2 for s in shape], dtype=t.dtype)
        big[window] = t
        return big[window]
    return t


# ``--matmul``: the library matmuls drawn far more often (and views that transpose and slice their operands)
MATMUL_VIEWS = ["gram", "gram_t", "baddbmm"] * 2 + ["t", "slice", "permute", "expand", "select", "narrow"]
SCATTER_VIEWS = ["index_add", "index_add_self", "scatter_add"] * 3 + ["t", "slice", "select", "narrow"]
MATMUL_BINARY = BINARY + ["matmul_bt"] * 8


def generate(seed: int, grad: bool, zero: bool, ints: bool = False, matmul: bool = False,
             scatter: bool = False) -> tuple[list, list[tuple]]:
    """A program: its inputs and its steps (each names an op and which earlier values it reads). With ``ints``
    the last input is an int ``n`` that some steps use as a size (``INT_VIEWS``); with ``matmul``, the steps are
    mostly library matmuls and views (``MATMUL_VIEWS``, ``MATMUL_BINARY``); with ``scatter``, reductions and
    scatters are drawn more often (``SCATTER_VIEWS``: a scatter after a reduction ends the reduction's kernel)."""
    views, binaries = (MATMUL_VIEWS, MATMUL_BINARY) if matmul else (SCATTER_VIEWS, BINARY) if scatter else \
        (VIEWS, BINARY)
    cuts = (0.2, 0.4, 0.65) if scatter else (0.35, 0.7, 0.85)  # unary, binary, reduction, then views
    rng = random.Random(seed)
    torch.manual_seed(seed)  # the inputs' values too: a seed replays alone (``SEED 1``) as it ran in a batch
    ndim = rng.choice([1, 2, 2, 3])
    sizes = [0, 1, 2, 3, 5, 8] if zero else [1, 2, 3, 5, 8, 17, 33]
    long_rows = [130, 1025] if ndim < 3 and rng.random() < 0.3 and not grad else []
    shape = [rng.choice(sizes + long_rows) for _ in range(ndim)]
    dtypes = [torch.float32, torch.float64] if grad else FLOATS * 3 + INTS + [torch.bool]
    dtype = rng.choice(dtypes)
    inputs = []
    for _ in range(rng.choice([1, 2, 3])):
        s = [1 if rng.random() < 0.4 else d for d in shape] if rng.random() < 0.3 else list(shape)
        inputs.append(make_input(rng, s, dtype if grad or rng.random() < 0.7 else rng.choice(dtypes)))
    allowed = (lambda names: [n for n in names if n not in NOT_DIFFERENTIABLE]) if grad else list
    steps = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < cuts[0]:
            steps.append(("unary", rng.choice(allowed(UNARY)), rng.randrange(100)))
        elif r < cuts[1]:
            scalar = rng.choice([2, -3, 0.5, -1.5, 7] + ([] if grad else [0]))
            steps.append(("binary", rng.choice(allowed(binaries)), rng.randrange(100), rng.randrange(100),
                          rng.random() < 0.2, scalar))
        elif r < cuts[2]:
            steps.append(("reduction", rng.choice(allowed(REDUCTIONS)), rng.randrange(100), rng.randrange(4),
                          rng.random() < 0.5))
        elif ints and rng.random() < 0.6:
            steps.append(("int", rng.choice(INT_VIEWS), rng.randrange(100)))
        else:
            steps.append(("view", rng.choice(allowed(views)), rng.randrange(100), rng.randrange(1000)))
    if ints:
        inputs.append(rng.randint(1, 6))
    return inputs, steps


def run_steps(steps: list[tuple], inputs) -> tuple[torch.Tensor, ...]:
    """The program itself: what both eager and the compiler run. Returns its last one or two values."""
    n = inputs[-1] if inputs and isinstance(inputs[-1], int) else None
    values = [t for t in inputs if isinstance(t, torch.Tensor)]
    inputs = values[:]
    for kind, name, *args in steps:
        x = values[args[0] % len(values)]
        if kind == "unary":
            values.append(unary(name, x))
        elif kind == "binary":
            values.append(binary(name, x, args[3] if args[2] else values[args[1] % len(values)]))
        elif x.dim() == 0:
            raise RuntimeError("a 0-d tensor has no dim to reduce or view along")  # eager refuses: skipped
        elif kind == "int":
            values.append(int_view(name, x, n))
        elif kind == "reduction":
            dim = args[1] % x.dim() - (x.dim() if args[1] % 2 else 0)  # negative dims too
            values.append(reduction(name, x, dim, args[2]))
        else:
            values.append(view(name, x, args[1]))
    made = min(len(values) - len(inputs), 2)
    return tuple(values[-made:]) if made else (values[-1] * 1,)


# ------------------------------------------------------------------------------------------------ checks
def _tolerance(inputs: list) -> float:
    return max({torch.float16: 2e-2, torch.bfloat16: 5e-2}.get(a.dtype, 1e-4) for a in inputs
               if isinstance(a, torch.Tensor))


def check_inference(seed: int, inputs, steps) -> str | None:
    """None when the compiled program equals eager (or eager refuses it), else what went wrong."""
    fn = lambda *xs: run_steps(steps, xs)
    try:
        expected = fn(*[_clone(a) for a in inputs])
    except Exception:  # noqa: BLE001 -- eager refuses: not a program to compare
        return "skip"
    try:
        actual = compile_fn(fn, *[_clone(a) for a in inputs])(*[_clone(a) for a in inputs])
    except Exception as e:  # noqa: BLE001
        return f"ERROR {type(e).__name__}: {str(e)[:300]}"
    tol = _tolerance(inputs)
    try:
        assert_same(actual, expected, atol=tol, rtol=tol)
    except AssertionError as e:
        return f"MISMATCH {str(e)[:400]}"
    return None


def check_dynamic(seed: int, inputs, steps) -> str | None:
    """Inference through ``minicompile(dynamic=True)``, called at the program's shapes and again with every
    input's first dim of more than one row doubled: one symbolic compile should serve both (where it cannot, the
    reason is counted by ``main``, and the per-shape compiles must still equal eager)."""
    fn = lambda *xs: run_steps(steps, xs)
    tol = _tolerance(inputs)
    minidynamo.reset()
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for call in range(2):
        if call:
            inputs = _second_call(inputs)
        try:
            expected = fn(*[_clone(a) for a in inputs])
        except Exception:  # noqa: BLE001
            return "skip"
        try:
            actual = compiled(*[_clone(a) for a in inputs])
            assert_same(actual, expected, atol=tol, rtol=tol)
        except AssertionError as e:
            return f"MISMATCH call {call} {str(e)[:400]}"
        except Exception as e:  # noqa: BLE001
            return f"ERROR call {call} {type(e).__name__}: {str(e)[:300]}"
    return None


def _second_call(inputs: list) -> list:
    """The inputs of the second call: every tensor's first dim of more than one row doubled, an int one more."""
    return [a + 1 if isinstance(a, int) else torch.cat([a, a]) if a.dim() and a.shape[0] > 1 else a for a in inputs]


def _values_and_grads(fn, inputs, seed: int):
    # the third input needs no gradient; an int input is passed as it is
    xs = [_clone(a).requires_grad_(k < 2) if isinstance(a, torch.Tensor) else a for k, a in enumerate(inputs)]
    outs = fn(*xs)
    g = torch.Generator().manual_seed(seed)
    terms = [(o * torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device)).sum() for o in outs if o.requires_grad]
    if terms:
        sum(terms).backward()
    return [o.detach() for o in outs], [x.grad for x in xs if isinstance(x, torch.Tensor)]


def check_grad(seed: int, inputs, steps, dynamic: bool = False) -> str | None:
    """Values and input gradients through ``minicompile`` (AOTAutograd + mininductor), then a second call with the
    first dim doubled (a recompile, automatic dynamic shapes; with ``dynamic``, ``dynamic=True`` from the first
    call, so both calls train through one symbolic compile where it can)."""
    fn = lambda *xs: run_steps(steps, xs)
    tol = 1e-3 if inputs[0].dtype == torch.float32 else 1e-6
    minidynamo.reset()
    compiled = minidynamo.minicompile(fn, backend="inductor", dynamic=dynamic or None)
    for call in range(2):
        if call:
            inputs = _second_call(inputs)
        try:
            expected = _values_and_grads(fn, inputs, seed)
        except Exception:  # noqa: BLE001
            return "skip"
        flat = [t for part in expected for t in part if t is not None]
        if any(t.is_floating_point() and not torch.isfinite(t).all() for t in flat):
            return "skip"  # an overflow or a pole: the comparison would say nothing
        try:
            actual = _values_and_grads(compiled, inputs, seed)
        except Exception as e:  # noqa: BLE001
            return f"ERROR call {call} {type(e).__name__}: {str(e)[:300]}"
        for ours, theirs in zip(actual, expected):
            for a, e in zip(ours, theirs):
                if (a is None) != (e is None) or a is not None and not (
                        a.shape == e.shape and torch.allclose(a, e, atol=tol, rtol=tol, equal_nan=True)):
                    return f"MISMATCH call {call}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seed", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--grad", action="store_true", help="training: values and input gradients")
    parser.add_argument("--zero", action="store_true", help="sizes of 0 and 1 more often")
    parser.add_argument("--dynamic", action="store_true", help="dynamic=True at two shapes (with --grad: training)")
    parser.add_argument("--int", action="store_true", help="an int input n that some steps use as a size")
    parser.add_argument("--device", default="cpu", help="where inputs live: cuda compiles real Triton kernels")
    parser.add_argument("--matmul", action="store_true", help="mostly library matmuls (mm, bmm, addmm, baddbmm)")
    parser.add_argument("--scatter", action="store_true", help="reductions and scatters (index_add, scatter_add)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    counts = {"ok": 0, "skipped": 0, "bad": 0}
    fallbacks: dict[str, int] = {}
    try:
        for seed in range(args.seed, args.seed + args.count):
            run_one(seed, args, counts, fallbacks)
    except KeyboardInterrupt:  # `timeout -s INT`: still say how far it got
        print(f"interrupted at seed {seed}")
    print(counts, "fallbacks:", sorted(fallbacks.items(), key=lambda kv: -kv[1]))


def run_one(seed: int, args, counts: dict, fallbacks: dict) -> None:
    """Generate, compile and check one program; count its verdict and its fallbacks, print it if it differs."""
    inputs, steps = generate(seed, args.grad, args.zero, args.int, getattr(args, "matmul", False),
                             getattr(args, "scatter", False))
    inputs = [a.to(args.device) if isinstance(a, torch.Tensor) else a for a in inputs]
    metrics.reset()
    if args.grad:
        verdict = check_grad(seed, inputs, steps, dynamic=args.dynamic)
    else:
        verdict = (check_dynamic if args.dynamic else check_inference)(seed, inputs, steps)
    if metrics.matmul_choices:  # matmuls that ran through a MatmulChoice (MINICOMPILE_MATMUL_TEMPLATE=always)
        counts["template matmuls"] = counts.get("template matmuls", 0) + metrics.matmul_choices
    for op in metrics.fallback_ops:
        fallbacks[str(op).split(" ")[0]] = fallbacks.get(str(op).split(" ")[0], 0) + 1
    for reason in metrics.symbolic_fallbacks:  # --dynamic: why a graph compiled per shape
        key = "per shape: " + str(reason)[:80]
        fallbacks[key] = fallbacks.get(key, 0) + 1
    if verdict is None:
        counts["ok"] += 1
    elif verdict == "skip":
        counts["skipped"] += 1
    else:
        counts["bad"] += 1
        layouts = [(tuple(a.shape), a.dtype, a.stride()) if isinstance(a, torch.Tensor) else a for a in inputs]
        print(f"seed {seed}: {verdict}\n  steps {steps}\n  inputs {layouts}", flush=True)


if __name__ == "__main__":
    main()
