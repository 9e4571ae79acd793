"""Notebook 05 · ATen, decompositions and the IR.

What it teaches: ``make_fx`` down to ATen, decompositions, and lowering to ``Pointwise``/``Reduction`` IR.
The cells of ``notebooks/05_aten_decompositions_ir.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, compile_softmax_plus_total, md

NAME = "05_aten_decompositions_ir"
TITLE = "ATen, decompositions and the IR"


def cells() -> list:
    return [
        md("""
# 05 · ATen, decompositions and the IR

**What you will learn**: how the captured graph is traced down to ATen ops with `make_fx`, how decompositions
turn `softmax` into `amax`/`sub`/`exp`/`sum`/`div`, and how each ATen op is *lowered* to IR: `Pointwise` and
`Reduction` nodes whose body is a tiny define-by-run `inner_fn` over `ops.*`.

**Motivation**: a small set of primitive ops is easy to generate code for; the IR says, per output element, what
to load and compute, so the scheduler can see which buffers can share one loop."""),
        code(SETUP),
        compile_softmax_plus_total(imports="""
from mininductor import viz as iviz""", then="a.aten_gm.print_readable();"),
        code("iviz.draw_aten_graph(a)"),
        md("""
## Mechanism: lowering to IR

`GraphLowering` is an `fx.Interpreter`: for each ATen node it calls the registered lowering, which returns a
`TensorBox` around a `Pointwise`/`Reduction`. Reductions and outputs are realised into `ComputedBuffer`s
(`buf0`, `buf1`, ...). Printing a body runs its `inner_fn` with a formatting handler:"""),
        code("""
for buf in a.graph.buffers:
    print(f"{buf.get_name()}: {type(buf.data).__name__} ranges={buf.data.ranges}", buf.data.inner_fn_str())"""),
        code("iviz.draw_ir(a)"),
        md("## Check against eager and measure\n\nThe IR is executable: the compiled module agrees with eager."),
        code("""
import time
compiled = minicompile(softmax_plus_total)
torch.testing.assert_close(compiled(x), softmax_plus_total(x))
t0 = time.perf_counter(); iviz.compile_artifacts(softmax_plus_total, x); t1 = time.perf_counter()
print(f"trace to ATen + lower + schedule + codegen: {1e3 * (t1 - t0):.0f} ms; "
      f"{len(a.aten_gm.graph.nodes)} ATen nodes -> {len(a.graph.buffers)} IR buffers")"""),
        md("""
## How upstream differs

Inductor's IR has many more node kinds (`TemplateBuffer`, `ConcatKernel`, mutation layouts), symbolic sizes
(dynamic shapes), and a `LoopBody` that records the `inner_fn` once into an FX graph. Its decomposition table is
far larger; ours keeps only what the lowering table lacks (`mininductor/decomposition.py`)."""),
    ]
