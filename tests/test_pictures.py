"""Every picture of the learning surface renders for the running example: SVG produced, non-empty, and with the
node count the artifact it draws predicts (one box per FX node, guard, source line, IR buffer, kernel...).

The pictures are built from the real objects (explain's graphs and guards, mininductor's GraphLowering,
Scheduler and WrapperCodeGen), so a count that drifts means the picture stopped showing the artifact.
Budget: a few seconds on a 2-core CPU.
"""
import os
import re
import shutil
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

import minidynamo
from minidynamo import explain, viz
from minidynamo.examples.demo import f, toy
from mininductor import viz as iviz

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def softmax_plus_total(x):
    """Two kernels: the row softmax fuses; the whole-tensor sum cannot join it (a reason is recorded)."""
    y = torch.softmax(x, -1)
    return y * 2 + x.sum()


def svg_counts(dot):
    svg = viz.render_svg(dot)
    assert svg.startswith("<?xml") and "</svg>" in svg
    return svg.count('class="node"'), svg.count('class="cluster"'), svg.count('class="edge"'), svg


@pytest.fixture(autouse=True)
def _reset():
    minidynamo.reset()
    yield


@pytest.fixture(scope="module")
def f_inputs():
    return torch.randn(8, 16), torch.randn(16, 4)


def test_fx_graph(f_inputs):
    gm = explain(f)(*f_inputs).graphs[0]
    nodes, _, edges, _ = svg_counts(viz.draw_graph(gm, name="f"))
    assert nodes == len(gm.graph.nodes) == 6  # x, w, matmul, relu, sum, output
    assert edges == sum(len(n.all_input_nodes) for n in gm.graph.nodes)


def test_guards_grouped_by_source():
    report = explain(toy)(torch.randn(4), torch.randn(4))
    nodes, clusters, _, svg = svg_counts(viz.draw_guards(report.out_guards))
    assert nodes == len(report.out_guards)
    assert clusters == len({viz.guard_root(g) for g in report.out_guards})
    assert "TENSOR_MATCH" in svg and "L[&#39;x&#39;]" in svg


def test_break_map():
    report = explain(toy)(torch.randn(4), torch.randn(4))
    dot = viz.draw_break_map(toy, report)
    nodes, _, _, svg = svg_counts(dot)
    assert nodes == 6 + 1  # six source lines of toy and one note for its one break
    assert "salmon" in dot.source and "graph break: data&#45;dependent branch" in svg
    assert "[graph 0]" in svg and "[graph 1]" in svg  # the break splits toy into two graphs


@pytest.fixture(scope="module")
def f_artifacts(f_inputs):
    return iviz.compile_artifacts(f, *f_inputs)


@pytest.fixture(scope="module")
def softmax_artifacts():
    return iviz.compile_artifacts(softmax_plus_total, torch.randn(4, 8))


def test_aten_graph(f_artifacts):
    nodes, _, _, svg = svg_counts(iviz.draw_aten_graph(f_artifacts))
    assert nodes == len(f_artifacts.aten_gm.graph.nodes) and "aten.mm.default" in svg


def test_ir_buffers(f_artifacts):
    nodes, _, _, svg = svg_counts(iviz.draw_ir(f_artifacts))
    assert nodes == len(f_artifacts.graph.graph_input_names) + len(f_artifacts.graph.buffers) == 4
    assert "Reduction" in svg and "ops.relu" in svg  # the loop body is in the box


def test_fused_groups_one_cluster_per_kernel(f_artifacts, softmax_artifacts):
    nodes, clusters, _, _ = svg_counts(iviz.draw_fusion(f_artifacts))
    assert (nodes, clusters) == (2, 1)  # the extern matmul alone, relu+sum in one kernel
    dot = iviz.draw_fusion(softmax_artifacts)
    nodes, clusters, _, svg = svg_counts(dot)
    assert clusters == len(softmax_artifacts.kernel_names()) == 2
    assert nodes == len(softmax_artifacts.graph.buffers)
    assert softmax_artifacts.scheduler.rejections
    assert dot.source.count("style=dashed") == len(softmax_artifacts.scheduler.rejections)
    assert "iteration spaces differ" in svg


def test_kernel_source_map(softmax_artifacts):
    mapping = iviz.kernel_source_lines(softmax_artifacts)
    lines = {n for ws in mapping.values() for _, n, _ in ws}
    assert len(lines) == 2  # the softmax line and the return line
    nodes, _, edges, _ = svg_counts(iviz.draw_kernel_map(softmax_artifacts))
    assert nodes == len(mapping) + len(lines)
    assert edges == sum(len(ws) for ws in mapping.values())


def test_save_svg_and_png(tmp_path, f_inputs):
    dot = viz.draw_graph(explain(f)(*f_inputs).graphs[0], name="f")
    svg, png = viz.save(dot, tmp_path / "f.svg"), viz.save(dot, tmp_path / "f.png")
    assert re.search(r"<svg", Path(svg).read_text()) and Path(png).read_bytes()[:4] == b"\x89PNG"


def test_training_partition():
    """One box per joint-graph node, coloured by the side of the cut it lands on; the saved tensors outlined."""
    lin = torch.nn.Linear(8, 8)

    def step(x):
        return torch.nn.functional.gelu(lin(x)).sin().sum()

    g = iviz.training_artifacts(step, torch.randn(4, 8))
    nodes, _, edges, svg = svg_counts(iviz.draw_partition(g))
    joint = list(g.joint_graph.graph.nodes)
    assert nodes == len(joint)
    assert edges == sum(len(n.all_input_nodes) for n in joint)
    fw = {n.name for n in g.fw_graph.graph.nodes if n.op == "call_function"}
    bw = {n.name for n in g.bw_graph.graph.nodes if n.op == "call_function"}
    sides = {n.name: iviz.partition_side(n, fw, bw) for n in joint}
    assert {sides[n] for n in g.stats.recomputed} == {"recomputed"}
    assert "forward" in sides.values() and "backward" in sides.values()
    assert svg.count('stroke="red" stroke-width="3"') == g.num_saved > 0
