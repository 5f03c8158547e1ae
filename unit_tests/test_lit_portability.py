"""The lit files stay valid for LLVM's own FileCheck, not only the Python `filecheck` the suite runs by default.

LLVM reads `[[` in a check line as the start of a variable (`[[NAME]]`, `[[NAME:regex]]`, `[[#expr]]`, `[[@LINE]]`)
and fails on anything else (`error: missing closing "]" for regex variable`): a literal `[[` is written
`{{\\[\\[}}`. A regex that opens with `{` (`{{{.*}}`) means something else to each tool: write `{{\\{.*}}`.
`lit --param FILECHECK=PATH` (or FILECHECK=PATH in the environment) runs the suite with another FileCheck."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

LIT = Path(__file__).resolve().parent.parent / "lit_tests"
CHECK_LINE = re.compile(r"^\s*//\s*([A-Z][A-Z0-9_-]*?)(?:-(?:NEXT|SAME|NOT|DAG|LABEL|EMPTY|COUNT-\d+))?:(.*)$")
VARIABLE = re.compile(r"\[\[(?:#|@LINE|\$?[A-Za-z_][A-Za-z0-9_]*(?::|\]\]))")


def problems(text: str) -> list[str]:
    """What LLVM's FileCheck would reject or read differently in `text`'s check lines: 'line N: why'."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = CHECK_LINE.match(line)
        if m is None or m.group(1) in ("RUN", "REQUIRES", "UNSUPPORTED", "XFAIL", "NOTE", "TODO"):
            continue
        body = re.sub(r"\{\{.*?\}\}", lambda r: "{{}}" if not r.group(0).startswith("{{{") else r.group(0), m.group(2))
        if "{{{" in body:
            out.append(f"line {n}: a regex that opens with '{{' ({{{{{{...}}}}): write {{{{\\{{...}}}}")
        for run in re.finditer(r"\[{2,}", body):  # `[[[X]]]` is a literal [ then the variable X, as LLVM reads it
            if VARIABLE.match(body, run.end() - 2) is None:
                out.append(f"line {n}: '[[' that is not a FileCheck variable: write {{{{\\[\\[}}}}")
    return out


def test_the_checker_flags_what_llvm_rejects() -> None:
    assert problems("// NPZ: ['sum'] [[1.0, 3.0], [4.0]] float32") != []
    assert problems("// PIPE: kernel-optimize{{{.*}}target=c}") != []
    assert problems("// NPZ: ['sum'] {{\\[\\[}}1.0, 3.0], [4.0]] float32") == []
    assert problems("// CHECK: %[[X:.*]] = core.add %[[X]], %{{.*}}") == []
    assert problems("// CHECK: data3[[[J]]] = [[[P:[0-9]+]], 4]") == []
    assert problems("// RUN: uop-opt %s | filecheck %s") == []


@pytest.mark.parametrize("path", sorted(LIT.rglob("*.uop")), ids=lambda p: str(p.relative_to(LIT)))
def test_lit_file_is_valid_for_llvm_filecheck(path: Path) -> None:
    assert problems(path.read_text(encoding="utf-8")) == []
