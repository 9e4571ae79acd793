"""The learner notebooks' cells, one module per notebook, in reading order.

Each module names its notebook (``NAME``, the ``.ipynb`` file's stem), gives it a ``TITLE`` and returns its cells
from ``cells()``, in the Triton-tutorials skeleton: what you will learn, motivation, mechanism, code that calls the
package, a check against eager PyTorch, a measurement, and how upstream differs. ``common`` holds what they share.
"""
from . import (
    aten_decompositions_ir,
    bytecode_and_frames,
    dynamic_shapes,
    graph_breaks,
    guards_and_recompiles,
    moe_end_to_end,
    scheduling_and_fusion,
    symbolic_execution,
    tour,
    training_aot_autograd,
    triton_codegen,
)

NOTEBOOKS = [
    tour,
    bytecode_and_frames,
    symbolic_execution,
    guards_and_recompiles,
    graph_breaks,
    aten_decompositions_ir,
    scheduling_and_fusion,
    triton_codegen,
    moe_end_to_end,
    training_aot_autograd,
    dynamic_shapes,
]
