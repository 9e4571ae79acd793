"""Training graphs with symbolic sizes: one AOTAutograd joint graph, partitioned and compiled once for every size.

``compile_fx_symbolic`` traces the joint forward+backward on minidynamo's fake inputs (``s0`` rows), the
partitioner re-reads every size the backward needs from the shape of a saved tensor or tangent (or saves the
primal that has it: [Note: sizes in the backward]), and both graphs go through the symbolic pipeline.  These tests
compare values *and gradients* with eager and pin the counts: one symbolic compile, no per-shape specialisation,
kernels generated once.  Budget: ~15 s on 2 cores (Triton interpreter).
"""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minidynamo
from mininductor import metrics

from .utils import assert_same, leaves

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _train_step(compiled, fn, *args):
    """Run ``compiled`` and ``fn`` (eager) on copies of ``args``; backward through both; compare outputs and the
    gradients of every input that requires grad.  Returns the compiled output."""
    ours = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    theirs = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    out, ref = compiled(*ours), fn(*theirs)
    assert_same(out, ref, atol=1e-5, rtol=1e-4)
    _loss(out).backward()
    _loss(ref).backward()
    for mine, expected in zip(ours, theirs):
        if expected.requires_grad:
            assert_same(mine.grad, expected.grad, atol=1e-5, rtol=1e-4)
    return out


def _loss(out):
    outs = out if isinstance(out, tuple) else (out,)
    return sum((o * torch.linspace(-1, 1, o.numel()).view(o.shape)).sum() for o in outs)  # a tangent that varies


def test_mlp_trains_three_batch_sizes_from_one_compile():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    ref = copy.deepcopy(mlp)
    compiled = minidynamo.minicompile(mlp, backend="inductor", dynamic=True)
    kernels = []
    for b in (3, 5, 7):
        x = torch.randn(b, 8, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, expected = compiled(x), ref(x_ref)
        assert_same(out, expected, atol=1e-5, rtol=1e-4)
        _loss(out).backward()
        _loss(expected).backward()
        assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
        for p, q in zip(mlp.parameters(), ref.parameters()):
            assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)
        kernels.append(metrics.generated_kernel_count)
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert kernels[0] > 0 and len(set(kernels)) == 1  # forward and backward kernels generated once, at b=3
    assert metrics.fallback_count == 0


def _row_reductions(x, w):
    h = x @ w
    return h.mean(0), (h * h).sum(0).tanh() + x.shape[0]  # mean's backward divides by s0


def test_reduction_over_the_symbolic_dim_and_its_backward():
    compiled = minidynamo.minicompile(_row_reductions, backend="inductor", dynamic=True)
    w = torch.randn(6, 5, requires_grad=True)
    for b in (2, 5, 9):
        _train_step(compiled, _row_reductions, torch.randn(b, 6, requires_grad=True), w)
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert metrics.generated_kernel_count > 0 and metrics.fallback_count == 0


def _gather_rows(x, idx):
    return (x[idx] * 2).sum(1).sigmoid()  # backward: an accumulating scatter of the rows into zeros(x.shape)


def test_gather_by_an_index_of_symbolic_length_scatters_in_the_backward():
    compiled = minidynamo.minicompile(_gather_rows, backend="inductor", dynamic=True)
    x = torch.randn(10, 4, requires_grad=True)
    kernels = []
    for n in (3, 6, 8):
        idx = torch.randint(0, 10, (n,))  # repeated rows: their gradients add up
        _train_step(compiled, _gather_rows, x, idx)
        kernels.append(metrics.generated_kernel_count)
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert kernels[0] > 0 and len(set(kernels)) == 1 and metrics.fallback_count == 0


def test_slice_backward_reads_the_sliced_size_from_a_saved_primal():
    def f(x, g):  # the tutorial MoE's capacity truncation: the gradient of g has g's rows, which only g has
        if len(g) > 4:
            g = g[:4]
        return x[:4] * g.unsqueeze(-1)
    compiled = minidynamo.minicompile(f, backend="inductor")
    for b in (6, 7, 9):
        _train_step(compiled, f, torch.randn(8, 3, requires_grad=True), torch.randn(b, requires_grad=True))
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def test_a_training_graph_whose_trace_guards_sizes_compiles_once_and_checks_them():
    def f(x):
        return x.view(-1, 4).sum(1).exp()  # the trace asks how s0*s1 splits into rows of 4: guards on sizes
    compiled = minidynamo.minicompile(f, backend="inductor", dynamic=True)
    for b in (2, 3, 2, 6):
        _train_step(compiled, f, torch.randn(b, 8, requires_grad=True))
    # [Note: guards a symbolic compile adds]: once refused (a static compile per row count), now one compile that
    # checks the relations at each call
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert metrics.size_guards and not metrics.symbolic_fallbacks
    assert minidynamo.counters["frames"]["ok"] == 1


def test_training_through_chunk_compiles_once_for_every_row_count():
    """The backward of ``x.chunk(2)`` asks whether the last piece has one row (``Ne(s77 - (s77 + 1)//2, 1)``...):
    guards of the trace, checked at each call ([Note: guards a symbolic compile adds]).  Before, the symbolic
    compile refused and each row count compiled its own graph (5 here)."""
    def f(x):
        a, b = x.chunk(2)
        return a.sin() + b[:1].cos()
    compiled = minidynamo.minicompile(f, backend="inductor", dynamic=True)
    for n in (6, 8, 10, 7, 12):
        _train_step(compiled, f, torch.randn(n, 3, requires_grad=True))
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert any("//2" in g for g in metrics.size_guards)


def test_tutorial_moe_trains_with_no_per_shape_compile():
    from minidynamo.examples.moe import make_moe
    model = make_moe("tutorial", "small", seed=0).train()
    ref = copy.deepcopy(model)
    compiled = minidynamo.minicompile(model, backend="inductor")
    for step in range(4):
        x = torch.randn(16, 32, generator=torch.Generator().manual_seed(step))
        (out, aux), (expected, expected_aux) = compiled(x), ref(x)
        assert_same(out, expected, atol=1e-5, rtol=1e-4)
        assert_same(aux, expected_aux, atol=1e-5, rtol=1e-4)
        (out.square().mean() + 0.01 * aux).backward()
        (expected.square().mean() + 0.01 * expected_aux).backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    # each expert graph (a symbolic row count) is compiled once for every row count: before, it was compiled
    # per count (14 specialisations and 156 kernels over these 4 steps; now 0 and 70)
    assert metrics.specialisations == 0 and metrics.symbolic_compiles >= 4, metrics.symbolic_fallbacks
    assert not metrics.symbolic_fallbacks
    assert metrics.generated_kernel_count <= 84, metrics.generated_kernel_count


def test_a_size_returned_by_a_training_graph_is_each_calls_int():
    w = torch.ones(1, requires_grad=True)

    def f(x):  # a SymInt output was kept as a constant of the traced graph: `s77` on every call
        return x * w, x.shape[0]
    compiled = minidynamo.minicompile(f, backend="inductor")
    for b in (2, 4, 5):
        out, n = compiled(torch.randn(b))
        assert type(n) is int and n == b and out.shape == (b,)


def test_a_parameter_updated_under_no_grad_in_a_training_graph():
    def step(p, g):  # an optimizer-like update: the leaf is written under no_grad, as in eager
        with torch.no_grad():
            p.sub_(0.1 * g)
        return p * 2
    p, p_ref, g = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True), torch.randn(3)
    out, expected = minidynamo.minicompile(step, backend="inductor")(p, g), step(p_ref, g)
    assert_same(out, expected, atol=1e-6, rtol=1e-6)
    assert_same(p.detach(), p_ref.detach(), atol=1e-6, rtol=1e-6)


def test_an_output_and_its_detached_alias_keep_their_requires_grad():
    def f(x):  # `y` and `y.detach()` are one buffer of the compiled forward: only the second is non-differentiable
        y = x * 2
        return y, y.detach()
    compiled = minidynamo.minicompile(f, backend="inductor")
    y, z = compiled(torch.ones(2, requires_grad=True))
    assert y.requires_grad and not z.requires_grad and y.grad_fn is not None
    assert z.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()  # an alias, as in eager


def _padded(x, w):
    return F.pad(x @ w, (1, 2), value=0.5).softmax(-1)


def test_pad_under_dynamic_shapes_is_one_graph_for_every_size():
    """``F.pad`` on a tensor of ``s0`` rows: its C++ composite kernel (``aten.pad`` -> ``constant_pad_nd``)
    reads the sizes as ints, which specialised ``s0`` in minidynamo's ShapeEnv -- while translating, and again
    while mininductor traced the graph to ATen (which then refused its symbolic compile, but the guard stayed):
    one graph per batch size under ``dynamic=True``.  Fake ops on symbolic sizes now run under the Python
    dispatcher (as upstream's ``get_fake_value`` and AOTAutograd do), which takes the SymInt-aware
    decomposition.  (Training round 8.)"""
    compiled = minidynamo.minicompile(_padded, backend="inductor", dynamic=True)
    w = torch.randn(4, 3)
    for b in (2, 3, 7, 16):
        (x, wo), (x_ref, w_ref) = leaves(torch.randn(b, 4), w)
        out, ref = compiled(x, wo), _padded(x_ref, w_ref)
        assert_same(out, ref, atol=1e-5, rtol=1e-4)
        (out * torch.arange(6.0)).sum().backward()
        (ref * torch.arange(6.0)).sum().backward()
        assert_same(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
        assert_same(wo.grad, w_ref.grad, atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 1 and minidynamo.counters["recompiles"]["total"] == 0
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def test_multihead_attention_trains_over_sequence_lengths_without_graph_breaks():
    """``nn.MultiheadAttention.forward`` reads ``query.is_nested``: an unsupported tensor attribute, so a graph
    break in every call (4 graphs per call, more compiles per length).  It is metadata, constant for a fake
    tensor like ``is_sparse``: now one graph, and one symbolic compile serves every length.  (Training round 8.)"""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ref = copy.deepcopy(mha)
    compiled = minidynamo.minicompile(mha, backend="inductor", dynamic=True)
    for t in (3, 5, 9):
        (x,), (x_ref,) = leaves(torch.randn(2, t, 8))
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
    torch's ``FloorDiv``: one symbolic compile, forward and backward.  (Training round 8.)"""
    compiled = minidynamo.minicompile(_first_half, backend="inductor", dynamic=True)
    w = torch.randn(3, 4)
    for n in (5, 7, 16, 9):
        (x, wo), (x_ref, w_ref) = leaves(torch.randn(n, 3), w)
        out, ref = compiled(x, wo), _first_half(x_ref, w_ref)
        assert_same(out, ref, atol=1e-5, rtol=1e-4)
        out.sum().backward()
        ref.sum().backward()
        assert_same((x.grad, wo.grad), (x_ref.grad, w_ref.grad), atol=1e-5, rtol=1e-4)
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _causal_mha_loss(mha, x):
    t = x.shape[1]
    mask = torch.triu(torch.full((t, t), float("-inf")), 1)
    out, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    return out.pow(2).mean()


def test_multihead_attention_with_a_causal_attn_mask_trains_over_sequence_lengths():
    """``nn.MultiheadAttention(..., attn_mask=mask)``: its forward calls ``F._canonical_mask``, which calls
    ``F._none_or_dtype``; every ``torch.nn.functional`` function was put in the graph as one node, and
    ``_none_or_dtype`` returns a *dtype*: an internal error (no graph node stands for a dtype).  The private
    Python helpers of ``torch.nn.functional`` are now inlined.  SGD steps over three lengths agree with eager, in
    one symbolic compile.  (Training round 10.)"""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    ref = copy.deepcopy(mha)
    compiled = minidynamo.minicompile(lambda x: _causal_mha_loss(mha, x), backend="inductor", dynamic=True)
    opt, opt_ref = (torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (mha, ref))
    for t in (3, 5, 6):
        x = torch.randn(2, t, 8)
        loss, loss_ref = compiled(x), _causal_mha_loss(ref, x)
        assert_same(loss, loss_ref, atol=1e-5, rtol=1e-4)
        for o, lo in ((opt, loss), (opt_ref, loss_ref)):
            o.zero_grad()
            lo.backward()
            o.step()
        assert_same(list(mha.parameters()), list(ref.parameters()), atol=1e-5, rtol=1e-4)
    assert not minidynamo.counters["graph_break"]
    assert minidynamo.counters["frames"]["ok"] == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _normalized_rows(x, w):
    return F.layer_norm(x, x.shape[-1:]) * w + x.softmax(0)


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_strided_input_trains_from_one_symbolic_compile(dynamic):
    """An input that is a view with a step (``base[:, ::2]`` of a growing ``base``) has a stride symbol of its
    own: no input's *size* is that symbol, so ``call`` could not read it and every such graph fell back to a
    compile per shape.  The wrapper now reads it off the input's ``.stride()``.  (Training round 11.)"""
    torch.manual_seed(0)
    compiled = minidynamo.minicompile(_normalized_rows, backend="inductor", dynamic=dynamic)
    w = torch.randn(3)
    for b in (2, 5, 7):
        bases, bases_ref = leaves(torch.randn(b, 6), w)
        (x, wo), (x_ref, w_ref) = (bases[0][:, ::2], bases[1]), (bases_ref[0][:, ::2], bases_ref[1])
        out, ref = compiled(x, wo), _normalized_rows(x_ref, w_ref)
        assert_same(out, ref, atol=1e-5, rtol=1e-4)
        _loss(out).backward()
        _loss(ref).backward()
        for mine, expected in zip(bases, bases_ref):
            assert_same(mine.grad, expected.grad, atol=1e-5, rtol=1e-4)
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert metrics.symbolic_fallbacks == [] and metrics.fallback_count == 0


# ---------------------------------------------------------------------------------------------------------------
# Division by a size and scans over a symbolic dim, trained: forward and backward compiled once
# ---------------------------------------------------------------------------------------------------------------
def _divide_by_sizes(x, w):
    h = x @ w
    return h.sum(0) / x.shape[0], h * (1.0 / x.shape[0]) + x.shape[0] / x.shape[1]  # the backward divides too


def _running_sums(x, w):
    h = x @ w
    return torch.cumsum(h, 0).tanh(), h.cumsum(1) * x.shape[0]  # cumsum's backward: a flipped cumsum


def _running_fallbacks(x, w):
    h = x @ w
    return torch.logcumsumexp(h, 0), torch.cummax(h, 0)[0]  # ATen fallbacks in the symbolic graph


# logcumsumexp's backward calls logcumsumexp twice more: 4 ATen fallbacks
@pytest.mark.parametrize("fn, fallbacks", [(_divide_by_sizes, 0), (_running_sums, 0), (_running_fallbacks, 4)],
                         ids=["divide", "cumsum", "logcumsumexp_cummax"])
def test_division_and_scans_over_the_symbolic_dim_train_from_one_compile(fn, fallbacks):
    """Gradients vs eager at rows 2 to 67 (primes, and more than one chunk of the looped scan), one compile."""
    compiled = minidynamo.minicompile(fn, backend="inductor", dynamic=True)
    w = torch.randn(6, 5, requires_grad=True)
    kernels = []
    for b in (2, 3, 7, 13, 67):
        _train_step(compiled, fn, torch.randn(b, 6, requires_grad=True), w)
        kernels.append(metrics.generated_kernel_count)
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert len(set(kernels)) == 1 and metrics.fallback_count == fallbacks


def test_cumprod_training_specialises_because_its_backward_reads_the_size():
    """``cumprod``'s backward is C++ (``cumprod_backward``) that reads ``input.size(dim)`` as an int: tracing the
    joint graph guards ``s0 == 3``, so the symbolic compile refuses and compiles per shape -- correct gradients,
    a compile per row count (upstream's formula specialises the same way)."""
    def f(x, w):
        return torch.cumprod(x @ w, 0)
    compiled = minidynamo.minicompile(f, backend="inductor", dynamic=True)
    w = torch.randn(6, 5, requires_grad=True)
    for b in (3, 5, 3):
        _train_step(compiled, f, torch.randn(b, 6, requires_grad=True), w)
    assert metrics.symbolic_compiles == 0 and metrics.specialisations >= 2
    assert "specialised a size" in metrics.symbolic_fallbacks[0]


def _step_slices(x):
    return x[::2].sin(), x[1:] * 2


def test_the_backward_of_a_step_slice_compiles_symbolically():
    """``x[::2]``'s backward is ``slice_scatter(..., end=sys.maxsize)``; clamping that end to ``s77`` asked
    ``s77 < 2**63 - 1``, a guard, and every row count compiled its own static graph."""
    compiled = minidynamo.minicompile(_step_slices, dynamic=True)
    for n in (16, 5, 33, 4):
        _train_step(compiled, _step_slices, torch.randn(n, 3, requires_grad=True))
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _padded_sine(x):
    return F.pad(x, (1, 2), value=3).sin()


def test_a_backward_whose_size_is_its_tangents_minus_the_padding_compiles_once():
    """``pad``'s backward receives a tangent of ``s77 + 3`` elements and returns ``s77``: no input has ``s77``
    bare, and the backward's ``call`` refused (a static compile per length). It now solves the tangent's size
    for it: ``s77 = arg0_1.shape[0] - 3`` (lowering fuzz --grad, seed 50575, a strided input)."""
    compiled = minidynamo.minicompile(_padded_sine, dynamic=True)
    for n in (17, 34, 9):
        _train_step(compiled, _padded_sine, torch.randn(n, requires_grad=True))
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert minidynamo.counters["frames"]["ok"] == 1


def test_the_same_backward_of_a_strided_input_under_automatic_dynamic_compiles_once():
    compiled = minidynamo.minicompile(lambda x: _padded_sine(x))
    for x in (torch.randn(34)[::2], torch.randn(40), torch.randn(60)[::3]):  # the second call: size and stride
        _train_step(compiled, _padded_sine, x.detach().requires_grad_())  # become symbols
    assert minidynamo.counters["frames"]["ok"] == 2 and minidynamo.counters["recompiles"]["total"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _padded_diagonal(x):
    return torch.diagonal(F.pad(x, (1, 2), value=3), 0, 0, -1), torch.softmax(x, -2).sin()


def test_a_backward_size_computed_from_a_saved_inputs_size_compiles_once():
    """The diagonal's backward builds a zero tensor of the padded input's shape, ``s2 + 3`` along its last dim,
    which no tangent or saved tensor has (the diagonal's tangent is ``Min(s0, s2 + 3)`` long); ``x`` has ``s2``.
    The partitioner now saves ``x`` and computes ``sym_size(x, 2) + 3`` (it refused, and each shape compiled its own graph; lowering fuzz --grad --dynamic,
    seed 51180)."""
    compiled = minidynamo.minicompile(_padded_diagonal, dynamic=True)
    for shape in ((33, 2, 5), (66, 2, 5), (7, 3, 9)):  # the softmax's backward saves its output, not x
        _train_step(compiled, _padded_diagonal, torch.randn(shape, requires_grad=True))
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def _mean_of_the_first_half(x):
    m = x.narrow(0, 0, max(1, x.shape[0] // 2)).mean(0, keepdim=True)
    return m + torch.where(m > 0, m, -1.5), torch.exp2(m + x)


def test_a_backward_size_that_is_a_function_of_a_saved_size_compiles_once():
    """The mean's backward expands its gradient to the ``Max(1, s77 // 2)`` rows of the narrowed ``x``, which no
    saved tensor or tangent has; the ``exp2`` output saved for its own backward has ``s77``.  The partitioner
    rebuilds the size from it, ``sym_max(1, floordiv(sym_size(buf, 0), 2))`` (``_rebuild_size``; it only did
    ``a*s + b``, and each shape compiled its own graph: lowering fuzz --grad --dynamic, seed 65243)."""
    compiled = minidynamo.minicompile(_mean_of_the_first_half, dynamic=True)
    for rows in (17, 9, 12, 17):
        _train_step(compiled, _mean_of_the_first_half, torch.randn(rows, 3, dtype=torch.float64, requires_grad=True))
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert metrics.fallback_count == 0, metrics.fallback_ops
