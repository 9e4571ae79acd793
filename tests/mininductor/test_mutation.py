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


def _scale_every_third_pair(x):
    c = x.clone()
    c.unfold(0, 2, 3).mul_(2)  # windows [0, 1], [3, 4]: elements 2, 5 and 6 are no window's
    return c


def _add_to_every_other_column(x):
    c = x.t() * 1  # column-major
    c.unfold(1, 1, 2).add_(1)
    return c, c.unfold(0, 2, 2)  # covers every element: stays an ``unfold``


@pytest.mark.parametrize("fn", [_scale_every_third_pair, _add_to_every_other_column])
def test_inplace_op_on_a_gapped_unfold_keeps_the_other_elements(fn):
    """An in-place op on an ``unfold`` view is written back through upstream's inverse of ``unfold``,
    ``unfold_backward``, which is zero where no window reads: elements 2, 5 and 6 of ``c`` came back 0
    (``torch.compile(backend="aot_eager")`` does the same).  Such an ``unfold`` is traced as ``as_strided``,
    whose inverse keeps them ([Note: unfold under functionalization]).  Values, strides and gradients against
    eager; one graph, no fallback (found by a training round over view chains)."""
    from mininductor import metrics
    x = torch.arange(7.) if fn is _scale_every_third_pair else torch.randn(5, 4)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    outs, expected = minidynamo.minicompile(fn)(ours), fn(theirs)
    outs, expected = (outs, expected) if isinstance(outs, tuple) else ((outs,), (expected,))
    assert_same(outs, expected)
    assert [o.stride() for o in outs] == [e.stride() for e in expected]
    sum((o * o).sum() for o in outs).backward()
    sum((e * e).sum() for e in expected).backward()
    assert_same(ours.grad, theirs.grad)
    assert metrics.fallback_count == 0 and minidynamo.counters["frames"]["ok"] == 1


def _reshape_after_a_written_back_slice(x):
    x = x.select(0, 0)  # strides (2, 1, 24)
    c = x.clone()  # strides (2, 1, 8)
    c[2:3].mul_(2)  # written back by ``slice_scatter``
    d = (c + x).clone()  # strides (2, 1, 8): dims 1 and 2 do not merge
    d.flatten(1, 2).mul_(2)  # so flatten copies, and d is unchanged
    return d


def test_a_written_back_slice_keeps_eager_strides():
    """The scatter that writes an in-place op on a view back into its base took the strides of our
    decomposition (a row-major ``where``), not eager's (the base's), so a later ``flatten`` that copies in eager
    took a view in the trace, and its in-place op changed ``d``: values doubled ([Note: scatters keep their
    input's strides]).  Values, strides and gradients against eager; no fallback (found by a training round
    over view chains)."""
    from mininductor import metrics
    fn = _reshape_after_a_written_back_slice
    base = torch.randn(5, 3, 4, 2).permute(1, 2, 3, 0)
    ours, theirs = base.detach().requires_grad_(), base.detach().requires_grad_()
    out, expected = minidynamo.minicompile(fn)(ours), fn(theirs)
    assert_same(out, expected)
    assert out.stride() == expected.stride()
    (out * out).sum().backward()
    (expected * expected).sum().backward()
    assert_same(ours.grad, theirs.grad)
    assert metrics.fallback_count == 0 and minidynamo.counters["frames"]["ok"] == 1


def _scale_overlapping_windows(x):
    c = x.clone()
    c.unfold(0, 4, 1).mul_(2)  # windows share elements: eager scales some of them several times
    return c * 1


def _scale_an_overlapping_window(x):
    c = x.clone()
    c.as_strided((2, 2), (3, 3), 1).mul_(2)  # elements [0, 1] and [1, 0] are one: eager scales it twice
    return c * 1


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("fn", [_scale_overlapping_windows, _scale_an_overlapping_window])
def test_inplace_op_on_an_overlapping_view_runs_the_graph_eagerly(fn, requires_grad):
    """An in-place op on a view whose elements overlap, which eager runs element by element:

    * through ``unfold``, functionalization refuses it, and the error escaped the backend as an internal error
      of the translator (the whole frame ran eagerly, "please report this");
    * through ``as_strided``, functionalization cannot tell, and wrote the shared element back once: scaled
      by 2 where eager scales it by 4 -- a wrong answer.

    Both graphs now run eagerly as captured, a counted fallback with its reason."""
    from mininductor import metrics
    x = torch.randn(8, requires_grad=requires_grad)
    with pytest.warns(UserWarning, match="writes a view whose elements overlap"):
        out = minidynamo.minicompile(fn)(x)
    assert_same(out, fn(x))
    assert metrics.fallback_ops == ["whole graph (in-place op on a view whose elements overlap)"]
    assert minidynamo.counters["frames"]["ok"] == 1 and not minidynamo.counters["eager_fallback"]
