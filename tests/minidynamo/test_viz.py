"""Tests for minidynamo/viz.py: the FX-graph picture.

The oracle for every arrow label is eager PyTorch: we run the graph on real tensors, record each node's
value, and check the label the picture shows for it. Budget: well under 2 s on a 2-core CPU.
"""

import re
import shutil

import pytest
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import ShapeProp

from minidynamo import viz

_NODE_LINE = re.compile(r"^\t(\S+) \[label=.* fillcolor=(\S+)\]$")
_EDGE_LINE = re.compile(r"^\t(\S+) -> (\S+)(?: \[label=\"(.*)\"\])?$")


class Toy(torch.nn.Module):
    """Every fx node kind: placeholder, call_module, call_method, get_attr, call_function, output."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        y = self.lin(x).relu() + self.b
        return torch.sin(y).sum(-1)


def f(x, w):  # the README's capture example
    return torch.relu(x @ w).sum(-1)


def node_lines(dot):
    return [m.groups() for line in dot.body if (m := _NODE_LINE.match(line.rstrip("\n")))]


def edge_lines(dot):
    return [m.groups() for line in dot.body if (m := _EDGE_LINE.match(line.rstrip("\n")))]


def real_values(gm, *args):
    """Run the graph eagerly and keep every node's real output: the oracle for arrow labels."""
    seen = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            seen[n.name] = super().run_node(n)
            return seen[n.name]

    Recorder(gm).run(*args)
    return seen


def test_one_box_per_node_coloured_by_kind():
    gm = torch.fx.symbolic_trace(Toy())
    dot = viz.draw_graph(gm, name="toy")
    boxes = dict(node_lines(dot))
    assert len(boxes) == len(gm.graph.nodes)
    kinds = {n.op for n in gm.graph.nodes}
    assert kinds == set(viz.OP_COLORS)  # Toy exercises all six kinds
    for n in gm.graph.nodes:
        assert boxes[n.name] == viz.OP_COLORS[n.op], n.op
    assert len(set(viz.OP_COLORS.values())) == len(viz.OP_COLORS)  # kinds are distinguishable


def test_one_arrow_per_use_with_eager_shapes():
    gm = torch.fx.symbolic_trace(Toy())
    x = torch.randn(2, 4)
    ShapeProp(gm).propagate(x)  # fills node.meta["tensor_meta"]
    dot = viz.draw_graph(gm)
    edges = edge_lines(dot)
    assert len(edges) == sum(len(n.all_input_nodes) for n in gm.graph.nodes)
    values = real_values(gm, x)
    for src, _dst, label in edges:
        v = values[src]
        assert label == f"f32[{', '.join(map(str, v.shape))}]"
    assert ("sum_1", "output", "f32[2]") in edges


def test_labels_name_the_target():
    gm = torch.fx.symbolic_trace(Toy())
    src = viz.draw_graph(gm).source
    for text in ("torch.sin", "operator.add", ".relu", "lin: Linear"):
        assert text in src


def test_make_fx_graph_uses_meta_val():
    x, w = torch.randn(5, 3), torch.randn(3, 4)
    gm = make_fx(f)(x, w)  # ATen graph; make_fx stores fake values in meta["val"]
    dot = viz.draw_graph(gm)
    edges = edge_lines(dot)
    values = real_values(gm, x, w)
    assert len(edges) == sum(len(n.all_input_nodes) for n in gm.graph.nodes)
    for src, _dst, label in edges:
        assert label == f"f32[{', '.join(map(str, values[src].shape))}]"
    assert "aten.mm.default" in dot.source
    assert re.fullmatch(r"\w+", dot.name)  # make_fx names the module "<lambda>": not a DOT identifier


def test_example_value_fake_tensor_metadata():
    """The translator stores fake tensors in meta["example_value"]; those label the arrows too."""
    gm = torch.fx.symbolic_trace(f)
    with FakeTensorMode() as mode:
        fx_, fw = (
            mode.from_tensor(torch.randn(8, 16)),
            mode.from_tensor(torch.randn(16, 2, dtype=torch.float32)),
        )
        fake = {"x": fx_, "w": fw}
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                n.meta["example_value"] = fake[n.name]
    labels = {(s, d): lbl for s, d, lbl in edge_lines(viz.draw_graph(gm))}
    assert labels[("x", "matmul")] == "f32[8, 16]"
    assert labels[("w", "matmul")] == "f32[16, 2]"
    assert labels[("matmul", "relu")] is None  # no metadata recorded there: no label, no crash


def test_describe_value_forms():
    assert viz.describe_value(torch.zeros(2, 3, dtype=torch.int64)) == "i64[2, 3]"
    assert viz.describe_value((torch.zeros(1), torch.zeros((), dtype=torch.bool))) == "(f32[1], b8[])"
    assert viz.describe_value(7) == "int 7"
    assert viz.describe_value(object()) == ""


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not installed: cannot render SVG")
def test_render_svg():
    gm = torch.fx.symbolic_trace(Toy())
    dot = viz.draw_graph(gm, name="toy")
    svg = viz.render_svg(dot)
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert svg.count('class="node"') == len(gm.graph.nodes)
    bundle = dot._repr_mimebundle_()  # what Jupyter calls to show the Digraph inline
    assert "<svg" in bundle["image/svg+xml"]


def test_render_svg_without_dot_names_the_os_package(monkeypatch):
    monkeypatch.setenv("PATH", "")
    dot = viz.draw_graph(torch.fx.symbolic_trace(f))
    with pytest.raises(viz.GraphvizNotInstalled, match="graphviz"):
        viz.render_svg(dot)
