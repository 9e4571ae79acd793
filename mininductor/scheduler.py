"""The ``Scheduler``: order buffers, drop dead ones, and fuse them into kernels (mirrors
``torch/_inductor/scheduler.py``).

In: ``GraphLowering.buffers``. Out: a topologically ordered list of ``FusedSchedulerNode``s (one Triton kernel
each) and ``ExternKernelSchedulerNode``s (library calls, fallbacks).

Every kernel iterates a *group* ``(numel, rnumel)``: ``(N, 1)`` for pointwise kernels, ``(N, R)`` for a reduction
of ``N`` rows of ``R``. A pointwise node of ``N*R`` elements joins a reduction kernel by splitting its loop into
an ``N`` part and an ``R`` part. ``can_fuse`` allows a pair when the groups agree, they share data, and a consumer
reads a producer's buffer exactly where the producer wrote it for the same iteration (so each program only reads
what it wrote itself); otherwise it records a reason (``metrics.fusion_rejections``). Fusion is greedy by
``score_fusion`` (bytes saved), refusing any fusion that would create a cycle through another node.

Each node's loop is planned by ``SchedulerNode.plan(group)``: the split, then ``simplify_loops`` merging dims
every index walks contiguously; indices are then written over the kernel's flat ``xindex``/``rindex``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import sympy

from . import config, ir, metrics
from .dependencies import RecordLoadsHandler
from .indexing import is_symbolic, product, simplify_index, simplify_loops, size_hint, split_flat, sym
from .virtualized import V

XINDEX, RINDEX = sym("xindex"), sym("rindex")


@dataclasses.dataclass
class LoopPlan:
    """How one node runs inside a kernel of ``group``: merged loop sizes and a body over new loop vars."""

    x_sizes: list[int]
    r_sizes: list[int]
    body: Callable  # body(xvars, rvars) runs the node's store through V.ops

    def canonical_vars(self):
        return split_flat(XINDEX, self.x_sizes) if self.x_sizes else [], \
            split_flat(RINDEX, self.r_sizes) if self.r_sizes else []


class BaseSchedulerNode:
    def __init__(self, node: ir.Buffer, order: int) -> None:
        self.node, self.order = node, order
        self.name = node.get_name()
        self.read_names: set[str] = set()

    def get_names(self) -> set[str]:
        return {self.name}

    def is_extern(self) -> bool:
        return False

    def is_reduction(self) -> bool:
        return False


class ExternKernelSchedulerNode(BaseSchedulerNode):
    def __init__(self, node, order):
        super().__init__(node, order)
        if isinstance(node, ir.MultiOutput):
            self.read_names = {node.parent.get_name()}
        else:
            self.read_names = set(node.input_names()) | set(getattr(node, "opaque_inputs", ()))

    def is_extern(self) -> bool:
        return True


class SchedulerNode(BaseSchedulerNode):
    """One ``ComputedBuffer``."""

    def __init__(self, node: ir.ComputedBuffer, order: int) -> None:
        super().__init__(node, order)
        handler = self._record(self.own_group())
        self.read_names = {n for n, _ in handler.loads}
        if self.is_scatter():  # it writes into its target after whatever produced it
            self.read_names.add(node.data.target)
        self._plans: dict = {}
        self._canonical: dict = {}

    def own_group(self) -> tuple[int, int]:
        return product(self.node.data.ranges), product(self.node.data.get_reduction_size()) or 1

    def is_reduction(self) -> bool:
        return bool(self.node.data.get_reduction_size())

    def is_scatter(self) -> bool:
        return isinstance(self.node.data, ir.Scatter)

    def _record(self, group, canonical=False) -> RecordLoadsHandler:
        plan = self.plan(group) if canonical else None
        handler = RecordLoadsHandler()
        with V.set_ops_handler(handler):
            if plan is not None:
                self._run(plan, *plan.canonical_vars())
            else:
                self._run_raw(group, handler)
        return handler

    def _run_raw(self, group, handler):
        data = self.node.data
        xv = [sym(f"i{k}") for k in range(len(data.ranges))]
        if self.is_reduction():
            rv = [sym(f"r{k}") for k in range(len(data.get_reduction_size()))]
            data.store_output(self.name, self.node.layout.make_indexer(), xv, rv)
        else:
            data.store_output(self.name, self.node.layout.make_indexer(), xv)

    @staticmethod
    def _run(plan: LoopPlan, xvars, rvars):
        return plan.body(list(xvars), list(rvars))

    def plan(self, group: tuple[int, int]) -> LoopPlan | None:
        if group not in self._plans:
            self._plans[group] = self._make_plan(group)
        return self._plans[group]

    def _make_plan(self, group) -> LoopPlan | None:
        numel, rnumel = group
        data, name, indexer = self.node.data, self.name, self.node.layout.make_indexer()
        sizes = list(data.ranges)
        if self.is_reduction():
            if (product(sizes), product(data.get_reduction_size())) != (numel, rnumel):
                return None
            xs, rs = sizes, list(data.get_reduction_size())
            raw = lambda xv, rv: data.store_output(name, indexer, xv, rv)
        else:
            run = _split_dims(sizes, numel, rnumel)
            if run is None:
                return None
            xdims = [d for d in range(len(sizes)) if d not in run]
            # an output with eager's permuted strides: walk it in memory order, so its store is contiguous (not
            # a Scatter: it loops over its source, whose dims are not its buffer's)
            if not run and not isinstance(data, ir.Scatter) and not self.node.layout.is_contiguous():
                stride = self.node.layout.stride
                xdims.sort(key=lambda d: -size_hint(stride[d]))
            xs, rs = [sizes[d] for d in xdims], [sizes[d] for d in run]

            def raw(xv, rv):
                full = [None] * len(sizes)
                for d, v in zip(xdims, xv):
                    full[d] = v
                for d, v in zip(run, rv):
                    full[d] = v
                return data.store_output(name, indexer, full)
        return _merge_plan(xs, rs, raw)

    def canonical_deps(self, group) -> tuple[dict, dict] | None:
        """Reads and writes, ``{buffer: {index over xindex/rindex}}``, when running in a kernel of ``group``."""
        if group not in self._canonical:
            if self.plan(group) is None:
                self._canonical[group] = None
            else:
                h = self._record(group, canonical=True)
                reads, writes = {}, {}
                for n, i in h.loads:
                    reads.setdefault(n, set()).add(simplify_index(i))
                for n, i in h.stores:
                    writes.setdefault(n, set()).add(simplify_index(i))
                self._canonical[group] = (reads, writes)
        return self._canonical[group]


def _split_dims(sizes, numel, rnumel) -> list[int] | None:
    """Which dims of a pointwise loop run along a kernel's reduction axis (``rnumel``): the trailing dims when
    they multiply to it (a row reduction's epilogue), else any run of adjacent dims that does (a reduction over
    dim 0 or a middle dim: the loop is reordered so that run becomes the inner axis). None if nothing fits."""
    total = product(sizes)
    if total == numel:
        return []
    if total != numel * rnumel:
        return None
    n = len(sizes)
    runs = [(n - length, n) for length in range(1, n + 1)]  # suffixes first: no reordering needed
    runs += [(a, b) for b in range(n - 1, 0, -1) for a in range(b - 1, -1, -1)]
    for a, b in runs:
        if product(sizes[a:b]) == rnumel:
            return list(range(a, b))
    return None


def _merge_plan(xs, rs, raw) -> LoopPlan:
    xv = [sym(f"p{k}") for k in range(len(xs))]
    rv = [sym(f"q{k}") for k in range(len(rs))]
    h = RecordLoadsHandler()
    with V.set_ops_handler(h):
        raw(xv, rv)
    exprs = [simplify_index(i) for _, i in h.loads + h.stores] + [sympy.expand(e) for e in h.index_exprs]
    new_xs, reindex_x, _ = simplify_loops(xs, exprs, xv)
    new_rs, reindex_r, _ = simplify_loops(rs, exprs, rv)
    return LoopPlan(new_xs, new_rs, lambda nx, nr: raw(reindex_x(nx), reindex_r(nr)))


class FusedSchedulerNode:
    """Nodes that become one kernel, kept in their original order."""

    def __init__(self, snodes: list[SchedulerNode]) -> None:
        self.snodes = sorted(snodes, key=lambda n: n.order)

    @property
    def order(self) -> int:
        return self.snodes[0].order

    def get_names(self) -> set[str]:
        return {n.name for n in self.snodes}

    @property
    def read_names(self) -> set[str]:
        return set().union(*(n.read_names for n in self.snodes)) - self.get_names()

    def is_extern(self) -> bool:
        return False

    def group(self) -> tuple[int, int]:
        reds = [n.own_group() for n in self.snodes if n.is_reduction()]
        return reds[0] if reds else self.snodes[0].own_group()

    def is_reduction(self) -> bool:
        return any(n.is_reduction() for n in self.snodes)

    def __str__(self) -> str:
        return f"FusedSchedulerNode({', '.join(n.name for n in self.snodes)}; group={self.group()})"


# ----------------------------------------------------------------------------------------------- fusion
def _combined_group(a: FusedSchedulerNode, b: FusedSchedulerNode):
    ga, gb = a.group(), b.group()
    if ga == gb:
        return ga
    if a.is_reduction() and b.is_reduction():
        return None
    red, other = (ga, gb) if a.is_reduction() else (gb, ga)
    if other[0] in (red[0], red[0] * red[1]) and (is_symbolic(red[1]) or red[1] > 1):  # a symbol is >= 2
        return red
    return None


def can_fuse(a: FusedSchedulerNode, b: FusedSchedulerNode) -> tuple[bool, str]:
    """Whether ``a`` (earlier) and ``b`` can share one kernel, and if not, why."""
    if a.is_extern() or b.is_extern():
        return False, "extern kernels are library calls; they never fuse"
    refusal = _scatter_refusal(a, b)
    if refusal is not None:
        return False, refusal
    group = _combined_group(a, b)
    if group is None:
        return False, f"iteration spaces differ: {a.group()} vs {b.group()}"
    deps = {}
    for n in a.snodes + b.snodes:
        d = n.canonical_deps(group)
        if d is None:
            return False, f"{n.name}'s loop of {n.node.get_size()} cannot split into {group}"
        deps[n.name] = d
    written = {}
    for n in a.snodes + b.snodes:
        for buf, idx in deps[n.name][1].items():
            written[buf] = idx
    # either side may read the other's buffers: ``a`` comes first by its first node, and a later node of ``a``
    # can read ``b`` (a column sum of ``b``'s buffer, fused into ``a`` earlier through a shared input)
    for reader, writer in ((b, a), (a, b)):
        for n in reader.snodes:
            for buf, idxs in deps[n.name][0].items():
                if buf in writer.get_names() and idxs != written[buf]:
                    return False, (f"{n.name} reads {buf} at {sorted(map(str, idxs))} but it is written at "
                                   f"{sorted(map(str, written[buf]))} (another program's element)")
    if not (a.get_names() & b.read_names) and not (a.read_names & b.read_names):
        return False, "no shared data"
    return True, ""


def _scatter_refusal(a: FusedSchedulerNode, b: FusedSchedulerNode) -> str | None:
    """Why a scatter keeps ``a`` and ``b`` apart; None when neither holds one, or when ``b`` is a scatter that
    may end ``a``'s kernel.

    [Note: a scatter ends its producer's kernel]  A scatter stores through indirect indices into a buffer it did
    not compute (``outputs.index_add_(0, rows, y)``).  It used to run alone, as a kernel of its own after ``y``'s
    kernel; then ``y`` is stored by one kernel only to be read back by the next, and the graph pays a launch and an
    allocation more -- once per expert in the tutorial MoE, whose scatter follows its second matmul's reduction.
    Fused as the *last* node of ``y``'s kernel, each program scatters the elements it has just computed, as it
    would have stored them.  That is only the same program when the kernel neither reads nor writes the target
    (another program's element may have been scattered already) and nothing else would have to run between the
    two; the second is the scheduler's to check (``Scheduler._scatter_readers``: nothing else reads the target's
    old value), the first is checked here, with the usual rule that ``b`` reads ``a``'s buffers only at the
    elements ``a``'s program writes.  Nothing fuses after a scatter, and a kernel holding one is never timed by
    running it ([Note: kernels that write in place are not timed] in runtime.py).  Upstream's scheduler fuses
    its ``ir.Scatter`` nodes with their producers too."""
    if not any(n.is_scatter() for n in a.snodes + b.snodes):
        return None
    if any(n.is_scatter() for n in a.snodes) or len(b.snodes) != 1:
        return "a scatter writes through indirect indices into another buffer: nothing fuses after it"
    if not config.fuse_scatters:
        return "a scatter runs alone (config.fuse_scatters)"
    target = b.snodes[0].node.data.target
    if target in a.get_names() or target in a.read_names:
        return f"the kernel would read or write {target}, which the scatter writes through indirect indices"
    if not (b.read_names & a.get_names()):
        return "a scatter joins only a kernel that computes what it scatters"
    return None


def score_fusion(a, b, sizes: dict) -> int:
    """Bytes a fusion saves: producer->consumer buffers count double (a write and a read), shared reads once."""
    vertical = sum(sizes.get(n, 0) for n in a.get_names() & b.read_names)
    shared = sum(sizes.get(n, 0) for n in a.read_names & b.read_names)
    return 2 * vertical + shared


class Scheduler:
    def __init__(self, graph) -> None:
        self.graph = graph
        self.output_names = self._output_names()
        self.rejections: list[tuple] = []
        nodes = self._create_nodes(graph.buffers)
        self.nodes = self._remove_dead(nodes)
        self.fuse()

    def _output_names(self) -> set[str]:
        names = set()
        for out in self.graph.graph_outputs:
            if isinstance(out, ir.IRNode):
                inner = ir.unwrap_view_to_buffer(out)
                names.add(inner.get_name() if isinstance(inner, (ir.Buffer, ir.ReinterpretView)) else None)
        for _, value in self.graph.mutations:
            names.add(value.realize())
        names |= set(self.graph.reinplaced)  # scatters into graph inputs (reinplace.py): their effect is the output
        names |= set(self.graph.assertions)  # a check's effect is the error it raises: [Note: value checks]
        return names - {None}

    def _create_nodes(self, buffers):
        nodes = []
        for k, buf in enumerate(buffers):
            if isinstance(buf, ir.ComputedBuffer):
                nodes.append(FusedSchedulerNode([SchedulerNode(buf, k)]))
            else:
                nodes.append(ExternKernelSchedulerNode(buf, k))
        return nodes

    def _remove_dead(self, nodes):
        """Drop buffers nothing reads (fallbacks always stay: they may have side effects)."""
        live = set(self.output_names)
        kept = []
        for node in reversed(nodes):
            is_fallback = isinstance(node, ExternKernelSchedulerNode) and isinstance(node.node, ir.FallbackKernel)
            if node.get_names() & live or is_fallback:
                kept.append(node)
                live |= node.read_names
        return list(reversed(kept))

    # ------------------------------------------------------------------------------------------ fuse
    def fuse(self) -> None:
        if not config.fusion:
            return
        # bytes saved by fusing: a heuristic, so symbolic sizes count at their hint
        sizes = {b.get_name(): size_hint(b.get_numel()) * b.get_dtype().itemsize for b in self.graph.buffers
                 if isinstance(b, ir.ComputedBuffer)}
        for _ in range(10):
            if not self._fuse_once(sizes):
                break
        self.nodes = self._topological_sort(self.nodes)

    def _fuse_once(self, sizes) -> bool:
        fusable = [n for n in self.nodes if not n.is_extern()]
        pairs = []
        for i, a in enumerate(fusable):
            for b in fusable[i + 1:]:
                if a.get_names() & b.read_names or a.read_names & b.read_names or b.get_names() & a.read_names:
                    first, second = (a, b) if a.order < b.order else (b, a)
                    pairs.append((score_fusion(first, second, sizes), first, second))
        pairs.sort(key=lambda p: (-p[0], p[1].order, p[2].order))
        fused = False
        alive = set(map(id, self.nodes))
        for _, a, b in pairs:
            if id(a) not in alive or id(b) not in alive:
                continue
            ok, reason = can_fuse(a, b)
            if ok and self._creates_cycle(a, b):
                ok, reason = False, "fusing would create a cycle through another kernel"
            if ok and self._scatter_readers(b, a):
                ok, reason = False, "another kernel reads the scatter's target before the scatter writes it"
            if not ok:
                rejection = (sorted(a.get_names()), sorted(b.get_names()), reason)
                if rejection not in self.rejections:  # each pass of fuse() meets the same pairs again
                    metrics.fusion_rejections.append(rejection)
                    self.rejections.append(rejection)
                continue
            merged = FusedSchedulerNode(a.snodes + b.snodes)
            self.nodes = [merged if n is a else n for n in self.nodes if n is not b]
            alive -= {id(a), id(b)}
            alive.add(id(merged))
            fused = True
        return fused

    def _scatter_readers(self, b, a) -> bool:
        """When ``b`` is a scatter: does a node other than ``a`` and ``b`` read its target's old value?  Fused
        into ``a``, the scatter would move ahead of such a reader ([Note: a scatter ends its producer's
        kernel]); readers of the new value read the scatter's own name, and come after it either way."""
        if not any(n.is_scatter() for n in b.snodes):
            return False
        target = b.snodes[0].node.data.target
        return any(target in n.read_names for n in self.nodes if n is not a and n is not b)

    def _creates_cycle(self, a, b) -> bool:
        """Is there a path a -> X -> b (or b -> X -> a) through some other node X?"""
        producers = {}
        for n in self.nodes:
            for name in n.get_names():
                producers[name] = n

        def reaches(src, dst) -> bool:
            stack, seen = [dst], set()
            while stack:  # walk backwards from dst through producers
                cur = stack.pop()
                for r in cur.read_names:
                    p = producers.get(r)
                    if p is None or id(p) in seen or p is cur:
                        continue
                    if p is src:
                        if cur is not dst:
                            return True
                        continue
                    seen.add(id(p))
                    stack.append(p)
            return False
        return reaches(a, b) or reaches(b, a)

    def _topological_sort(self, nodes):
        producers = {name: n for n in nodes for name in n.get_names()}
        deps = {id(n): {id(producers[r]) for r in n.read_names if r in producers and producers[r] is not n}
                for n in nodes}
        ordered, done = [], set()
        pending = sorted(nodes, key=lambda n: n.order)
        while pending:
            for n in pending:
                if deps[id(n)] <= done:
                    ordered.append(n)
                    done.add(id(n))
                    pending.remove(n)
                    break
            else:
                raise AssertionError("cycle in the scheduled graph")
        return ordered

    def to_dot(self):
        """The fused kernels as a graphviz picture: one box per kernel listing its buffers, an edge per buffer
        read across kernels. ``graphviz`` is imported here, so the package works without it."""
        import graphviz
        dot = graphviz.Digraph("fusion", node_attr={"shape": "box", "fontname": "monospace"})
        producers = {}
        for k, n in enumerate(self.nodes):
            if isinstance(n, FusedSchedulerNode):
                label = f"kernel {k} {n.group()}\\n" + "\\n".join(
                    f"{s.name}: {'reduction' if s.is_reduction() else 'pointwise'}" for s in n.snodes)
            else:
                label = f"{type(n.node).__name__} {n.name}"
            dot.node(str(k), label)
            for name in n.get_names():
                producers[name] = k
        for k, n in enumerate(self.nodes):
            for name in sorted(n.read_names):
                if name in producers:
                    dot.edge(str(producers[name]), str(k), label=name)
        return dot

    def _repr_svg_(self) -> str:
        return self.to_dot().pipe(format="svg").decode()

    def __str__(self) -> str:
        lines = [str(n) if isinstance(n, FusedSchedulerNode) else f"Extern({n.name}: {n.node})" for n in self.nodes]
        lines += ["", "Not fused:"] + [f"  {a} + {b}: {why}" for a, b, why in self.rejections]
        return "\n".join(lines)
