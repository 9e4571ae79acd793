"""The shape of a kernel: pointwise, tiled, persistent or looped reduction -- decided before any code is emitted.

In:  a fused scheduler node and its iteration group ``(numel, rnumel)``.  Out: the kernel's ``kind`` and, for a
pointwise kernel that reads or writes some operand transposed, the 2-D tiling that ``TritonKernel``
(``triton.py``) then emits.

    group (1024, 1)      x.sin() + 1                -> "poi"   one XBLOCK of elements per program
    group (60000, 1)     x.t() + y, x of (200, 300)  -> "tile"  (300, 200): an XBLOCK x RBLOCK tile per program
    group (64, 130)      softmax over rows of 130    -> "per"   XBLOCK rows, each whole row in registers
    group (64, 30000)    softmax over rows of 30000  -> "red"   on the GPU (rows over 16384): RBLOCK chunks
    group (30000, 64)    x.sum(0), x of (64, 30000)  -> "red"   on the GPU: hint "outer", the rows run down columns

The reduction *hint* (``inner``: some input is contiguous along the reduced dim; ``outer``: the reduction runs
down columns) also picks the launch configurations (``runtime.candidate_configs``).

Mirrors ``select_tiling`` in ``torch/_inductor/codegen/simd.py`` and the persistent-reduction choice of
``torch/_inductor/codegen/triton.py`` (``should_use_persistent_reduction``), with fewer cases.
"""
from __future__ import annotations

from .. import config
from ..dependencies import RecordLoadsHandler
from ..indexing import is_symbolic, linear_stride, next_power_of_2, simplify_index, sym
from ..scheduler import RINDEX, XINDEX, FusedSchedulerNode
from ..virtualized import V

GRID_Y_LIMIT = 65535 * 32  # grid axis 1 holds at most 65535 blocks (of up to 32 rows or columns)


def reduction_hint(fused: FusedSchedulerNode, numel, rnumel) -> str:
    """``inner`` when some input is contiguous along the reduced dim (rows), else ``outer`` (columns); a matmul
    lowered as a reduction is ``skinny_mm`` (inner) or ``outer_mm``: the same block sizes, whose config is not
    timed ([Note: a skinny mm as a reduction] in extern_lowering.py)."""
    if rnumel == 1:
        return "inner"
    matmul = any(getattr(sn.node.data, "skinny_mm", False) for sn in fused.snodes)
    for snode in fused.snodes:
        reads, _ = snode.canonical_deps((numel, rnumel))
        for idxs in reads.values():
            if any(linear_stride(i, RINDEX) == 1 for i in idxs):
                return "skinny_mm" if matmul else "inner"
    return "outer_mm" if matmul else "outer"


def choose_kind(numel, rnumel, hint: str, interpret: bool) -> str:
    """``poi``, ``per`` or ``red`` (a tile is chosen afterwards, for ``poi`` only: ``choose_tiling``)."""
    if rnumel == 1:
        return "poi"
    if is_symbolic(rnumel):  # a persistent kernel needs RBLOCK >= rnumel: true for the hint, not every size
        return "red"  # (a scan too: the looped one carries its running value from chunk to chunk)
    if config.looped_reduction_rblock:
        return "red"
    if hint in ("outer", "outer_mm") and not interpret:
        return "red"
    limit = config.interpret_block_max if interpret else config.persistent_reduction_max
    return "per" if next_power_of_2(rnumel) <= limit else "red"


def choose_tiling(fused: FusedSchedulerNode, numel) -> tuple[int, int] | None:
    """A 2-D tile for a pointwise kernel that reads (or writes) some dim other than the last contiguously -- a
    transpose: split the loop after that dim, so both the transposed and the straight accesses walk memory
    contiguously along one axis of the tile (Inductor's ``select_tiling``). Not for symbolic sizes: whether a
    tile pays off (and fits the grid) depends on the size. Not for no elements either: ``(0, s1, 18)`` has a
    ``numel`` of 0 but a symbolic row count, and a static ``(0, 20, 18)`` an ``outer`` of 0 to divide by (GPU
    lowering fuzz --grad --zero: the graph ran eagerly)."""
    if is_symbolic(numel) or numel == 0:
        return None
    first = fused.snodes[0]
    # a small broadcast operand (a bias, a per-channel scale) stays in cache whatever the order: only accesses to
    # buffers of at least 1/16 of the kernel's elements decide (Inductor weighs them by size too)
    big = lambda name: is_symbolic(n := V.graph.get_buffer(name).get_numel()) or n * 16 >= numel
    if not _transposed_in_loop_order(first, big):
        return None
    sizes = list(first.node.get_size())
    handler = first._record(first.own_group())
    exprs = [e for n, e in handler.loads + handler.stores if big(n)]
    dims = [k for k, s in enumerate(sizes) if s != 1]
    for k in dims[:-1]:
        var = sym(f"i{k}")
        if any(linear_stride(simplify_index(e), var) == 1 for e in exprs):
            outer = 1
            for s in sizes[:k + 1]:
                outer *= s
            inner = numel // outer
            if outer < 16 or inner < 16 or outer > GRID_Y_LIMIT:  # rows go on grid axis 1
                return None
            if all(n.plan((outer, inner)) is not None for n in fused.snodes):
                return outer, inner
            return None
    return None


def stores_run_along_x(fused: FusedSchedulerNode, numel, rnumel) -> bool:
    """Whether a tile kernel's stores are contiguous along its rows axis (``xindex``) rather than its columns: an
    output with eager's column-major strides (``x.t() + y``). Its programs then walk blocks of rows first, so
    programs launched together write neighbouring memory (grid axis 1 then holds the column blocks)."""
    if rnumel > GRID_Y_LIMIT:
        return False
    for snode in fused.snodes:
        _, writes = snode.canonical_deps((numel, rnumel))
        if any(linear_stride(i, XINDEX) == 1 for idxs in writes.values() for i in idxs):
            return True
    return False


def _transposed_in_loop_order(snode, big) -> bool:
    """Whether some large access runs contiguously along a dim other than the last of the node's own loop (its
    plan: merged dims, and memory order for an output with eager's permuted strides). If none does, a flat loop
    already reads and writes memory in order and a tile would only cost index math."""
    plan = snode.plan(snode.own_group())
    if len(plan.x_sizes) <= 1:
        return False
    loop_vars = [sym(f"t{k}") for k in range(len(plan.x_sizes))]
    handler = RecordLoadsHandler()
    with V.set_ops_handler(handler):
        plan.body(loop_vars, [])
    exprs = [simplify_index(e) for n, e in handler.loads + handler.stores if big(n)]
    return any(linear_stride(e, v) == 1 for e in exprs
               for v, size in zip(loop_vars[:-1], plan.x_sizes[:-1]) if size != 1)
