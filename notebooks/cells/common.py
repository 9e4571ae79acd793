"""What every notebook's cells share: the two cell constructors and the setup cell that opens each notebook.

A notebook is a list of Markdown and code cells written as Python strings (``md``, ``code``); the strings are
stripped, so a cell may start and end on its own line in the source.
"""
from __future__ import annotations

from nbformat.v4 import new_code_cell, new_markdown_cell

# The first code cell of every notebook: choose Triton's interpreter before triton is imported (CPU machines).
SETUP = """\
import os
import torch
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run on CPU tensors in its interpreter
import minidynamo
from minidynamo import minicompile, explain, show_guards, show_transformed, step_through, viz
torch.manual_seed(0)
print(torch.__version__, "| GPU" if torch.cuda.is_available() else "| CPU: kernels run in Triton's interpreter")"""


def md(text: str):
    return new_markdown_cell(text.strip())


def code(text: str):
    return new_code_cell(text.strip())
