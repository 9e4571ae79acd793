"""The tour that ``make demo`` runs: ``python -m minidynamo.examples.demo``.

What goes in: nothing (it builds its own inputs). What comes out: a printed walk through the pipeline, and
artifacts in ``out/`` (``MINICOMPILE_OUT``; gitignored): pictures as DOT text and, when Graphviz is installed, SVG,
and mininductor's debug dumps. On a 2-core CPU it takes about a minute with ``MINICOMPILE_DEMO_QUICK=1``, a few more
without (torch.compile's C++ compiles).

Why: one command that shows a newcomer every stage on the README's running example,

    def f(x, w):
        return torch.relu(x @ w).sum(-1)

    1. the environment (versions, GPU or CPU -- on CPU, Triton kernels run in Triton's interpreter);
    2. capture with ``minicompile(f, backend="eager")``: ``explain`` and ``show_guards``;
    3. the bytecode before and after translation (``show_transformed``);
    4. ``explain`` on the running example ``toy``, which has a data-dependent branch;
    5. a picture of the graph (``minidynamo.viz.draw_graph``);
    6. compile with the default backend (mininductor) and count the kernels it generated;

then the workload it is built for, the MoE of ``minidynamo/examples/moe.py`` (the reference size on a GPU, the small
one on CPU):

    7. the tutorial MoE compiled unmodified: graphs, graph breaks (reason and ``moe.py:line``), guards, the
       kernels generated (names, count, ATen fallbacks) and the max abs difference from eager -- eval outputs,
       then a train-mode forward (outputs, aux loss) and its gradients;
    8. the same for the compile-friendly MoE (one graph);
    9. a timing table, eager / torch.compile / minicompile x {eval forward, train step}, in ms (median of several
       calls). ``MINICOMPILE_DEMO_QUICK=1`` skips torch.compile (30+ s per model on CPU);
   10. ``torch.profiler`` over one compiled forward of the tutorial MoE: its ``record_function`` regions, and the
       generated kernels by name (on a GPU; on CPU the interpreter launches no device kernels);
   11. pictures (the friendly MoE's graph and guards, the tutorial MoE's break map) and mininductor's debug dump,
       one folder per compiled graph: ``out/debug/<kind>/graph_<k>/`` holds ``output_code.py``,
       ``fx_graph_readable.py``, ``ir_pre_fusion.txt`` and ``ir_post_fusion.txt``.

Upstream twin: none -- this plays the role of the ``torch.compile`` tutorials.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import os
import platform
import re
import shutil
import statistics
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

OUT = Path(os.environ.get("MINICOMPILE_OUT", "out"))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    # Triton only compiles for GPUs; on CPU the same kernels run in Triton's interpreter. It must be chosen
    # before triton is first imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def f(x, w):
    """The running example without graph breaks: one FX graph, one matmul, one fused relu+sum."""
    return torch.relu(x @ w).sum(-1)


def toy(x, y):
    """The running example with a data-dependent branch: a graph break once breaks land."""
    a = torch.sin(x) + y
    if a.sum() > 0:
        return a * 2
    return a - 1


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 16, generator=g).to(DEVICE), torch.randn(16, 4, generator=g).to(DEVICE)


def step(title: str, fn: Callable[[], None]) -> bool:
    """Run one stage of the tour; a stage that fails is reported, never fatal."""
    print(f"\n== {title}")
    try:
        fn()
        return True
    except Exception as e:  # noqa: BLE001 -- the tour must survive any unfinished stage
        print(f"   not yet available: {type(e).__name__}: {e}")
        if os.environ.get("MINICOMPILE_DEBUG"):
            traceback.print_exc()
        return False


def show_environment() -> None:
    print(f"   python {platform.python_version()}, torch {torch.__version__}, triton {_version('triton')}")
    if DEVICE == "cuda":
        print(f"   device: GPU {torch.cuda.get_device_name()}")
    else:
        print("   device: CPU (no GPU) -- Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1)")
    print(f"   graphviz dot: {shutil.which('dot') or 'missing (pictures are written as DOT text only)'}")
    print(f"   artifacts: {OUT.resolve()}")


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({type(e).__name__})"


def capture_with_eager_backend() -> None:
    import minidynamo

    x, w = example_inputs()
    compiled = minidynamo.minicompile(f, backend="eager")
    same = torch.allclose(compiled(x, w), f(x, w))
    print(f"   minicompile(f, backend='eager')(x, w) matches eager: {same}")
    report = minidynamo.explain(f)(x, w)
    ops = ", ".join(_op_name(op) for graph_ops in report.ops_per_graph for op in graph_ops)
    print(f"   explain(f): {report.graph_count} graph(s), {report.graph_break_count} graph break(s), ops: {ops}")
    print("   show_guards(compiled): what must stay true for the compiled code to be reused")
    print(_indent(_text_of(minidynamo.show_guards, compiled)))


def show_bytecode() -> None:
    import minidynamo

    compiled = minidynamo.minicompile(f, backend="eager")
    compiled(*example_inputs())
    print(_indent(_text_of(minidynamo.show_transformed, compiled)))


def explain_toy() -> None:
    import minidynamo

    x, y = example_inputs()[0], torch.randn(8, 16, device=DEVICE)
    report = minidynamo.explain(toy)(x, y)
    print(f"   toy: {report.graph_count} graph(s), {report.graph_break_count} graph break(s)")
    for reason in report.break_reasons:
        print(f"     break: {reason.reason}")


def draw_f() -> None:
    from minidynamo import viz

    gm, origin = _graph_of_f()
    print(f"   graph of f ({origin}):")
    print(_indent(gm.code.strip()))
    dot = viz.draw_graph(gm, name="f")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "f_graph.dot").write_text(dot.source)
    if shutil.which("dot"):
        (OUT / "f_graph.svg").write_text(viz.render_svg(dot))
        print(f"   wrote {OUT / 'f_graph.dot'} and {OUT / 'f_graph.svg'}")
    else:
        print(f"   wrote {OUT / 'f_graph.dot'} (install Graphviz for the SVG)")


def _graph_of_f() -> tuple[torch.fx.GraphModule, str]:
    """The graph minidynamo captures for f; torch.fx.symbolic_trace's while capture is not built yet."""
    x, w = example_inputs()
    try:
        import minidynamo

        graphs = minidynamo.explain(f)(x, w).graphs
        return graphs[0], "captured by minidynamo"
    except Exception as e:  # noqa: BLE001
        print(f"   (minidynamo capture not yet available: {type(e).__name__}; using torch.fx.symbolic_trace)")
        from torch.fx.passes.shape_prop import ShapeProp

        gm = torch.fx.symbolic_trace(f)
        ShapeProp(gm).propagate(x, w)  # shapes for the arrows
        return gm, "traced by torch.fx.symbolic_trace"


def compile_with_mininductor() -> None:
    import minidynamo
    import mininductor

    x, w = example_inputs()
    mininductor.metrics.reset()
    compiled = minidynamo.minicompile(f)  # default backend: mininductor
    same = torch.allclose(compiled(x, w), f(x, w), rtol=1e-4, atol=1e-4)
    m = mininductor.metrics
    print(f"   minicompile(f)(x, w) matches eager: {same}")
    print(
        f"   kernels generated: {m.generated_kernel_count}, extern calls: {getattr(m, 'extern_call_count', '?')}, "
        f"fallbacks: {m.fallback_count}"
    )


# ---------------------------------------------------------------------------------------------------------
# Steps 7-11: the MoE workload, the program minicompile is built for (minidynamo/examples/moe.py).
# ---------------------------------------------------------------------------------------------------------
# [Note: the demo's MoE section]
# Steps 7 and 8 compile one MoE each and keep it in MOE; steps 9-11 (timings, profiler, artifacts) read it, so a
# step that fails leaves the later ones to say "not yet available" on their own. The backend is mininductor's
# "inductor", unchanged, wrapped only to keep each compiled graph (its output code names the kernels) and to give
# each graph its own debug folder: ``debug_dir`` writes fixed file names, so graphs sharing one would overwrite.

QUICK = os.environ.get("MINICOMPILE_DEMO_QUICK", "") not in ("", "0")  # skip torch.compile (30+ s per model on CPU)
MOE_SIZE = "reference" if DEVICE == "cuda" else "small"
TRAIN_WARMUP = 20 if DEVICE == "cuda" else 2  # train steps before timing: see _time_cell
KERNEL_NAME = re.compile(r"\btriton_(?:poi|per|red)_fused_\w+")
MOE: dict[str, CompiledMoE] = {}  # kind -> what steps 7 and 8 made


@dataclasses.dataclass
class CompiledMoE:
    """One MoE kind: the eager module, its minicompiled wrapper, the graphs mininductor compiled for it."""

    kind: str
    model: torch.nn.Module
    compiled: Callable
    compiled_graphs: list  # what the inductor backend returned, one per Dynamo graph
    x: torch.Tensor
    report: Any = None  # minidynamo.explain(model)(x), eval mode
    torch_compiled: Callable | None = None  # torch.compile(model), made by step 9 unless it is skipped


def compile_moe(kind: str) -> None:
    """Step 7/8: explain, compile (eval forward, then train step) and check one MoE kind against eager."""
    from minidynamo.examples import moe

    x = moe.make_moe_input(MOE_SIZE, seed=1, device=DEVICE)
    tutorial = moe.make_moe("tutorial", MOE_SIZE, device=DEVICE).eval()
    model = tutorial if kind == "tutorial" else moe.friendly_from_tutorial(tutorial).eval()
    size = moe.MOE_SIZES[MOE_SIZE]
    print(f"   {kind} MoE, {MOE_SIZE!r} size on {DEVICE}: {size.num_experts} experts, top-{size.top_k}, "
          f"capacity {size.expert_capacity}, batch {tuple(x.shape)}")
    entry = _compile(kind, model, x)
    _print_capture(entry)
    _print_kernels(entry)
    _check_against_eager(entry)
    MOE[kind] = entry


def _compile(kind: str, model: torch.nn.Module, x: torch.Tensor) -> CompiledMoE:
    import minidynamo
    import mininductor

    with _progress(f"explaining {kind} MoE (tracing, no compiling)"), torch.no_grad(), _quiet_warnings():
        report = minidynamo.explain(model)(x)
    minidynamo.counters.clear()
    mininductor.metrics.reset()
    graphs: list = []
    compiled = minidynamo.minicompile(model, backend=_recording_inductor(graphs, OUT / "debug" / kind))
    with _progress(f"compiling {kind} MoE forward"), torch.no_grad(), _quiet_warnings() as caught:
        compiled(x)
    _print_warnings(caught)
    return CompiledMoE(kind, model, compiled, graphs, x, report)


def _recording_inductor(graphs: list, debug_root: Path) -> Callable:
    """The "inductor" backend, keeping each compiled graph and dumping it to ``debug_root/graph_<k>``."""
    import minidynamo
    import mininductor

    inductor = minidynamo.backends.lookup_backend("inductor")

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        with mininductor.config.patch(debug_dir=str(debug_root / f"graph_{len(graphs)}")):
            compiled = inductor(gm, example_inputs)
        graphs.append(compiled)
        return compiled

    return backend


def _print_capture(entry: CompiledMoE) -> None:
    report = entry.report
    print(f"   graphs: {report.graph_count}, graph breaks: {report.graph_break_count}, "
          f"guards: {len(report.out_guards)}")
    for (where, reason), n in collections.Counter(map(_break_site, report.break_reasons)).items():
        print(f"     break {n}x at {where}: {_clip(reason, 100)}")


def _break_site(reason) -> tuple[str, str]:
    """``("moe.py:129", "data-dependent output shape: ...")``: where the user's code broke, and why."""
    frame = reason.user_stack[-1] if reason.user_stack else None
    where = f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"
    return where, reason.reason


def _print_kernels(entry: CompiledMoE) -> None:
    import minidynamo
    import mininductor

    m = mininductor.metrics
    names = _kernel_names(entry.compiled_graphs)
    print(f"   compiled: {minidynamo.counters['stats']['unique_graphs']} graph(s) -> {m.generated_kernel_count} "
          f"Triton kernel(s), {m.extern_call_count} extern call(s) (matmuls)")
    print(f"   kernels: {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}")
    fallbacks = collections.Counter(m.fallback_ops)
    print(f"   ATen fallbacks ({m.fallback_count}): "
          + (", ".join(f"{op} x{n}" for op, n in fallbacks.items()) or "none"))


def _kernel_names(compiled_graphs: list) -> list[str]:
    """Kernel names, in order, read off each graph's output code (forward, and backward once it ran)."""
    names: list[str] = []
    for source in map(_output_codes, compiled_graphs):
        names += [n for n in KERNEL_NAME.findall("\n".join(source)) if n not in names]
    return names


def _output_codes(compiled: Callable) -> list[str]:
    aot = getattr(compiled, "aot_graphs", None)  # the training-capable path keeps forward and backward
    fns = [aot.compiled_fw, aot.compiled_bw] if aot is not None else [compiled]
    return [code for fn in fns if isinstance(code := getattr(fn, "source", None), str)]


def _check_against_eager(entry: CompiledMoE) -> None:
    """Max |compiled - eager|: eval outputs, then a train-mode forward (outputs, aux loss) and its gradients."""
    model, x = entry.model, entry.x
    with torch.no_grad(), _quiet_warnings():
        print(f"   max abs diff vs eager, eval: outputs {_diff(entry.compiled(x)[0], model(x)[0]):.2e}")
    model.train()
    expected, expected_grads = _forward_backward(model, x)
    compiling = _progress(f"compiling {entry.kind} MoE train step (forward + backward)")
    with compiling, _quiet_warnings() as caught, _debug_dir_for_backward(entry.kind):
        got, got_grads = _forward_backward(entry.compiled, x, model)
    _print_warnings(caught)
    grads = max(_diff(a, b) for a, b in zip(got_grads, expected_grads, strict=True))
    print(f"   max abs diff vs eager, train: outputs {_diff(got[0], expected[0]):.2e}, "
          f"aux loss {_diff(got[1], expected[1]):.2e}, gradients {grads:.2e}")
    _print_kernels(entry)  # now with the train-mode forward and the backward graphs
    model.eval()


def _forward_backward(fn: Callable, x: torch.Tensor, model: torch.nn.Module | None = None) -> tuple:
    model = model or fn
    model.zero_grad(set_to_none=True)
    outputs, aux = fn(x)
    (outputs.square().mean() + aux).backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad(set_to_none=True)
    return (outputs.detach(), torch.as_tensor(aux).detach()), grads


def _debug_dir_for_backward(kind: str):
    """Backward graphs compile at the first ``backward()``, outside the backend: they dump to ``backward/``."""
    import mininductor

    return mininductor.config.patch(debug_dir=str(OUT / "debug" / kind / "backward"))


def _diff(a, b) -> float:
    return (torch.as_tensor(a).float() - torch.as_tensor(b).float()).abs().max().item()


# --- step 9: the timing table ----------------------------------------------------------------------------


def time_moe() -> None:
    """Median ms of an eval forward and of a train step (AdamW), eager / torch.compile / minicompile."""
    if not MOE:
        raise RuntimeError("no MoE was compiled (steps 7 and 8)")
    fwd_iters, train_iters = (20, 10) if DEVICE == "cuda" else (5, 3)
    with _one_cpu_thread():
        rows = [(kind, phase, [_time_cell(kind, phase, compiler,
                                          fwd_iters if phase == "eval forward" else train_iters)
                               for compiler in ("eager", "torch.compile", "minicompile")])
                for kind in MOE for phase in ("eval forward", "train step")]
    print(f"\n   MoE timing table: ms per call, median of {fwd_iters} forwards / {train_iters} train steps "
          f"({MOE_SIZE} size, {DEVICE})")
    print(f"   {'model':<10}{'phase':<14}{'eager':>10}{'torch.compile':>15}{'minicompile':>13}")
    for kind, phase, cells in rows:
        print(f"   {kind:<10}{phase:<14}{cells[0]:>10}{cells[1]:>15}{cells[2]:>13}")
    if DEVICE == "cpu":
        print("   * on CPU minicompile's kernels run in Triton's interpreter (TRITON_INTERPRET=1: each kernel is\n"
              "     Python over NumPy, program by program), so its column measures the interpreter, not the\n"
              "     generated code; run on a GPU to compare compilers (bench/moe.py, docs/benchmarks.md).")
        print("   * CPU timings use one intra-op thread: on a shared machine, spinning OpenMP threads made eager\n"
              "     times swing by 100x from run to run.")
    print(f"   * train steps are timed after {TRAIN_WARMUP} warm-up steps for every compiler: each step changes the\n"
          "     weights, so the routing, and the tutorial MoE meets (expert, case) pairs it has not compiled yet\n"
          "     (one row, or more rows than its capacity) for a while; each costs minicompile a translation.")
    if QUICK:
        print("   * torch.compile skipped: MINICOMPILE_DEMO_QUICK is set (unset it for the full table).")


def _time_cell(kind: str, phase: str, compiler: str, iters: int) -> str:
    if compiler == "torch.compile" and QUICK:
        return "skipped"
    entry = MOE[kind]
    try:
        fn = _compiled_for(entry, compiler)
        with _progress(f"timing {compiler} {kind} MoE {phase}", quiet=compiler == "eager"), _quiet_warnings():
            train = phase != "eval forward"
            # train steps change the weights and so the routing: the tutorial MoE meets new (expert, case) pairs
            # for a while and minicompile translates each once; every compiler gets the same warm-up steps
            ms = _median_ms(_train_step(fn, entry) if train else _forward(fn, entry), iters,
                            warmup=TRAIN_WARMUP if train else 2)
        return f"{ms:.2f}"
    except Exception as e:  # noqa: BLE001 -- one failing cell must not lose the table
        print(f"     {compiler} {kind} {phase} failed: {type(e).__name__}: {_clip(str(e), 100)}")
        return "failed"


@contextlib.contextmanager
def _one_cpu_thread():
    """On CPU, time with ``torch.set_num_threads(1)`` (see the footnote); on a GPU change nothing."""
    prior = torch.get_num_threads()
    if DEVICE == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prior)


def _compiled_for(entry: CompiledMoE, compiler: str) -> Callable:
    if compiler == "eager":
        return entry.model
    if compiler == "minicompile":
        return entry.compiled  # compiled and warmed up by steps 7/8: no compile time in its cells
    if entry.torch_compiled is None:
        entry.torch_compiled = torch.compile(entry.model)  # one wrapper per model: eval and train share it
    return entry.torch_compiled


def _forward(fn: Callable, entry: CompiledMoE) -> Callable[[], Any]:
    def forward():
        entry.model.eval()
        with torch.no_grad():
            return fn(entry.x)

    return forward


def _train_step(fn: Callable, entry: CompiledMoE) -> Callable[[], Any]:
    """One step of ``moe.train_steps``'s loop on a fixed batch: forward, MSE + aux loss, backward, clip, AdamW."""
    opt = torch.optim.AdamW(entry.model.parameters(), lr=5e-4)
    y = torch.randn(entry.x.shape[0], entry.model.gate.in_features, device=DEVICE)  # both MoEs: out == in dim

    def step():
        entry.model.train()
        outputs, aux = fn(entry.x)
        loss = torch.nn.functional.mse_loss(outputs, y) + 1e-2 * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(entry.model.parameters()), 1.0)
        opt.step()

    return step


def _median_ms(fn: Callable[[], Any], iters: int, warmup: int = 2) -> float:
    """Wall-clock median; the first calls (compiling, autotuning, caches) are warm-up and not counted."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # GPU work is asynchronous: wait for it, or we time the launches only


# --- step 10: what torch.profiler sees -------------------------------------------------------------------


def profile_moe() -> None:
    """One compiled eval forward of the tutorial MoE under ``torch.profiler``: regions and kernels it saw."""
    from torch.profiler import ProfilerActivity, profile

    entry = _moe("tutorial")
    entry.model.eval()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    with torch.no_grad(), _quiet_warnings():
        entry.compiled(entry.x)  # warm: only the run itself is profiled
        with profile(activities=activities) as prof:
            entry.compiled(entry.x)
            _sync()
    events = prof.key_averages()
    regions = [e for e in events if e.key.startswith("MoE_")]
    print("   record_function regions: " + (", ".join(f"{e.key} x{e.count}" for e in regions) or "none"))
    seen = [e.key for e in events if KERNEL_NAME.search(e.key)]
    print(f"   generated kernels seen by the profiler: {len(seen)}" + (f": {', '.join(seen[:4])}, ..." if seen else ""))
    if DEVICE == "cpu":
        _explain_cpu_profile(events, _kernel_names(entry.compiled_graphs))


def _explain_cpu_profile(events, kernels: list[str]) -> None:
    busiest = sorted(events, key=lambda e: e.count, reverse=True)[:6]
    print("   most frequent events: " + ", ".join(f"{e.key} x{e.count}" for e in busiest))
    print("   On CPU each Triton kernel runs in Triton's interpreter: a Python call, not a device kernel launch,\n"
          "   so the profiler records only the aten ops around it (empty buffers, copies) and the extern mm.\n"
          f"   On a GPU the same run lists the kernels by name, e.g. {', '.join(kernels[:2]) or 'triton_...'}:\n"
          "   the name spells the fused ATen ops, and output_code.py maps each kernel to its source lines.")


def _moe(kind: str) -> CompiledMoE:
    if kind not in MOE:
        raise RuntimeError(f"the {kind} MoE was not compiled (step 7/8 failed)")
    return MOE[kind]


# --- step 11: artifacts ----------------------------------------------------------------------------------


def write_moe_artifacts() -> None:
    """Pictures of the friendly MoE's graph and guards and of the tutorial MoE's break map, then list ``out/``."""
    from minidynamo import viz

    friendly, tutorial = _moe("friendly"), _moe("tutorial")
    _save(viz.draw_graph(friendly.report.graphs[0], name="friendly_moe"), "moe_friendly_graph")
    _save(viz.draw_guards(friendly.report.out_guards, name="guards of the friendly MoE"), "moe_friendly_guards")
    _save(viz.draw_break_map(tutorial.model, tutorial.report, name="break map of the tutorial MoE's forward"),
          "moe_tutorial_break_map")
    print(f"   files in {OUT}:")
    for line in _listing(OUT):
        print(f"     {line}")


def _save(dot, stem: str) -> None:
    """``stem.dot`` always; ``stem.svg`` too when Graphviz's ``dot`` program is installed."""
    from minidynamo import viz

    viz.save(dot, str(OUT / f"{stem}.dot"))
    if shutil.which("dot"):
        viz.save(dot, str(OUT / f"{stem}.svg"))


def _listing(root: Path) -> list[str]:
    """One line per folder holding files: its path and its file names (the debug dumps are many folders)."""
    folders: dict[Path, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "cache" not in p.relative_to(root).parts):
        folders.setdefault(path.parent.relative_to(root), []).append(path.name)
    return [f"{str(folder) + '/' if str(folder) != '.' else './'}: {', '.join(names)}"
            for folder, names in folders.items()]


# --- helpers shared by the MoE steps ---------------------------------------------------------------------


@contextlib.contextmanager
def _progress(what: str, quiet: bool = False):
    """Print ``what...`` now, a heartbeat every 10 s while it runs, and the elapsed seconds when it is done."""
    t0 = time.perf_counter()
    if not quiet:
        print(f"   {what}...", flush=True)
    done = threading.Event()

    def heartbeat():
        while not done.wait(10):
            print(f"     ... {time.perf_counter() - t0:.0f} s", flush=True)

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        yield
    finally:
        done.set()
    if not quiet:
        print(f"   {what}: {time.perf_counter() - t0:.1f} s", flush=True)


@contextlib.contextmanager
def _quiet_warnings():
    """Collect warnings instead of printing them mid-line; ``_print_warnings`` shows a summary."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def _print_warnings(caught: list) -> None:
    messages = collections.Counter(_clip(str(w.message).splitlines()[0], 150) for w in caught)
    for message, n in list(messages.items())[:3]:
        print(f"     warning{f' x{n}' if n > 1 else ''}: {message}")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _text_of(show: Callable[..., str], *args) -> str:
    """The text a ``show_*`` helper prints (and returns), without printing it: the tour indents it."""
    with contextlib.redirect_stdout(io.StringIO()):
        return show(*args)


def _op_name(target) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def _indent(text: str) -> str:
    return "\n".join("   " + line for line in text.splitlines())


def main() -> int:
    print("minicompile demo: torch.compile rebuilt in Python (minidynamo + mininductor)")
    step("1. environment", show_environment)
    step("2. capture f with minicompile(backend='eager'): explain and guards", capture_with_eager_backend)
    step("3. f's bytecode, before and after translation", show_bytecode)
    step("4. the running example toy: where it breaks", explain_toy)
    step("5. the FX graph, drawn", draw_f)
    step("6. compile f with the default backend (mininductor)", compile_with_mininductor)
    step("7. the tutorial MoE, compiled unmodified: graph breaks, guards, kernels, vs eager",
         lambda: compile_moe("tutorial"))
    step("8. the compile-friendly MoE: one graph", lambda: compile_moe("friendly"))
    step("9. MoE timing table: eager / torch.compile / minicompile", time_moe)
    step("10. torch.profiler on a compiled forward of the tutorial MoE", profile_moe)
    step("11. MoE artifacts: pictures and mininductor's debug dump", write_moe_artifacts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
