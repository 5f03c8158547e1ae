"""The registry of environment variables (uopir/ir/env.py, issue 28): every variable the package reads is declared
there and read through it, a bad value is one error naming the variable (exit 1 from the tools), and tinygrad's
DEBUG, NOOPT, VIZ and BEAM work as aliases with the UOPIR_ name winning when both are set."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from uopir import Tensor
from uopir.backends.realize import debug_level
from uopir.ir import env
from uopir.ir.uop import UOp
from uopir.passes.kernel.strategies import beam_width_from_env
from uopir.passes.manager import PassManager

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for d in ("uopir", "tools", "examples") for p in sorted((ROOT / d).rglob("*.py"))]
# variables read outside the registry on purpose: the platform's own (not uopir settings)
NOT_UOPIRS = {"XDG_CACHE_HOME", "PATH", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "HOME", "CI", "DEBIAN_FRONTEND"}


def _environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, how) for each os.environ.get / os.getenv / os.environ[...] read in a module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = ast.unparse(node.func)
            if f in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ") \
                and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_every_uopir_variable_named_in_the_code_is_declared() -> None:
    named = set()
    for p in SOURCES:
        named |= set(re.findall(r"\bUOPIR_[A-Z0-9_]*[A-Z0-9]\b", p.read_text(encoding="utf-8")))
    # names that are not environment variables: C macros of the generated code
    named -= {"UOPIR_MAX_ARGS", "UOPIR_CUDA_FP16", "UOPIR_CUDA_BF16", "UOPIR_SOFT_F16"}
    assert named - set(env.REGISTRY) == set()


def test_no_module_reads_the_environment_behind_the_registry() -> None:
    """A new setting is declared in uopir/ir/env.py (one line) and read through it, so its docs and its error
    follow; only the platform's own variables are read directly (a whole-environment copy for a child is fine)."""
    stray = []
    for p in SOURCES:
        if p == ROOT / "uopir" / "ir" / "env.py" or p.parent.name == "tools" and p.parent.parent == ROOT:
            continue  # the registry itself; tools/ at the top is the test runner, which sets variables for children
        for line, how in _environ_reads(ast.parse(p.read_text(encoding="utf-8"))):
            if not any(repr(n) in how or f'"{n}"' in how for n in NOT_UOPIRS):
                stray.append(f"{p.relative_to(ROOT)}:{line}: {how}")
    assert stray == []


def test_every_declared_variable_has_help_and_a_default_its_parser_agrees_with() -> None:
    for name, var in env.REGISTRY.items():
        assert var.help and var.values, name
        assert name.startswith("UOPIR_") or name in ("CC", "NVCC"), name


@pytest.mark.parametrize("alias", ["DEBUG", "NOOPT", "VIZ", "BEAM"])
def test_tinygrad_names_are_aliases_and_the_uopir_name_wins(monkeypatch: pytest.MonkeyPatch, alias: str) -> None:
    var = env.REGISTRY[env.ALIASES[alias]]
    assert var.name == f"UOPIR_{alias}"
    monkeypatch.delenv(var.name, raising=False)
    monkeypatch.setenv(alias, "1")
    assert var.raw() == "1" and var.source() == (alias, "1")
    monkeypatch.setenv(var.name, "0")
    assert var.raw() == "0" and var.source() == (var.name, "0")  # both set: the UOPIR_ name
    monkeypatch.setenv(var.name, "")
    assert var.raw() == "1"  # set but empty counts as unset


def test_debug_alias_sets_the_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UOPIR_DEBUG", raising=False)
    monkeypatch.setenv("DEBUG", "4")
    assert debug_level() == 4
    monkeypatch.setenv("UOPIR_DEBUG", "2")
    assert debug_level() == 2


def test_debug_alias_prints_kernel_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("UOPIR_DEBUG", raising=False)
    monkeypatch.setenv("DEBUG", "2")
    x = (Tensor([1.0, 2.0, 3.0], device="python") * 5).sum().item()
    assert x == 30.0
    assert capsys.readouterr().err.startswith("*** python")  # level 2: one line per kernel run (on stderr)
    monkeypatch.setenv("UOPIR_DEBUG", "0")  # the UOPIR_ name wins: silent
    assert (Tensor([1.0, 2.0, 4.0], device="python") * 5).sum().item() == 35.0
    assert capsys.readouterr().err == ""


def test_noopt_alias_turns_the_heuristic_off(monkeypatch: pytest.MonkeyPatch) -> None:
    x = Tensor.ones(8, 32, device="python").contiguous() @ Tensor.ones(32, 16, device="python").contiguous()
    base = PassManager.parse("tensor-to-kernel").run(UOp.sink(x.uop))
    monkeypatch.delenv("UOPIR_NOOPT", raising=False)
    monkeypatch.setenv("NOOPT", "1")
    assert PassManager.parse("kernel-optimize").run(base) is base
    monkeypatch.setenv("UOPIR_NOOPT", "0")  # wins over NOOPT=1
    assert PassManager.parse("kernel-optimize").run(base) is not base


def test_beam_alias_sets_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UOPIR_BEAM", raising=False)
    monkeypatch.setenv("BEAM", "2")
    assert beam_width_from_env() == 2
    monkeypatch.setenv("UOPIR_BEAM", "0")
    assert beam_width_from_env() is None
    monkeypatch.setenv("UOPIR_BEAM", "wide")
    with pytest.raises(env.EnvError, match=r"\$UOPIR_BEAM must be a beam width.*'wide'"):
        beam_width_from_env()


def _program_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in env.ALIASES and k not in env.ALIASES.values()}
    return {**base, "PYTHONPATH": str(ROOT), **extra}


def test_viz_alias_records_a_trace_and_the_uopir_name_wins(tmp_path: Path) -> None:
    code = "from uopir import Tensor; print((Tensor([1.0, 2.0], device='python') * 3).sum().item())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_program_env(VIZ=str(tmp_path / "a.html")))
    assert r.returncode == 0 and r.stdout.strip() == "9.0", r.stderr
    assert (tmp_path / "a.json").is_file()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=_program_env(VIZ=str(tmp_path / "b.html"), UOPIR_VIZ=str(tmp_path / "c.html")))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "c.json").is_file() and not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("name,value,message", [
    ("UOPIR_DEBUG", "loud", "$UOPIR_DEBUG must be a level, an integer >= 0, got 'loud'"),
    ("DEBUG", "loud", "$DEBUG (tinygrad's name for UOPIR_DEBUG) must be a level"),
    ("UOPIR_NOOPT", "maybe", "$UOPIR_NOOPT must be 0 or 1, got 'maybe'"),
    ("UOPIR_THREADS", "0", "$UOPIR_THREADS must be an integer >= 1, got '0'"),
    ("UOPIR_CACHE_MAX_MB", "-3", "$UOPIR_CACHE_MAX_MB must be a number of megabytes (0 for no bound), got '-3'"),
    ("UOPIR_DUMP_PATTERNS", "maybe", "$UOPIR_DUMP_PATTERNS must be 0 or 1, got 'maybe'"),  # read at import
    ("UOPIR_PROGRESS", "loud", "$UOPIR_PROGRESS must be 0 (no progress), 1"),
])
def test_a_bad_value_is_one_located_error_from_the_tools(name: str, value: str, message: str) -> None:
    for tool in ("uop_opt", "uop_run"):
        r = subprocess.run([sys.executable, "-m", f"uopir.tools.{tool}", "-"], input="core.sink\n", text=True,
                           capture_output=True, timeout=120, env=_program_env(**{name: value}))
        assert r.returncode == 1, (tool, r.stderr)
        prog = tool.replace("_", "-")
        assert r.stderr.startswith(f"{prog}: error: {message}")
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_a_bad_value_in_a_program_raises_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPIR_SCHEDULE_CACHE_SIZE", "many")
    with pytest.raises(env.EnvError, match=r"\$UOPIR_SCHEDULE_CACHE_SIZE must be a number of entries"):
        env.SCHEDULE_CACHE_SIZE.get()
    assert isinstance(env.EnvError("x"), ValueError)  # callers that caught the old ValueError still do


def test_parsed_values_follow_a_change_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPIR_THREADS", "3")
    assert env.THREADS.get() == 3
    monkeypatch.setenv("UOPIR_THREADS", "5")
    assert env.THREADS.get() == 5
    monkeypatch.delenv("UOPIR_THREADS")
    assert env.THREADS.get() == env.THREADS.default


def test_declaring_a_name_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        env.declare("UOPIR_DEBUG", env.level, 0, "again", "a level")
