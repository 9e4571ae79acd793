"""Notebook 01 · Bytecode and frames.

What it teaches: code objects and frames; why tracing freezes control flow and bytecode translation does not.
The cells of ``notebooks/01_bytecode_and_frames.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "01_bytecode_and_frames"
TITLE = "Bytecode and frames"


def cells() -> list:
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
with whichever branch was taken. In the transformed code below, `___const_type_0` (the `Continuation` class) and
`___const_CompileContext_1` are objects the translator stashed in `toy`'s globals, numbered in the order they were
stashed; each branch returns `Continuation(context, __resume_at_<offset>, a)` and the wrapper calls that resume
function next (chapter 4)."""),
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
