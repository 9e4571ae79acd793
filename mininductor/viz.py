"""Pictures of mininductor's stages: the ATen graph, the IR buffers, the fused kernels, and which source line
ended up in which kernel.

What goes in: a function and example inputs (or an FX ``GraphModule`` and its inputs).  ``compile_artifacts``
runs the same stages ``compile_fx_inner`` runs -- ``trace_inference`` (make_fx + decompositions), ``GraphLowering``,
``Scheduler``, ``WrapperCodeGen`` -- and keeps every intermediate object instead of only the loaded module.
What comes out: ``graphviz.Digraph`` objects built from those real objects (they show themselves in Jupyter;
``minidynamo.viz.render_svg`` gives SVG, ``dot.render(path, format="png")`` a file):

    draw_aten_graph(a)    the ATen graph after decompositions (reuses ``minidynamo.viz.draw_graph``)
    draw_ir(a)            one box per IR buffer with its loop body (the ``inner_fn`` printed over ``ops.*``)
    draw_fusion(a)        one cluster per generated kernel holding the buffers fused into it; externs (matmuls)
                          on their own; a dashed red edge, labelled with the scheduler's reason, for each pair
                          the scheduler considered and did not fuse
    draw_kernel_map(a)    the user's source lines on the left, kernels on the right, an edge per line whose ops
                          a kernel computes (from each ATen node's ``stack_trace``, kept by ``preserve_node_meta``)
    draw_partition(g)     training: the joint graph coloured by where each node runs -- forward, backward, or both
                          (recomputed) -- with the tensors saved for backward outlined (``g = training_artifacts(...)``)

    >>> a = compile_artifacts(lambda x: torch.softmax(x, -1), torch.randn(4, 8))   # doctest: +SKIP
    >>> draw_fusion(a)                                                               # doctest: +SKIP

Upstream twin: ``torch/_inductor/debug.py`` (``draw_buffers`` draws the scheduler's nodes with ``FxGraphDrawer``;
``TORCH_COMPILE_DEBUG=1`` writes ``ir_pre_fusion.txt``/``ir_post_fusion.txt``) and ``tlparse``'s provenance view,
which maps kernels back to source lines.  We draw with ``graphviz`` so pictures render inline.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import graphviz
import torch
import torch.fx

from minidynamo.viz import describe_value, draw_graph, node_label

from . import ir
from .aot_autograd import AOTGraphs, aot_module, nop
from .codegen.wrapper import WrapperCodeGen
from .compile_fx import trace_inference
from .graph import GraphLowering
from .scheduler import ExternKernelSchedulerNode, FusedSchedulerNode, Scheduler, SchedulerNode
from .virtualized import V


@dataclasses.dataclass
class CompileArtifacts:
    """Every intermediate of one ``compile_fx_inner`` run, kept for looking at."""

    gm: torch.fx.GraphModule  # what the backend received (Dynamo's graph)
    aten_gm: torch.fx.GraphModule
    graph: GraphLowering
    scheduler: Scheduler
    wrapper: WrapperCodeGen
    source: str  # output_code.py

    def kernel_names(self) -> list[str]:
        return [k.name for k in self.wrapper.kernels]


def compile_artifacts(fn_or_gm: Callable | torch.fx.GraphModule, *example_inputs) -> CompileArtifacts:
    """Run mininductor's stages on ``fn_or_gm`` and keep what each made (the first graph, for a function)."""
    if isinstance(fn_or_gm, torch.fx.GraphModule):
        gm, inputs = fn_or_gm, list(example_inputs)
    else:
        gm, inputs = capture_graph(fn_or_gm, *example_inputs)
    aten_gm, _ = trace_inference(_interpreted(gm), inputs)
    graph = GraphLowering(aten_gm, inputs)
    with torch.no_grad(), V.set_graph_handler(graph):
        graph.run(*inputs)
        graph.current_node = None
        scheduler = Scheduler(graph)
        wrapper = WrapperCodeGen(graph, scheduler)
        source = wrapper.generate()
    return CompileArtifacts(gm, aten_gm, graph, scheduler, wrapper, source)


def _interpreted(gm: torch.fx.GraphModule) -> Callable:
    """``gm`` run node by node by ``fx.Interpreter``: under ``preserve_node_meta`` each ATen node ``make_fx``
    records then inherits the ``stack_trace`` of the Dynamo node it came from (upstream's AOTAutograd does the
    same), which is what ties a kernel back to a source line."""
    return lambda *args: torch.fx.Interpreter(gm).run(*args)


def capture_graph(fn: Callable, *args) -> tuple[torch.fx.GraphModule, list]:
    """The first FX graph minidynamo captures from ``fn(*args)``, with the inputs the backend was given."""
    from minidynamo import minicompile
    captured: list[tuple] = []

    def backend(gm, example_inputs):
        captured.append((gm, list(example_inputs)))
        return gm.forward

    minicompile(fn, backend=backend)(*args)
    if not captured:
        raise ValueError("minidynamo captured no graph from this function (no tensor operations?)")
    return captured[0]


# ------------------------------------------------------------------------------------------------ ATen graph
def draw_aten_graph(a: CompileArtifacts, name: str = "ATen graph") -> graphviz.Digraph:
    return draw_graph(a.aten_gm, name=name)


# --------------------------------------------------------------------------------------------------- IR buffers
IR_COLORS = {"Pointwise": "palegreen", "Reduction": "lightsalmon", "WelfordReduction": "lightsalmon",
             "Scan": "lightsalmon", "Scatter": "khaki", "InputBuffer": "lightblue", "ConstantBuffer": "lightyellow",
             "ExternKernel": "orange", "FallbackKernel": "tomato", "MultiOutput": "orange"}


def ir_kind(buf: ir.Buffer) -> str:
    """``Pointwise``/``Reduction``/... for a computed buffer, else the buffer's own class name."""
    return type(buf.data).__name__ if isinstance(buf, ir.ComputedBuffer) else type(buf).__name__


def buffer_reads(buf: ir.Buffer) -> set[str]:
    """The buffers ``buf`` reads: what the scheduler would record (run the inner_fn with a load recorder)."""
    if isinstance(buf, ir.ComputedBuffer):
        return set(SchedulerNode(buf, 0).read_names)
    return set(ExternKernelSchedulerNode(buf, 0).read_names)


def draw_ir(a: CompileArtifacts, name: str = "IR buffers (before fusion)") -> graphviz.Digraph:
    """One box per graph input and IR buffer; a computed buffer shows its ranges and loop body."""
    dot = _digraph(name, node_attr={"shape": "box", "style": "filled", "fontname": "Courier", "fontsize": "9"})
    for input_name in a.graph.graph_input_names:
        buf = a.graph.graph_inputs[input_name]
        dot.node(input_name, f"{input_name}\\n{ir_kind(buf)} {_layout(buf)}",
                 fillcolor=IR_COLORS.get(ir_kind(buf), "white"))
    with V.set_graph_handler(a.graph):
        for buf in a.graph.buffers:
            dot.node(buf.get_name(), graphviz.nohtml(_buffer_label(buf)), fillcolor=IR_COLORS.get(ir_kind(buf), "white"))
            for r in sorted(buffer_reads(buf)):
                dot.edge(r, buf.get_name())
    return dot


def _layout(buf) -> str:
    try:
        return f"{describe_value(_Meta(buf.get_size(), buf.get_dtype()))}"
    except Exception:  # noqa: BLE001 - an opaque output has no layout
        return ""


@dataclasses.dataclass
class _Meta:
    shape: Any
    dtype: torch.dtype


def _buffer_label(buf: ir.Buffer) -> str:
    head = f"{buf.get_name()} = {ir_kind(buf)} {_layout(buf)}"
    if isinstance(buf, ir.ComputedBuffer):
        data = buf.data
        ranges = f"ranges={data.ranges}" + (f" reduction {data.get_reduction_type()} over "
                                            f"{data.get_reduction_size()}" if data.get_reduction_size() else "")
        body = [line.strip() for line in data.inner_fn_str().splitlines() if line.strip()]
        return "\\l".join([head, ranges] + [f"  {_clip(b)}" for b in body]) + "\\l"
    if isinstance(buf, ir.ExternKernel):
        return f"{head}\\l{_clip(str(getattr(buf, 'kernel', '')))}\\l"
    return head + "\\l"


def _clip(text: str, n: int = 70) -> str:
    text = text.replace("\\", "/")
    return text if len(text) <= n else text[:n - 3] + "..."


# -------------------------------------------------------------------------------------------- fused kernels
def draw_fusion(a: CompileArtifacts, name: str = "kernels after fusion") -> graphviz.Digraph:
    """One cluster per kernel (named as in output_code.py), extern calls alone, "why not fused" in red."""
    dot = _digraph(name, node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                                    "fontsize": "10"})
    names = {id(k.fused): k.name for k in a.wrapper.kernels}
    for k, node in enumerate(a.scheduler.nodes):
        if isinstance(node, FusedSchedulerNode):
            _fused_cluster(dot, k, node, names.get(id(node), f"kernel {k}"))
        else:
            dot.node(node.name, f"{node.name}\\n{type(node.node).__name__}", fillcolor=IR_COLORS["ExternKernel"])
    produced = {n for node in a.scheduler.nodes for n in node.get_names()}
    for node in a.scheduler.nodes:
        for r in sorted(node.read_names & produced):
            for target in _members(node):
                if r in _reads_of(a, target):
                    dot.edge(r, target)
    for names_a, names_b, why in a.scheduler.rejections:
        dot.edge(names_a[-1], names_b[0], label=_wrap(why), color="red", fontcolor="red", style="dashed",
                 constraint="false")
    return dot


def _fused_cluster(dot: graphviz.Digraph, k: int, node: FusedSchedulerNode, kernel_name: str) -> None:
    with dot.subgraph(name=f"cluster_{k}") as sub:
        sub.attr(label=kernel_name, style="rounded,filled", fillcolor="whitesmoke", fontname="Helvetica")
        for sn in node.snodes:
            kind = "reduction" if sn.is_reduction() else "pointwise"
            sub.node(sn.name, f"{sn.name}\\n{kind}", fillcolor=IR_COLORS["Reduction" if sn.is_reduction()
                                                                          else "Pointwise"])


def _members(node) -> list[str]:
    return [sn.name for sn in node.snodes] if isinstance(node, FusedSchedulerNode) else [node.name]


def _reads_of(a: CompileArtifacts, name: str) -> set[str]:
    for node in a.scheduler.nodes:
        if isinstance(node, FusedSchedulerNode):
            for sn in node.snodes:
                if sn.name == name:
                    return sn.read_names
        elif node.name == name:
            return node.read_names
    return set()


def _wrap(text: str, width: int = 40) -> str:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + len(w) > width:
            lines.append(cur)
            cur = ""
        cur = f"{cur} {w}".strip()
    return "\n".join(lines + [cur])


# ----------------------------------------------------------------------------------------- kernel <-> source
def kernel_source_lines(a: CompileArtifacts) -> dict[str, list[tuple[str, int, str]]]:
    """For each kernel (and extern call): the user source lines (file, line, text) whose ops it computes."""
    out: dict[str, list[tuple[str, int, str]]] = {}
    names = {id(k.fused): k.name for k in a.wrapper.kernels}
    for node in a.scheduler.nodes:
        key = names.get(id(node), "kernel") if isinstance(node, FusedSchedulerNode) else node.name
        buffers = [sn.node for sn in node.snodes] if isinstance(node, FusedSchedulerNode) else [node.node]
        lines = []
        for origin in sorted({o for b in buffers for o in b.origins if o is not None}, key=lambda o: o.name):
            for where in _user_lines(origin):
                if where not in lines:
                    lines.append(where)
        out[key] = sorted(lines, key=lambda w: (w[0], w[1]))
    return out


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)')


def _user_lines(node: torch.fx.Node) -> list[tuple[str, int, str]]:
    """The innermost user frame of ``node.meta['stack_trace']``."""
    found = _FRAME.findall(node.meta.get("stack_trace") or "")
    return [(f, int(n), text.strip()) for f, n, text in found[-1:]]


def draw_kernel_map(a: CompileArtifacts, name: str = "kernels <-> source lines") -> graphviz.Digraph:
    """Source lines (left) joined to the kernels (right) that compute their ops."""
    dot = _digraph(name, graph_attr={"rankdir": "LR"},
                   node_attr={"shape": "box", "style": "filled", "fontname": "Helvetica", "fontsize": "10"})
    mapping = kernel_source_lines(a)
    seen_lines: dict[tuple, str] = {}
    for kernel, lines in mapping.items():
        color = "orange" if kernel.startswith("buf") else "palegreen"
        dot.node(kernel, kernel, fillcolor=color)
        for f, n, text in lines:
            line_id = seen_lines.setdefault((f, n), f"line{len(seen_lines)}")
            dot.node(line_id, graphviz.nohtml(f"{f.rsplit('/', 1)[-1]}:{n}  {_clip(text, 50)}"),
                     fillcolor="white", fontname="Courier")
            dot.edge(line_id, kernel)
    return dot


# ------------------------------------------------------------------------------------------ training partition
def training_artifacts(fn: Callable, *example_inputs) -> AOTGraphs:
    """AOTAutograd's graphs for the first graph minidynamo captures from ``fn(*example_inputs)``: the joint graph, the
    forward and backward it was cut into, and the partition's stats. Some input must require grad (a parameter
    does), else there is no backward to partition."""
    gm, inputs = capture_graph(fn, *example_inputs)
    graphs = aot_module(gm, inputs, fw_compiler=nop).aot_graphs
    if graphs.joint_graph is None:
        raise ValueError("no input requires grad, so AOTAutograd made an inference graph: nothing to partition")
    return graphs


PARTITION_COLORS = {"forward": "lightblue", "backward": "lightsalmon", "recomputed": "palegreen",
                    "primal": "white", "tangent": "lightyellow", "output": "lightgrey"}


def partition_side(node: torch.fx.Node, fw_names: set[str], bw_names: set[str]) -> str:
    """Where a joint-graph node ends up: ``forward``, ``backward``, ``recomputed`` (both: the backward computes it
    again instead of loading it), or ``primal``/``tangent``/``output`` for the joint graph's edges."""
    if node.op == "placeholder":
        return "tangent" if node.name.startswith("tangents") else "primal"
    if node.op == "output":
        return "output"
    if node.name in fw_names:
        return "recomputed" if node.name in bw_names else "forward"
    return "backward"


def draw_partition(g: AOTGraphs, name: str = "joint graph, partitioned") -> graphviz.Digraph:
    """The joint graph with each node coloured by ``partition_side``; tensors saved for backward get a thick red
    outline, and the arrows they cut (forward -> backward) are red: that is what the forward keeps alive."""
    def call_names(gm: torch.fx.GraphModule | None) -> set[str]:
        return {n.name for n in gm.graph.nodes if n.op == "call_function"} if gm is not None else set()

    fw_names, bw_names = call_names(g.fw_graph), call_names(g.bw_graph)
    saved = set(g.stats.saved) if g.stats else set()
    title = (f"{name}: {len(saved)} saved ({g.saved_bytes} bytes), {g.num_recomputed} recomputed\n"
             "blue: forward · orange: backward · green: both (recomputed) · red outline: saved for backward")
    dot = _digraph(title, node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica", "fontsize": "10"})
    sides = {}
    for node in g.joint_graph.graph.nodes:
        sides[node.name] = side = partition_side(node, fw_names, bw_names)
        outline = {"color": "red", "penwidth": "3"} if node.name in saved else {}
        dot.node(node.name, node_label(node), fillcolor=PARTITION_COLORS[side], **outline)
    for node in g.joint_graph.graph.nodes:
        for arg in node.all_input_nodes:
            crosses = arg.name in saved and sides[node.name] in ("backward", "recomputed", "output")
            dot.edge(arg.name, node.name, **({"color": "red"} if crosses else {}))
    return dot


def _digraph(name: str, graph_attr: dict | None = None, node_attr: dict | None = None) -> graphviz.Digraph:
    attrs = {"label": name, "labelloc": "t", "fontname": "Helvetica", "rankdir": "TB", **(graph_attr or {})}
    return graphviz.Digraph(name=re.sub(r"\W", "_", name), graph_attr=attrs, node_attr=node_attr or {},
                            edge_attr={"fontname": "Helvetica", "fontsize": "9"})
