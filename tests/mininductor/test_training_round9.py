"""Round-9 fuzzing of training and dynamic shapes: regression tests, grouped by concept.

Each test compares values *and* gradients (and running buffers, in-place effects) with eager PyTorch and pins the
counts that matter (frames compiled, recompiles).  Budget: a few seconds on one core (Triton interpreter).
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from minidynamo.testing import outcome

from .utils import assert_same

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py

BACKENDS = ["aot_eager", "inductor"]


def _leaves(*tensors):
    """Two independent copies (ours, eager's) of leaf tensors that require grad."""
    ours = [t.detach().clone().requires_grad_() for t in tensors]
    theirs = [t.detach().clone().requires_grad_() for t in tensors]
    return ours, theirs


def _frames() -> int:
    return minidynamo.counters["frames"]["ok"]


# ---------------------------------------------------------------------------------------------------------------
# In-place ops on views that a compiled training graph returns ([Note: outputs that are views], aot_autograd.py)
# ---------------------------------------------------------------------------------------------------------------
def _flat_view(x, w):
    return (x @ w).view(-1)


def _row(x, w):
    return (x @ w)[1]


def _view_and_its_base(x, w):
    a = x.sin() @ w
    return a.t(), a


def _two_rows(x, w):
    a = x @ w
    return a[0], a[2]


def _columns_and_sum(x, w):
    a = (x @ w) * 2  # not relu: eager's backward would refuse (relu saves its output, which the caller changes)
    return a[:, 1:], a.sum()


def _double(y):
    y.mul_(2)


def _fill_first(y):
    y[0] = 5.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, op", [(_flat_view, _double), (_row, _fill_first), (_view_and_its_base, _double),
                                   (_two_rows, _fill_first), (_columns_and_sum, _double)],
                         ids=["flat_view", "row", "view_and_its_base", "two_rows", "columns_and_sum"])
def test_inplace_on_a_returned_view_of_an_intermediate(backend, fn, op):
    """``y = f(x)`` returning ``(x @ w).view(-1)`` (or ``a[1]``, ``a.t()``...), then ``y.mul_(2)`` in eager code:
    an ``autograd.Function`` output that is a view refuses in-place ops ("a view created inside a custom
    Function"), where eager rebases its history.  Now such outputs are re-made as ordinary views outside the
    Function: same values, the change shows in an output sharing the memory (``a.t()`` and ``a``), same grads."""
    compiled = minidynamo.minicompile(fn, backend=backend)
    (x, w), (x_ref, w_ref) = _leaves(torch.randn(3, 3), torch.randn(3, 3))
    out, out_ref = compiled(x, w), fn(x_ref, w_ref)
    op(out[0] if isinstance(out, tuple) else out)
    op(out_ref[0] if isinstance(out_ref, tuple) else out_ref)
    assert_same(out, out_ref)
    outs, outs_ref = (out, out_ref) if isinstance(out, tuple) else ((out,), (out_ref,))
    weights = [torch.randn(o.shape) for o in outs_ref]
    sum((o * g).sum() for o, g in zip(outs, weights)).backward()
    sum((o * g).sum() for o, g in zip(outs_ref, weights)).backward()
    assert_same((x.grad, w.grad), (x_ref.grad, w_ref.grad), atol=1e-5, rtol=1e-4)
    assert _frames() == 1


def _input_view(x):
    return x.view(-1), x.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_view_of_an_input_is_a_view_of_that_input(backend):
    """A view of a non-leaf input may be changed in place, and the input changes with it (eager); a view of a
    leaf that requires grad refuses, with eager's own error."""
    compiled = minidynamo.minicompile(_input_view, backend=backend)
    (leaf,), (leaf_ref,) = _leaves(torch.randn(2, 3))
    x, x_ref = leaf * 1, leaf_ref * 1
    (y, s), (y_ref, s_ref) = compiled(x), _input_view(x_ref)
    y.mul_(3)
    y_ref.mul_(3)
    assert_same((x, y, s), (x_ref, y_ref, s_ref))
    (x.sum() + y.pow(2).sum() + s).backward()
    (x_ref.sum() + y_ref.pow(2).sum() + s_ref).backward()
    assert_same(leaf.grad, leaf_ref.grad)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        compiled(leaf)[0].add_(1)


def _no_grad_views(x, w):
    with torch.no_grad():
        return x[1:], (x * w.sum()).view(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_an_input_made_under_no_grad(backend):
    """Under ``no_grad``, ``x[1:]`` of an ``x`` that requires grad is, in eager, a tensor with
    ``requires_grad=True`` and no ``grad_fn``.  The joint graph asked autograd for its gradient and crashed
    ("element 0 of tensors does not require grad")."""
    compiled = minidynamo.minicompile(_no_grad_views, backend=backend)
    (x, w), (x_ref, w_ref) = _leaves(torch.randn(4, 3), torch.randn(3, 3))
    out, out_ref = compiled(x, w), _no_grad_views(x_ref, w_ref)
    assert_same(out, out_ref)
    assert out[0].requires_grad and out[0].grad_fn is None and out[0]._base is x


def _empty_batch_view(x, w):
    return (x @ w).view(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_output_view_keeps_the_gradient_of_the_weight(backend):
    """Every empty tensor has ``data_ptr() == 0``: the empty output view was taken for a view of the (empty)
    input and the weight got no gradient (None instead of eager's zeros).  Storages are compared by identity."""
    compiled = minidynamo.minicompile(_empty_batch_view, backend=backend)
    (x, w), (x_ref, w_ref) = _leaves(torch.randn(0, 4), torch.randn(4, 4))
    compiled(x, w).sum().backward()
    _empty_batch_view(x_ref, w_ref).sum().backward()
    assert_same((x.grad, w.grad), (x_ref.grad, w_ref.grad))


def _expanded(x, w):
    return (x @ w).unsqueeze(0).expand(2, -1, -1)


def test_inplace_on_an_overlapping_returned_view_still_raises():
    """Left out: an output whose elements overlap (``expand``) cannot be re-made from its base's gradient, so it
    stays the Function's view and an in-place op on it raises (eager allows ``zero_``) -- never a wrong
    gradient."""
    compiled = minidynamo.minicompile(_expanded)
    (x, w), _ = _leaves(torch.randn(2, 2), torch.randn(2, 2))
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        compiled(x, w).zero_()


# ---------------------------------------------------------------------------------------------------------------
# BatchNorm(momentum=None): the cumulative moving average (polyfills.py)
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, shape", [(lambda: torch.nn.BatchNorm1d(4, momentum=None), (8, 4)),
                                         (lambda: torch.nn.BatchNorm2d(3, momentum=None), (4, 3, 2, 2))],
                         ids=["1d", "2d"])
def test_batch_norm_cumulative_average_compiles_once(make, shape):
    """``1.0 / float(self.num_batches_tracked)`` broke the graph, and the resume function guarded on the float:
    one recompile per training step.  The counter is now a mutated buffer of a single graph."""
    torch.manual_seed(0)
    bn = make()
    bn_ref = copy.deepcopy(bn)
    compiled = minidynamo.minicompile(bn)
    for _ in range(4):
        (x,), (x_ref,) = _leaves(torch.randn(shape))
        y, y_ref = compiled(x), bn_ref(x_ref)
        assert_same(y, y_ref, atol=1e-5, rtol=1e-5)
        y.pow(2).sum().backward()
        y_ref.pow(2).sum().backward()
        assert_same(x.grad, x_ref.grad, atol=1e-4, rtol=1e-4)
        assert_same(list(bn.buffers()), list(bn_ref.buffers()), atol=1e-6, rtol=1e-6)
        assert_same([p.grad for p in bn.parameters()], [p.grad for p in bn_ref.parameters()], atol=1e-4, rtol=1e-4)
    assert bn.num_batches_tracked.item() == 4
    assert _frames() == 1 and not minidynamo.counters["graph_break"]


def test_batch_norm_cumulative_average_inside_a_model_trains_with_sgd_and_switches_to_eval():
    """Inside a model (the module call is inlined): SGD steps agree; eval mode is one more compile, and going
    back to training reuses the first."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8, momentum=None), torch.nn.ReLU(),
                                torch.nn.Linear(8, 2))
    model_ref = copy.deepcopy(model)
    compiled = minidynamo.minicompile(model)
    opt, opt_ref = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, model_ref))
    for training in (True, True, False, True):
        model.train(training)
        model_ref.train(training)
        x = torch.randn(5, 6)
        y, y_ref = compiled(x), model_ref(x)
        assert_same(y, y_ref, atol=1e-5, rtol=1e-5)
        if training:
            for o, out in ((opt, y), (opt_ref, y_ref)):
                o.zero_grad()
                out.pow(2).mean().backward()
                o.step()
        assert_same(list(model.parameters()), list(model_ref.parameters()), atol=1e-5, rtol=1e-5)
        assert_same(list(model.buffers()), list(model_ref.buffers()), atol=1e-6, rtol=1e-6)
    assert _frames() == 2


# ---------------------------------------------------------------------------------------------------------------
# Grad mode left changed by a graph ([Note: a graph that leaves grad mode changed], output_graph.py)
# ---------------------------------------------------------------------------------------------------------------
def _retains(x, w):
    y = x @ w
    y.retain_grad()  # a graph break: runs natively on the real y
    return y.sum() * 2


def _calls_under_no_grad(x, w):
    with torch.no_grad():
        return _retains(x, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_that_ends_inside_no_grad_leaves_grad_mode_off_on_every_call(backend):
    """The graph before the break is only ``_set_grad_enabled(False)``; an ATen compile of it does nothing at
    run time (the switch happened while tracing it, so the first call looked right).  From the second call on
    the callee ran with grad mode on: its output required grad and ``retain_grad`` did not raise as in eager."""
    compiled = minidynamo.minicompile(_calls_under_no_grad, backend=backend)
    (x, w), (x_ref, w_ref) = _leaves(torch.randn(4, 3), torch.randn(3, 3))
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
    compiled = minidynamo.minicompile(_no_grad_then_work, backend=backend)
    (x, w), (x_ref, w_ref) = _leaves(torch.randn(4, 3), torch.randn(3, 3))
    for _ in range(2):
        out, out_ref = compiled(x, w), _no_grad_then_work(x_ref, w_ref)
        assert_same(out, out_ref)
        assert not out[0].requires_grad and out[1].requires_grad
    assert sum(minidynamo.counters["graph_break"].values()) == 1


# ---------------------------------------------------------------------------------------------------------------
# Dynamic shapes: a symbolic int index ([Note: a symbolic int index], minidynamo/variables/tensor.py)
# ---------------------------------------------------------------------------------------------------------------
def _last_rows(x, w):
    n = x.shape[0]
    return x[n - 1] @ w, x[n // 2], F.cross_entropy(x @ w, torch.arange(n) % 4)


@pytest.mark.parametrize("dynamic, frames", [(True, 1), (None, 2)])
def test_symbolic_int_index_does_not_specialise_the_size(dynamic, frames):
    """``x[x.shape[0] - 1]``: ``Tensor.__getitem__`` turned the SymInt index into an int, guarding
    ``s0 - 1 == 2`` -- a recompile for every batch size, even with ``dynamic=True``."""
    compiled = minidynamo.minicompile(_last_rows, dynamic=dynamic)
    for n in (3, 5, 6, 4):
        (x, w), (x_ref, w_ref) = _leaves(torch.randn(n, 4), torch.randn(4, 4))
        out, out_ref = compiled(x, w), _last_rows(x_ref, w_ref)
        assert_same(out, out_ref, atol=1e-5, rtol=1e-5)
        sum(o.sum() for o in out).backward()
        sum(o.sum() for o in out_ref).backward()
        assert_same((x.grad, w.grad), (x_ref.grad, w_ref.grad), atol=1e-5, rtol=1e-4)
    assert _frames() == frames


def _row_at(x):
    return x[x.shape[0]]


def test_symbolic_int_index_out_of_range_raises_as_eager():
    compiled = minidynamo.minicompile(_row_at, dynamic=True)
    expected = outcome(_row_at, [torch.randn(3, 2)])
    assert expected[0] is IndexError
    assert outcome(compiled, [torch.randn(3, 2)])[0] is IndexError
    # a view into a longer base: a view past its end would read the base's next row instead of raising
    assert outcome(compiled, [torch.randn(10, 2)[:4]])[0] is IndexError
