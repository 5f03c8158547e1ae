"""tools/lit_server.py + tools/lit_client.py, which run every lit RUN line's uop-opt, uop-run and filecheck: a command
through them must be the command a fresh process runs (same output, streams, exit code, environment and working
directory), or the lit suite would test the server instead of the tools."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIENT = [sys.executable, "-S", "-I", str(ROOT / "tools" / "lit_client.py")]
IR = "%0 = core.const 2 : i32\n%1 = core.add %0, %0 : i32\ncore.sink %1\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    sock = str(tmp_path_factory.mktemp("srv") / "s.sock")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "lit_server.py"), sock], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield sock
    proc.terminate()
    proc.wait()


def client(sock: str, tool: str, *args: str, stdin: str = "", env: dict[str, str] | None = None,
           cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([*CLIENT, sock, tool, sys.executable, *args], input=stdin, capture_output=True, text=True,
                          env=full, cwd=cwd)


def fresh(module: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_command_through_the_server_is_the_fresh_process(server: str) -> None:
    got = client(server, "uop_opt", "-", "-p", "canonicalize", stdin=IR)
    want = fresh("uopir.tools.uop_opt", "-", "-p", "canonicalize", stdin=IR)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
    assert got.returncode == 0 and "core.const 4" in got.stdout


def test_the_exit_code_and_stderr_come_back(server: str) -> None:
    got = client(server, "uop_opt", "-", "-p", "canonicalise", stdin=IR)
    assert got.returncode == 1 and got.stdout == ""
    assert "canonicalise" in got.stderr and "canonicalize" in got.stderr  # the did-you-mean, on stderr


def test_the_environment_and_working_directory_are_the_clients(server: str, tmp_path: Path) -> None:
    (tmp_path / "in.uop").write_text(IR)
    plain = client(server, "uop_opt", "--list-passes", env={"UOPIR_TEST_PASSES": ""})
    tests = client(server, "uop_opt", "--list-passes", env={"UOPIR_TEST_PASSES": "1"})
    assert "test-options" not in plain.stdout and "test-options" in tests.stdout
    assert client(server, "uop_opt", "in.uop", cwd=tmp_path).stdout == fresh("uopir.tools.uop_opt",
                                                                           str(tmp_path / "in.uop")).stdout


def test_filecheck_runs_and_fails_as_itself(server: str, tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("CHECK: core.add\n")
    assert client(server, "file_check", str(tmp_path / "c.txt"), stdin="x = core.add y\n").returncode == 0
    bad = client(server, "file_check", str(tmp_path / "c.txt"), stdin="x = core.mul y\n")
    assert bad.returncode == 1 and "core.add" in bad.stderr


def test_without_a_server_the_tool_runs_as_its_own_process(tmp_path: Path) -> None:
    got = client(str(tmp_path / "none.sock"), "uop_opt", "-", "-p", "canonicalize", stdin=IR)
    assert got.returncode == 0 and "core.const 4" in got.stdout


@pytest.mark.parametrize("with_server", [True, False], ids=["server", "no-server"])
def test_file_check_both_fails_when_either_filecheck_does(server: str, tmp_path: Path, with_server: bool) -> None:
    """`file_check_both OTHER` (lit's FILECHECK_ALSO): the input reaches both tools whole; a disagreement is named."""
    sock = server if with_server else str(tmp_path / "none.sock")
    (tmp_path / "c.txt").write_text("CHECK: core.add\nCHECK: tail\n")
    text = "x = core.add y\n" + "pad\n" * 20_000 + "tail\n"  # past a pipe's buffer: the input is read whole first
    ok = client(sock, "file_check_both", "/bin/true", str(tmp_path / "c.txt"), stdin=text)
    assert ok.returncode == 0, ok.stderr
    other_fails = client(sock, "file_check_both", "/bin/false", str(tmp_path / "c.txt"), stdin=text)
    assert other_fails.returncode == 1 and "/bin/false exited 1 but the Python filecheck exited 0" in other_fails.stderr
    python_fails = client(sock, "file_check_both", "/bin/true", str(tmp_path / "c.txt"), stdin="x = core.mul y\n")
    assert python_fails.returncode == 1 and "core.add" in python_fails.stderr
    assert "/bin/true exited 0 but the Python filecheck exited 1" in python_fails.stderr
