"""Notebook 07 · Triton code generation.

What it teaches: one fused group as a Triton kernel, the wrapper ``output_code.py``, run in the interpreter.
The cells of ``notebooks/07_triton_codegen.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, compile_softmax_plus_total, md

NAME = "07_triton_codegen"
TITLE = "Triton code generation"


def cells() -> list:
    return [
        md("""
# 07 · Triton code generation

**What you will learn**: how one fused group becomes a Triton kernel (`triton_per_fused_...`): program ids and
masks, loads with index expressions, a persistent reduction, stores; how the wrapper `output_code.py` allocates
buffers and launches kernels; and how to run the generated module yourself (here in Triton's interpreter).

**Motivation**: the generated code is plain, readable Python. Reading it is the fastest way to check what the
compiler decided, and where each line of your model went."""),
        code(SETUP),
        compile_softmax_plus_total(imports="""
from mininductor import viz as iviz
from mininductor.runtime import load_module""", then="print(a.source)"),
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
## A template: a matmul written by hand, chosen on the first call

Matmuls usually go to cuBLAS (an extern call in `call`); on the GPU a small one is a reduction kernel of ours instead
(chapter 7). A *skinny* fp32 one with large weights on the GPU -- at most 16 rows, as the compile-friendly MoE's
experts have -- becomes a `MatmulChoice`: the module also holds a hand-written Triton
kernel, `triton_tem_bmm_tf32x3`, and the first call times cuBLAS against it and keeps the faster. On the CPU the
template only runs when asked (`matmul_template="always"`), here through the interpreter:"""),
        code("""
from mininductor import config

def experts(h, w):  # 8 experts, 4 rows each, as in the friendly MoE (smaller)
    return torch.nn.functional.gelu(torch.bmm(h, w))

h, w = torch.randn(8, 4, 64), torch.randn(8, 64, 32)
with config.patch(matmul_template="always"):
    t = iviz.compile_artifacts(experts, h, w)
print(t.source[t.source.index("matmul_choice_0 ="):])
out = load_module(t.source, interpret=True).call([h, w])
torch.testing.assert_close(out[0], experts(h, w), atol=1e-4, rtol=1e-4)
print("the template matches eager")"""),
        md("""
## How upstream differs

Inductor emits `libdevice` math, autotunes block sizes with `@triton_heuristics`, caches compiled kernels by hash
and can emit C++ for CPUs. Kernel names follow the same pattern; `TORCH_LOGS=output_code` prints the same file.

On a GPU, a small compiled call's time is mostly its host time, and the wrapper spends it the way Inductor's does:
buffers come from torch's C++ `empty_strided_cuda((16, 8), (8, 1), torch.float32)` (about 1 us, where
`torch.empty_strided(..., device='cuda:0')` takes 2-4 us), and each `.run(...)` ends in one `cuLaunchKernel`
made by `static_cuda_launcher.py` through torch's C++ launch call (about 6 us of host time on an H200 host).
Chapter 8 of the docs has the numbers."""),
    ]
