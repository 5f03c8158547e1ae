"""The tuning cache: a search's winning opts per (kernel, target, device fingerprint) in a sqlite file (a minimal
stand-in with the interface the cache worktree is building; that version, with bounds, merging and the default
location, replaces this one)."""
from __future__ import annotations

import hashlib
import os
import sqlite3

from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.kernel.optimize import Opt

__all__ = ["TuningCache", "open_tuning_cache", "TUNING_CACHE_ENV"]

TUNING_CACHE_ENV = "UOPIR_TUNING_CACHE"


class TuningCache:
    """Winning opts keyed by sha256 of the kernel's canonical text, the target name and the device fingerprint."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS tuned (key TEXT PRIMARY KEY, opts TEXT, seconds REAL, "
                       "baseline REAL)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    @staticmethod
    def _key(kernel: UOp, target: str, fingerprint: str) -> str:
        return hashlib.sha256("\0".join((print_ir(kernel), target, fingerprint)).encode()).hexdigest()

    def lookup(self, kernel: UOp, target: str, fingerprint: str) -> list[Opt] | None:
        with self._db() as db:
            key = self._key(kernel, target, fingerprint)
            row = db.execute("SELECT opts FROM tuned WHERE key = ?", (key,)).fetchone()
        return None if row is None else [Opt.parse(o) for o in row[0].split(";") if o]

    def record(self, kernel: UOp, target: str, fingerprint: str, opts: list[Opt], seconds: float,
               baseline_seconds: float | None = None) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO tuned VALUES (?, ?, ?, ?)",
                       (self._key(kernel, target, fingerprint), ";".join(map(str, opts)), seconds, baseline_seconds))

    def merge(self, other: str | os.PathLike) -> int:
        with self._db() as db:
            db.execute("ATTACH DATABASE ? AS other", (os.fspath(other),))
            n = db.execute("INSERT OR IGNORE INTO tuned SELECT * FROM other.tuned").rowcount
        return n


def open_tuning_cache(path: str | os.PathLike | None = None) -> TuningCache:
    """The cache at `path`, else $UOPIR_TUNING_CACHE, else one under the user's cache folder."""
    if path is None:
        path = os.environ.get(TUNING_CACHE_ENV) or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "uopir", "tuning.sqlite")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return TuningCache(path)
