"""The tour that ``make demo`` runs: ``python -m minidynamo.examples.demo``.

What goes in: nothing (it builds its own small inputs). What comes out: a printed walk through the pipeline,
and artifacts in ``out/`` (gitignored): the captured FX graph as DOT text and, when Graphviz is installed, SVG.

Why: one command that shows a newcomer every stage on the README's running example,

    def f(x, w):
        return torch.relu(x @ w).sum(-1)

    1. the environment (versions, GPU or CPU -- on CPU, Triton kernels run in Triton's interpreter);
    2. capture with ``minicompile(f, backend="eager")``: ``explain`` and ``show_guards``;
    3. the bytecode before and after translation (``show_transformed``);
    4. ``explain`` on the running example ``toy``, which has a data-dependent branch;
    5. a picture of the graph (``minidynamo.viz.draw_graph``);
    6. compile with the default backend (mininductor) and count the kernels it generated;
    7. the MoE workload, run eagerly (the compiled MoE comes later).

Each step runs inside ``step(...)``: a stage that is not built yet prints "not yet available: <reason>" and the
tour goes on, so the demo exits 0 at every point of the project's life.

Upstream twin: none -- this plays the role of the ``torch.compile`` tutorials.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

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


def run_moe_eagerly() -> None:
    from minidynamo.examples import moe

    x = moe.make_moe_input("small", device=DEVICE)
    tutorial = moe.make_moe("tutorial", "small", device=DEVICE).eval()
    friendly = moe.friendly_from_tutorial(tutorial).eval()
    with torch.no_grad():
        outputs, _ = tutorial(x)
        same = torch.allclose(outputs, friendly(x)[0], atol=1e-5)
    print(f"   tutorial MoE, eager: input {tuple(x.shape)} -> outputs {tuple(outputs.shape)}")
    print(f"   compile-friendly twin computes the same outputs: {same}")


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
    step("7. the MoE workload, eagerly", run_moe_eagerly)
    return 0


if __name__ == "__main__":
    sys.exit(main())
