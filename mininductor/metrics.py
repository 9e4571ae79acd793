"""Counters that tests and benchmarks read (the names of ``torch/_inductor/metrics.py``).

    >>> from mininductor import metrics
    >>> metrics.reset(); compiled = compile_fx(gm, inputs); metrics.generated_kernel_count
    1

``generated_kernel_count`` counts Triton kernels written, ``fallback_count`` ATen ops that ran eagerly because
they have no lowering (ours), ``extern_call_count`` library calls such as mm (ours), ``num_bytes_accessed`` the
bytes each generated kernel reads and writes, summed over kernels (an estimate made at compile time).

``phase_times`` says where compile time goes (upstream: ``torch._dynamo.utils.dynamo_timed`` and
``compile_times()``): ``with timed("lowering"): ...`` adds the block's wall time to ``phase_times["lowering"]``,
*less* the time of ``timed`` blocks nested in it -- so the phases add up to the total, with no double counting
(``timed("aot")`` around AOTAutograd does not include the lowering of the graphs it hands on).
"""
import contextlib
import time
from collections.abc import Iterator

generated_kernel_count: int = 0
fallback_count: int = 0
extern_call_count: int = 0
num_bytes_accessed: int = 0
# Of the extern calls, the skinny fp32 matmuls whose first call times cuBLAS against our Triton template
# (matmul_template.py): still counted as extern calls, since either may run.
matmul_choices: int = 0
# Static compiles made for a symbolic-size graph, one per concrete shape met, when the symbolic compile
# could not serve it (specialize.py); ``symbolic_compiles`` counts graphs compiled once for every size, and
# ``symbolic_fallbacks`` says why each symbolic graph fell back to per-shape compiles.  ``size_guards`` lists
# the relations over sizes that tracing added to a symbolic compile, which each call then checks (specialize.py:
# [Note: guards a symbolic compile adds]).
specialisations: int = 0
symbolic_compiles: int = 0
symbolic_fallbacks: list = []
size_guards: list = []
# Backend calls answered by FxGraphCache (fx_graph_cache.py): a graph equal to one compiled before.
fx_graph_cache_hits: int = 0
# GPU kernel variants compiled by a worker process (compile_worker/), and the jobs a worker failed, died or
# hung on (each then compiled in our process, as without workers), with why.
compile_worker_jobs: int = 0
compile_worker_failures: int = 0
compile_worker_errors: list = []
# Tensors copied into or out of a CUDA graph's static buffers by its replays (cudagraphs.CudaGraphRunner): inputs
# recorded in place -- parameters, buffers, other recordings' outputs -- are never copied.
cudagraph_input_copies: int = 0
# GPU kernel variants launched through our ctypes launcher (static_cuda_launcher.py), and those that took Triton's
# own launcher (built as a C module per argument signature on Triton 3.6), each counted at its first launch.
static_launcher_kernels: int = 0
triton_launcher_kernels: int = 0
# Kernels whose later launches go through a launch function written out for them (direct_launch.generated_launch).
generated_launches: int = 0
# Human-readable notes: which ops fell back, and why each rejected pair was not fused.
fallback_ops: list = []
fusion_rejections: list = []
# Exclusive seconds spent per compile phase (see ``timed``); ``reset`` clears it.
phase_times: dict[str, float] = {}
_timed_stack: list[list[float]] = []  # per open block: [start, time spent in blocks nested in it]


@contextlib.contextmanager
def timed(phase: str) -> Iterator[None]:
    """Add this block's wall time, less that of nested ``timed`` blocks, to ``phase_times[phase]``."""
    frame = [time.perf_counter(), 0.0]
    _timed_stack.append(frame)
    try:
        yield
    finally:
        _timed_stack.pop()
        elapsed = time.perf_counter() - frame[0]
        phase_times[phase] = phase_times.get(phase, 0.0) + elapsed - frame[1]
        if _timed_stack:
            _timed_stack[-1][1] += elapsed


def reset() -> None:
    """Zero every counter (tests call this before compiling)."""
    global generated_kernel_count, fallback_count, extern_call_count, num_bytes_accessed, specialisations
    global symbolic_compiles, fx_graph_cache_hits, compile_worker_jobs, compile_worker_failures
    global cudagraph_input_copies, static_launcher_kernels, triton_launcher_kernels, generated_launches
    global matmul_choices
    generated_kernel_count = fallback_count = extern_call_count = num_bytes_accessed = specialisations = 0
    matmul_choices = 0
    symbolic_compiles = fx_graph_cache_hits = compile_worker_jobs = compile_worker_failures = 0
    cudagraph_input_copies = static_launcher_kernels = triton_launcher_kernels = generated_launches = 0
    compile_worker_errors.clear()
    from . import fx_graph_cache
    fx_graph_cache.clear()  # counts start from an empty cache
    symbolic_fallbacks.clear()
    size_guards.clear()
    fallback_ops.clear()
    fusion_rejections.clear()
    phase_times.clear()
