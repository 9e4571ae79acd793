"""The IR: what a lowering returns and what the scheduler fuses (mirrors ``torch/_inductor/ir.py``, much smaller).

Vocabulary, bottom up:

* ``Layout`` / ``FixedLayout``: device, dtype, size, stride, offset of a materialised buffer.
* ``Loops`` -- ``Pointwise`` (``inner_fn(index)``) and ``Reduction`` (``inner_fn(index, rindex)`` plus
  ``reduction_type``; ``WelfordReduction`` is one output of a mean/variance reduction): define-by-run bodies over
  ``ops.*`` (see ``virtualized.py``). Nothing is computed yet.
* ``Buffer`` -- named storage: ``InputBuffer`` (a graph input), ``ConstantBuffer`` (a tensor attribute),
  ``ComputedBuffer`` (a ``Loops`` given a layout: the scheduler turns it into kernel code),
  ``ExternKernel`` (mm/addmm/bmm/baddbmm/convolution through the library) and ``FallbackKernel`` (any ATen op
  without a lowering, run eagerly).
* Views -- ``View`` re-indexes another node without copying (permute, expand, slice, select, reshape...);
  ``ReinterpretView`` is a strided window on a buffer, what externs receive.
* ``StorageBox`` decides *realisation*: it holds either unrealised ``Loops`` (inlined into every consumer) or a
  ``Buffer``; ``realize()`` materialises. ``TensorBox`` is what a lowering returns for a tensor.

Example: ``torch.sin(x + 1)`` lowers to ``TensorBox(StorageBox(Pointwise(inner_fn=lambda i:
ops.sin(ops.add(ops.load('arg0_1', i0), ops.constant(1.0)))))``; realised as the graph output it becomes
``ComputedBuffer('buf0')``, which codegen turns into ``triton_poi_fused_add_sin_0``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import sympy
import torch

from . import config
from .indexing import as_size, contiguous_strides, is_symbolic, product, simplify_index, sym, texpr
from .virtualized import V, ops


@dataclasses.dataclass
class FixedLayout:
    """Where a buffer's elements live: ``offset + sum(index[i] * stride[i])``."""

    device: torch.device
    dtype: torch.dtype
    size: list[int]
    stride: list[int]
    offset: int = 0

    def make_indexer(self) -> Callable[[Sequence], sympy.Expr]:
        def indexer(index):
            assert len(index) == len(self.size), (index, self.size)
            terms = [i * s for i, s in zip(index, self.stride) if s != 0]
            return simplify_index(sympy.sympify(self.offset) + sum(terms, sympy.Integer(0)))
        return indexer

    def is_contiguous(self) -> bool:
        return all(st == cs for st, cs, sz in zip(self.stride, contiguous_strides(self.size), self.size) if sz != 1)

    def __str__(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        return f"FixedLayout('{self.device}', {dt}, size={self.size}, stride={self.stride}, offset={self.offset})"


def contiguous_layout(device, dtype, size) -> FixedLayout:
    return FixedLayout(torch.device(device), dtype, [as_size(s) for s in size], contiguous_strides(size))


class IRNode:
    """Anything a lowering can return: has a size, dtype, device and a loader (``index -> ops value``)."""

    def get_size(self) -> list[int]:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def make_loader(self) -> Callable:
        raise NotImplementedError

    def get_numel(self) -> int:
        return product(self.get_size())

    def realize(self) -> str | None:
        return None


# ----------------------------------------------------------------------------------------------- Loops
class Loops(IRNode):
    def __init__(self, device, dtype, inner_fn, ranges, origins=None):
        self.device, self.dtype, self.inner_fn = torch.device(device), dtype, inner_fn
        self.ranges = [as_size(r) for r in ranges]
        self.origins = set(origins or ())
        if V.graph is not None and V.graph.current_node is not None:
            self.origins.add(V.graph.current_node)

    def get_size(self):
        return self.ranges

    def get_dtype(self):
        return self.dtype

    def get_device(self):
        return self.device

    def get_reduction_size(self) -> list[int]:
        return []

    def get_reduction_type(self) -> str | None:
        return None

    def index_vars(self):
        return [sym(f"i{n}") for n in range(len(self.ranges))]

    def inner_fn_str(self) -> str:
        from .dependencies import format_inner_fn
        return format_inner_fn(self)

    def __str__(self) -> str:
        return f"{type(self).__name__}(ranges={self.ranges}, dtype={self.dtype}, body={self.inner_fn_str()})"


class Pointwise(Loops):
    """One value per output element: ``inner_fn(index) -> ops value``."""

    def make_loader(self):
        return self.inner_fn

    def store_output(self, name, indexer, vars):
        return ops.store(name, indexer(vars), self.inner_fn(vars))


class Reduction(Loops):
    """``reduction_type`` (sum, prod, max, min, argmax, argmin, any, all) of ``inner_fn(index, rindex)`` over
    ``reduction_ranges``. ``src_dtype`` is the dtype the values are accumulated in."""

    def __init__(self, device, dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype, origins=None):
        super().__init__(device, dtype, inner_fn, ranges, origins)
        self.reduction_ranges = [as_size(r) for r in reduction_ranges]
        self.reduction_type, self.src_dtype = reduction_type, src_dtype
        self.skinny_mm = False  # an mm lowered as this reduction: its kernel's config is not timed (extern_lowering)

    def get_reduction_size(self):
        return self.reduction_ranges

    def get_reduction_type(self):
        return self.reduction_type

    def make_loader(self):
        raise AssertionError("a Reduction is always realised before it is read")

    def store_output(self, name, indexer, vars, rvars):
        value = ops.reduction(self.dtype, self.src_dtype, self.reduction_type, self.inner_fn(vars, rvars))
        return ops.store_reduction(name, indexer(vars), value)

    def __str__(self) -> str:
        return (f"Reduction(ranges={self.ranges}, reduction_ranges={self.reduction_ranges}, "
                f"type={self.reduction_type}, dtype={self.dtype}, body={self.inner_fn_str()})")


class WelfordReduction(Reduction):
    """Output ``output_index`` of a Welford reduction of ``inner_fn`` over ``reduction_ranges``: 0 the mean, 1 ``m2``
    (the sum of squared deviations from the mean), 2 the weight (how many elements). Variance in one pass over
    the row, where ``sum`` then ``sum((x - mean)**2)`` needs two. Every output's node asks for the same
    ``ops.reduction(..., "welford_reduce", value)``, a ``(mean, m2, weight)`` triple that a kernel computes once;
    each stores its own element (Inductor's ``WelfordReduction``, a ``MultiOutputReduction``: a node per output)."""

    OUTPUTS = ("mean", "m2", "weight")

    def __init__(self, device, dtype, inner_fn, ranges, reduction_ranges, src_dtype, output_index: int,
                 origins=None):
        super().__init__(device, dtype, inner_fn, ranges, reduction_ranges, "welford_reduce", src_dtype, origins)
        self.output_index = output_index

    def store_output(self, name, indexer, vars, rvars):
        values = ops.reduction(self.dtype, self.src_dtype, "welford_reduce", self.inner_fn(vars, rvars))
        return ops.store_reduction(name, indexer(vars), values[self.output_index])

    def __str__(self) -> str:
        return (f"WelfordReduction(output={self.OUTPUTS[self.output_index]}, ranges={self.ranges}, "
                f"reduction_ranges={self.reduction_ranges}, dtype={self.dtype}, body={self.inner_fn_str()})")


class Scan(Reduction):
    """A running ``scan_type`` (``sum``: cumsum, ``prod``: cumprod) along dim ``dim``: one output per input element,
    so it stores at the full index, but like a reduction each row must be walked in order. ``ranges`` are the
    other dims."""

    def __init__(self, device, dtype, inner_fn, ranges, scan_size, dim, full_size, origins=None, scan_type="sum"):
        super().__init__(device, dtype, inner_fn, ranges, [scan_size], scan_type, dtype, origins)
        self.dim, self.full_size = dim, [as_size(s) for s in full_size]

    def get_size(self):
        return self.full_size

    def full_index(self, vars, rvars):
        index = list(vars)
        index.insert(self.dim, rvars[0])
        return index

    def store_output(self, name, indexer, vars, rvars):
        value = ops.scan(self.dtype, self.reduction_type, self.inner_fn(vars, rvars))
        return ops.store(name, indexer(self.full_index(vars, rvars)), value)

    def __str__(self) -> str:
        return f"Scan(cum{self.reduction_type} over dim {self.dim}, ranges={self.ranges}, body={self.inner_fn_str()})"


class Scatter(Pointwise):
    """Stores ``inner_fn(index)`` into another buffer, ``target``, at ``target_index(index)`` (indirect), plainly
    or with ``mode="atomic_add"``. Its ComputedBuffer aliases ``target``'s memory (the wrapper binds the name),
    so it runs after whatever wrote ``target``, alone or as the last step of the kernel that computes what it
    stores ([Note: a scatter ends its producer's kernel] in scheduler.py). Mirrors Inductor's ``ir.Scatter``."""

    def __init__(self, device, dtype, inner_fn, ranges, target: str, target_indexer, target_index, mode,
                 origins=None):
        super().__init__(device, dtype, inner_fn, ranges, origins)
        self.target, self.target_indexer, self.target_index, self.mode = target, target_indexer, target_index, mode

    def store_output(self, name, indexer, vars):
        value = self.inner_fn(vars)
        return ops.store(self.target, self.target_indexer(self.target_index(vars)), value, self.mode)

    def __str__(self) -> str:
        return f"Scatter(into={self.target}, mode={self.mode}, ranges={self.ranges}, body={self.inner_fn_str()})"


# ----------------------------------------------------------------------------------------------- Buffers
class Buffer(IRNode):
    def __init__(self, name: str | None, layout: FixedLayout):
        self.name, self.layout = name, layout
        self.origins = set()

    def get_name(self) -> str:
        assert self.name is not None
        return self.name

    def get_size(self):
        return self.layout.size

    def get_stride(self):
        return self.layout.stride

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def make_loader(self):
        indexer, name = self.layout.make_indexer(), self.get_name()
        return lambda index: ops.load(name, indexer(index))

    def realize(self):
        return self.get_name()

    def __str__(self) -> str:
        return f"{type(self).__name__}(name='{self.name}', layout={self.layout})"


class InputBuffer(Buffer):
    """A graph input (a placeholder): its real strides are part of the compiled graph's assumptions."""

    storage_offset: int = 0


class ConstantBuffer(Buffer):
    """A tensor attribute of the graph (``get_attr``): passed to ``call`` like an input."""


class ComputedBuffer(Buffer):
    """``data`` (a ``Pointwise`` or ``Reduction``) stored into a contiguous buffer: one scheduler node."""

    def __init__(self, name, layout, data: Loops):
        super().__init__(name, layout)
        self.data = data
        self.origins = set(data.origins)

    def get_reduction_size(self):
        return self.data.get_reduction_size()

    def get_reduction_type(self):
        return self.data.get_reduction_type()

    def __str__(self) -> str:
        return f"ComputedBuffer(name='{self.name}', layout={self.layout}, data={self.data})"


class ExternKernel(Buffer):
    """A library call (cuBLAS/oneDNN through ATen) writing ``out=`` into a buffer: ``kernel(*inputs, **kwargs)``.

    ``inputs`` are realised buffers or ``ReinterpretView``s, never loops: a library cannot run our ``inner_fn``.
    """

    def __init__(self, layout, kernel: str, inputs: list, constant_args=(), kwargs=None, origins=None):
        super().__init__(None, layout)
        self.kernel, self.inputs = kernel, list(inputs)
        self.constant_args, self.kwargs = tuple(constant_args), dict(kwargs or {})
        self.origins = set(origins or ())
        self.template = False  # a skinny fp32 matmul the wrapper runs through a MatmulChoice (matmul_template.py)

    def input_names(self) -> list[str]:
        return [x.get_name() if isinstance(x, Buffer) else x.data.get_name() for x in self.inputs]

    def __str__(self) -> str:
        return f"{type(self).__name__}(name='{self.name}', kernel={self.kernel}, inputs={self.input_names()})"


class FallbackKernel(ExternKernel):
    """An ATen op with no lowering, run eagerly (``torch.ops.aten.foo(...)``). ``args``/``kwargs`` keep their
    structure with ``Buffer``/``ReinterpretView`` leaves; outputs that are tensors become ``MultiOutput``s."""

    def __init__(self, op, args, kwargs, example_output, inputs, origins=None):
        layout = FixedLayout(torch.device("cpu"), torch.float32, [], [])  # the op returns its own tensors
        super().__init__(layout, str(op), inputs, origins=origins)
        self.op, self.args, self.fkwargs, self.example_output = op, args, kwargs, example_output


class OpaqueOutput:
    """A non-tensor result of a fallback (e.g. the handle ``_record_function_enter_new`` returns), kept in a
    variable of the generated ``call`` so a later fallback (``_record_function_exit``) can take it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self) -> str:
        return self.name


class MultiOutput(Buffer):
    """Element ``indices`` of a fallback's (possibly nested tuple) result, as a buffer of known layout."""

    def __init__(self, name, layout, parent: FallbackKernel, indices: tuple):
        super().__init__(name, layout)
        self.parent, self.indices = parent, indices
        self.origins = set(parent.origins)


# ----------------------------------------------------------------------------------------------- Views
class View(IRNode):
    """``data`` seen through ``reindex`` (output index -> input index) with a new ``size``; never copies."""

    def __init__(self, data: IRNode, size: Sequence[int], reindex: Callable):
        self.data, self.size, self.reindex = data, [as_size(s) for s in size], reindex
        self.origins = getattr(data, "origins", set())

    def get_size(self):
        return self.size

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        inner, reindex = self.data.make_loader(), self.reindex
        return lambda index: inner(reindex(list(index)))

    def realize(self):
        return self.data.realize()

    def __str__(self) -> str:
        return f"View(size={self.size}, data={self.data})"


class ReinterpretView(IRNode):
    """A strided window (``as_strided``) on a realised buffer: how views reach extern and fallback kernels."""

    def __init__(self, data: Buffer, layout: FixedLayout):
        self.data, self.layout = data, layout
        self.origins = set()

    def get_name(self):
        return self.data.get_name()

    def get_size(self):
        return self.layout.size

    def get_stride(self):
        return self.layout.stride

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def make_loader(self):
        indexer, name = self.layout.make_indexer(), self.data.get_name()
        return lambda index: ops.load(name, indexer(index))

    def codegen_reference(self) -> str:
        """The view as wrapper code.  At offset 0 it is ``torch.as_strided`` without an offset, which keeps the
        tensor's own (a graph input may start anywhere in its storage): the same view as ``reinterpret_tensor``
        at a third less host time, one Python call fewer (a loop body's backward makes eight of them per call)."""
        from .codegen.wrapper import shape_text
        offset = self.layout.offset  # symbolic for a later piece of a split: ``s27*((s77 + 2) // 3)``
        if not is_symbolic(offset) and offset == 0:
            return f"torch.as_strided({self.data.get_name()}, {shape_text(self.layout.size)}, " \
                   f"{shape_text(self.layout.stride)})"
        return (f"reinterpret_tensor({self.data.get_name()}, {shape_text(self.layout.size)}, "
                f"{shape_text(self.layout.stride)}, {texpr(offset) if is_symbolic(offset) else offset})")


# ----------------------------------------------------------------------------------------------- boxes
class StorageBox(IRNode):
    """Holds unrealised ``Loops`` or a ``Buffer``; ``realize()`` turns the first into a ``ComputedBuffer``."""

    def __init__(self, data: IRNode):
        self.data = data
        self.origins = getattr(data, "origins", set())

    def get_size(self):
        return self.data.get_size()

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def is_realized(self) -> bool:
        return isinstance(self.data, Buffer)

    def make_loader(self):
        return self.data.make_loader()

    def realize(self, stride: list[int] | None = None) -> str:
        """Materialise unrealised loops into a buffer, row-major unless ``stride`` is given (a graph output
        keeps eager's strides: [Note: outputs keep eager's strides])."""
        if isinstance(self.data, Loops):
            layout = contiguous_layout(self.data.device, self.data.dtype, self.data.get_size())
            if stride is not None:
                layout = FixedLayout(layout.device, layout.dtype, layout.size, list(stride))
            buf = ComputedBuffer(None, layout, self.data)
            buf.name = V.graph.register_buffer(buf)
            self.data = buf
        return self.data.get_name()

    def num_reads(self) -> int:
        from .dependencies import extract_read_writes
        return len(extract_read_writes(self.data).reads) if isinstance(self.data, Pointwise) else 0

    def mark_reuse(self, users: int) -> None:
        """Several consumers: recompute inline when cheap, else materialise once (Inductor's heuristic)."""
        if users <= 1 or not isinstance(self.data, Pointwise):
            return
        from .dependencies import extract_read_writes
        rw = extract_read_writes(self.data)
        if len(rw.reads) > config.realize_reads_threshold or rw.op_count > config.realize_ops_threshold:
            self.realize()

    def __str__(self) -> str:
        return f"StorageBox({self.data})"


class TensorBox(IRNode):
    """What a lowering returns for a tensor: a ``StorageBox`` or a view chain ending in one."""

    def __init__(self, data: IRNode):
        self.data = data
        self.origins = getattr(data, "origins", set())

    @staticmethod
    def create(data: IRNode) -> TensorBox:
        return TensorBox(StorageBox(data))

    def get_size(self):
        return self.data.get_size()

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        return self.data.make_loader()

    def realize(self):
        return self.data.realize()

    def storage(self) -> StorageBox | None:
        node = self.data
        while isinstance(node, View):
            node = node.data
        return node if isinstance(node, StorageBox) else None

    def __str__(self) -> str:
        return f"TensorBox({self.data})"


def unwrap_view_to_buffer(node: IRNode):
    """Follow TensorBox/StorageBox wrappers; return the underlying Buffer if ``node`` is exactly a buffer."""
    while isinstance(node, (TensorBox, StorageBox)):
        node = node.data
    return node




def as_strided_layout(node: IRNode) -> ReinterpretView | None:
    """If ``node`` reads a realised buffer at an index linear in every output index var, return it as a strided
    ``ReinterpretView`` (strides = the coefficients); else None (the caller copies it into a fresh buffer)."""
    from .indexing import linear_stride
    inner = node
    while isinstance(inner, (TensorBox, View, StorageBox, ReinterpretView)):  # a view of ``as_strided``'s window
        inner = inner.data                                                    # reads the window's buffer
    if not isinstance(inner, Buffer) or isinstance(inner, FallbackKernel):
        return None
    size = node.get_size()
    vars_ = [sym(f"v{i}") for i in range(len(size))]
    captured = []
    from .dependencies import RecordLoadsHandler
    handler = RecordLoadsHandler()
    with V.set_ops_handler(handler):
        node.make_loader()(vars_)
    captured = handler.loads
    if len(captured) != 1 or captured[0][0] != inner.get_name():
        return None
    expr = sympy.expand(captured[0][1])
    int_inputs = frozenset(V.graph.size_sources) if V.graph is not None else frozenset()
    strides = [linear_stride(expr, v, int_inputs) for v in vars_]
    # torch.as_strided takes no negative strides (flip); a stride of sizes and int inputs is a product of sizes
    if any(s is None or (s < 0 if isinstance(s, int) else s.is_negative) for s in strides):
        return None
    offset = expr.subs({v: 0 for v in vars_})
    if not (offset.is_Integer or offset.free_symbols and all(s.is_positive for s in offset.free_symbols)):
        return None  # an offset of sizes only (``s27*((s77 + 2) // 3)``: the second chunk) is a strided window too
    strides = [s if sz != 1 else (s or 1) for s, sz in zip(strides, size)]
    return ReinterpretView(inner, FixedLayout(inner.get_device(), inner.get_dtype(), list(size), strides,
                                              int(offset) if offset.is_Integer else offset))
