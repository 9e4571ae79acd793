"""Notebook 02 · Symbolic execution to FX.

What it teaches: the translator over variable trackers, walked one instruction at a time with ``step_through``.
The cells of ``notebooks/02_symbolic_execution.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "02_symbolic_execution"
TITLE = "Symbolic execution to FX"


def cells() -> list:
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
