"""Partitioners: cut a joint forward+backward ATen graph into a forward graph and a backward graph.

What goes in: the joint graph of ``trace_joint`` (``_aot_autograd/graph_capture_wrappers.py``) -- placeholders
``primals_*`` then ``tangents_*``, output ``[*forward outputs, *grads]`` (a grad may be None) -- and
``num_fwd_outputs``.
What comes out: ``(fw_gm, bw_gm)``.  ``fw_gm(*primals) -> (*forward outputs, *saved)`` and
``bw_gm(*saved, *tangents) -> (*grads that are not None)``.  The *saved* tensors are what the forward hands to the
backward through ``ctx.save_for_backward``; they stay alive from forward to backward, so they cost memory.

Why: every forward value the backward reads must either be saved or be computed again in the backward. Saving a
matmul's output is right (recomputing it costs a matmul); saving both ``h`` and ``gelu(h)`` is wasteful, since
``gelu(h)`` is a cheap pointwise op that the backward kernel can recompute while it reads ``h`` anyway.

- ``default_partition`` saves every forward value that the backward reads (upstream's ``default_partition``).
- ``min_cut_rematerialization_partition`` ([Note: min-cut]) picks the set of saved tensors with the fewest bytes
  such that everything else the backward needs is recomputable from them by cheap ops (pointwise ops, views, fills).

With symbolic sizes (dynamic shapes) a size is never saved: the backward reads it again off the shape of one of
its inputs ([Note: sizes in the backward]).

Tiny example (a Linear -> GELU -> Linear MLP): the default partition saves ``addmm`` *and* ``gelu(addmm)``; the
min-cut partition saves only ``addmm`` and recomputes the GELU in the backward graph.

Mirrors ``torch/_functorch/partitioners.py``, with a simpler cost model: bytes only (no fusion-aware weights, no
``max_dist_from_bw`` or activation-checkpointing rules), and its own small max-flow instead of networkx.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import operator
from collections.abc import Iterable

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx import Node

aten = torch.ops.aten

__all__ = ["PartitionStats", "default_partition", "min_cut_rematerialization_partition", "partition_stats"]


# ----------------------------------------------------------------------------------------------------------------
# Reading the joint graph
# ----------------------------------------------------------------------------------------------------------------
def _is_primal(n: Node) -> bool:
    return n.op == "placeholder" and n.target.startswith("primals")


def _is_tangent(n: Node) -> bool:
    return n.op == "placeholder" and n.target.startswith("tangents")


def _outputs(gm: torch.fx.GraphModule, num_fwd_outputs: int) -> tuple[list, list]:
    outs = list(gm.graph.find_nodes(op="output")[0].args[0])
    return outs[:num_fwd_outputs], outs[num_fwd_outputs:]


def _ancestors(roots: Iterable[Node], stop: set[Node] = frozenset()) -> set[Node]:
    """``roots`` and everything they read, not walking past ``stop`` nodes (which are included)."""
    seen: set[Node] = set()
    todo = [r for r in roots if isinstance(r, Node)]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in stop:
            todo.extend(n.all_input_nodes)
    return seen


def _tangent_closure(gm: torch.fx.GraphModule) -> set[Node]:
    """Nodes that depend on a tangent: they can only run in the backward."""
    closure: set[Node] = set()
    for n in gm.graph.nodes:
        if _is_tangent(n) or any(i in closure for i in n.all_input_nodes):
            closure.add(n)
    return closure


def size_of(n: Node) -> float:
    """Bytes of the tensor ``n`` produces; inf for values that are not one tensor (they cannot be saved).

    A symbolic size counts with its example value (its *hint*): a cost model must not guard on sizes."""
    val = n.meta.get("val")
    if isinstance(val, torch.Tensor):
        return size_hint(val.numel()) * val.element_size()
    return math.inf


def size_hint(n, fallback: int = 4096) -> int:
    """An int, or a symbolic size's example value (``fallback`` for a size without one).  Read off the SymNode
    rather than through ``optimization_hint``, which torch 2.11 (the GPU machine's) does not have."""
    if isinstance(n, int):
        return n
    hint = getattr(n.node, "hint", None)
    return int(hint) if hint is not None else fallback


def is_sym_node(n: Node) -> bool:
    """A node computing a size (``sym_size``, ``s0 * 16``) rather than a tensor: symbolic-size graphs only."""
    return isinstance(n.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat))


# ----------------------------------------------------------------------------------------------------------------
# Building the two graphs once we know what is saved
# ----------------------------------------------------------------------------------------------------------------
def _extract_graph(joint: torch.fx.GraphModule, inputs: list[Node], outputs: list[Node],
                   checks: Iterable[Node] = ()) -> torch.fx.GraphModule:
    """A new graph with ``inputs`` as placeholders that computes ``outputs`` and makes ``checks`` (see
    ``_checks``), copying the joint nodes they need.

    A size query on a value the new graph cannot compute is asked of one of its inputs instead
    ([Note: sizes in the backward])."""
    needed, rebuilt = _needed(joint, inputs, [*outputs, *checks])
    missing = [n for n in needed - set(inputs) if n.op == "placeholder"]
    assert not missing, f"partition bug: {[n.name for n in missing]} needed but not passed in"
    graph = torch.fx.Graph()
    env: dict[Node, Node] = {}
    for n in inputs:
        env[n] = graph.placeholder(n.name)
        env[n].meta = dict(n.meta)
    for n in joint.graph.nodes:
        if n in needed and n not in env:
            env[n] = _size_from_inputs(graph, n, inputs, env) if n in rebuilt else graph.node_copy(n, env.__getitem__)
    graph.output(tuple(env[o] for o in outputs))
    return torch.fx.GraphModule(joint, graph)


def _needed(joint: torch.fx.GraphModule, inputs: list[Node], outputs: list[Node]) -> tuple[set[Node], set[Node]]:
    """The joint nodes a graph taking ``inputs`` copies to compute ``outputs``, and the size queries among them it
    asks of its inputs instead ([Note: sizes in the backward])."""
    available = _computable(joint, inputs)
    rebuilt = {n for n in joint.graph.nodes if n.target in SIZE_QUERIES and n not in available}
    return _ancestors(outputs, stop=set(inputs) | rebuilt), rebuilt


def _checks(joint: torch.fx.GraphModule, inputs: list[Node], exclude: Iterable[Node] = ()) -> list[Node]:
    """The ``aten._assert_async`` checks (``one_hot``'s classes, ``binary_cross_entropy``'s probabilities: [Note:
    value checks] in codegen/triton.py) a graph taking ``inputs`` can make.  Nothing reads a check, so walking
    back from the outputs dropped them: a training compile returned a loss where eager raises.  A check of
    forward values is made by the forward graph, once; the backward makes those it alone can (none, usually)."""
    available = _computable(joint, inputs)
    return [n for n in joint.graph.nodes if n.target in _VALUE_CHECKS and n in available and n not in exclude]


_VALUE_CHECKS = {aten._assert_async.msg, aten._assert_async.default}


def _computable(joint: torch.fx.GraphModule, inputs: list[Node]) -> set[Node]:
    """The joint nodes a graph taking ``inputs`` can compute: those that need no other placeholder."""
    available = set(inputs)
    for n in joint.graph.nodes:
        if n.op != "placeholder" and all(i in available for i in n.all_input_nodes):
            available.add(n)
    return available


# [Note: sizes in the backward]
# In a graph with symbolic sizes (dynamic shapes) the joint graph computes sizes as nodes: ``sym_size(primals_1, 0)``
# reads ``s0`` off an input, ``mul(sym_size, 16)`` makes ``16*s0``, and the views, expands and fills of both halves
# take such nodes as arguments. The backward only receives the saved tensors and the tangents, so a size read off a
# primal or off a forward value is out of its reach. Upstream's partitioner saves the SymInts the backward needs as
# extra forward outputs, which the runtime stashes on ``ctx`` and passes to the backward as inputs. We do something
# simpler: the backward asks its size query again of *one of its own inputs* whose shape holds the same expression
# -- the rows of ``x`` are the rows of the saved activation and of the output's tangent too -- and the size
# arithmetic above it is copied as it is. A size no input has whole is computed from inputs that have its symbols
# (``_rebuild_size``: the padded length ``s2 + 3`` from ``x``'s ``s2``, ``Max(1, s31 // 2)`` from the ``s31`` rows
# of another). When no saved tensor or tangent holds the size or a symbol of it, the smallest primal that does is
# saved as well (``_size_carriers``: the caller's own tensor, so it costs no allocation; e.g. the gradient of
# ``w[:4]`` has ``w``'s ``s8`` rows, which only ``w`` itself has). When no primal has it either, the partition
# raises ``NotImplementedError`` and the caller compiles per shape instead (specialize.py). Either way every symbol
# of the backward is readable from the shape of a backward input, which is what the symbolic compile's ``call``
# needs anyway -- bare, or as ``a*s + b`` solved for ``s`` (``GraphLowering._solve_sizes``: ``pad``'s
# backward returns ``s77`` of its tangent's ``s77 + 3`` elements, and asks no size query that would save ``x``;
# with an int width ``n`` the tangent has ``s77 + s86`` and the saved ``n`` gives ``s86``: ``_solve_sizes``).
# The min-cut never saves a size: size nodes have no edge in its flow network. An int input (``x[:n]``'s ``n``) is
# the one size the backward takes as it is: no shape holds it, so it is saved (``_int_primals``), and a rebuilt
# size may use it whole (``n * s20``, the rows of ``b.repeat(n, 1)``'s gradient: seed 6300157).
SIZE_QUERIES = {aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int, aten.sym_storage_offset.default}


def _size_from_inputs(graph: torch.fx.Graph, n: Node, inputs: list[Node], env: dict) -> Node:
    """``n``, a size query on a value the graph lacks, as ``sym_size``/``sym_numel`` of one of its inputs (or the
    product of a few of its sizes: ``s0*s1`` rows of a flattened ``(s1, s0, 8)`` saved tensor), else as size
    arithmetic over the inputs' sizes that hold its symbols (``s2 + 3`` from ``x``'s ``s2``)."""
    if not is_sym_node(n):  # a static size: the number itself
        return n.meta["val"]
    expr = n.meta["val"].node.expr
    found = _find_size(expr, inputs)
    if found is None:
        dims = _symbol_dims(expr, inputs)
        if dims is None:
            raise NotImplementedError(f"the backward needs the size {n.meta['val']} ({n.name}), which no saved "
                                      "tensor or tangent has in its shape ([Note: sizes in the backward])")
        return _copy_meta(_rebuild_size(graph, expr, dims, env), n)
    node, dims = found
    if dims is None:
        return _copy_meta(graph.call_function(aten.sym_numel.default, (env[node],)), n)
    sizes = [graph.call_function(aten.sym_size.int, (env[node], d)) for d in dims]
    for d, size in zip(dims, sizes):
        size.meta["val"] = node.meta["val"].shape[d]
    product = sizes[0]
    for size in sizes[1:]:
        product = graph.call_function(operator.mul, (product, size))
    return _copy_meta(product, n)


def _find_size(expr, candidates: list[Node]) -> tuple[Node, tuple[int, ...] | None] | None:
    """``(node, dims)``: a candidate whose sizes ``dims`` (consecutive) multiply to ``expr`` (dims None: its numel
    is ``expr``); None if none has it.  Single dims are preferred, then the numel, then longer products."""
    tensors = [(node, node.meta.get("val")) for node in candidates]
    tensors = [(node, val) for node, val in tensors if isinstance(val, torch.Tensor)]
    for node, val in tensors:
        for dim, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and size.node.expr == expr:  # sympy's equality: no guard
                return node, (dim,)
        numel = val.numel()
        if isinstance(numel, torch.SymInt) and numel.node.expr == expr:
            return node, None
    for node, val in tensors:
        exprs = [s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(s) for s in val.shape]
        for start, stop in itertools.combinations(range(len(exprs) + 1), 2):
            if stop - start > 1 and sympy.Mul(*exprs[start:stop]) == expr:
                return node, tuple(range(start, stop))
    return None


def _symbol_dims(expr, candidates: list[Node]) -> dict | None:
    """``{symbol: (node, dim)}``: for each symbol of ``expr``, a candidate with that symbol as a size (or an int
    candidate that is the symbol: dim None), where ``expr`` is arithmetic ``_rebuild_size`` can write; None if a
    symbol is in no candidate's shape."""
    if not _rebuildable(expr):
        return None
    dims = {}
    ints = {n.meta["val"].node.expr: n for n in candidates if isinstance(n.meta.get("val"), torch.SymInt)}
    for symbol in expr.free_symbols:
        if symbol in ints:  # a saved int input (``repeat(n, 1)``'s ``n``) is the symbol itself: dim None
            dims[symbol] = (ints[symbol], None)
            continue
        found = _find_size(symbol, candidates)
        if found is None or found[1] is None or len(found[1]) != 1:
            return None
        dims[symbol] = (found[0], found[1][0])
    return dims


# size arithmetic the backward can redo: sympy's (and torch's) functions -> the FX call that computes each
_SIZE_FUNCTIONS = {"FloorDiv": operator.floordiv, "Max": torch.sym_max, "Min": torch.sym_min}


def _rebuildable(expr) -> bool:
    if isinstance(expr, (sympy.Symbol, sympy.Integer)):
        return True
    known = isinstance(expr, (sympy.Add, sympy.Mul)) or type(expr).__name__ in _SIZE_FUNCTIONS
    return known and all(_rebuildable(a) for a in expr.args)


def _rebuild_size(graph: torch.fx.Graph, expr, dims: dict, env: dict):
    """``expr`` as FX size arithmetic over ``sym_size`` of the inputs ``dims`` names (``Max(1, s31 // 2)``:
    ``sym_max(1, floordiv(sym_size(x, 0), 2))``), each node with its SymInt value."""
    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        node, dim = dims[expr]
        if dim is None:  # an int input of the graph
            return env[node]
        size = graph.call_function(aten.sym_size.int, (env[node], dim))
        size.meta["val"] = node.meta["val"].shape[dim]
        return size
    fn = operator.add if isinstance(expr, sympy.Add) else operator.mul if isinstance(expr, sympy.Mul) \
        else _SIZE_FUNCTIONS[type(expr).__name__]
    args = [_rebuild_size(graph, a, dims, env) for a in expr.args]
    result = args[0]
    for arg in args[1:]:  # Add, Mul, Max and Min take any number of arguments; FloorDiv takes two
        value = fn(*[a.meta["val"] if isinstance(a, Node) else a for a in (result, arg)])
        result = graph.call_function(fn, (result, arg))
        result.meta["val"] = value
    return result


def _size_carriers(joint: torch.fx.GraphModule, inputs: list[Node], outputs: list[Node], primals: list[Node]) -> list:
    """Primals to save as well, for sizes the backward needs that no other input of it has in its shape.

    A primal is the caller's own tensor: saving it keeps it alive until the backward but allocates nothing."""
    needed, rebuilt = _needed(joint, inputs, outputs)
    carriers: list[Node] = []
    by_size = sorted(primals, key=size_of)
    for n in _sorted(joint, {n for n in needed & rebuilt if is_sym_node(n)}):
        expr = n.meta["val"].node.expr
        if _find_size(expr, inputs + carriers) is not None or _symbol_dims(expr, inputs + carriers) is not None:
            continue
        found = _find_size(expr, by_size)  # the smallest primal that has it, else one for each symbol missing
        if found is not None:
            carriers.append(found[0])
        elif _rebuildable(expr):
            for symbol in sorted(expr.free_symbols, key=str):
                if _symbol_dims(symbol, inputs + carriers) is None and (
                        found := _find_size(symbol, by_size)) is not None and found[1] is not None:
                    carriers.append(found[0])
    return carriers


def _int_primals(joint: torch.fx.GraphModule, inputs: list[Node], outputs: list[Node]) -> list[Node]:
    """The int inputs (``SymInt`` primals: ``x[:n]``'s ``n``) the backward reads as they are, or whose symbol is in
    the sizes it computes with (``pad``'s tangent of ``s27 + s86`` elements, from which ``s86`` alone cannot be
    read): saved, as upstream saves the sizes its backward needs; the runtime keeps them on ``ctx`` beside the
    saved tensors."""
    needed, _ = _needed(joint, inputs, outputs)
    symbols = set()
    for n in needed | set(inputs):
        for v in pytree.tree_leaves(n.meta.get("val")):
            for size in (v.shape if isinstance(v, torch.Tensor) else [v]):
                if isinstance(size, torch.SymInt):
                    symbols |= size.node.expr.free_symbols
    ints = [n for n in joint.graph.nodes if _is_primal(n) and is_sym_node(n) and n not in inputs]
    return [n for n in ints if n in needed or n.meta["val"].node.expr in symbols]


def _copy_meta(new: Node, old: Node) -> Node:
    new.meta = dict(old.meta)
    return new


def _build(joint: torch.fx.GraphModule, num_fwd_outputs: int, saved: list[Node]) -> tuple:
    fw_outs, grads = _outputs(joint, num_fwd_outputs)
    primals = [n for n in joint.graph.nodes if _is_primal(n)]
    tangents = [n for n in joint.graph.nodes if _is_tangent(n)]
    bw_outs = [g for g in grads if g is not None]
    saved = _sorted(joint, saved + _size_carriers(joint, saved + tangents, bw_outs, primals))
    saved = _sorted(joint, saved + _int_primals(joint, saved + tangents, bw_outs))
    fw_checks = _checks(joint, primals)
    fw_gm = _extract_graph(joint, primals, list(fw_outs) + saved, fw_checks)
    bw_gm = _extract_graph(joint, saved + tangents, bw_outs, _checks(joint, saved + tangents, exclude=fw_checks))
    return fw_gm, bw_gm


def _sorted(joint: torch.fx.GraphModule, nodes: Iterable[Node]) -> list[Node]:
    order = {n: i for i, n in enumerate(joint.graph.nodes)}
    return sorted(nodes, key=order.__getitem__)


def default_partition(joint: torch.fx.GraphModule, _joint_inputs=None, *, num_fwd_outputs: int) -> tuple:
    """Save every value computed by the forward half that the backward half reads."""
    fw_outs, grads = _outputs(joint, num_fwd_outputs)
    primals = {n for n in joint.graph.nodes if _is_primal(n)}
    fw_nodes = _ancestors(fw_outs) | primals
    bw_nodes = _ancestors([g for g in grads if g is not None], stop=fw_nodes) - fw_nodes
    saved = {i for n in bw_nodes for i in n.all_input_nodes if i in fw_nodes and not is_sym_node(i)}
    saved |= {g for g in grads if g in fw_nodes}  # a gradient that is a forward value (rare)
    saved = _expand_tuples(saved)
    return _build(joint, num_fwd_outputs, _sorted(joint, saved))


def _expand_tuples(saved: set[Node]) -> set[Node]:
    """A multi-output node (``native_layer_norm``) cannot be saved whole: save the ``getitem``s the backward reads."""
    out = set()
    for n in saved:
        if math.isinf(size_of(n)):
            out |= {u for u in n.users if u.target is operator.getitem}
        else:
            out.add(n)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Min-cut rematerialization
# ----------------------------------------------------------------------------------------------------------------
# [Note: min-cut]
# Make a flow network with two vertices per joint node, ``n.in -> n.out`` with capacity = bytes of n ("what it costs
# to save n"), and ``a.out -> b.in`` with infinite capacity for each use of a by b. The source feeds every primal
# and every forward node that must not be recomputed (matmuls, reductions, random ops); every node that needs a
# tangent drains into the sink. Any cut between source and sink is a set of nodes whose values, if saved, let the
# backward compute everything else it needs from them plus the tangents using only recomputable ops; the minimum
# cut is the cheapest such set. Infinite edges are never cut, so a banned op is never recomputed and a backward-only
# node is never "saved".
RECOMPUTABLE_OPS = {
    aten.full, aten.full_like, aten.zeros, aten.zeros_like, aten.ones, aten.ones_like, aten.arange, aten.empty,
    aten.scalar_tensor, aten.clone, aten._to_copy, aten.copy, aten.where, aten.index_select, aten.gather,
    aten.cat, aten.slice_scatter, aten.select_scatter, aten.constant_pad_nd, aten.expand_copy,
}


def _op_packet(n: Node):
    return getattr(n.target, "overloadpacket", None)


def is_recomputable(n: Node) -> bool:
    """Cheap enough to run again in the backward: pointwise ops, views and fills. Never random ops."""
    if n.op != "call_function":
        return False
    if n.target is operator.getitem:
        return True
    if not isinstance(n.target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in n.target.tags:
        return False
    if torch.Tag.pointwise in n.target.tags or _op_packet(n) in RECOMPUTABLE_OPS:
        return True
    return n.target.is_view


class FlowNetwork:
    """A directed graph with capacities and Edmonds-Karp max-flow (BFS augmenting paths); enough for a min cut."""

    def __init__(self) -> None:
        self.capacity: dict[tuple, float] = collections.defaultdict(float)
        self.adj: dict[object, set] = collections.defaultdict(set)

    def add_edge(self, u, v, capacity: float) -> None:
        self.capacity[(u, v)] += capacity
        self.adj[u].add(v)
        self.adj[v].add(u)  # residual edge

    def _augmenting_path(self, source, sink) -> list | None:
        parent = {source: None}
        queue = collections.deque([source])
        while queue:
            u = queue.popleft()
            for v in self.adj[u]:
                if v not in parent and self.capacity[(u, v)] > 0:
                    parent[v] = u
                    if v == sink:
                        return self._path(parent, sink)
                    queue.append(v)
        return None

    @staticmethod
    def _path(parent: dict, sink) -> list:
        path, v = [], sink
        while parent[v] is not None:
            path.append((parent[v], v))
            v = parent[v]
        return path

    def min_cut(self, source, sink) -> set:
        """Push flow until no augmenting path remains; return the vertices still reachable from ``source``."""
        while (path := self._augmenting_path(source, sink)) is not None:
            flow = min(self.capacity[e] for e in path)
            if math.isinf(flow):
                raise RuntimeError("min-cut partitioner: no finite cut (a backward node needs an unsaveable value)")
            for u, v in path:
                self.capacity[(u, v)] -= flow
                self.capacity[(v, u)] += flow
        return self._reachable(source)

    def _reachable(self, source) -> set:
        seen, todo = {source}, [source]
        while todo:
            u = todo.pop()
            for v in self.adj[u]:
                if v not in seen and self.capacity[(u, v)] > 0:
                    seen.add(v)
                    todo.append(v)
        return seen


# [Note: saving a primal eager does not save]
# ``t = x * 1; return t.sin()``: eager's ``SinBackward`` saves ``t``; the cheapest cut saves ``x`` instead (as many
# bytes, and no allocation: the caller holds ``x`` anyway) and recomputes ``t`` in the backward.  But ``x`` is the
# caller's tensor, and the program may change it in place before ``backward()`` -- ``with torch.no_grad():
# x.add_(1)`` after the call, or a later graph that writes it.  Eager does not care (``t`` is its own buffer);
# we saved ``x``, so the backward raised "one of the variables needed for gradient computation has been modified
# by an inplace operation" (and without that check it would have computed the gradient at the new ``x``).
# Upstream has the same bug (pytorch#185497; its fix, #185876, bans only primals the *graph itself* mutates,
# which here ``_unalias_mutated_inputs`` already handles by saving a copy).  Whether the program writes an input
# after the graph is not known when the graph is compiled, so we take the rule that holds for every program: the
# caller's memory -- a primal, or a view of one (``x.permute(1, 0)`` shares ``x``'s version counter) -- is saved
# only where eager saves it: where a backward node of the joint graph reads it (``x @ w`` saves ``x``), so that a
# later write breaks eager too.  Any other such node gets an infinite ``in -> out`` edge: the cut then falls on
# values eager saves or cheaper ones computed from them.  A finite cut always exists (what ``default_partition``
# saves is one).  The price: ``t`` is saved, where upstream saves ``x`` and allocates nothing for it.  (A primal
# kept only for its symbolic sizes, ``_size_carriers``, is saved regardless.)
def _unsaveable_aliases(joint: torch.fx.GraphModule, num_fwd_outputs: int) -> set[Node]:
    """The primals and views of primals that no backward node of the joint graph reads (eager's autograd saved
    none of them) and that are no gradient themselves: the min-cut must not save them."""
    fw_outs, grads = _outputs(joint, num_fwd_outputs)
    primals = {n for n in joint.graph.nodes if _is_primal(n)}
    fw_nodes = _ancestors(fw_outs) | primals
    bw_nodes = _ancestors([g for g in grads if g is not None], stop=fw_nodes) - fw_nodes
    aliases = set(primals)
    for n in joint.graph.nodes:
        if n.op == "call_function" and _is_view_op(n) and n.args and n.args[0] in aliases:
            aliases.add(n)
    return {n for n in aliases if not any(u in bw_nodes for u in n.users) and n not in grads}


def _is_view_op(n: Node) -> bool:
    return isinstance(n.target, torch._ops.OpOverload) and n.target.is_view


def min_cut_rematerialization_partition(joint: torch.fx.GraphModule, _joint_inputs=None, *,
                                        num_fwd_outputs: int) -> tuple:
    """Save the fewest bytes; recompute cheap ops in the backward instead of saving them ([Note: min-cut])."""
    fw_outs, grads = _outputs(joint, num_fwd_outputs)
    bw_only = _tangent_closure(joint)
    needed = _ancestors([g for g in grads if g is not None]) | _ancestors(fw_outs)
    unsaveable = _unsaveable_aliases(joint, num_fwd_outputs)  # [Note: saving a primal eager does not save]
    net = FlowNetwork()
    for n in joint.graph.nodes:
        if n not in needed or is_sym_node(n):  # a size is asked again in the backward ([Note: sizes in the backward])
            continue
        if n in bw_only:
            net.add_edge((n, "in"), "sink", math.inf)
            continue
        if _is_primal(n) or not is_recomputable(n):
            net.add_edge("source", (n, "in"), math.inf)
        net.add_edge((n, "in"), (n, "out"), math.inf if n in unsaveable else size_of(n))
        for user in n.users:
            if user in needed and not is_sym_node(user):
                net.add_edge((n, "out"), (user, "in"), math.inf)
    for g in grads:  # a gradient that needs no tangent must still reach the backward: saved or recomputed
        if g is not None and g not in bw_only:
            net.add_edge((g, "out"), "sink", math.inf)
    reachable = net.min_cut("source", "sink")
    saved = {n for n in needed if (n, "in") in reachable and (n, "out") not in reachable and n not in bw_only}
    return _build(joint, num_fwd_outputs, _sorted(joint, saved))


# ----------------------------------------------------------------------------------------------------------------
# What a partition costs
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class PartitionStats:
    """Saved tensors (names, bytes) and the forward ops the backward recomputes."""

    saved: list[str]
    saved_bytes: int
    recomputed: list[str]

    def __str__(self) -> str:
        return (f"saved {len(self.saved)} tensors ({self.saved_bytes} bytes): {', '.join(self.saved) or '-'}; "
                f"recomputed in backward: {', '.join(self.recomputed) or '-'}")


def partition_stats(fw_gm: torch.fx.GraphModule, bw_gm: torch.fx.GraphModule, num_fwd_outputs: int) -> PartitionStats:
    """Read the stats off the two graphs, so they hold for any ``partition_fn``.

    A backward node is *recomputed* when the forward graph computes it too (both graphs keep the joint's node names).
    """
    saved = list(fw_gm.graph.find_nodes(op="output")[0].args[0])[num_fwd_outputs:]
    fw_names = {n.name for n in fw_gm.graph.nodes if n.op == "call_function"}
    recomputed = [n.name for n in bw_gm.graph.nodes
                  if n.op == "call_function" and n.name in fw_names and n.target is not operator.getitem]
    nbytes = sum(int(size_of(n)) for n in saved if not math.isinf(size_of(n)))
    return PartitionStats([n.name for n in saved], nbytes, recomputed)
