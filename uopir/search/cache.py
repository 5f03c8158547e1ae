"""The tuning cache: the opts a search found best for a kernel on a device, kept in one sqlite file.

Key: the sha256 of the kernel's canonical text (the kernel printed by the textual IR printer with its name blanked,
so two kernels that differ only in name share an entry), the target name and the device fingerprint
(uopir.search.fingerprint). An entry of another fingerprint or target is never used: they are part of the key, and
`lookup` checks the row's columns too. A row keeps the kernel text (zlib), so `merge` recomputes every key and skips a
row whose key does not match its content.

Which file: the path given, else $UOPIR_TUNING_CACHE (`off` turns the cache off), else `tuning.sqlite` in the
compile cache's folder (uopir.backends.cache.cache_dir). The file can be copied to another machine and merged
(`python -m uopir.search merge DST SRC...`): for one key the faster entry wins, there and in `record`.

Trust (DESIGN.md section 10): writers of several processes share the file (WAL journal, a busy timeout), each write
is one transaction, the schema has a version (PRAGMA user_version; the file is marked as ours by application_id).
A file that is not a sqlite database, is another program's, or has a newer schema is a TuningCacheError naming the
file when the user named it (argument, $UOPIR_TUNING_CACHE, --tuning-cache); the default file is moved aside as
FILE.damaged with one warning and started again (a file of a newer uopir, or one that cannot be opened, is left
alone: the cache is in memory this run). After the file opened, a failing read or write (the disk is full, the file
was damaged meanwhile) is a warning and a miss, never an error: the search runs again. At most `max_entries` rows:
the oldest recorded go first.
"""
from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from uopir.ir import env
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.kernel.optimize import Opt, OptError

__all__ = ["TUNING_CACHE_ENV", "DEFAULT_NAME", "SCHEMA_VERSION", "APPLICATION_ID", "MAX_ENTRIES", "TuningCacheError",
           "TuningCache", "Entry", "canonical_text", "tuning_key", "default_path", "configured_path",
           "open_tuning_cache", "set_tuning_cache", "get_tuning_cache", "using_tuning_cache"]

TUNING_CACHE_ENV = env.TUNING_CACHE.name
DEFAULT_NAME = "tuning.sqlite"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x756F7054  # "uopT": marks the file as a uopir tuning cache
MAX_ENTRIES = 100_000
BUSY_TIMEOUT_S = 30.0  # how long a writer waits for another process's transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tuning (
    key TEXT PRIMARY KEY,          -- tuning_key(kernel text, target, fingerprint)
    target TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    name TEXT NOT NULL,            -- the kernel's name where it was recorded (for listings only)
    kernel BLOB NOT NULL,          -- zlib of the canonical text
    opts TEXT NOT NULL,            -- one str(opt) a line
    seconds REAL NOT NULL,         -- the winner's time
    baseline_seconds REAL,         -- the heuristic's time, when measured
    recorded REAL NOT NULL         -- unix time
)"""
_COLUMNS = "key, target, fingerprint, name, kernel, opts, seconds, baseline_seconds, recorded"
_UPSERT = (f"INSERT INTO tuning ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
           "name = excluded.name, kernel = excluded.kernel, opts = excluded.opts, seconds = excluded.seconds, "
           "baseline_seconds = excluded.baseline_seconds, recorded = excluded.recorded "
           "WHERE excluded.seconds < tuning.seconds")


class TuningCacheError(ValueError):
    """A tuning cache file that cannot be used (the message names the file and says why); `damaged`: its content is
    not a tuning cache (the default file is then replaced), rather than a file this uopir cannot open or read."""

    damaged: bool = False


def canonical_text(kernel: UOp) -> str:
    """The kernel's text as the key sees it: printed in the generic form with the kernel's name blanked."""
    from uopir.dialects.kernel import DEF

    if kernel.op is DEF:
        kernel = kernel.replace(arg="")
    return print_ir(kernel, generic=True)


def tuning_key(text: str, target: str, fingerprint: str) -> str:
    """The hex sha256 of the canonical text, target and fingerprint (each length-prefixed: no two splits agree)."""
    h = hashlib.sha256(b"uopir-tuning-v1")
    for part in (text, target, fingerprint):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def default_path() -> Path:
    """The default file: tuning.sqlite in the compile cache's folder."""
    from uopir.backends.cache import cache_dir

    return cache_dir() / DEFAULT_NAME


def _warn(message: str) -> None:
    print(f"uopir: warning: {message}", file=sys.stderr, flush=True)


def _check_seconds(value: float | None, what: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive finite number of seconds, got {value!r}")


class Entry:
    """One row, as `entries` lists it."""

    __slots__ = ("key", "target", "fingerprint", "name", "text", "opts", "seconds", "baseline_seconds", "recorded")

    def __init__(self, row: tuple[Any, ...]) -> None:
        (self.key, self.target, self.fingerprint, self.name, kernel, opts, self.seconds, self.baseline_seconds,
         self.recorded) = row
        self.text: str = zlib.decompress(kernel).decode("utf-8")
        self.opts: list[Opt] = [Opt.parse(line) for line in opts.splitlines()]

    def row(self) -> tuple[Any, ...]:
        return (self.key, self.target, self.fingerprint, self.name, zlib.compress(self.text.encode("utf-8")),
                "\n".join(map(str, self.opts)), self.seconds, self.baseline_seconds, self.recorded)


class TuningCache:
    """One tuning cache file (see the module docstring). `strict=False` (the default file) replaces a damaged file
    with a warning instead of raising TuningCacheError, and works in memory when the file cannot be used."""

    def __init__(self, path: str | os.PathLike, strict: bool = True, max_entries: int = MAX_ENTRIES,
                 readonly: bool = False) -> None:
        self.path = Path(path)
        self.strict = strict or readonly
        self.readonly = readonly
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._warned = False
        self._connect()

    # ---- the file ----------------------------------------------------------------------------------------------------
    def _fail(self, why: str, damaged: bool = False) -> TuningCacheError:
        e = TuningCacheError(f"tuning cache {self.path}: {why}")
        e.damaged = damaged
        return e

    def _connect(self) -> None:
        """Open (creating when missing) and check the file; in non-strict mode a damaged file is replaced, and one
        that cannot be used otherwise (a newer uopir's, unreadable) is left alone for an in-memory cache."""
        self._pid = os.getpid()
        try:
            self._conn = self._open()
            return
        except TuningCacheError as e:
            if self.strict:
                raise
            if not e.damaged:
                _warn(f"{e}; not using it this run")
                self._conn = self._memory()
                return
            aside = self.path.with_name(self.path.name + ".damaged")
            _warn(f"{e}; moved to {aside}, starting an empty one")
        try:
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            self._conn = self._open()
        except (OSError, TuningCacheError) as e2:
            _warn(f"tuning cache {self.path} cannot be replaced ({e2}); not using it this run")
            self._conn = self._memory()

    def _memory(self) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._init_schema(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        p = self.path
        if p.is_dir():
            raise self._fail("is a folder, not a file")
        if not p.parent.is_dir():
            if self.strict:
                raise self._fail(f"the folder '{p.parent}' does not exist (create it first)")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise self._fail(f"cannot create its folder: {e.strerror or e}") from None
        conn = None
        try:
            if self.readonly:  # a file to merge from: never written, not even its journal mode
                uri = f"{p.resolve().as_uri()}?mode=ro"
                conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            else:
                conn = sqlite3.connect(str(p), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and app != APPLICATION_ID:
                raise self._fail("is a sqlite database of another program, not a uopir tuning cache", damaged=True)
            if version > SCHEMA_VERSION:
                raise self._fail(f"was written by a newer uopir (schema {version}; this one reads {SCHEMA_VERSION})")
            if tables and "tuning" not in tables:
                raise self._fail("has no tuning table (damaged)", damaged=True)
            if self.readonly:
                if not tables:  # an empty file: no entries
                    conn.close()
                    conn = self._memory()
                return conn
            conn.execute("PRAGMA journal_mode = WAL")  # readers never wait for a writer, writers queue
            if version < SCHEMA_VERSION:
                self._init_schema(conn)
            return conn
        except sqlite3.OperationalError as e:  # cannot open or write it (permissions, locked past the timeout)
            if conn is not None:
                conn.close()
            raise self._fail(f"cannot be opened ({e})") from None
        except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed", ...
            if conn is not None:
                conn.close()
            raise self._fail(f"not a readable sqlite database ({e})", damaged=True) from None
        except TuningCacheError:
            if conn is not None:
                conn.close()
            raise

    @staticmethod
    def _init_schema(conn: sqlite3.Connection) -> None:
        with conn:
            conn.execute(_SCHEMA)
            conn.execute("CREATE INDEX IF NOT EXISTS tuning_recorded ON tuning (recorded)")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _db(self) -> sqlite3.Connection:
        if self._pid != os.getpid():  # a forked child must not use its parent's connection
            self._conn = None
            self._connect()
        assert self._conn is not None
        return self._conn

    def _io_failed(self, what: str, e: Exception) -> None:
        if not self._warned:
            self._warned = True
            _warn(f"tuning cache {self.path}: {what} failed ({e}); continuing without that entry")

    def close(self) -> None:
        """Close the file (a last writer's close folds the WAL journal into it, so the file alone can be copied)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
            self._pid = -1

    def __enter__(self) -> TuningCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the interface the search uses -------------------------------------------------------------------------------
    def lookup(self, kernel: UOp, target: str, fingerprint: str) -> list[Opt] | None:
        """The recorded opts of `kernel` (the kernel.def as kernel-optimize receives it, before any opt) on `target`
        and a device of `fingerprint`, or None (no entry, or one that cannot be read: a warning)."""
        key = tuning_key(canonical_text(kernel), target, fingerprint)
        with self._lock:
            try:
                row = self._db().execute("SELECT target, fingerprint, opts FROM tuning WHERE key = ?",
                                         (key,)).fetchone()
            except sqlite3.Error as e:
                self._io_failed("a look-up", e)
                return None
        if row is None or row[0] != target or row[1] != fingerprint:
            return None
        try:
            return [Opt.parse(line) for line in row[2].splitlines()]
        except OptError as e:
            self._io_failed("reading an entry", e)
            return None

    def record(self, kernel: UOp, target: str, fingerprint: str, opts: list[Opt], seconds: float,
               baseline_seconds: float | None = None) -> None:
        """Keep `opts` (measured at `seconds`; the heuristic at `baseline_seconds`) for `kernel` (before any opt, as
        `lookup` takes it) on `target` and a device of `fingerprint`, unless the entry there is faster."""
        _check_seconds(seconds, "seconds")
        _check_seconds(baseline_seconds, "baseline_seconds", optional=True)
        if not all(isinstance(o, Opt) for o in opts):
            raise TypeError(f"opts must be a list of Opt, got {opts!r}")
        text = canonical_text(kernel)
        name = kernel.arg if isinstance(kernel.arg, str) else ""
        row = (tuning_key(text, target, fingerprint), target, fingerprint, name,
               zlib.compress(text.encode("utf-8")), "\n".join(map(str, opts)), float(seconds),
               None if baseline_seconds is None else float(baseline_seconds), time.time())
        self._write([row])

    def _write(self, rows: list[tuple[Any, ...]]) -> int:
        """Upsert rows (the faster wins) in one transaction, then keep the bound; the rows taken."""
        with self._lock:
            try:
                db = self._db()
                with db:
                    before = db.total_changes
                    db.executemany(_UPSERT, rows)
                    taken = db.total_changes - before
                    n = db.execute("SELECT count(*) FROM tuning").fetchone()[0]
                    if n > self.max_entries:
                        db.execute("DELETE FROM tuning WHERE key IN (SELECT key FROM tuning ORDER BY recorded "
                                   "LIMIT ?)", (n - self.max_entries,))
                return taken
            except sqlite3.Error as e:
                self._io_failed("a write", e)
                return 0

    def entries(self) -> list[Entry]:
        """Every row, oldest first (a row that cannot be read is skipped with a warning)."""
        with self._lock:
            try:
                rows = self._db().execute(f"SELECT {_COLUMNS} FROM tuning ORDER BY recorded").fetchall()
            except sqlite3.Error as e:
                raise self._fail(f"cannot be read ({e})", damaged=True) from None
        out = []
        for row in rows:
            try:
                out.append(Entry(row))
            except (zlib.error, UnicodeDecodeError, OptError, TypeError, ValueError) as e:
                _warn(f"tuning cache {self.path}: entry {str(row[0])[:16]} is damaged ({e}); skipped")
        return out

    def merge(self, other: str | os.PathLike) -> int:
        """Take the entries of the cache file `other` that this one lacks or has slower; the number taken. A row of
        `other` whose key does not match its content is skipped with a warning."""
        if not Path(other).is_file():
            raise TuningCacheError(f"tuning cache {other}: no such file")
        src = TuningCache(other, readonly=True)
        try:
            if src.path.resolve() == self.path.resolve():
                return 0
            rows = []
            for e in src.entries():
                if tuning_key(e.text, e.target, e.fingerprint) != e.key:
                    _warn(f"tuning cache {src.path}: entry {e.key[:16]} does not match its key; skipped")
                    continue
                try:
                    _check_seconds(e.seconds, "seconds")
                    _check_seconds(e.baseline_seconds, "baseline_seconds", optional=True)
                except ValueError as err:
                    _warn(f"tuning cache {src.path}: entry {e.key[:16]}: {err}; skipped")
                    continue
                rows.append(e.row())
        finally:
            src.close()
        return self._write(rows) if rows else 0


# ---- which cache -----------------------------------------------------------------------------------------------------
def configured_path() -> Path | None:
    """The file $UOPIR_TUNING_CACHE names, else the default file; None when it says `off`."""
    where = env.TUNING_CACHE.get()
    if where == "off":
        return None
    return Path(where).expanduser() if where else default_path()


def open_tuning_cache(path: str | os.PathLike | None = None) -> TuningCache:
    """The cache at `path`; None: $UOPIR_TUNING_CACHE, else the default file (non-strict: see the module docstring).
    TuningCacheError when $UOPIR_TUNING_CACHE is `off` (ask get_tuning_cache, which says None)."""
    if path is not None:
        return TuningCache(path)
    where = configured_path()
    if where is None:
        raise TuningCacheError(f"${TUNING_CACHE_ENV}=off: the tuning cache is turned off")
    return TuningCache(where, strict=env.TUNING_CACHE.is_set())


_ACTIVE: TuningCache | None = None
_ACTIVE_SET = False
_FROM_ENV: tuple[str, TuningCache | None] | None = None  # ($UOPIR_TUNING_CACHE, the cache it opened)
_ACTIVE_LOCK = threading.Lock()


def set_tuning_cache(cache: TuningCache | str | os.PathLike | None) -> TuningCache | None:
    """Make `cache` (or the file it names) the one searches use in this process; None turns the cache off. Returns
    the cache now active (uop-opt --tuning-cache=FILE calls this)."""
    global _ACTIVE, _ACTIVE_SET
    new = cache if cache is None or isinstance(cache, TuningCache) else TuningCache(cache)
    with _ACTIVE_LOCK:
        _ACTIVE, _ACTIVE_SET = new, True
    return new


@contextmanager
def using_tuning_cache(cache: TuningCache | None) -> Iterator[TuningCache | None]:
    """`cache` is the one searches use inside the block (None: no cache); the previous one after it, and `cache`
    is closed."""
    global _ACTIVE, _ACTIVE_SET
    with _ACTIVE_LOCK:
        before = (_ACTIVE, _ACTIVE_SET)
        _ACTIVE, _ACTIVE_SET = cache, True
    try:
        yield cache
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE, _ACTIVE_SET = before
        if cache is not None:
            cache.close()


def get_tuning_cache() -> TuningCache | None:
    """The cache searches use: the one set by set_tuning_cache, else the one $UOPIR_TUNING_CACHE names (or the
    default; None when it is `off`), opened on first use and again when the variable changes."""
    global _FROM_ENV
    with _ACTIVE_LOCK:
        if _ACTIVE_SET:
            return _ACTIVE
        setting = env.TUNING_CACHE.get()
        if _FROM_ENV is None or _FROM_ENV[0] != setting:
            if _FROM_ENV is not None and _FROM_ENV[1] is not None:
                _FROM_ENV[1].close()
            _FROM_ENV = (setting, None if setting == "off" else open_tuning_cache())
        return _FROM_ENV[1]
