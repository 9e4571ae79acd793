"""Notebook 10 · Dynamic shapes.

What it teaches: automatic dynamic, symbols in the graph, SHAPE_ENV guards, static sizes 0 and 1, dynamic=True with
int arguments, one symbolic kernel serving every size, and the size guards a symbolic compile checks itself.
The cells of ``notebooks/10_dynamic_shapes.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "10_dynamic_shapes"
TITLE = "Dynamic shapes"


def cells() -> list:
    return [
        md("""
# 10 · Dynamic shapes

**What you will learn**: why a new batch size recompiles, how *automatic dynamic* turns the dimension that changed
into a symbol (`s77`), which guards then protect the graph (`2 <= L['x'].size()[0]`), why sizes 0 and 1 stay
static, and how mininductor generates one kernel that serves every size.

**Motivation**: a graph traced with `x.shape == (8, 32)` is only valid for that shape. A server sees a new batch
size or sequence length on almost every call; recompiling for each one would cost more than it saves
(chapter 10)."""),
        code(SETUP),
        md("""
## Automatic dynamic

The first compile assumes static shapes. When a recompile is caused by a *size* change, that dimension becomes a
symbol, and the recompiled graph serves every later size."""),
        code("""
def normalize_rows(x):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5)

graphs = []
def recording(gm, example_inputs):   # a backend that keeps each graph it is given, and runs it as it is
    graphs.append(gm)
    return gm.forward

minidynamo.config.log_recompiles = True   # print each recompile, and why
f = minicompile(normalize_rows, backend=recording)
for batch in (8, 4, 5, 16):
    x = torch.randn(batch, 32)
    torch.testing.assert_close(f(x), normalize_rows(x))
print(len(graphs), "graphs for 4 batch sizes")"""),
        md("The second graph's sizes are symbols: `f32[s77, 32]` is a tensor of `s77` rows."),
        code("graphs[1].print_readable();"),
        md("""
## Guards on symbols

The symbolic entry checks the shape with a `SHAPE_ENV` guard instead of an exact size. The lower bound is 2:
sizes 0 and 1 are never symbols, because so much code branches on them (broadcasting, `squeeze`, empty tensors)
that a graph valid for them would be full of guards."""),
        code("show_guards(f);"),
        code("""
x1 = torch.randn(1, 32)
torch.testing.assert_close(f(x1), normalize_rows(x1))
print(len(graphs), "graphs now: a batch of 1 gets its own, static graph")"""),
        md("""
## `dynamic=True`: symbols from the first compile, ints included

With `dynamic=True` every input dimension is a symbol from the start, and so is an int *argument*: size
arithmetic such as `x.shape[0] // 2` is recorded in the graph instead of being folded to a constant."""),
        code("""
def first_half(x, scale: int):
    return x[: x.shape[0] // 2] * scale

graphs.clear()
h = minicompile(first_half, dynamic=True, backend=recording)
for rows, scale in ((8, 2), (6, 3), (10, 4)):
    x = torch.randn(rows, 8)
    torch.testing.assert_close(h(x, scale), first_half(x, scale))
print(len(graphs), "graph for 3 calls:", graphs[0].code)"""),
        md("""
## One kernel for every size

mininductor compiles the symbolic graph once. The kernel takes the sizes as arguments, and the wrapper reads them
from the inputs at each call (`s77 = arg0_1.shape[0]`), so a new size launches the same kernel on a different
grid -- no new kernel, no recompile."""),
        code("""
import tempfile
from pathlib import Path
import mininductor
from mininductor import metrics
minidynamo.config.log_recompiles = False
metrics.reset()
root = Path(tempfile.mkdtemp())
def inductor(gm, example_inputs):
    with mininductor.config.patch(debug_dir=str(root)):
        return mininductor.compile_fx(gm, example_inputs)

k = minicompile(normalize_rows, dynamic=True, backend=inductor)
for batch in (8, 3, 50):
    x = torch.randn(batch, 32)
    torch.testing.assert_close(k(x), normalize_rows(x))
print("symbolic compiles:", metrics.symbolic_compiles, "| kernels generated:", metrics.generated_kernel_count)
source = (root / "output_code.py").read_text()
start = source.index("# Source nodes")
print(source[start:source.index("\\n\\n\\n", start)])
print(source[source.index("def call"):])"""),
        md("""
## Guards the trace adds

Tracing to ATen can ask about sizes what your program never asked. The backward of `x.chunk(2)` asks whether the
last piece has one row; the `ShapeEnv` answers from the example and records a guard. The symbolic compile carries
those guards (`metrics.size_guards`) and checks them at each call, once per set of sizes: a call that breaks one
gets a compile of its own shape. Here every row count passes them, so one compile trains them all."""),
        code("""
metrics.reset()
def halves(x):
    a, b = x.chunk(2)
    return a.sin() + b[:1].cos()

t = minicompile(halves, dynamic=True, backend="inductor")
for rows in (6, 8, 7, 12):
    x = torch.randn(rows, 3, requires_grad=True)
    t(x).sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    halves(x_ref).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
print("symbolic compiles:", metrics.symbolic_compiles, "| per-shape compiles:", metrics.specialisations)
for guard in dict.fromkeys(metrics.size_guards):
    print("  checked at each call:", guard)"""),
        md("""
## An int argument as a kernel argument

An int that changes between calls is a symbol too. Where it only multiplies or compares with tensors it is passed
as a 0-d tensor; where it is a size -- a slice bound, the length of a new tensor -- the kernel takes it as an
argument, and `call` reads it from its input (`s86 = arg1_1`), exactly as it reads `s77` from a shape. One compile
serves every value (until the twentieth session, each value compiled its own graph)."""),
        code("""
metrics.reset()
root = Path(tempfile.mkdtemp())
def head(x, n):
    return x[:n] * 2 + x.new_ones(n, 1)

c = minicompile(head, dynamic=True, backend=inductor)
for rows, n in ((8, 3), (9, 5), (12, 2)):
    x = torch.randn(rows, 4)
    torch.testing.assert_close(c(x, n), head(x, n))
print("symbolic compiles:", metrics.symbolic_compiles, "| per-shape compiles:", metrics.specialisations)
source = (root / "output_code.py").read_text()
print(source[source.index("def call"):])"""),
        md("""
Training too (since the twenty-first session): the joint graph takes `n` as an int input, and the backward -- which
must put `x[:n]`'s gradient into the first `n` rows of zeros -- gets it as a saved int, kept on the
`autograd.Function`'s `ctx` beside the saved tensors. Still one compile for every value."""),
        code("""
metrics.reset()
def head_loss(x, w, n):
    return (x[:n] @ w).relu().sum()

c = minicompile(head_loss, dynamic=True, backend=inductor)
w = torch.randn(4, 3, requires_grad=True)
for rows, n in ((8, 3), (9, 5), (12, 4)):
    x = torch.randn(rows, 4, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    c(x, w, n).backward()
    head_loss(x_ref, w, n).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
print("symbolic compiles:", metrics.symbolic_compiles, "| per-shape compiles:", metrics.specialisations)"""),
        md("""
## How upstream differs

Upstream's `ShapeEnv` (which we use as it is) also reasons about *unbacked* symbols -- sizes produced by
data-dependent ops such as `nonzero`, which we keep as graph breaks (`capture_dynamic_output_shape_ops` is off,
as upstream's default); it persists automatic-dynamic decisions across processes (profile-guided, `pgo.py`) and
makes strides symbolic too. Inductor's `SizeVarAllocator` simplifies indexing under the guards' assumptions; ours
reads sizes from the inputs and lets sympy simplify (chapter 10)."""),
    ]
