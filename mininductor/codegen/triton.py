"""``TritonKernel``: one fused scheduler node -> the source of one ``@triton.jit`` kernel (mirrors
``torch/_inductor/codegen/triton.py``).

Three shapes of kernel, named like Inductor's:

* ``triton_poi_*`` pointwise: a 1-D block of ``XBLOCK`` elements per program -- or, on the GPU, a 2-D
  ``XBLOCK x RBLOCK`` tile when some operand is read transposed (``_choose_tiling``).
* ``triton_per_*`` persistent reduction: ``XBLOCK`` rows x the whole row (``RBLOCK >= rnumel``) in registers;
  every node of the kernel runs once, and a node that reads a reduction's result gets the register value.
* ``triton_red_*`` looped reduction: rows too long for registers are walked in ``RBLOCK`` chunks; each node that
  needs the row gets a loop (nodes that do not depend on each other's results share one).

Each node's body runs with this kernel installed as the ``ops`` handler: every op appends a line and returns a
CSE'd variable name; ``load`` of a buffer that an earlier node of the kernel stored at the same index returns the
stored variable (no memory round trip), and a store whose buffer no one outside the kernel reads is dropped.
Reductions and scans are in ``triton_reduction.py``, the text of each op in ``triton_ops.py``.

A softmax over rows of 130 (persistent; abridged)::

    tmp0 = tl.load(in_ptr0 + (rindex + 130*xindex), xmask & rmask, other=0)
    tmp3 = tl.max(tl.where(xmask & rmask, tmp0, float('-inf')), 1)[:, None]
    tmp6 = tl.exp(tmp0 - tmp3)
    tmp9 = tl.sum(tl.where(xmask & rmask, tmp6, 0), 1)[:, None]
    tl.store(out_ptr2 + (rindex + 130*xindex), tmp6 / tmp9, xmask & rmask)
"""
from __future__ import annotations

import itertools
import math
import re
from typing import Any

import sympy
import torch

from .. import config, ir
from ..dependencies import RecordLoadsHandler
from ..indexing import (
    FloorDiv,
    ModularIndexing,
    is_symbolic,
    linear_stride,
    next_power_of_2,
    simplify_index,
    sym,
    texpr,
)
from ..runtime import candidate_configs
from ..scheduler import RINDEX, XINDEX, FusedSchedulerNode
from ..virtualized import V
from .triton_ops import BINARY, INTERPRETED_UNARY, TL_DTYPE, UNARY, compute_dtype, constant_repr
from .triton_reduction import ReductionCodegenMixin


class _Scope:
    """CSE and store caches; a loop's scope sees the enclosing (per-program) scope's values."""

    def __init__(self, parent: _Scope | None) -> None:
        self.parent, self.cse, self.stores = parent, {}, {}

    def lookup(self, table: str, key):
        scope = self
        while scope is not None:
            value = getattr(scope, table).get(key)
            if value is not None:
                return value
            scope = scope.parent
        return None


class _Section:
    """A run of code: ``plain`` (once per program) or ``loop`` (once per RBLOCK chunk of the row)."""

    def __init__(self, kind: str, scope: _Scope) -> None:
        self.kind, self.scope = kind, scope
        self.lines: list = []
        self.pre: list = []
        self.post: list = []
        self.finalized: set[str] = set()
        self.barrier = False


class _Store:
    def __init__(self, name: str, text: str) -> None:
        self.name, self.text = name, text


_TMP = re.compile(r"\btmp\d+\b")


class TritonKernel(ReductionCodegenMixin):
    def __init__(self, fused: FusedSchedulerNode, internal: set[str], device: torch.device, index: int,
                 kind: str | None = None) -> None:
        self.fused, self.internal, self.device = fused, internal, device
        self.numel, self.rnumel = fused.group()
        self.size_vars: set[sympy.Symbol] = set()  # size symbols the index math uses: int arguments (``s77``)
        self.interpret = device.type != "cuda"
        self.hint = self._reduction_hint()
        self.kind = kind or self._choose_kind()  # kind: the looped twin of a persistent kernel (wrapper.py)
        if self.kind == "poi" and (not self.interpret or config.tile_in_interpreter):
            tiling = self._choose_tiling()
            if tiling is not None:
                self.kind, (self.numel, self.rnumel) = "tile", tiling
        self.x_first = self.kind == "tile" and self._stores_run_along_x()
        self.ndim = 1 if self.kind == "poi" else 2
        self.args: dict[str, str] = {}
        self.dtypes: dict[str, torch.dtype] = {}
        self.index_vars: dict[Any, str] = {}
        self.top = _Scope(None)
        self.sections: list[_Section] = [_Section("plain", self.top)]
        self._tmp = itertools.count()
        self._acc = itertools.count()
        self.loaded_from_memory: set[str] = set()
        self.mask_stack: list[str] = []
        self.loop_loads: dict[str, set[int]] = {}  # buffer -> sections that load it (-1: a persistent kernel)
        self._hints: dict[str, str] = {}  # load placeholders -> L2 hints, filled when the kernel is rendered
        self.r_node = False
        # a value rounded to fp16/bf16 and back: the kernel must compile without FP contraction (see to_dtype)
        self.rounds_low_precision = False
        self._rounded: dict[str, torch.dtype] = {}  # tmp -> the fp16/bf16 its value was rounded to (kept in fp32)
        self._in_post = False  # True while emitting a looped reduction's final reduce (after its loop)
        self.name = self._kernel_name(index)
        self.bytes_accessed = 0

    # ------------------------------------------------------------------------------------------- naming
    def _reduction_hint(self) -> str:
        """``inner`` when some input is contiguous along the reduced dim (rows), else ``outer`` (columns)."""
        if self.rnumel == 1:
            return "inner"
        for snode in self.fused.snodes:
            reads, _ = snode.canonical_deps((self.numel, self.rnumel))
            for idxs in reads.values():
                if any(linear_stride(i, RINDEX) == 1 for i in idxs):
                    return "inner"
        return "outer"

    def _choose_tiling(self) -> tuple[int, int] | None:
        """A 2-D tile for a pointwise kernel that reads (or writes) some dim other than the last contiguously --
        a transpose: split the loop after that dim, so both the transposed and the straight accesses walk
        memory contiguously along one axis of the tile (Inductor's ``select_tiling``). Not for symbolic sizes:
        whether a tile pays off (and fits the grid) depends on the size."""
        if is_symbolic(self.numel):
            return None
        first = self.fused.snodes[0]
        # a small broadcast operand (a bias, a per-channel scale) stays in cache whatever the order: only
        # accesses to buffers of at least 1/16 of the kernel's elements decide (Inductor weighs them by size too)
        big = lambda name: is_symbolic(n := V.graph.get_buffer(name).get_numel()) or n * 16 >= self.numel
        if not self._transposed_in_loop_order(first, big):
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
                inner = self.numel // outer
                if outer < 16 or inner < 16 or outer > 65535 * 32:  # grid axis 1 (rows) holds at most 65535
                    return None
                if all(n.plan((outer, inner)) is not None for n in self.fused.snodes):
                    return outer, inner
                return None
        return None

    def _stores_run_along_x(self) -> bool:
        """Whether a tile kernel's stores are contiguous along its rows axis (``xindex``) rather than its columns:
        an output with eager's column-major strides (``x.t() + y``). Its programs then walk blocks of rows first,
        so programs launched together write neighbouring memory (grid axis 1 holds at most 65535 column blocks)."""
        if self.rnumel > 65535 * 32:
            return False
        for snode in self.fused.snodes:
            _, writes = snode.canonical_deps((self.numel, self.rnumel))
            if any(linear_stride(i, XINDEX) == 1 for idxs in writes.values() for i in idxs):
                return True
        return False

    @staticmethod
    def _transposed_in_loop_order(snode, big) -> bool:
        """Whether some large access runs contiguously along a dim other than the last of the node's own loop
        (its plan: merged dims, and memory order for an output with eager's permuted strides). If none does,
        a flat loop already reads and writes memory in order and a tile would only cost index math."""
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

    def _choose_kind(self) -> str:
        if self.rnumel == 1:
            return "poi"
        if is_symbolic(self.rnumel):  # a persistent kernel needs RBLOCK >= rnumel: true for the hint, not every size
            if any(isinstance(n.node.data, ir.Scan) for n in self.fused.snodes):
                raise NotImplementedError("symbolic compile: a scan over a symbolic dim")
            return "red"
        if config.looped_reduction_rblock:
            return "red"
        if self.hint == "outer" and not self.interpret:
            return "red"
        limit = config.interpret_block_max if self.interpret else config.persistent_reduction_max
        return "per" if next_power_of_2(self.rnumel) <= limit else "red"

    def _kernel_name(self, index: int) -> str:
        names = []
        for node in sorted({o for n in self.fused.snodes for o in n.node.origins if o is not None},
                           key=lambda o: _node_position(o)):
            target = node.meta.get("original_aten") or node.target
            name = getattr(target, "_opname", None) or getattr(target, "__name__", str(target))
            if name not in names:
                names.append(name)
        # sorted like Inductor's names, capped so a long fusion still gives a readable name
        kind = "poi" if self.kind == "tile" else self.kind
        return f"triton_{kind}_fused_{'_'.join(sorted(names)[:6]) or 'kernel'}_{index}"

    # ------------------------------------------------------------------------------------------- scopes
    @property
    def section(self) -> _Section:
        return self.sections[-1]

    @property
    def scope(self) -> _Scope:
        return self.top if self._in_post else self.section.scope

    @property
    def lines(self) -> list:
        return self.section.post if self._in_post else self.section.lines

    def _emit(self, text: str, dtype: torch.dtype, cse: bool = True) -> str:
        if self._rounded and any(name in self._rounded for name in _TMP.findall(text)):
            self.rounds_low_precision = True  # a rounded value computed with: see to_dtype
        if cse:
            hit = self.scope.lookup("cse", text)
            if hit is not None:
                return hit
        var = f"tmp{next(self._tmp)}"
        self.lines.append(f"{var} = {text}")
        if cse:
            self.scope.cse[text] = var
        self.dtypes[var] = dtype
        return var

    def _dtype(self, value) -> torch.dtype:
        return self.dtypes.get(value, torch.float32) if isinstance(value, str) else torch.float32

    # ------------------------------------------------------------------------------------------- indexing
    def _size_text(self, expr) -> str:
        """A size in kernel source: its symbols become int arguments of the kernel."""
        expr = sympy.sympify(expr)
        self.size_vars |= {s for s in expr.free_symbols if s.is_positive}
        return texpr(expr, kernel=True)

    def _index(self, expr) -> str:
        expr = simplify_index(sympy.sympify(expr))
        self.size_vars |= {s for s in expr.free_symbols if s.is_positive}  # size symbols (loop vars: nonnegative)
        replacements = {}
        for atom in expr.atoms(FloorDiv, ModularIndexing):
            if atom.args[0] in (XINDEX, RINDEX):
                replacements[atom] = sym(self._index_var(atom))
        return texpr(expr.xreplace(replacements), kernel=True)

    def _index_var(self, atom) -> str:
        if atom not in self.index_vars:
            prefix = "x" if atom.args[0] == XINDEX else "r"
            self.index_vars[atom] = f"{prefix}{sum(1 for v in self.index_vars.values() if v[0] == prefix)}"
        return self.index_vars[atom]

    def _index_var_lines(self, prefix: str) -> list[str]:
        return [f"{name} = {texpr(atom, kernel=True)}" for atom, name in self.index_vars.items() if name[0] == prefix]

    def _mask(self, index_str: str, r_node: bool) -> str | None:
        masks = ["xmask"]
        if self.kind != "poi" and (r_node or self.kind == "tile" or "r" in _free_names(index_str)):
            masks.append("rmask")
        masks += self.mask_stack
        return " & ".join(masks)

    def _arg(self, name: str, prefix: str) -> str:
        if name not in self.args:
            count = sum(1 for a in self.args.values() if a.startswith(prefix))
            self.args[name] = f"{prefix}{count}"
        return self.args[name]

    # ------------------------------------------------------------------------------------------- ops
    def load(self, name: str, index) -> str:
        idx = self._index(index)
        stored = self.scope.lookup("stores", (name, idx))
        if stored is not None:
            return stored
        if name in self.internal:
            self.loaded_from_memory.add(name)
            if self.section.kind == "loop" and self.kind == "red":
                self.section.barrier = True
        dtype = V.graph.get_dtype(name)
        ptr = self._arg(name, "in_ptr")
        if not sympy.sympify(index).free_symbols:  # one element: a [1] block, like our constants
            text = f"tl.broadcast_to(tl.load({ptr} + ({idx})), {'[1]' if self.ndim == 1 else '[1, 1]'})"
        else:
            text = f"tl.load({ptr} + ({idx}), {self._mask(idx, self.r_node)}, other=0{self._eviction(name, idx)})"
        if compute_dtype(dtype) != dtype:
            text += ".to(tl.float32)"
        return self._emit(text, compute_dtype(dtype))

    def _eviction(self, name: str, idx: str) -> str:
        """An L2 hint for a reduction's row load, decided when the kernel is rendered (``_render``).

        A looped kernel (Inductor's rule) keeps a row it reads again in a later loop ('evict_last') and streams
        the last read ('evict_first'); blocks every row reads (a norm's weight) need no hint.  A persistent
        kernel reads each row once: we stream it only when the kernel writes nothing row-sized (a plain row
        sum), measured on an H200 (bench/kernel_configs.py): the hint made x.sum(-1) 5% faster but norms and
        softmax, whose outputs are rows too, 2-4% slower."""
        if self.kind not in ("per", "red") or not config.eviction_policies or self.hint != "inner" or \
                not any(v[0] == "x" for v in _free_names(idx)):
            return ""  # column sums ("outer") measured 5% slower with 'evict_first': no hint
        section = len(self.sections) - 1 if self.kind == "red" else -1
        self.loop_loads.setdefault(name, set()).add(section)
        return f"<evict {name}@{section}>"

    def _eviction_hints(self) -> dict[str, str]:
        """Each load's placeholder -> its hint, now that every load and store is known."""
        writes_rows = any(isinstance(line, _Store) and any(v[0] == "r" for v in _free_names(line.text))
                          for s in self.sections for line in s.lines + s.post)
        hints = {}
        for name, sections in self.loop_loads.items():
            for k in sections:
                if k >= 0:  # a looped kernel: keep the row if a later loop reads it again
                    policy = "evict_last" if any(later > k for later in sections) else "evict_first"
                else:  # persistent: stream the row only when nothing row-sized is written
                    policy = None if writes_rows else "evict_first"
                hints[f"<evict {name}@{k}>"] = f", eviction_policy='{policy}'" if policy else ""
        return hints

    def _store_index(self, index) -> str:
        """A constant index (a scalar output) still needs a block of pointers to store a block."""
        if sympy.sympify(index).free_symbols:
            return self._index(index)
        shape = "[XBLOCK]" if self.ndim == 1 else "[XBLOCK, 1]"
        return f"tl.full({shape}, {int(index)}, tl.int32)"

    def store(self, name: str, index, value: str, mode: str | None = None) -> None:
        idx = self._store_index(index)
        names = {v[0] for v in _free_names(idx)}
        if self.ndim == 2 and "r" in names and "x" not in names:
            # a row-shaped store ([1, RBLOCK] pointers, e.g. x.flip(0) fused into x.sum()) under an [XBLOCK,
            # RBLOCK] mask: compiled Triton wants pointers of the mask's shape (the interpreter broadcasts)
            idx = f"tl.broadcast_to({idx}, [XBLOCK, RBLOCK])"
        dtype = V.graph.get_dtype(name)
        if dtype == torch.bfloat16 and self.interpret and self._dtype(value) != dtype:
            value = self._round_bf16(value)
        ptr = self._arg(name, "out_ptr")
        cast = f"{value}.to({TL_DTYPE[dtype]})" if self._dtype(value) != dtype else value
        mask = self._mask(idx, self.r_node)
        if mode == "atomic_add":  # several elements may land on one address: add atomically, never cache
            # The value is materialised at the pointer block's shape (adding zeros): compiled Triton broadcasts
            # by itself, but Triton 3.6's interpreter reads a broadcast (stride-0) value as if contiguous.
            ptrs = f"{ptr} + ({idx})"
            value = f"{cast} + tl.zeros(({ptrs}).shape, {TL_DTYPE[dtype]})"
            self.lines.append(f"tl.atomic_add({ptrs}, {value}, {mask})")
            return
        self.lines.append(_Store(name, f"tl.store({ptr} + ({idx}), {cast}, {mask})"))
        self.scope.stores[(name, self._index(index))] = value

    def store_reduction(self, name: str, index, value: str) -> None:
        idx = self._store_index(index)
        dtype = V.graph.get_dtype(name)
        if dtype == torch.bfloat16 and self.interpret:
            saved, self._in_post = self._in_post, self.section.kind == "loop"
            value = self._round_bf16(value)
            self._in_post = saved
        ptr = self._arg(name, "out_ptr")
        cast = f"{value}.to({TL_DTYPE[dtype]})" if self._dtype(value) != dtype else value
        target = self.section.post if self.section.kind == "loop" else self.lines
        target.append(_Store(name, f"tl.store({ptr} + ({idx}), {cast}, xmask)"))
        self.top.stores[(name, self._index(index))] = value
        self.section.finalized.add(name)

    def constant(self, value, dtype: torch.dtype) -> str:
        shape = "[1]" if self.ndim == 1 else "[1, 1]"
        cd = compute_dtype(dtype)
        return self._emit(f"tl.full({shape}, {constant_repr(value, dtype)}, {TL_DTYPE[cd]})", cd)

    def index_expr(self, expr, dtype: torch.dtype) -> str:
        idx = self._index(expr)
        if not sympy.sympify(expr).free_symbols:
            return self.constant(int(expr), dtype)
        return self._emit(f"({idx}).to({TL_DTYPE[compute_dtype(dtype)]})", compute_dtype(dtype))

    def to_dtype(self, value: str, dtype: torch.dtype, src_dtype=None) -> str:
        src = self._dtype(value)
        if dtype == src:
            return value
        if dtype in (torch.float16, torch.bfloat16):
            # [Note: rounding survives only without FP contraction]  LLVM may narrow ``fp32 op`` between two
            # round trips to an fp16 op, then fuse ``x * 3 - 1`` into one fp16 FMA: one rounding where eager
            # rounds twice (H200: 10 of 91 elements 1 ulp off).  So a kernel that computes with a rounded value
            # compiles with ``enable_fp_fusion=False``, as Inductor's do under ``emulate_precision_casts``
            # (``_emit`` sets ``rounds_low_precision`` when a rounded tmp is an operand).  A rounding that only
            # reaches a store (the last cast of a bf16 GELU) leaves nothing to narrow: contraction stays on.
            if self._rounded.get(value) == dtype:
                return value  # rounded already: rounding again changes nothing
            rounded = self._round_bf16(value) if dtype == torch.bfloat16 and self.interpret else \
                self._emit(f"{value}.to({TL_DTYPE[dtype]}).to(tl.float32)", torch.float32)
            self._rounded[rounded] = dtype
            return rounded
        if dtype == torch.bool:
            return self._emit(f"{value} != 0", torch.bool)
        return self._emit(f"{value}.to({TL_DTYPE[dtype]})", dtype)

    def _round_bf16(self, value: str) -> str:
        """fp32 -> nearest-even bf16 (kept in fp32) with integer ops: the interpreter's own cast truncates."""
        if self._rounded.get(value) == torch.bfloat16:
            return value
        rounded, self._rounded = self._rounded, {}  # its own lines read ``value``: not a computation with it
        try:
            return self._round_bf16_bits(value)
        finally:
            self._rounded = rounded

    def _round_bf16_bits(self, value: str) -> str:
        value = self._emit(f"{value}.to(tl.float32)", torch.float32) if self._dtype(value) != torch.float32 \
            else value
        bits = self._emit(f"{value}.to(tl.int32, bitcast=True)", torch.int32)
        rounded = self._emit(f"(({bits} + 0x7FFF + (({bits} >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)",
                             torch.float32)
        return self._emit(f"tl.where({value} != {value}, {value}, {rounded})", torch.float32)

    def indirect_indexing(self, value: str, size: int, check: bool = True):
        var = self._emit(f"tl.where({value} < 0, {value} + {self._size_text(size)}, {value})", self._dtype(value))
        return sym(var)

    def masked(self, mask: str, body, other) -> str:
        self.mask_stack.append(mask)
        try:
            value = body()
        finally:
            self.mask_stack.pop()
        dtype = self._dtype(value)
        other_var = self.constant(other, dtype)
        return self._emit(f"tl.where({mask}, {value}, {other_var})", dtype)

    def where(self, cond: str, a: str, b: str) -> str:
        return self._emit(f"tl.where({cond}, {a}, {b})", _promote(self._dtype(a), self._dtype(b)))

    def floordiv(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))  # integers: floats are lowered step by step
        assert not dtype.is_floating_point, "float floor division is lowering._float_floor_divide's"
        q = self._emit(f"{a} // {b}", dtype)  # C truncation on GPU, floor in the interpreter: fix both up
        return self._emit(f"tl.where((({b} > 0) & ({q} * {b} > {a})) | (({b} < 0) & ({q} * {b} < {a})), "
                          f"{q} - 1, {q})", dtype)

    def div_rn(self, a: str, b: str) -> str:
        """IEEE division, rounded to nearest, as eager's ``/``: Triton's fp32 ``/`` on the GPU is an approximate
        division (within 2 ulp), which is enough for a softmax but not where the quotient is floored.  Its fp64
        ``/``, and every ``/`` under the interpreter (NumPy's), is already exact."""
        dtype = _promote(self._dtype(a), self._dtype(b))
        return self._emit(f"tl.div_rn({a}, {b})" if dtype == torch.float32 and not self.interpret else f"{a} / {b}",
                          dtype)

    def truncdiv(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))
        if dtype.is_floating_point:
            return self.trunc(self._emit(f"{a} / {b}", dtype))
        q = self.floordiv(a, b)
        return self._emit(f"tl.where(({q} * {b} != {a}) & (({a} < 0) != ({b} < 0)), {q} + 1, {q})", dtype)

    def remainder(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))
        if dtype.is_floating_point:  # ATen's: fmod, moved to the sign of b (exact; a - floor(a/b)*b is not)
            mod = self.fmod(a, b)
            return self._emit(f"tl.where(({mod} != 0) & (({mod} < 0) != ({b} < 0)), {mod} + {b}, {mod})", dtype)
        return self._emit(f"{a} - {self.floordiv(a, b)} * {b}", dtype)

    def fmod(self, a: str, b: str) -> str:
        dtype = _promote(self._dtype(a), self._dtype(b))
        if dtype.is_floating_point:
            # Eager's std::fmod is exact. Interpreted, ``%`` is np.fmod (exact). Compiled for an NVIDIA GPU,
            # Triton's ``%`` on floats computes ``a - trunc(a / b) * b`` (``fmod(-21.0, 0.6)`` gave 0.6, not ~0),
            # so there we call CUDA's own fmod through libdevice -- the one libdevice call we make, never
            # interpreted (the interpreter has no libdevice; PITFALLS.md).
            if self.interpret:
                return self._emit(f"{a} % {b}", dtype)
            return self._emit(f"libdevice.fmod({a}, {b})", dtype)
        return self._emit(f"{a} - {self.truncdiv(a, b)} * {b}", dtype)

    def pow(self, a: str, b: str) -> str:
        """``exp(b * log|a|)`` with C's answers where that formula has none.

        The formula amplifies log's rounding by |b log a| (71 ulp at 1.4e7 ** 5), so fp32 (and fp16/bf16, in fp32
        registers) computes it in fp64 and rounds once.  Then: a negative base (or -0.0) takes the sign of an odd
        integer b (pow(-0.0, -1) is -inf) and is NaN for a fractional one, except -inf (pow(-inf, 0.5) is inf);
        1 for b == 0, for a == 1 (even when b is NaN) and for a == -1 with b = +-inf."""
        dtype = self._result("float", a, b)
        wide = lambda v: f"{v}.to(tl.float64)" if dtype != torch.float64 else v
        e = lambda text: self._emit(text, torch.float64)
        x, y = e(wide(a)), e(wide(b))
        is_int = self._emit(f"tl.floor({y}) == {y}", torch.bool)
        odd = self._emit(f"{is_int} & (tl.floor({y} * 0.5) * 2.0 != {y})", torch.bool)
        negative = self._emit(f"({x} < 0) | (1.0 / {x} < 0)", torch.bool)  # -0.0 too
        magnitude = e(f"tl.exp({y} * tl.log(tl.abs({x})))")
        signed = e(f"tl.where({negative} & {odd}, -{magnitude}, {magnitude})")
        fractional = e(f"tl.where(({x} < 0) & ({x} != float('-inf')) & ~{is_int}, float('nan'), {signed})")
        one = self._emit(f"({y} == 0) | ({x} == 1) | (({x} == -1) & (tl.abs({y}) == float('inf')))", torch.bool)
        result = e(f"tl.where({one}, 1.0, {fractional})")
        return result if dtype == torch.float64 else self._emit(f"{result}.to({TL_DTYPE[dtype]})", dtype)

    def hypot(self, a: str, b: str) -> str:
        """``big * sqrt(1 + (small / big)^2)``: ``sqrt(a*a + b*b)`` overflowed past 1.8e19 (fp32); an infinite
        side wins over a NaN one, as C's."""
        dtype = self._result("float", a, b)
        e = lambda text: self._emit(text, dtype)
        x, y = e(f"tl.abs({a})"), e(f"tl.abs({b})")
        big, small = e(f"tl.where({x} >= {y}, {x}, {y})"), e(f"tl.where({x} >= {y}, {y}, {x})")  # NaN: in r
        r = e(f"{small} / {big}")
        scaled = e(f"tl.where({big} == 0, {small}, {big} * tl.sqrt(1.0 + {r} * {r}))")  # 0, or NaN
        return e(f"tl.where(({x} == float('inf')) | ({y} == float('inf')), float('inf'), {scaled})")

    def round(self, x: str) -> str:
        """Half to even, as eager's (rint).  ``floor(x + 0.5)`` is wrong where ``x + 0.5`` rounds: 0.49999997 gave
        1, the odd 8388609 gave 8388610 (past 2^23 every float is whole and ``x + 0.5`` a tie).  Here the
        fraction ``x - floor(x)`` is exact; a zero result keeps x's sign (round(-0.4) is -0.0)."""
        dtype = self._dtype(x)
        e = lambda text: self._emit(text, dtype)
        whole = e(f"tl.floor({x})")
        fraction = e(f"{x} - {whole}")  # NaN for +-inf: then ``whole`` (inf) is kept below
        even = self._emit(f"tl.floor({whole} * 0.5) * 2.0 == {whole}", torch.bool)
        up = self._emit(f"({fraction} > 0.5) | (({fraction} == 0.5) & ~{even})", torch.bool)
        rounded = e(f"tl.where({up}, {whole} + 1.0, {whole})")
        return e(f"tl.where({rounded} == 0, {x} * 0.0, {rounded})")

    def signbit(self, x: str) -> str:
        """The sign bit, as eager's: set for -0.0 and a negative NaN, which ``x < 0`` misses. fp16/bf16 values
        live in fp32 registers, whose sign bit is theirs."""
        dtype = self._dtype(x)
        if not dtype.is_floating_point:
            return self._emit(f"{x} < 0", torch.bool)
        bits = "tl.int64" if dtype == torch.float64 else "tl.int32"
        return self._emit(f"{x}.to({bits}, bitcast=True) < 0", torch.bool)

    # [Note: small-argument math without libdevice]  ``exp(x) - 1`` is 0 for |x| < 6e-8 where eager's expm1 is
    # x, and ``log(1 + x)``, ``2 / (1 + exp(-2x)) - 1`` (tanh), ``exp(x) - exp(-x)`` and their inverses lose
    # every digit the same way; ``exp(x)`` overflows in ``0.5 * exp(89)`` where cosh(89) does not.  Libdevice
    # (Inductor's choice) is not available interpreted, so these use a short Taylor series below 0.25, where
    # cancellation would cost more than 2 bits, and the plain formula above it -- polynomials and tl.exp/tl.log
    # only, the same on the GPU and under the interpreter.  fp64 takes more terms.
    def _float(self, x: str) -> torch.dtype:
        return self._result("float", x)

    def _poly(self, x: str, coefficients, dtype) -> str:
        """``c0 + c1*x + c2*x^2 + ...`` by Horner's rule."""
        text = repr(float(coefficients[-1]))
        for c in reversed(coefficients[:-1]):
            text = f"{float(c)!r} + {x} * ({text})"
        return self._emit(text, dtype)

    def _terms(self, dtype, fp32: int, fp64: int) -> int:
        return fp64 if dtype == torch.float64 else fp32

    def _odd(self, x: str, magnitude: str, dtype) -> str:
        """``magnitude`` (a function of |x|) given x's sign; +-0 and NaN are x itself (tanh(-0.0) is -0.0)."""
        return self._emit(f"tl.where({x} < 0, -{magnitude}, tl.where({x} > 0, {magnitude}, {x}))", dtype)

    def expm1(self, x: str) -> str:
        dtype = self._float(x)
        n = self._terms(dtype, 8, 14)  # x^n/n! below eps at |x| = 0.25
        series = self._emit(f"{x} * {self._poly(x, [1 / math.factorial(k + 1) for k in range(n)], dtype)}", dtype)
        return self._emit(f"tl.where(tl.abs({x}) < 0.25, {series}, tl.exp({x}) - 1.0)", dtype)

    def log1p(self, x: str) -> str:
        """``2 * atanh(s)``, ``s = x / (2 + x)``: an odd series in |s| < 0.15 for |x| < 0.25."""
        dtype = self._float(x)
        s = self._emit(f"{x} / (2.0 + {x})", dtype)
        s2 = self._emit(f"{s} * {s}", dtype)
        n = self._terms(dtype, 6, 11)
        series = self._emit(f"2.0 * {s} * {self._poly(s2, [1 / (2 * k + 1) for k in range(n)], dtype)}", dtype)
        return self._emit(f"tl.where(tl.abs({x}) < 0.25, {series}, tl.log(1.0 + {x}))", dtype)

    def tanh(self, x: str) -> str:
        """``-t / (t + 2)`` with ``t = expm1(-2|x|)`` in [-1, 0]: no cancellation, no overflow."""
        dtype = self._float(x)
        t = self.expm1(self._emit(f"-2.0 * tl.abs({x})", dtype))
        return self._odd(x, self._emit(f"-{t} / ({t} + 2.0)", dtype), dtype)

    def sinh(self, x: str) -> str:
        """``(m + m / (m + 1)) / 2`` with ``m = expm1(|x|)``; past |x| = 20, ``exp(|x|/2)^2 / 2``, which does not
        overflow before sinh does."""
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        m = self.expm1(a)
        half = self._emit(f"tl.exp(0.5 * {a})", dtype)
        magnitude = self._emit(f"tl.where({a} > 20.0, (0.5 * {half}) * {half}, 0.5 * ({m} + {m} / ({m} + 1.0)))",
                               dtype)
        return self._odd(x, magnitude, dtype)

    def cosh(self, x: str) -> str:
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        half = self._emit(f"tl.exp(0.5 * {a})", dtype)
        return self._emit(f"tl.where({a} > 20.0, (0.5 * {half}) * {half}, 0.5 * (tl.exp({a}) + tl.exp(-{a})))",
                          dtype)

    def asinh(self, x: str) -> str:
        """``log1p(a + a^2 / (1 + sqrt(1 + a^2)))``; past 2^28 (a^2 would overflow or swamp the 1), log(2a)."""
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        small = self.log1p(self._emit(f"{a} + {a} * {a} / (1.0 + tl.sqrt(1.0 + {a} * {a}))", dtype))
        magnitude = self._emit(f"tl.where({a} > 268435456.0, tl.log({a}) + {math.log(2)!r}, {small})", dtype)
        return self._odd(x, magnitude, dtype)

    def acosh(self, x: str) -> str:
        """``log1p(t + sqrt(2t + t^2))``, ``t = x - 1`` (exact near 1); past 2^28, log(2x)."""
        dtype = self._float(x)
        t = self._emit(f"{x} - 1.0", dtype)
        small = self.log1p(self._emit(f"{t} + tl.sqrt(2.0 * {t} + {t} * {t})", dtype))
        # x < 1 is NaN (2t + t^2 would overflow to +inf for a huge negative x)
        return self._emit(f"tl.where({x} > 268435456.0, tl.log({x}) + {math.log(2)!r}, "
                          f"tl.where({x} < 1.0, float('nan'), {small}))", dtype)

    def atanh(self, x: str) -> str:
        dtype = self._float(x)
        a = self._emit(f"tl.abs({x})", dtype)
        magnitude = self._emit(f"0.5 * {self.log1p(self._emit(f'2.0 * {a} / (1.0 - {a})', dtype))}", dtype)
        return self._odd(x, magnitude, dtype)

    def atan(self, x: str) -> str:
        """No libdevice: reduce |x| <= 1 (via 1/x), halve the angle twice, then a short odd series (|v| <= 0.2:
        six terms for fp32, twelve for fp64)."""
        dtype = self._float(x)
        e = lambda text: self._emit(text, dtype)
        y = e(f"tl.where(tl.abs({x}) > 1.0, 1.0 / {x}, {x})")
        u = e(f"{y} / (1.0 + tl.sqrt(1.0 + {y} * {y}))")
        v = e(f"{u} / (1.0 + tl.sqrt(1.0 + {u} * {u}))")
        v2 = e(f"{v} * {v}")
        n = self._terms(dtype, 6, 12)
        series = e(f"4.0 * {v} * {self._poly(v2, [(-1) ** k / (2 * k + 1) for k in range(n)], dtype)}")
        half_pi = 1.5707963267948966
        # below sqrt(3 eps) atan(x) rounds to x; the halvings would cost a denormal its low bits (1e-40: 3e-5 off)
        tiny = 2.0 ** -27 if dtype == torch.float64 else 2.0 ** -12
        return e(f"tl.where(tl.abs({x}) < {tiny}, {x}, tl.where({x} > 1.0, {half_pi} - {series}, "
                 f"tl.where({x} < -1.0, -{half_pi} - {series}, {series})))")

    def asin(self, x: str) -> str:
        """``atan(x / sqrt((1 - x)(1 + x)))``: ``1 - x * x`` would cancel near |x| = 1."""
        dtype = self._float(x)
        return self.atan(self._emit(f"{x} / tl.sqrt((1.0 - {x}) * (1.0 + {x}))", dtype))

    def acos(self, x: str) -> str:
        """``2 atan(sqrt((1 - x) / (1 + x)))``: ``pi/2 - asin(x)`` lost 5e-5 (relative) at x = 0.9999997."""
        dtype = self._float(x)
        return self._emit(f"2.0 * {self.atan(self._emit(f'tl.sqrt((1.0 - {x}) / (1.0 + {x}))', dtype))}", dtype)

    def atan2(self, y: str, x: str) -> str:
        """atan(y / x) moved to x's quadrant, with C's answers for signed zeros (atan2(-0.0, -1) is -pi,
        atan2(0.0, -0.0) is pi) and for two infinities (atan2(inf, -inf) is 3pi/4), where y / x says nothing."""
        dtype = self._result("float", y, x)
        e = lambda text: self._emit(text, dtype)
        base = self.atan(e(f"{y} / {x}"))
        # constants typed like the result: a bare Python float in tl.where(c, 3.14.., -3.14..) is fp32
        pi, half_pi, quarter_pi = (self.constant(v, dtype) for v in (math.pi, math.pi / 2, math.pi / 4))
        y_pos = self._emit(f"({y} > 0) | (({y} == 0) & (1.0 / {y} > 0))", torch.bool)  # y's sign, zeros too
        x_neg = self._emit(f"({x} < 0) | (1.0 / {x} < 0)", torch.bool)
        general = e(f"tl.where({x} > 0, {base}, tl.where({x} < 0, tl.where({y_pos}, {base} + {pi}, {base} - {pi}), "
                    f"tl.where({y} > 0, {half_pi}, tl.where({y} < 0, -{half_pi}, {x} + {y}))))")  # x NaN: NaN
        zero_y = e(f"tl.where({x_neg}, tl.where({y_pos}, {pi}, -{pi}), {y})")
        both_inf = e(f"tl.where({x} > 0, {quarter_pi}, 3.0 * {quarter_pi})")
        return e(f"tl.where(({y} == 0) & ({x} == {x}), {zero_y}, tl.where((tl.abs({x}) == float('inf')) & "
                 f"(tl.abs({y}) == float('inf')), tl.where({y_pos}, {both_inf}, -{both_inf}), {general}))")

    def __getattr__(self, name: str):
        if name in UNARY:
            fmt, kind = UNARY[name]
            if self.interpret and name in INTERPRETED_UNARY:
                fmt = INTERPRETED_UNARY[name]
            return lambda a: self._emit(fmt.format(a, t=TL_DTYPE[self._result(kind, a)]), self._result(kind, a))
        if name in BINARY:
            fmt, kind = BINARY[name]
            return lambda a, b: self._emit(fmt.format(a, b), self._result(kind, a, b))
        raise AttributeError(name)

    def _result(self, kind: str, *values) -> torch.dtype:
        if kind == "bool":
            return torch.bool
        dtype = self._dtype(values[0])
        for v in values[1:]:
            dtype = _promote(dtype, self._dtype(v))
        if kind == "float" and not dtype.is_floating_point:
            return torch.float32
        return dtype

    # ------------------------------------------------------------------------------------------- driver
    def codegen_nodes(self) -> None:
        with V.set_ops_handler(self), V.set_kernel_handler(self):
            for snode in self.fused.snodes:
                plan = snode.plan((self.numel, self.rnumel))
                self.r_node = bool(plan.r_sizes)
                if self.kind == "red":
                    self._enter_section_for(snode, self.r_node)
                xvars, rvars = plan.canonical_vars()
                plan.body(xvars, rvars)

    def _enter_section_for(self, snode, r_node: bool) -> None:
        section = self.section
        if r_node:
            if section.kind == "loop" and not (snode.read_names & section.finalized):
                return
            self.sections.append(_Section("loop", _Scope(self.top)))
        elif section.kind == "loop":
            self.sections.append(_Section("plain", self.top))

    # ------------------------------------------------------------------------------------------- render
    def removed_buffers(self) -> set[str]:
        return self.internal - self.loaded_from_memory

    def call_args(self) -> list[str]:
        """Buffers passed to the kernel, in signature order (removed ones are never touched)."""
        removed = self.removed_buffers()
        return [name for name in self.args if name not in removed]

    def size_args(self) -> list[str]:
        """Size symbols passed as ints after the buffers (the wrapper reads them from the inputs' shapes)."""
        return sorted(str(s) for s in self.size_vars)

    def codegen_kernel(self) -> str:
        removed = self.removed_buffers()
        self._hints = self._eviction_hints()
        ptrs = [self.args[name] for name in self.call_args()]
        sig = ", ".join(ptrs + self.size_args() + (["xnumel"] if self.kind == "poi" else ["xnumel", "rnumel"]))
        if self.kind == "tile":
            out = ["# a 2-D tile: rows (x) and columns (r) of the loop, each axis of the grid walks one",
                   "@triton.jit", f"def {self.name}({sig}, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):"]
            return "\n".join(out + ["    " + line for line in self._header() + self._render_section(
                self.sections[0], removed)]) + "\n"
        consts = "XBLOCK: tl.constexpr" + (", RBLOCK: tl.constexpr" if self.kind != "poi" else "")
        out = ["@triton.jit", f"def {self.name}({sig}, {consts}):"]
        body = self._header()
        for section in self.sections:
            body += self._render_section(section, removed)
        out += ["    " + line for line in body]
        return "\n".join(out) + "\n"

    def _blocks_divide(self) -> tuple[bool, bool]:
        """Whether every block size the launcher may pick divides ``numel`` (and ``rnumel``): then no program
        runs past the end on that axis, the mask is always true, and we write it as a constant that Triton folds
        away (loads and stores without predicates), as Inductor does for static sizes."""
        if is_symbolic(self.numel) or is_symbolic(self.rnumel):
            return False, False
        configs = candidate_configs(self.kind, self.numel, self.rnumel, self.hint, self.interpret)
        x_even = all(self.numel % c["XBLOCK"] == 0 for c in configs)
        r_even = self.kind != "poi" and all(self.rnumel % c["RBLOCK"] == 0 for c in configs)
        return x_even, r_even

    def _header(self) -> list[str]:
        x_even, r_even = self._blocks_divide()
        shape = "[XBLOCK]" if self.kind == "poi" else "[XBLOCK, 1]"
        # a tile kernel walks blocks of columns on grid axis 0: programs launched together then write (and read)
        # neighbouring columns of the same rows (1-2% faster than rows first on an H200: bench/kernel_configs.py);
        # blocks of rows first when its stores run down the rows (x_first: a column-major output)
        x_axis, r_axis = (1, 0) if self.kind == "tile" and not self.x_first else (0, 1)
        lines = [f"xoffset = tl.program_id({x_axis}) * XBLOCK",
                 "xindex = xoffset + tl.arange(0, XBLOCK)" + ("" if self.kind == "poi" else "[:, None]"),
                 f"xmask = tl.full({shape}, True, tl.int1)  # XBLOCK divides xnumel" if x_even
                 else "xmask = xindex < xnumel"]
        if self._needs_int64():
            lines.insert(1, "xoffset = xoffset.to(tl.int64)")
        lines += self._index_var_lines("x")
        if self.kind == "tile":
            lines += [f"roffset = tl.program_id({r_axis}) * RBLOCK", "rindex = roffset + tl.arange(0, RBLOCK)[None, :]"]
        if self.kind == "per":
            lines.append("rindex = tl.arange(0, RBLOCK)[None, :]")
        if self.kind in ("tile", "per"):
            lines += [self._rmask_line(r_even)] + self._index_var_lines("r")
        return self._static_numel_lines() + lines

    def _static_numel_lines(self) -> list[str]:
        """A static size argument is rebound to its constant, as Inductor does: a loop's trip count is then
        known to the compiler, which unrolls and pipelines it (a looped layer_norm over 8192-long fp32 rows,
        H200: 0.179 ms with ``range(0, rnumel, 4096)``, 0.131 ms with ``rnumel = 8192``). A row length stays
        static under a symbolic batch. The arguments stay in the signature: every kernel is launched the same way."""
        if not config.static_numels:
            return []
        numels = [("xnumel", self.numel)] + ([] if self.kind == "poi" else [("rnumel", self.rnumel)])
        return [f"{name} = {int(n)}" for name, n in numels if not is_symbolic(n)]

    def _rmask_line(self, r_even: bool) -> str:
        if r_even:
            return "rmask = tl.full([1, RBLOCK], True, tl.int1)  # RBLOCK divides rnumel"
        return "rmask = rindex < rnumel"

    def _needs_int64(self) -> bool:
        sizes = [self.numel, self.rnumel, *[V.graph.get_buffer(n).get_numel() for n in self.args]]
        if any(is_symbolic(s) for s in sizes):
            return True  # a symbolic size has no upper bound: 64-bit offsets are right for every size
        return max(self.numel * self.rnumel, *[V.graph.get_buffer(n).get_numel() for n in self.args]) >= 2**31

    def _render_section(self, section: _Section, removed: set[str]) -> list[str]:
        lines = [self._render(x, removed) for x in section.pre]
        if section.kind == "loop":
            lines.append("for roffset in range(0, rnumel, RBLOCK):")
            inner = ["rindex = roffset + tl.arange(0, RBLOCK)[None, :]", self._rmask_line(self._blocks_divide()[1])]
            inner += self._index_var_lines("r")
            if section.barrier:
                inner.append("tl.debug_barrier()")
            inner += [self._render(x, removed) for x in section.lines]
            lines += ["    " + x for x in inner if x is not None]
        else:
            lines += [self._render(x, removed) for x in section.lines]
        lines += [self._render(x, removed) for x in section.post]
        return [x for x in lines if x is not None]

    def _render(self, line, removed):
        if isinstance(line, _Store):
            return None if line.name in removed else line.text
        for placeholder, hint in self._hints.items():  # loads' L2 hints (see _eviction)
            line = line.replace(placeholder, hint)
        return line


def _promote(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    if a == torch.bool:
        return b
    if b == torch.bool:
        return a
    return torch.promote_types(a, b)


def _free_names(text: str) -> set[str]:
    import re
    return {m[0] for m in re.findall(r"\b([xr](index|\d+))\b", text)}


def _node_position(node) -> int:
    for k, n in enumerate(node.graph.nodes):
        if n is node:
            return k
    return 0
