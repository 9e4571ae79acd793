"""Pictures of FX graphs: one box per node, one arrow per use, shapes on the arrows.

What goes in: a ``torch.fx.GraphModule`` -- the graph minidynamo captured from bytecode, one that
``torch.fx.symbolic_trace`` or ``make_fx`` produced, or the ATen graph mininductor lowers.
What comes out: a ``graphviz.Digraph``. In Jupyter it shows itself (``Digraph`` has ``_repr_mimebundle_``);
elsewhere ``render_svg(dot)`` returns the SVG text and ``dot.source`` the DOT text.

Why: ``gm.print_readable()`` is exact but long; a picture shows at a glance which ops a graph holds, where its
inputs come from, and what flows along each edge. Each box is coloured by the node's ``op`` kind:

    placeholder    a graph input (a tensor the guards will check)          light blue
    get_attr       a parameter or buffer read from the module              light yellow
    call_function  torch.sin, operator.add, aten.mm.default, ...            pale green
    call_method    x.sum(), x.view(...), ...                                thistle (lilac)
    call_module    a submodule called as a whole (symbolic_trace keeps it)  orange
    output         the graph's result                                       light grey

Each arrow is labelled with the dtype and shape of the value it carries, e.g. ``f32[8, 16]``, read from the
producing node's metadata: ``meta["example_value"]`` (the fake tensor minidynamo's translator records, as
Dynamo does), ``meta["val"]`` (what ``make_fx`` records) or ``meta["tensor_meta"]`` (what
``torch.fx.passes.shape_prop.ShapeProp`` records). An arrow with no metadata has no label.

Tiny example::

    >>> import torch
    >>> from minidynamo.viz import draw_graph
    >>> gm = torch.fx.symbolic_trace(lambda x, w: torch.relu(x @ w).sum(-1))
    >>> dot = draw_graph(gm, name="f")       # display(dot) in a notebook
    >>> "relu" in dot.source
    True

Upstream twin: ``torch/fx/passes/graph_drawer.py`` (``FxGraphDrawer``, which needs ``pydot``). We use the
``graphviz`` package instead, because its ``Digraph`` renders inline in notebooks with no extra glue.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import graphviz
import torch
import torch.fx

# One fill colour per fx node kind (``node.op``). The test pins that each box carries its kind's colour.
OP_COLORS: dict[str, str] = {
    "placeholder": "lightblue",
    "get_attr": "lightyellow",
    "call_function": "palegreen",
    "call_method": "thistle",
    "call_module": "orange",
    "output": "lightgrey",
}

# Short dtype names, as PyTorch's own graph printer writes them (f32[8, 16]).
_DTYPE_ABBRS: dict[torch.dtype, str] = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
    torch.complex64: "c64",
    torch.complex128: "c128",
}


class GraphvizNotInstalled(RuntimeError):
    """Raised by ``render_svg`` when Graphviz's ``dot`` program is not on ``PATH``."""


def draw_graph(gm: torch.fx.GraphModule, name: str | None = None) -> graphviz.Digraph:
    """Return a ``graphviz.Digraph`` with one box per fx node and one labelled arrow per use."""
    title = name or type(gm).__name__
    dot = graphviz.Digraph(
        name=re.sub(r"\W", "_", title),  # a DOT identifier; make_fx names its modules "<lambda>"
        graph_attr={
            "rankdir": "TB",
            "label": graphviz.nohtml(title),
            "labelloc": "t",
            "fontname": "Helvetica",
        },
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica", "fontsize": "11"},
        edge_attr={"fontname": "Helvetica", "fontsize": "9"},
    )
    for node in gm.graph.nodes:
        dot.node(node.name, label=node_label(node), fillcolor=OP_COLORS.get(node.op, "white"))
    for node in gm.graph.nodes:
        for arg in node.all_input_nodes:
            label = describe_node_value(arg, gm)
            dot.edge(arg.name, node.name, **({"label": label} if label else {}))
    return dot


def render_svg(dot: graphviz.Digraph) -> str:
    """Run Graphviz's ``dot`` on ``dot`` and return the SVG text.

    Raises ``GraphvizNotInstalled`` (naming the OS package to install) when the ``dot`` program is missing:
    the ``graphviz`` Python package only writes DOT text, it cannot lay a graph out by itself.
    """
    try:
        return dot.pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound as e:
        raise GraphvizNotInstalled(
            "Graphviz's `dot` program is not installed, so the picture cannot be rendered. Install the "
            "`graphviz` OS package (apt-get install graphviz, brew install graphviz, or `make dot`); "
            "`dot.source` still gives the DOT text."
        ) from e


def node_label(node: torch.fx.Node) -> str:
    """The text in a box: the node's name, then what it calls (``\\n`` is a line break for Graphviz)."""
    if node.op in ("placeholder", "output"):
        return node.name
    return f"{node.name}\\n{target_name(node)}"


def target_name(node: torch.fx.Node) -> str:
    """A readable name for ``node.target``: ``torch.sin``, ``operator.add``, ``aten.mm.default``, ``.sum``."""
    target = node.target
    if node.op == "call_method":
        return f".{target}"
    if node.op == "call_module":
        module = node.graph.owning_module.get_submodule(target) if node.graph.owning_module else None
        return f"{target}: {type(module).__name__}" if module is not None else str(target)
    if isinstance(target, str):
        return target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)  # "aten.mm.default"
    return _qualified_name(target)


def _qualified_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    if fn in vars(operator).values():
        module = "operator"  # operator.add says its module is "_operator"
    if module in (None, "builtins"):
        return name
    if module.startswith(("torch._C", "torch._tensor")):
        module = "torch"  # torch.sin lives in torch._C._VariableFunctions, but users write torch.sin
    return f"{module}.{name}"


def describe_node_value(node: torch.fx.Node, gm: torch.fx.GraphModule | None = None) -> str:
    """The arrow label for the value ``node`` produces, from its metadata; ``""`` when there is none."""
    for key in ("example_value", "val", "tensor_meta"):
        if key in node.meta and node.meta[key] is not None:
            return describe_value(node.meta[key])
    if node.op == "get_attr" and gm is not None:
        return describe_value(_fetch_attr(gm, node.target))  # a parameter: its real shape is at hand
    return ""


def describe_value(value: Any) -> str:
    """``f32[8, 16]`` for a tensor (real, fake or ``TensorMetadata``); tuples and lists element-wise."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and isinstance(dtype, torch.dtype):
        dims = ", ".join(str(d) for d in shape)
        return f"{_DTYPE_ABBRS.get(dtype, str(dtype).replace('torch.', ''))}[{dims}]"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe_value(v) for v in value) + ")"
    if isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return f"{type(value).__name__} {value}"
    return ""


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj


# ------------------------------------------------------------------------------------------ guards, grouped
# [Note: the guard picture]  A guard's source is an access path from the frame (``L['self']._modules['gate']``);
# grouping by the root name (``L['self']``, ``G['torch']``, ``(global)``) shows which inputs the compiled code
# depends on, and how: a tensor input has one TENSOR_MATCH, a module a tree of ID/TYPE matches under it.
GUARD_COLORS: dict[str, str] = {
    "TENSOR_MATCH": "lightblue",
    "ID_MATCH": "lightyellow",
    "TYPE_MATCH": "khaki",
    "EQUALS_MATCH": "palegreen",
    "NN_MODULE": "orange",
    "NO_TENSOR_ALIASING": "pink",
}


def guard_root(guard) -> str:
    """``L['self']`` for ``L['self']._modules['gate']``: the frame variable a guard's source starts from."""
    if guard.source is None:
        return "(global)"
    match = re.match(r"^[LG]\[[^\]]*\]", guard.source.name())
    return match.group(0) if match else guard.source.name()


def draw_guards(guards: list, name: str = "guards") -> graphviz.Digraph:
    """One cluster per root source, one box per guard (kind, source, expected value, the user line)."""
    dot = graphviz.Digraph(name=re.sub(r"\W", "_", name), graph_attr={"rankdir": "LR", "fontname": "Helvetica",
                                                                        "label": name, "labelloc": "t"},
                           node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                                      "fontsize": "10"})
    groups: dict[str, list] = {}
    for g in guards:
        groups.setdefault(guard_root(g), []).append(g)
    for k, (root, members) in enumerate(groups.items()):
        with dot.subgraph(name=f"cluster_{k}") as sub:
            sub.attr(label=root, style="rounded", color="grey40", fontname="Helvetica")
            for j, g in enumerate(members):
                label = f"{g.kind}\\n{g.name()}\\n{_clip(g.describe_expected())}"
                if g.where():
                    label += f"\\n@ {_clip(g.where())}"
                sub.node(f"g{k}_{j}", graphviz.nohtml(label), fillcolor=GUARD_COLORS.get(g.kind, "white"))
    return dot


def _clip(text: str, n: int = 48) -> str:
    text = text.replace("\\", "/").replace('"', "'")
    return text if len(text) <= n else text[:n - 3] + "..."


# ------------------------------------------------------------------------------------------- the break map
GRAPH_COLORS = ["palegreen", "lightblue", "lightyellow", "thistle", "peachpuff", "lightcyan"]


def line_to_graphs(graphs: list, filename: str) -> dict[int, list[int]]:
    """For each line of ``filename``: the indices of the captured graphs holding an op made on that line."""
    out: dict[int, list[int]] = {}
    for k, gm in enumerate(graphs):
        for node in gm.graph.nodes:
            fs = node.meta.get("user_frame")
            if fs is not None and fs.filename == filename and k not in out.setdefault(fs.lineno, []):
                out[fs.lineno].append(k)
    return out


def draw_break_map(fn, report, name: str | None = None) -> graphviz.Digraph:
    """The source of ``fn``, one box per line: coloured by the graph its ops went into, red where it broke.

    ``report`` is ``explain(fn)(*args)``: its ``graphs`` (with each node's user line) and ``break_reasons``.
    A line whose ops went into graph *k* has graph *k*'s colour; a break line is red, with a note giving the
    reason; a line with no ops (Python the translator evaluated away) stays white.
    """
    import inspect
    fn = getattr(fn, "_minidynamo_orig", fn)
    fn = getattr(fn, "forward", fn) if isinstance(fn, torch.nn.Module) else fn
    lines, first = inspect.getsourcelines(fn)
    filename = fn.__code__.co_filename
    in_graph = line_to_graphs(report.graphs, filename)
    breaks = {r.user_stack[-1].lineno: r for r in report.break_reasons
              if r.user_stack and r.user_stack[-1].filename == filename}
    title = name or f"break map of {fn.__name__}"
    dot = graphviz.Digraph(name=re.sub(r"\W", "_", title), graph_attr={"rankdir": "TB", "label": title,
                                                                         "labelloc": "t", "nodesep": "0.1",
                                                                         "ranksep": "0.05"},
                           node_attr={"shape": "box", "style": "filled", "fontname": "Courier", "fontsize": "10",
                                      "width": "6", "height": "0.2"})
    for k, text in enumerate(lines):
        lineno = first + k
        dot.node(f"l{lineno}", graphviz.nohtml(_line_label(lineno, text, in_graph.get(lineno, []))),
                 fillcolor=_line_color(lineno, in_graph, breaks), group="src")
        if k:
            dot.edge(f"l{lineno - 1}", f"l{lineno}", style="invis")
    for lineno, r in breaks.items():
        dot.node(f"b{lineno}", graphviz.nohtml(f"graph break: {_clip(r.reason, 70)}"), shape="note",
                 fillcolor="mistyrose", fontname="Helvetica")
        dot.edge(f"l{lineno}", f"b{lineno}", color="red", constraint="false")
    return dot


def _line_label(lineno: int, text: str, graphs: list[int]) -> str:
    tag = f"   [graph {', '.join(map(str, graphs))}]" if graphs else ""
    return f"{lineno:4d}  {text.rstrip()}{tag}".replace("\\", "/") + "\\l"


def _line_color(lineno: int, in_graph: dict, breaks: dict) -> str:
    if lineno in breaks:
        return "salmon"
    graphs = in_graph.get(lineno)
    return GRAPH_COLORS[graphs[0] % len(GRAPH_COLORS)] if graphs else "white"


def save(dot: graphviz.Digraph, path: str) -> str:
    """Write the picture to ``path``; the suffix picks the format (``.svg``, ``.png``, ``.pdf``, ``.dot``)."""
    import pathlib
    p = pathlib.Path(path)
    fmt = p.suffix.lstrip(".") or "svg"
    p.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "dot":
        p.write_text(dot.source)
    else:
        p.write_bytes(dot.pipe(format=fmt))
    return str(p)
