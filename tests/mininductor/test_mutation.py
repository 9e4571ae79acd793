"""Mutation and aliasing like eager: in-place ops on inputs and intermediates (``F.relu(x, inplace=True)`` with
its result unused), decompositions that ``copy_`` into slices (functionalized again), outputs that alias an input
stay views of it, and gradients flow through an in-place relu at new shapes. Found by the op corpora. Budget: a
few seconds on 2 cores."""
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import config
from mininductor.runtime import KernelLauncher

from .utils import DEVICE, assert_same, check, frames_ok, run_shapes

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


# ---------------------------------------------------------------------------------------------------------------
# Mutated inputs in AOTAutograd: what the outputs alias, how the new value is written back, what eager cannot
# express functionally (regression tests of the AOT fuzz round; each compares with eager: values, final inputs,
# aliasing, requires_grad and the gradients of every leaf)
# ---------------------------------------------------------------------------------------------------------------
BACKENDS = ["aot_eager", "inductor"]


def _run_both(fn, make_inputs, backend, grad=True):
    """``fn`` eagerly and compiled on two copies made by ``make_inputs() -> (leaves, inputs)``; compares outputs,
    final inputs, which input each output shares memory with, ``requires_grad``/``grad_fn`` and (grad mode)
    the gradients of a weighted sum of everything with a history.  Returns the compiled outputs and inputs."""
    (leaves, inputs), (ref_leaves, ref_inputs) = [_seeded(make_inputs) for _ in range(2)]
    compiled = minidynamo.minicompile(fn, backend=backend)
    with torch.set_grad_enabled(grad):
        outs, expected = compiled(*inputs), fn(*ref_inputs)
    assert_same((outs, inputs), (expected, ref_inputs))
    storage = lambda t: t.untyped_storage()._cdata
    for o, e in zip(outs, expected):
        assert [storage(o) == storage(a) for a in inputs] == [storage(e) == storage(a) for a in ref_inputs]
        assert (o.requires_grad, o.grad_fn is None) == (e.requires_grad, e.grad_fn is None)
    if grad and any(t.grad_fn is not None for t in (*expected, *ref_inputs)):
        weights = [torch.randn(o.shape) for o in (*expected, *ref_inputs)]
        for ts, ls in (((*outs, *inputs), leaves), ((*expected, *ref_inputs), ref_leaves)):
            sum((t * w).sum() for t, w in zip(ts, weights) if t.grad_fn is not None).backward()
        for leaf, ref in zip(leaves, ref_leaves):
            assert (leaf.grad is None) == (ref.grad is None)
            if ref.grad is not None:
                assert_same(leaf.grad, ref.grad, atol=1e-5, rtol=1e-4)
    return outs, inputs


def _seeded(make_inputs):
    torch.manual_seed(0)
    return make_inputs()


def _index_add_then_views(b, w):
    b.index_add_(0, torch.tensor([2]), w.sum(0, keepdim=True))
    return b[::2], b.t(), b


def _transposed_non_leaf():
    leaf, w = torch.randn(4, 3, requires_grad=True), torch.randn(2, 4, requires_grad=True)
    return [leaf, w], [(leaf * 1).t(), w]


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_that_views_a_mutated_input_stays_its_view(backend, grad):
    """``b.index_add_(...); return b[::2], b.t(), b``: eager returns views of ``b`` (and ``b``).  The functional
    graph returned views of ``b``'s new value, a buffer the runtime then copies into ``b``: right values, but a
    later write through the output missed ``b`` (aot_eager, both grad modes; inductor in training).  Such outputs
    are re-made from the input after the copy-back, with eager's geometry ([Note: outputs that alias mutated
    inputs])."""
    outs, (b, _) = _run_both(_index_add_then_views, _transposed_non_leaf, backend, grad)
    assert outs[2] is b
    with torch.no_grad():
        outs[0].zero_()
    assert not b[::2].any()
    assert frames_ok() == 1


def _write_a_view_of_a_leaf_under_no_grad(c, x):
    with torch.no_grad():
        c.copy_(x.detach() * 2)
    return x.sin(), c


def _gapped_view_of_a_leaf():
    leaf, x = torch.randn(4, 3, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    return [leaf, x], [leaf[:, ::2], x]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_of_a_leaf_written_under_no_grad_is_written_back_under_no_grad(backend):
    """The program writes ``c = leaf[:, ::2]`` under ``no_grad`` (eager refuses it under grad mode).  The runtime
    copied the new value back under grad mode: "a view of a leaf Variable that requires grad is being used in an
    in-place operation" (aot_eager); and mininductor's forward read the clone of ``c`` that the runtime passes it
    contiguous, with the strides (3, 2) it was compiled for, and wrote garbage into ``c``."""
    _run_both(_write_a_view_of_a_leaf_under_no_grad, _gapped_view_of_a_leaf, backend)
    assert frames_ok() == 1


def _write_through_a_reshape(a):
    a.reshape(-1).copy_(torch.full((8,), 1.5))  # ``a`` has gaps: the reshape is a copy, ``a`` stays as it is
    return a.sin(), a


def _column_slice_of_a_non_leaf():
    leaf = torch.randn(4, 3, requires_grad=True)
    return [leaf], [(leaf * 1)[:, 1:]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_with_gaps_keeps_its_strides_in_the_trace(backend):
    """AOTAutograd clones an input that requires grad before the graph writes it; ``clone()`` of an input with
    gaps is contiguous, so ``reshape(-1)`` of the clone was a view where eager's is a copy: the graph wrote ``a``,
    which eager leaves alone (a mutated input's value differing from eager).  The clone keeps the input's strides
    ([Note: a clone keeps the input's strides])."""
    _run_both(_write_through_a_reshape, _column_slice_of_a_non_leaf, backend)
    assert frames_ok() == 1


def _fill_under_no_grad(a, b):
    with torch.no_grad():
        b.masked_fill_(b > 0, -0.5)
    return a * 2, b


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_leaf_changed_under_no_grad_gets_no_gradient(backend):
    """A leaf written under ``no_grad`` keeps ``grad`` None in eager; its new value counted as a differentiable
    output of the graph, whose backward gave the leaf a zero gradient.  A mutation autograd never saw (under
    ``no_grad`` or through ``detach()``) is no differentiable output."""
    def make():
        a, b = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
        return [a, b], [a, b]
    _run_both(_fill_under_no_grad, make, backend)


def _detach_then_fill(c):
    t = c.detach()
    t[::2] = c.reshape(-1).norm()  # ``t`` now has a history of its own (through the norm), ``c`` does not
    return t, c


def _add_own_column(b):
    b.add_(b.narrow(1, 1, 1))  # reads column 1 after writing it (eager does not check an input with gaps)
    return b * 1


def _index_add_own_rows(b):
    b.detach().index_add_(0, torch.tensor([2, 2, 0, 1]), b)  # reads row 2 after writing it
    return b * 1


def _masked_fill_of_an_expand(c):
    e = c.unsqueeze(0).expand(2, *c.shape)
    e.masked_fill_(c > 0, -0.36)  # eager (deprecated): filled where the mask is false
    return e


def _fill_an_expand_of_the_input(c):
    c.unsqueeze(0).expand(2, *c.shape).fill_(0.25)  # eager writes every element of ``c`` once
    return c * 1


def _write_through_a_window_beyond_the_input(c):
    c.as_strided((2, 2), (1, 2)).add_(2.0)  # ``c = x[:, ::2]``: the window covers x[0, 1] and x[0, 3] too
    return c * 1


def _non_leaf_with_gaps():
    leaf = torch.randn(4, 3, requires_grad=True)
    return [leaf], [(leaf * 1)[:, ::2]]  # strides (3, 2): ``reshape(-1)`` copies


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_detach_then_fill, _add_own_column, _index_add_own_rows, _masked_fill_of_an_expand,
                                _fill_an_expand_of_the_input, _write_through_a_window_beyond_the_input])
def test_what_a_functional_graph_cannot_express_runs_eagerly(fn, backend):
    """Programs whose eager result no functional graph gives: a ``detach()``ed alias of a mutated input that gets
    a gradient of its own (it was re-made as a view of the input: wrong gradients); in-place ops that read what
    they already wrote (wrong values); ``masked_fill_`` of an ``expand``ed tensor, ``fill_`` of an ``expand`` of
    an input, a write through an ``as_strided`` window beyond its input's elements (wrong values: [Note: in-place
    ops on an expanded tensor], ``_outside_its_input`` in decomposition.py).  The graph now runs eagerly, with a
    warning."""
    without_grad = fn in (_masked_fill_of_an_expand, _fill_an_expand_of_the_input)  # (autograd refuses those)
    make = (lambda: ([], [torch.randn(4, 4)[:, ::2]])) if without_grad else _non_leaf_with_gaps
    with pytest.warns(UserWarning, match="eagerly"):
        _run_both(fn, make, backend)


def _add_through_an_as_strided_window(c):
    c.as_strided((2, 2), (1, 3)).add_(1.0)  # ``c = y.t()``: the window reads the storage, not ``c``'s order
    return c * 2


def _scale_rows_of_the_storage(c):
    c.as_strided((3, 2), (3, 1)).mul_(2.0)
    return c.sum(0), c


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_add_through_an_as_strided_window, _scale_rows_of_the_storage])
def test_a_write_through_as_strided_of_a_transposed_input(fn, backend, grad):
    """A write through ``as_strided`` of a transposed input that requires grad is traced as
    ``as_strided_scatter(primals_1, ...)``, and ATen's kernel asserts that a base requiring grad is contiguous:
    aot_eager raised "INTERNAL ASSERT FAILED ... as_strided_scatter is currently only supported for contiguous
    inputs" (both grad modes: the caller's input requires grad either way).  aot_eager's graphs pass the base
    detached ([Note: as_strided_scatter of an input that requires grad] in aot_autograd.py)."""
    def make():
        leaf = torch.randn(3, 4, requires_grad=True)
        return [leaf], [(leaf * 1).t()]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*(mininductor|eagerly)")  # traced, not run eagerly
        _run_both(fn, make, backend, grad)
    assert frames_ok() == 1


def _transpose_in_place_then_matmul(x, y):
    y.t_()
    return x @ y


def _scale_then_transpose_in_place(x, y):
    y.mul_(2)
    y.t_()
    return x * 2, y + 1, y


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_transpose_in_place_then_matmul, _scale_then_transpose_in_place])
def test_a_metadata_mutation_of_an_input_runs_the_graph_eagerly(fn, backend, grad):
    """``y.t_()`` of an input changes the caller's tensor's shape: no functional graph returns that, and
    ``collect_metadata`` refused it with a NotImplementedError that escaped as an internal error (aot_eager in
    both grad modes, mininductor in training).  The graph now runs eagerly, with a warning."""
    def make():
        x, y = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
        return [x, y], [x, y * 1]
    with pytest.warns(UserWarning, match="metadata .* running the graph eagerly"):
        _run_both(fn, make, backend, grad)
    assert frames_ok() == 1


def _scale_then_read_a_window(a):
    a.mul_(2)
    return a.as_strided((2,), (1,), 3) * 1  # ``a`` starts at storage offset 2: eager reads a[1], a[2]


def _scale_then_return_a_window_from_before_the_input(a):
    t0 = a.mul_(2)
    t2 = t0.as_strided((2, 2), (1, 2), 1)  # storage element 1 lies before ``a``
    with torch.no_grad():
        a.index_fill_(-1, torch.tensor([0]), -0.01)
    return t2,


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,grad", [(_scale_then_read_a_window, True), (_scale_then_read_a_window, False),
                                     (_scale_then_return_a_window_from_before_the_input, True)])
def test_as_strided_of_a_mutated_input_at_a_storage_offset_runs_eagerly(fn, grad, backend):
    """``a = y[2:10]`` passed in and mutated, then ``as_strided`` with an explicit storage offset: the trace
    replays the window on ``a``'s new value, a buffer that starts at ``a[0]``, and read ``a[3]`` where eager reads
    storage element 3, ``a[1]`` (wrong values, every backend); a window starting before ``a`` (the second)
    passed the check for windows outside the input on the clone that stands for ``a``, and ``y`` lost the
    gradient of storage element 1.  The graph runs eagerly ([Note: as_strided of a shifted input]; AOT fuzz
    round, fuzz2 seed 10).  (The second under no_grad: eager's own output is a view whose ``grad_fn`` raises,
    which ``_run_both`` cannot compare.)"""
    def make():
        leaf = torch.randn(12, requires_grad=True)
        return [leaf], [(leaf * 1)[2:10]]
    with pytest.warns(UserWarning, match="storage offset 2.*eagerly"):
        _run_both(fn, make, backend, grad)
    assert frames_ok() == 1


def _set_rows_of_an_expand(b):
    b.unsqueeze(0).expand(2, *b.shape)[:2] = b  # eager copies ``b`` onto itself twice; the meta kernel refuses
    return b * 2


def _view_then_write_through_a_transpose(c):
    t = c.permute(1, 0).add_(1.5)
    v = c.view(-1)
    t.index_add_(0, torch.tensor([0, 1]), torch.ones(2, 3))
    return v  # functionalization re-makes ``v`` from ``c``'s new value: ``view`` needs its strides kept


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_set_rows_of_an_expand])
def test_a_write_tracing_refuses_runs_the_graph_eagerly(fn, backend):
    """A write that functionalization refuses where eager runs it: a copy into an ``expand``ed view ("more than
    one element of the written-to tensor refers to a single memory location", from the meta kernel of
    ``copy_``).  It escaped ``aot_eager`` as an internal error.  The graph now runs eagerly, with a warning
    (mininductor first tries an inference trace when nothing requires grad).  (A view replayed on the new value
    of an ``index_add_`` through a transpose was refused here too, its strides row-major: now traced,
    [Note: in-place ops keep their input's strides].)"""
    def make():
        leaf = torch.randn(3, 4)
        return [leaf], [leaf * 1]  # (backward of the write into an ``expand``: eager refuses it)
    with pytest.warns(UserWarning, match="eagerly|tracing for inference"):
        _run_both(fn, make, backend)
    assert frames_ok() == 1


def _scale_through_a_detach(a, b):
    a.detach().mul_(1.5)  # autograd never sees it: ``a`` keeps its history (a leaf: no gradient at all)
    return b * 2, a


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_leaf_changed_through_detach_gets_no_gradient(backend):
    """As under ``no_grad``: ``a.detach().mul_(1.5)`` of a leaf ``a``; its new value counted as a differentiable
    output (functionalization's "hidden from autograd" flag is not set by ``detach``), and ``a.grad`` came back
    zeros where eager's is None.  A mutation that leaves the input's autograd history as it was is no
    differentiable output."""
    def make():
        a, leaf = torch.randn(4, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
        return [a, leaf], [a, leaf * 1]
    _run_both(_scale_through_a_detach, make, backend)


def _transposed_input():
    leaf = torch.randn(3, 4, requires_grad=True)
    return [leaf], [leaf.t() * 1]  # strides (1, 4): a.t() is contiguous


def _row_major_input():
    leaf = torch.randn(3, 4, requires_grad=True)
    return [leaf], [leaf * 1]


def _masked_fill_then_write_a_flattened_transpose(a):
    a.masked_fill_(a > 0, 0.08)
    a.t().flatten().add_(1.5)  # eager: a view of a (a.t() is contiguous), so a gets the +1.5
    return a,


def _index_add_then_write_a_flattened_transpose(a):
    a.index_add_(0, torch.tensor([1, 3]), torch.ones(2, 3))
    a.t().flatten().mul_(2)
    return a * 1,


def _cumsum_then_write_a_flattened_transpose(a):
    a.cumsum_(1)
    a.t().flatten()[::2].sub_(1)
    return a.sum(), a.t()


@pytest.mark.parametrize("fn,make_inputs", [
    (_masked_fill_then_write_a_flattened_transpose, _transposed_input),
    (_index_add_then_write_a_flattened_transpose, _transposed_input),
    (_cumsum_then_write_a_flattened_transpose, _transposed_input),
    (_view_then_write_through_a_transpose, _row_major_input)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_in_place_op_keeps_its_inputs_strides_in_the_trace(fn, make_inputs, backend):
    """Functionalization traces ``a.masked_fill_(...)`` as ``a = masked_fill(a, ...)`` and gave ``a`` that
    result's strides, row-major, where eager keeps ``a`` transposed: ``a.t().flatten()`` became a copy in the
    trace and the ``add_`` through it was lost (the input's value differing from eager).  Such ops are traced as
    ``a.copy_(a.op(...))`` ([Note: in-place ops keep their input's strides]; AOT fuzz round,
    unfixed_masked_fill_strides.py).  The last, through a view of a transpose, was refused before (the view
    replayed on the new value could not take its strides)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*(mininductor|eagerly)")  # traced, not run eagerly
        _run_both(fn, make_inputs, backend)
    assert frames_ok() == 1


def test_a_scatter_kernel_is_never_timed_by_running_it():
    """[Note: kernels that write in place are not timed] (runtime.py): timing a kernel's candidate configs runs it
    again and again, which an accumulating scatter into its target must not -- under ``max-autotune`` every
    kernel of more than 1024 elements has several candidates.  The scatter's launcher keeps one config; its
    values are eager's (on the GPU, compiled: MININDUCTOR_TEST_DEVICE=cuda)."""
    def f(out, idx, src, w):
        out.index_add_(0, idx, src * w)
        return out.sum(0)
    out, src = torch.zeros(64, 2048), torch.randn(256, 2048)
    idx, w = torch.randint(0, 64, (256,)), torch.rand(256, 1)
    with config.patch(mode="max-autotune"):
        compiled = check(f, out, idx, src, w, atol=1e-4, rtol=1e-4)
    assert "timed=False" in compiled.source
    launchers = {name: v for name, v in vars(compiled.module).items() if isinstance(v, KernelLauncher)}
    scatter = re.search(r"(\w+) = KernelLauncher\([^\n]*timed=False", compiled.source).group(1)
    assert scatter in launchers and len(launchers[scatter].configs) == 1
    assert "tl.atomic_add" in compiled.source
