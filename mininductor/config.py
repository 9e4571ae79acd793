"""Knobs for mininductor (mirrors ``torch/_inductor/config.py``, a tiny subset).

``debug`` is a graded level (0 = quiet, 1 = print the output code, 2 = also the IR before/after fusion,
3 = also the FX graph); ``MINICOMPILE_DEBUG`` sets it. ``debug_dir`` (None or a path) makes every compiled graph
write ``fx_graph_readable.py``, ``ir_pre_fusion.txt``, ``ir_post_fusion.txt`` and ``output_code.py`` there.
"""
import contextlib
import os
import sys

debug: int = int(os.environ.get("MINICOMPILE_DEBUG", "0") or 0)
debug_dir: str | None = os.environ.get("MINICOMPILE_DEBUG_DIR") or None

# Where generated modules (wrapper + kernels) are written and imported from.
cache_dir: str = os.environ.get("MINICOMPILE_CACHE_DIR", os.path.join(os.getcwd(), ".minicompile_cache"))

# A multi-use pointwise node is materialised (instead of being recomputed inline in every consumer)
# when it reads more than this many buffers, or when its body has more ops than `realize_ops_threshold`.
realize_reads_threshold: int = 4
realize_ops_threshold: int = 60

# Largest reduction row kept in registers on the GPU (a "persistent" reduction); longer rows loop.
persistent_reduction_max: int = 16384
# On the GPU, a persistent reduction over rows at least this long also gets a looped twin, and the first call
# times both and keeps the faster ([Note: persistent or looped] in runtime.py); None: never.
reduction_kind_autotune_min: int | None = 4096

# Split reductions: at most this many outputs, each reducing at least this many elements, become two kernels
# (partials over many programs, then the partials) -- else x.sum() of 2^26 elements runs on one program.
split_reduction_max_outputs: int = 64
split_reduction_threshold: int = 1 << 16
# A column reduction ("outer": no read contiguous along the rows) over at least this many rows, with at most
# this many outputs, is split over blocks of this many rows ([Note: split column reductions]).
split_outer_reduction_min_rows: int = 4096
split_outer_reduction_max_outputs: int = 8192
split_outer_reduction_block_rows: int = 2048

# Force looped ("red") reductions with this RBLOCK (tests use it to cover the loop path on small rows).
looped_reduction_rblock: int | None = None

# True: var/var_mean/std (and so layer_norm) lower to a Welford reduction, so a looped kernel walks the row once
# for mean and variance together (then once more to normalise), instead of a sum loop and a squared-deviation
# loop; persistent kernels take two sums in registers either way. Measured on an H200 (docs/benchmarks.md),
# 8192-long fp32 rows: 0.1305 ms against 0.1329 for the two loops (torch.compile 0.1318). Before kernels rebound
# their static sizes to constants (TritonKernel._static_numel_lines) Welford was the slower one (0.139 ms): its
# loop with an unknown trip count did not pipeline.
welford_looped: bool = True

# True: a pointwise op whose result is fp16/bf16 rounds it to that dtype (kept in fp32 registers) before the next
# op reads it, as eager does after every op; False rounds only at explicit casts and stores, as Inductor does by
# default (its ``emulate_precision_casts``), which can differ from eager by an ulp of the low-precision dtype
# when a chain ends in an fp32 cast (``(x.bfloat16() + 1).float()``). Costs a cast per op, fp16/bf16 only.
emulate_precision_casts: bool = True

# Skinny fp32 matmuls on the GPU (bmm/mm, at most 16 rows per batch, static sizes): "auto" times cuBLAS against a
# Triton tf32x3 template on the first call and keeps the faster ([Note: tf32x3 for skinny fp32 matmuls] in
# matmul_template.py); "never" keeps cuBLAS; "always" runs the template, on the CPU too (tests).
matmul_template: str = os.environ.get("MINICOMPILE_MATMUL_TEMPLATE", "auto")
# ... "auto" only where the second operand holds at least this many bytes (a read of ~5 us or more on an H200)
matmul_template_min_bytes: int = 16 << 20
# An fp32/fp64 addmm whose result only pointwise ops read lowers as mm + a bias added in their kernel ([Note: a
# bias added by its consumer] in extern_lowering.py): "gpu" (as Inductor), "always" (the CPU too), "never".
unfused_addmm: str = os.environ.get("MINICOMPILE_UNFUSED_ADDMM", "gpu")
# An fp32/fp64 ``mm`` with a few rows lowers as a sum over K of elementwise products -- a reduction kernel into
# which the rows' producer and the pointwise ops after it fuse -- instead of a cuBLAS call ([Note: a skinny mm as
# a reduction] in extern_lowering.py): "gpu" (the default), "always" (the CPU too: tests), "never".
skinny_mm: str = os.environ.get("MINICOMPILE_SKINNY_MM", "gpu")
# ... for at most this many rows (a symbolic count: where the ShapeEnv bounds it so)
skinny_mm_max_rows: int = 4
# ... whose left operand, when computed (a pointwise op of more than this many ops, such as GELU), is stored once
# rather than recomputed for each column (a gather, 2 ops, is recomputed)
skinny_mm_inline_ops: int = int(os.environ.get("MINICOMPILE_SKINNY_MM_INLINE_OPS", "8"))
# An fp32/fp64 ``mm``/``bmm`` (``addmm``/``baddbmm``: plus their bias) of at most ``small_mm_max_products``
# products (batch x rows x columns x K) lowers as a reduction kernel too, whatever its row count ([Note: a small
# matmul as a reduction] in extern_lowering.py): "gpu" (the default), "always" (the CPU too: tests), "never".
small_mm: str = os.environ.get("MINICOMPILE_SMALL_MM", "gpu")
small_mm_max_products: int = 1 << 22

# Transposing pointwise kernels get 2-D tiles on the GPU; tests turn this on to run that code on CPU too.
tile_in_interpreter: bool = False

# Static sizes rebound to constants at the top of each kernel (``xnumel = 8192``), as Inductor does: loops get a
# known trip count (TritonKernel._static_numel_lines). False keeps them plain arguments (for benchmarks).
static_numels: bool = True

# L2 hints on reduction loads (see TritonKernel._eviction; bench/kernel_configs.py measures them).
eviction_policies: bool = True

# Under Triton's interpreter each program costs milliseconds: use one huge block instead.
interpret_block_max: int = 1 << 16

# mode="reduce-overhead": CUDA graphs recorded per compiled graph, one per input size signature, at most this many
# (upstream warns past 8 distinct sizes); calls with further sizes run without a graph.
cudagraph_max_shapes: int = 8
# ... and per size signature, one recording per set of parameters, at most this many: a graph several modules share
# (the tutorial MoE's 32 experts) replays each module's weights in place ([Note: one recording per shape and per set
# of parameters] in compile_fx.py).
cudagraph_max_static_variants: int = 64

# "default" | "max-autotune" | "reduce-overhead"; set per call by compile_fx(mode=...).
mode: str = "default"

# GPU: fp32 ``/`` as IEEE division (``tl.div_rn``), as eager's; off, Triton's approximate ``/`` (within 2 ulp:
# ``6 / 3`` may be 1.9999999, which a trunc or floor after it shows). Upstream has it off by default
# (``eager_numerics.division_rounding``, about 2% on an A100's division-heavy kernels, others report none).
division_rounding: bool = True

# Fuse nodes at all (turn off to see one kernel per buffer).
fusion: bool = True
# A scatter (``index_add_``) may end the kernel that computes what it scatters ([Note: a scatter ends its
# producer's kernel] in scheduler.py); MINICOMPILE_FUSE_SCATTERS=0 runs every scatter as a kernel of its own.
fuse_scatters: bool = os.environ.get("MINICOMPILE_FUSE_SCATTERS", "1") != "0"

# GPU: how many kernels of a graph compile at once, before its first call (async_compile.py); None = one per core,
# at most 8; 1 = each kernel compiles at its first launch.
compile_threads: int | None = int(os.environ["MINICOMPILE_COMPILE_THREADS"]) \
    if os.environ.get("MINICOMPILE_COMPILE_THREADS") else None

# GPU: worker processes that compile those kernels (compile_worker/; threads alone stop helping at ~2.2x).  0 (the
# default) = none: the threads compile in-process.  Off by default because a worker takes 5-8 s to start (it imports
# torch), and workers starting beside a first call made it 1.4x slower on an H200 host; once started they compile
# a batch of kernels 3x faster than the threads (docs/benchmarks.md).  A job a worker has not answered after
# compile_worker_timeout seconds is compiled in-process; a worker not started after compile_worker_start_timeout is
# never used.
compile_workers: int = int(os.environ.get("MINICOMPILE_COMPILE_WORKERS") or 0)
# GPU: compile one tiny kernel and build Triton's driver helpers on a background thread when minidynamo or
# mininductor is imported, so the first compiled call does not pay for Triton's start-up ([Note: a process's first
# Triton compile], [Note: Triton's driver helpers]).
warm_up_triton: bool = os.environ.get("MINICOMPILE_WARM_UP", "1") != "0"
compile_worker_timeout: float = 120.0
compile_worker_start_timeout: float = 120.0


@contextlib.contextmanager
def patch(**changes):
    """``with config.patch(mode="max-autotune"): ...`` sets knobs for the block, then restores them."""
    module = sys.modules[__name__]
    prior = {k: getattr(module, k) for k in changes}
    for k, v in changes.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in prior.items():
            setattr(module, k, v)

# Launch compiled GPU kernels through their binary's launcher after the first call (see direct_launch.DirectLauncher).
direct_launch: bool = os.environ.get("MINICOMPILE_DIRECT_LAUNCH", "1") != "0"
# Launch GPU kernels with our own cuLaunchKernel call (static_cuda_launcher.py) rather than the C launcher Triton
# 3.6 compiles for each new argument signature; kernels it cannot launch still go through Triton. On by default
# since the CUDA suite passed with it (docs/08-triton-codegen.md); MINICOMPILE_STATIC_CUDA_LAUNCHER=0 turns it off.
static_cuda_launcher: bool = os.environ.get("MINICOMPILE_STATIC_CUDA_LAUNCHER", "1") != "0"
# ... and make that launcher's driver call through torch's C++ launch call where torch has one (about 3 us less host
# time per launch than our ctypes call; [Note: the launch call]). MINICOMPILE_TORCH_LAUNCH=0 keeps the ctypes call.
static_launch_via_torch: bool = os.environ.get("MINICOMPILE_TORCH_LAUNCH", "1") != "0"
# After its first direct launch, launch each kernel through Python written out for it ([Note: a generated launch]
# in direct_launch.py).
generated_launch: bool = os.environ.get("MINICOMPILE_GENERATED_LAUNCH", "1") != "0"
