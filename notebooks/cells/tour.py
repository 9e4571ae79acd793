"""Notebook 00 · A tour of minicompile.

What it teaches: the whole pipeline on the running example, one artifact per stage (graph, guards, break, kernels).
The cells of ``notebooks/00_tour.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "00_tour"
TITLE = "A tour of minicompile"


def cells() -> list:
    return [
        md("""
# 00 · A tour of minicompile

**What you will learn**: the whole pipeline on the running example, one artifact per stage: the captured FX graph,
the guards, the graph break and its resume function, the ATen graph, the fused kernels and the generated
`output_code.py`. Each later notebook opens one of these boxes.

**Motivation**: `torch.compile(fn)` hides six programs behind one call. minicompile rebuilds them in readable
Python with PyTorch's names -- **minidynamo** (`torch._dynamo`: bytecode → FX graph + guards) and **mininductor**
(`torch._inductor`: FX → ATen → IR → fused Triton kernels) -- so you can print or draw every intermediate."""),
        code(SETUP),
        md("""
## The running example

`f` captures as one graph; `toy` branches on a tensor's *value*, which no graph can hold: a **graph break**.
Both live in `minidynamo/examples/demo.py` (what `make demo` runs)."""),
        code("""
import inspect
from minidynamo.examples.demo import f, toy
print(inspect.getsource(f)); print(inspect.getsource(toy))"""),
        md("""
## Mechanism, stage by stage

**1. Capture.** `minicompile(fn, backend="eager")` translates `fn`'s bytecode on its first call and runs the
captured graph with plain PyTorch. `explain` reports what it captured, with the field names of
`torch._dynamo.explain`."""),
        code("""
x, w = torch.randn(8, 16), torch.randn(16, 4)
report = explain(f)(x, w)
print(report)
report.graphs[0].print_readable();"""),
        code("viz.draw_graph(report.graphs[0], name='f: the captured FX graph')"),
        md("**2. Guards** say when the compiled code may be reused; they are generated Python."),
        code("""
compiled_f = minicompile(f, backend="eager")
compiled_f(x, w)
show_guards(compiled_f);"""),
        md("**3. A graph break.** `toy` is split at the `if`: graph 0 before, the branch runs in Python, a *resume "
           "function* continues after it (graph 1). The break map colours each source line by its graph."),
        code("""
y = torch.randn(8, 16)
toy_report = explain(toy)(x, y)
print(toy_report.graph_count, "graphs,", toy_report.graph_break_count, "break:", toy_report.break_reasons[0])
viz.draw_break_map(toy, toy_report)"""),
        md("**4. Step through** the translator one instruction at a time (notebook 02 does this in depth):"),
        code("""
st = step_through(toy, x, y)
print(len(st), "instructions over", len(st.translations), "translations:", [t.kind for t in st.translations])
print(st.breaks()[0])"""),
        md("""
**5. mininductor.** With the default backend the graph goes to ATen (decompositions), then IR, then the scheduler
fuses what can share a loop, then Triton code. `compile_artifacts` runs those stages and keeps every intermediate."""),
        code("""
from mininductor import viz as iviz
a = iviz.compile_artifacts(f, x, w)
print("kernels:", a.kernel_names())
iviz.draw_fusion(a)"""),
        code("print(a.source[a.source.index('# Source nodes'):][:1500])   # the first generated kernel"),
        md("## Check against eager"),
        code("""
compiled = minicompile(f)            # backend="inductor": mininductor's Triton kernels
torch.testing.assert_close(compiled(x, w), f(x, w))
compiled_toy = minicompile(toy)
for sign in (1, -1):                 # both sides of the branch
    torch.testing.assert_close(compiled_toy(sign * x.abs(), 0 * y), toy(sign * x.abs(), 0 * y))
print("matches eager")"""),
        md("## Measure\n\nOn a CPU the kernels run in Triton's *interpreter*, so the compiled function is much slower "
           "than eager here; the speed numbers live on the GPU (see `docs/benchmarks.md`)."),
        code("""
import timeit
for name, fn in [("eager", f), ("minicompile (interpreted kernels)", compiled)]:
    t = min(timeit.repeat(lambda: fn(x, w), number=5, repeat=3)) / 5
    print(f"{name:36s} {t * 1e3:8.3f} ms")"""),
        md("""
## How upstream differs

- Dynamo hooks frames with PEP 523 in C; our hook is the `minicompile` wrapper (resume functions are wrapped too).
- Dynamo gives up on a whole frame when a break sits inside a loop; minidynamo breaks there too.
- Inductor on CPU generates C++/OpenMP; mininductor always generates Triton and interprets it on CPU.

Next: **01 · bytecode and frames**."""),
    ]
