"""[Note: outputs keep eager's strides]: a computed pointwise output gets the strides eager gives it (a transposed
or channels-last input gives a transposed or channels-last result), values and strides compared with eager. Also
outputs that are views of an intermediate (or of a flip), outputs an extern kernel reads, outputs of decomposed ops
(``repeat``, ``one_hot``, ``copysign``, CPU attention) and of symbolic compiles."""
import pytest
import torch
import torch.nn.functional as F

import minidynamo
from mininductor import metrics

from .utils import DEVICE, check


def _strides_match(compiled, fn, args):
    args = [a.to(DEVICE) for a in args]
    ours, theirs = compiled(*[a.clone() for a in args]), fn(*args)
    ours, theirs = (ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,))
    for o, t in zip(ours, theirs):  # a size-1 dim's stride is never used: eager and we may differ there
        assert [s for s, n in zip(o.stride(), o.shape) if n != 1] == [s for s, n in zip(t.stride(), t.shape) if n != 1]


CASES = [
    ("transpose", lambda x: x.t() * 2, [(33, 20)]),
    ("permute", lambda x: torch.sin(x.permute(2, 0, 1)) + 1, [(5, 6, 7)]),
    ("two transposes", lambda x, y: x.t() + y.t(), [(33, 20), (33, 20)]),
    ("first input decides", lambda x, y: x + y.t(), [(20, 20), (20, 20)]),  # row-major, as eager
    ("channels last", lambda x, w: (x.contiguous(memory_format=torch.channels_last) + 1) * w, [(2, 3, 4, 5), (5,)]),
    ("strided view", lambda x: x[:, ::2].t() * 3, [(8, 10)]),
]


@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_pointwise_outputs_keep_eager_strides(name, fn, shapes):
    args = [torch.randn(*s) for s in shapes]
    compiled = check(fn, *args, kernels=1, atol=1e-6, rtol=1e-5)
    _strides_match(compiled, fn, args)


def test_a_permuted_output_is_walked_in_memory_order():
    """Its loop runs in the order of its strides: input and output are both read and written contiguously."""
    compiled = check(lambda x: torch.sin(x.permute(2, 0, 1)) + 1, torch.randn(5, 6, 7), kernels=1, atol=1e-6)
    assert "tl.load(in_ptr0 + (xindex)" in compiled.source and "tl.store(out_ptr0 + (xindex)" in compiled.source


def test_same_memory_order_outputs_fuse():
    """``y.t() + 1`` has y's memory order, so it reads y where y was written: one kernel for both outputs."""
    def fn(x):
        y = (x * 2).exp() + x.sin() * x.cos() + x.tanh() + x.sigmoid()
        return y * 3, y.t() + 1
    compiled = check(fn, torch.randn(31, 31), kernels=1, atol=1e-5, rtol=1e-5)
    _strides_match(compiled, fn, [torch.randn(31, 31)])


def test_reduction_outputs_are_row_major():
    """Only pointwise outputs are re-laid out; a reduction's output is row-major, as eager's."""
    fn = lambda x: (x.t() * 2).sum(0, keepdim=True)
    compiled = check(fn, torch.randn(12, 9), kernels=1, atol=1e-5)
    _strides_match(compiled, fn, [torch.randn(12, 9)])


def test_translated_function_output_strides_and_gradients():
    """Through minidynamo and AOT autograd: eager's strides on the output, eager's values and gradients."""
    def f(x):
        return (x.t() * 2).sin()
    x = torch.randn(7, 5, device=DEVICE, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    metrics.reset()
    minidynamo.reset()
    out, ref = minidynamo.minicompile(f)(x), f(x2)
    assert out.stride() == ref.stride() == (1, 5)
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    assert minidynamo.counters["stats"]["unique_graphs"] == 1 and metrics.generated_kernel_count >= 1
    dyn = minidynamo.minicompile(lambda x: x.t() + 1, dynamic=True)
    for n in (6, 9):
        y = torch.randn(n, 4, device=DEVICE)
        torch.testing.assert_close(dyn(y), y.t() + 1)


@pytest.mark.parametrize("name,fn,shapes,kind", [
    ("channels last times a per-channel scale", lambda x, w: (x + 1) * w, [(2, 32, 16, 16), (16,)], "poi"),
    ("permuted output", lambda x: torch.sin(x.permute(2, 0, 1)), [(32, 32, 16)], "poi"),
    ("transpose into a row-major output", lambda x, y: x + y.t(), [(64, 64), (64, 64)], "tile"),
])
def test_tiles_only_for_transposes_in_loop_order(name, fn, shapes, kind, monkeypatch):
    """A 2-D tile only when a large access is transposed relative to the node's own (memory-order) loop;
    a small broadcast operand (the per-channel scale) does not count."""
    import mininductor
    monkeypatch.setattr(mininductor.config, "tile_in_interpreter", True)
    args = [torch.randn(*s) for s in shapes]
    if len(shapes[0]) == 4:
        args[0] = args[0].contiguous(memory_format=torch.channels_last)
    compiled = check(fn, *args, kernels=1, atol=1e-6, rtol=1e-5)
    assert f"'{kind}'" in compiled.source
    _strides_match(compiled, fn, args)


def test_a_column_major_tile_walks_blocks_of_rows_first(monkeypatch):
    """``x.t() + y`` is column-major in eager, so its tile's stores run down the rows: grid axis 0 takes blocks of
    rows (``x_first``), so programs launched together write neighbouring memory; ``x + y.t()`` keeps columns first."""
    import mininductor
    from mininductor.runtime import KernelLauncher
    monkeypatch.setattr(mininductor.config, "tile_in_interpreter", True)
    a, b = torch.randn(48, 64), torch.randn(64, 48)
    column_major = check(lambda x, y: x.t() + y, a, b, kernels=1)
    _strides_match(column_major, lambda x, y: x.t() + y, [a, b])
    assert "x_first=True" in column_major.source and "xoffset = tl.program_id(0)" in column_major.source
    row_major = check(lambda x, y: x + y.t(), b, a, kernels=1)
    assert "x_first" not in row_major.source and "xoffset = tl.program_id(1)" in row_major.source
    launcher = KernelLauncher(None, "tile", 256, 64, "cuda", x_first=True)
    assert launcher._grid({"XBLOCK": 32, "RBLOCK": 16}) == (8, 4)
    assert KernelLauncher(None, "tile", 256, 64, "cuda")._grid({"XBLOCK": 32, "RBLOCK": 16}) == (4, 8)


# ---------------------------------------- regressions the op corpora found: views, externs, decompositions
def _strides(t):  # a size-1 dim's stride is never used: eager and we may differ there
    return [s for s, n in zip(t.stride(), t.shape) if n != 1]


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_view_of_an_intermediate_keeps_eager_strides():
    """``y.transpose(0, 2)`` or ``y.diagonal()`` returned with ``y = x * 2`` unrealised: eager returns a view of
    ``y``, we returned a contiguous copy (program ``v_views_of_intermediate``). Now ``y`` is computed and viewed,
    as AOTAutograd regenerates an output that aliases an intermediate; a copy that eager makes (flip) stays one."""
    x = torch.randn(2, 4, 6, device=DEVICE)  # the device check() compiles for

    def fn(x):
        y = x * 2
        return y.transpose(0, 2), y[1:], y.diagonal(0, 1, 2), (x + 1)[:, ::2].mT, (x - 1).flip(0)
    compiled = check(fn, x, kernels=1, fallbacks=0)
    for ours, theirs in zip(compiled(x), fn(x)):
        assert ours.stride() == theirs.stride() and ours.storage_offset() == theirs.storage_offset()


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_view_of_a_flip_keeps_eager_strides():
    """``x.flip(-1)[..., ::2]`` is a view of flip's new tensor in eager, strides (8, 2); we lower ``flip`` to a
    re-indexing view of ``x``, so the output was a contiguous copy, (4, 1) (random program ``rnd112``; ``rnd134``
    the same through ``cumsum().flip().expand()``). The flipped base is computed into a buffer of its own."""
    x, y = torch.randn(13, 8), torch.randn(7, 2)
    for fn, arg in ((lambda x: x.flip(-1)[..., ::2], x), (lambda y: y.cumsum(-1).flip(-1).unsqueeze(0).expand(2, 7, 2), y)):
        compiled = check(fn, arg, fallbacks=0)
        assert compiled(arg.to(DEVICE)).stride() == fn(arg.to(DEVICE)).stride()


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_output_realised_early_keeps_eager_strides():
    """An output that an extern kernel reads (``y @ w``) was realised row-major by the matmul before the output
    could ask for eager's strides; a view of a mutated transposed input (``x.t().add_(1)`` returns
    ``add.t().t()``) kept its base row-major (programs ``mm_of_t_output``, ``inplace_t_add``)."""
    def read_by_mm(a, w):
        y = a.t() * 2
        return y, y @ w

    def fns():
        yield read_by_mm, (torch.randn(5, 4), torch.randn(5, 6))
        yield lambda x: x.t().add_(1), (torch.randn(4, 5),)
        yield lambda x: x.permute(2, 0, 1).mul_(2), (torch.randn(3, 4, 5),)
        yield lambda x, y: x.permute(1, 0).copy_(y), (torch.randn(4, 5), torch.randn(5, 4))
    for fn, args in fns():
        args = [a.to(DEVICE) for a in args]
        compiled = check(fn, *args, fallbacks=0)
        ours, theirs = compiled(*[a.clone() for a in args]), fn(*[a.clone() for a in args])
        ours, theirs = (ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,))
        assert [_strides(o) for o in ours] == [_strides(t) for t in theirs]


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_outputs_of_decomposed_ops_keep_eager_strides():
    """A decomposition need not keep eager's strides: ``x.repeat`` is a permuted view of an expanded clone, so the
    traced ``repeat(x) + x`` had strides (6, 24, 1) where eager's result is row-major (``repeat_expand``). The
    strides recorded before decomposing (a fake run of the graph) win."""
    x = torch.randn(4, 6, device=DEVICE)
    cases = [(lambda x: x[:, None].repeat(1, 3, 1) + x[:, None], x),
             (lambda x: x.t().repeat(2, 1) * 2, x)]
    for fn, arg in cases:
        compiled = check(fn, arg, fallbacks=0, atol=1e-5, rtol=1e-4)
        assert _strides(compiled(arg.clone())) == _strides(fn(arg))
        minidynamo.reset()
        train = arg.clone().requires_grad_(True)
        assert _strides(minidynamo.minicompile(fn)(train)) == _strides(fn(arg))


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_a_symbolic_compile_reads_eagers_strides_from_the_translation(monkeypatch):
    """A translated graph's output nodes carry the translator's fake values, whose strides are eager's: the
    symbolic compile records those instead of running the graph once more on fake tensors (a fifth of AOT's
    time for the tutorial MoE's first call on the CPU).  A graph without them (built by other means) still gets
    the fake run.  Outputs, strides and counts as eager's."""
    import importlib
    compile_fx = importlib.import_module("mininductor.compile_fx")
    runs = []
    fake_run = compile_fx._fake_run_output_strides
    monkeypatch.setattr(compile_fx, "_fake_run_output_strides", lambda *a: runs.append(1) or fake_run(*a))
    fn = lambda x, y: (x.permute(2, 0, 1) * 2, x.sum(-1), y.t().sin())
    compiled = minidynamo.minicompile(fn, dynamic=True)
    for n in (5, 6):
        x, y = torch.randn(n, 4, 3).to(DEVICE), torch.randn(n, 7).to(DEVICE)
        for ours, theirs in zip(compiled(x, y), fn(x, y)):
            torch.testing.assert_close(ours, theirs)
            assert _strides(ours) == _strides(theirs), (ours.stride(), theirs.stride())
    assert runs == [] and minidynamo.counters["stats"]["unique_graphs"] == 1
    gm = torch.fx.symbolic_trace(lambda x: x.t() * 2)  # no example values
    assert compile_fx._translated_output_strides(gm) is None


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_dynamic_outputs_keep_eager_strides():
    """A symbolic compile kept row-major outputs (``x.t().sin()`` with ``dynamic=True``); now its strides are
    the traced ``SymInt`` strides, checked dense structurally (``Max(1, (s27 + 1)//2)`` of a sliced dim too)."""
    cases = [(lambda x: x.t().sin() + 1, lambda n: torch.randn(n, 4)),
             (lambda x: x.permute(2, 0, 1) * 2, lambda n: torch.randn(n, 4, 3)),
             (lambda x: x * 2 + 1, lambda n: torch.randn(n, 3, 4, 5).contiguous(memory_format=torch.channels_last)),
             (lambda x: x[:, ::2].t() * 3, lambda n: torch.randn(n, 8))]
    for fn, make in cases:
        minidynamo.reset()
        compiled = minidynamo.minicompile(fn, dynamic=True)
        for n in (5, 6, 9):
            x = make(n).to(DEVICE)
            ours, theirs = compiled(x), fn(x)
            torch.testing.assert_close(ours, theirs)
            assert _strides(ours) == _strides(theirs), (ours.stride(), theirs.stride())
        assert minidynamo.counters["stats"]["unique_graphs"] == 1
    assert metrics.fallback_count == 0


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_cpu_attention_output_is_row_major():
    """``F.scaled_dot_product_attention`` on CPU returns a row-major (N, H, L, E) tensor; upstream's decomposition
    of ``_scaled_dot_product_flash_attention_for_cpu`` ended in a permute-copy-permute that gave strides (24, 8,
    48, 1) (programs ``sdpa_causal_scale``, ``attention_f16``)."""
    import torch.nn.functional as F
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    compiled = check(fn, q, k, v, atol=1e-5, fallbacks=None)
    args = [t.to(DEVICE) for t in (q, k, v)]
    assert compiled(*args).stride() == fn(*args).stride()


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_one_hot_of_a_permuted_input_is_row_major():
    """[Note: one_hot's layout] eager's ``F.one_hot`` is ``zeros().scatter_()`` (row-major); what we trace
    is the fake-tensor body ``eq(x.unsqueeze(-1), arange)``, which kept the permuted input's layout."""
    x = torch.randint(0, 6, (2, 3, 4))
    fn = lambda x: (F.one_hot(x.permute(2, 0, 1), 6), F.one_hot(x[:, ::2].transpose(0, 1), 6).float() * 2)
    compiled = check(fn, x, fallbacks=0)
    x = x.to(DEVICE)
    assert [o.stride() for o in compiled(x)] == [o.stride() for o in fn(x)]
    dynamo = minidynamo.minicompile(lambda x: F.one_hot(x.t(), 5) + 1)
    y = torch.randint(0, 5, (3, 4), device=DEVICE)
    assert dynamo(y).stride() == (F.one_hot(y.t(), 5) + 1).stride()


@pytest.mark.usefixtures("fresh_minicompile")  # conftest.py
def test_copysign_and_xlogy_take_the_first_operand_layout():
    """``copysign(a.t(), b_broadcast)`` has ``a``'s strides (1, 4) in eager; the fake kernels of copysign,
    xlogy and xlog1py are ``where(signbit(b) / isnan(b), ...)`` references that gave ``b``'s, (3, 1) (random
    programs ``rnd213``, ``rnd247``)."""
    for dtype in (torch.int32, torch.float32):
        a = torch.randint(-5, 5, (3, 4)).to(dtype).t()
        b = torch.randint(1, 5, (1, 3)).to(dtype).expand(4, 3)
        fn = lambda a, b: (torch.copysign(a, b), torch.xlogy(a, b).sin(), torch.special.xlog1py(a, b))
        compiled = check(fn, a, b, kernels=1, fallbacks=0)
        args = [a.to(DEVICE), b.to(DEVICE)]
        assert [o.stride() for o in compiled(*args)] == [o.stride() for o in fn(*args)]


def test_copy_strided_and_prims_scalar_tensor_are_lowered():
    """``prims.copy_strided`` (``torch.lerp``'s decomposition keeps its first input's layout) and
    ``prims.scalar_tensor`` (``torch.xlogy(2, x)``) had no lowering: each was an ATen fallback (lowering fuzzer)."""
    def fn(a, b, x):
        return torch.lerp(a.transpose(0, 1), b, 0.3), torch.xlogy(2, x)
    args = [torch.randn(3, 2, 8, dtype=torch.float64), torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(5).abs()]
    compiled = check(fn, *args, fallbacks=0, atol=1e-6, rtol=1e-6)
    _strides_match(compiled, fn, args)
