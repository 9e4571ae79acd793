"""Graph breaks: the sweep test of issue 3 and the break causes, each compared with eager (values and the order
of side effects) with graph and break counts asserted.

The sweep takes each function of a small corpus and, for every statement in it (nested ones included), inserts
``minidynamo.graph_break()`` before that statement; every variant must give eager's result and side-effect log.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
import torch
from helpers import same
from torch import nn

import minidynamo
from minidynamo.examples.moe import make_moe_input
from minidynamo.testing import CompileCounter


# --------------------------------------------------------------------------------------------------------------
# The sweep corpus: plain functions taking (x, log); `log` records side effects in order.
# --------------------------------------------------------------------------------------------------------------
def helper(t, log, k=2):
    log.append(("helper", k))
    u = t * k
    return u + 1


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, t, log):
        log.append("module")
        h = self.lin(t)
        return torch.relu(h) * 2


MODULE = Scale()


def straight_line(x, log):
    y = x.sin()
    log.append("a")
    z = y * 2 + x
    log.append(("b", z.shape[0]))
    return z.sum(-1), y


def for_loop(x, log):
    acc = x * 0
    for i in range(3):
        acc = acc + x * i
        log.append(i)
    return acc


def nested_loops(x, log):
    out = []
    for i in range(2):
        for j in range(2):
            out.append(x * (i + j))
            log.append((i, j))
    return torch.stack(out).sum(0)


def loop_over_list(x, log):
    total = x
    for w in [1.0, 2.0, 3.0]:
        total = total * w
        log.append(w)
    return total


def with_no_grad(x, log):
    y = x * 3
    with torch.no_grad():
        z = y + 1
        log.append(torch.is_grad_enabled())
        z = z * 2
    log.append(torch.is_grad_enabled())
    return z, y


def calls_and_kwargs(x, log):
    a = helper(x, log, k=3)
    b = helper(a, log)
    log.append("c")
    return torch.cat([a, b], dim=0)


def closures(x, log):
    scale = 4

    def inner(t):
        return t * scale

    y = inner(x)
    log.append("closure")
    return inner(y) - 1


def module_call(x, log):
    h = x.reshape(-1, 4)
    log.append("before")
    y = MODULE(h, log)
    return y.mean()


def comprehension(x, log):
    ys = [x * k for k in range(3)]
    log.append(len(ys))
    d = {f"k{k}": v.sum() for k, v in enumerate(ys)}
    return d


def branch_on_value(x, log):
    y = x.abs()
    if y.sum() > 1:
        log.append("big")
        y = y - 1
    else:
        log.append("small")
    return y


SWEEP = [straight_line, for_loop, nested_loops, loop_over_list, with_no_grad, calls_and_kwargs, closures,
         module_call, comprehension, branch_on_value]


def statement_lists(fn_node: ast.FunctionDef):
    """Every list of statements in the function (bodies of for/while/if/with/else), with its owner."""
    for node in ast.walk(fn_node):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt) and \
                    not isinstance(node, ast.ClassDef) and (node is fn_node or not isinstance(node, ast.FunctionDef)):
                yield stmts


def variants(fn):
    """(description, function) with graph_break() inserted before each statement in turn."""
    src = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(src)
    count = sum(len(s) for s in statement_lists(tree.body[0]))
    for k in range(count):
        tree = ast.parse(src)
        flat = [(stmts, i) for stmts in statement_lists(tree.body[0]) for i in range(len(stmts))]
        stmts, i = flat[k]
        line = stmts[i].lineno
        brk = ast.parse("minidynamo.graph_break()").body[0]
        stmts.insert(i, brk)
        ast.fix_missing_locations(tree)
        scope = dict(fn.__globals__)
        exec(compile(tree, f"<sweep {fn.__name__}>", "exec"), scope)  # noqa: S102 - the sweep's rewritten function
        yield f"{fn.__name__}:line{line}", scope[fn.__name__]


CASES = [pytest.param(f, id=desc) for fn in SWEEP for desc, f in variants(fn)]


@pytest.mark.parametrize("fn", CASES)
def test_graph_break_before_every_statement(fn):
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    for _ in range(2):  # second call: cached entries and resume functions are reused
        x = torch.randn(8)
        log_eager, log_compiled = [], []
        expected = fn(x, log_eager)
        assert same(compiled(x, log_compiled), expected)
        assert log_compiled == log_eager
    ctx = compiled._minidynamo_ctx
    assert len(ctx.graph_breaks) >= 1 and not minidynamo.counters["eager_fallback"]
    assert cnt.frame_count >= 1


# --------------------------------------------------------------------------------------------------------------
# Break causes
# --------------------------------------------------------------------------------------------------------------
def prints(x):
    y = x.cos()
    print("y is", y.shape)
    return y + 1


def item_in_branch(x):
    s = x.sum()
    if s.item() > 0:
        return x * 2
    return x / 2


def tolist_and_int(x):
    vals = (x * 10).int().tolist()
    return x + int(x.argmax()) + len(vals)


def bool_mask_and_len(x):
    m = x > 0
    kept = x[m]
    return kept * 2, len(kept)


def nonzero_unique(x):
    idx = torch.nonzero(x > 0)
    return idx.sum() + torch.unique(x.round()).numel()


def tensor_while(x):
    while x.abs().sum() > 1:
        x = x / 2
    return x


def numpy_call(x):
    import numpy as np
    y = x * 2
    return torch.from_numpy(np.asarray(y.numpy()) + 1)


@pytest.mark.parametrize("fn, reason", [
    (prints, "print"), (item_in_branch, ".item()"), (tolist_and_int, ".tolist()"),
    (bool_mask_and_len, "data-dependent output shape"), (nonzero_unique, "data-dependent output shape"),
    (tensor_while, "data-dependent branch"), (numpy_call, ".numpy()"),
])
def test_break_causes(fn, reason, capsys):
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(fn, backend=cnt)
    x = torch.randn(6)
    got, want = compiled(x), fn(x)
    assert same(got, want)
    breaks = compiled._minidynamo_ctx.graph_breaks
    assert breaks and any(reason in b.reason for b in breaks), [b.reason for b in breaks]
    assert all(b.hint for b in breaks) and all(b.user_stack for b in breaks)
    assert not minidynamo.counters["eager_fallback"] and cnt.frame_count >= 1


def test_break_in_long_loop_does_not_grow_the_stack():
    def f(x, n):
        for i in range(n):
            x = x + 1
            minidynamo.graph_break()
        return x

    compiled = minidynamo.minicompile(f, backend="eager")
    x = torch.zeros(2)
    assert torch.equal(compiled(x, 3000), f(x, 3000))  # deeper than the recursion limit if calls nested


def test_fullgraph_raises_at_first_break():
    compiled = minidynamo.minicompile(prints, backend="eager", fullgraph=True)
    with pytest.raises(minidynamo.exc.Unsupported, match="print"):
        compiled(torch.randn(3))


def test_explain_lists_breaks_with_lines():
    out = minidynamo.explain(item_in_branch)(torch.randn(4))
    assert out.graph_break_count == 1 and out.graph_count >= 1
    text = str(out)
    assert ".item()" in text and "test_graph_breaks.py" in text and "hint:" in text


def test_tutorial_moe_runs_with_breaks_in_train_and_eval():
    from minidynamo.examples.moe import make_moe
    for training in (False, True):
        minidynamo.reset()
        model = make_moe("tutorial", "small", device="cpu")
        model.train(training)
        cnt = CompileCounter()
        compiled = minidynamo.minicompile(model, backend=cnt)
        x = make_moe_input("small")  # seeded: the routing, so the code paths and graphs, are the same every run
        (o1, a1), (o2, a2) = compiled(x), model(x)
        assert torch.allclose(o1, o2, atol=1e-6) and same(a1, a2)
        assert cnt.frame_count >= 2 and compiled._ctx.graph_breaks
        assert not minidynamo.counters["eager_fallback"]


# The tutorial MoE in train and eval mode, batch 16 then 12 (a recompile with a symbolic batch): every graph's
# inputs and code, and the transformed bytecode of every cache entry, as text.
MOE_ARTIFACTS_CHILD = textwrap.dedent("""
    import contextlib, io
    import minidynamo
    from minidynamo.examples.moe import make_moe, make_moe_input
    for training in (True, False):
        minidynamo.reset()
        graphs = []
        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward
        compiled = minidynamo.minicompile(make_moe("tutorial", "small").train(training), backend=backend)
        for batch in (16, 12):
            compiled(make_moe_input("small", batch_size=batch))
        for gm in graphs:
            print([n.name for n in gm.graph.nodes if n.op == "placeholder"])
            print(gm.code)
        with contextlib.redirect_stdout(io.StringIO()):
            text = minidynamo.show_transformed(compiled)
        print(text)
""")


def test_tutorial_moe_compiles_to_the_same_graphs_and_bytecode_in_every_process():
    """[Note: deterministic const names]: two fresh interpreters, with different string hashes (and, by ASLR,
    different addresses), give the same graph inputs in the same order, the same graph code and the same
    transformed bytecode.  Names made from ``id()`` once made the bytecode differ on every run."""
    import os
    import subprocess
    import sys
    procs = [subprocess.Popen([sys.executable, "-c", MOE_ARTIFACTS_CHILD], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONHASHSEED": seed})
             for seed in ("0", "1")]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    first, second = (out for out, _ in outs)
    assert "l_expert_samples" in first and "___const_" in first  # it did capture the loop and print bytecode
    assert first == second


def test_loop_body_recompiles_start_with_the_break_of_the_last_translation():
    # [Note: break hints] in convert_frame: the loop's resume function recompiles once the iterator is exhausted;
    # after its first translation, it breaks where the last did without a failed attempt
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(5))

    def f(x):
        for i in range(5):
            x = torch.relu(layers[i](x))
            minidynamo.graph_break()
        return x

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    x = torch.randn(3, 4)
    assert torch.allclose(compiled(x), f(x))
    ctx = compiled._minidynamo_ctx
    # one resume function runs the rest of the loop (its FOR_ITER is traced): compiled once with i a symbol (a
    # resumed loop's variable; layers[i] read at run time serves 1..4) and once for the exhausted iterator
    (loop_body,) = [code for code in ctx.cache if code in ctx.resume_origin and len(ctx.cache[code]) == 2]
    assert loop_body in ctx.break_hints
    failed = minidynamo.counters["frames"]["total"] - minidynamo.counters["frames"]["ok"]
    assert failed == 1 + len(ctx.break_hints) == 2  # f's, and the resume function's first: not the recompile's
    assert sum(minidynamo.counters["graph_break"].values()) == len(ctx.graph_breaks) == 2
    assert len(ctx.recompile_reasons) == 1
    assert torch.allclose(compiled(x), f(x)) and cnt.frame_count == 2


def test_a_hinted_translation_that_fails_before_its_break_restarts_at_once():
    # [Note: break hints]: once the iterator is exhausted, the loop body's resume function leaves the loop and
    # fails at the second break, before the hinted one; a translation without the hint would fail there too, so
    # the restart with the break there comes at once
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def f(x):
        for i in range(3):
            x = torch.relu(layers[i](x))
            minidynamo.graph_break()
        x = x * 2
        minidynamo.graph_break()
        return x + 1

    compiled = minidynamo.minicompile(f, backend=CompileCounter())
    x = torch.randn(3, 4)
    assert torch.allclose(compiled(x), f(x))
    ctx = compiled._minidynamo_ctx
    failed = minidynamo.counters["frames"]["total"] - minidynamo.counters["frames"]["ok"]
    assert failed == 3  # f's, the loop body's first, and the hinted attempt of the exhausted loop: no fourth
    assert sum(minidynamo.counters["graph_break"].values()) == len(ctx.graph_breaks) == 3
    assert torch.allclose(compiled(x), f(x))


def test_a_function_wrapped_by_torch_disable_dynamo_is_a_graph_break():
    # [Note: torch._disable_dynamo]: the wrapper (Optimizer.zero_grad and .step wear it) reads
    # `fn.__dynamo_disable`, missing until eager first calls it; inlined, that getattr with a default raised an
    # AttributeError inside the translator (an internal error).  Now the call is a graph break and runs eagerly
    def log_sum(t, log):
        log.append(t.sum().item())

    wrapped = torch._disable_dynamo(log_sum)

    def f(x, log):
        y = x + 1
        wrapped(y, log)
        return y * 2

    cnt = CompileCounter()
    compiled = minidynamo.minicompile(f, backend=cnt)
    x, log, log_ref = torch.arange(3.0), [], []
    assert torch.equal(compiled(x, log), f(x, log_ref)) and log == log_ref
    assert cnt.frame_count == 2 and not minidynamo.counters["eager_fallback"]
    assert list(minidynamo.counters["graph_break"]) == \
        ["`_disable_dynamo.<locals>.inner` of a function wrapped by torch._disable_dynamo"]


def test_a_whole_training_step_with_clip_grad_norm_matches_eager():
    # `clip_grad_norm_` groups the gradients with torch._C._group_tensors_by_device_and_dtype, whose dict is
    # keyed by (device, dtype): put in the graph, an internal error.  It is traced as a Python polyfill now
    # ([Note: grouping tensors by device and dtype]); zero_grad/step and backward are graph breaks
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
    ref = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
    ref.load_state_dict(model.state_dict())

    def step(m, opt, x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        return loss.detach(), norm

    opt, opt_ref = (torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, ref))
    compiled = minidynamo.minicompile(step, backend=CompileCounter())
    for _ in range(3):
        x, y = torch.randn(4, 5), torch.randn(4, 1)
        got, expected = compiled(model, opt, x, y), step(ref, opt_ref, x, y)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, expected))
    assert all(torch.allclose(p, q, atol=1e-6) for p, q in zip(model.parameters(), ref.parameters()))
    assert not minidynamo.counters["eager_fallback"]
    assert minidynamo.counters["graph_break"]["`.backward()` inside a compiled region: its value is not known "
                                              "while tracing"] == 1


def test_a_functools_wraps_wrapper_taking_star_args_resumes_after_a_break():
    # the frame's locals were bound with inspect.signature, which follows __wrapped__: `inner(*args)` got the
    # wrapped function's parameter `x` instead of `args` -- an UnboundLocalError on 3.11, a segfault on 3.12
    import functools

    def make(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            minidynamo.graph_break()
            return fn(*args, **kwargs) + 1
        return inner

    wrapper = make(lambda x, scale=2: x * scale)
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(wrapper, backend=cnt)
    x = torch.arange(3.0)
    assert torch.equal(compiled(x, scale=3), wrapper(x, scale=3))
    assert cnt.frame_count == 1 and not minidynamo.counters["eager_fallback"]
    assert minidynamo.counters["graph_break"] == {"minidynamo.graph_break() was called": 1}
