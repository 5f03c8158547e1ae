"""What `pip install .` gives (issue 28, item 5): the wheel carries every data file the package reads (the visualizer
page's assets, graph.c), each tool answers --version, and the `all` extra holds what its comment says."""
from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import uopir

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_data_file_of_the_package_is_in_the_wheel() -> None:
    """A file under uopir/ that is not Python reaches the wheel only through package-data: one missing from it works
    in a checkout and fails after `pip install .` (the visualizer's page without its script)."""
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    missing = []
    for f in sorted((ROOT / "uopir").rglob("*")):
        if not f.is_file() or f.suffix in (".py", ".pyc") or "__pycache__" in f.parts:
            continue
        rel = f.relative_to(ROOT)
        pkg = ".".join(rel.parent.parts)
        owners = [p for p in data if pkg == p or pkg.startswith(p + ".")]
        inside = [str(rel.relative_to(Path(*p.split(".")))) for p in owners]
        if not any(fnmatch.fnmatch(i, pat) for i, p in zip(inside, owners, strict=True) for pat in data[p]):
            missing.append(str(rel))
    assert missing == []


def test_the_version_is_written_once() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "uopir.__version__"}


@pytest.mark.parametrize("tool", ["uop_opt", "uop_run", "uop_viz"])
def test_each_tool_prints_its_version(tool: str) -> None:
    r = subprocess.run([sys.executable, "-m", f"uopir.tools.{tool}", "--version"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{tool.replace('_', '-')} (uopir) {uopir.__version__}\n", "")


def test_the_all_extra_is_every_extra_but_cuda_and_bench() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    others = {req for name, reqs in extras.items() if name not in ("all", "cuda", "bench") for req in reqs}
    assert set(extras["all"]) == others
