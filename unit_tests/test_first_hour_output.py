"""Output whose words are the contract (issue 28, "misleading output"): each test names the defect it guards.

examples/mlp.py on c claimed the reference interpreter; UOPIR_DUMP_PATTERNS=1 wrote into uop-opt's stdout; the
ONNX conformance summary printed `(; 0 reasons)`; bench/train_step.py printed `(failed: ...)` without naming the leg.
(uop-run --backend=all and --help leaving out mlir: unit_tests/test_uop_run.py; the UOPIR_DEBUG dumps:
unit_tests/test_debug_levels.py.)"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from uopir.backends.registry import available

ROOT = Path(__file__).resolve().parent.parent


def _env(**kw: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UOPIR_DEBUG")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(kw)
    return env


@pytest.mark.parametrize("dev,how", [("python", "the reference interpreter"), ("c", "compiled kernels")])
def test_mlp_example_names_the_device_that_ran_it(dev: str, how: str) -> None:
    if dev not in available():
        pytest.skip(f"{dev} cannot run here")
    p = subprocess.run([sys.executable, str(ROOT / "examples/mlp.py")], capture_output=True, text=True,
                       env=_env(UOPIR_DEVICE=dev), timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"// result (realized on device {dev!r}: {how})" in p.stdout.splitlines()
    if dev != "python":
        assert "reference interpreter" not in p.stdout


def test_dump_patterns_goes_to_stderr_not_into_the_ir() -> None:
    # 100 adds: a matcher compiles an op's function on its HOT_CALLS-th call (48), which is when it dumps
    lines = ["%v0 = kernel.var {name = \"n\", min = 1, max = 32} : index", "%c = core.const 3 : index"]
    lines += [f"%v{i} = core.add %v{i - 1}, %c : index" for i in range(1, 101)] + ["core.sink %v100"]
    text = "\n".join(lines) + "\n"
    cmd = [sys.executable, "-m", "uopir.tools.uop_opt", "-", "-p", "canonicalize"]
    plain = subprocess.run(cmd, input=text, capture_output=True, text=True, env=_env(), timeout=120)
    dumped = subprocess.run(cmd, input=text, capture_output=True, text=True, env=_env(UOPIR_DUMP_PATTERNS="1"),
                            timeout=120)
    assert plain.returncode == dumped.returncode == 0, dumped.stderr
    assert dumped.stdout == plain.stdout and "core.add" in plain.stdout
    assert "# --- PatternMatcher(" in dumped.stderr and "def _rw(u, ctx):" in dumped.stderr


def test_conformance_summary_has_no_empty_skip_parenthesis() -> None:
    from uopir.onnx.conformance import Result, summary_line

    ok = [Result("test_add", "Add", "passed"), Result("test_mul", "Mul", "failed", "boom")]
    assert summary_line(ok, "c") == "onnx node tests on c: 1 passed, 1 failed, 0 skipped of 2"
    one = summary_line([*ok, Result("test_x", "X", "skipped", "unsupported op X")], "c")
    assert one.startswith("onnx node tests on c: 1 passed, 1 failed, 1 skipped (") and one.endswith("; 1 reason) of 3")


def test_train_step_bench_names_the_leg_that_failed(capsys: pytest.CaptureFixture) -> None:
    spec = importlib.util.spec_from_file_location("train_step_bench", ROOT / "bench/train_step.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod._run("import sys; sys.exit('tinygrad is too old')", dict(os.environ), "model=cnn impl=tinygrad") is None
    assert capsys.readouterr().out == "train_step model=cnn impl=tinygrad failed=(tinygrad is too old)\n"
