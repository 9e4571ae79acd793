"""mininductor: FX/ATen graphs -> Inductor-style IR -> fused Triton kernels (a readable ``torch._inductor``).

    import mininductor
    compiled = torch.compile(fn, backend=mininductor.compile_fx)

Pipeline, one module per stage (``compile_fx.py`` is the driver that reads like this list):

1. ``decomposition``  the table make_fx / AOTAutograd use to reduce torch ops to a small ATen set
2. ``graph``          ``GraphLowering`` runs each ATen node's lowering (``lowering``, ``view_lowering``,
                      ``reduction_lowering``) -> the IR of ``ir`` (``Pointwise``/``Reduction`` over ``ops.*`` of
                      ``virtualized``; indices from ``indexing``; reads found by ``dependencies``)
3. ``scheduler``      orders buffers, removes dead ones, fuses them into kernels (saying why not, when not)
4. ``codegen``        ``triton`` (+ ``triton_ops``, ``triton_reduction``): one kernel per fused node;
                      ``wrapper``: the readable ``output_code.py`` with ``call(args)``
5. ``runtime``        code cache, launcher (grids, block sizes, autotuning), CUDA graphs, interpreter on CPU

``metrics`` counts kernels, externs and fallbacks; ``config`` holds the knobs (``debug``, ``debug_dir``...).
"""
from . import config, metrics
from .compile_fx import compile_fx, compile_fx_inner

__all__ = ["compile_fx", "compile_fx_inner", "config", "metrics"]
