"""More op-level programs, each one a bug a corpus of ~200 programs found (run through ``minicompile`` at three
shapes, with and without ``dynamic=True``): symbolic index printing, one-element arg reductions, a functional's
``inplace=True``, low-precision rounding, and a 0-d index tensor on the per-shape path. Budget: ~15 s on 2 cores."""
import warnings

import pytest
import sympy
import torch
import torch.nn.functional as F

import minidynamo
import mininductor
from mininductor import metrics
from mininductor.indexing import FloorDiv, ModularIndexing, texpr
from mininductor.runtime import KernelLauncher

from .utils import DEVICE, assert_same, check

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _run_shapes(fn, make_args, shapes, dynamic=None):
    """``minicompile(fn)`` called at each shape in turn, compared with eager (outputs and mutated inputs)."""
    compiled = minidynamo.minicompile(fn, dynamic=dynamic)
    for shape in shapes:
        args = make_args(*shape)
        ours, theirs = [a.clone() for a in args], [a.clone() for a in args]
        assert_same(compiled(*ours), fn(*theirs), atol=1e-5, rtol=1e-5)
        assert_same(ours, theirs)
    return compiled


def test_symbolic_divisor_and_power_and_max_print_as_python_and_triton():
    s0, s1 = sympy.symbols("s0 s1", positive=True, integer=True)
    x = sympy.Symbol("xindex", integer=True, nonnegative=True)
    assert texpr(FloorDiv(x, s0 * s1)) == "(xindex // (s0*s1))"  # was ``xindex // s0*s1``: out of bounds
    assert texpr(ModularIndexing(x, s0, s1 + 1)) == "((xindex // s0) % (s1 + 1))"
    assert texpr(s0**2 * x) == "xindex*(s0*s0)"  # the interpreter's scalar tensors have no ``**``
    assert texpr((s0**2 + 1) // 2) == "(((s0*s0) + 1) // 2)"  # sympy's floor(s0**2/2 + 1/2)
    assert texpr(sympy.Max(1, s0 - s1)) == "max(1, s0 + (-1)*s1)"
    assert texpr(sympy.Max(1, s0 - s1), kernel=True) == "tl.maximum(1, s0 + (-1)*s1)"


def test_broadcast_of_three_symbolic_shapes():
    """(a, 1, c) * (1, b, 1) + (c,): the output's dim 0 index is ``xindex // (b*c)``."""
    def fn(a, b, c):
        return a * b + c - a / (b.abs() + 1)
    _run_shapes(fn, lambda a, b, c: (torch.randn(a, 1, c), torch.randn(1, b, 1), torch.randn(c)),
                [(3, 5, 11), (2, 7, 6), (4, 3, 9)])
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks


def test_square_sizes_compile_symbolically():
    """A flattened s x s matrix (stride ``s0**2``) and a causal mask of a symbolic size."""
    def fn(x):
        s = x.shape[0]
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        return x.reshape(-1)[::2] * 2, x.t().reshape(-1) + 1, x.masked_fill(~mask, 0.0).softmax(-1)
    _run_shapes(fn, lambda n: (torch.randn(n, n),), [(5,), (7,), (3,)], dynamic=True)
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks


def test_conv_output_stride_with_max_compiles_symbolically():
    """conv1d's output length ``L - k + 3`` gets the stride ``Max(1, L - k + 3)`` when the weight is dynamic too."""
    _run_shapes(lambda x, w: F.conv1d(x, w, padding=1).relu(),
                lambda n: (torch.randn(2, 5, n), torch.randn(4, 5, 3)), [(5,), (7,)], dynamic=True)
    assert not metrics.symbolic_fallbacks


def test_arg_reductions_over_one_element():
    """argmax/argmin over a size-1 dim (or a 0-d tensor) is 0; it was a reduction kernel without RBLOCK."""
    x = torch.randn(1, 5, 1)
    check(lambda x: (x.argmax(0), x.argmin(-1, keepdim=True), x.max(2), x[:, :1].argmax()), x)
    check(lambda s: (s.argmax(), s.argmin(), s.sum(), s.amax()), torch.tensor(0.7))


def test_functional_inplace_flag_on_an_input_is_kept():
    """``F.relu(x, inplace=True)`` with its result unused was dead code to the translator: the mutation was lost."""
    def fn(x):
        F.relu(x, inplace=True)
        F.hardtanh(x, -0.5, 0.5, True)  # positional ``inplace``
        x.clamp_(max=0.4)
        return x.sum()

    def on_intermediate(x):
        h = x * 3
        F.leaky_relu(h, 0.2, inplace=True)
        return h.sum(1)
    _run_shapes(fn, lambda n: (torch.randn(n, 6),), [(4,)])
    _run_shapes(on_intermediate, lambda n: (torch.randn(n, 6),), [(4,)])


def test_a_rounding_that_only_reaches_a_store_keeps_fp_contraction():
    """A bf16 GELU computes in fp32 and rounds once, into its store: nothing is computed with a rounded value, so
    the kernel keeps FP contraction (rounded once, not once per cast); a bf16 chain that computes with a rounded
    value does not ([Note: rounding survives only without FP contraction])."""
    import torch.nn.functional as F
    x = torch.randn(16, 24).bfloat16()
    gelu = check(lambda x: F.gelu(x, approximate="tanh"), x, atol=1e-2, rtol=1e-2, kernels=1)
    assert "fp_fusion=False" not in gelu.source
    assert gelu.source.count(".to(tl.bfloat16).to(tl.float32)") + gelu.source.count("0x7FFF") <= 1
    chain = check(lambda x: (x + 1) * 2, x, atol=1e-2, rtol=1e-2, kernels=1)
    assert "fp_fusion=False" in chain.source


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_results_round_like_eager(dtype):
    """``(y + 1).float()`` with ``y`` bf16: eager rounds ``y + 1`` to bf16 first (``emulate_precision_casts``).
    On the GPU that needs the kernel compiled without FP contraction, or ``x * 3 - 1`` becomes one fp16 FMA
    ([Note: rounding survives only without FP contraction])."""
    x = torch.randn(7, 13)
    compiled = check(lambda x: ((x.to(dtype) + 1).float(), (x.to(dtype) * 3 - 1).exp().float(),
                                (x.to(dtype) * 3 - 1).float()), x, atol=1e-6, rtol=1e-6, kernels=1)
    assert "fp_fusion=False" in compiled.source
    gpu = KernelLauncher(None, "poi", 91, 1, "cuda", fp_fusion=False)  # configs only: nothing is launched
    assert all(cfg["enable_fp_fusion"] is False for cfg in gpu.configs)
    assert "enable_fp_fusion" not in KernelLauncher(None, "poi", 91, 1, "cpu", fp_fusion=False).configs[0]
    with mininductor.config.patch(emulate_precision_casts=False):  # Inductor's default: off by an ulp
        check(lambda x: (x.to(dtype) + 1).float(), x, atol=2e-2, rtol=2e-2)


def test_zero_dim_index_tensor_on_the_per_shape_path():
    """``x[i]`` with a 0-d index tensor reads ``i``'s value: specialising the graph per shape raised at call time;
    now the graph runs eagerly (counted), like a static graph with a data-dependent shape."""
    def fn(x, i):
        return x[i] * 2, x[:, i], x.narrow(0, 1, 2) * i
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run_shapes(fn, lambda a, b: (torch.randn(a, b), torch.tensor(2)), [(7, 13), (5, 11), (9, 3)])
    assert "whole graph (data-dependent shape)" in metrics.fallback_ops


@pytest.mark.skipif(DEVICE != "cpu", reason="CPU tensors only")
def test_training_through_an_inplace_relu_and_new_shapes():
    def fn(x, w):
        h = x @ w
        F.relu(h, inplace=True)
        return F.layer_norm(h, (h.shape[-1],)).sum()
    compiled = minidynamo.minicompile(fn)
    for n in (3, 5):
        x, w = torch.randn(n, 4), torch.randn(4, 6)
        xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
        xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
        compiled(xa, wa).backward()
        fn(xe, we).backward()
        assert_same((xa.grad, wa.grad), (xe.grad, we.grad), atol=1e-4, rtol=1e-4)
