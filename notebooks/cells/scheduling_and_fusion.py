"""Notebook 06 · Scheduling and fusion.

What it teaches: which IR buffers share a kernel (``can_fuse``, ``score_fusion``), and split reductions.
The cells of ``notebooks/06_scheduling_and_fusion.ipynb``, in the order they appear; ``notebooks/build.py`` writes and
executes them.
"""
from .common import SETUP, code, compile_softmax_plus_total, md

NAME = "06_scheduling_and_fusion"
TITLE = "Scheduling and fusion"


def cells() -> list:
    return [
        md("""
# 06 · Scheduling and fusion

**What you will learn**: how the scheduler decides which IR buffers share one kernel (`can_fuse`,
`score_fusion`), why some pairs are *not* fused (the reason is recorded), and what fusion saves in memory traffic.

**Motivation**: on a GPU most of these ops are bound by memory bandwidth. Every buffer that stays inside a kernel
is a tensor that is never written to and read back from memory."""),
        code(SETUP),
        compile_softmax_plus_total(imports="""
from mininductor import config as inductor_config
from mininductor import viz as iviz""", then="print(a.scheduler)"),
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
