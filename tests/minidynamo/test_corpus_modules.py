"""Corpus: nn.Modules compiled whole (Linear, Sequential, ModuleList/Dict, buffers, training branches, gradients).

Each program builds a fresh module per run; the module is compiled like ``torch.compile(model)``.  Outputs, the
module's parameters/buffers/attributes afterwards, and gradients must equal eager's; graph and op counts must equal
real Dynamo's.  Budget: ~15 s on 2 cores.
"""
import corpus
import pytest
from corpus.harness import check_program

PROGRAMS = corpus.select("modules")


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(md, prog):
    check_program(md, prog)
