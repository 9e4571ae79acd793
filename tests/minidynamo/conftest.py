"""Fixtures of the minidynamo tests: ``md`` (the API under test) and a reset of both compilers before every test.

The corpus machinery itself lives in ``corpus/harness.py``; ``MINIDYNAMO_ORACLE_SELFTEST=1`` makes ``md`` real
``torch._dynamo`` so the corpus can be validated against the oracle (see that module).  Corpus tests listed in
``corpus/known_failures.py`` are marked strict xfail (``MINIDYNAMO_CORPUS_STRICT=1`` runs them plainly).
"""
import os
import sys
from pathlib import Path

import pytest
import torch._dynamo

sys.path.insert(0, str(Path(__file__).parent))  # `import corpus` works whether or not tests/ is a package

from corpus.harness import ORACLE_SELFTEST, Api, load_api, reset_real_dynamo
from corpus.known_failures import KNOWN_FAILURES


def pytest_collection_modifyitems(config, items):
    if ORACLE_SELFTEST or os.environ.get("MINIDYNAMO_CORPUS_STRICT") == "1":
        return
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here and item.name in KNOWN_FAILURES:
            item.add_marker(pytest.mark.xfail(reason=KNOWN_FAILURES[item.name], strict=False))


@pytest.fixture
def md() -> Api:
    return load_api()


@pytest.fixture(autouse=True)
def _reset_compilers(request):
    """Every test starts, and leaves, with empty caches and counters in both compilers."""
    import minidynamo
    reset_real_dynamo()
    minidynamo.reset()
    if "md" in request.fixturenames:
        load_api().reset()
    yield
    torch._dynamo.reset()
    minidynamo.reset()


