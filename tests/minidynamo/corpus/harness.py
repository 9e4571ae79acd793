"""The corpus harness: run a program eagerly, with real Dynamo and with minidynamo, and compare.

What goes in: a ``corpus.Program`` (or a scenario of ``Step``s for guard tests).  What comes out: assertions that
minidynamo's results equal eager PyTorch's (values, output types and structure, mutated inputs, globals, printed
text, gradients) and that its graph and op counts equal **real Dynamo's**, computed live with
``torch._dynamo.testing.CompileCounter`` -- torch is the oracle for counts as well as for values.

Oracle self-test: ``MINIDYNAMO_ORACLE_SELFTEST=1`` routes the API under test (``minicompile``, ``CompileCounter``,
``counters``, ``explain``, ``reset``, ``config``, ``exc.Unsupported``) to ``torch._dynamo``, so the corpus itself can be
checked while minidynamo is being written.  Mirrors the ``make_test``/``CompileCounter`` helpers of PyTorch's
``test/dynamo`` (``torch/_dynamo/testing.py``).

Example::

    def test_program(md, prog):
        check_program(md, prog)
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import math
import operator
import os
import types
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch._dynamo.utils

ORACLE_SELFTEST = os.environ.get("MINIDYNAMO_ORACLE_SELFTEST") == "1"


# ----------------------------------------------------------------------------------------------------------------
# The API under test: minidynamo, or (self-test) torch._dynamo behind the same names.
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Api:
    minicompile: Callable
    explain: Callable
    reset: Callable
    graph_break: Callable
    config: Any
    counters: Any
    CompileCounter: type
    Unsupported: type
    oracle: bool  # True when this *is* torch._dynamo (the self-test)


def reset_real_dynamo() -> None:
    """torch._dynamo.reset() leaves the counters alone; minidynamo.reset() clears both."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


def load_api() -> Api:
    if ORACLE_SELFTEST:
        return Api(torch.compile, torch._dynamo.explain, reset_real_dynamo, torch._dynamo.graph_break,
                   torch._dynamo.config, torch._dynamo.utils.counters, torch._dynamo.testing.CompileCounter,
                   torch._dynamo.exc.Unsupported, oracle=True)
    import minidynamo
    import minidynamo.exc
    import minidynamo.testing
    import minidynamo.utils

    return Api(minidynamo.minicompile, minidynamo.explain, minidynamo.reset, minidynamo.graph_break,
               minidynamo.config, minidynamo.utils.counters, minidynamo.testing.CompileCounter,
               minidynamo.exc.Unsupported, oracle=False)


# ----------------------------------------------------------------------------------------------------------------
# Structural equality: types, containers, tensors, user objects, modules.
# ----------------------------------------------------------------------------------------------------------------
_ATOMS = (int, float, bool, str, bytes, complex, type(None), torch.dtype, torch.device, slice, range, type)


def assert_same(actual: Any, expected: Any, path: str = "out") -> None:
    """Equal values *and* equal types/structure (tuple vs list, dict key order, int vs float vs bool)."""
    assert type(actual) is type(expected), f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        _assert_same_tensor(actual, expected, path)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, (set, frozenset)):
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, types.FunctionType):  # fresh lambdas per run: same code is the same function
        assert actual.__code__ is expected.__code__, f"{path}: {actual!r} is not {expected!r}"
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), f"{path}: {actual!r} is not nan"
    elif isinstance(expected, _ATOMS) or callable(expected) and not hasattr(expected, "__dict__"):
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, torch.nn.Module):
        _assert_same_module(actual, expected, path)
    elif hasattr(expected, "__dict__") and not isinstance(expected, (types.FunctionType, types.ModuleType)):
        _assert_same_attrs(actual, expected, path)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _assert_same_tensor(actual: torch.Tensor, expected: torch.Tensor, path: str) -> None:
    assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.device == expected.device, f"{path}: device {actual.device} != {expected.device}"
    assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
    # The graphs run the same ATen ops as eager, so results are (nearly always) bitwise equal; tight tolerance.
    torch.testing.assert_close(actual.detach(), expected.detach(), rtol=1e-5, atol=1e-6, equal_nan=True,
                               msg=lambda m: f"{path}: {m}")


def _assert_same_module(actual: torch.nn.Module, expected: torch.nn.Module, path: str) -> None:
    assert actual.training == expected.training, f"{path}.training differs"
    a_state, e_state = actual.state_dict(), expected.state_dict()
    assert list(a_state) == list(e_state), f"{path}: state_dict keys differ"
    for k in e_state:
        _assert_same_tensor(a_state[k], e_state[k], f"{path}.{k}")
    _assert_same_attrs(actual, expected, path)


def _public_attrs(obj: Any) -> dict:
    return {k: v for k, v in vars(obj).items() if not k.startswith("_") and k != "training"}


def _assert_same_attrs(actual: Any, expected: Any, path: str) -> None:
    a, e = _public_attrs(actual), _public_attrs(expected)
    assert sorted(a) == sorted(e), f"{path}: attributes {sorted(a)} != {sorted(e)}"
    for k in e:
        assert_same(a[k], e[k], f"{path}.{k}")


# ----------------------------------------------------------------------------------------------------------------
# Running a program: eagerly, or compiled by some `compile_fn(callable, backend=...)`.
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    """Everything a user could observe after calling a program `calls` times."""

    outputs: list
    inputs: list  # (args, kwargs) after each call: in-place mutations of inputs show here
    subject: Any  # the callable after the calls (a module's parameters/buffers/attributes may change)
    globals_after: dict
    stdout: str
    grads: list
    aliasing: list  # per call: which outputs are (views of) which inputs, see `alias_signature`


def _tensors_in(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors_in(o)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _tensors_in([getattr(obj, f.name) for f in dataclasses.fields(obj)])
    return []


def _backward_and_collect(out: Any, args: tuple, subject: Any) -> list:
    loss = sum(t.float().sum() for t in _tensors_in(out) if t.requires_grad)
    leaves = [a for a in _tensors_in(list(args)) if a.requires_grad]
    if isinstance(subject, torch.nn.Module):
        leaves += list(subject.parameters())
    if isinstance(loss, torch.Tensor):
        loss.backward()
    return [None if a.grad is None else a.grad.clone() for a in leaves]


def run_program(prog, compile_fn: Callable | None = None, **compile_kwargs) -> Run:
    """Call `prog` `prog.calls` times with fresh seeded inputs, eagerly or through `compile_fn`."""
    torch.manual_seed(0)
    subject = prog.make_callable()
    g = prog.module_globals()
    initial = prog.globals_() if prog.globals_ else {}
    g.update(initial)
    fn = compile_fn(subject, **compile_kwargs) if compile_fn else subject
    outputs, inputs, grads, aliasing, buf = [], [], [], [], io.StringIO()
    for i in range(prog.calls):
        torch.manual_seed(1000 + i)
        args, kwargs = prog.args(), (prog.kwargs() if prog.kwargs else {})
        with contextlib.redirect_stdout(buf):
            out = fn(*args, **kwargs)
        outputs.append(out)
        inputs.append((args, kwargs))
        aliasing.append(alias_signature(out, (args, kwargs)))
        if prog.grad:
            grads.append(_backward_and_collect(out, args, subject))
    return Run(outputs, inputs, subject, {k: g[k] for k in initial}, buf.getvalue(), grads, aliasing)


def alias_signature(out: Any, inputs: Any) -> list:
    """For each output tensor: ("is", j) when it *is* input tensor j, ("view", j) when it shares j's storage,
    None otherwise.  Returning an input, or a view of it, must stay that in the compiled program."""
    ins = _tensors_in(list(inputs))
    sig = []
    for o in _tensors_in(out):
        same = [j for j, i in enumerate(ins) if o is i]
        views = [j for j, i in enumerate(ins) if i.untyped_storage().data_ptr() == o.untyped_storage().data_ptr()
                 and o.numel() > 0]
        sig.append(("is", same[0]) if same else ("view", views[0]) if views else None)
    return sig


def assert_same_run(actual: Run, expected: Run, what: str) -> None:
    assert_same(actual.outputs, expected.outputs, f"{what}: outputs")
    assert_same(actual.inputs, expected.inputs, f"{what}: inputs after the calls")
    assert_same(actual.globals_after, expected.globals_after, f"{what}: globals")
    assert actual.stdout == expected.stdout, f"{what}: printed {actual.stdout!r} != {expected.stdout!r}"
    assert_same(actual.grads, expected.grads, f"{what}: gradients")
    assert actual.aliasing == expected.aliasing, f"{what}: output/input aliasing {actual.aliasing} != {expected.aliasing}"
    if not isinstance(expected.subject, (types.FunctionType, functools.partial)):
        assert_same(actual.subject, expected.subject, f"{what}: the called object afterwards")


VALIDATED_TORCH = "2.13."  # the corpus was checked against this real Dynamo (MINIDYNAMO_ORACLE_SELFTEST=1)


def check_oracle(compare: Callable, real: Any, expected: Any, what: str) -> bool:
    """Real Dynamo must reproduce eager on the validated torch; an older one (torch 2.11 on the GPU machine) has
    bugs of its own (e.g. star-unpacking a list gives a tuple on Python 3.12), so there it only warns.
    Returns whether real Dynamo agreed with eager: only then are its counts a reference for ours."""
    try:
        compare(real, expected, what)
    except AssertionError as e:
        if torch.__version__.startswith(VALIDATED_TORCH):
            raise
        warnings.warn(f"torch {torch.__version__}: {e}", stacklevel=2)
        return False
    return True


@dataclasses.dataclass
class Counts:
    frame_count: int
    op_count: int
    graphs: list  # readable code of each graph (real Dynamo), for failure messages
    live_frame_count: int  # the same counts after dead-code elimination (see `live_op_count`)
    live_op_count: int
    frames: dict = dataclasses.field(default_factory=dict)  # real Dynamo's counters["frames"]
    trusted: bool = True  # False where real Dynamo (an older torch) disagreed with eager: its counts say nothing

    def accepts(self, frames: int, ops: int | None) -> bool:
        """Real Dynamo's counts as captured, or after dead-code elimination: both are faithful translations."""
        raw, live = (self.frame_count, self.op_count), (self.live_frame_count, self.live_op_count)
        if ops is None:
            return frames in (raw[0], live[0])
        return (frames, ops) in (raw, live)

    def __str__(self) -> str:
        return (f"{self.frame_count} graphs / {self.op_count} ops (after DCE: {self.live_frame_count} graphs / "
                f"{self.live_op_count} ops)")


_OPS = ("call_function", "call_method", "call_module")
_INPLACE_OPERATORS = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
                      operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor}


def _has_side_effect(node: torch.fx.Node) -> bool:
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if node.target in _INPLACE_OPERATORS or (name.endswith("_") and not name.endswith("__")):
        return True  # an in-place op: its effect is the point, even when its result is unused
    try:
        return node.op == "call_function" and node.is_impure()
    except Exception:  # noqa: BLE001 - a target fx cannot classify: keep it
        return True


def live_op_count(gm: torch.fx.GraphModule) -> int:
    """Ops that reach an output or have a side effect.  [Note: dead nodes] Real Dynamo (2.13) leaves unused pure
    nodes in its graph (``c = a + b`` with ``c`` never used; ``x.split(2)`` whose only use is ``len``); a
    translator that eliminates them is equally correct, so the corpus accepts either count."""
    live: set = set()
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "output" or node in live or (node.op in _OPS and _has_side_effect(node)):
            live.add(node)
            live.update(node.all_input_nodes)
    return sum(n.op in _OPS for n in live)


class RecordingCounter(torch._dynamo.testing.CompileCounter):
    """Real Dynamo's CompileCounter that also keeps each graph's code and live op count."""

    def __init__(self):
        super().__init__()
        self.graphs: list[str] = []
        self.live_ops: list[int] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm.code.strip())
        self.live_ops.append(live_op_count(gm))
        return super().__call__(gm, example_inputs)

    def counts(self) -> Counts:
        return Counts(self.frame_count, self.op_count, self.graphs, sum(n > 0 for n in self.live_ops),
                      sum(self.live_ops))


def run_real_dynamo(prog, expected: Run) -> Counts:
    """Real Dynamo on the same program: the source of the expected counts (and a check of the program itself)."""
    reset_real_dynamo()
    cnt = RecordingCounter()
    real = run_program(prog, torch.compile, backend=cnt)
    trusted = check_oracle(assert_same_run, real, expected, f"{prog.name}: REAL DYNAMO vs eager (the program is wrong?)")
    breaks = dict(torch._dynamo.utils.counters["graph_break"])
    if breaks and not torch.__version__.startswith(VALIDATED_TORCH):
        trusted = False  # an older Dynamo (torch 2.11 on the GPU machine) breaks where the validated one does not
    else:
        assert not breaks, f"{prog.name}: real Dynamo graph-breaks, move it to test_corpus_breaks.py: {breaks}"
    torch._dynamo.reset()
    return dataclasses.replace(cnt.counts(), frames=dict(torch._dynamo.utils.counters["frames"]), trusted=trusted)


def _describe_ours(md: Api, prog) -> str:
    """On a count mismatch, show minidynamo's graphs too (best effort)."""
    try:
        md.reset()
        torch.manual_seed(0)
        subject = prog.make_callable()
        torch.manual_seed(1000)
        ex = md.explain(subject)(*prog.args(), **(prog.kwargs() if prog.kwargs else {}))
        return "\n".join(str(getattr(g, "code", g)).strip() for g in ex.graphs)
    except Exception as e:  # noqa: BLE001 - only decorates a failure message
        return f"<explain failed: {e!r}>"


def check_program(md: Api, prog) -> None:
    """The corpus rule: minidynamo == eager (everything observable), counts == real Dynamo's."""
    expected = run_program(prog)
    real = run_real_dynamo(prog, expected)

    md.reset()
    cnt = md.CompileCounter()
    ours = run_program(prog, md.minicompile, backend=cnt)
    assert_same_run(ours, expected, f"{prog.name} (backend=CompileCounter)")
    if real.trusted and not real.accepts(cnt.frame_count, cnt.op_count if prog.exact_ops else None):
        recorded = {k: dict(md.counters[k]) for k in ("graph_break", "eager_fallback") if md.counters[k]}
        pytest.fail(f"{prog.name}: minidynamo compiled {cnt.frame_count} graphs / {cnt.op_count} ops, real Dynamo "
                    f"{real}. minidynamo recorded {recorded}\nreal graphs:\n" + "\n".join(real.graphs)
                    + "\nminidynamo graphs:\n" + _describe_ours(md, prog))
    assert md.counters["stats"]["unique_graphs"] == cnt.frame_count, f"{prog.name}: counters['stats']"
    if real.trusted and real.frames.get("total") == 1:  # more means frames real Dynamo's PEP 523 hook saw called from C (sorted's key)
        assert dict(md.counters["frames"]) == real.frames, (
            f"{prog.name}: counters['frames'] {dict(md.counters['frames'])} != real Dynamo's {real.frames}")
    assert not md.counters["graph_break"], f"{prog.name}: unexpected graph breaks {dict(md.counters['graph_break'])}"
    assert not md.counters["eager_fallback"], f"{prog.name}: fell back to eager {dict(md.counters['eager_fallback'])}"

    md.reset()
    assert_same_run(run_program(prog, md.minicompile, backend="eager"), expected, f"{prog.name} (backend='eager')")


# ----------------------------------------------------------------------------------------------------------------
# Scenarios: a sequence of calls on one compiled callable (guards and recompiles).
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Step:
    args: Callable[[], tuple]
    before: Callable[[Any], None] | None = None  # gets the callable under test: mod.eval(), rebinding a global...


def run_steps(make: Callable, steps: list[Step], compile_fn: Callable | None = None, counter=None,
              globals_: Callable[[], dict] | None = None, **compile_kwargs) -> tuple[list, list[int]]:
    torch.manual_seed(0)
    subject = make()
    if globals_:
        getattr(make, "__globals__", {}).update(globals_())
    fn = compile_fn(subject, backend=counter, **compile_kwargs) if compile_fn else subject
    outputs, frames = [], []
    for i, step in enumerate(steps):
        if step.before:
            step.before(subject)
        torch.manual_seed(1000 + i)
        outputs.append(fn(*step.args()))
        frames.append(counter.frame_count if counter is not None else 0)
    return outputs, frames


def check_scenario(md: Api, make: Callable, steps: list[Step], *, expect_frames: list[int] | None = None,
                   globals_: Callable[[], dict] | None = None, check_recompiles: bool = True,
                   **compile_kwargs) -> list[int]:
    """Per step: minidynamo's output == eager's and its cumulative frame_count == real Dynamo's."""
    expected, _ = run_steps(make, steps, globals_=globals_)
    torch._dynamo.reset()
    real_out, real_frames = run_steps(make, steps, torch.compile, RecordingCounter(), globals_, **compile_kwargs)
    check_oracle(assert_same, real_out, expected, "REAL DYNAMO vs eager (the scenario is wrong?)")
    if expect_frames is not None:
        assert real_frames == expect_frames, f"real Dynamo compiled {real_frames}, the scenario says {expect_frames}"
    torch._dynamo.reset()

    md.reset()
    ours_out, ours_frames = run_steps(make, steps, md.minicompile, md.CompileCounter(), globals_, **compile_kwargs)
    assert_same(ours_out, expected, "minidynamo vs eager")
    assert ours_frames == real_frames, f"frame_count after each call: minidynamo {ours_frames}, real {real_frames}"
    if check_recompiles and not md.oracle:  # real Dynamo has no counters["recompiles"]; ours counts cache misses after the first
        assert md.counters["recompiles"]["total"] == real_frames[-1] - 1, dict(md.counters["recompiles"])
    return real_frames


# ----------------------------------------------------------------------------------------------------------------
# Programs that graph-break: correct results always; a break or an eager fallback, reported consistently.
# ----------------------------------------------------------------------------------------------------------------
def _explain_program(md: Api, prog):
    md.reset()
    torch.manual_seed(0)
    subject = prog.make_callable()
    torch.manual_seed(1000)
    with contextlib.redirect_stdout(io.StringIO()):
        return md.explain(subject)(*prog.args(), **(prog.kwargs() if prog.kwargs else {}))


def _recorded_a_break(counters) -> bool:
    """A graph break, an eager fallback (minidynamo), or a skipped frame (real Dynamo: 'unimplemented')."""
    return any(counters[k] for k in ("graph_break", "eager_fallback", "unimplemented"))


def check_break_program(md: Api, prog) -> None:
    g = prog.module_globals()
    expected = run_program(prog)
    g["graph_break"] = torch._dynamo.graph_break
    reset_real_dynamo()
    real = run_program(prog, torch.compile, backend=RecordingCounter())
    check_oracle(assert_same_run, real, expected, f"{prog.name}: REAL DYNAMO vs eager (the program is wrong?)")
    assert _recorded_a_break(torch._dynamo.utils.counters), f"{prog.name}: real Dynamo does not break: move it"

    g["graph_break"] = md.graph_break
    md.reset()
    ours = run_program(prog, md.minicompile, backend=md.CompileCounter())
    assert_same_run(ours, expected, f"{prog.name} (backend=CompileCounter)")
    assert md.counters["frames"]["total"] >= 1, f"{prog.name}: no frame was seen"
    assert _recorded_a_break(md.counters), (
        f"{prog.name}: neither a graph break nor an eager fallback was recorded: {dict(md.counters)}")
    md.reset()
    assert_same_run(run_program(prog, md.minicompile, backend="eager"), expected, f"{prog.name} (backend='eager')")

    # explain(): real Dynamo's own fields are not always consistent with each other (a break before the first op
    # leaves break_reasons empty; a skipped frame reports graph_break_count == -1), so only ask for sense.
    ex = _explain_program(md, prog)
    assert ex.graph_count == len(ex.graphs), f"{prog.name}: explain graph_count != len(graphs)"
    assert ex.op_count == sum(len(ops) for ops in ex.ops_per_graph), f"{prog.name}: explain op_count"
    assert all(isinstance(r.reason, str) and r.reason for r in ex.break_reasons), f"{prog.name}: empty reason"
    assert ex.break_reasons or _recorded_a_break(md.counters), f"{prog.name}: explain() saw no break"
