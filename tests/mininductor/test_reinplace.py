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


def test_a_training_graph_keeps_the_copy_of_an_intermediate_it_saves():
    # the scattered tensor is made inside the graph and its new value is saved for the backward: nothing in place
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


def _accumulate(out, idx, v):
    out.index_add_(0, idx, v.sin())  # the tutorial MoE's `outputs.index_add_` of a weighted expert output
    return v.cos()


def _train_both(make_out, idx, v):
    """Run ``_accumulate`` eagerly and compiled on fresh copies, backward through both; return both results."""
    results = []
    for compile_ in (False, True):
        base, out = make_out()
        leaf_v = v.detach().clone().to(DEVICE).requires_grad_(True)
        fn = minidynamo.minicompile(_accumulate) if compile_ else _accumulate
        version = out._version
        r = fn(out, idx.to(DEVICE), leaf_v)
        results.append({"out": out, "r": r, "version": version, "ptr": out.data_ptr(), "v": leaf_v, "base": base})
        ((out * out).sum() + r.sum()).backward()
    return results


@pytest.mark.parametrize("kind", ["plain", "non-leaf", "view", "leaf under no_grad"])
def test_training_graph_writes_a_mutated_input_in_place(kind, monkeypatch):
    # [Note: input mutations in training]: the forward scatters into the input itself and the Function marks it
    # dirty; a view (or a leaf) goes through a clone that is copied back. Values, gradients and the input's
    # autograd history match eager's, and the forward runs no copy kernel.
    _, idx, v = _inputs()

    def make_out():
        if kind == "plain":
            out = torch.zeros(6, 3, device=DEVICE)
            return out, out
        if kind == "non-leaf":
            base = torch.randn(6, 3, generator=torch.Generator().manual_seed(1)).to(DEVICE).requires_grad_(True)
            return base, base * 2
        if kind == "view":
            base = torch.randn(8, 3, generator=torch.Generator().manual_seed(1)).to(DEVICE).requires_grad_(True)
            big = base * 2
            return base, big[1:7]
        return None, torch.zeros(6, 3, device=DEVICE).requires_grad_(True)

    if kind == "leaf under no_grad":  # eager refuses the in-place write of a leaf that requires grad
        out = make_out()[1]
        with pytest.raises(RuntimeError) as eager:
            _accumulate(out, idx, v.clone().requires_grad_(True))
        minidynamo.reset()
        with pytest.raises(RuntimeError) as ours:
            minidynamo.minicompile(_accumulate)(make_out()[1], idx, v.clone().requires_grad_(True))
        assert "in-place operation" in str(eager.value) and "in-place operation" in str(ours.value)
        return
    sources = _capture_sources(monkeypatch)
    minidynamo.reset()
    metrics.reset()
    eager, ours = _train_both(make_out, idx, v)
    assert_same(ours["r"], eager["r"])
    assert_same(ours["out"], eager["out"])
    assert_same(ours["v"].grad, eager["v"].grad)
    if kind in ("non-leaf", "view"):  # the gradient reaches the leaf the input was made from
        assert_same(ours["base"].grad, eager["base"].grad)
    assert ours["out"].requires_grad and ours["out"]._version > ours["version"]
    assert ours["out"].data_ptr() == ours["ptr"]
    if kind != "view":  # the input's history ends in the compiled graph's node, as eager's in IndexAddBackward
        assert type(ours["out"].grad_fn).__name__ == "CompiledFunctionBackward"
    assert minidynamo.counters["stats"]["unique_graphs"] == 1
    forward, backward = sources  # compiled in this order (the backward at the first backward())
    assert "scatter_add" in forward and "= arg" in forward.split("the scatter writes in place")[0].splitlines()[-1]
    assert forward.count(".run(") == 2  # the scatter (sin fused in) and the cos: no copy of `out`
    assert metrics.generated_kernel_count == 2 + backward.count(".run(")


def _capture_sources(monkeypatch) -> list[str]:
    """The generated wrapper source of every graph compiled from now on, in order."""
    import importlib
    compile_fx_module = importlib.import_module("mininductor.compile_fx")
    sources = []
    dump = compile_fx_module._debug_dump
    monkeypatch.setattr(compile_fx_module, "_debug_dump",
                        lambda aten_gm, graph, scheduler, source: (sources.append(source),
                                                                    dump(aten_gm, graph, scheduler, source)))
    return sources


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


def _returns_the_input(out, idx, v):
    out.index_add_(0, idx, v.sin())
    return out  # the new value is a user output too: the copy-back path


def _reads_the_old_value(out, idx, v):
    y = out * 2  # read before the scatter, and needed after it: the copy stays
    out.index_add_(0, idx, v.sin())
    return y + out


def _pointwise_write(out, idx, v):
    out.add_(v.sum(0))  # not a scatter: the graph computes a new buffer, copied back
    return v.cos()


def _two_scatters(out, idx, v):
    out.index_add_(0, idx, v.sin())
    out.index_add_(0, idx, v.cos())
    return v * 2


def _scatter_into_a_view_inside(out, idx, v):
    out[1:].index_add_(0, idx, v.sin())
    return v * 2


@pytest.mark.parametrize("fn", [_returns_the_input, _reads_the_old_value, _pointwise_write, _two_scatters,
                                _scatter_into_a_view_inside])
@pytest.mark.parametrize("kind", ["plain", "non-leaf", "view"])
def test_training_input_mutations_match_eager(fn, kind):
    # every shape of mutation a training graph can make of an input, in place or not: values, the input, and the
    # gradients of v and of the leaf the input was made from all match eager's
    idx = torch.tensor([4, 1, 4], device=DEVICE)
    results = []
    for compile_ in (False, True):
        gen = torch.Generator().manual_seed(0)
        base = torch.randn(8, 3, generator=gen).to(DEVICE).requires_grad_(True)
        v = torch.randn(3, 3, generator=gen).to(DEVICE).requires_grad_(True)
        out = torch.zeros(6, 3, device=DEVICE) if kind == "plain" else base[:6] * 2 if kind == "non-leaf" else \
            (base * 2)[1:7]
        minidynamo.reset()
        r = (minidynamo.minicompile(fn) if compile_ else fn)(out, idx, v)
        ((r * r).sum() + (out * out).sum()).backward()
        results.append((r.detach(), out.detach(), v.grad, base.grad))
        if compile_:
            assert minidynamo.counters["stats"]["unique_graphs"] == 1
    for ours, eager in zip(results[1], results[0]):
        assert_same(ours, eager)
