"""The compile cache cannot hurt (issue 24): a damaged entry costs one recompile and a one-line warning, never a crash
or a wrong answer, and the cache folder stays within its size bound, least recently used out first.

Each device's kernels run in fresh subprocesses (unit_tests/fuzz_cache.py: `run_kernels`), so that a SIGBUS in
dlopen or a SIGSEGV in LLVM's linker, what a truncated entry gave before entries were checked, is a failed exit code
here rather than the end of pytest.
"""
from __future__ import annotations

import os
import random

import pytest
from fuzz_cache import FAULTS, devices, entry_ok, run_kernels

from uopir.backends import cache as cache_mod
from uopir.backends.cache import HEADER_SIZE, USAGE_FILE, cache_get, cache_key, cache_path, cache_put

# every fault of the fuzz target that does not depend on chance or on who runs the test (root reads a file without
# read permission), with the way the entry is reported
ONCE = {**dict.fromkeys(["truncate-half", "empty", "random-bytes", "flip-middle", "other-entry", "raw-binary",
                         "folder"], "is damaged"), "forged": "could not be loaded"}


@pytest.mark.skipif(not devices(), reason="neither a C compiler nor llvmlite is installed")
def test_a_damaged_entry_costs_one_recompile_on_every_device(tmp_path):
    """Each fault on its own kernel's entry, on c (tiered and not) and llvm, and the size estimate deleted: the next
    run exits 0 with every result right, one warning line per damaged entry naming it, every entry whole again; a
    third run is silent. Before entries were checked, the truncated ones killed the process (SIGBUS on c, SIGSEGV
    on llvm) and the random ones raised `invalid ELF header` on every run."""
    kernels = [(dev, 100 * i + j) for i, dev in enumerate(devices()) for j in range(len(ONCE) + 1)]
    first = run_kernels(tmp_path, kernels)
    assert not first.problems(kernels)
    assert not first.warnings
    entries = {kn: first.results[kn][1] for kn in kernels}
    assert all(entry_ok(p) for p in entries.values())
    rng = random.Random(24)
    damaged = {}
    for i, dev in enumerate(devices()):
        spare = entries[(dev, 100 * i + len(ONCE))]  # another kernel's entry, never damaged itself
        for j, fault in enumerate(ONCE):
            path = entries[(dev, 100 * i + j)]
            assert FAULTS[fault](path, spare, rng) == [path]
            assert not entry_ok(path) or fault == "forged"
            damaged[path] = ONCE[fault]
    (tmp_path / USAGE_FILE).unlink()

    second = run_kernels(tmp_path, kernels)
    assert not second.problems(kernels)
    got = {}
    for line in second.warnings:
        path, why = line.removeprefix("uopir: warning: compile cache entry ").split(" ", 1)
        got[path] = got.get(path, []) + [why]
    assert sorted(got) == sorted(str(p) for p in damaged)  # one warning per damaged entry, each naming it
    for path, how in damaged.items():
        assert len(got[str(path)]) == 1 and got[str(path)][0].startswith(how), got[str(path)]
        assert entry_ok(path)  # recompiled and written again
    assert int((tmp_path / USAGE_FILE).read_text()) > 0  # the estimate is back

    third = run_kernels(tmp_path, kernels)
    assert not third.problems(kernels)
    assert not third.warnings


# ---- the size bound --------------------------------------------------------------------------------------------------
@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv(cache_mod.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(cache_mod.DISABLE_ENV, raising=False)
    return tmp_path


def _put(i: int, size: int, age: float | None = None) -> str:
    key = cache_key("test", (), str(i))
    path = cache_put("ns", key, bytes([i % 256]) * size)
    assert path is not None
    if age is not None:
        os.utime(path, (age, age))
    return key


def test_the_size_bound_evicts_the_least_recently_used(cache, monkeypatch):
    """Room for four and a half entries: a fifth put trims to LOW_WATER of it, oldest first; the entry read just
    before (a hit touches it) and the one just written stay."""
    size = 10_000
    entry = HEADER_SIZE + size
    monkeypatch.setenv(cache_mod.MAX_MB_ENV, repr(4.5 * entry / 2**20))
    keys = [_put(i, size, age=1_000_000 + i) for i in range(4)]  # key 0 the oldest
    assert all(cache_path("ns", k).exists() for k in keys)
    assert cache_get("ns", keys[0]) == bytes([0]) * size  # used now
    new = _put(4, size)
    left = [k for k in [*keys, new] if cache_path("ns", k).exists()]
    assert left == [keys[0], keys[3], new]  # 3 entries <= 0.8 * 4.5: keys 1 and 2, the least recently used, went
    assert int((cache / USAGE_FILE).read_text()) == 3 * entry


def test_the_size_is_counted_without_walking_the_folder_at_every_put(cache, monkeypatch):
    """A put adds its size to USAGE_FILE; the folder is walked (which also counts files the estimate missed) only
    once a process has put an eighth of the bound since its last walk."""
    monkeypatch.setenv(cache_mod.MAX_MB_ENV, "1")
    bound = 1 << 20
    size = 1000
    entry = HEADER_SIZE + size
    k0 = _put(0, size)
    assert int((cache / USAGE_FILE).read_text()) == entry  # no estimate yet: the first put walks
    stray = cache_path("ns", k0).with_name("f" * 64)  # an entry of the first format, which no put counted
    stray.write_bytes(b"\0" * 50_000)
    k = 1
    while k * entry <= bound // 8:  # the k-th put since the walk: not past an eighth of the bound, only added
        _put(k, size)
        assert int((cache / USAGE_FILE).read_text()) == (k + 1) * entry
        k += 1
    _put(k, size)  # this one passes an eighth: a walk finds the stray file
    assert int((cache / USAGE_FILE).read_text()) == (k + 1) * entry + 50_000


def test_a_trim_deletes_stale_temporary_files_only(cache, monkeypatch):
    """A writer's temporary file is left alone while young; one an hour old is a crashed writer's and goes."""
    monkeypatch.setenv(cache_mod.MAX_MB_ENV, "1")
    folder = cache_path("ns", _put(0, 10)).parent
    young, old = folder / ".tmp-young", folder / ".tmp-old"
    young.write_bytes(b"y")
    old.write_bytes(b"o")
    os.utime(old, (1_000_000, 1_000_000))
    cache_mod.trim(cache, 1 << 20)
    assert young.exists() and not old.exists()


@pytest.mark.parametrize(("value", "want"), [("", 1024 << 20), ("0", None), ("0.5", 1 << 19), ("2", 2 << 20)])
def test_the_bound_in_megabytes(monkeypatch, value, want):
    monkeypatch.setenv(cache_mod.MAX_MB_ENV, value)
    assert cache_mod.max_bytes() == want


@pytest.mark.parametrize("value", ["lots", "-1", "nan", "inf"])
def test_a_bad_bound_is_a_clear_error(cache, monkeypatch, value):
    monkeypatch.setenv(cache_mod.MAX_MB_ENV, value)
    with pytest.raises(ValueError, match=rf"\$UOPIR_CACHE_MAX_MB must be a number of megabytes .*{value!r}"):
        cache_get("ns", "0" * 64)
