"""Fixtures shared by mininductor's test files (requested by name: ``pytest.mark.usefixtures``)."""
import pytest

import minidynamo
from mininductor import metrics


@pytest.fixture
def fresh_minicompile(monkeypatch):
    """Empty caches and counters before and after the test; translator bugs raise instead of running eagerly."""
    minidynamo.reset()
    metrics.reset()
    monkeypatch.setattr(minidynamo.config, "raise_internal_errors", True)
    yield
    minidynamo.reset()


@pytest.fixture
def library_matmuls(monkeypatch):
    """Small fp32 matrix products keep their library call on the GPU too: for the tests of the extern path, the
    matmul template and the unfused ``addmm``, whose small operands would otherwise lower as reductions
    ([Note: a small matmul as a reduction] in extern_lowering.py)."""
    from mininductor import config
    monkeypatch.setattr(config, "small_mm", "never")
