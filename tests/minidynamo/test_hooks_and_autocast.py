"""Module forward (pre-)hooks inlined like ``nn.Module._call_impl`` runs them, and ``torch.autocast`` blocks traced
as enter/exit graph nodes.  Every test compares with eager and asserts graph, break and recompile counts.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.testing import CompileCounter


def _breaks() -> dict:
    return dict(minidynamo.counters["graph_break"])


def _recompiles() -> int:
    return minidynamo.counters["recompiles"]["total"]


def _same(a, b) -> None:
    torch.testing.assert_close(a, b, rtol=0, atol=0)


# --------------------------------------------------------------------------------------------------------------
# Forward hooks
# --------------------------------------------------------------------------------------------------------------
class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x).relu()


def _outer() -> Outer:
    torch.manual_seed(0)
    return Outer()


def test_hooks_replace_args_and_output_in_one_graph():
    m = _outer()
    m.fc.register_forward_pre_hook(lambda mod, args: args[0] * 3)  # not a tuple: becomes the 1-tuple of args
    m.fc.register_forward_pre_hook(lambda mod, args: None)  # None keeps the args
    m.fc.register_forward_hook(lambda mod, args, out: out + args[0].sum())
    m.fc.register_forward_hook(lambda mod, args, out: None)
    x = torch.randn(2, 3)
    cnt = CompileCounter()
    out = minidynamo.minicompile(m, backend=cnt)(x)
    _same(out, m(x))
    assert cnt.frame_count == 1 and not _breaks()


def test_adding_a_hook_recompiles_and_removing_it_reuses_the_first_graph():
    m = _outer()
    x = torch.randn(2, 3)
    cnt = CompileCounter()
    f = minidynamo.minicompile(m, backend=cnt)
    _same(f(x), m(x))
    handle = m.fc.register_forward_hook(lambda mod, args, out: out * -1)
    _same(f(x), m(x))  # eager now runs the hook: the NN_MODULE guard on m.fc fails
    assert cnt.frame_count == 2 and _recompiles() == 1
    handle.remove()
    _same(f(x), m(x))  # the first entry's guards hold again: no new compile
    assert cnt.frame_count == 2 and _recompiles() == 1 and not _breaks()


def test_backward_hooks_are_refused_with_a_reason():
    m = _outer()
    m.fc.register_full_backward_hook(lambda mod, gin, gout: None)
    x = torch.randn(2, 3, requires_grad=True)
    cnt = CompileCounter()
    out = minidynamo.minicompile(m, backend=cnt)(x)
    _same(out, m(x))
    assert any("backward hooks" in r for r in _breaks())


def test_with_kwargs_hooks_are_refused_with_a_reason():
    m = _outer()
    m.fc.register_forward_hook(lambda mod, args, kwargs, out: out * 2, with_kwargs=True)
    x = torch.randn(2, 3)
    cnt = CompileCounter()
    out = minidynamo.minicompile(m, backend=cnt)(x)
    _same(out, m(x))
    assert any("with_kwargs" in r for r in _breaks())


def test_a_global_module_hook_registered_later_recompiles_then_is_refused():
    m = _outer()
    x = torch.randn(2, 3)
    cnt = CompileCounter()
    f = minidynamo.minicompile(m, backend=cnt)
    _same(f(x), m(x))
    assert cnt.frame_count == 1
    handle = nn.modules.module.register_module_forward_hook(lambda mod, args, out: out + 1)
    try:
        expected = m(x)
        _same(f(x), expected)  # the global hook runs (natively) for m.fc's call
    finally:
        handle.remove()
    # With a global hook the wrapper compiles a frame that calls the module (so its hooks run once, as in eager);
    # that call is refused with the reason, and the module runs natively with every hook
    assert any("global module hooks" in r for r in _breaks())
    _same(f(x), m(x))  # and without the hook, the first compile serves again
    assert cnt.frame_count == 1


# --------------------------------------------------------------------------------------------------------------
# torch.autocast
# --------------------------------------------------------------------------------------------------------------
def _mm_on_off(x, w):
    a = x @ w
    with torch.autocast("cpu", dtype=torch.bfloat16):
        b = x @ w
        on = torch.is_autocast_enabled("cpu")
        with torch.autocast("cpu", enabled=False):
            c = x @ w
    return a, b, c, on, torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("backend", ["counter", "aot_eager", "inductor"])
def test_autocast_on_and_off_match_eager(backend):
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    cnt = CompileCounter()
    out = minidynamo.minicompile(_mm_on_off, backend=cnt if backend == "counter" else backend)(x, w)
    ref = _mm_on_off(x, w)
    assert [getattr(o, "dtype", o) for o in out] == [torch.float32, torch.bfloat16, torch.float32, True, False]
    if backend == "inductor":
        torch.testing.assert_close(out, ref)
    else:
        _same(out, ref)
    assert not _breaks() and not torch.is_autocast_enabled("cpu")
    if backend == "counter":
        targets = [n.target for n in cnt.graphs[0].graph.nodes]
        assert cnt.frame_count == 1
        assert targets.count(torch.amp._enter_autocast) == 2 and targets.count(torch.amp._exit_autocast) == 2


def test_autocast_spellings_and_disabled_block():
    def f(x):
        with torch.amp.autocast("cpu"):
            a = torch.mm(x, x)
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            b = torch.mm(x, x)
        with torch.autocast("cpu", enabled=False):
            c = torch.mm(x, x)
        return a, b, c

    x = torch.randn(4, 4)
    cnt = CompileCounter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.cpu.amp.autocast is deprecated
        out = minidynamo.minicompile(f, backend=cnt)(x)
        ref = f(x)
    _same(out, ref)
    assert [o.dtype for o in out] == [torch.bfloat16, torch.bfloat16, torch.float32]
    assert cnt.frame_count == 1 and not _breaks()


def test_ambient_autocast_is_guarded():
    def f(x):
        return x @ x, torch.is_autocast_enabled("cpu")

    x = torch.randn(4, 4)
    cnt = CompileCounter()
    g = minidynamo.minicompile(f, backend=cnt)
    _same(g(x), f(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, ref = g(x), f(x)
    _same(out, ref)
    assert out[0].dtype == torch.bfloat16 and out[1] is True
    assert cnt.frame_count == 2 and _recompiles() == 1 and not _breaks()


def test_graph_break_inside_autocast_reenters_it():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            b = x @ w
            minidynamo.graph_break()
            c = b @ w.T
            on = torch.is_autocast_enabled("cpu")
        return b, c, c.float() + 1, on

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    cnt = CompileCounter()
    g = minidynamo.minicompile(f, backend=cnt)
    ref = f(x, w)
    for _ in range(2):
        _same(g(x, w), ref)
        assert not torch.is_autocast_enabled("cpu")
    # before the break | the rest of the block | after the block: the block is exited natively, where it was
    # re-entered (like record_function), which is a second break
    assert cnt.frame_count == 3 and _recompiles() == 0
    assert _breaks() == {"minidynamo.graph_break() was called": 1, "AutocastExit.__call__ is marked minidynamo.disable": 1}


def test_no_grad_and_autocast_nested():
    def f(x, w):
        with torch.no_grad():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = x @ w
            z = y.float() * 2
        return y, z, x @ w

    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 3)
    cnt = CompileCounter()
    out = minidynamo.minicompile(f, backend=cnt)(x, w)
    ref = f(x, w)
    _same(out, ref)
    assert [(o.dtype, o.requires_grad) for o in out] == [(r.dtype, r.requires_grad) for r in ref]
    assert cnt.frame_count == 1 and not _breaks()
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


def test_setting_autocast_state_directly_is_a_graph_break():
    def f(x):
        torch.set_autocast_enabled("cpu", True)
        y = x @ x
        torch.set_autocast_enabled("cpu", False)
        return y + 1

    x = torch.randn(4, 4)
    cnt = CompileCounter()
    out = minidynamo.minicompile(f, backend=cnt)(x)
    _same(out, f(x))
    assert out.dtype == torch.bfloat16 and not torch.is_autocast_enabled("cpu")
    assert _breaks() == {"`torch.set_autocast_enabled` changes global state": 2}


def test_hooks_of_the_compiled_module_itself_run():
    """``minicompile(module)`` runs the module's own hooks, as ``torch.compile(module)`` does (it compiles
    ``_orig_mod.__call__``); a hook added after compiling recompiles, and removing it needs no new compile."""
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    cnt = CompileCounter()
    compiled = minidynamo.minicompile(m, backend=cnt)
    x = torch.randn(2, 4)
    assert torch.equal(compiled(x), m(x)) and cnt.frame_count == 1
    pre = m.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
    post = m.register_forward_hook(lambda mod, inp, out: out * 2)
    assert torch.allclose(compiled(x), m(x)) and cnt.frame_count == 2
    assert not minidynamo.counters["graph_break"] and not minidynamo.counters["eager_fallback"]
    pre.remove()
    post.remove()
    assert torch.equal(compiled(x), m(x)) and cnt.frame_count == 2
