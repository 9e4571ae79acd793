"""The tour that ``make demo`` runs: ``python -m minidynamo.examples.demo``.

What goes in: nothing (it builds its own inputs). What comes out: a printed walk through the pipeline, and
artifacts in ``out/`` (``MINICOMPILE_OUT``; gitignored): pictures as DOT text and, when Graphviz is installed, SVG,
and mininductor's debug dumps. On a 2-core CPU it takes about a minute with ``MINICOMPILE_DEMO_QUICK=1``, a few more
without (torch.compile's C++ compiles).

Why: one command that shows a newcomer every stage on the README's running example ``f`` below, then on the
workload minicompile is built for, the MoE of ``minidynamo/examples/moe.py`` (the reference size on a GPU, the
small one on CPU). This file holds the running examples and the list of steps; each step lives in
``minidynamo/examples/tour/``, one module per concept:

    1. the environment (versions, GPU or CPU -- on CPU, Triton kernels run in Triton's interpreter);
    2. capture with ``minicompile(f, backend="eager")``: ``explain`` and ``show_guards``;
    3. the bytecode before and after translation (``show_transformed``);
    4. ``explain`` on the running example ``toy``, which has a data-dependent branch;
    5. a picture of the graph (``minidynamo.viz.draw_graph``);
    6. compile with the default backend (mininductor) and count the kernels it generated
       (steps 1-6: ``tour/running_example.py``);
    7. the tutorial MoE compiled unmodified: graphs, graph breaks (reason and ``moe.py:line``), guards, the
       kernels generated (names, count, ATen fallbacks) and the max abs difference from eager -- eval outputs,
       then a train-mode forward (outputs, aux loss) and its gradients;
    8. the same for the compile-friendly MoE (one graph) (steps 7-8: ``tour/moe_compile.py``);
    9. a timing table, eager / torch.compile / minicompile x {eval forward, train step}, in ms (median of several
       calls). ``MINICOMPILE_DEMO_QUICK=1`` skips torch.compile (30+ s per model on CPU) (``tour/timing.py``);
   10. ``torch.profiler`` over one compiled forward of the tutorial MoE: its ``record_function`` regions, and the
       generated kernels by name (on a GPU; on CPU the interpreter launches no device kernels)
       (``tour/profiling.py``);
   11. pictures (the friendly MoE's graph and guards, the tutorial MoE's break map) and mininductor's debug dump,
       one folder per compiled graph: ``out/debug/<kind>/graph_<k>/`` holds ``output_code.py``,
       ``fx_graph_readable.py``, ``ir_pre_fusion.txt`` and ``ir_post_fusion.txt`` (``tour/artifacts.py``).

How a step prints (headings, progress, warnings) is ``tour/console.py``; what the tour runs on and where it writes
(device, ``out/``, quick mode) is ``tour/settings.py``, imported first: on CPU it sets ``TRITON_INTERPRET=1``
before anything imports triton.

``f`` and ``toy`` stay in this file, at these lines, above ``main``: the README, the notebooks,
``docs/learning-tools.md`` and the tests import them from ``minidynamo.examples.demo``, and the stored notebook
outputs quote their source lines (``demo.py:70`` in guards and graphs, ``toy:76`` in bytecode listings). Move
them, and rebuild the notebooks (``notebooks/build.py``) so that the outputs say where they went.

Upstream twin: none -- this plays the role of the ``torch.compile`` tutorials.
"""

from __future__ import annotations

import sys

import torch

from minidynamo.examples.tour import settings  # noqa: F401 -- first: chooses Triton's interpreter on CPU
from minidynamo.examples.tour.artifacts import write_moe_artifacts
from minidynamo.examples.tour.console import step
from minidynamo.examples.tour.moe_compile import compile_moe
from minidynamo.examples.tour.profiling import profile_moe
from minidynamo.examples.tour.running_example import (
    capture_with_eager_backend,
    compile_with_mininductor,
    draw,
    explain_break,
    show_bytecode,
    show_environment,
)
from minidynamo.examples.tour.timing import time_moe


# The running examples (see the docstring before moving them).
def f(x, w):
    """The running example without graph breaks: one FX graph, one matmul, one fused relu+sum."""
    return torch.relu(x @ w).sum(-1)


def toy(x, y):
    """The running example with a data-dependent branch: a graph break."""
    a = torch.sin(x) + y
    if a.sum() > 0:
        return a * 2
    return a - 1


def main() -> int:
    print("minicompile demo: torch.compile rebuilt in Python (minidynamo + mininductor)")
    step("1. environment", show_environment)
    step("2. capture f with minicompile(backend='eager'): explain and guards", lambda: capture_with_eager_backend(f))
    step("3. f's bytecode, before and after translation", lambda: show_bytecode(f))
    step("4. the running example toy: where it breaks", lambda: explain_break(toy))
    step("5. the FX graph, drawn", lambda: draw(f))
    step("6. compile f with the default backend (mininductor)", lambda: compile_with_mininductor(f))
    step("7. the tutorial MoE, compiled unmodified: graph breaks, guards, kernels, vs eager",
         lambda: compile_moe("tutorial"))
    step("8. the compile-friendly MoE: one graph", lambda: compile_moe("friendly"))
    step("9. MoE timing table: eager / torch.compile / minicompile", time_moe)
    step("10. torch.profiler on a compiled forward of the tutorial MoE", profile_moe)
    step("11. MoE artifacts: pictures and mininductor's debug dump", write_moe_artifacts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
