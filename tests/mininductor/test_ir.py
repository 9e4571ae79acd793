"""The IR (``ir.py``, ``dependencies.py``, ``virtualized.py``): one ``inner_fn`` read three ways -- printed, its
reads recorded, and realised into a buffer; views compose by re-indexing without creating buffers."""
import torch

from mininductor import ir
from mininductor.compile_fx import trace_inference
from mininductor.dependencies import extract_read_writes
from mininductor.graph import GraphLowering
from mininductor.virtualized import V


def _lower(fn, *args):
    gm, _ = trace_inference(fn, list(args))
    graph = GraphLowering(gm, list(args))
    with V.set_graph_handler(graph):
        graph.run(*args)
    return graph


def test_pointwise_chain_is_one_unrealised_body_until_output():
    graph = _lower(lambda x: (x + 1).sin() * 2, torch.randn(3, 5))
    assert len(graph.buffers) == 1 and isinstance(graph.buffers[0], ir.ComputedBuffer)
    body = graph.buffers[0].data
    with V.set_graph_handler(graph):
        rw = extract_read_writes(body)
        text = body.inner_fn_str()
    assert [d.name for d in rw.reads] == ["arg0_1"]
    assert "ops.sin" in text and "ops.add" in text and "ops.mul" in text


def test_views_reindex_without_buffers():
    graph = _lower(lambda x: x.t()[1:, ::2].unsqueeze(0) + 1, torch.randn(4, 6))
    assert len(graph.buffers) == 1
    with V.set_graph_handler(graph):
        reads = extract_read_writes(graph.buffers[0].data).reads
    assert str(reads[0]) == "MemoryDep('arg0_1', i1 + 12*i2 + 1)"  # x[2*i2, i1 + 1] of a (4, 6) buffer


def test_reductions_are_realised_and_multi_use_large_bodies_too():
    graph = _lower(lambda x: x.sum(-1), torch.randn(4, 6))
    assert isinstance(graph.buffers[0].data, ir.Reduction)
    ys = [torch.randn(4, 6) for _ in range(6)]
    def fn(a, b, c, d, e, f):
        p = a + b + c + d + e + f
        return p + 1, p * 2
    graph = _lower(fn, *ys)
    assert len(graph.buffers) == 3  # p (reads 6 buffers, two users) is materialised once


def test_layout_indexer_and_strided_view():
    layout = ir.FixedLayout(torch.device("cpu"), torch.float32, [4, 6], [6, 1])
    from mininductor.indexing import sym
    assert layout.make_indexer()([sym("a"), sym("b")]) == 6 * sym("a") + sym("b")
    graph = _lower(lambda x: x.t() @ x, torch.randn(5, 3))
    extern = [b for b in graph.buffers if isinstance(b, ir.ExternKernel)]
    assert len(extern) == 1 and any(isinstance(i, ir.ReinterpretView) for i in extern[0].inputs)
