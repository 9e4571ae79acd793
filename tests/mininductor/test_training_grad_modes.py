"""Grad modes and autograd state around compiled training graphs: ``no_grad`` / ``enable_grad`` /
``set_grad_enabled`` regions, calls under ``no_grad``, ``create_graph=True``, ``retain_grad``.

Eager decides ``requires_grad`` from the grad mode at each op; a compiled graph must give every output the same
``requires_grad`` and history, and leave grad mode as eager does ([Note: a graph that leaves grad mode changed]).
Each test compares values *and* gradients (or the raised error) with eager PyTorch and pins the frames compiled.
Regression tests from the training fuzz rounds 8 and 9.  Budget: a few seconds on one core (Triton interpreter).
"""
import copy

import pytest
import torch

import minidynamo
from minidynamo.testing import outcome
from mininductor import metrics

from .utils import assert_same, leaves

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py

BACKENDS = ["aot_eager", "inductor"]


def _exp_without_grad(x):
    with torch.set_grad_enabled(False):
        y = x.exp()
    return y


def test_aot_eager_output_of_a_grad_disabled_region_does_not_require_grad():
    """Every output computed under ``set_grad_enabled(False)``: AOTAutograd's inference path.  ``aot_eager``
    runs the ATen graph as it is, where that region is gone, under the caller's grad mode: ``exp`` of an input
    that requires grad recorded history, and the output required grad (eager's does not).  The inference graph
    now runs under ``no_grad``.  (Training round 8.)"""
    for backend in ("aot_eager", "inductor"):
        minidynamo.reset()
        compiled = minidynamo.minicompile(_exp_without_grad, backend=backend)
        (x,), (x_ref,) = leaves(torch.randn(4))
        out, ref = compiled(x), _exp_without_grad(x_ref)
        assert_same(out, ref)
        assert not out.requires_grad and out.grad_fn is None and not ref.requires_grad
        assert minidynamo.counters["frames"]["ok"] == 1


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
    requires grad selects the training path, and the ``autograd.Function`` is applied under ``enable_grad``.
    (Training round 8.)"""
    compiled = minidynamo.minicompile(_enable_grad_region, backend=backend, dynamic=dynamic)
    for n in (3, 5):
        (x, w), (x_ref, w_ref) = leaves(torch.randn(n, 4), torch.randn(4, 2))
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


def _cubic_loss(x, w):
    return ((x @ w).tanh() ** 3).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_create_graph_gradients_require_grad_and_double_backward_raises(backend):
    """``torch.autograd.grad(loss, x, create_graph=True)`` through a compiled graph returned a gradient that
    did *not* require grad (``once_differentiable`` only looks at the incoming gradients), so a gradient penalty
    built on it was silently a constant: its term vanished from the parameters' gradients.  Now the gradient
    requires grad as in eager (same values), and a backward through it raises instead of being wrong.
    (Training round 8.)"""
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


def _retains(x, w):
    y = (x @ w).relu()
    y.retain_grad()
    return y, (y * y).sum()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_retain_grad_inside_a_compiled_function(backend):
    """``y.retain_grad()`` on an intermediate was traced as a call whose result nobody used, so it vanished
    from the graph and ``y.grad`` stayed None after backward (with every backend).  It changes autograd state
    of the tensor object, not a value: now a graph break, and eager runs it on the real ``y``.
    (Training round 8.)"""
    compiled = minidynamo.minicompile(_retains, backend=backend)
    (x, w), (x_ref, w_ref) = leaves(torch.randn(3, 4), torch.randn(4, 4))
    (y, loss), (y_ref, loss_ref) = compiled(x, w), _retains(x_ref, w_ref)
    assert_same(loss, loss_ref, atol=1e-5, rtol=1e-4)
    loss.backward()
    loss_ref.backward()
    assert y.grad is not None
    assert_same(y.grad, y_ref.grad, atol=1e-5, rtol=1e-4)
    assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 2 and not minidynamo.counters["eager_fallback"]


# ---------------------------------------------------------------------------------------------------------------
# Grad mode left changed by a graph ([Note: a graph that leaves grad mode changed])
# ---------------------------------------------------------------------------------------------------------------
def _retains_sum(x, w):
    y = x @ w
    y.retain_grad()  # a graph break: runs natively on the real y
    return y.sum() * 2


def _calls_under_no_grad(x, w):
    with torch.no_grad():
        return _retains_sum(x, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_that_ends_inside_no_grad_leaves_grad_mode_off_on_every_call(backend):
    """The graph before the break is only ``_set_grad_enabled(False)``; an ATen compile of it does nothing at
    run time (the switch happened while tracing it, so the first call looked right).  From the second call on
    the callee ran with grad mode on: its output required grad and ``retain_grad`` did not raise as in eager.
    (Training round 9.)"""
    compiled = minidynamo.minicompile(_calls_under_no_grad, backend=backend)
    (x, w), (x_ref, w_ref) = leaves(torch.randn(4, 3), torch.randn(3, 3))
    expected = outcome(_calls_under_no_grad, [x_ref, w_ref])
    assert expected[0] is RuntimeError
    for _ in range(3):
        assert outcome(compiled, [x, w]) == expected
        assert torch.is_grad_enabled()


def _no_grad_then_work(x, w):
    with torch.no_grad():
        minidynamo.graph_break()
        y = x @ w
    return y, (x @ w).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_inside_no_grad_block_computes_without_grad(backend):
    """A graph break inside ``with torch.no_grad():``: the resume function computes the rest of the block without
    grad, and the code after the block with grad, as in eager.  (Training round 9.)"""
    compiled = minidynamo.minicompile(_no_grad_then_work, backend=backend)
    (x, w), (x_ref, w_ref) = leaves(torch.randn(4, 3), torch.randn(3, 3))
    for _ in range(2):
        out, out_ref = compiled(x, w), _no_grad_then_work(x_ref, w_ref)
        assert_same(out, out_ref)
        assert not out[0].requires_grad and out[1].requires_grad
    assert sum(minidynamo.counters["graph_break"].values()) == 1


def _grad_then_break_in_no_grad(x, w):
    y = (x @ w).tanh()
    with torch.no_grad():
        z = x * 2
        minidynamo.graph_break()
        z = z + 1
    return y, z


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_made_before_a_no_grad_block_the_graph_ends_in_requires_grad(backend):
    """The first graph computes ``y`` with grad, then enters ``no_grad`` and breaks there: it ends with grad off.
    mininductor ran that graph once to collect metadata, and the grad mode it left behind made the joint trace
    fail; the inference fallback returned ``y`` without ``requires_grad`` ([Note: a graph that ends under
    no_grad] in aot_autograd.py; translator fuzz round 9)."""
    compiled = minidynamo.minicompile(_grad_then_break_in_no_grad, backend=backend)
    (x, w), (x_ref, w_ref) = leaves(torch.randn(4, 3), torch.randn(3, 3))
    for _ in range(2):
        out, ref = compiled(x, w), _grad_then_break_in_no_grad(x_ref, w_ref)
        assert_same(out, ref)
        assert out[0].requires_grad and not out[1].requires_grad and torch.is_grad_enabled()
        out[0].sum().backward()
        ref[0].sum().backward()
        assert_same((x.grad, w.grad), (x_ref.grad, w_ref.grad))
    assert sum(minidynamo.counters["graph_break"].values()) == 1


def test_multihead_attention_evaluated_under_no_grad_in_eval_mode_between_training_steps():
    """``nn.MultiheadAttention`` in eval mode under ``no_grad`` checks whether make_fx is tracing: it reads the
    dispatch mode stack, and traced, that stack held our FakeTensorMode, which ``_get_dispatch_stack_at`` then
    returned as a graph value: an internal error.  The stack's length is now answered natively (the caller's
    stack: empty), as [Note: the dispatch mode stack while tracing] says; the fast path
    (``_native_multi_head_attention``) runs as an ATen fallback.  Training and eval interleaved: one compile
    per (training flag, grad mode).  (Training round 10.)"""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ref = copy.deepcopy(mha)

    def loss_fn(m, x):
        return m(x, x, x, need_weights=False)[0].pow(2).mean()

    compiled = minidynamo.minicompile(lambda x: loss_fn(mha, x))
    opt, opt_ref = (torch.optim.AdamW(m.parameters(), lr=0.01) for m in (mha, ref))
    for _ in range(2):
        mha.train(), ref.train()
        x = torch.randn(2, 5, 8)
        loss, loss_ref = compiled(x), loss_fn(ref, x)
        assert_same(loss, loss_ref, atol=1e-5, rtol=1e-4)
        for o, lo in ((opt, loss), (opt_ref, loss_ref)):
            o.zero_grad()
            lo.backward()
            o.step()
        mha.eval(), ref.eval()
        with torch.no_grad():
            x = torch.randn(2, 5, 8)
            assert_same(compiled(x), loss_fn(ref, x), atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 2 and not minidynamo.counters["graph_break"]


def _view_then_write_under_no_grad(a):
    t0 = a.select(1, 0)
    t1 = a.contiguous().view(-1)
    with torch.no_grad():
        a.add_(a)
    return t0, t1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_whose_base_changes_under_no_grad(backend):
    """Called under ``no_grad`` with ``a = leaf[:, 1:]``: ``t0`` is a view made under ``no_grad`` whose base then
    changes, and reading its ``grad_fn`` raises, in eager too ("A view was created in no_grad mode ...").
    Collecting the graph's metadata read it and raised; such a view gets no gradient: it counts as one without
    ``grad_fn``.  (Under grad mode the copy-back into a view of a leaf raised too: the program wrote it under
    ``no_grad``.)  (AOT fuzz round.)"""
    compiled = minidynamo.minicompile(_view_then_write_under_no_grad, backend=backend)
    for grad in (False, True):
        (leaf,), (leaf_ref,) = leaves(torch.randn(4, 3))
        a, a_ref = leaf[:, 1:], leaf_ref[:, 1:]  # made under grad mode (else: a translator bug, not ours)
        with torch.set_grad_enabled(grad):
            out, ref = compiled(a), _view_then_write_under_no_grad(a_ref)
        assert_same([o.detach() for o in out], [r.detach() for r in ref])  # (eager's ``ref[0].grad_fn`` raises)
        assert_same(leaf, leaf_ref)
        assert out[0]._base is leaf and out[0].requires_grad
    assert minidynamo.counters["frames"]["ok"] == 2  # one per grad mode


def _view_then_write_after_a_no_grad_block(a):
    t1 = a.select(0, 1)
    with torch.no_grad():
        s = a.sum()
    a.mul_(2)
    return t1 * s


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbolic_graph_with_a_no_grad_block_is_specialised(backend):
    """``dynamic=True``: the graph is specialised per shape after a fake run of it under ``no_grad``, on fakes
    that required grad.  The graph turns grad mode back on after its ``no_grad`` block, and ``a.mul_(2)`` then
    changed the base of a view made "under no_grad": autograd raised, where eager runs.  The fakes no longer
    require grad (specialize.py).  (AOT fuzz round.)"""
    compiled = minidynamo.minicompile(_view_then_write_after_a_no_grad_block, backend=backend, dynamic=True)
    (leaf,), (leaf_ref,) = leaves(torch.randn(3, 4))
    out, ref = compiled(leaf * 1), _view_then_write_after_a_no_grad_block(leaf_ref * 1)
    assert_same(out, ref)
    out.sum().backward()
    ref.sum().backward()
    assert_same(leaf.grad, leaf_ref.grad)
    assert minidynamo.counters["frames"]["ok"] == 1


def _input_read_only_under_no_grad(x, y):
    t = x * 1
    with torch.no_grad():
        minidynamo.graph_break()
        t = t * 2
    return t + y


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_read_only_under_no_grad_gets_no_gradient(backend):
    """A break inside ``with torch.no_grad():``: the resume graph's input ``t`` requires grad but is read only
    under no_grad.  Its ``CompiledFunction`` returned None for ``t``; autograd handed that undefined gradient to
    the first graph's Function materialised as zeros, and ``x.grad`` became zeros where eager leaves it None
    ([Note: inputs the graph gives no gradient]; translator fuzz round 12, m20)."""
    compiled = minidynamo.minicompile(_input_read_only_under_no_grad, backend=backend)
    (x, y), (x_ref, y_ref) = leaves(torch.randn(4), torch.randn(4))
    for _ in range(2):
        out, ref = compiled(x, y), _input_read_only_under_no_grad(x_ref, y_ref)
        assert_same(out, ref)
        out.sum().backward()
        ref.sum().backward()
        assert x.grad is None and x_ref.grad is None
        assert_same(y.grad, y_ref.grad)
    assert sum(minidynamo.counters["graph_break"].values()) == 1


def _no_grad_view_of_an_intermediate(x):
    y = x * 2
    with torch.no_grad():
        v = y.t()
    return v


def _no_grad_views_beside_their_base(x):
    y = x.sin()
    with torch.no_grad():
        a, b = y.view(-1), y[1:]
    return a, b, y


def _no_grad_view_beside_a_sum(x):
    y = x * 2
    with torch.no_grad():
        v = y[0]
    return v, y.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_no_grad_view_of_an_intermediate, _no_grad_views_beside_their_base,
                                _no_grad_view_beside_a_sum])
def test_a_view_of_an_intermediate_made_under_no_grad_requires_grad(fn, backend):
    """``y = x * 2; with torch.no_grad(): v = y.t()``: eager's ``v`` requires grad (a view takes the flag of its
    base) and has no ``grad_fn``.  The graph's output for it needs no gradient, so it came back with
    ``requires_grad=False`` (from the Function, or from the inference path when it is the only output).  It is
    re-made as a view under ``no_grad`` ([Note: views made under no_grad] in runtime_wrappers.py).  (AOT fuzz
    round.)"""
    compiled = minidynamo.minicompile(fn, backend=backend)
    (leaf,), (leaf_ref,) = leaves(torch.randn(3, 4))
    out, ref = compiled(leaf), fn(leaf_ref)
    out, ref = (out if isinstance(out, tuple) else (out,)), (ref if isinstance(ref, tuple) else (ref,))
    assert_same(out, ref)
    assert [(o.requires_grad, o.grad_fn is None, o._is_view()) for o in out] == \
        [(r.requires_grad, r.grad_fn is None, r._is_view()) for r in ref]
    sum(o.sum() * (k + 1) for k, o in enumerate(out)).backward()
    sum(r.sum() * (k + 1) for k, r in enumerate(ref)).backward()
    assert (leaf.grad is None) == (leaf_ref.grad is None)
    if leaf_ref.grad is not None:
        assert_same(leaf.grad, leaf_ref.grad)
    assert minidynamo.counters["frames"]["ok"] == 1


def _view_of_a_no_grad_view(a):
    with torch.no_grad():
        t0 = a[1:]
    t1 = t0.select(0, 0)  # its history ends at ``t0``, which stands as a leaf: ``a`` gets no gradient
    return t1, t0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_of_a_no_grad_view_gives_the_input_no_gradient(backend):
    """``t0 = a[1:]`` under ``no_grad``, then ``t1 = t0.select(0, 0)``: eager's ``t1`` has a ``grad_fn`` whose
    history ends at ``t0``, so ``a.grad`` stays None.  ``t1`` shares ``a``'s memory, and the runtime re-made it
    as a view of ``a`` (so in-place ops on it work): ``a`` got a gradient.  A view whose history does not reach
    the input is left as the Function returns it (``meta.cut_from_input``; AOT fuzz round, seed 1105)."""
    compiled = minidynamo.minicompile(_view_of_a_no_grad_view, backend=backend)
    (leaf,), (leaf_ref,) = leaves(torch.randn(4, 6))
    out, ref = compiled(leaf), _view_of_a_no_grad_view(leaf_ref)
    assert_same([o.detach() for o in out], [r.detach() for r in ref])
    assert [(o.requires_grad, o.grad_fn is None) for o in out] == [(r.requires_grad, r.grad_fn is None) for r in ref]
    (out[0] * torch.arange(6.0)).sum().backward()
    (ref[0] * torch.arange(6.0)).sum().backward()
    assert leaf.grad is None and leaf_ref.grad is None
    assert minidynamo.counters["frames"]["ok"] == 1
