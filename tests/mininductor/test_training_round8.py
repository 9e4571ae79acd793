"""Round-8 fuzzing of training (gradients) and dynamic shapes: one regression test per bug found.

Each test compares values *and* gradients with eager PyTorch and pins the counts (graphs, recompiles, symbolic
compiles / per-shape fallbacks).  Budget: a few seconds on one core (Triton interpreter).
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import metrics

from .utils import assert_same

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _leaves(*tensors):
    """Two independent copies (ours, eager's) of leaf tensors that require grad."""
    ours = [t.detach().clone().requires_grad_() for t in tensors]
    theirs = [t.detach().clone().requires_grad_() for t in tensors]
    return ours, theirs


def _exp_and_its_detach(x):
    y = x.exp()
    return y.detach(), y


def test_detached_output_of_a_differentiable_output_does_not_require_grad():
    """``return y.detach(), y``: the ATen graph returns ``aten.alias(exp)`` for the detach, and ``aot_eager``
    runs it as it is: a *view* of a differentiable output, and an ``autograd.Function`` output that is a view
    takes ``requires_grad`` from its base whatever ``mark_non_differentiable`` says.  The first output required
    grad (and had a grad_fn), unlike eager's."""
    for backend in ("aot_eager", "inductor"):
        minidynamo.reset()
        compiled = minidynamo.minicompile(_exp_and_its_detach, backend=backend)
        (x,), (x_ref,) = _leaves(torch.randn(5))
        (d, y), (d_ref, y_ref) = compiled(x), _exp_and_its_detach(x_ref)
        assert_same((d, y), (d_ref, y_ref))
        assert not d.requires_grad and d.grad_fn is None and y.requires_grad
        y.sum().backward()
        y_ref.sum().backward()
        assert_same(x.grad, x_ref.grad)
        assert minidynamo.counters["frames"]["ok"] == 1


def _cubic_loss(x, w):
    return ((x @ w).tanh() ** 3).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_create_graph_gradients_require_grad_and_double_backward_raises(backend):
    """``torch.autograd.grad(loss, x, create_graph=True)`` through a compiled graph returned a gradient that
    did *not* require grad (``once_differentiable`` only looks at the incoming gradients), so a gradient penalty
    built on it was silently a constant: its term vanished from the parameters' gradients.  Now the gradient
    requires grad as in eager (same values), and a backward through it raises instead of being wrong."""
    compiled = minidynamo.minicompile(_cubic_loss, backend=backend)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    gx, = torch.autograd.grad(compiled(x, w), x, create_graph=True)
    gx_ref, = torch.autograd.grad(_cubic_loss(x, w), x, create_graph=True)
    assert_same(gx, gx_ref, atol=1e-5, rtol=1e-4)
    assert gx.requires_grad and gx_ref.requires_grad
    with pytest.raises(RuntimeError, match="double backward"):
        gx.pow(2).sum().backward()
    # a plain backward (no create_graph) still works and matches
    compiled(x, w).backward()
    _cubic_loss(x, w).backward()  # accumulates into the same leaves: compare with a fresh eager run
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    for _ in range(2):
        _cubic_loss(x2, w2).backward()
    assert_same(x.grad, x2.grad, atol=1e-5, rtol=1e-4)
    assert_same(w.grad, w2.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 1


def _padded(x, w):
    return F.pad(x @ w, (1, 2), value=0.5).softmax(-1)


def test_pad_under_dynamic_shapes_is_one_graph_for_every_size():
    """``F.pad`` on a tensor of ``s0`` rows: its C++ composite kernel (``aten.pad`` -> ``constant_pad_nd``)
    reads the sizes as ints, which specialised ``s0`` in minidynamo's ShapeEnv -- while translating, and again
    while mininductor traced the graph to ATen (which then refused its symbolic compile, but the guard stayed):
    one graph per batch size under ``dynamic=True``.  Fake ops on symbolic sizes now run under the Python
    dispatcher (as upstream's ``get_fake_value`` and AOTAutograd do), which takes the SymInt-aware
    decomposition."""
    compiled = minidynamo.minicompile(_padded, backend="inductor", dynamic=True)
    w = torch.randn(4, 3)
    for b in (2, 3, 7, 16):
        (x, wo), (x_ref, w_ref) = _leaves(torch.randn(b, 4), w)
        out, ref = compiled(x, wo), _padded(x_ref, w_ref)
        assert_same(out, ref, atol=1e-5, rtol=1e-4)
        (out * torch.arange(6.0)).sum().backward()
        (ref * torch.arange(6.0)).sum().backward()
        assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
        assert_same(wo.grad, w_ref.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 1 and minidynamo.counters["recompiles"]["total"] == 0
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _enable_grad_region(x, w, buf):
    buf.add_(1)
    with torch.enable_grad():
        y = (x @ w).tanh()
    return y, x * 3, buf * 2


@pytest.mark.parametrize("backend,dynamic", [("aot_eager", False), ("inductor", False), ("inductor", True)])
def test_enable_grad_inside_a_function_called_under_no_grad(backend, dynamic):
    """``with torch.enable_grad():`` inside a compiled function called under ``no_grad``: eager's ``y`` requires
    grad and backpropagates to ``x`` and ``w``; ours did not require grad.  AOTAutograd chose its inference path
    from the caller's grad mode, and the clone standing for each input that requires grad was made under
    ``no_grad``, so even the metadata run saw no history.  Now the clone is made with grad enabled, an output that
    requires grad selects the training path, and the ``autograd.Function`` is applied under ``enable_grad``."""
    compiled = minidynamo.minicompile(_enable_grad_region, backend=backend, dynamic=dynamic)
    for n in (3, 5):
        (x, w), (x_ref, w_ref) = _leaves(torch.randn(n, 4), torch.randn(4, 2))
        buf, buf_ref = torch.zeros(2), torch.zeros(2)
        with torch.no_grad():
            out, ref = compiled(x, w, buf), _enable_grad_region(x_ref, w_ref, buf_ref)
        assert_same(out, ref, atol=1e-5, rtol=1e-4)
        assert_same(buf, buf_ref)
        assert [o.requires_grad for o in out] == [True, False, False]
        out[0].sum().backward()
        ref[0].sum().backward()
        assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
        assert_same(w.grad, w_ref.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == (1 if dynamic else 2)
    if dynamic:
        assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


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
    break: the code before and after it is compiled, and its user-written backward runs, as in eager."""
    compiled = minidynamo.minicompile(_through_custom_function, backend="inductor")
    (x, w), (x_ref, w_ref) = _leaves(torch.randn(3, 4), torch.randn(4, 4))
    out, ref = compiled(x, w), _through_custom_function(x_ref, w_ref)
    assert_same(out, ref, atol=1e-5, rtol=1e-4)
    out.backward()
    ref.backward()
    assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    assert_same(w.grad, w_ref.grad, atol=1e-5, rtol=1e-4)
    assert not minidynamo.counters["eager_fallback"]
    assert sum(minidynamo.counters["graph_break"].values()) == 1 and minidynamo.counters["frames"]["ok"] == 2


def _retains(x, w):
    y = (x @ w).relu()
    y.retain_grad()
    return y, (y * y).sum()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_retain_grad_inside_a_compiled_function(backend):
    """``y.retain_grad()`` on an intermediate was traced as a call whose result nobody used, so it vanished
    from the graph and ``y.grad`` stayed None after backward (with every backend).  It changes autograd state
    of the tensor object, not a value: now a graph break, and eager runs it on the real ``y``."""
    compiled = minidynamo.minicompile(_retains, backend=backend)
    (x, w), (x_ref, w_ref) = _leaves(torch.randn(3, 4), torch.randn(4, 4))
    (y, loss), (y_ref, loss_ref) = compiled(x, w), _retains(x_ref, w_ref)
    assert_same(loss, loss_ref, atol=1e-5, rtol=1e-4)
    loss.backward()
    loss_ref.backward()
    assert y.grad is not None
    assert_same(y.grad, y_ref.grad, atol=1e-5, rtol=1e-4)
    assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 2 and not minidynamo.counters["eager_fallback"]


def test_multihead_attention_trains_over_sequence_lengths_without_graph_breaks():
    """``nn.MultiheadAttention.forward`` reads ``query.is_nested``: an unsupported tensor attribute, so a graph
    break in every call (4 graphs per call, more compiles per length).  It is metadata, constant for a fake
    tensor like ``is_sparse``: now one graph, and one symbolic compile serves every length."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ref = copy.deepcopy(mha)
    compiled = minidynamo.minicompile(mha, backend="inductor", dynamic=True)
    for t in (3, 5, 9):
        (x,), (x_ref,) = _leaves(torch.randn(2, t, 8))
        (out, attn), (out_ref, attn_ref) = compiled(x, x, x), ref(x_ref, x_ref, x_ref)
        assert_same((out, attn), (out_ref, attn_ref), atol=1e-5, rtol=1e-4)
        (out.sin().sum() + attn.pow(2).sum()).backward()
        (out_ref.sin().sum() + attn_ref.pow(2).sum()).backward()
        assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
        for p, p_ref in zip(mha.parameters(), ref.parameters()):
            assert_same(p.grad, p_ref.grad, atol=1e-5, rtol=1e-4)
    assert not minidynamo.counters["graph_break"]
    assert minidynamo.counters["frames"]["ok"] == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _first_half(x, w):
    return (x[: x.shape[0] // 2] @ w).tanh()


def test_slice_to_half_the_rows_compiles_symbolically():
    """``x[: x.shape[0] // 2]``: the slice lowering asked Python whether the bound ``s0 // 2`` is negative
    (sympy could not tell), then the ShapeEnv, which raised on mininductor's own ``FloorDiv``: a per-shape compile
    for every size.  ``FloorDiv`` of non-negative sizes is now known non-negative, and the ShapeEnv is asked with
    torch's ``FloorDiv``: one symbolic compile, forward and backward."""
    compiled = minidynamo.minicompile(_first_half, backend="inductor", dynamic=True)
    w = torch.randn(3, 4)
    for n in (5, 7, 16, 9):
        (x, wo), (x_ref, w_ref) = _leaves(torch.randn(n, 3), w)
        out, ref = compiled(x, wo), _first_half(x_ref, w_ref)
        assert_same(out, ref, atol=1e-5, rtol=1e-4)
        out.sum().backward()
        ref.sum().backward()
        assert_same((x.grad, wo.grad), (x_ref.grad, w_ref.grad), atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _flip_of_column_major(x):
    h = x.t().contiguous().t().flip(0)  # column-major, then flipped: eager's rev keeps the column-major strides
    return h * h.sum(0, keepdim=True)


def test_saved_flip_keeps_the_strides_the_backward_was_compiled_for():
    """A forward output that is a view no strided window can express (``flip``) is copied; the copy was
    row-major.  The forward saves ``rev`` for the backward, which was compiled for the traced strides
    (column-major here), so it read the saved tensor transposed: every gradient wrong, values right.  The copy
    now takes the traced strides (found by a random program: ``t().contiguous().t()``, ``flip``, ``var``)."""
    compiled = minidynamo.minicompile(_flip_of_column_major, backend="inductor")
    (x,), (x_ref,) = _leaves(torch.randn(4, 6))
    out, ref = compiled(x), _flip_of_column_major(x_ref)
    assert_same(out, ref, atol=1e-5, rtol=1e-4)
    tangent = torch.randn(4, 6)
    out.backward(tangent)
    ref.backward(tangent)
    assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 1 and metrics.fallback_count == 0


def _exp_without_grad(x):
    with torch.set_grad_enabled(False):
        y = x.exp()
    return y


def test_aot_eager_output_of_a_grad_disabled_region_does_not_require_grad():
    """Every output computed under ``set_grad_enabled(False)``: AOTAutograd's inference path.  ``aot_eager``
    runs the ATen graph as it is, where that region is gone, under the caller's grad mode: ``exp`` of an input
    that requires grad recorded history, and the output required grad (eager's does not).  The inference graph
    now runs under ``no_grad``."""
    for backend in ("aot_eager", "inductor"):
        minidynamo.reset()
        compiled = minidynamo.minicompile(_exp_without_grad, backend=backend)
        (x,), (x_ref,) = _leaves(torch.randn(4))
        out, ref = compiled(x), _exp_without_grad(x_ref)
        assert_same(out, ref)
        assert not out.requires_grad and out.grad_fn is None and not ref.requires_grad
        assert minidynamo.counters["frames"]["ok"] == 1
