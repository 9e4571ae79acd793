"""Build (and execute) the notebooks from the cells written below: ``.venv/bin/python notebooks/build.py``.

Why a generator: a notebook's JSON is hard to review and to keep in step with the package; Python strings are
not.  Each notebook is a list of Markdown and code cells, in the Triton-tutorials skeleton: what you will learn,
motivation, mechanism, code that calls the package, a check against eager PyTorch, a measurement, and how upstream
differs.  The notebooks only call the package (never re-implement it), run on CPU (kernels in Triton's
interpreter) and are stored with their outputs, so they read well on a code host.

    .venv/bin/python notebooks/build.py              # write and execute all of them
    .venv/bin/python notebooks/build.py 00 03        # only these
    .venv/bin/python notebooks/build.py --no-execute # write without outputs

``tests/test_notebooks.py`` executes each stored notebook (one test per notebook) and fails on any error.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 120  # each cell; a whole notebook must stay well under two minutes on a 2-core CPU

# The first code cell of every notebook: choose Triton's interpreter before triton is imported (CPU machines).
SETUP = """\
import os
import torch
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run on CPU tensors in its interpreter
import minidynamo
from minidynamo import minicompile, explain, show_guards, show_transformed, step_through, viz
torch.manual_seed(0)
print(torch.__version__, "| GPU" if torch.cuda.is_available() else "| CPU: kernels run in Triton's interpreter")"""


def md(text: str):
    return new_markdown_cell(text.strip())


def code(text: str):
    return new_code_cell(text.strip())


NOTEBOOKS: dict[str, tuple[str, list]] = {}


def notebook(name: str, title: str):
    def register(fn):
        NOTEBOOKS[name] = (title, fn())
        return fn
    return register


# ------------------------------------------------------------------------------------------------------ 00
@notebook("00_tour", "A tour of minicompile")
def _tour():
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


# ------------------------------------------------------------------------------------------------------ 01
@notebook("01_bytecode_and_frames", "Bytecode and frames")
def _bytecode():
    return [
        md("""
# 01 · Bytecode and frames

**What you will learn**: what a frame and its bytecode are, why *tracing* by running a function freezes its
control flow (`torch.jit.trace`), and how translating *bytecode* instead keeps it correct with guards and breaks.
You will also see CPython's own execution, opcode by opcode, with the concrete values it had.

**Motivation**: a compiler for Python functions must see the whole function, including the branches it did not
take on the example input. Bytecode is the one complete, version-stable description of it that CPython exposes."""),
        code(SETUP),
        md("""
## Mechanism: a function is a code object

`fn.__code__` holds the bytecode; `dis` decodes it. Each call gets a *frame*: locals, a value stack and the
instruction pointer. `minidynamo.bytecode_transformation.decode` gives the list of instructions the translator steps
over (the same as `dis`, plus line numbers)."""),
        code("""
import dis
from minidynamo.examples.demo import toy
dis.dis(toy)"""),
        md("""
## Tracing freezes control flow

`torch.jit.trace` *runs* the function once and records the tensor ops it saw. The `if a.sum() > 0` is evaluated
in Python during that one run, so the trace contains only the branch taken -- silently wrong for inputs that would
take the other one (it warns, at best)."""),
        code("""
import warnings
pos, y0 = torch.ones(4), torch.zeros(4)        # a.sum() > 0: takes `return a * 2`
neg = -torch.ones(4)                             # a.sum() < 0: should take `return a - 1`
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    traced = torch.jit.trace(toy, (pos, y0))
print("eager     :", toy(neg, y0))
print("jit.trace :", traced(neg, y0), " <- the branch was frozen")"""),
        md("""
Bytecode translation reads the `POP_JUMP_IF_FALSE`, sees that its condition is a tensor's *value*, and breaks the
graph there: the condition is computed by graph 0, the jump runs in real Python, and a resume function continues
with whichever branch was taken."""),
        code("""
compiled = minicompile(toy, backend="eager")
print("minicompile:", compiled(neg, y0))
torch.testing.assert_close(compiled(neg, y0), toy(neg, y0)); torch.testing.assert_close(compiled(pos, y0), toy(pos, y0))
show_transformed(compiled);"""),
        md("""
## CPython's real execution, opcode by opcode

`step_through` also runs the original function under `sys.settrace` with `frame.f_trace_opcodes` (3.11) or
`sys.monitoring` instruction events (3.12+): one event per instruction, with the real locals at that moment."""),
        code("""
st = step_through(toy, neg, y0)
for ev in st.concrete:
    print(f"{ev.frame}:{ev.lineno:<4} @{ev.offset:<4} {ev.opname:28s} {ev.locals}")"""),
        md("""
Note what CPython ran: the jump at the `if` went to the `return a - 1` branch. The translator's steps for the same
instructions carry the *symbolic* values; each step's `concrete` field is CPython's matching event."""),
        code("""
jump = st.breaks()[0]
print(jump)"""),
        md("## Check against eager and measure\n\nThe translation happens once per guard set; later calls only check guards."),
        code("""
import timeit
compiled(neg, y0)
for name, fn in [("eager", toy), ("minicompile(eager backend), warm", compiled)]:
    t = min(timeit.repeat(lambda: fn(neg, y0), number=50, repeat=3)) / 50
    print(f"{name:34s} {t * 1e6:8.1f} us per call")"""),
        md("""
## How upstream differs

Dynamo installs a PEP 523 frame-evaluation hook in C, so it sees *every* frame, including callees it could not
inline. We wrap functions instead, and wrap resume functions and skipped callees so they are compiled when called.
`torch.jit.trace` is still available upstream; `torch.jit.script` compiled a Python subset instead of bytecode."""),
    ]


# ------------------------------------------------------------------------------------------------------ 02
@notebook("02_symbolic_execution", "Symbolic execution to FX")
def _symbolic():
    return [
        md("""
# 02 · Symbolic execution to FX

**What you will learn**: how the translator runs bytecode over *variable trackers* instead of values; how each
tensor operation becomes an FX node with a fake tensor; how Python (constants, calls into user functions) is
evaluated away by inlining. You will walk the translator forward and backward, one instruction at a time.

**Motivation**: the graph must hold only tensor work, and must be right for every input the guards admit.
Running the bytecode symbolically records exactly the tensor operations, in order, with shapes from fake tensors."""),
        code(SETUP),
        md("""
## Mechanism

`InstructionTranslator.step()` runs one instruction: it pops trackers from `self.stack`, calls the opcode's
handler (`LOAD_FAST`, `BINARY_OP`, `CALL`, ...), and pushes the result. A `TensorVariable` holds an FX proxy and a
fake tensor, so `BINARY_OP +` on two of them adds a `call_function` node. A call to a user function starts a nested
`InliningInstructionTranslator` (depth 1) over the callee's bytecode, against the same graph."""),
        code("""
def scale(a, n):
    return a * n

def g(x, w, n=3):
    h = torch.relu(x @ w)
    return scale(h, n).sum(-1)

x, w = torch.randn(8, 16), torch.randn(16, 4)
st = step_through(g, x, w)
print(st)"""),
        md("The current step is marked `>`. Walk it:"),
        code("""
st.goto(0)
while not st.current.nodes_added:
    st.forward()
print(st.current)       # the first instruction that added a graph node"""),
        code("""
st.forward(); print(st.current)
st.back();    print(st.current.index)"""),
        md("""
Inside the inlined `scale`, the steps have depth 1; `n` is a `ConstantVariable(3)` with a guard (`EQUALS_MATCH`),
so `a * n` becomes `mul(relu, 3)`: the 3 is baked into the graph. CPython's twin had the real tensor:"""),
        code("""
mul = next(s for s in st if s.frame == "scale" and s.opname == "BINARY_OP")
print("translator:", mul.locals_before)
print("CPython   :", mul.concrete.locals)
print("node      :", mul.nodes_added)"""),
        md("The same record as an HTML table (the current step highlighted):"),
        code("st.goto(mul.index); st"),
        md("## The graph it built"),
        code("""
report = explain(g)(x, w)
report.graphs[0].print_readable()
viz.draw_graph(report.graphs[0], name="g")"""),
        md("## Check against eager and measure"),
        code("""
import time
torch.testing.assert_close(minicompile(g, backend="eager")(x, w), g(x, w))
t0 = time.perf_counter(); explain(g)(x, w); t1 = time.perf_counter()
print(f"translating g ({len(st)} instructions) takes {1e3 * (t1 - t0):.1f} ms")"""),
        md("""
## How upstream differs

Dynamo's trackers are the same idea with many more classes (`variables/`), lazy realisation of inputs, and
`TORCH_LOGS=+dynamo` printing each instruction with its stack (our `MINICOMPILE_DEBUG=4`). It has no
`step_through`; this recorder exists for learning."""),
    ]


# ------------------------------------------------------------------------------------------------------ 03
@notebook("03_guards_and_recompiles", "Guards and recompiles")
def _guards():
    return [
        md("""
# 03 · Guards and recompiles

**What you will learn**: which facts about the inputs a compiled graph assumes (shapes, dtypes, constants, the
identity of globals and modules), how minidynamo writes them as one generated Python check, and what happens --
and what it prints -- when a call breaks one of them.

**Motivation**: the graph was specialised while tracing: Python ints were folded, shapes are static, a module's
attributes were read once. Reusing it is only correct while those facts hold."""),
        code(SETUP),
        md("""
## Mechanism

Each input is wrapped by `VariableBuilder` when the code first reads it, and the wrapping installs a guard with the
input's *source* (`L['x']`, `G['torch']`) and the user line that read it. `GuardManager` compiles all guards into
one function `___guard(L, G)`; on a miss, `first_failure` says which guard failed, expected vs actual."""),
        code("""
def affine(x, scale, bias):
    return torch.tanh(x * scale + bias)

compiled = minicompile(affine, backend="eager")
x = torch.randn(4, 8)
compiled(x, 2, torch.zeros(8))
show_guards(compiled);"""),
        code("""
from minidynamo.explain import _entries
print(_entries(compiled)[0].guard_manager.source)   # the generated check"""),
        md("Grouped by the frame variable each guard starts from:"),
        code("viz.draw_guards(_entries(compiled)[0].guards, name='guards of affine')"),
        md("""
## Recompiles

A new shape breaks `TENSOR_MATCH`; a new Python constant breaks `EQUALS_MATCH`. Each miss compiles a new cache
entry, with the reason recorded."""),
        code("""
from minidynamo.testing import CompileCounter
counter = CompileCounter()
c = minicompile(affine, backend=counter)
c(x, 2, torch.zeros(8))
c(x, 2, torch.zeros(8))          # hit: no compile
c(x, 3, torch.zeros(8))          # new constant
c(torch.randn(5, 8), 3, torch.zeros(8))   # new shape
print("frames compiled:", counter.frame_count)
for reason in c._minidynamo_ctx.recompile_reasons:
    print(" ", reason)"""),
        md("## Check against eager and measure the guard check"),
        code("""
import timeit
for s in (2, 3):
    torch.testing.assert_close(c(x, s, torch.zeros(8)), affine(x, s, torch.zeros(8)))
gm = _entries(c)[0].guard_manager
L = {"x": x, "scale": 2, "bias": torch.zeros(8)}
t = min(timeit.repeat(lambda: gm.check(L, affine.__globals__), number=1000, repeat=3)) / 1000
print(f"{len(gm.guards)} guards checked in {t * 1e6:.1f} us")"""),
        md("""
## How upstream differs

Dynamo builds a C++ guard tree (`GuardManager` in `guards.cpp`) for speed, marks sizes dynamic after a recompile
on shape (`automatic_dynamic_shapes`), and logs reasons with `TORCH_LOGS=recompiles`. Ours is one Python function
you can read; `recompile_limit` plays the role of `cache_size_limit`."""),
    ]


# ------------------------------------------------------------------------------------------------------ 04
@notebook("04_graph_breaks", "Graph breaks and resume functions")
def _breaks():
    return [
        md("""
# 04 · Graph breaks and resume functions

**What you will learn**: what the translator does when it meets something a graph cannot hold (a branch on a
tensor's value, `.item()`, `print`), how it *restarts* and breaks there, and how a generated **resume function**
continues the frame after the break.

**Motivation**: refusing the whole function would throw away the work before and after the break. Splitting it
keeps two graphs and runs only the offending instruction in Python."""),
        code(SETUP),
        code("""
import inspect
from minidynamo.examples.demo import toy
print(inspect.getsource(toy))"""),
        md("""
## Mechanism

1. The first translation reaches `POP_JUMP_IF_FALSE` on a `TensorVariable`; `truth()` raises `Unsupported`.
2. `convert_frame` restarts translation with `break_offset` set. At that instruction `compile_and_break` compiles the
   graph so far, emits code that calls it, runs the jump natively, and calls `__resume_at_<offset>`.
3. The resume function is new bytecode made from the original: it receives the live locals and the stack, jumps
   to the target, and is itself compiled when first called (translation 2)."""),
        code("""
x, y = torch.randn(8), torch.randn(8)
st = step_through(toy, x, y)
print([t.kind for t in st.translations])
for s in st.breaks():
    print(s, end="\\n\\n")"""),
        code("""
report = explain(toy)(x, y)
print(report)
viz.draw_break_map(toy, report)"""),
        md("The transformed bytecode, and the resume function it calls:"),
        code("""
compiled = minicompile(toy, backend="eager")
compiled(x, y)
show_transformed(compiled);"""),
        md("## A break inside a loop\n\nminidynamo breaks inside loops too (real Dynamo skips such frames):"),
        code("""
def loop(x):
    for i in range(3):
        x = x * 2
        print("step", i)        # print is a graph break
    return x + 1

r = explain(loop)(torch.ones(2))
print(r.graph_count, "graphs,", r.graph_break_count, "breaks:", r.break_reasons[0].reason)"""),
        md("## Check against eager (both branches) and measure"),
        code("""
import timeit
for sign in (1.0, -1.0):
    xs = sign * x.abs()
    torch.testing.assert_close(compiled(xs, 0 * y), toy(xs, 0 * y))
for name, fn in [("eager", toy), ("compiled (2 graphs + resume)", compiled)]:
    t = min(timeit.repeat(lambda: fn(x, y), number=50, repeat=3)) / 50
    print(f"{name:30s} {t * 1e6:8.1f} us")"""),
        md("""
## How upstream differs

Same design: restart analysis, `compile_subgraph`, `create_call_resume_at` in `symbolic_convert.py`, resume
functions from `resume_execution.py`. Upstream skips a frame whose break is inside a loop (`torch._dynamo` logs
"graph break in a for/while loop"); we continue because resume functions are made from the original code and
close on themselves."""),
    ]


# ------------------------------------------------------------------------------------------------------ 05
@notebook("05_aten_decompositions_ir", "ATen, decompositions and the IR")
def _aten():
    return [
        md("""
# 05 · ATen, decompositions and the IR

**What you will learn**: how the captured graph is traced down to ATen ops with `make_fx`, how decompositions
turn `softmax` into `amax`/`sub`/`exp`/`sum`/`div`, and how each ATen op is *lowered* to IR: `Pointwise` and
`Reduction` nodes whose body is a tiny define-by-run `inner_fn` over `ops.*`.

**Motivation**: a small set of primitive ops is easy to generate code for; the IR says, per output element, what
to load and compute, so the scheduler can see which buffers can share one loop."""),
        code(SETUP),
        code("""
from mininductor import viz as iviz

def softmax_plus_total(x):
    y = torch.softmax(x, -1)
    return y * 2 + x.sum()

x = torch.randn(4, 8)
a = iviz.compile_artifacts(softmax_plus_total, x)
a.aten_gm.print_readable();"""),
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


# ------------------------------------------------------------------------------------------------------ 06
@notebook("06_scheduling_and_fusion", "Scheduling and fusion")
def _fusion():
    return [
        md("""
# 06 · Scheduling and fusion

**What you will learn**: how the scheduler decides which IR buffers share one kernel (`can_fuse`,
`score_fusion`), why some pairs are *not* fused (the reason is recorded), and what fusion saves in memory traffic.

**Motivation**: on a GPU most of these ops are bound by memory bandwidth. Every buffer that stays inside a kernel
is a tensor that is never written to and read back from memory."""),
        code(SETUP),
        code("""
from mininductor import config as inductor_config
from mininductor import viz as iviz

def softmax_plus_total(x):
    y = torch.softmax(x, -1)
    return y * 2 + x.sum()

x = torch.randn(4, 8)
a = iviz.compile_artifacts(softmax_plus_total, x)
print(a.scheduler)"""),
        md("""
## Mechanism

Each `ComputedBuffer` starts as its own `FusedSchedulerNode`. Pairs that share data are scored (bytes saved) and
tried in order; `can_fuse` accepts a pair whose iteration spaces match (a reduction's rows and the pointwise nodes
over the same rows). Here the row softmax fuses into one kernel; the whole-tensor `x.sum()` iterates over
`(1, 32)` and cannot join it. Dashed red edges carry the scheduler's reason:"""),
        code("iviz.draw_fusion(a)"),
        md("## Measure: bytes moved with and without fusion (the compile-time estimate in `metrics`)"),
        code("""
from mininductor import metrics
for fusion in (True, False):
    with inductor_config.patch(fusion=fusion):
        metrics.reset()
        b = iviz.compile_artifacts(softmax_plus_total, x)
        print(f"fusion={fusion!s:5}  kernels={len(b.kernel_names())}  bytes accessed={metrics.num_bytes_accessed}")"""),
        md("## Check against eager"),
        code("""
torch.testing.assert_close(minicompile(softmax_plus_total)(x), softmax_plus_total(x))
print("matches eager")"""),
        md("""
## Split reductions: when one reduction becomes two kernels

A reduction runs one program per block of outputs. A column sum over many rows has few programs, each walking
every row, so the lowering splits it (chapter 7, [Note: split column reductions]): partial sums over blocks of rows,
then a small sum of the partials. On a GPU this starts at 4096 rows in blocks of 2048; here we lower both
thresholds so a small matrix shows it:"""),
        code("""
def column_sum(t):
    return t.sum(0)

col = torch.randn(256, 8)
with inductor_config.patch(split_outer_reduction_min_rows=64, split_outer_reduction_block_rows=64):
    c = iviz.compile_artifacts(column_sum, col)
print(c.kernel_names())                      # the partials over 4 row blocks, then the column sums
print(c.scheduler)
with inductor_config.patch(split_outer_reduction_min_rows=64, split_outer_reduction_block_rows=64):
    torch.testing.assert_close(minicompile(column_sum)(col), column_sum(col))
print("matches eager")"""),
        md("""
## How upstream differs

Inductor's scheduler also fuses vertically across reductions with different tilings, merges loops (`loop_ordering`),
fuses epilogues into templates, and scores with a cost model when `max-autotune` is on.
`TORCH_COMPILE_DEBUG=1` writes `ir_pre_fusion.txt`/`ir_post_fusion.txt`; ours are in `debug_dir`."""),
    ]


# ------------------------------------------------------------------------------------------------------ 07
@notebook("07_triton_codegen", "Triton code generation")
def _triton():
    return [
        md("""
# 07 · Triton code generation

**What you will learn**: how one fused group becomes a Triton kernel (`triton_per_fused_...`): program ids and
masks, loads with index expressions, a persistent reduction, stores; how the wrapper `output_code.py` allocates
buffers and launches kernels; and how to run the generated module yourself (here in Triton's interpreter).

**Motivation**: the generated code is plain, readable Python. Reading it is the fastest way to check what the
compiler decided, and where each line of your model went."""),
        code(SETUP),
        code("""
from mininductor import viz as iviz
from mininductor.runtime import load_module

def softmax_plus_total(x):
    y = torch.softmax(x, -1)
    return y * 2 + x.sum()

x = torch.randn(4, 8)
a = iviz.compile_artifacts(softmax_plus_total, x)
print(a.source)"""),
        md("""
## Mechanism

`TritonKernel` walks each node's `inner_fn` with a handler that prints Triton: `ops.load('arg0_1', 8*i0 + r0)`
becomes `tl.load(in_ptr0 + (8*x0 + r1), mask)`. A reduction whose row fits in one block is *persistent*
(`per`): the row stays in registers. The wrapper's `call(args)` allocates `buf*` and launches each kernel.
Which source line went into which kernel:"""),
        code("iviz.draw_kernel_map(a)"),
        md("## Run the generated module under the interpreter, and check against eager"),
        code("""
module = load_module(a.source, interpret=True)
out = module.call([x])
print(type(out), len(out))
torch.testing.assert_close(out[0], softmax_plus_total(x))
print("the generated kernels match eager")"""),
        md("## Measure\n\nOn CPU the interpreter runs each program instance in numpy, ~ms each; on a GPU the "
           "same source is JIT-compiled."),
        code("""
import timeit
t_interp = min(timeit.repeat(lambda: module.call([x]), number=3, repeat=3)) / 3
t_eager = min(timeit.repeat(lambda: softmax_plus_total(x), number=100, repeat=3)) / 100
print(f"generated (interpreted): {t_interp * 1e3:.2f} ms   eager: {t_eager * 1e3:.3f} ms")"""),
        md("""
## How upstream differs

Inductor emits `libdevice` math, autotunes block sizes with `@triton_heuristics`, caches compiled kernels by hash
and can emit C++ for CPUs. Kernel names follow the same pattern; `TORCH_LOGS=output_code` prints the same file."""),
    ]


# ------------------------------------------------------------------------------------------------------ 08
@notebook("08_moe_end_to_end", "The MoE end to end")
def _moe():
    return [
        md("""
# 08 · The MoE end to end: training and profiling

**What you will learn**: what the pipeline does with a real model -- the tutorial mixture-of-experts, compiled
*unmodified* (data-dependent routing, boolean masks, `index_add_`, profiler blocks) -- forward and training step;
where it breaks and why; and how to profile the result.

**Motivation**: real models are full of Python that a graph cannot hold. The question is not "does it capture one
graph" but "what did it capture, what runs eagerly, and is it still correct"."""),
        code(SETUP),
        code("""
from minidynamo.examples.moe import make_moe, make_moe_input, train_steps
model = make_moe("tutorial", "small")
x = make_moe_input("small")
print(model)"""),
        md("## Capture: graphs and breaks"),
        code("""
report = explain(model)(x)
print(report.graph_count, "graphs,", report.graph_break_count, "breaks")
for r in report.break_reasons[:4]:
    print(" -", r)"""),
        md("The compile-friendly twin computes the same function without data-dependent shapes, so it captures "
           "as one graph:"),
        code("""
friendly = make_moe("friendly", "small")
r2 = explain(friendly)(x)
print(r2.graph_count, "graph,", r2.graph_break_count, "breaks")"""),
        md("## Forward with mininductor, checked against eager"),
        code("""
import warnings
from mininductor import metrics
metrics.reset()
compiled = minicompile(model)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    y, aux = compiled(x)
y_ref, aux_ref = model(x)
torch.testing.assert_close(y, y_ref); torch.testing.assert_close(aux, aux_ref)
print("forward matches eager;", metrics.generated_kernel_count, "Triton kernels generated")"""),
        md("""
## Every expert, one cache entry

The loop resumes once per expert with `expert_idx` as an argument. That int, a loop variable, is a symbol from the
resume function's first compile ([Note: a resumed loop's variable]), and `self.experts[expert_idx]` is read *at run
time* instead of being specialised: the guards check whichever expert the call reads (its type, its parameters'
shapes), and its parameters are graph inputs read through it. So the experts share a few cache entries, one per
code path (the row-count cases, the loop's end), not one per expert ([Note: a module list indexed by a symbolic
int]; upstream recompiles per expert here)."""),
        code("""
loop_code, entries = max(compiled._ctx.cache.items(), key=lambda kv: len(kv[1]))
print(loop_code.co_name, "has", len(entries), "cache entries for", model.num_experts, "experts")
shared = next(e for e in entries if any("[L['expert_idx']]" in g.name() for g in e.guards))
for g in shared.guards:
    if g.kind == "TENSOR_MATCH" and "[L['expert_idx']]" in g.name():
        print(" ", g.name().replace("L['self']._modules['experts']", "experts"), g.describe_expected())"""),
        md("""
## One expert, compiled

After the routing, each expert runs as one frame: the loop resumes after the data-dependent `x[mask]` lookups
(both run natively, and share one `nonzero`: [Note: shared nonzero]), then one compiled graph does the expert's
work. Its `output_code.py` shows the gather of the expert's rows, the two matmuls (extern `addmm` calls), the GELU,
and `outputs.index_add_` as one scatter kernel that writes **into `outputs` itself** -- reinplacing: no copy of
`outputs`, no write-back (chapter 7). The last kernel is the next iteration's `flat_indices == expert_idx`."""),
        code("""
import tempfile
from pathlib import Path
import mininductor
metrics.reset()                                 # also empties FxGraphCache: every graph compiles (and is dumped) here
root = Path(tempfile.mkdtemp())
count = 0
def backend(gm, example_inputs):                # mininductor, with one debug folder per compiled graph
    global count
    count += 1
    with mininductor.config.patch(debug_dir=str(root / f"graph_{count}")):
        return mininductor.compile_fx(gm, example_inputs)
inference = make_moe("tutorial", "small").eval()   # eval mode, no grad: the inference graphs (reinplaced)
with warnings.catch_warnings(), torch.no_grad():
    warnings.simplefilter("ignore")
    torch.testing.assert_close(minicompile(inference, backend=backend)(x)[0], inference(x)[0])
experts = [p for p in sorted(root.glob("graph_*/output_code.py")) if "index_put" in p.read_text()]
code = experts[0].read_text()                   # the first expert's graph (the routing's has no scatter)
print(code[code.index("def call"):])"""),
        md("## Training: three steps, compiled vs eager losses"),
        code("""
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    compiled_losses = train_steps(minicompile(make_moe("tutorial", "small")), 3, bsz=16)
eager_losses = train_steps(make_moe("tutorial", "small"), 3, bsz=16)
print("compiled:", [round(v, 5) for v in compiled_losses])
print("eager   :", [round(v, 5) for v in eager_losses])
torch.testing.assert_close(torch.tensor(compiled_losses), torch.tensor(eager_losses), rtol=1e-4, atol=1e-5)"""),
        md("## Profile\n\nThe model's `record_function` blocks show up in the profiler around compiled and eager "
           "parts alike."),
        code("""
from torch.profiler import ProfilerActivity, profile
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    compiled(x)                                 # warm
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        compiled(x)
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12))"""),
        md("""
## How upstream differs

On this model `torch.compile` captures 3 graphs (it skips the frame with the per-expert loop break) and runs the
loop eagerly; on an H200 it is slower than eager (7.75 ms vs 5.79 ms forward at reference size). minidynamo breaks
inside the loop and keeps compiling around it, with one set of cache entries for all experts: 7.57 ms in the same
run, still slower than eager -- each expert pays Python for its frame, guards and launches where eager pays ATen's
C++ dispatch. The speed story belongs to the GPU:
see `docs/benchmarks.md` and `docs/11-moe-end-to-end.md`."""),
    ]


# ------------------------------------------------------------------------------------------------------ build
def build(name: str, execute: bool = True) -> float:
    title, cells = NOTEBOOKS[name]
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (minicompile .venv)", "language": "python"},
        "language_info": {"name": "python"}, "title": title})
    elapsed = 0.0
    if execute:
        elapsed = execute_notebook(nb)
    nbformat.write(nb, HERE / f"{name}.ipynb")
    return elapsed


def execute_notebook(nb) -> float:
    """Run ``nb`` in place with the venv's ``python3`` kernel, from this folder; returns the seconds taken."""
    from nbclient import NotebookClient
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    return time.perf_counter() - t0


def main(argv: list[str]) -> None:
    execute = "--no-execute" not in argv
    wanted = [a for a in argv if not a.startswith("--")]
    for name in NOTEBOOKS:
        if not wanted or any(name.startswith(w) for w in wanted):
            print(f"{name}: {build(name, execute):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
