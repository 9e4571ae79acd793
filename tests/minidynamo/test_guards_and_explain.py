"""Guards, recompiles, explain, fullgraph and eager fallback: the translator's answers in words, vs eager."""
import contextlib

import pytest
import torch

import minidynamo
from minidynamo.testing import CompileCounter
from minidynamo.testing import same as _same

X = torch.arange(3.0)


def scaled(x, n):
    return torch.sin(x) * n


def test_guards_are_readable_and_name_their_source_line():
    f = minidynamo.minicompile(scaled, backend="eager")
    f(torch.randn(3), 2)
    text = minidynamo.show_guards(f)
    assert "L['x']" in text and "TENSOR_MATCH" in text and "shape=[3]" in text
    assert "L['n']" in text and "EQUALS_MATCH" in text and "== 2 (int)" in text
    assert "test_guards_and_explain.py" in text and "torch.sin(x) * n" in text
    assert "GRAD_MODE" in text


@pytest.mark.parametrize("change, expect", [
    (lambda: (torch.randn(4), 2), "L['x'] TENSOR_MATCH: expected Tensor(float32, cpu, shape=[3]"),
    (lambda: (torch.randn(3), 5), "L['n'] EQUALS_MATCH: expected == 2 (int), got 5 (int)"),
    (lambda: (torch.randn(3, dtype=torch.float64), 2), "got Tensor(float64"),
    (lambda: (torch.randn(3), 2.0), "got 2.0 (float)"),
])
def test_recompile_says_which_guard_failed(change, expect):
    cnt = CompileCounter()
    f = minidynamo.minicompile(scaled, backend=cnt)
    f(torch.randn(3), 2)
    args = change()
    assert torch.equal(f(*args), scaled(*args))
    assert cnt.frame_count == 2 and minidynamo.counters["recompiles"]["total"] == 1
    ctx = f._minidynamo_ctx
    assert expect in ctx.recompile_reasons[0]


def test_grad_mode_is_guarded():
    cnt = CompileCounter()
    f = minidynamo.minicompile(scaled, backend=cnt)
    x = torch.randn(3, requires_grad=True)
    f(x, 2)
    with torch.no_grad():
        out = f(x, 2)
    assert not out.requires_grad and cnt.frame_count == 2


def test_recompile_limit_runs_eagerly_with_a_warning(monkeypatch):
    monkeypatch.setattr(minidynamo.config, "recompile_limit", 2)
    cnt = CompileCounter()
    f = minidynamo.minicompile(scaled, backend=cnt, dynamic=False)  # always specialise: each value recompiles
    x = torch.randn(3)
    f(x, 1)
    f(x, 2)
    with pytest.warns(UserWarning, match="recompile_limit"):
        assert torch.equal(f(x, 3), scaled(x, 3))
    assert cnt.frame_count == 2 and minidynamo.counters["eager_fallback"]["recompile_limit"] == 1


def uses_item(x):
    y = x * 2
    if y.sum().item() > 0:
        return y
    return -y


def test_item_breaks_the_graph_with_reason_hint_and_line():
    cnt = CompileCounter()
    f = minidynamo.minicompile(uses_item, backend=cnt)
    x = torch.ones(5)  # positive: the resume function only returns y (no graph after the break)
    assert torch.equal(f(x), uses_item(x))
    (reason,) = minidynamo.counters["graph_break"]
    assert ".item()" in reason and not minidynamo.counters["eager_fallback"]
    err = f._minidynamo_ctx.graph_breaks[0]
    assert err.hint and err.user_stack[-1].lineno == uses_item.__code__.co_firstlineno + 2
    assert cnt.frame_count == 1  # x * 2 and .sum() before the break; nothing to compile after it


def test_frame_that_cannot_break_runs_eagerly_with_reason():
    def f(x):  # a frame that calls locals() is never split: a resume function has other locals
        y = x + x.sum().item()
        return y, sorted(locals())

    cnt = CompileCounter()
    cf = minidynamo.minicompile(f, backend=cnt)
    x = torch.randn(3)
    (y, names), (y_e, names_e) = cf(x), f(x)
    assert torch.equal(y, y_e) and names == names_e
    (reason,) = minidynamo.counters["eager_fallback"]
    assert "item" in reason and cnt.frame_count == 0


def test_fullgraph_raises_with_file_line_and_hint():
    f = minidynamo.minicompile(uses_item, backend="eager", fullgraph=True)
    with pytest.raises(minidynamo.exc.Unsupported) as info:
        f(torch.randn(5))
    text = str(info.value)
    assert "test_guards_and_explain.py" in text and "hint:" in text and ".item()" in text


@contextlib.contextmanager
def _printing_manager():
    print(end="")
    yield


def _enters_a_printing_manager(x):
    with _printing_manager():
        return x + 1


def test_fullgraph_names_the_compiled_functions_line_under_an_inlined_callee():
    """A refusal inside a @contextmanager's generator (run inside contextlib's ``__init__``) named only
    contextlib's and the generator's lines (translator fuzz round 12): every frame is listed, out to the
    compiled function's."""
    f = minidynamo.minicompile(_enters_a_printing_manager, backend="eager", fullgraph=True)
    with pytest.raises(minidynamo.exc.Unsupported) as info:
        f(torch.ones(2))
    line = _enters_a_printing_manager.__code__.co_firstlineno + 1
    assert f"called from {__file__}:{line} in _enters_a_printing_manager" in str(info.value)


def test_explain_fields_match_torch_dynamo():
    def g(x):
        return torch.relu(x).sum(-1) + 1

    out = minidynamo.explain(g)(torch.randn(2, 3))
    real = torch._dynamo.explain(g)(torch.randn(2, 3))
    for field in ("graph_count", "graph_break_count", "op_count"):
        assert getattr(out, field) == getattr(real, field), field
    assert len(out.ops_per_graph) == 1 and len(out.out_guards) > 0 and "Graph Count: 1" in str(out)


def test_internal_error_falls_back_instead_of_crashing(monkeypatch):
    import minidynamo.symbolic_convert as sc

    def broken(self, inst):
        raise ZeroDivisionError("simulated translator bug")

    monkeypatch.setattr(sc.InstructionTranslatorBase, "BINARY_OP", broken)
    f = minidynamo.minicompile(scaled, backend="eager")
    x = torch.randn(3)
    assert torch.equal(f(x, 2), scaled(x, 2))
    assert any("internal error" in r for r in minidynamo.counters["eager_fallback"])


def test_module_wrapper_shares_parameters_and_respects_eval():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    cnt = CompileCounter()
    om = minidynamo.minicompile(m, backend=cnt)
    assert next(iter(om.parameters())) is m[0].weight
    assert set(om.state_dict()) == {f"_orig_mod.{k}" for k in m.state_dict()}
    om.eval()
    x = torch.randn(2, 4)
    assert torch.equal(om(x), m(x)) and cnt.frame_count == 1
    om.train()
    torch.manual_seed(1)
    a = om(x)
    torch.manual_seed(1)
    assert torch.equal(a, m(x)) and cnt.frame_count == 2


# --- locals() in a frame with a graph break: the frame runs eagerly (fuzz round 4) ----------------------------------

def test_locals_after_a_graph_break_runs_the_frame_eagerly():
    def fn(x):
        a = 1
        y = x + a
        print("break")
        return y, sorted(locals()), sorted(vars()), "a" in dir()
    cnt = CompileCounter()
    assert minidynamo.minicompile(fn, backend=cnt)(X)[1] == ["a", "x", "y"]


# --- a module's structure is guarded (fuzz round 9) -----------------------------------------------------------------
# ``for m in layers``, ``layers[-1]``, ``len(layers)``, ``"b" in heads`` and ``model.parameters()`` read which
# submodules a module holds; only each item's type and hooks were guarded, so a ``ModuleList`` that grew between
# calls ran the graph of the shorter list ([Note: a module's structure is guarded]).

def _structure_program():
    torch.manual_seed(0)
    layers = torch.nn.ModuleList([torch.nn.Linear(3, 3)])
    heads = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 2)})
    params = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(3))])
    owner = torch.nn.Module()
    owner.inner = torch.nn.Linear(3, 3)

    def fn(x):
        for layer in layers:
            x = layer(x)
        total = sum(p.sum() for p in owner.parameters())
        return (x, layers[-1](x), len(layers), [h(x) for h in heads.values()], "b" in heads, list(heads.keys()),
                sum(p * 1 for p in params), total)

    def grow(step):
        torch.manual_seed(step)
        [lambda: layers.append(torch.nn.Linear(3, 3)), lambda: heads.update({"b": torch.nn.Linear(3, 2)}),
         lambda: params.append(torch.nn.Parameter(torch.ones(3) * 2)),
         lambda: setattr(owner, "extra", torch.nn.Linear(3, 1)), lambda: layers.__delitem__(0)][step]()

    return fn, grow


def test_a_module_container_that_changes_between_calls_recompiles():
    fn, grow = _structure_program()
    eager_fn, eager_grow = _structure_program()
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    x = torch.randn(2, 3)
    assert _same(compiled(x), eager_fn(x))
    for step in range(5):
        grow(step)
        eager_grow(step)
        assert _same(compiled(x), eager_fn(x))
    assert cnt.frame_count == 6 and minidynamo.counters["recompiles"]["total"] == 5
    guards = minidynamo.show_guards(compiled)
    assert "L['layers']._modules" in guards and "DICT_KEYS" in guards


def test_a_parameter_that_is_none_is_guarded():
    """``bias`` of ``Linear(bias=False)`` is None in ``_parameters``; it was folded without a guard, so a module
    with a bias, passed after one without, could run the bias-free graph."""
    def fn(m, x):
        return m(x)

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    x = torch.randn(4, 3)
    for bias in (True, False, True, False, True):
        torch.manual_seed(0)
        m = torch.nn.Linear(3, 2, bias=bias)
        assert _same(compiled(m, x), fn(m, x))
    assert cnt.frame_count == 2 and not minidynamo.counters["graph_break"]
    assert "== None (NoneType)" in minidynamo.show_guards(compiled)
