"""Training graphs whose outputs are views: in-place ops on them, their ``requires_grad``, saved copies of them.

An ``autograd.Function`` output that is a view refuses in-place ops and takes ``requires_grad`` from its base
whatever ``mark_non_differentiable`` says, so AOTAutograd re-makes such outputs as ordinary views outside the
Function ([Note: outputs that are views]); a view no strided window can express (``flip``) is copied, with the
traced strides.  Each test compares values *and* gradients with eager PyTorch and pins the frames compiled.
Regression tests from the training fuzz rounds 8 and 9.  Budget: a few seconds on one core (Triton interpreter).
"""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import metrics

from .utils import assert_same, frames_ok, leaves

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py

BACKENDS = ["aot_eager", "inductor"]


def _exp_and_its_detach(x):
    y = x.exp()
    return y.detach(), y


def test_detached_output_of_a_differentiable_output_does_not_require_grad():
    """``return y.detach(), y``: the ATen graph returns ``aten.alias(exp)`` for the detach, and ``aot_eager``
    runs it as it is: a *view* of a differentiable output, and an ``autograd.Function`` output that is a view
    takes ``requires_grad`` from its base whatever ``mark_non_differentiable`` says.  The first output required
    grad (and had a grad_fn), unlike eager's.  (Training round 8.)"""
    for backend in ("aot_eager", "inductor"):
        minidynamo.reset()
        compiled = minidynamo.minicompile(_exp_and_its_detach, backend=backend)
        (x,), (x_ref,) = leaves(torch.randn(5))
        (d, y), (d_ref, y_ref) = compiled(x), _exp_and_its_detach(x_ref)
        assert_same((d, y), (d_ref, y_ref))
        assert not d.requires_grad and d.grad_fn is None and y.requires_grad
        y.sum().backward()
        y_ref.sum().backward()
        assert_same(x.grad, x_ref.grad)
        assert minidynamo.counters["frames"]["ok"] == 1


def _flip_of_column_major(x):
    h = x.t().contiguous().t().flip(0)  # column-major, then flipped: eager's rev keeps the column-major strides
    return h * h.sum(0, keepdim=True)


def test_saved_flip_keeps_the_strides_the_backward_was_compiled_for():
    """A forward output that is a view no strided window can express (``flip``) is copied; the copy was
    row-major.  The forward saves ``rev`` for the backward, which was compiled for the traced strides
    (column-major here), so it read the saved tensor transposed: every gradient wrong, values right.  The copy
    now takes the traced strides (found by a random program: ``t().contiguous().t()``, ``flip``, ``var``).
    (Training round 8.)"""
    compiled = minidynamo.minicompile(_flip_of_column_major, backend="inductor")
    (x,), (x_ref,) = leaves(torch.randn(4, 6))
    out, ref = compiled(x), _flip_of_column_major(x_ref)
    assert_same(out, ref, atol=1e-5, rtol=1e-4)
    tangent = torch.randn(4, 6)
    out.backward(tangent)
    ref.backward(tangent)
    assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 1 and metrics.fallback_count == 0


# ---------------------------------------------------------------------------------------------------------------
# In-place ops on views that a compiled training graph returns ([Note: outputs that are views])
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
    Function: same values, the change shows in an output sharing the memory (``a.t()`` and ``a``), same grads.
    (Training round 9.)"""
    compiled = minidynamo.minicompile(fn, backend=backend)
    (x, w), (x_ref, w_ref) = leaves(torch.randn(3, 3), torch.randn(3, 3))
    out, out_ref = compiled(x, w), fn(x_ref, w_ref)
    op(out[0] if isinstance(out, tuple) else out)
    op(out_ref[0] if isinstance(out_ref, tuple) else out_ref)
    assert_same(out, out_ref)
    outs, outs_ref = (out, out_ref) if isinstance(out, tuple) else ((out,), (out_ref,))
    weights = [torch.randn(o.shape) for o in outs_ref]
    sum((o * g).sum() for o, g in zip(outs, weights)).backward()
    sum((o * g).sum() for o, g in zip(outs_ref, weights)).backward()
    assert_same((x.grad, w.grad), (x_ref.grad, w_ref.grad), atol=1e-5, rtol=1e-4)
    assert frames_ok() == 1


def _input_view(x):
    return x.view(-1), x.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_view_of_an_input_is_a_view_of_that_input(backend):
    """A view of a non-leaf input may be changed in place, and the input changes with it (eager); a view of a
    leaf that requires grad refuses, with eager's own error.  (Training round 9.)"""
    compiled = minidynamo.minicompile(_input_view, backend=backend)
    (leaf,), (leaf_ref,) = leaves(torch.randn(2, 3))
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
    ("element 0 of tensors does not require grad").  (Training round 9.)"""
    compiled = minidynamo.minicompile(_no_grad_views, backend=backend)
    (x, w), (x_ref, w_ref) = leaves(torch.randn(4, 3), torch.randn(3, 3))
    out, out_ref = compiled(x, w), _no_grad_views(x_ref, w_ref)
    assert_same(out, out_ref)
    assert out[0].requires_grad and out[0].grad_fn is None and out[0]._base is x


def _empty_batch_view(x, w):
    return (x @ w).view(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_output_view_keeps_the_gradient_of_the_weight(backend):
    """Every empty tensor has ``data_ptr() == 0``: the empty output view was taken for a view of the (empty)
    input and the weight got no gradient (None instead of eager's zeros).  Storages are compared by identity.
    (Training round 9.)"""
    compiled = minidynamo.minicompile(_empty_batch_view, backend=backend)
    (x, w), (x_ref, w_ref) = leaves(torch.randn(0, 4), torch.randn(4, 4))
    compiled(x, w).sum().backward()
    _empty_batch_view(x_ref, w_ref).sum().backward()
    assert_same((x.grad, w.grad), (x_ref.grad, w_ref.grad))


def _repeated_empty(x, y):
    return torch.maximum(F.mish(x.repeat(1).repeat(2)), y), x.repeat(2, 1).view(-1, 2)


def test_repeat_and_view_of_an_empty_batch_compile_without_fallback():
    """A reshape of an empty tensor paired its dims by products -- 0 on both sides, so ``[2, 0]`` met ``[0]``
    and the index math took a modulo by a size of 0: ``x.repeat(1).repeat(2)`` of an empty ``x`` ran the whole
    forward and backward graphs eagerly, and ``x.repeat(2, 1).view(-1, 2)`` fell back for its view.  A view
    of an empty tensor reads nothing; any index will do.  (Training round 11.)"""
    compiled = minidynamo.minicompile(_repeated_empty, backend="inductor")
    (x, y), (x_ref, y_ref) = leaves(torch.randn(0), torch.randn(1))
    out, ref = compiled(x, y), _repeated_empty(x_ref, y_ref)
    assert_same(out, ref)
    sum(o.sum() for o in out).backward()
    sum(r.sum() for r in ref).backward()
    assert_same((x.grad, y.grad), (x_ref.grad, y_ref.grad))
    assert metrics.fallback_count == 0, metrics.fallback_ops
    assert frames_ok() == 1


def _cat_and_stack_empty(x):
    y = 1.0 / (x.abs() + 1)
    return torch.cat([y, y * 0.5], 0), torch.stack([x, x.sin()], 0)


def test_cat_and_stack_of_empty_batches_compile_without_fallback():
    """``cat`` drops legacy empty ``(0,)`` inputs, as eager does -- and with every input empty it had none left
    (IndexError): the op fell back to ATen, in the forward and in the backward.  (Training round 11.)"""
    compiled = minidynamo.minicompile(_cat_and_stack_empty, backend="inductor")
    (x,), (x_ref,) = leaves(torch.randn(0))
    out, ref = compiled(x), _cat_and_stack_empty(x_ref)
    assert_same(out, ref)
    sum(o.sum() for o in out).backward()
    sum(r.sum() for r in ref).backward()
    assert_same(x.grad, x_ref.grad)
    assert metrics.fallback_count == 0, metrics.fallback_ops
    assert frames_ok() == 1


def _expanded(x, w):
    return (x @ w).unsqueeze(0).expand(2, -1, -1)


def test_inplace_on_an_overlapping_returned_view_still_raises():
    """Left out: an output whose elements overlap (``expand``) cannot be re-made from its base's gradient, so it
    stays the Function's view and an in-place op on it raises (eager allows ``zero_``) -- never a wrong
    gradient.  (Training round 9.)"""
    compiled = minidynamo.minicompile(_expanded)
    (x, w), _ = leaves(torch.randn(2, 2), torch.randn(2, 2))
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        compiled(x, w).zero_()


# ---------------------------------------------------------------------------------------------------------------
# View chains through as_strided, of expanded or column-major tensors, unfold and diagonal (training, view chains)
# ---------------------------------------------------------------------------------------------------------------
def _column_major(*shape):
    return torch.randn(shape[::-1]).permute(*reversed(range(len(shape))))


def _centred_chunk(x):
    t = torch.chunk(x.unbind(1)[2] + 1, 1, 0)[0]  # traced as ``as_strided`` of the (column-major) sum
    return t - t.mean()


VIEW_CHAINS = {
    # AOTAutograd re-makes the output, a view of the input, as ``as_strided``: a View over a ReinterpretView
    "split_unsqueeze_squeeze": (lambda x: torch.split(x, 3, 2)[1].unsqueeze(2).squeeze(2),
                                lambda: torch.randn(2, 3, 7), (0, 0)),
    # its backward's as_strided_scatter is a Scatter kernel into a copy of the zeros
    "as_strided_of_an_intermediate": (lambda x: x.sin().as_strided((2, 3), (1, 2)).unsqueeze(0).squeeze(0),
                                      lambda: torch.randn(2, 3, 7), (1, 4)),
    "select_of_an_expanded_input": (lambda x: x.select(1, 0).unsqueeze(-2),
                                    lambda: torch.randn(3, 1).expand(3, 4), (0, 1)),
    "chunk_of_a_column_major_intermediate": (_centred_chunk, lambda: _column_major(4, 3, 5), (1, 3)),
    "unfold": (lambda x: x.unfold(1, 3, 2).sin(), lambda: torch.randn(3, 7), (1, 3)),
    "diagonal": (lambda x: x.diagonal(1, 0, 1).exp(), lambda: torch.randn(4, 5), (1, 3)),
}


@pytest.mark.parametrize("name", VIEW_CHAINS)
def test_view_chain_compiles_with_eager_values_and_gradients(name):
    """Each ran (part of) a graph eagerly or gave a wrong answer before:

    * ``split_unsqueeze_squeeze``, ``as_strided_of_an_intermediate``: a view of an ``as_strided`` window has no
      StorageBox, and the output was returned as the bare View ("'View' object has no attribute 'get_name'":
      the whole graph ran eagerly); now it is the strided window it is.
    * ``select_of_an_expanded_input``: the output, a view of the input, was re-made as ``as_strided`` of an input
      whose elements share memory (stride 0): ``as_strided``'s gradient, taken over the storage, gave every
      element of ``x`` the gradient where eager gives only column 0.  Such an output stays the Function's.
    * ``chunk_of_a_column_major_intermediate``: functionalization replays the chunk as ``as_strided`` of
      ``x.unbind(1)[2] + 1`` with eager's (column-major) strides; we stored that sum row-major and read it
      transposed: wrong values.  A node an ``as_strided`` reads keeps eager's strides.
    * ``unfold``, ``diagonal``: ``unfold`` and the backwards' ``diagonal_scatter`` (and ``as_strided_scatter``)
      fell back to ATen; they are lowered now.

    Values, the strides of every dim that is not 1, and gradients against eager; kernels (forward, forward and
    backward) and no fallback."""
    fn, make, (forward_kernels, kernels) = VIEW_CHAINS[name]
    base = make()
    x, x_ref = base.detach().requires_grad_(), base.detach().requires_grad_()  # same strides as ``base``
    out, ref = minidynamo.minicompile(fn, backend="inductor")(x), fn(x_ref)
    assert_same(out, ref, atol=1e-5, rtol=1e-5)
    assert [s for s, n in zip(out.stride(), out.shape) if n != 1] == \
        [s for s, n in zip(ref.stride(), ref.shape) if n != 1]
    assert metrics.generated_kernel_count == forward_kernels
    tangent = torch.randn(ref.shape)
    out.backward(tangent)
    ref.backward(tangent)
    assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-5)
    assert metrics.fallback_count == 0, metrics.fallback_ops
    assert metrics.generated_kernel_count == kernels
    assert frames_ok() == 1 and not minidynamo.counters["graph_break"]


def _views_of_two_aliasing_inputs(a, b):
    return a.t(), b / (1.5 + a.mean(0, keepdim=True).abs())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_of_one_of_two_inputs_on_one_storage_is_remade_from_that_input(backend):
    """``f(a, a[1:])`` returning ``a.t()``: the output was re-made as ``as_strided`` of whichever input the
    storage was looked up to, here ``b = a[1:]``, whose gradient loses the elements outside ``b``: row 0 of
    ``a``'s gradient was missing.  The input is the one the graph made the view from (``meta.output_of_input``).
    (AOT fuzz round.)"""
    compiled = minidynamo.minicompile(_views_of_two_aliasing_inputs, backend=backend)
    (leaf,), (leaf_ref,) = leaves(torch.randn(3, 4))
    a, a_ref = leaf[:, ::2], leaf_ref[:, ::2]
    out, ref = compiled(a, a[1:]), _views_of_two_aliasing_inputs(a_ref, a_ref[1:])
    assert_same(out, ref)
    assert out[0]._base is leaf
    weights = [torch.randn(r.shape) for r in ref]
    sum((o * w).sum() for o, w in zip(out, weights)).backward()
    sum((r * w).sum() for r, w in zip(ref, weights)).backward()
    assert_same(leaf.grad, leaf_ref.grad, atol=1e-5, rtol=1e-4)
    assert frames_ok() == 1


def _scatter_a_larger_source(a):
    t = torch.stack([a, a]) * 2
    return t.scatter_(2, torch.tensor([[[0], [3], [2]], [[2], [3], [0]]]), torch.stack([a, a])).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backward_that_eager_refuses_raises_at_backward(backend):
    """``scatter_`` with a source larger than its index: eager runs the forward, and only its backward raises
    (ScatterBackward0 "returned an invalid gradient").  Tracing the joint graph raised at the first call.  As for
    a saved tensor changed in place ([Note: a backward that eager refuses]), the graph runs eagerly and raises
    at ``backward()``, as eager does.  (AOT fuzz round.)"""
    compiled = minidynamo.minicompile(_scatter_a_larger_source, backend=backend)
    (a,), (a_ref,) = leaves(torch.randn(3, 4))
    with pytest.warns(UserWarning, match="backward would fail"):
        out = compiled(a)
    assert_same(out, _scatter_a_larger_source(a_ref))
    with pytest.raises(RuntimeError, match="invalid gradient"):
        out.backward()
