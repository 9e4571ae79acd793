"""Corpus: Python semantics -- builtins, containers, functions/closures, user classes, control flow, strings.

Each program runs eagerly, under real Dynamo and under minidynamo (backend=CompileCounter, then backend="eager"):
outputs (types and structure included), mutated inputs and printed text must equal eager's; graph and op counts
must equal real Dynamo's.  Budget: ~40 s on 2 cores.
"""
import corpus
import pytest
from corpus.harness import check_program

PROGRAMS = corpus.select("builtins_", "containers", "functions", "classes", "control_flow", "strings")


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(md, prog):
    check_program(md, prog)
