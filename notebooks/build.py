"""Build (and execute) the learner notebooks from their cells: ``.venv/bin/python notebooks/build.py``.

Why a generator: a notebook's JSON is hard to review and to keep in step with the package; Python strings are
not.  The cells live in ``notebooks/cells/``, one module per notebook (``cells/tour.py`` writes ``00_tour.ipynb``);
this file only turns them into ``.ipynb`` files. The notebooks only call the package (never re-implement it), run
on CPU (kernels in Triton's interpreter) and are stored with their outputs, so they read well on a code host.

    .venv/bin/python notebooks/build.py              # write and execute all of them
    .venv/bin/python notebooks/build.py 00 03        # only these
    .venv/bin/python notebooks/build.py --no-execute # write without outputs

``tests/test_notebooks.py`` executes each stored notebook (one test per notebook) and fails on any error.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from cells import NOTEBOOKS as MODULES  # this script's folder is on sys.path: the cells sit next to it
from nbformat.v4 import new_notebook

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 120  # each cell; a whole notebook must stay well under two minutes on a 2-core CPU
NOTEBOOKS: dict[str, tuple[str, list]] = {m.NAME: (m.TITLE, m.cells()) for m in MODULES}


def build(name: str, execute: bool = True) -> float:
    title, cells = NOTEBOOKS[name]
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (minicompile .venv)", "language": "python"},
        "language_info": {"name": "python"}, "title": title})
    elapsed = 0.0
    if execute:
        elapsed = execute_notebook(nb)
    nbformat.write(nb, HERE / f"{name}.ipynb")
    return elapsed


def execute_notebook(nb) -> float:
    """Run ``nb`` in place with the venv's ``python3`` kernel, from this folder; returns the seconds taken."""
    from nbclient import NotebookClient
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    return time.perf_counter() - t0


def main(argv: list[str]) -> None:
    execute = "--no-execute" not in argv
    wanted = [a for a in argv if not a.startswith("--")]
    for name in NOTEBOOKS:
        if not wanted or any(name.startswith(w) for w in wanted):
            print(f"{name}: {build(name, execute):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
