"""Corpus: the public API around the translator -- fullgraph, explain, decorator forms, OptimizedModule,
custom backends, reset and the frame counters -- each checked against real Dynamo on the same program.

Budget: ~10 s on 2 cores.
"""
import pytest
import torch
from corpus import PROGRAMS, select, t
from corpus.harness import RecordingCounter, assert_same, reset_real_dynamo, run_program
from torch import nn

select("arith", "torch_fns", "containers", "modules", "control_flow", "breaks")
FULLGRAPH_OK = ["arith.all_binary_ops", "torch_fns.softmax_family", "containers.dict_iteration_items_keys_values",
                "modules.modulelist_iteration_with_submodules", "control_flow.while_on_shape_halving"]
# Not here: `.item()` in a branch and boolean-mask indexing -- under fullgraph=True real Dynamo captures them with
# unbacked symbolic sizes instead of refusing.
BREAKING = ["breaks.print_between_ops", "breaks.print_in_inlined_helper", "breaks.explicit_graph_break",
            "breaks.data_dependent_while_loop", "breaks.data_dependent_branch"]


@pytest.mark.parametrize("name", FULLGRAPH_OK)
def test_fullgraph_success(md, name):
    prog = PROGRAMS[name]
    expected = run_program(prog)
    cnt = RecordingCounter()
    run_program(prog, torch.compile, backend=cnt, fullgraph=True)
    md.reset()
    ours = md.CompileCounter()
    assert_same(run_program(prog, md.minicompile, backend=ours, fullgraph=True).outputs, expected.outputs)
    assert cnt.frame_count == 1 and cnt.counts().accepts(ours.frame_count, ours.op_count)


@pytest.mark.parametrize("name", BREAKING)
def test_fullgraph_raises_unsupported(md, name):
    prog = PROGRAMS[name]
    prog.module_globals()["graph_break"] = torch._dynamo.graph_break
    with pytest.raises(torch._dynamo.exc.Unsupported):
        run_program(prog, torch.compile, backend="eager", fullgraph=True)
    prog.module_globals()["graph_break"] = md.graph_break
    md.reset()
    with pytest.raises(md.Unsupported):
        run_program(prog, md.minicompile, backend="eager", fullgraph=True)


@pytest.mark.parametrize("name", ["arith.all_binary_ops", "modules.sequential_mlp", "containers.list_comprehension",
                                  "torch_fns.topk_sort_argmax"])
def test_explain_without_breaks_matches_real_dynamo(md, name):
    """graph_count equals real Dynamo's.  op_count: real explain() counts only call_function nodes (a quirk:
    CompileCounter also counts call_method/call_module), so either count is accepted."""
    prog = PROGRAMS[name]

    def explain(explain_fn):
        torch.manual_seed(0)
        subject = prog.make_callable()
        torch.manual_seed(1000)
        return explain_fn(subject)(*prog.args())

    real = explain(torch._dynamo.explain)
    counter = RecordingCounter()
    run_program(prog, torch.compile, backend=counter)
    md.reset()
    ours = explain(md.explain)
    assert (ours.graph_count, ours.graph_break_count) == (real.graph_count, 0)
    assert ours.op_count in (real.op_count, counter.op_count, counter.counts().live_op_count)
    assert len(ours.graphs) == len(ours.ops_per_graph) == ours.graph_count
    assert ours.op_count == sum(len(ops) for ops in ours.ops_per_graph)
    assert ours.break_reasons == [] and len(ours.out_guards) > 0 and ours.compile_times is not None
    assert all(isinstance(g, torch.fx.GraphModule) for g in ours.graphs)


def test_explain_reports_a_break_with_its_user_line(md):
    def f(x):
        y = x.sin()
        md.graph_break()
        return y.cos()

    md.reset()
    ex = md.explain(f)(t(3))
    if md.counters["eager_fallback"]:  # graph breaks not supported yet: the fallback must carry a reason
        assert all(isinstance(r, str) and r for r in md.counters["eager_fallback"])
        return
    assert ex.graph_count == 2 and ex.graph_break_count == 1
    reason = ex.break_reasons[0]
    assert reason.reason and any(fs.name == "f" for fs in reason.user_stack)


def test_decorator_forms(md):
    cnt = md.CompileCounter()

    @md.minicompile
    def plain(x):
        return x * 2

    @md.minicompile(backend=cnt)
    def counted(x):
        return x + 1

    x = t(3)
    assert_same(plain(x), x * 2)
    assert_same(counted(x), x + 1)
    assert (cnt.frame_count, cnt.op_count) == (1, 1)


def test_optimized_module(md):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    cnt = md.CompileCounter()
    opt = md.minicompile(model, backend=cnt)
    assert isinstance(opt, nn.Module) and type(opt).__name__ == "OptimizedModule"
    assert [p is q for p, q in zip(opt.parameters(), model.parameters())] == [True, True]
    x = t(2, 3)
    assert_same(opt(x), model(x))
    assert cnt.frame_count == 1


def test_custom_backend_receives_graph_module_and_example_inputs(md):
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    def f(x, y):
        return (x @ y).relu()

    x, y = t(2, 3), t(3, 2)
    assert_same(md.minicompile(f, backend=backend)(x, y), f(x, y))
    (gm, example_inputs), = seen
    assert isinstance(gm, torch.fx.GraphModule)
    assert [tuple(e.shape) for e in example_inputs] == [(2, 3), (3, 2)]


def test_aot_eager_backend_values_and_gradients(md):
    def f(x, w):
        return torch.tanh(x @ w).sum()

    x, w = t(4, 3), t(3, 2, requires_grad=True)
    expected = f(x, w)
    expected.backward()
    expected_grad = w.grad.clone()
    w.grad = None
    out = md.minicompile(f, backend="aot_eager")(x, w)
    out.backward()
    assert_same(out.detach(), expected.detach())
    torch.testing.assert_close(w.grad, expected_grad)


def test_reset_clears_caches_and_counters(md):
    def f(x):
        return x - 1

    cnt = md.CompileCounter()
    opt = md.minicompile(f, backend=cnt)
    opt(t(3))
    opt(t(3))
    assert cnt.frame_count == 1 and md.counters["frames"]["total"] >= 1
    md.reset()
    assert not any(md.counters.values())
    opt(t(3))
    assert cnt.frame_count == 2


@pytest.mark.parametrize("name", ["arith.add_broadcast", "modules.sequential_mlp", "control_flow.nested_loops"])
def test_frame_counters_match_real_dynamo(md, name):
    prog = PROGRAMS[name]
    reset_real_dynamo()
    run_program(prog, torch.compile, backend="eager")
    real = {k: torch._dynamo.utils.counters["frames"][k] for k in ("total", "ok")}
    md.reset()
    run_program(prog, md.minicompile, backend="eager")
    assert {k: md.counters["frames"][k] for k in ("total", "ok")} == real
