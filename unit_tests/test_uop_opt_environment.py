"""uop-opt in a hostile environment (issue 8, items 1-3), run as a real process: output files survive failures,
reproducers cannot set flags that touch files, environment faults are `uop-opt: error:` with exit 1 (never an
internal error), and control characters from the input never reach the terminal raw."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

UOP_OPT = [sys.executable, "-m", "uopir.tools.uop_opt"]
ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, stdin: bytes | None = None, shell_redirect: str = "", cwd: Path | None = None,
        ) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, UOPIR_TEST_PASSES="1", PYTHONPATH=str(ROOT))
    if shell_redirect:  # e.g. '>/dev/full' or '<&-': needs a shell
        cmd = " ".join(f"'{a}'" for a in [*UOP_OPT, *args]) + " " + shell_redirect
        return subprocess.run(["sh", "-c", cmd], capture_output=True, env=env, timeout=120, cwd=cwd)
    return subprocess.run([*UOP_OPT, *args], input=stdin, capture_output=True, env=env, timeout=120, cwd=cwd)


BAD = "%0 = core.const 1 : i32\n%1 = core.add %0 %0 : i32\ncore.sink %1\n"


# ---- 1. -o is written only on success, atomically ---------------------------------------------------------------
def test_parse_error_leaves_the_input_given_as_output_untouched(tmp_path):
    f = tmp_path / "x.uop"
    f.write_text(BAD)
    res = run(str(f), "-o", str(f))
    assert res.returncode == 1 and b"error: expected" in res.stderr
    assert f.read_text() == BAD  # it used to be truncated to nothing


@pytest.mark.parametrize("args", [("-p", "test-crash", "--reproducer=none"), ("-p", "test-invalid-ir")])
def test_failing_pass_leaves_the_output_untouched(tmp_path, args):
    out = tmp_path / "out.uop"
    out.write_text("precious\n")
    res = run("-", *args, "-o", str(out), stdin=b"core.sink\n")
    assert res.returncode == 1
    assert out.read_text() == "precious\n"


def test_one_failing_split_case_leaves_the_output_untouched(tmp_path):
    out = tmp_path / "out.uop"
    out.write_text("precious\n")
    res = run("-", "--split-input-file", "-o", str(out), stdin=f"core.sink\n// -----\n{BAD}".encode())
    assert res.returncode == 1
    assert out.read_text() == "precious\n"


def test_success_replaces_the_file_keeping_its_mode_and_no_temporary_file(tmp_path):
    out = tmp_path / "out.uop"
    out.write_text("old\n")
    out.chmod(0o640)
    res = run("-", "-o", str(out), stdin=b"core.sink\n")
    assert res.returncode == 0, res.stderr
    assert out.read_text() == "core.sink\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.uop"]


def test_output_to_a_device_is_written_directly():
    res = run("-", "-o", os.devnull, stdin=b"core.sink\n")
    assert res.returncode == 0 and res.stderr == b""


# ---- 2. reproducers take only the pipeline and verification flags --------------------------------------------------
def test_hostile_reproducer_cannot_write_a_file(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    repro = tmp_path / "r.uop"
    repro.write_text(f"// configuration: '--pass-pipeline=canonicalize' -o {victim}\ncore.sink\n")
    res = run("--run-reproducer", str(repro), cwd=tmp_path)
    assert res.returncode == 1
    assert (b"uop-opt: error: reproducer '" + str(repro).encode() + b"': its configuration may only set "
            b"--pass-pipeline and --no-verify, not '-o'") in res.stderr
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("config, bad", [("--run-reproducer", "--run-reproducer"), ("-p dce --output=x", "--output=x"),
                                         ("--reproducer=/tmp/x -p dce", "--reproducer=/tmp/x"),
                                         ("--load-test-passes", "--load-test-passes")])
def test_reproducer_rejects_every_other_flag(tmp_path, config, bad):
    repro = tmp_path / "r.uop"
    repro.write_text(f"// configuration: {config}\ncore.sink\n")
    res = run("--run-reproducer", str(repro), cwd=tmp_path)  # a relative -o would land in tmp_path
    assert res.returncode == 1 and f"not '{bad}'".encode() in res.stderr


def test_reproducer_pipeline_and_no_verify_are_honoured(tmp_path):
    repro = tmp_path / "r.uop"
    repro.write_text("// configuration: -p 'test-invalid-ir' --no-verify\ncore.sink\n")
    res = run("--run-reproducer", str(repro))
    assert res.returncode == 0, res.stderr  # --no-verify taken: the invalid output is printed
    assert b"core.add" in res.stdout


# ---- 3. environment errors ------------------------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("args, redirect", [(("-",), "<<'EOF' >/dev/full\ncore.sink\nEOF"),
                                            (("--list-passes",), ">/dev/full"),
                                            (("--dump-pass-pipeline", "-p", "dce"), ">/dev/full")])
def test_full_device_on_stdout_is_an_error_not_a_crash(args, redirect):
    res = run(*args, shell_redirect=redirect)
    assert res.returncode == 1, res.stderr
    assert res.stderr == b"uop-opt: error: cannot write to stdout: No space left on device\n"


def test_closed_stdin_is_an_error_not_a_crash():
    res = run("-", shell_redirect="<&-")
    assert res.returncode == 1
    assert res.stderr == b"uop-opt: error: cannot read '<stdin>': standard input is closed\n"


def test_closed_stdout_is_an_error_not_a_crash():
    res = run("-", shell_redirect="<<'EOF' >&-\ncore.sink\nEOF")
    assert res.returncode == 1
    assert res.stderr == b"uop-opt: error: cannot write to stdout: standard output is closed\n"


def test_invalid_utf8_on_stdin_is_an_error_like_in_a_file(tmp_path):
    res = run("-", stdin=b"core.sink \xff\xfe\n")
    assert res.returncode == 1
    assert res.stderr == b"uop-opt: error: cannot read '<stdin>': not UTF-8 text (invalid start byte at byte 10)\n"
    f = tmp_path / "x.uop"
    f.write_bytes(b"core.sink \xff\xfe\n")
    assert run(str(f)).returncode == 1


def test_utf8_text_is_read_and_written_as_utf8_whatever_the_locale():
    text = '%0 = tensor.buffer {id = 0, device = "gpu\u00e9\u4e2d"} : tensor<4xf32>\ncore.sink %0\n'
    env_locale = {"LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    res = subprocess.run([*UOP_OPT, "-"], input=text.encode(), capture_output=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), **env_locale))
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode("utf-8") == text


def test_control_characters_from_the_input_are_escaped_in_messages():
    res = run("-", stdin=b"%0 = core.const 1 : i32 \x1b[31mRED\x07\n")
    assert res.returncode == 1
    assert not any(b < 0x20 and b != 0x0a for b in res.stderr), res.stderr
    assert res.stderr == (b"<stdin>:1:25: error: expected end of line, got '\\x1b'\n"
                          b"%0 = core.const 1 : i32 \\x1b[31mRED\\x07\n"
                          b"                        ^\n")


def test_caret_stays_under_its_column_after_escapes():
    res = run("-", stdin="%0 = core.const 1 : i32\x01 \u202e%1\n".encode())
    lines = res.stderr.decode().splitlines()
    assert lines[1] == "%0 = core.const 1 : i32\\x01 \\u202e%1"
    assert lines[2].index("^") == lines[1].index("\\x01")  # the error is at the control character


def test_control_characters_in_a_file_name_are_escaped(tmp_path):
    res = run(str(tmp_path / "a\x1bb.uop"))
    assert res.returncode == 1 and b"\x1b" not in res.stderr and b"a\\x1bb.uop" in res.stderr
