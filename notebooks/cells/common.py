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


# The program notebooks 05-07 compile in their first code cell: a row softmax (a reduction, and the pointwise ops
# that fuse with it) plus a whole-tensor sum (a reduction over another iteration space).
SOFTMAX_PLUS_TOTAL = """\
def softmax_plus_total(x):
    y = torch.softmax(x, -1)
    return y * 2 + x.sum()

x = torch.randn(4, 8)
a = iviz.compile_artifacts(softmax_plus_total, x)"""


def compile_softmax_plus_total(imports: str, then: str):
    """The first code cell of notebooks 05-07: ``imports``, ``SOFTMAX_PLUS_TOTAL`` compiled, then ``then``."""
    return code(f"{imports.strip()}\n\n{SOFTMAX_PLUS_TOTAL}\n{then}")
