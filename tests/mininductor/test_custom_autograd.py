"""User-defined ``torch.autograd.Function`` in a compiled function: its ``apply`` is a graph break, so the code
around it is compiled and its own backward runs, as in eager.

Compares values *and* gradients with eager PyTorch and pins frames and graph breaks.  A regression test from the
training fuzz round 8.
"""
import pytest
import torch

import minidynamo

from .utils import assert_same, leaves

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


class _CubedGrad(torch.autograd.Function):
    """Forward ``x * x``, a deliberately different backward (``3 * g * x``): eager's gradient is the user's."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * g * x


def _through_custom_function(x, w):
    return (_CubedGrad.apply((x @ w).sin()) * 2).sum()


def test_custom_autograd_function_breaks_the_graph_and_keeps_its_backward():
    """``MyFunction.apply`` was inlined into autograd's own machinery (``_is_setup_context_defined`` became a
    graph op with a function argument): an internal error, and the whole frame ran eagerly.  Now it is a graph
    break: the code before and after it is compiled, and its user-written backward runs, as in eager.
    (Training round 8.)"""
    compiled = minidynamo.minicompile(_through_custom_function, backend="inductor")
    (x, w), (x_ref, w_ref) = leaves(torch.randn(3, 4), torch.randn(4, 4))
    out, ref = compiled(x, w), _through_custom_function(x_ref, w_ref)
    assert_same(out, ref, atol=1e-5, rtol=1e-4)
    out.backward()
    ref.backward()
    assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    assert_same(w.grad, w_ref.grad, atol=1e-5, rtol=1e-4)
    assert not minidynamo.counters["eager_fallback"]
    assert sum(minidynamo.counters["graph_break"].values()) == 1 and minidynamo.counters["frames"]["ok"] == 2
