"""Test helpers (mirrors ``torch/_dynamo/testing.py``)."""
from __future__ import annotations

import torch


class CompileCounter:
    """A backend that counts graphs (``frame_count``) and their operations (``op_count``), then runs them eagerly."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.frame_count += 1
        self.op_count += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
        self.graphs.append(gm)
        return gm.forward

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs.clear()
