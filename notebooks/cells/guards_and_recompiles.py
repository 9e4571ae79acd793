"""Notebook 03 · Guards and recompiles.

What it teaches: the guards a compiled graph assumes, the generated check, and the recompiles a miss causes.
The cells of ``notebooks/03_guards_and_recompiles.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "03_guards_and_recompiles"
TITLE = "Guards and recompiles"


def cells() -> list:
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
        md("""
Read it top down: the cheap lines that tell one cache entry from another come first (each tensor input's
`requires_grad` and shape: the *early half* of its `TENSOR_MATCH`), then the ambient state and the globals, and
last one call, `___check_tensors(...)`, torch's C++ `TensorGuards`, which checks every tensor's type, dispatch
keys, dtype, device, sizes and strides at once -- upstream's generated checks called the same function. The Python
definition of that check is `tensor_match` in `guards.py`; `show_guards` and the recompile messages use it."""),
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
