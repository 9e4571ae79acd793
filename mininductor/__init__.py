"""mininductor: FX/ATen graphs -> Inductor-style IR -> fused Triton kernels (a readable ``torch._inductor``).

    import mininductor
    compiled = torch.compile(fn, backend=mininductor.compile_fx)

Pipeline, one module per stage (``compile_fx.py`` is the driver that reads like this list):

1. ``decomposition``  the table make_fx / AOTAutograd use to reduce torch ops to a small ATen set
2. ``graph``          ``GraphLowering`` runs each ATen node's lowering (``lowering``, ``view_lowering``,
                      ``reduction_lowering``, ``extern_lowering``...) -> the IR of ``ir`` (``Pointwise``/``Reduction`` over ``ops.*`` of
                      ``virtualized``; indices from ``indexing``; reads found by ``dependencies``)
3. ``scheduler``      orders buffers, removes dead ones, fuses them into kernels (saying why not, when not)
4. ``codegen``        ``triton`` (+ ``triton_ops``, ``triton_reduction``): one kernel per fused node;
                      ``wrapper``: the readable ``output_code.py`` with ``call(args)``
5. ``runtime``        code cache, launcher (grids, block sizes, autotuning), CUDA graphs, interpreter on CPU;
                      on the GPU ``async_compile`` compiles a graph's kernels in parallel before its first call,
                      on threads that hand them to ``compile_worker`` processes

``metrics`` counts kernels, externs and fallbacks; ``config`` holds the knobs (``debug``, ``debug_dir``...).
"""
from . import config, metrics
from .compile_fx import compile_fx, compile_fx_inner
from .compile_worker import warm_pool

warm_pool()  # with an NVIDIA GPU: Triton warms up in the background now, workers start if configured (compile_worker/)

__all__ = ["compile_fx", "compile_fx_inner", "config", "metrics"]
