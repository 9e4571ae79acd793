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
