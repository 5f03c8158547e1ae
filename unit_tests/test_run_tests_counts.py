"""tools/run_tests.py's counting: CI reads only its last line, `N passed, N failed, N skipped`, so the numbers behind
it come from the runners' own reports, skips included."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import run_tests  # noqa: E402 - tools/run_tests.py, by path


def test_pytest_report_counts_skips_apart_from_passes(tmp_path: Path) -> None:
    xml = tmp_path / "r.xml"
    xml.write_text('<testsuites><testsuite tests="10" failures="1" errors="2" skipped="3"/>'
                   '<testsuite tests="4" failures="0" errors="0" skipped="1"/></testsuites>', encoding="utf-8")
    assert run_tests._pytest_counts(1, xml) == (7, 3, 4, True)
    assert run_tests._pytest_counts(0, tmp_path / "missing.xml") == (0, 0, 0, False)


def test_lit_summary_lines_are_read_with_unsupported_as_skipped() -> None:
    lines = ["Total Discovered Tests: 9", "  Unsupported: 2 (22.22%)", "  Passed     : 6 (66.67%)",
             "  Failed     : 1 (11.11%)"]
    got = {m.group(1): int(m.group(2)) for ln in lines if (m := run_tests._LIT_LINE.match(ln))}
    assert got == {"Unsupported": 2, "Passed": 6, "Failed": 1}
    assert sum(got.get(k, 0) for k in run_tests._LIT_SKIP) == 2


def test_llvm_filecheck_is_found_by_its_debian_names_never_the_python_one(tmp_path: Path) -> None:
    for version in ("17", "19"):
        tool = tmp_path / f"llvm-{version}" / "bin" / "FileCheck"
        tool.parent.mkdir(parents=True)
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    (tmp_path / "llvm-x" / "bin").mkdir(parents=True)
    python_one = tmp_path / "venv" / "filecheck"
    python_one.parent.mkdir()
    python_one.write_text("")
    (tmp_path / "venv" / "FileCheck").symlink_to(python_one)  # a FileCheck that is the Python filecheck
    on_path = {"FileCheck": str(tmp_path / "venv" / "FileCheck")}
    assert run_tests.llvm_filecheck(on_path.get, str(tmp_path)) == str(tmp_path / "llvm-19" / "bin" / "FileCheck")
    assert run_tests.llvm_filecheck({"FileCheck-19": "/usr/bin/FileCheck-19"}.get, str(tmp_path)) == \
        "/usr/bin/FileCheck-19"
    assert run_tests.llvm_filecheck(lambda _: None, str(tmp_path / "none")) is None
