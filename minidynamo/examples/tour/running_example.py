"""Steps 1-6 of the tour: the environment, then every stage of the pipeline on the README's running example.

The examples themselves, ``f`` (one graph) and ``toy`` (a data-dependent branch), live in ``demo.py``, where the
README and the notebooks point; each step here takes the one it shows as an argument:

    1. the environment (versions, GPU or CPU -- on CPU, Triton kernels run in Triton's interpreter);
    2. capture with ``minicompile(f, backend="eager")``: ``explain`` and ``show_guards``;
    3. the bytecode before and after translation (``show_transformed``);
    4. ``explain`` on ``toy``: where it breaks, and why;
    5. a picture of ``f``'s graph (``minidynamo.viz.draw_graph``), written to ``out/``;
    6. compile ``f`` with the default backend (mininductor) and count the kernels it generated.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Callable

import torch

from minidynamo.examples.tour.artifacts import save_picture
from minidynamo.examples.tour.console import indent, text_of
from minidynamo.examples.tour.settings import DEVICE, OUT


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 16, generator=g).to(DEVICE), torch.randn(16, 4, generator=g).to(DEVICE)


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


def capture_with_eager_backend(f: Callable) -> None:
    import minidynamo

    x, w = example_inputs()
    compiled = minidynamo.minicompile(f, backend="eager")
    same = torch.allclose(compiled(x, w), f(x, w))
    print(f"   minicompile({f.__name__}, backend='eager')(x, w) matches eager: {same}")
    report = minidynamo.explain(f)(x, w)
    ops = ", ".join(_op_name(op) for graph_ops in report.ops_per_graph for op in graph_ops)
    print(f"   explain({f.__name__}): {report.graph_count} graph(s), {report.graph_break_count} graph break(s), "
          f"ops: {ops}")
    print("   show_guards(compiled): what must stay true for the compiled code to be reused")
    print(indent(text_of(minidynamo.show_guards, compiled)))


def _op_name(target) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def show_bytecode(f: Callable) -> None:
    import minidynamo

    compiled = minidynamo.minicompile(f, backend="eager")
    compiled(*example_inputs())
    print(indent(text_of(minidynamo.show_transformed, compiled)))


def explain_break(toy: Callable) -> None:
    import minidynamo

    x, y = example_inputs()[0], torch.randn(8, 16, device=DEVICE)
    report = minidynamo.explain(toy)(x, y)
    print(f"   {toy.__name__}: {report.graph_count} graph(s), {report.graph_break_count} graph break(s)")
    for reason in report.break_reasons:
        print(f"     break: {reason.reason}")


def draw(f: Callable) -> None:
    """The graph minidynamo captures for ``f``, as code and as a picture in ``out/`` (DOT, SVG with Graphviz)."""
    import minidynamo
    from minidynamo import viz

    gm = minidynamo.explain(f)(*example_inputs()).graphs[0]
    print(f"   graph of {f.__name__} (captured by minidynamo):")
    print(indent(gm.code.strip()))
    written = save_picture(viz.draw_graph(gm, name=f.__name__), f"{f.__name__}_graph")
    print("   wrote " + " and ".join(map(str, written)) + ("" if len(written) > 1 else " (install Graphviz for the SVG)"))


def compile_with_mininductor(f: Callable) -> None:
    import minidynamo
    import mininductor

    x, w = example_inputs()
    mininductor.metrics.reset()
    compiled = minidynamo.minicompile(f)  # default backend: mininductor
    same = torch.allclose(compiled(x, w), f(x, w), rtol=1e-4, atol=1e-4)
    m = mininductor.metrics
    print(f"   minicompile({f.__name__})(x, w) matches eager: {same}")
    print(f"   kernels generated: {m.generated_kernel_count}, extern calls: {m.extern_call_count}, "
          f"fallbacks: {m.fallback_count}")
