"""mininductor with symbolic-size graphs from minidynamo: one compiled callable serves every size.

Where it can, that callable is *one* symbolic compile (kernels take sizes as arguments; ``specialize.py``); else
it holds one static compile per concrete shape.  These tests pin both: values equal eager, one frame, kernels
generated once for every batch size (or one specialisation per distinct shape, with the reason recorded).
Budget: ~30 s on 2 cores (Triton interpreter).
"""
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from minidynamo.testing import CompileCounter, outcome
from mininductor import metrics
from mininductor.specialize import is_symbolic_graph, specialize_graph

from .utils import assert_same, frames_ok, leaves, run_shapes

pytestmark = pytest.mark.usefixtures("fresh_minicompile")  # conftest.py


def _model(x, w):
    b = x.shape[0]
    h = torch.relu(x @ w)                        # extern mm with a symbolic number of rows
    v = h.view(b, 5).transpose(0, 1).sum(1)      # view + reduction over the symbolic dim
    return h * b + v.mean(), h.amax(dim=1)       # the size as a number; a row reduction


def test_inductor_serves_every_size_from_one_frame():
    compiled = minidynamo.minicompile(_model, backend="inductor", dynamic=True)
    w = torch.randn(4, 5)
    for b in (3, 4, 6, 3, 4):
        x = torch.randn(b, 4)
        assert_same(compiled(x, w), _model(x, w))
    assert minidynamo.counters["frames"]["ok"] == 1
    assert minidynamo.counters["recompiles"]["total"] == 0
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0  # one compile for sizes 3, 4, 6
    assert metrics.generated_kernel_count > 0 and metrics.fallback_count == 0


def test_inductor_with_automatic_dynamic_and_an_int_input():
    def f(x, n):  # n only multiplies a tensor: passed as a 0-d tensor, the graph stays symbolic in x's rows
        return (x * n).sum(0) + x.shape[0]

    def g(x, n):  # n is a slice bound: a kernel argument, read by call() from its input ([Note: int inputs of a
        return (x[:n] * 2).sum(0) + x.shape[0]  # symbolic graph])

    for fn in (f, g):
        metrics.reset()
        minidynamo.reset()
        compiled = minidynamo.minicompile(fn, backend="inductor")
        for b, n in ((3, 2), (5, 3), (7, 4), (5, 3)):
            x = torch.randn(b, 8)
            assert_same(compiled(x, n), fn(x, n))
        assert minidynamo.counters["frames"]["ok"] == 2  # static first, then x's dim 0 and n are symbols
        assert metrics.specialisations == 0 and metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks
        assert metrics.fallback_count == 0, metrics.fallback_ops


def test_training_with_symbolic_sizes_specialises_forward_and_backward():
    def f(x, w):
        return (x @ w).tanh().sum() * x.shape[0]
    compiled = minidynamo.minicompile(f, backend="aot_eager", dynamic=True)
    w = torch.randn(4, 3, requires_grad=True)
    for b in (2, 5, 2):
        x = torch.randn(b, 4, requires_grad=True)
        out = compiled(x, w)
        out.backward()
        grads = (x.grad.clone(), w.grad.clone())
        x.grad = None
        w.grad = None
        f(x, w).backward()
        assert_same(out, f(x, w))
        assert_same(grads, (x.grad, w.grad))
        w.grad = None
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.specialisations == 2


def test_specialize_graph_turns_size_nodes_and_int_inputs_into_constants():
    cnt = CompileCounter()
    f = minidynamo.minicompile(lambda x, n: x.reshape(-1) * x.shape[0] + n, backend=cnt, dynamic=True)
    f(torch.randn(3, 2), 5)
    gm = cnt.graphs[0]
    x = torch.randn(4, 2)
    assert is_symbolic_graph(gm, [x, 7])
    static = specialize_graph(gm, [x, 7])
    assert [n.op for n in static.graph.nodes].count("placeholder") == 1
    assert not is_symbolic_graph(static, [x])
    assert_same(static(x)[0], x.reshape(-1) * 4 + 7)


# ------------------------------------------------------------------------------ one symbolic compile, every size
def _pointwise_chain(x, w):
    return torch.sigmoid(torch.relu(x * 2 + 1) - x.shape[0])


def _softmax_rows(x, w):
    return torch.softmax(x, -1)


def _sum_over_batch(x, w):
    return x.sum(0)


def _reshape(x, w):
    b = x.shape[0]
    return x.view(b, 4, 4).transpose(1, 2).reshape(b, -1) * b


def _matmul(x, w):
    return torch.relu(x @ w)


def _layer_norm(x, w):
    return torch.nn.functional.layer_norm(x, (16,))


@pytest.mark.parametrize("fn", [_pointwise_chain, _softmax_rows, _sum_over_batch, _reshape, _matmul, _layer_norm])
def test_one_symbolic_compile_serves_batch_sizes_2_to_9(fn):
    compiled = minidynamo.minicompile(fn, backend="inductor", dynamic=True)
    w = torch.randn(16, 8)
    kernels = []
    for b in range(2, 10):
        x = torch.randn(b, 16)
        assert_same(compiled(x, w), fn(x, w))
        kernels.append(metrics.generated_kernel_count)
    assert minidynamo.counters["frames"]["ok"] == 1
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert len(set(kernels)) == 1  # generated once, at the first size
    assert metrics.fallback_count == 0


def test_symbolic_kernel_takes_sizes_as_arguments(tmp_path, monkeypatch):
    from mininductor import config
    monkeypatch.setattr(config, "debug_dir", str(tmp_path))
    compiled = minidynamo.minicompile(_sum_over_batch, backend="inductor", dynamic=True)
    compiled(torch.randn(3, 16), None)
    source = (tmp_path / "output_code.py").read_text()
    assert "= arg0_1.shape[0]" in source            # call() reads the symbol from the input
    assert "triton_red_" in source                   # rnumel is symbolic: a looped reduction, right for any size
    assert "xnumel, rnumel" in source and "symbolic=True" in source


def test_a_graph_the_symbolic_compile_refuses_falls_back_per_shape():
    def f(x):
        return x * 0.5 ** x.shape[0]  # a float power of a size: no kernel prints FloatPow ([Note: float sizes])
    compiled = minidynamo.minicompile(f, backend="inductor", dynamic=True)
    for b in (2, 3, 2):
        x = torch.randn(b, 8)
        assert_same(compiled(x), f(x))
    assert metrics.symbolic_compiles == 0 and metrics.specialisations == 2
    assert len(metrics.symbolic_fallbacks) == 1 and "FloatPow" in metrics.symbolic_fallbacks[0]


def test_a_view_whose_divisibility_minidynamo_guards_compiles_symbolically():
    """``x.view(-1, 4)`` with both dims symbolic: minidynamo's trace guards ``s0*s1 % 4 == 0``; tracing to ATen
    then also guarded ``tensor_meta``'s contiguity questions, and the symbolic compile refused the graph ([Note:
    tensor_meta records no guards]).  Now one compile serves the sizes the guards admit; eager's error too."""
    def f(x):
        return x.view(-1, 4).sum(1)
    compiled = minidynamo.minicompile(f, backend="inductor", dynamic=True)
    for b, c in ((2, 8), (3, 8), (7, 4), (3, 6)):
        x = torch.randn(b, c)
        assert outcome(compiled, [x])[0] == outcome(f, [x])[0]  # (3, 6): RuntimeError, as eager
        if b * c % 4 == 0:
            assert_same(compiled(x), f(x))
    assert metrics.specialisations == 0 and not metrics.symbolic_fallbacks


def test_an_int_operand_becomes_a_tensor_input_so_one_compile_serves_every_value():
    def f(indices, k):  # the tutorial MoE's `flat_indices == expert_idx`, with k an automatic dynamic int
        return (indices == k).sum(), indices * k + 1
    compiled = minidynamo.minicompile(f, backend="inductor")
    indices = torch.randint(0, 6, (64,))
    for k in range(6):
        assert_same(compiled(indices, k), f(indices, k))
    assert minidynamo.counters["frames"]["ok"] == 2  # k == 0, then k is a symbol
    assert metrics.specialisations == 0 and metrics.symbolic_fallbacks == []  # not one compile per value
    before = metrics.generated_kernel_count
    assert_same(compiled(indices.flip(0), 9), f(indices.flip(0), 9))
    assert metrics.generated_kernel_count == before


def test_a_slice_whose_end_a_guard_bounds_compiles_symbolically():
    def f(x):  # the tutorial MoE's capacity truncation: `if len(s) > cap: s = s[:cap]`
        if len(x) > 4:
            x = x[:4]
        return x * 2
    compiled = minidynamo.minicompile(f, backend="inductor")
    for b in (6, 7, 9, 7):
        x = torch.randn(b, 3)
        assert_same(compiled(x), f(x))
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks


def test_a_slice_bound_no_guard_compares_with_the_size_is_a_min():
    """``x.narrow(0, 0, 8)`` of ``s77`` rows where no guard says which is smaller (the index tensor specialised
    the narrow's length to 8, not the rows): the size is ``Min(8, s77)``, as the fake tensor's; it was a counted
    ATen fallback (lowering fuzz --dynamic, seed 71201)."""
    def f(x):
        y = x.narrow(0, 0, max(1, x.shape[0] // 2)) + 1
        return y.index_select(0, torch.tensor([y.shape[0] - 1, 0, 0]) % y.shape[0])
    compiled = minidynamo.minicompile(f, dynamic=True)
    for n in (8, 16, 17):
        x = torch.randn(n)
        assert_same(compiled(x), f(x))
    assert metrics.fallback_count == 0 and not metrics.symbolic_fallbacks, metrics.fallback_ops


# ------------------------------------ regressions the op corpora found: symbolic index math, the per-shape path
def test_broadcast_of_three_symbolic_shapes():
    """(a, 1, c) * (1, b, 1) + (c,): the output's dim 0 index is ``xindex // (b*c)``."""
    def fn(a, b, c):
        return a * b + c - a / (b.abs() + 1)
    run_shapes(fn, lambda a, b, c: (torch.randn(a, 1, c), torch.randn(1, b, 1), torch.randn(c)),
               [(3, 5, 11), (2, 7, 6), (4, 3, 9)])
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks


def test_square_sizes_compile_symbolically():
    """A flattened s x s matrix (stride ``s0**2``) and a causal mask of a symbolic size."""
    def fn(x):
        s = x.shape[0]
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        return x.reshape(-1)[::2] * 2, x.t().reshape(-1) + 1, x.masked_fill(~mask, 0.0).softmax(-1)
    run_shapes(fn, lambda n: (torch.randn(n, n),), [(5,), (7,), (3,)], dynamic=True)
    assert metrics.symbolic_compiles == 1 and not metrics.symbolic_fallbacks


def test_conv_output_stride_with_max_compiles_symbolically():
    """conv1d's output length ``L - k + 3`` gets the stride ``Max(1, L - k + 3)`` when the weight is dynamic too."""
    run_shapes(lambda x, w: F.conv1d(x, w, padding=1).relu(),
               lambda n: (torch.randn(2, 5, n), torch.randn(4, 5, 3)), [(5,), (7,)], dynamic=True)
    assert not metrics.symbolic_fallbacks


def test_arange_with_a_symbolic_end_keeps_its_start():
    """``torch.arange(-1, x.shape[0] + 2)`` compiled with ``dynamic=True`` gave ``[0, 1, ...]``: the lowering
    counted the numeric arguments, and with a symbolic end only the start was one, read as ``arange(end)``.
    A reflection pad (whose decomposition indexes with such an arange) was off by one row (programs
    ``pad_reflect_2d``, ``pad_replicate_3d`` under ``dynamic=True``)."""
    import torch.nn.functional as F
    def fn(x):
        n = x.shape[0]
        return torch.arange(-1, n + 2), torch.arange(2, n, 2), F.pad(x[None], (2, 1, 1, 2), mode="reflect")
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for rows in (4, 6):
        x = torch.randn(rows, 5)
        for out, want in zip(compiled(x), fn(x)):
            assert torch.equal(out, want)


def test_zero_dim_index_tensor_on_the_per_shape_path():
    """``x[i]`` with a 0-d index tensor reads ``i``'s value: specialising the graph per shape raised at call time;
    now the graph runs eagerly (counted), like a static graph with a data-dependent shape."""
    def fn(x, i):
        return x[i] * 2, x[:, i], x.narrow(0, 1, 2) * i
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_shapes(fn, lambda a, b: (torch.randn(a, b), torch.tensor(2)), [(7, 13), (5, 11), (9, 3)])
    assert "whole graph (data-dependent shape)" in metrics.fallback_ops


# ---------------------------------------------------------------------------------------------------------------
# A symbolic int index ([Note: a symbolic int index])
# ---------------------------------------------------------------------------------------------------------------
def _last_rows(x, w):
    n = x.shape[0]
    return x[n - 1] @ w, x[n // 2], F.cross_entropy(x @ w, torch.arange(n) % 4)


@pytest.mark.parametrize("dynamic, frames", [(True, 1), (None, 2)])
def test_symbolic_int_index_does_not_specialise_the_size(dynamic, frames):
    """``x[x.shape[0] - 1]``: ``Tensor.__getitem__`` turned the SymInt index into an int, guarding
    ``s0 - 1 == 2`` -- a recompile for every batch size, even with ``dynamic=True``.  (Training round 9.)"""
    compiled = minidynamo.minicompile(_last_rows, dynamic=dynamic)
    for n in (3, 5, 6, 4):
        (x, w), (x_ref, w_ref) = leaves(torch.randn(n, 4), torch.randn(4, 4))
        out, out_ref = compiled(x, w), _last_rows(x_ref, w_ref)
        assert_same(out, out_ref, atol=1e-5, rtol=1e-5)
        sum(o.sum() for o in out).backward()
        sum(o.sum() for o in out_ref).backward()
        assert_same((x.grad, w.grad), (x_ref.grad, w_ref.grad), atol=1e-5, rtol=1e-4)
    assert frames_ok() == frames


def _row_at(x):
    return x[x.shape[0]]


def test_symbolic_int_index_out_of_range_raises_as_eager():
    """``x[x.shape[0]]`` with a symbolic size raises ``IndexError`` as in eager, also on a view into a longer base
    (a view past the end would read the base's next row).  (Training round 9.)"""
    compiled = minidynamo.minicompile(_row_at, dynamic=True)
    expected = outcome(_row_at, [torch.randn(3, 2)])
    assert expected[0] is IndexError
    assert outcome(compiled, [torch.randn(3, 2)])[0] is IndexError
    # a view into a longer base: a view past its end would read the base's next row instead of raising
    assert outcome(compiled, [torch.randn(10, 2)[:4]])[0] is IndexError


def test_two_int_operands_of_a_symbolic_graph_stay_two_inputs():
    """Int inputs used only as operands become 0-d tensor inputs (specialize.ints_as_tensors), each with a fake
    value the symbolic compile tells inputs apart by. One fake was shared by all of them, so ``t * s + u`` read
    ``u`` twice: a wrong answer from the second call on (translator fuzz round 8, a break inside a function
    called through ``*args``/``**kwargs``). Values against eager, one graph serving every size and value."""
    import minidynamo
    from mininductor import metrics

    def f(t, s, u):
        return t * s + u + 1

    compiled = minidynamo.minicompile(f)
    metrics.reset()
    for n, s, u in ((2, 2, 1), (3, 3, 2), (5, 2, 1), (6, 3, 2), (7, 5, -4)):
        t = torch.randn(n, 3)
        torch.testing.assert_close(compiled(t, s, u), f(t, s, u))
    assert minidynamo.counters["stats"]["unique_graphs"] == 2 and metrics.specialisations == 0


# ---------------------------------------------------------------------------------------------------------------
# Division by a size, scans over a symbolic dim, chunk/split of a symbolic dim: one compile for every size
# ---------------------------------------------------------------------------------------------------------------
def _serve(fn, shapes, make=torch.randn, dynamic=None, exact=False, atol=1e-5, rtol=1e-5):
    """``minicompile(fn)`` at each shape in turn, compared with eager; returns the kernel count after each call."""
    compiled = minidynamo.minicompile(fn, dynamic=dynamic)
    kernels = []
    for shape in shapes:
        x = make(*shape)
        out, expected = compiled(x), fn(x)
        assert_same(out, expected, atol=atol, rtol=rtol)
        if exact:
            assert all(torch.equal(a, b) for a, b in zip(leaves_of(out), leaves_of(expected)))
        kernels.append(metrics.generated_kernel_count)
    return kernels


def leaves_of(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


# rows 2 (static), then 3.. (both dims symbolic: automatic dynamic), then 1 (sizes 0 and 1 stay static)
_SIZES = [(2, 5), (3, 6), (5, 4), (7, 9), (13, 2), (64, 31), (257, 3), (1, 7)]


@pytest.mark.parametrize("fn, exact", [
    (lambda x: x.sum(0) / x.shape[0], False),                  # a mean by hand
    (lambda x: x / x.size(1), True),
    (lambda x: x * (1.0 / x.shape[0]), True),                  # a SymFloat: FloatTrueDiv(1.0, ToFloat(s0))
    (lambda x: x * (x.shape[0] / x.shape[1]) + x.shape[1] / 3, True),  # IntTrueDiv(s0, s1)
    (lambda x: x.double() * (0.1 * x.shape[0] + 1 / (3 * x.shape[1] - 1)), True),
    (lambda x: (x * 8).long() * (1 / x.shape[0]), True),      # an int tensor times a float size: float32
    (lambda x: x.bfloat16() + x.shape[0] / 7, True),           # add rounds the number to bf16, as eager
    (lambda x: x.half() * (1.0 / x.shape[0]) - x.shape[1] * 1001, True),  # mul reads it in fp32, sub rounds
    (lambda x: x.clamp(max=x.shape[0] / 4) + x.clamp(min=x.shape[1]), True),  # a size made a block (NaN test)
], ids=["sum_by_rows", "by_cols", "reciprocal", "ratio", "float_arith", "int_tensor", "bf16", "fp16", "clamp"])
def test_division_by_a_symbolic_size_compiles_once(fn, exact):
    """``1.0 / x.shape[0]`` is a ``SymFloat``: ``operator.truediv`` had no lowering, so the graph compiled once per
    shape.  Now the kernel computes the ShapeEnv's expression in float64 and casts it, as eager rounds its
    Python float: bit-equal results where no reduction is involved ([Note: float sizes])."""
    kernels = _serve(fn, _SIZES, exact=exact)
    assert frames_ok() == 3 and minidynamo.counters["recompiles"]["total"] == 2  # static 2, symbolic, static 1
    assert metrics.symbolic_compiles == 2 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert kernels[1] == kernels[-2]  # no kernel generated after the symbolic compile, rows 3 to 257
    assert metrics.fallback_count == 0


def test_a_float_size_is_computed_in_float64_in_the_kernel(tmp_path, monkeypatch):
    from mininductor import config
    monkeypatch.setattr(config, "debug_dir", str(tmp_path))
    compiled = minidynamo.minicompile(lambda x: x * (1.0 / x.shape[0]), dynamic=True)
    compiled(torch.randn(3, 4))
    source = (tmp_path / "output_code.py").read_text()
    symbol = re.search(r"(s\d+) = arg0_1.shape\[0\]", source).group(1)  # read from the input at each call
    assert f"tl.full([1], (1.0 / (({symbol}).to(tl.float64))), tl.float32)" in source  # double, then rounded
    assert re.search(rf"def triton_poi_\w+\(in_ptr0, out_ptr0, {symbol}, xnumel", source)  # a kernel argument


@pytest.mark.parametrize("fn, fallbacks", [
    (lambda x: torch.cumsum(x, 0), 0),                          # a looped scan over the symbolic rows
    (lambda x: x.cumsum(1) * 2 + torch.cumsum(x.t(), 1).t(), 0),
    (lambda x: torch.cumsum((x * 4).long(), 0), 0),             # exact: integers
    (lambda x: torch.cumprod(x.sigmoid() * 0.1 + 0.95, 0), 0),  # a looped scan too, its carry a product
    (lambda x: torch.logcumsumexp(x, 0), 3),                    # no lowering: an ATen fallback in a symbolic graph
    (lambda x: tuple(torch.cummax(x, 0)), 3),
    (lambda x: torch.cummin(x, 1)[1] + x.shape[0], 3),
], ids=["cumsum", "cumsum_dim1", "cumsum_int", "cumprod", "logcumsumexp", "cummax", "cummin"])
def test_scan_over_a_symbolic_dim_compiles_once(fn, fallbacks):
    """``cumsum`` over a symbolic dim was refused (the lowering asked ``s0 <= 1``, then the scan kernel refused a
    symbolic rnumel): one compile per shape.  The looped scan carries its running sum from chunk to chunk, so it
    is right for every length (257 rows span several chunks); ``cumprod`` carries its running product.
    ``logcumsumexp``/``cummax`` have no lowering; their ATen fallback kernel now takes part in the symbolic graph ([Note: fallbacks with symbolic
    sizes]) instead of sending the whole graph to per-shape compiles: counted once per graph (3 graphs)."""
    _serve(fn, _SIZES, atol=1e-4, rtol=1e-4)
    assert frames_ok() == 3
    assert metrics.symbolic_compiles == 2 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert metrics.fallback_count == fallbacks


def test_symbolic_scan_kernel_indexes_with_the_size_symbol(tmp_path, monkeypatch):
    from mininductor import config
    monkeypatch.setattr(config, "debug_dir", str(tmp_path))
    minidynamo.minicompile(lambda x: torch.cumsum(x, 0), dynamic=True)(torch.randn(5, 3))
    source = (tmp_path / "output_code.py").read_text()
    assert "triton_red_fused_cumsum" in source and "_carry0" in source  # looped, with the running carry
    assert "rindex*s27" in source  # row r of column x lives at r*s27 + x


@pytest.mark.parametrize("dynamic", [False, True])
def test_pieces_of_a_permuted_intermediate_read_its_traced_layout(dynamic):
    """``(x.t() * 2).chunk(2)``: the pieces are ``as_strided`` views with eager's strides of ``x.t() * 2``
    (column-major, like ``x.t()``), but the intermediate was realised row-major: wrong values, static shapes too
    ([Note: as_strided reads eager's layout])."""
    def fn(x):
        return [c + 1 for c in (x.t() * 2).chunk(2, 0)] + [c * 3 for c in (x.t() * 2)[1:, ::2].chunk(2, 1)]
    _serve(fn, [(6, 5), (7, 5), (9, 5)], dynamic=dynamic, exact=True)
    assert metrics.specialisations == 0 and not metrics.symbolic_fallbacks and metrics.fallback_count == 0


def test_chunk_and_split_of_a_symbolic_dim_guard_only_the_number_of_pieces():
    """``x.chunk(3)`` / ``torch.split(x, 4, 1)``: the number of outputs depends on the size, so minidynamo guards
    it (as upstream: ``(s0 + ceil(s0/3) - 1) // ceil(s0/3) == 3``), and the pieces are views with symbolic sizes and
    offsets.  They compiled once per shape: ``sym_stride`` had no lowering, ``make_fx``'s ``tensor_meta`` guarded
    the last piece's size ([Note: tensor_meta records no guards]) and a symbolic view offset was printed as
    ``FloorDiv(...)``.  A last piece of one row is another cache entry (minidynamo's fake ``* 2`` asks whether a
    dim is 1), never one per size."""
    def fn(x):
        return [c * 2 for c in x.chunk(3, 0)] + [p.sum(1) for p in torch.split(x, 4, 1)]

    # rows 6..64: 3 chunks, the last of 2+ rows; cols 9..12: 3 pieces of 4, the last of 1..4 columns
    shapes = [(6, 9), (8, 10), (9, 11), (11, 12), (64, 12), (13, 9)]
    shapes += [(7, 9), (5, 11)]  # 3 chunks, the last of 1 row: a second entry
    shapes += [(4, 10)]  # 2 chunks: a third
    kernels = _serve(fn, shapes, dynamic=True, exact=True)
    assert frames_ok() == 3 and len(set(kernels[:6])) == 1
    assert metrics.symbolic_compiles >= 1 and metrics.specialisations == 0, metrics.symbolic_fallbacks
    assert metrics.fallback_count == 0


@pytest.mark.parametrize("dynamic", [False, True])
def test_views_of_pieces_stay_views_of_the_input(dynamic):
    """An output that is a view of a piece is, in eager, a view of the input: a caller's in-place op on it writes
    the input.  With a symbolic offset (``x[s0 // 2:]``, the second chunk) the output was a copy -- the caller's
    ``add_`` missed the input, a wrong answer; and a permuted ``as_strided`` view (``x.chunk(3)[1].t()``) failed
    to compile at all (the graph ran eagerly, static shapes too)."""
    fns = [lambda x: x.chunk(3)[1].t(), lambda x: torch.split(x, 2, 1)[1][1:], lambda x: x[x.shape[0] // 2:].t()]
    for fn in fns:
        compiled = minidynamo.minicompile(fn, dynamic=dynamic)
        for n in (6, 7, 9):
            x = torch.randn(n, 5)
            x_ref = x.clone()
            out = compiled(x)
            out.add_(1)
            fn(x_ref).add_(1)
            assert torch.equal(x, x_ref) and out._base is not None
    assert metrics.fallback_count == 0 and metrics.specialisations == 0, metrics.fallback_ops


def test_same_graph_under_other_guards_is_another_compile():
    """``x[::2].chunk(2)[0]`` records the same FX graph at 2 rows (one 1-row piece: the whole of ``x[::2]``) and at
    33 rows (two pieces); only the guards and the traced sizes differ.  FxGraphCache keyed by the graph alone
    reused the first compile for the second entry: 17 rows where eager returns 9 ([Note: a symbolic graph's key
    holds its guards])."""
    def fn(x):
        return x[::2].chunk(2, 0)[0]

    run_shapes(fn, lambda n: [torch.randn(n, 4)], [(2,), (33,), (7,), (5,), (11,)], dynamic=True)
    assert frames_ok() == 2 and metrics.symbolic_compiles == 2 and metrics.fx_graph_cache_hits == 0
    assert metrics.specialisations == 0, metrics.symbolic_fallbacks


def test_a_fallback_view_keeps_its_input_alive():
    """The pieces of ``chunk`` with symbolic sizes are ``as_strided`` fallbacks of one buffer; the kernel of
    ``cat`` reads them and writes a buffer of that buffer's layout.  The planner handed the buffer's memory to
    that output (nothing named read it after the fallbacks), so the kernel overwrote what it still had to read:
    wrong values at 16 x 4 after 3 x 5 ([Note: a fallback's view keeps its input's memory])."""
    def fn(x):
        t = torch.cat(x.reshape(x.shape[1], x.shape[0]).chunk(2, 0)[::-1], 0)
        return t.view(-1)[: t.shape[0]].unsqueeze(1) * t

    run_shapes(fn, lambda n, m: [torch.randn(n, m)], [(5, 3), (4, 16), (7, 6)], dynamic=True)
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0


def test_an_output_that_views_an_input_is_a_view_at_every_size():
    """``x.reshape(x.shape[1], x.shape[0])`` of a contiguous ``x`` is a view in eager: the caller's ``add_`` on it
    writes ``x``.  The symbolic compile returned a copy (only static outputs were re-made as views of their
    input: [Note: outputs that alias inputs]), so the write missed ``x``."""
    def fn(x):
        return x.reshape(x.shape[1], x.shape[0]), x.t()[1:]

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n, m in ((4, 16), (5, 3), (7, 6)):
        x = torch.randn(n, m)
        x_ref = x.clone()
        outs, refs = compiled(x), fn(x_ref)
        for out, ref in zip(outs, refs):
            assert out.stride() == ref.stride() and out._base is x
            out.add_(1)
            ref.add_(1)
        assert torch.equal(x, x_ref)
    assert metrics.symbolic_compiles == 1 and metrics.specialisations == 0


def _writes_through_like_eager(compiled, fn, args):
    """``compiled(*args)`` equals eager, its outputs share storage where eager's do, and an in-place op on the last
    output changes the others exactly as it changes eager's."""
    ours, theirs = compiled(*args), fn(*args)
    assert_same(ours, theirs)
    shares_first = lambda outs: [o.untyped_storage().data_ptr() == outs[0].untyped_storage().data_ptr() for o in outs]
    assert shares_first(ours) == shares_first(theirs)
    ours[-1].add_(1)
    theirs[-1].add_(1)
    assert_same(ours, theirs)


_VIEWS_OF_AN_OUTPUT = {
    "reshape": lambda o: (o, o.reshape(o.shape[1], o.shape[0])),
    "view": lambda o: (o, o.view(-1)),
    "flatten": lambda o: (o, o.flatten()),
    "rows from 1, flat": lambda o: (o, o[1:].reshape(-1)),  # (s77 - 1)*s27 pairs with s27*s77 - s27
    "two views": lambda o: (o, o.t(), o.view(-1)),
    "views of an intermediate": lambda o: (o.t(), o.flatten()),
}


@pytest.mark.parametrize("view", list(_VIEWS_OF_AN_OUTPUT), ids=list(_VIEWS_OF_AN_OUTPUT))
def test_an_output_that_views_another_output_is_a_view_at_every_size(view):
    """``o = x.sin(); return o, o.reshape(m, n)``: eager's outputs share a storage, so the caller's ``b.add_(1)``
    changes ``a``.  The symbolic compile returned a copy (a wrong answer; static shapes were right): a reshape
    reads ``s27*FloorDiv(i, s27) + ModularIndexing(i, 1, s27)``, which ``simplify_index`` folded back to ``i`` only
    for an integer coefficient, so no strided window was found ([Note: outputs that alias outputs])."""
    def fn(x):
        return _VIEWS_OF_AN_OUTPUT[view](x.sin())

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n, m in ((4, 16), (5, 3), (7, 6)):
        _writes_through_like_eager(compiled, fn, [torch.randn(n, m)])
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.fallback_count == 0, metrics.fallback_ops


def test_an_output_that_views_another_output_with_int_sizes():
    """The sizes as int arguments, read by ``call`` from its inputs ([Note: int inputs of a symbolic graph]): one
    symbolic compile, whose second output is a view of its first."""
    def fn(x, m, n):
        o = x.sin()
        return o, o.reshape(m, n)

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n, m in ((4, 16), (5, 3), (7, 6), (5, 3)):
        _writes_through_like_eager(compiled, fn, [torch.randn(n, m), m, n])
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0


def test_an_output_lowered_as_a_copy_is_remade_as_a_view(monkeypatch):
    """``o.view(n, 2, -1)`` needs ``s27`` even.  Were that not shown (it is since the guard ``Eq(Mod(s27, 2), 0)``
    is read: [Note: divisions the guards make exact]; stubbed out here), the view falls back to ATen's ``view``,
    whose result is a buffer of its own in our graph.  The output is re-made as a window on ``o``'s buffer with the
    traced size, strides and offset ([Note: outputs that alias outputs])."""
    from mininductor import indexing, view_lowering
    monkeypatch.setattr(view_lowering, "divides", lambda d, n: False)
    monkeypatch.setattr(indexing, "divides", lambda d, n: False)  # what exact_quotients asks

    def fn(x):
        o = x.sin()
        return o, o.view(x.shape[0], 2, -1), o.t()

    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n, m in ((4, 16), (5, 4), (7, 6)):
        _writes_through_like_eager(compiled, fn, [torch.randn(n, m)])
    assert frames_ok() == 1 and metrics.symbolic_compiles == 1 and metrics.specialisations == 0
    assert metrics.fallback_count == 1, metrics.fallback_ops  # the view itself


def test_outputs_that_alias_stay_views_when_no_window_is_found(monkeypatch):
    """Should the lowering find no strided window for a view output (``ir.as_strided_layout`` None: a copy),
    the outputs still share ``o``'s buffer, static and symbolic."""
    from mininductor import ir
    monkeypatch.setattr(ir, "as_strided_layout", lambda node: None)

    def fn(x):
        o = x.sin()
        return o, o.t(), o[1:].reshape(-1)

    for dynamic in (False, True):
        minidynamo.reset()
        compiled = minidynamo.minicompile(fn, dynamic=dynamic)
        for n, m in ((4, 16), (5, 3)):
            _writes_through_like_eager(compiled, fn, [torch.randn(n, m)])
