"""Fusion: kernel counts for the acceptance patterns, fusion of reductions with their producers and epilogues,
horizontal siblings, the recorded reason when a pair is not fused, and dead-buffer removal."""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
import mininductor
from mininductor import metrics

from .utils import DEVICE, assert_same, check, kernel_code, leaves

torch.manual_seed(0)
X = torch.randn(33, 130)


def test_gelu_tanh_chain_is_one_kernel():
    compiled = check(lambda x: F.gelu(x, approximate="tanh"), X, kernels=1)
    assert "triton_poi_fused_" in compiled.source


def test_softmax_last_dim_is_one_kernel():
    compiled = check(lambda x: torch.softmax(x, -1), X, kernels=1)
    assert "triton_per_fused__softmax_0" in compiled.source


def test_layer_norm_is_one_kernel():
    w, b = torch.randn(130), torch.randn(130)
    check(lambda x, w, b: F.layer_norm(x, (130,), w, b), X, w, b, kernels=1, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("welford", [True, False])
def test_layer_norm_sums_each_row_twice_not_three_times(welford, monkeypatch):
    # persistent: var_mean's Welford reduction becomes the row's sum (the mean) and the sum of squared deviations
    # from it, in registers; the two-pass lowering's var and mean share one sum (reduction CSE)
    monkeypatch.setattr(mininductor.config, "welford_looped", welford)
    w, b = torch.randn(130), torch.randn(130)
    compiled = check(lambda x, w, b: F.layer_norm(x, (130,), w, b), X, w, b, kernels=1, atol=1e-5, rtol=1e-5)
    assert kernel_code(compiled).count("tl.sum(") == 2 and "_welford" not in kernel_code(compiled)


def test_masks_are_constant_when_blocks_divide_the_sizes():
    # 64 rows of 128: every block the launcher may pick divides both sizes, so no lane is ever out of range
    # and the masks are written as constants (Triton drops the predicates); 33 x 130 keeps real masks.
    compiled = check(lambda x: torch.softmax(x, -1), torch.randn(64, 128), kernels=1)
    assert "xmask = tl.full([XBLOCK, 1], True, tl.int1)" in compiled.source
    assert "rmask = tl.full([1, RBLOCK], True, tl.int1)" in compiled.source
    compiled = check(lambda x: torch.softmax(x, -1), X, kernels=1)
    assert "xmask = xindex < xnumel" in compiled.source and "rmask = rindex < rnumel" in compiled.source


def test_eviction_hints_on_reduction_loads(monkeypatch):
    # a plain row sum streams its rows; a softmax (rows in, rows out) gets no hint; a looped layer_norm keeps the
    # row for its second loop ('evict_last') and streams it in the last one ('evict_first')
    assert "eviction_policy='evict_first'" in check(lambda x: x.sum(-1), X, kernels=1).source
    assert "eviction_policy" not in check(lambda x: torch.softmax(x, -1), X, kernels=1).source
    monkeypatch.setattr(mininductor.config, "looped_reduction_rblock", 32)
    w, b = torch.randn(130), torch.randn(130)
    source = check(lambda x, w, b: F.layer_norm(x, (130,), w, b), X, w, b, kernels=1, atol=1e-5, rtol=1e-5).source
    assert "triton_red_" in source and source.index("'evict_last'") < source.index("'evict_first'")


def test_sum_divided_by_n_is_one_kernel():
    check(lambda x: x.sum(-1) / 130, X, kernels=1)


def test_rmsnorm_by_hand_is_one_kernel():
    w = torch.randn(130)
    check(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, X, w, kernels=1)


@pytest.mark.usefixtures("library_matmuls")
def test_mlp_is_two_externs_and_at_most_two_kernels():
    w1, b1, w2, b2 = torch.randn(64, 130), torch.randn(64), torch.randn(16, 64), torch.randn(16)
    check(lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2) * 2, X, w1, b1, w2, b2,
          externs=2, atol=1e-4, rtol=1e-4)
    assert metrics.generated_kernel_count <= 2


def test_horizontal_siblings_share_a_kernel():
    check(lambda x: (x.sin(), x.cos(), x * 2), X, kernels=1)


def test_pointwise_producer_and_epilogue_fuse_into_reduction():
    # a multi-use producer is realised (it reads many buffers), then fused into both reductions and the epilogue
    ys = [torch.randn(33, 130) for _ in range(5)]

    def fn(x, a, b, c, d, e):
        p = x * a + b * c - d / (e.abs() + 1)
        return p.sum(-1) + p.amax(-1), p * 2
    check(fn, X, *ys, kernels=1, atol=1e-4, rtol=1e-5)


def test_transposed_read_is_not_fused_and_says_why():
    def fn(x):
        y = (x * 2).exp() + x.sin() * x.cos() + x.tanh() + x.sigmoid()  # multi-use, large body: realised
        return y * 3, y.t().contiguous() + 1  # a row-major output that reads y across its rows
    check(fn, torch.randn(31, 31), kernels=2, atol=1e-5, rtol=1e-5)
    reasons = [r for _, _, r in metrics.fusion_rejections]
    assert any("another program's element" in r for r in reasons), reasons


def test_rejection_reasons_are_recorded():
    check(lambda x: (x.sum(0), x.sum(1)), X, kernels=2)
    reasons = [r for _, _, r in metrics.fusion_rejections]
    assert any("iteration spaces differ" in r for r in reasons), reasons


def test_dead_buffers_are_removed():
    def fn(x):
        unused = x.sum(-1) * 3  # noqa: F841
        return x + 1
    check(fn, X, kernels=1)


def test_reduction_feeding_another_reduction_fuses():
    check(lambda x: (x - x.mean(-1, keepdim=True)).abs().amax(-1), X, kernels=1)


def test_transpose_gets_a_2d_tile(monkeypatch):
    import mininductor
    monkeypatch.setattr(mininductor.config, "tile_in_interpreter", True)
    compiled = check(lambda x, y: (x.t() + y, (x.t() * y).sin()), torch.randn(40, 24), torch.randn(24, 40),
                     kernels=1)
    assert "tl.program_id(1)" in compiled.source
    check(lambda x: x.permute(2, 0, 1).contiguous() + 1, torch.randn(5, 18, 20), kernels=1)


def test_a_transpose_of_no_elements_gets_no_tile(monkeypatch):
    """A transposed read of a tensor with a dim of 0: the tile's row count was 0, a divisor (ZeroDivisionError),
    and with ``dynamic=True`` symbolic in a kernel of 0 elements; the graph ran eagerly (GPU lowering fuzz --grad
    --zero). Now such a kernel is not tiled: one symbolic compile, no eager fallback."""
    monkeypatch.setattr(mininductor.config, "tile_in_interpreter", True)
    fn = lambda x, y: (x.permute(0, 2, 1) + y).sin()
    check(fn, torch.randn(0, 20, 18), torch.randn(0, 18, 20), kernels=1)
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n in (20, 24):
        x, y = torch.randn(0, n, 18, device=DEVICE), torch.randn(0, 18, n, device=DEVICE)
        assert_same(compiled(x, y), fn(x, y))
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks


def test_reduction_over_dim0_fuses_with_its_pointwise_neighbours():
    # the pointwise loops are reordered so the reduced dim becomes the kernel's inner axis
    check(lambda x: torch.softmax(x, 0), torch.randn(4, 6, 9), kernels=1)
    check(lambda x: torch.softmax(x, 1), torch.randn(4, 6, 9), kernels=1)


def test_scheduler_prints_and_draws_its_fusion_groups():
    from mininductor.compile_fx import trace_inference
    from mininductor.graph import GraphLowering
    from mininductor.scheduler import Scheduler
    from mininductor.virtualized import V
    x = torch.randn(8, 16)
    gm, _ = trace_inference(lambda x: (torch.softmax(x, -1), x.sum(0)), [x])
    graph = GraphLowering(gm, [x])
    with V.set_graph_handler(graph):
        graph.run(x)
        graph.current_node = None
        scheduler = Scheduler(graph)
    text = str(scheduler)
    assert "group=(8, 16)" in text and "iteration spaces differ" in text
    assert "kernel 0 (8, 16)" in scheduler.to_dot().source


def test_a_node_fused_earlier_that_reads_the_other_side_across_rows_is_not_fused():
    """The backward of ``addcmul(v, v, x)``'s ``[n, n]`` broadcast: a column sum of a buffer had joined a kernel
    (through shared inputs) that came first by its first node, and the buffer's own producer was then fused in.
    The check only asked whether the later side read the earlier one across rows, so the column sum read
    elements other programs had not written yet: wrong gradients from 300 rows up (a 3-row run fit in one program;
    lowering fuzz --grad --dynamic --int, seed 81180). Now either side's reads are checked."""
    def fn(x0, x1):
        v = x0.sum(-1, dtype=torch.float64)
        v3 = torch.addcmul(v, v, x0, value=0.5)
        return torch.logsumexp(v3, 0), x1 * x0 + 1.5 + v3

    metrics.reset()
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(300, 1, dtype=torch.float64, generator=g).to(DEVICE) for _ in range(2)]
    (x0, x1), (r0, r1) = leaves(*inputs)
    compiled = minidynamo.minicompile(fn)
    outs, refs = compiled(x0, x1), fn(r0, r1)
    (outs[0].sum() + outs[1].square().sum()).backward()
    (refs[0].sum() + refs[1].square().sum()).backward()
    assert_same((outs, x0.grad, x1.grad), (refs, r0.grad, r1.grad), atol=1e-9, rtol=1e-9)
    # the backward's column sums read the [300, 300] buffer across rows: refused, with the reason
    reasons = [r for _, _, r in metrics.fusion_rejections]
    assert any("300*rindex + xindex" in r and "another program's element" in r for r in reasons), reasons
    assert metrics.fallback_count == 0, metrics.fallback_ops


def _scatter_of_a_reduction(out, idx, x, w):
    out.index_add_(0, idx, (x * w).sum(-1) * 2)  # each program scatters the row sums it has just computed
    return out


def _index_computed_in_the_kernel(out, idx, x, w):
    # the index is computed (arange % 4), not loaded at the element's x: an epilogue's atomic add must still be
    # [XBLOCK, 1] wide, once per element (lowering fuzz --scatter, seed 9850008: it added once per RBLOCK lane)
    m = x[:, 0].amax(-1)  # one value per row: the target's index is the computed one alone
    return m.new_zeros(m.shape).index_add(0, torch.arange(m.shape[0], device=m.device) % 4, m)


def _reads_the_old_value(out, idx, x, w):
    out.index_add_(0, idx, (out[idx][:, :, None] * x).sum(-1))  # out's old value is read: the scatter goes
    return out  # into a copy (the first kernel), and still ends the reduction's kernel


def _another_reader_of_the_old_value(out, idx, x, w):
    before = out.amax(-1)  # reads out's old value: the copy to scatter into is made beside it
    out.index_add_(0, idx, (x * w).sum(-1))
    return out, before


def _target_made_beside_the_source(out, idx, x, w):
    t = (out[:, :, None] * w).sum(-1)  # the target, made by the kernel that makes the source (shared w)
    t.index_add_(0, idx[:6], (x[:6] * w).sum(-1))
    return t


def _scatter_then_more(out, idx, x, w):
    s = (x * w).sum(-1)
    out.index_add_(0, idx, s)
    return out * 3, s.exp()  # nothing fuses after a scatter: the new value is read by a kernel of its own


@pytest.mark.parametrize("fn, kernels, refusal", [
    (_scatter_of_a_reduction, 1, None),
    (_index_computed_in_the_kernel, 2, None),  # the zeros, then the amax and its scatter
    (_reads_the_old_value, 3, None),  # the copy, the reduction and its scatter, the copy back into out
    (_another_reader_of_the_old_value, 3, None),
    (_target_made_beside_the_source, 2, "nothing fuses after it"),  # the target's kernel runs first
    (_scatter_then_more, 3, "nothing fuses after it"),
])
def test_a_scatter_ends_its_producers_kernel_only_where_that_is_the_same_program(fn, kernels, refusal):
    """[Note: a scatter ends its producer's kernel] (scheduler.py): an ``index_add_`` of a reduction's result
    is the last step of the reduction's kernel (here, in every case); nothing fuses after the scatter, with the
    reason recorded.  Values and the written input are eager's."""
    out, idx = torch.randn(6, 5), torch.tensor([4, 0, 4, 1, 3, 0, 5, 4])  # rows hit twice: additions meet
    x, w = torch.randn(8, 5, 7), torch.randn(7)
    compiled = check(fn, out, idx, x, w, kernels=kernels, atol=1e-5, rtol=1e-5)
    reasons = [r for _, _, r in metrics.fusion_rejections]
    assert refusal is None or any(refusal in r for r in reasons), reasons
    # a reduction's step: tl.sum, or tl.max (interpreted) / a NaN-keeping tl.reduce (compiled) for the amax
    assert any("tl.atomic_add" in k and any(r in k for r in ("tl.sum(", "tl.max(", "tl.reduce("))
               for k in compiled.source.split("@triton.jit"))


def test_config_fuse_scatters_off_runs_every_scatter_alone():
    out, idx, x, w = torch.randn(6, 5), torch.tensor([4, 0, 4, 1, 3, 0, 5, 4]), torch.randn(8, 5, 7), torch.randn(7)
    with mininductor.config.patch(fuse_scatters=False):
        check(_scatter_of_a_reduction, out, idx, x, w, kernels=2, atol=1e-5, rtol=1e-5)
    assert any("config.fuse_scatters" in r for _, _, r in metrics.fusion_rejections)


def test_a_scatter_stays_out_of_a_kernel_that_reads_or_makes_its_target():
    """The two refusals of [Note: a scatter ends its producer's kernel], asked directly: a kernel that reads the
    target (which the scatter would write under another program), and a kernel that makes it."""
    from mininductor import scheduler

    def node(names, reads, scatter_into=None):
        snode = type("SNode", (), {"name": names[0], "read_names": set(reads), "order": 0,
                                   "is_scatter": lambda self: scatter_into is not None,
                                   "node": type("N", (), {"data": type("D", (), {"target": scatter_into})()})()})()
        fused = scheduler.FusedSchedulerNode([snode])
        return fused
    scatter = node(["buf9"], ["buf1", "out"], scatter_into="out")
    assert scheduler._scatter_refusal(node(["buf1"], ["x"]), scatter) is None
    assert "would read or write out" in scheduler._scatter_refusal(node(["buf1"], ["x", "out"]), scatter)
    assert "would read or write out" in scheduler._scatter_refusal(node(["out"], ["x"]), scatter)
    assert "computes what it scatters" in scheduler._scatter_refusal(node(["buf2"], ["buf1"]), scatter)
    assert "nothing fuses after it" in scheduler._scatter_refusal(scatter, node(["buf3"], ["buf9"]))
    # and the scheduler's own check: another kernel reading the target's old value would run after the scatter
    producer, reader = node(["buf1"], ["x"]), node(["buf5"], ["out"])
    graph = type("S", (), {"nodes": [producer, reader, scatter]})()
    assert scheduler.Scheduler._scatter_readers(graph, scatter, producer)
    graph.nodes = [producer, scatter, node(["buf6"], ["buf9"])]  # a reader of the new value: fine
    assert not scheduler.Scheduler._scatter_readers(graph, scatter, producer)
