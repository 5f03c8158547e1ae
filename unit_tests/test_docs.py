"""The docs stay true (issue 28, item 1): their tables of passes, pipelines, backends and environment variables are
what the registries hold (uopir/tools/gen_docs.py writes them), and no sentence calls a registered thing missing,
planned or not written yet. A planted stale table or claim fails the check."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from uopir.ir import env
from uopir.tools import gen_docs

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_match_the_registries_and_claim_nothing_stale() -> None:
    assert gen_docs.check() == []


def test_every_table_is_in_some_doc() -> None:
    text = "\n".join(f.read_text(encoding="utf-8") for f in gen_docs.doc_files())
    for name in gen_docs.TABLES:
        assert f"<!-- generated: {name} (python -m uopir.tools.gen_docs) -->" in text, name


def _copy_docs(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    for f in gen_docs.doc_files():
        shutil.copy(f, tmp_path / f.relative_to(ROOT))
    return tmp_path


def test_a_stale_table_fails_and_regenerating_fixes_it(tmp_path: Path) -> None:
    root = _copy_docs(tmp_path)
    internals = root / "docs" / "internals.md"
    text = internals.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `UOPIR_NOOPT` |"))
    internals.write_text(text.replace(row + "\n", ""), encoding="utf-8")  # a variable the doc forgot
    assert gen_docs.check(root) == ["docs/internals.md: environment: differs from what the code registers (run "
                                    "python -m uopir.tools.gen_docs)"]
    fixed, changed = gen_docs.regenerate(internals.read_text(encoding="utf-8"))
    assert changed and row in fixed


def test_a_new_variable_shows_up_as_a_difference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy_docs(tmp_path)
    monkeypatch.setitem(env.REGISTRY, "UOPIR_PLANTED", env.EnvVar("UOPIR_PLANTED", env.flag, False, "x", "0 or 1"))
    assert any("environment: differs" in p for p in gen_docs.check(root))


@pytest.mark.parametrize("claim", [
    "The `kernel-simplify` pass is not written yet.",
    "Lowering to C is still to come (`default`).",
    "The opencl backend is a PendingBackend.",
    "An ONNX importer is planned.",
    "Today only `python`, the reference interpreter, runs programs.",
])
def test_a_planted_stale_claim_fails(tmp_path: Path, claim: str) -> None:
    root = _copy_docs(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + f"\n{claim}\n", encoding="utf-8")
    problems = gen_docs.check(root)
    assert len(problems) == 1 and problems[0].startswith("README.md:") and claim in problems[0]


def test_a_stale_docstring_fails(tmp_path: Path) -> None:
    """backends/registry.py's docstring once called opencl, cuda and mlir "not written yet"."""
    pkg = tmp_path / "uopir" / "backends"
    pkg.mkdir(parents=True)
    (pkg / "registry.py").write_text('"""Backends."""\n\n\ndef f():\n    """Only python and c run.\n\n    opencl, cuda '
                                     'and mlir are not written yet."""\n')
    found = gen_docs.docstring_claims(tmp_path)
    assert len(found) == 1 and found[0].startswith("uopir/backends/registry.py:7: names cuda, mlir, opencl")


def test_a_planned_section_names_what_exists() -> None:
    text = "## Planned\n\nOther issues are building these:\n\n- the `mlir` backend\n- a JIT\n- quantum kernels\n"
    found = gen_docs.stale_claims(text, "x.md")
    assert [f.split(": names ")[1].split(" as ")[0] for f in found] == ["mlir", "jit"]


def test_true_sentences_are_not_claims() -> None:
    text = ("`UOPIR_C_TIERED=0` turns the tier off, as does llvmlite when it is missing.\n\n"
            "A kernel not yet in the compile cache runs on `c` through LLVM first.\n")
    assert gen_docs.stale_claims(text) == []


def test_the_docs_link_nowhere_outside_the_repository() -> None:
    import re

    for f in gen_docs.doc_files():
        links = re.findall(r"\]\((https?:[^)]*)\)", f.read_text(encoding="utf-8"))
        assert links == [], (f.name, links)
