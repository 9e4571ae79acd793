"""Step 11 of the tour: pictures of the two MoEs, and a listing of what the tour left in ``out/``.

Pictures are written as DOT text always, and as SVG too when Graphviz's ``dot`` program is installed
(``save_picture``, which step 5 uses as well). mininductor's debug dumps are already there by now: steps 7 and 8
gave each compiled graph its own folder, ``out/debug/<kind>/graph_<k>/`` (``output_code.py``,
``fx_graph_readable.py``, ``ir_pre_fusion.txt``, ``ir_post_fusion.txt``), and backward graphs ``backward/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from minidynamo.examples.tour.moe_compile import compiled_moe
from minidynamo.examples.tour.settings import OUT


def write_moe_artifacts() -> None:
    """Pictures of the friendly MoE's graph and guards and of the tutorial MoE's break map, then list ``out/``."""
    from minidynamo import viz

    friendly, tutorial = compiled_moe("friendly"), compiled_moe("tutorial")
    save_picture(viz.draw_graph(friendly.report.graphs[0], name="friendly_moe"), "moe_friendly_graph")
    save_picture(viz.draw_guards(friendly.report.out_guards, name="guards of the friendly MoE"),
                 "moe_friendly_guards")
    save_picture(viz.draw_break_map(tutorial.model, tutorial.report, name="break map of the tutorial MoE's forward"),
                 "moe_tutorial_break_map")
    print(f"   files in {OUT}:")
    for line in _listing(OUT):
        print(f"     {line}")


def save_picture(dot, stem: str) -> list[Path]:
    """``OUT/stem.dot`` always; ``OUT/stem.svg`` too when Graphviz's ``dot`` program is installed."""
    from minidynamo import viz

    paths = [OUT / f"{stem}.dot"] + ([OUT / f"{stem}.svg"] if shutil.which("dot") else [])
    for path in paths:
        viz.save(dot, str(path))
    return paths


def _listing(root: Path) -> list[str]:
    """One line per folder holding files: its path and its file names (the debug dumps are many folders)."""
    folders: dict[Path, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "cache" not in p.relative_to(root).parts):
        folders.setdefault(path.parent.relative_to(root), []).append(path.name)
    return [f"{str(folder) + '/' if str(folder) != '.' else './'}: {', '.join(names)}"
            for folder, names in folders.items()]
