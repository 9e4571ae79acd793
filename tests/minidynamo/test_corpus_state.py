"""Corpus: state the caller can see -- globals (read and assigned), mutated inputs, grad-mode contexts.

Each program runs eagerly, under real Dynamo and under minidynamo; inputs, globals and gradients are compared
after every run, as well as outputs.  Counts equal real Dynamo's (op counts are relaxed only where a program says
why: grad-mode switch nodes).  Budget: ~15 s on 2 cores.
"""
import corpus
import pytest
from corpus.harness import check_program

PROGRAMS = corpus.select("globals_", "mutation", "contexts")


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(md, prog):
    check_program(md, prog)
