"""Settings every test process shares.

Under ``pytest -n N`` each of the N worker processes would otherwise start one ATen/OpenMP thread per core, so
N * cores threads compete for the cores.  OpenMP's threads spin while they wait for each other, and a parallel op
whose threads are descheduled can take minutes: on the 16-core GPU machine, with 14 workers, an eager CPU
``index_add_`` once passed pytest's 180 s limit.  Each worker gets its share of the cores instead, and processes
the tests start (notebook kernels, compile workers) inherit the same share through ``OMP_NUM_THREADS``.

Each test also starts from its own fixed random seed (a hash of its name): a test's ``torch.randn`` inputs are
the same in every run and in any order of tests, so a result that depends on the values reproduces.
"""
import os
import zlib

import pytest
import torch


def pytest_configure(config) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        share = max(1, (os.cpu_count() or 1) // workers)
        os.environ.setdefault("OMP_NUM_THREADS", str(share))
        torch.set_num_threads(share)


@pytest.fixture(autouse=True)
def _seeded(request) -> None:
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
