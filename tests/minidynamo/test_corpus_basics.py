"""Corpus: tensor arithmetic, torch functions and Tensor methods (see corpus/ for the programs).

Each program runs eagerly, under real Dynamo and under minidynamo (backend=CompileCounter, then backend="eager"):
outputs, mutated inputs and printed text must equal eager's; graph and op counts must equal real Dynamo's.
Budget: ~25 s on 2 cores.
"""
import corpus
import pytest
from corpus.harness import check_program

PROGRAMS = corpus.select("arith", "torch_fns", "tensor_methods")


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(md, prog):
    check_program(md, prog)
