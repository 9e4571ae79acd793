"""Execute every stored notebook in notebooks/ (one test each) and fail on any cell error.

The notebooks are written by ``notebooks/build.py`` and stored with their outputs; this checks they still run
top to bottom against the package as it is now, with the venv's ``python3`` kernel, from the notebooks folder
(what a reader who opens them gets). Each must take well under two minutes on a 2-core CPU; all of them
together about one and a half.
"""
import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def test_every_stage_has_a_notebook():
    assert [p.name[:2] for p in PATHS] == [f"{k:02d}" for k in range(11)]


@pytest.mark.skipif(shutil.which("dot") is None, reason="the notebooks draw pictures with Graphviz's dot")
@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError, naming the cell, on the first error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
