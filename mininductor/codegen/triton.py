"""``TritonKernel``: one fused scheduler node -> the source of one ``@triton.jit`` kernel (mirrors
``torch/_inductor/codegen/triton.py``).

Three shapes of kernel, named like Inductor's:

* ``triton_poi_*`` pointwise: a 1-D block of ``XBLOCK`` elements per program -- or, on the GPU, a 2-D
  ``XBLOCK x RBLOCK`` tile when some operand is read transposed (``tiling.choose_tiling``).
* ``triton_per_*`` persistent reduction: ``XBLOCK`` rows x the whole row (``RBLOCK >= rnumel``) in registers;
  every node of the kernel runs once, and a node that reads a reduction's result gets the register value.
* ``triton_red_*`` looped reduction: rows too long for registers are walked in ``RBLOCK`` chunks; each node that
  needs the row gets a loop (nodes that do not depend on each other's results share one).

Each node's body runs with this kernel installed as the ``ops`` handler: every op appends a line and returns a
CSE'd variable name; ``load`` of a buffer that an earlier node of the kernel stored at the same index returns the
stored variable (no memory round trip), and a store whose buffer no one outside the kernel reads is dropped.
Reductions and scans are in ``triton_reduction.py``; the math of each op (casts, division, the functions
Triton lacks) in ``triton_overrides.py``, over the per-op text of ``triton_ops.py``.

A softmax over rows of 130 (persistent; abridged)::

    tmp0 = tl.load(in_ptr0 + (rindex + 130*xindex), xmask & rmask, other=0)
    tmp3 = tl.max(tl.where(xmask & rmask, tmp0, float('-inf')), 1)[:, None]
    tmp6 = tl.exp(tmp0 - tmp3)
    tmp9 = tl.sum(tl.where(xmask & rmask, tmp6, 0), 1)[:, None]
    tl.store(out_ptr2 + (rindex + 130*xindex), tmp6 / tmp9, xmask & rmask)
"""
from __future__ import annotations

import itertools
import re
from typing import Any

import sympy
import torch

from .. import config
from ..indexing import (
    FloorDiv,
    ModularIndexing,
    is_symbolic,
    simplify_index,
    sym,
    texpr,
)
from ..runtime import candidate_configs
from ..scheduler import RINDEX, XINDEX, FusedSchedulerNode
from ..virtualized import V
from .tiling import choose_kind, choose_tiling, reduction_hint, stores_run_along_x
from .triton_ops import TL_DTYPE, compute_dtype, constant_repr
from .triton_overrides import TritonOverrides
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


class TritonKernel(TritonOverrides, ReductionCodegenMixin):
    def __init__(self, fused: FusedSchedulerNode, internal: set[str], device: torch.device, index: int,
                 kind: str | None = None) -> None:
        self.fused, self.internal, self.device = fused, internal, device
        self.numel, self.rnumel = fused.group()
        self.size_vars: set[sympy.Symbol] = set()  # size symbols the index math uses: int arguments (``s77``)
        self.interpret = device.type != "cuda"
        self.hint = reduction_hint(fused, self.numel, self.rnumel)
        # kind: the looped twin of a persistent kernel (wrapper.py)
        self.kind = kind or choose_kind(self.numel, self.rnumel, self.hint, self.interpret)
        if self.kind == "poi" and (not self.interpret or config.tile_in_interpreter):
            tiling = choose_tiling(fused, self.numel)
            if tiling is not None:
                self.kind, (self.numel, self.rnumel) = "tile", tiling
        self.x_first = self.kind == "tile" and stores_run_along_x(fused, self.numel, self.rnumel)
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
        self.device_asserts = False  # a tl.device_assert: launched with debug=True (indirect_indexing)
        # a value rounded to fp16/bf16 and back: the kernel must compile without FP contraction (see to_dtype)
        self.rounds_low_precision = False
        self._rounded: dict[str, torch.dtype] = {}  # tmp -> the fp16/bf16 its value was rounded to (kept in fp32)
        self._in_post = False  # True while emitting a looped reduction's final reduce (after its loop)
        self.name = self._kernel_name(index)
        self.bytes_accessed = 0

    # ------------------------------------------------------------------------------------------- naming
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
    def _size_symbols(self, expr) -> set:
        """The size symbols of ``expr``: positive (a size), or an int input's value, which the wrapper reads too
        ([Note: int inputs of a symbolic graph]); the loop variables (``x0``, ``r0_1``) are only nonnegative."""
        return {s for s in expr.free_symbols if s.is_positive or s in V.graph.size_sources}

    def _one_element(self, index) -> bool:
        """An index of no loop variable: a constant, or sizes and int inputs only (``x.select(0, x.shape[0] - 1)``
        reads ``s77 - 1``; the backward of ``F.pad(x, (0, n)).cumsum(0)`` reads one element at ``n``), the same element for
        the whole block.  An int input's symbol is not positive (it may be 0), so the test is ``_size_symbols``':
        counted as a loop variable, its scalar pointer met a block mask, which Triton refuses (lowering fuzz
        ``--grad --zero --int``, seed 975924)."""
        expr = sympy.sympify(index)
        return expr.free_symbols == self._size_symbols(expr)

    def _size_text(self, expr) -> str:
        """A size in kernel source: its symbols become int arguments of the kernel."""
        expr = sympy.sympify(expr)
        self.size_vars |= self._size_symbols(expr)
        return texpr(expr, kernel=True)

    def _index(self, expr) -> str:
        expr = simplify_index(sympy.sympify(expr))
        self.size_vars |= self._size_symbols(expr)
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
    # [Note: a masked load of one element]  A load whose index has no loop variable reads the same element for the
    # whole block, so it is one unmasked scalar load -- unless it sits in ``ops.masked`` (the body of a pad, a cat,
    # a scatter's bounds): there the element may not exist.  ``F.pad(x.sum(0), (0, n))`` of an ``x`` of shape (1, 0)
    # reads ``x[0, 0]`` where the pad's mask is false everywhere; ``x`` is empty, its data pointer is NULL, and the
    # unmasked load segfaulted Triton's interpreter (on a GPU: an illegal address, which ends the CUDA context).
    # Found by the lowering fuzzer (``--zero --int``, seed 945782).  So under a mask the load is masked: its pointer is
    # a [1] block, which Triton broadcasts against the mask.
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
        if name in getattr(V.graph, "zero_dim_cpu_tensors", ()):  # its value: [Note: CPU scalars] in graph.py
            shape = "[1]" if self.ndim == 1 else "[1, 1]"
            return self._emit(f"tl.full({shape}, {self._arg(name, 'ks')}, {TL_DTYPE[dtype]})", dtype)
        ptr = self._arg(name, "in_ptr")
        one = "[1]" if self.ndim == 1 else "[1, 1]"
        if self._one_element(index) and self.mask_stack:  # [Note: a masked load of one element]
            text = f"tl.load({ptr} + ({idx}) + tl.full({one}, 0, tl.int32), {self._mask(idx, self.r_node)}, other=0)"
        elif self._one_element(index):  # a [1] block, like our constants
            text = f"tl.broadcast_to(tl.load({ptr} + ({idx})), {one})"
        else:
            text = f"tl.load({ptr} + ({idx}), {self._mask(idx, self.r_node)}, other=0{self._eviction(name, idx)})"
        if dtype == torch.bfloat16 and self.interpret:  # [Note: bf16 bits under the interpreter]
            text = f"(({text}).to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)"
        elif compute_dtype(dtype) != dtype:
            text += ".to(tl.float32)"
        return self._emit(text, compute_dtype(dtype))

    def _stored(self, value: str, dtype: torch.dtype) -> str:
        """``value`` converted to the buffer's dtype for a store.

        [Note: bf16 bits under the interpreter]  Triton's interpreter converts bf16 denormals wrongly both ways:
        a load of -9.2e-41 gave -0.0 (so ``x < 0`` was False: lowering fuzz --dynamic, seed 2000907) and a store of
        4.22e-39 read back as 5.14e-39. Its casts also truncate where a GPU rounds. So under the interpreter a bf16
        value moves as bits: the top half of an fp32 (rounded to nearest even first, ``_round_bf16``), which is
        what bf16 is. Compiled kernels keep Triton's casts, which the hardware does right."""
        if self._dtype(value) == dtype:
            return value
        if dtype == torch.bfloat16 and self.interpret:  # a NaN keeps its sign and is quiet (a payload in the low
            top = f"({value}.to(tl.int32, bitcast=True) >> 16)"  # half alone would read as inf), as a GPU's cast
            return f"tl.where({value} != {value}, {top} | 0x40, {top}).to(tl.int16).to(tl.bfloat16, bitcast=True)"
        return f"{value}.to({TL_DTYPE[dtype]})"

    def _eviction(self, name: str, idx: str) -> str:
        """An L2 hint for a reduction's row load, decided when the kernel is rendered (``_render``).

        A looped kernel (Inductor's rule) keeps a row it reads again in a later loop ('evict_last') and streams
        the last read ('evict_first'); blocks every row reads (a norm's weight) need no hint.  A persistent
        kernel reads each row once: we stream it only when the kernel writes nothing row-sized (a plain row
        sum), measured on an H200 (bench/kernel_configs.py): the hint made x.sum(-1) 5% faster but norms and
        softmax, whose outputs are rows too, 2-4% slower."""
        if self.kind not in ("per", "red") or not config.eviction_policies or \
                self.hint not in ("inner", "skinny_mm") or not any(v[0] == "x" for v in _free_names(idx)):
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
        if not self._one_element(index):
            return self._index(index)
        shape = "[XBLOCK]" if self.ndim == 1 else "[XBLOCK, 1]"
        if sympy.sympify(index).free_symbols:  # sizes only (``s77 - 1``)
            return f"tl.zeros({shape}, tl.int32) + ({self._index(index)})"
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
        cast = self._stored(value, dtype)
        mask = self._mask(idx, self.r_node)
        if mode == "atomic_add":  # several elements may land on one address: add atomically, never cache
            # The value is materialised at the pointer block's shape (adding zeros): compiled Triton broadcasts
            # by itself, but Triton 3.6's interpreter reads a broadcast (stride-0) value as if contiguous.
            ptrs = f"{ptr} + ({idx})"
            if "x" not in names:  # no x in the index (a 0-d index, or one loaded): give it the mask's shape --
                # [XBLOCK, 1] for a reduction's epilogue, which must not add once per lane of RBLOCK (the
                # lowering fuzzer's --scatter, seed 9850008: an index_add_ after an amax added twice)
                full = self.kind != "poi" and (self.r_node or self.kind == "tile" or "r" in names)
                shape = "[XBLOCK]" if self.ndim == 1 else "[XBLOCK, RBLOCK]" if full else "[XBLOCK, 1]"
                ptrs = f"tl.broadcast_to({ptrs}, {shape})"
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
        cast = self._stored(value, dtype)
        target = self.section.post if self.section.kind == "loop" else self.lines
        target.append(_Store(name, f"tl.store({ptr} + ({idx}), {cast}, xmask)"))
        self.top.stores[(name, self._index(index))] = value
        self.section.finalized.add(name)

    def constant(self, value, dtype: torch.dtype) -> str:
        shape = "[1]" if self.ndim == 1 else "[1, 1]"
        cd = compute_dtype(dtype)
        return self._emit(f"tl.full({shape}, {constant_repr(value, dtype)}, {TL_DTYPE[cd]})", cd)

    def index_expr(self, expr, dtype: torch.dtype) -> str:
        expr, cd = sympy.sympify(expr), compute_dtype(dtype)
        if not expr.free_symbols:
            return self.constant(int(expr), dtype)
        if all(s.is_positive for s in expr.free_symbols):  # sizes only (``s77``, ``1.0 / s77``): a scalar, made a
            # block like a constant -- ``tmp1 != tmp1`` of a bare scalar is no block (clamp's NaN test failed)
            text = self._size_text(expr)  # a float size: float64, then cast ([Note: float sizes])
            shape = "[1]" if self.ndim == 1 else "[1, 1]"
            value = self._emit(f"tl.full({shape}, {text}, {TL_DTYPE[cd]})", cd)
            # an fp16/bf16 operand: eager rounds the Python number to the tensor's dtype, as ``constant_repr``
            return self.to_dtype(value, dtype) if dtype in (torch.float16, torch.bfloat16) else value
        return self._emit(f"({self._index(expr)}).to({TL_DTYPE[cd]})", cd)

    def indirect_indexing(self, value: str, size: int, check: bool = True, wrap_neg: bool = True):
        """``value`` as an index into a dimension of ``size``; with ``wrap_neg``, negative values count from the end.

        [Note: out-of-range indices]  Eager raises ``IndexError`` for ``x[i]`` with ``i`` out of range; a kernel
        would read (or, scattering, write) outside the tensor instead.  Under the interpreter that is host
        memory: garbage, or a segfault.  So interpreted kernels check their indices before using them
        (``_check_index``, plain Python over the interpreter's NumPy arrays, raises ``IndexError``).  Compiled
        for the GPU, a kernel checks with ``tl.device_assert``, as Inductor's do (``assert_indirect_indexing``):
        an index out of range stops the kernel with a device-side assert, which is what eager's CUDA indexing
        kernels do too.  Triton compiles the assert only into kernels launched with ``debug=True``, so such a
        kernel says so to its launcher (``device_asserts``); on an H200 the check cost a gather about 1%
        (docs/08-triton-codegen.md)."""
        size_text = self._size_text(size)
        mask = self._mask(value, self.r_node)
        if check and self.interpret:
            self.lines.append(f"_check_index({value}, {size_text}, {mask}, {wrap_neg})")
        elif check:
            low = f"-{size_text}" if wrap_neg else "0"
            self.lines.append(f"tl.device_assert((({low} <= {value}) & ({value} < {size_text})) | ~({mask}), "
                              f'"index out of bounds: {low} <= {value} < {size_text}")')
            self.device_asserts = True
        if not wrap_neg:
            return sym(value)
        return sym(self._emit(f"tl.where({value} < 0, {value} + {size_text}, {value})", self._dtype(value)))

    def device_assert_async(self, ok: str, message: str) -> None:
        """Stop with ``message`` where ``ok`` is false (Inductor's ``ops.device_assert_async``).

        [Note: value checks]  Some eager kernels refuse input *values*: the CPU's integer division raises
        ``RuntimeError: ZeroDivisionError`` for a zero divisor; ``one_hot``, ``binary_cross_entropy`` and
        ``bernoulli`` check their classes and probabilities (decomposed with ``aten._assert_async``, lowered to
        this).  A kernel computes a value there instead -- a wrong answer -- so the lowering asks for a check
        on the values at run time, where eager's kernel on that device has one.  As for indices ([Note:
        out-of-range indices]): an interpreted kernel checks in plain Python (``_check_values``, raising
        ``RuntimeError(message)``); a GPU kernel calls ``tl.device_assert``, a device-side assert like eager's
        ``CUDA_KERNEL_ASSERT``.  Lanes outside the kernel's masks (a padded block, the untaken side of
        ``ops.masked``) are not checked.  A kernel computes only what is used -- ``(a // b)[:2] + 1`` two
        quotients -- where eager divides everything first, so a tensor divisor is checked whole, by a separate
        ``all(b != 0)`` reduction (``division_lowering._check_every_divisor``; fused with the division when their sizes
        agree)."""
        mask = self._mask(ok, self.r_node)
        if self.interpret:
            self.lines.append(f"_check_values({ok}, {mask}, {message!r})")
        else:
            self.lines.append(f"tl.device_assert({ok} | ~({mask}), {message!r})")
            self.device_asserts = True

    def masked(self, mask: str, body, other) -> str:
        self.mask_stack.append(mask)
        try:
            value = body()
        finally:
            self.mask_stack.pop()
        dtype = self._dtype(value)
        other_var = self.constant(other, dtype)
        return self._emit(f"tl.where({mask}, {value}, {other_var})", dtype)

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
                   self._decorator(), f"def {self.name}({sig}, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):"]
            return "\n".join(out + ["    " + line for line in self._header() + self._render_section(
                self.sections[0], removed)]) + "\n"
        consts = "XBLOCK: tl.constexpr" + (", RBLOCK: tl.constexpr" if self.kind != "poi" else "")
        out = [self._decorator(), f"def {self.name}({sig}, {consts}):"]
        body = self._header()
        for section in self.sections:
            body += self._render_section(section, removed)
        out += ["    " + line for line in body]
        return "\n".join(out) + "\n"

    def _decorator(self) -> str:
        """``@triton.jit``; a CPU scalar's argument (``ks0``...) is not specialized on its value, or each loop
        index equal to 1 or a multiple of 16 would compile its own variant ([Note: CPU scalars] in graph.py)."""
        scalars = [arg for arg in self.args.values() if arg.startswith("ks")]
        return f"@triton.jit(do_not_specialize={scalars!r})" if scalars else "@triton.jit"

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


def _free_names(text: str) -> set[str]:
    import re
    return {m[0] for m in re.findall(r"\b([xr](index|\d+))\b", text)}


def _node_position(node) -> int:
    for k, n in enumerate(node.graph.nodes):
        if n is node:
            return k
    return 0
