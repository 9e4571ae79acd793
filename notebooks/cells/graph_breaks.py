"""Notebook 04 · Graph breaks and resume functions.

What it teaches: what the translator does with a branch on a tensor's value: a graph break and a resume function.
The cells of ``notebooks/04_graph_breaks.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "04_graph_breaks"
TITLE = "Graph breaks and resume functions"


def cells() -> list:
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
   graph so far, emits code that calls it, runs the jump natively, and hands on to `__resume_at_<offset>`.
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
        md("""
The transformed bytecode, and the resume function it calls. Each branch builds a `Continuation` (`___const_type_0`
is that class) from the compile context and `__resume_at_<offset>`, and *returns* it; the wrapper then calls the
resume function. Objects the code needs are stashed in the globals of `toy`'s module under numbered names, in the
order they were stashed: `___const_CompileContext_3` is the third compile context there, because `step_through`
and `explain` above each compiled `toy` once already."""),
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
        md("""
## A break in a frame with closures

A variable a `lambda` captures lives in a *cell*. The resume function must share that cell object with closures
made before the break, so it takes the frame's cells as its own free variables. One wrinkle: CPython words an
empty free variable as `NameError`, an empty cell as `UnboundLocalError`, and a program may catch one and not the
other. So where the resume function may read a cell before any store (here `return t * 2` when `flag` was false),
it first calls `check_cell_bound(cell, 't')`, which raises CPython's error. The translator evaluates that check
while tracing: with `t` bound it leaves nothing in the graph."""),
        code("""
def closure_after_break(x, flag):
    if flag:
        t = x + 1
    read_t = lambda: t          # t is a cell
    print("break")              # a graph break
    try:
        return t * 2
    except UnboundLocalError as e:
        return str(e)

closures = minicompile(closure_after_break, backend="eager")
for flag in (True, False):
    print(flag, "compiled:", closures(x, flag) if flag else repr(closures(x, flag)))
    print(flag, "eager:   ", closure_after_break(x, flag) if flag else repr(closure_after_break(x, flag)))
import dis
resume = [f for name, f in closure_after_break.__globals__.items() if name.startswith("__resume_at")][-1]
print("the resume function calls:", [i.argval.__name__ for i in dis.get_instructions(resume)
                                     if i.opname == "LOAD_CONST" and callable(i.argval)])"""),
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
