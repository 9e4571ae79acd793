"""Caches that make translation faster (issue #7): each returns what the uncached computation returns, and is keyed
so that a changed function (a new code object) never sees another function's entry."""
import contextlib
import dis
import re

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import minidynamo
from minidynamo import bytecode_transformation as bt
from minidynamo.resume_execution import abstract_instructions, copy_instruction


def _one(x, y):
    z = x[y]
    return z + 1


def _two(x, y):
    z = x[y]
    return z - 1


def _subscript_offset(fn) -> int:
    return next(i.offset for i in dis.get_instructions(fn) if i.opname == "BINARY_SUBSCR")


def _binary_op_offset(fn) -> int:
    return next(i.offset for i in dis.get_instructions(fn) if i.opname == "BINARY_OP")


def test_copy_instruction_matches_bytecode_and_is_a_new_object_each_time():
    offset = _subscript_offset(_one)
    first, second = copy_instruction(_one.__code__, offset), copy_instruction(_one.__code__, offset)
    assert first is not second  # callers put it in generated code: never share one Instr between two of them
    expected = abstract_instructions(_one.__code__)[1][offset]
    assert (first.name, first.arg) == (second.name, second.arg) == (expected.name, expected.arg)


def test_copy_instruction_follows_a_changed_function():
    """``_one`` and ``_two`` differ only in one operator: each code object gets its own instruction."""
    a = copy_instruction(_one.__code__, _binary_op_offset(_one))
    b = copy_instruction(_two.__code__, _binary_op_offset(_two))
    assert a.arg != b.arg
    src = "def f(x, y):\n    return x + y\n"
    ns1, ns2 = {}, {}
    exec(compile(src, "file_one.py", "exec"), ns1)  # noqa: S102
    exec(compile(src.replace("+", "*"), "file_one.py", "exec"), ns2)  # noqa: S102  (same file and lines)
    off = _binary_op_offset(ns1["f"])
    assert copy_instruction(ns1["f"].__code__, off).arg != copy_instruction(ns2["f"].__code__, off).arg


def _loop(x, n):
    for i in range(n):
        x = x + 1
        y = x * 2  # noqa: F841
    return x


def _loop_reads_i(x, n):
    for i in range(n):
        x = x + 1
        y = x * i  # noqa: F841
    return x


def test_livevars_analysis_is_cached_per_code_object_and_returns_a_fresh_set():
    from minidynamo.bytecode_analysis import livevars_analysis
    add = _binary_op_offset(_loop)  # ``x + 1``: x is written next; ``i`` is never read
    loop = next(i.offset for i in dis.get_instructions(_loop) if i.opname == "FOR_ITER")
    assert livevars_analysis(_loop.__code__, add) == set()
    live = livevars_analysis(_loop.__code__, loop)
    assert live == {"x"}
    live.add("junk")  # callers may change what they get: the cached answer must not change with it
    assert livevars_analysis(_loop.__code__, loop) == {"x"}
    # A changed function (it reads ``i`` after that point) gets its own answer at the same kind of offset.
    assert livevars_analysis(_loop_reads_i.__code__, _binary_op_offset(_loop_reads_i)) == {"i"}


def _symbolic_program(x, w, mask):
    a = torch.nn.functional.linear(x, w)
    b = torch.nn.functional.gelu(a)
    c = torch.nn.functional.gelu(a)  # the same op on the same fakes: a dispatch-cache hit when the cache is on
    if x.shape[0] > 2:  # a guard on a symbolic size
        b = b * 2
    picked = x[mask]  # data-dependent: a graph break
    return (b + c)[:, :3].sum(-1), picked.sum()


def _compile_record(monkeypatch, cache_on: bool, inputs) -> tuple[list, list]:
    from minidynamo.explain import _entries
    from minidynamo.variables import tensor as tensor_vars
    if cache_on:
        monkeypatch.setattr(tensor_vars, "no_dispatch_cache", lambda mode: contextlib.nullcontext())
    fn = minidynamo.minicompile(_symbolic_program, backend="eager")
    outs = [fn(*args) for args in inputs]
    for args, out in zip(inputs, outs):
        expected = _symbolic_program(*args)
        assert all(torch.allclose(o, e) for o, e in zip(out, expected))
    entries = _entries(fn)
    monkeypatch.undo()
    graphs = [e.graph_module.code if e.graph_module is not None else None for e in entries]
    text = repr(([str(e.guard_manager) for e in entries], graphs, [bt.format_code(e.code) for e in entries]))
    return re.sub(r"(__compiled_fn|__resume_at|___const_\w+?)_[0-9_]+", r"\1", text)  # names hold counters, ids


def test_tracing_without_the_fake_dispatch_cache_gives_the_same_graphs_and_guards(monkeypatch):
    """[Note: no fake dispatch cache while tracing]: the cache is invisible, so turning it off changes nothing
    but time.  Sizes change between calls (automatic dynamic: symbolic sizes, guards on them, recompiles)."""
    def inputs(n):
        g = torch.Generator().manual_seed(n)
        return torch.randn(n, 8, generator=g), torch.randn(6, 8, generator=g), torch.rand(n, generator=g) > 0.5
    calls = [inputs(n) for n in (4, 5, 7, 2)]
    hits = FakeTensorMode.cache_hits
    without = _compile_record(monkeypatch, False, calls)
    hits_without, hits = FakeTensorMode.cache_hits - hits, FakeTensorMode.cache_hits
    assert without == _compile_record(monkeypatch, True, calls)
    assert FakeTensorMode.cache_hits - hits > hits_without  # the comparison did exercise the cache


def test_run_fake_turns_the_dispatch_cache_off_and_back_on():
    from minidynamo.variables.tensor import no_dispatch_cache
    mode = FakeTensorMode()
    before = mode.cache_enabled
    with no_dispatch_cache(mode):
        assert mode.cache_enabled is False
    assert mode.cache_enabled == before
    try:
        with no_dispatch_cache(mode):
            raise RuntimeError("a fake op failed")
    except RuntimeError:
        pass
    assert mode.cache_enabled == before
