"""Counters that tests and benchmarks read (the names of ``torch/_inductor/metrics.py``).

    >>> from mininductor import metrics
    >>> metrics.reset(); compiled = compile_fx(gm, inputs); metrics.generated_kernel_count
    1

``generated_kernel_count`` counts Triton kernels written, ``fallback_count`` ATen ops that ran eagerly because
they have no lowering (ours), ``extern_call_count`` library calls such as mm (ours), ``num_bytes_accessed`` the
bytes each generated kernel reads and writes, summed over kernels (an estimate made at compile time).
"""
generated_kernel_count: int = 0
fallback_count: int = 0
extern_call_count: int = 0
num_bytes_accessed: int = 0
# Static compiles made for a symbolic-size graph, one per concrete shape met, when the symbolic compile
# could not serve it (specialize.py); ``symbolic_compiles`` counts graphs compiled once for every size, and
# ``symbolic_fallbacks`` says why each symbolic graph fell back to per-shape compiles.
specialisations: int = 0
symbolic_compiles: int = 0
symbolic_fallbacks: list = []
# Backend calls answered by FxGraphCache (fx_graph_cache.py): a graph equal to one compiled before.
fx_graph_cache_hits: int = 0
# Human-readable notes: which ops fell back, and why each rejected pair was not fused.
fallback_ops: list = []
fusion_rejections: list = []


def reset() -> None:
    """Zero every counter (tests call this before compiling)."""
    global generated_kernel_count, fallback_count, extern_call_count, num_bytes_accessed, specialisations
    global symbolic_compiles, fx_graph_cache_hits
    generated_kernel_count = fallback_count = extern_call_count = num_bytes_accessed = specialisations = 0
    symbolic_compiles = fx_graph_cache_hits = 0
    from . import fx_graph_cache
    fx_graph_cache.clear()  # counts start from an empty cache
    symbolic_fallbacks.clear()
    fallback_ops.clear()
    fusion_rejections.clear()
