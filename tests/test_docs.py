"""The book and the README: the docs build strictly, every chapter names its upstream twin, and the README's
`make demo` command (python -m minidynamo.examples.demo) runs to the end.

Budget: about a minute on a 2-core CPU (mkdocs build ~2 s, the demo with MINICOMPILE_DEMO_QUICK=1 ~50 s).
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CHAPTERS = sorted(DOCS.glob("[0-9][0-9]-*.md"))
UPSTREAM = re.compile(r"torch/(_dynamo|_inductor|_functorch|fx|_decomp|csrc)/")


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (pip install -e .[dev])"
)
def test_mkdocs_build_strict(tmp_path):
    # No "-q": with it, mkdocs 1.6 hides the warnings that --strict turns into a failure, and passes.
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    cmd += ["-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)]
    proc = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = {p.parent.name for p in tmp_path.glob("*/index.html")}
    assert {p.stem for p in CHAPTERS} <= built


def test_chapters_in_processing_order_each_naming_upstream():
    assert [p.name[:2] for p in CHAPTERS] == [f"{i:02d}" for i in range(1, 12)]
    for chapter in CHAPTERS:
        text = chapter.read_text()
        assert text.startswith("# "), chapter.name
        assert UPSTREAM.search(text) or "Upstream twin: none" in text, (
            f"{chapter.name} names no upstream file"
        )


def test_nav_lists_every_page():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.glob("*.md"):
        assert page.name in nav, f"{page.name} is not in mkdocs.yml's nav"
    assert "benchmarks.md" in nav


def test_readme_names_commands_and_every_module():
    readme = (ROOT / "README.md").read_text()
    for command in ("make demo", "make test"):
        assert command in readme
    modules = [
        "eval_frame.py",
        "convert_frame.py",
        "symbolic_convert.py",
        "bytecode_transformation.py",
        "bytecode_analysis.py",
        "output_graph.py",
        "codegen.py",
        "guards.py",
        "source.py",
        "side_effects.py",
        *(
            f"variables/{m}.py"
            for m in (
                "base",
                "tensor",
                "constant",
                "lists",
                "dicts",
                "functions",
                "builtin",
                "torch",
                "nn_module",
                "user_defined",
                "misc",
                "ctx_manager",
                "iter",
            )
        ),
        "backends.py",
        "testing.py",
        "exc.py",
        "config.py",
        "explain.py",
        "resume_execution.py",
        "viz.py",
        "compile_fx.py",
        "aot_autograd.py",
        "partitioners.py",
        "decomposition.py",
        "graph.py",
        "lowering.py",
        "ir.py",
        "virtualized.py",
        "dependencies.py",
        "scheduler.py",
        "codegen/triton.py",
        "codegen/wrapper.py",
        "runtime.py",
        "metrics.py",
    ]
    for module in modules:
        assert f"`{module}`" in readme, f"README's module map lacks {module}"


def test_readme_demo_command_runs(tmp_path):
    """`make demo` exits 0 and runs the MoE end to end: breaks with source lines, kernels, timings, artifacts.

    MINICOMPILE_DEMO_QUICK=1 skips torch.compile's column of the timing table (30+ s per model on CPU), which keeps
    the run near 50 s on a 2-core CPU. Unfinished stages would print 'not yet available' and the demo goes on.
    """
    env = dict(
        os.environ,
        MINICOMPILE_OUT=str(tmp_path),
        MINICOMPILE_CACHE_DIR=str(tmp_path / "cache"),
        MINICOMPILE_DEMO_QUICK="1",
        CUDA_VISIBLE_DEVICES="",  # the CPU path, as in CI: the suite runs with TRITON_INTERPRET=1 set
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "minidynamo.examples.demo"],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for step in range(1, 12):
        assert f"== {step}." in out
    assert "torch " in out and "triton " in out
    # Step 5 draws the graph minidynamo captures for f, as DOT text (and SVG when Graphviz is installed).
    assert (tmp_path / "f_graph.dot").read_text().startswith("digraph f")
    # The MoE section: graph breaks located in the user's source, generated kernels, the timing table, artifacts.
    assert re.search(r"break \d+x at moe\.py:\d+", out), out
    assert "triton_" in out
    assert "MoE timing table" in out and "skipped" in out
    assert "record_function regions: MoE_Routing" in out
    assert list(tmp_path.glob("debug/*/graph_*/output_code.py")), sorted(map(str, tmp_path.rglob("*")))
    assert list(tmp_path.glob("moe_*.svg")) or list(tmp_path.glob("moe_*.dot"))
    assert "not yet available" not in out, out


def test_readme_tour_runs(tmp_path):
    """The README's code blocks, run in order as one script: the tour must stay true as the code changes."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert len(blocks) >= 2
    script = tmp_path / "readme_tour.py"
    script.write_text("\n".join(blocks))
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), TRITON_INTERPRET="1", MINICOMPILE_CACHE_DIR=str(tmp_path / "cache")
    )
    cmd = [sys.executable, str(script)]
    proc = subprocess.run(
        cmd, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TENSOR_MATCH" in proc.stdout  # show_guards printed the guards


def test_readme_relative_links_exist():
    readme = (ROOT / "README.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)#]+)\)", readme) if "://" not in t]
    assert targets, "the README links into docs/"
    for target in targets:
        assert (ROOT / target).exists(), f"README links to missing {target}"
