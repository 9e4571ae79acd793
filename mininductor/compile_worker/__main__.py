"""The worker process: ``python .../mininductor/compile_worker/__main__.py`` (mirrors
``torch/_inductor/compile_worker/__main__.py``).

It imports Triton, not torch (a job runs only a generated module's kernels), compiles one small kernel to warm
Triton up, says ``"ready"``, then answers each ``CompileJob`` read from stdin with ``(ok, error)`` on stdout,
until stdin closes (the parent closed it, or died).  See ``__init__.py``.
"""
import os
import pickle
import sys
import types

_OUT = os.fdopen(os.dup(1), "wb")  # the protocol keeps the real stdout ...
os.dup2(2, 1)  # ... and anything printed, by us or by Triton, goes to stderr

# `import mininductor` would run the package's __init__, which imports the whole compiler and torch (seconds per
# worker, each of them at start-up).  A worker needs only this package, which imports no torch: an empty package
# module that knows where its files are lets `from mininductor.compile_worker import ...` find it without the rest.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if "mininductor" not in sys.modules:
    package = types.ModuleType("mininductor")
    package.__path__ = [_PACKAGE]
    sys.modules["mininductor"] = package

from mininductor.compile_worker import _HEADER, _warm_up_quietly, refuse_torch, run_job

refuse_torch()
import triton.language  # noqa: F401 - the slow import, done before we say we are ready


def send(message) -> None:
    data = pickle.dumps(message)
    _OUT.write(_HEADER.pack(len(data)) + data)
    _OUT.flush()


def main() -> None:
    _warm_up_quietly()  # [Note: a process's first Triton compile]
    send("ready")
    inp = sys.stdin.buffer
    while header := inp.read(_HEADER.size):
        job = pickle.loads(inp.read(_HEADER.unpack(header)[0]))
        try:
            run_job(job)
            send((True, ""))
        except Exception as e:  # noqa: BLE001 - reported; the parent compiles this one itself
            send((False, f"{type(e).__name__}: {e}"[:500]))


if __name__ == "__main__":
    main()
