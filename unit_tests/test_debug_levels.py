"""UOPIR_DEBUG: each level adds one labeled dump on stderr (stdout keeps the program's own output), on every backend
that runs here, through Tensor.realize and through uop-run (the only way the mlir backend runs).

    2: `*** <device> ...` per kernel run;  4: `// <language> of kernel NAME` (compiling backends);
    5: `// kernel IR of kernel NAME`;      6: `// device program of kernel NAME` (compiling backends)
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from uopir.backends.realize import DEBUG_ENV, clear_schedule_cache
from uopir.backends.registry import get_backend

LABEL = re.compile(r"^(?://|;) (.+) of kernel (\S+)$")
PROGRAM = Path(__file__).parent.parent / "lit_tests/tools/uop-run/tensor-level.uop"
LANGUAGE = {"c": "C source", "llvm": "LLVM IR", "mlir": "MLIR"}


def labels(err: str) -> list[str]:
    """What each dump says it is, in order: `run <device>` for a kernel line, else the header's subject."""
    out = []
    for line in err.splitlines():
        if line.startswith("*** ") and " tm " in line:
            out.append(f"run {line.split()[1]}")
        elif (m := LABEL.match(line)) is not None:
            out.append(m.group(1))
    return out


def expected(backend: str, level: int) -> set[str]:
    want = {f"run {backend}"} if level >= 2 else set()
    if level >= 4 and backend in LANGUAGE:
        want.add(LANGUAGE[backend])
    if level >= 5:
        want.add("kernel IR")
    if level >= 6 and backend in LANGUAGE:
        want.add("device program")
    return want


def runnable(backend: str) -> None:
    if backend == "mlir":
        pytest.importorskip("xdsl", reason="the mlir backend needs xDSL")
    if not get_backend(backend).available:
        pytest.skip(f"the {backend} backend cannot run on this machine")


@pytest.mark.parametrize("level", [0, 2, 4, 5, 6])
@pytest.mark.parametrize("dev", ["python", "c", "llvm"])
def test_each_level_adds_its_labeled_dump_to_stderr_on_realize(dev: str, level: int, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture) -> None:
    from uopir import Tensor

    runnable(dev)
    clear_schedule_cache()
    monkeypatch.setenv(DEBUG_ENV, str(level))
    capsys.readouterr()
    got = (Tensor([1.0, 2.0, 3.0], device=dev) * 2 + 1).sum().numpy()
    out, err = capsys.readouterr()
    assert float(got) == 15.0 and out == ""
    seen = labels(err)
    assert set(seen) == expected(dev, level), err[:2000]
    assert len(seen) == len(expected(dev, level)), "one kernel: each dump once"
    if level >= 5:
        ir = re.split(r"\n(?://|;|\*\*\*) ", err.split("// kernel IR of kernel ")[1])[0]
        assert "kernel.def" in ir and "device.program" not in ir


@pytest.mark.parametrize("level", [0, 2, 4, 5, 6])
@pytest.mark.parametrize("backend", ["python", "c", "llvm", "mlir"])
def test_each_level_adds_its_labeled_dump_to_stderr_in_uop_run(backend: str, level: int,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture) -> None:
    from uopir.tools.uop_run import main

    runnable(backend)
    monkeypatch.setenv(DEBUG_ENV, str(level))
    capsys.readouterr()
    out = io.StringIO()
    assert main([str(PROGRAM), f"--backend={backend}", "--seed", "3"], out=out) == 0
    _, err = capsys.readouterr()
    assert out.getvalue().startswith("%sum: tensor<2x3xf32>")
    seen = labels(err)
    assert set(seen) == expected(backend, level), err[:2000]
    # two kernels (E_2_3, r_2): every dump once per kernel
    assert len(seen) == 2 * len(expected(backend, level))
