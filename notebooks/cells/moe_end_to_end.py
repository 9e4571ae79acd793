"""Notebook 08 · The MoE end to end.

What it teaches: the tutorial MoE compiled unmodified: breaks, shared cache entries, an expert's kernels, training.
The cells of ``notebooks/08_moe_end_to_end.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, md

NAME = "08_moe_end_to_end"
TITLE = "The MoE end to end"


def cells() -> list:
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
The friendly twin's matrix products are small: the gate, the dispatch and combine `einsum`s (and, at this size,
the experts). On a GPU each is a reduction kernel of ours, not a cuBLAS call, which would cost more host time than
its GPU work ([Note: a small matmul as a reduction] in `mininductor/extern_lowering.py`; chapter 7); on the CPU,
`small_mm="always"` does the same, so the forward is Triton kernels and one ATen fallback (`topk`):"""),
        code("""
import mininductor
friendly.eval()
metrics.reset()
with mininductor.config.patch(small_mm="always"), torch.no_grad(), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.testing.assert_close(minicompile(friendly)(x)[0], friendly(x)[0])
print(metrics.generated_kernel_count, "kernels,", metrics.extern_call_count, "library calls, fallbacks:",
      metrics.fallback_ops)"""),
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
experts = [p for p in sorted(root.glob("graph_*/output_code.py")) if "tl.atomic_add" in p.read_text()]
code = experts[0].read_text()                   # the first expert's graph (the routing's has no scatter)
print(code[code.index("def call"):])"""),
        md("""
## On a GPU: the mask subscripts without `nonzero`, and `mm` + a fused bias

Three things change on a GPU, and each can be watched here on the CPU, through Triton's interpreter.

Under `no_grad`, the expert's two subscripts `sample_indices[expert_mask]` and `flat_probs[expert_mask]` do not run
`nonzero`: the native stretch counts the mask once (one small kernel, then `item`, the one wait for the GPU per
expert) and each subscript is one gather kernel that sends each kept row to the row the mask's prefix sum gives it
([Note: mask gather] in `mininductor/mask_gather.py`; 11% of the eval forward on an H200). The result is eager's,
bit for bit. `native_stretch.GATHER_ON_CPU` turns it on for CPU tensors, as the tests do:"""),
        code("""
from minidynamo import native_stretch
from mininductor import mask_gather
flat_indices = torch.tensor([3, 0, 1, 3, 2, 3, 0, 1])
sample_indices = torch.arange(4)[:, None].expand(-1, 2).flatten()
expert_mask = flat_indices == 3
native_stretch.GATHER_ON_CPU = True
with torch.no_grad():
    n = mask_gather.count(expert_mask)
    expert_samples = native_stretch.mask_subscript(sample_indices, expert_mask)
native_stretch.GATHER_ON_CPU = False
print("count:", n, " gathered:", expert_samples.tolist(), " eager:", sample_indices[expert_mask].tolist())
kernel = mask_gather.KERNEL_SOURCE
print(kernel[kernel.index("def mask_gather_kernel"):kernel.index("@triton.jit", kernel.index("def mask_gather_kernel"))])
"""),
        md("""
That count was still a wait for the GPU per expert. But every expert's mask is `flat_indices == expert_idx`, so
all of the loop's counts are one table of `flat_indices`'s values. The translator passes `t` and `k` of a mask
`t == k` along to `mask_subscript`; the first expert's stretch counts its mask, the second makes the table (a
`Counter` of `flat_indices.tolist()`) because `flat_indices` is the same tensor, unchanged (its `_version`), and no
user code ran in between (the trampoline counts its hops), and every later expert reads its count there ([Note: equality masks
counted once] in `minidynamo/native_stretch.py`). The two subscripts of an expert are also gathered in one launch
([Note: both subscripts in one launch]). And as those two subscripts are the mask's only readers, the graph no
longer makes it: the stretch gets a recipe, `EqualityMask(flat_indices, expert_idx)`, and the gather kernel compares
`flat_indices` with the expert's index itself. The mask is made (`t == k`, eager's own op) only where something needs
it: the first expert's count ([Note: masks the graph does not make]). Watched on the eval forward (the `eager`
backend: the graphs do not matter here, the stretches do):"""),
        code("""
answers = []
count_from_table, make_mask = native_stretch.equality_count, native_stretch.EqualityMask.made
def watched(t, k, m=None):
    n = count_from_table(t, k, m)
    answers.append(f"expert {k}: " + ("counted" if n is None else f"{n} from the table"))
    return n
def watched_making(recipe):
    answers[-1] += ", its mask made"
    return make_mask(recipe)
native_stretch.equality_count, native_stretch.GATHER_ON_CPU = watched, True
native_stretch.EqualityMask.made = watched_making
evaluated = minicompile(make_moe("tutorial", "small").eval(), backend="eager")
with torch.no_grad():
    evaluated(x)
native_stretch.equality_count, native_stretch.GATHER_ON_CPU = count_from_table, False
native_stretch.EqualityMask.made = make_mask
print("\\n".join(answers))"""),
        md("""
And each expert's `Linear` feeds only pointwise ops (the GELU; the multiply by the routing weight), so on a GPU its
`addmm` lowers as `mm` with the bias added by the next kernel, as Inductor's `unfuse_bias_add_to_pointwise` does
([Note: a bias added by its consumer] in `mininductor/extern_lowering.py`): `torch.mm` costs less host time than
`torch.addmm`. `config.unfused_addmm = "always"` shows the GPU's wrapper on the CPU: the first `Linear` is an
`aten_mm`, and its bias is added by the GELU's kernel (named after both: `fused_add_addmm_erf_mul`); the second, whose result the graph returns, stays an `aten_addmm`
(in the MoE it feeds the routing weight's multiply, so it is unfused too):"""),
        code("""
def expert_mlp(x, w1, b1, w2, b2):                # the expert's Linear -> GELU -> Linear
    F = torch.nn.functional
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
args = (torch.randn(4, 8), torch.randn(16, 8), torch.randn(16), torch.randn(8, 16), torch.randn(8))
with mininductor.config.patch(unfused_addmm="always"), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    mlp = minicompile(expert_mlp, backend=backend)
    torch.testing.assert_close(mlp(*args), expert_mlp(*args))
latest = max(root.glob("graph_*/output_code.py"), key=lambda p: int(p.parent.name.split("_")[1]))
text = latest.read_text()
print(text[text.index("def call"):])"""),
        md("""
With at most four rows, each of those `mm`s is not a cuBLAS call at all on a GPU: written as what it computes,
`out[m, n] = sum_k x[m, k] * w[n, k]`, it is one of our reduction kernels ([Note: a skinny mm as a reduction] in
`mininductor/extern_lowering.py`; `config.skinny_mm`). The rows' gather `x[rows]` fuses into the first one as
it reads, the bias and GELU into it as its epilogue (`fused_add_addmm_erf_index_mul`: the first matmul's sums never
leave registers), and the second reads that buffer -- 13-25% off the eval forward on an H200, though the kernels
take twice cuBLAS's GPU time. The `index_add_` then ends the second one's kernel: each program scatters the row
sums it has just computed ([Note: a scatter ends its producer's kernel] in `mininductor/scheduler.py`). The expert
is two kernels and no extern call. The whole expert, as in the loop:"""),
        code("""
def expert(x, rows, w1, b1, w2, b2, weights, outputs):    # one pass of the loop body
    F = torch.nn.functional
    y = F.linear(F.gelu(F.linear(x[rows], w1, b1)), w2, b2)
    return outputs.index_add_(0, rows, y * weights.unsqueeze(-1))
args = (torch.randn(8, 8), torch.tensor([1, 6, 2]), torch.randn(16, 8), torch.randn(16), torch.randn(8, 16),
        torch.randn(8), torch.rand(3), torch.zeros(8, 8))
with mininductor.config.patch(unfused_addmm="always", skinny_mm="always"), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    compiled_expert = minicompile(expert, backend=backend)
    torch.testing.assert_close(compiled_expert(*args[:-1], torch.zeros(8, 8)), expert(*args[:-1], torch.zeros(8, 8)))
latest = max(root.glob("graph_*/output_code.py"), key=lambda p: int(p.parent.name.split("_")[1]))
text = latest.read_text()
print(text[text.index("def call"):])"""),
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
loop eagerly; on an H200 it is slower than eager (16.28 ms vs 10.15 ms forward at reference size, interleaved, on
a slow host). minidynamo breaks inside the loop and keeps compiling around it, with one set of cache entries for
all experts and one frame and one `nonzero` sync per expert: 13.40 ms in the same run, faster than
`torch.compile` and still slower than eager -- each expert pays Python for its frame, guards and launches where
eager pays ATen's C++ dispatch. The speed story belongs to the GPU:
see `docs/benchmarks.md` and `docs/11-moe-end-to-end.md`."""),
    ]
