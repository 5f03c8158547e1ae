"""The tuning cache (issue 27 item 2) on real sqlite files: a lookup finds what was recorded for the same kernel text,
target and device fingerprint and nothing else; the faster entry wins in `record` and `merge`; two processes write
at once without losing an entry; a damaged, foreign or newer file is a clear error naming it (a warning and a fresh
file for the default one); the CLI lists and merges files and uop-opt --tuning-cache opens and checks its file."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import uopir.backends  # noqa: F401 - registers the device targets
from uopir.ir.parser import parse_ir
from uopir.ir.uop import UOp
from uopir.passes.kernel.optimize import Opt
from uopir.search import cache as tc
from uopir.search.cache import TuningCache, TuningCacheError
from uopir.search.fingerprint import cpu_fingerprint, device_fingerprint

ROOT = Path(__file__).resolve().parents[1]
FP = "cpu test | x86_64, 2 cpus | 0123456789abcdef"
OPTS = [Opt("upcast", 0, 4), Opt("unroll", 1, 2), Opt("global", 0)]


def kernel(n: int = 64, name: str | None = None) -> UOp:
    """An elementwise kernel over n floats, named `name` (default E_n)."""
    name = f"E_{n}" if name is None else name
    return parse_ir(textwrap.dedent(f"""\
        %0 = kernel.param {{idx = 0}} : ptr<f32, global>
        %1 = core.const {n} : index
        %2 = kernel.range %1 {{axis = 0}} : index
        %3 = kernel.index %0, %2 : ptr<f32, global>
        %4 = kernel.param {{idx = 1}} : ptr<f32, global>
        %5 = kernel.index %4, %2 : ptr<f32, global>
        %6 = kernel.load %5 : f32
        %7 = core.mul %6, %6 : f32
        %8 = kernel.store %3, %7
        %9 = kernel.end %8, %2
        kernel.def %9 {{name = "{name}"}}
        """))


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=e, timeout=300)


# ---- look-up and record ----------------------------------------------------------------------------------------------
def test_lookup_finds_what_was_recorded_for_the_same_text_target_and_fingerprint(tmp_path: Path) -> None:
    with TuningCache(tmp_path / "t.sqlite") as c:
        assert c.lookup(kernel(), "cpu", FP) is None
        c.record(kernel(), "cpu", FP, OPTS, 1e-5, baseline_seconds=3e-5)
        assert c.lookup(kernel(), "cpu", FP) == OPTS
        assert c.lookup(kernel(name="renamed"), "cpu", FP) == OPTS  # the name is not part of the key
        assert c.lookup(kernel(n=128), "cpu", FP) is None  # another kernel
        assert c.lookup(kernel(), "gpu", FP) is None  # another target
        assert c.lookup(kernel(), "cpu", FP.replace("0123", "9999")) is None  # another device
    with TuningCache(tmp_path / "t.sqlite") as c:  # it is on disk
        assert c.lookup(kernel(), "cpu", FP) == OPTS
        [e] = c.entries()
        assert (e.name, e.seconds, e.baseline_seconds, e.opts) == ("E_64", 1e-5, 3e-5, OPTS)
        assert 'name = ""' in e.text and "E_64" not in e.text


def test_an_empty_opt_list_is_an_entry_not_a_miss(tmp_path: Path) -> None:
    with TuningCache(tmp_path / "t.sqlite") as c:
        c.record(kernel(), "cpu", FP, [], 1e-5)
        assert c.lookup(kernel(), "cpu", FP) == []


def test_record_keeps_the_faster_entry(tmp_path: Path) -> None:
    with TuningCache(tmp_path / "t.sqlite") as c:
        c.record(kernel(), "cpu", FP, OPTS, 2e-5)
        c.record(kernel(), "cpu", FP, [Opt("upcast", 0, 8)], 3e-5)  # slower: ignored
        assert c.lookup(kernel(), "cpu", FP) == OPTS
        c.record(kernel(), "cpu", FP, [Opt("upcast", 0, 16)], 1e-5)  # faster: replaces
        assert c.lookup(kernel(), "cpu", FP) == [Opt("upcast", 0, 16)]


@pytest.mark.parametrize("seconds, baseline", [(float("nan"), None), (0.0, None), (-1.0, None), (float("inf"), None),
                                               (1e-5, float("nan")), (True, None)])
def test_record_rejects_a_time_that_is_no_time(tmp_path: Path, seconds: float, baseline: float | None) -> None:
    with TuningCache(tmp_path / "t.sqlite") as c, pytest.raises(ValueError, match="positive finite number"):
        c.record(kernel(), "cpu", FP, OPTS, seconds, baseline)


def test_record_rejects_opts_that_are_not_opts(tmp_path: Path) -> None:
    with TuningCache(tmp_path / "t.sqlite") as c, pytest.raises(TypeError, match="list of Opt"):
        c.record(kernel(), "cpu", FP, ["upcast 0 by 4"], 1e-5)  # type: ignore[list-item]


def test_an_entry_whose_opts_do_not_parse_is_a_miss_with_a_warning(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.sqlite"
    with TuningCache(path) as c:
        c.record(kernel(), "cpu", FP, OPTS, 1e-5)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE tuning SET opts = 'upcast zero by four'")
    db.close()
    with TuningCache(path) as c:
        assert c.lookup(kernel(), "cpu", FP) is None
    assert f"tuning cache {path}" in capsys.readouterr().err


def test_the_cache_is_bounded_oldest_first(tmp_path: Path) -> None:
    with TuningCache(tmp_path / "t.sqlite", max_entries=3) as c:
        for n in (8, 16, 32, 64, 128):
            c.record(kernel(n), "cpu", FP, OPTS, 1e-5)
        assert len(c.entries()) == 3
        assert c.lookup(kernel(8), "cpu", FP) is None and c.lookup(kernel(16), "cpu", FP) is None
        assert c.lookup(kernel(128), "cpu", FP) == OPTS


# ---- two processes at once -------------------------------------------------------------------------------------------
WRITER = textwrap.dedent("""\
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_search_cache import kernel, FP, OPTS
    from uopir.search.cache import TuningCache
    me, path, start = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    c = TuningCache(path)
    ks = [kernel(1000 * (me + 1) + i) for i in range(40)]
    while time.time() < start:
        time.sleep(0.001)
    for i, k in enumerate(ks):
        c.record(k, "cpu", FP, OPTS, 1e-5)
        c.record(kernel(7), "cpu", FP, OPTS[:1], 1e-5 * (1 + me + i))  # both write this one key all the time
        assert c.lookup(k, "cpu", FP) == OPTS
    c.close()
    """)


def test_two_processes_record_at_once_without_losing_an_entry(tmp_path: Path) -> None:
    import time

    path = tmp_path / "shared.sqlite"
    TuningCache(path).close()
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(tests=str(ROOT / "unit_tests")))
    start = str(time.time() + 3.0)  # both start writing together, after their imports
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, str(script), str(me), str(path), start], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "warning" not in err, err  # no write was dropped
    with TuningCache(path) as c:
        assert len(c.entries()) == 81
        for me in (0, 1):
            for i in range(40):
                assert c.lookup(kernel(1000 * (me + 1) + i), "cpu", FP) == OPTS
        assert [e.seconds for e in c.entries() if e.name == "E_7"] == [1e-5]  # the fastest of both writers won


# ---- damaged, foreign, newer files -----------------------------------------------------------------------------------
def test_a_file_that_is_not_sqlite_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "weights.bin"
    bad.write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(TuningCacheError, match=f"tuning cache {bad}: not a readable sqlite database"):
        TuningCache(bad)
    assert bad.read_bytes() == b"\x00garbage" * 1000  # an explicitly named file is never replaced


def test_another_programs_database_is_an_error(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    with pytest.raises(TuningCacheError, match="another program"):
        TuningCache(other)


def _newer(path: Path) -> None:
    with TuningCache(path):
        pass
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {tc.SCHEMA_VERSION + 1}")
    db.close()


def test_a_newer_schema_is_an_error_for_a_named_file(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _newer(path)
    with pytest.raises(TuningCacheError, match="newer uopir"):
        TuningCache(path)


def test_a_missing_folder_or_a_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TuningCacheError, match="does not exist"):
        TuningCache(tmp_path / "nowhere" / "t.sqlite")
    with pytest.raises(TuningCacheError, match="is a folder"):
        TuningCache(tmp_path)


@pytest.fixture
def default_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(tc.TUNING_CACHE_ENV, raising=False)
    return tmp_path / "cache" / tc.DEFAULT_NAME


def test_the_default_file_is_made_in_the_cache_folder(default_cache: Path) -> None:
    with tc.open_tuning_cache() as c:
        assert c.path == default_cache
        c.record(kernel(), "cpu", FP, OPTS, 1e-5)
    assert default_cache.is_file()


def test_a_damaged_default_file_is_moved_aside_with_a_warning(default_cache: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    default_cache.parent.mkdir()
    default_cache.write_bytes(b"not sqlite at all, " * 100)
    with tc.open_tuning_cache() as c:
        c.record(kernel(), "cpu", FP, OPTS, 1e-5)
        assert c.lookup(kernel(), "cpu", FP) == OPTS
    err = capsys.readouterr().err
    assert f"tuning cache {default_cache}: not a readable sqlite database" in err and "moved to" in err
    aside = default_cache.with_name(default_cache.name + ".damaged")
    assert aside.read_bytes() == b"not sqlite at all, " * 100


def test_a_newer_default_file_is_left_alone(default_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    default_cache.parent.mkdir()
    _newer(default_cache)
    before = default_cache.read_bytes()
    with tc.open_tuning_cache() as c:
        c.record(kernel(), "cpu", FP, OPTS, 1e-5)  # kept in memory for this run only
        assert c.lookup(kernel(), "cpu", FP) == OPTS
    assert "newer uopir" in capsys.readouterr().err
    assert default_cache.read_bytes() == before


# ---- which cache -----------------------------------------------------------------------------------------------------
def test_the_environment_names_the_cache_and_off_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tc, "_ACTIVE", None)
    monkeypatch.setattr(tc, "_ACTIVE_SET", False)
    monkeypatch.setenv(tc.TUNING_CACHE_ENV, "off")
    assert tc.get_tuning_cache() is None
    monkeypatch.setattr(tc, "_ACTIVE_SET", False)
    monkeypatch.setenv(tc.TUNING_CACHE_ENV, str(tmp_path / "env.sqlite"))
    active = tc.get_tuning_cache()
    assert active is not None and active.path == tmp_path / "env.sqlite"
    with tc.using_tuning_cache(TuningCache(tmp_path / "scoped.sqlite")) as scoped:
        assert tc.get_tuning_cache() is scoped
    assert tc.get_tuning_cache() is active
    monkeypatch.setenv(tc.TUNING_CACHE_ENV, str(tmp_path / "nowhere" / "t.sqlite"))
    with pytest.raises(TuningCacheError, match="does not exist"):
        tc.open_tuning_cache()
    active.close()


# ---- merge and the CLI -----------------------------------------------------------------------------------------------
def test_merge_takes_missing_and_faster_entries_from_a_copied_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with TuningCache(a) as ca:
        ca.record(kernel(8), "cpu", FP, OPTS, 1e-5)
        ca.record(kernel(16), "cpu", FP, OPTS, 1e-5)
    with TuningCache(b) as cb:
        cb.record(kernel(8), "cpu", FP, [Opt("upcast", 0, 8)], 2e-5)  # slower than a's
        cb.record(kernel(16), "cpu", FP, [Opt("upcast", 0, 8)], 5e-6)  # faster than a's
        cb.record(kernel(32), "cpu", "cpu other | arm64, 8 cpus | ffff", [], 1e-5)  # another machine's
    copy = tmp_path / "from-another-machine.sqlite"
    shutil.copy(b, copy)  # closed: the file alone holds everything
    before = copy.read_bytes()
    with TuningCache(a) as ca:
        assert ca.merge(copy) == 2
        assert copy.read_bytes() == before  # a merge only reads its source
        assert ca.lookup(kernel(8), "cpu", FP) == OPTS
        assert ca.lookup(kernel(16), "cpu", FP) == [Opt("upcast", 0, 8)]
        assert ca.lookup(kernel(32), "cpu", FP) is None
        assert ca.lookup(kernel(32), "cpu", "cpu other | arm64, 8 cpus | ffff") == []
        assert ca.merge(copy) == 0  # nothing new
        assert ca.merge(a) == 0  # itself


def test_merge_skips_a_row_whose_key_does_not_match_its_content(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with TuningCache(b) as cb:
        cb.record(kernel(8), "cpu", FP, OPTS, 1e-5)
    db = sqlite3.connect(b)
    with db:
        db.execute("UPDATE tuning SET fingerprint = 'cpu forged | x | 0'")  # claims another device
    db.close()
    with TuningCache(a) as ca:
        assert ca.merge(b) == 0
        assert ca.entries() == []
    assert "does not match its key" in capsys.readouterr().err


def test_cli_lists_and_merges(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with TuningCache(b) as cb:
        cb.record(kernel(8, name="E_8"), "cpu", FP, OPTS, 1e-5, baseline_seconds=2e-5)
    res = run("-m", "uopir.search", "merge", str(a), str(b))
    assert res.returncode == 0, res.stderr
    assert f"{b}: 1 entry taken" in res.stdout
    res = run("-m", "uopir.search", "list", str(a), "--kernels")
    assert res.returncode == 0, res.stderr
    assert "E_8  cpu  [upcast 0 by 4, unroll 1 by 2, global 0]  10.0 us (2.00x the heuristic)" in res.stdout
    assert "kernel.def" in res.stdout and f"1 entry in {a}" in res.stdout
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")  # an empty file is an empty sqlite database: nothing to take, and it stays empty
    res = run("-m", "uopir.search", "merge", str(a), str(empty))
    assert (res.returncode, res.stdout, empty.read_bytes()) == (0, f"{empty}: 0 entries taken\n", b""), res.stderr
    res = run("-m", "uopir.search", "list", env={"UOPIR_TUNING_CACHE": str(tmp_path / "not-yet.sqlite")})
    assert res.stdout == f"0 entries in {tmp_path / 'not-yet.sqlite'} (no file yet)\n"
    res = run("-m", "uopir.search", "path", env={"UOPIR_TUNING_CACHE": str(tmp_path / "not-yet.sqlite")})
    assert res.stdout.strip() == str(tmp_path / "not-yet.sqlite") and not (tmp_path / "not-yet.sqlite").exists()
    res = run("-m", "uopir.search", "path", env={"UOPIR_TUNING_CACHE": "", "UOPIR_CACHE_DIR": str(tmp_path / "c")})
    assert res.stdout.strip() == str(tmp_path / "c" / "tuning.sqlite")


def test_cli_list_escapes_what_could_drive_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    with TuningCache(path) as c:
        c.record(kernel(8, name="E_8\x1b[2J\u202e"), "cpu", "cpu evil\x07 | x | 0", OPTS, 1e-5)
    res = run("-m", "uopir.search", "list", str(path))
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout and "\u202e" not in res.stdout and "\x07" not in res.stdout
    assert "E_8\\x1b[2J\\u202e" in res.stdout and "cpu evil\\x07" in res.stdout


@pytest.mark.parametrize("args, message", [
    (["list", "{bad}"], "tuning cache {bad}: not a readable sqlite database"),
    (["merge", "{good}", "{bad}"], "tuning cache {bad}: not a readable sqlite database"),
    (["list", "{missing}"], "tuning cache {missing}: no such file"),
    (["merge", "{good}", "{missing}"], "tuning cache {missing}: no such file"),
    (["frobnicate"], "invalid choice"),
])
def test_cli_errors_name_the_file_without_a_traceback(tmp_path: Path, args: list[str], message: str) -> None:
    names = {"bad": str(tmp_path / "bad.sqlite"), "good": str(tmp_path / "good.sqlite"),
             "missing": str(tmp_path / "missing.sqlite")}
    Path(names["bad"]).write_text("hello")
    res = run("-m", "uopir.search", *[a.format(**names) for a in args])
    assert res.returncode == 1
    assert res.stderr.startswith("python -m uopir.search: error: ") and message.format(**names) in res.stderr
    assert "Traceback" not in res.stderr


def test_uop_opt_tuning_cache_opens_and_checks_its_file(tmp_path: Path) -> None:
    src = ROOT / "lit_tests" / "passes" / "kernel-optimize" / "elementwise.uop"
    good = tmp_path / "t.sqlite"
    res = run("-m", "uopir.tools.uop_opt", str(src), "-p", "kernel-optimize", f"--tuning-cache={good}")
    assert res.returncode == 0, res.stderr
    assert "kind = upcast" in res.stdout
    db = sqlite3.connect(good)  # it made a tuning cache there
    assert db.execute("PRAGMA application_id").fetchone()[0] == tc.APPLICATION_ID
    db.close()
    bad = tmp_path / "bad.sqlite"
    bad.write_text("hello")
    for path, message in ((bad, "not a readable sqlite database"), (tmp_path / "no" / "t.sqlite", "does not exist")):
        res = run("-m", "uopir.tools.uop_opt", str(src), "-p", "kernel-optimize", f"--tuning-cache={path}")
        assert res.returncode == 1 and res.stdout == ""
        assert res.stderr.startswith(f"uop-opt: error: --tuning-cache: tuning cache {path}: "), res.stderr
        assert message in res.stderr and "Traceback" not in res.stderr


# ---- device fingerprints ---------------------------------------------------------------------------------------------
INTEL = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6130\nflags\t\t: fpu sse2 avx avx2 fma avx512f {extra}\n"


def test_the_cpu_fingerprint_sees_the_model_and_isa_flags_only() -> None:
    base = cpu_fingerprint(INTEL.format(extra="hypervisor"))
    assert base.startswith("cpu Intel(R) Xeon(R) Gold 6130 | ")
    assert cpu_fingerprint(INTEL.format(extra="md_clear")) == base  # a flag that does not change code
    assert cpu_fingerprint(INTEL.format(extra="avx512bw")) != base  # one that does
    assert cpu_fingerprint(INTEL.format(extra="").replace("Gold 6130", "Gold 6140")) != base
    arm = "processor\t: 0\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
    assert cpu_fingerprint(arm).startswith("cpu 0x41 0xd0c | ")


def test_device_fingerprints() -> None:
    host = device_fingerprint("c")
    assert host == device_fingerprint("llvm") == device_fingerprint("python") == cpu_fingerprint()
    with pytest.raises(ValueError, match="unknown device"):
        device_fingerprint("tpu")
    from uopir.backends.registry import get_backend

    for gpu in ("opencl", "cuda"):  # the device the backend opens, or the backend's reason why there is none
        if get_backend(gpu).available:
            fp = device_fingerprint(gpu)
            assert fp.startswith(f"{gpu} ") and fp != host and fp == device_fingerprint(gpu)
        else:
            with pytest.raises(RuntimeError):
                device_fingerprint(gpu)


def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    c = TuningCache(path)
    c.record(kernel(8), "cpu", FP, OPTS, 1e-5)
    parents = c._conn
    pid = os.fork()
    if pid == 0:  # the child: its parent's connection must not be used (sqlite forbids it across fork)
        ok = c.lookup(kernel(8), "cpu", FP) == OPTS and c._conn is not parents
        c.record(kernel(16), "cpu", FP, OPTS, 1e-5)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert c.lookup(kernel(16), "cpu", FP) == OPTS  # the child's entry, in the parent
    c.close()


def test_a_default_file_that_cannot_be_opened_is_left_alone(default_cache: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    default_cache.parent.mkdir()
    default_cache.mkdir()  # a folder where the file goes
    with tc.open_tuning_cache() as c:
        c.record(kernel(), "cpu", FP, OPTS, 1e-5)
        assert c.lookup(kernel(), "cpu", FP) == OPTS
    assert "is a folder" in capsys.readouterr().err and default_cache.is_dir()
