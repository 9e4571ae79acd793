"""[Note: outputs keep eager's strides]: a computed pointwise output gets the strides eager gives it (a transposed
or channels-last input gives a transposed or channels-last result), values and strides compared with eager."""
import pytest
import torch

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
