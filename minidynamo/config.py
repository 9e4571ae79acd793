"""Knobs for minidynamo (mirrors ``torch/_dynamo/config.py``; only the few a learner needs).

``debug`` is the graded debug knob shared with mininductor: 0 silent; 1 prints each captured FX graph;
2 adds guards; 3 adds original and transformed bytecode; 4 traces every instruction the translator runs.
It starts from the ``MINICOMPILE_DEBUG`` environment variable.
"""
import os

debug: int = int(os.environ.get("MINICOMPILE_DEBUG", "0") or 0)

# After this many cache entries for one code object, a guard miss runs the frame eagerly (with a warning)
# instead of compiling again.  Upstream: ``torch._dynamo.config.recompile_limit``.
recompile_limit: int = 8

# A cap on all cache entries of one code object, whatever their code path (upstream:
# ``accumulated_recompile_limit``, 256).  See [Note: recompile limit per code path] in eval_frame.py.
accumulated_recompile_limit: int = 256

# Log every recompile with the guard that failed (like ``TORCH_LOGS=recompiles``).
log_recompiles: bool = bool(os.environ.get("MINICOMPILE_LOG_RECOMPILES"))

# How deep user functions are inlined before the translator gives up on the frame.
max_inline_depth: int = 32

# Where stage artifacts (graphs, guards, bytecode) are written; None writes nothing.
debug_dir: str | None = os.environ.get("MINICOMPILE_DEBUG_DIR") or None

# Re-raise bugs in the translator instead of running the frame eagerly (tests set this).
raise_internal_errors: bool = bool(os.environ.get("MINICOMPILE_RAISE_INTERNAL"))

# Pause Python's garbage collector while a frame is translated and compiled ([Note: no collector while compiling]
# in eval_frame.py).
pause_gc_while_compiling: bool = True

# Under no_grad, a native stretch's boolean-mask subscript of a CUDA tensor counts the mask once and gathers the
# rows with mininductor's mask-gather kernel instead of nonzero + index_select ([Note: mask gather] in
# mininductor/mask_gather.py); MINICOMPILE_MASK_GATHER=0 keeps eager's ops.
mask_gather: bool = os.environ.get("MINICOMPILE_MASK_GATHER", "1") != "0"
# The gather's count of a mask ``t == k`` read from one table of ``t``'s values, across a loop's stretches ([Note:
# equality masks counted once] in native_stretch.py); MINICOMPILE_EQUALITY_COUNTS=0 counts every mask.
equality_counts: bool = os.environ.get("MINICOMPILE_EQUALITY_COUNTS", "1") != "0"
# A mask ``t == k`` that only a stretch's subscripts read is not made by the graph: the gather compares in its
# kernel ([Note: masks the graph does not make] in native_stretch.py); read when a frame is translated.
# MINICOMPILE_UNMADE_MASKS=0 has the graph make every mask.
unmade_masks: bool = os.environ.get("MINICOMPILE_UNMADE_MASKS", "1") != "0"
