"""Mutation and aliasing like eager: in-place ops on inputs and intermediates (``F.relu(x, inplace=True)`` with
its result unused), decompositions that ``copy_`` into slices (functionalized again), outputs that alias an input
stay views of it, and gradients flow through an in-place relu at new shapes. Found by the op corpora. Budget: a
few seconds on 2 cores."""
import pytest
import torch
import torch.nn.functional as F

import minidynamo

from .utils import DEVICE, assert_same, check, run_shapes

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


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
    run_shapes(fn, lambda n: (torch.randn(n, 6),), [(4,)])
    run_shapes(on_intermediate, lambda n: (torch.randn(n, 6),), [(4,)])


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


def test_circular_pad_is_functionalized():
    """``F.pad(x, mode="circular")`` traces (through the CompositeImplicit ``_pad_circular``) to ``copy_`` into
    slices of an ``empty``, which functionalization did not see: the copies fell back and wrote into a buffer the
    output never read -- all zeros (program ``pad_circular``). The graph is now functionalized again."""
    x = torch.randn(3, 4)
    check(lambda x: F.pad(x.unsqueeze(0), (1, 2), mode="circular") * 2, x, fallbacks=0)
    check(lambda x: F.pad(x[None, None], (1, 1, 2, 1), mode="circular"), x, fallbacks=0)


def test_outputs_that_alias_inputs_stay_views():
    """``y = x.view(-1); y.mul_(2); return y`` returns a view of ``x`` in eager; ours returned the functional
    graph's own buffer, so writing to ``y`` afterwards no longer wrote ``x`` (programs ``alias_inplace_view``,
    ``setitem_return_view``, ``float_of_float``). [Note: outputs that alias inputs]"""
    def fn(x):
        y = x.view(-1)
        y.mul_(2)
        x[0] = 5
        z = x.float()  # the same dtype: x itself
        z += 1
        return y[2:], x[0], z
    compiled = minidynamo.minicompile(fn)
    base = torch.randn(40)
    for start in (0, 12, 5):  # the inputs start at different offsets of one storage
        x, expected_x = base[start:start + 12].view(3, 4), base[start:start + 12].view(3, 4).clone()
        outs, expected = compiled(x), fn(expected_x)
        for out, want in zip(outs, expected):
            assert torch.equal(out, want) and out.stride() == want.stride()
            assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        outs[0].zero_()  # writes x, as in eager
        assert torch.equal(x.view(-1)[2:], torch.zeros(10))
