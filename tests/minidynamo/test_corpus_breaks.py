"""Corpus: programs with graph breaks (print, .item(), data-dependent control flow and shapes, graph_break()).

Graph-break support is a later minidynamo stage; until it lands such frames run eagerly with a recorded reason.
So these tests accept a graph break *or* an eager fallback, but always require results, printed text, mutated
inputs and gradients equal to eager's, and explain() to report consistently.  Budget: ~15 s on 2 cores.
"""
import corpus
import pytest
from corpus.harness import check_break_program

PROGRAMS = corpus.select("breaks")


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_break_program(md, prog):
    check_break_program(md, prog)
