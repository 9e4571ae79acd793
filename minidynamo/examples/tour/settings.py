"""What the tour runs on and where it writes: read once from the machine and the environment, at import.

``DEVICE`` is the GPU when there is one; on CPU the tour sets ``TRITON_INTERPRET=1`` here, before anything imports
triton, so the same Triton kernels run in Triton's interpreter. ``OUT`` (``MINICOMPILE_OUT``, default ``out/``)
receives the pictures and mininductor's debug dumps. ``MINICOMPILE_DEMO_QUICK=1`` skips torch.compile's column of
the timing table (30+ s per model on CPU).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

OUT = Path(os.environ.get("MINICOMPILE_OUT", "out"))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    # Triton only compiles for GPUs; on CPU the same kernels run in Triton's interpreter. It must be chosen
    # before triton is first imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")

QUICK = os.environ.get("MINICOMPILE_DEMO_QUICK", "") not in ("", "0")  # skip torch.compile (30+ s per model on CPU)
MOE_SIZE = "reference" if DEVICE == "cuda" else "small"
