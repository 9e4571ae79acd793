"""Reinplacing (mininductor/reinplace.py): a scatter whose input's old value is never read again stores into that
input directly -- no copy kernel, no write-back -- and everywhere else it still works on a copy. Every case is
compared with eager (values and the mutated inputs), and the kernels are counted."""
import pytest
import torch

import minidynamo
from mininductor import metrics
from mininductor.compile_fx import trace_inference
from mininductor.reinplace import reinplaceable_scatters

from .utils import DEVICE, assert_same, check


def _index_add(out, idx, v):
    out.index_add_(0, idx, v * 2)
    return v + 1


def _inputs():
    torch.manual_seed(0)
    return torch.randn(6, 3), torch.tensor([4, 1, 4]), torch.randn(3, 3)


def test_index_add_into_an_input_writes_in_place():
    # trace_inference's graph ends in copy_(out, scatter_add(out, ...)): the scatter takes out's memory
    compiled = check(_index_add, *_inputs(), kernels=2)  # scatter(mul) + (v + 1); no copy of `out`, no write-back
    assert "the scatter writes in place" in compiled.source
    assert ".copy_(" not in compiled.source
    # the input is still one the graph changes: a CUDA graph replay, which runs on its own copy, copies it back
    assert compiled.mutated_inputs == frozenset({0})


def test_aot_inference_path_writes_in_place_and_skips_the_copy_back():
    # AOTAutograd's inference graph returns out's new value; the runtime sees the input itself and copies nothing
    out, idx, v = (t.to(DEVICE) for t in _inputs())
    expected_out = out.clone()
    expected = _index_add(expected_out, idx, v)
    metrics.reset()
    minidynamo.reset()
    version = out._version
    with torch.no_grad():
        result = minidynamo.minicompile(_index_add)(out, idx, v)
    assert_same(result, expected)
    assert_same(out, expected_out)
    assert metrics.generated_kernel_count == 2
    assert out._version > version  # a kernel wrote into it: its version says so, as the in-place op's would


def test_a_later_reader_of_the_old_value_keeps_the_copy():
    def fn(out, idx, v):
        before = out * 3  # the old value is read, and is still needed after the scatter
        out.index_add_(0, idx, v)
        return before + out

    gm_args = list(_inputs())
    aten_gm, _ = trace_inference(fn, gm_args)
    assert reinplaceable_scatters(aten_gm) == {}
    compiled = check(fn, *_inputs())
    assert "the scatter writes in place" in compiled.source  # into its own copy of `out`
    assert ".copy_(" in compiled.source  # and the new value is written back


def test_scatter_and_scatter_add_write_in_place():
    def fn(out, idx, src):
        out.scatter_add_(1, idx, src)
        return out.sum()

    def fn2(out, idx, src):
        out.scatter_(0, idx, src * 2)
        return src

    out, src = torch.zeros(4, 5), torch.randn(4, 5)
    idx = torch.tensor([[0, 1, 2, 3, 4]] * 4)
    compiled = check(fn, out, idx, src)
    assert ".copy_(" not in compiled.source
    compiled = check(fn2, out, torch.tensor([[3, 2, 1, 0, 3]]), src[:1])
    assert ".copy_(" not in compiled.source


def test_a_chain_of_scatters_keeps_its_copy():
    def two_scatters(out, idx, v):
        out.index_add_(0, idx, v)
        out.index_add_(0, idx, v * 2)
        return v

    aten_gm, _ = trace_inference(two_scatters, list(_inputs()))
    # the input's write-back copies the second scatter's result, not the first's: our rule (one scatter, then
    # only its own write-back) leaves the chain on copies, which is conservative but never wrong
    assert reinplaceable_scatters(aten_gm) == {}
    check(two_scatters, *_inputs())


def test_training_graphs_are_not_reinplaced():
    # with grad the mutated input's old value may be saved for the backward: the forward keeps its copy
    out, idx, v = _inputs()
    v.requires_grad_(True)
    out_e, v_e = out.clone().requires_grad_(False), v.detach().clone().requires_grad_(True)

    def fn(out, idx, v):
        out = out * 1
        out.index_add_(0, idx, v.sin())
        return (out * out).sum()

    minidynamo.reset()
    compiled = minidynamo.minicompile(fn)
    loss = compiled(out, idx, v)
    loss.backward()
    loss_e = fn(out_e, idx, v_e)
    loss_e.backward()
    assert_same(loss, loss_e)
    assert_same(v.grad, v_e.grad)


def test_the_tutorial_moe_expert_graphs_scatter_into_outputs(monkeypatch):
    # each expert frame of the tutorial MoE ends in outputs.index_add_: the scatter writes into `outputs` itself
    # (one launch fewer per expert, no write-back), and the whole forward still equals eager
    import importlib

    from minidynamo.examples.moe import make_moe, make_moe_input
    compile_fx_module = importlib.import_module("mininductor.compile_fx")
    model = make_moe("tutorial", "small", seed=0).eval()
    x = make_moe_input("small", seed=1)
    sources = []
    dump = compile_fx_module._debug_dump
    monkeypatch.setattr(compile_fx_module, "_debug_dump",
                        lambda aten_gm, graph, scheduler, source: (sources.append(source),
                                                                    dump(aten_gm, graph, scheduler, source)))
    minidynamo.reset()
    metrics.reset()
    with torch.no_grad():
        expected = model(x)[0]
        got = minidynamo.minicompile(model)(x)[0]
    assert_same(got, expected)
    scatters = [s for s in sources if "scatter_add" in s]  # index_add_ decomposes to scatter_add
    assert scatters
    for source in scatters:
        assert "= arg" in source.split("the scatter writes in place")[0].splitlines()[-1]
        assert ".copy_(" not in source


def test_an_expanded_input_keeps_its_copy_and_raises_like_eager():
    # written in place, an expanded input's rows would alias: it keeps the copy, and the write-back refuses as eager
    from mininductor.reinplace import non_overlapping

    from .utils import compile_fn
    assert non_overlapping([4, 3], [3, 1]) and non_overlapping([4, 3], [1, 4]) and non_overlapping([4, 1], [1, 7])
    assert not non_overlapping([4, 3], [0, 1]) and not non_overlapping([4, 3], [2, 1])
    idx, v = torch.tensor([1, 3]), torch.randn(2, 3)
    out = torch.zeros(1, 3).expand(5, 3)
    compiled = compile_fn(_index_add, out, idx, v)
    assert ".copy_(" in compiled.source  # the scatter went into a copy
    with pytest.raises(RuntimeError) as eager:
        _index_add(torch.zeros(1, 3).expand(5, 3), idx, v)
    with pytest.raises(RuntimeError) as ours:
        compiled(out, idx, v)
    assert str(ours.value) == str(eager.value)
