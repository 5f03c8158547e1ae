"""The on-disk compile cache: binaries keyed by (compiler, flags, source), in the user's cache folder.

Where: $UOPIR_CACHE_DIR if set, else $XDG_CACHE_HOME/uopir, else ~/.cache/uopir. `UOPIR_DISABLE_CACHE=1` turns the
cache off (every compile runs). An entry is `NAMESPACE/KK/KEY.v1`, one file: a header (MAGIC, the sha256 of the key,
the payload's length, the sha256 of the payload) and the payload. Why one file: it is written to a temporary file in
the same folder and renamed (os.replace), so a crash or two processes compiling the same program never leave a torn
entry in place, and header and payload can only disagree in a damaged file (what a power loss may leave: there is
no fsync, too slow for a cache), which fails its check.

Why a check: a runtime that dlopens or links a damaged binary dies (a truncated shared object is SIGBUS in dlopen, a
truncated object file SIGSEGV in LLVM's linker), on every run until the folder is deleted by hand. So `cache_get`
returns bytes only when the length, the digest and the key (an entry copied onto another key's path fails) all
match, and the runtimes load those bytes, never the file: the C runtime dlopens a private temporary copy of them
(uopir.backends.c.runtime.load_library), LLVM links them from memory, so nothing can swap the file between the check
and the load. A failing entry (or a checked one a runtime cannot load: `cache_evict`) is deleted with one line on
stderr naming it, and the caller compiles again, once. An unreadable or unwritable folder only costs a recompile,
never an error.

Size: at most $UOPIR_CACHE_MAX_MB megabytes (2^20 bytes; fractions allowed; default 1024; 0: no bound), least
recently used first out. A hit sets the entry's mtime; a put that takes the folder over the bound deletes the
oldest entries until it holds LOW_WATER of the bound (the entry just written always stays). Cheap: the folder's size
is kept in USAGE_FILE (updated by each put; a lost update between two processes only delays a walk), and the folder
is walked only when that says the bound is passed, when the file is missing, or after a process has put an eighth of
the bound since its last walk (which corrects any drift).

`python cache.py seal OUT DST KEY BOUND` (stdlib only, run by path: no uopir import at module level, so the settings
are read through uopir.ir.env inside the functions that need them, and the sealer gets the size bound as BOUND) is the
last step of the C compiler's detached compile (uopir.backends.c.compiler): it seals the compiler's output OUT as the
entry DST of KEY.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["CACHE_DIR_ENV", "DISABLE_ENV", "MAX_MB_ENV", "DEFAULT_MAX_MB", "ENTRY_SUFFIX", "HEADER_SIZE",
           "USAGE_FILE", "LOW_WATER", "DamagedEntry", "cache_dir", "cache_enabled", "cache_key", "cache_get",
           "cache_put", "cache_path", "cache_evict", "max_bytes", "seal", "unseal", "read_entry", "write_entry",
           "trim", "seal_command", "main"]

CACHE_DIR_ENV = "UOPIR_CACHE_DIR"  # declared in uopir.ir.env, read there
DISABLE_ENV = "UOPIR_DISABLE_CACHE"
MAX_MB_ENV = "UOPIR_CACHE_MAX_MB"
DEFAULT_MAX_MB = 1024.0
# the entry format's version: files of another format (raw binaries, before entries had a header) are never read,
# only counted and, oldest first, deleted by the size bound
ENTRY_SUFFIX = ".v1"
MAGIC = b"uopirC1\n"
_HEADER = struct.Struct("<8s32sQ32s")  # MAGIC, sha256(key), payload length, sha256(payload)
HEADER_SIZE = _HEADER.size
USAGE_FILE = ".usage"  # the folder's size in bytes, as text (a cheap estimate; a walk rewrites it exactly)
LOW_WATER = 0.8  # a trim deletes down to this fraction of the bound, so the next walks are far apart
TMP_PREFIX = ".tmp-"
STALE_TMP_SECONDS = 3600.0  # a temporary file this old is a crashed writer's: a trim deletes it


class DamagedEntry(Exception):
    """An entry's bytes fail their check (the message says which)."""


def cache_dir() -> Path:
    """The cache folder (it may not exist yet)."""
    from uopir.ir import env

    folder = env.CACHE_DIR.raw()
    if folder:
        return Path(folder).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "uopir"


def cache_enabled() -> bool:
    from uopir.ir import env

    return not env.DISABLE_CACHE.get()


def max_bytes() -> int | None:
    """The size bound of the cache folder in bytes ($UOPIR_CACHE_MAX_MB), or None for no bound."""
    from uopir.ir import env

    mb = env.CACHE_MAX_MB.get()
    mb = DEFAULT_MAX_MB if mb is None else mb
    return None if mb == 0 else max(1, int(mb * (1 << 20)))


def cache_key(compiler: str, flags: tuple[str, ...], source: str) -> str:
    """A stable hex digest of everything that decides the binary."""
    h = hashlib.sha256()
    for part in (compiler, "\0".join(flags), source):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def cache_path(namespace: str, key: str) -> Path:
    """Where the entry of `key` lives (a writer puts a temporary file in its folder, then renames it there)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in namespace) or "default"
    return cache_dir() / safe / key[:2] / (key + ENTRY_SUFFIX)


# ---- the entry format ------------------------------------------------------------------------------------------------
def seal(key: str, payload: bytes) -> bytes:
    """The entry's file content: the header, then `payload`."""
    kd = hashlib.sha256(key.encode()).digest()
    return _HEADER.pack(MAGIC, kd, len(payload), hashlib.sha256(payload).digest()) + payload


def unseal(key: str, data: bytes) -> bytes:
    """The payload of an entry's file content `data`, checked against its header and `key` (DamagedEntry if not)."""
    if len(data) < HEADER_SIZE:
        raise DamagedEntry(f"{len(data)} bytes, shorter than its header")
    magic, kd, size, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DamagedEntry("not a uopir cache entry (bad magic)")
    if kd != hashlib.sha256(key.encode()).digest():
        raise DamagedEntry("its header names another key")
    if size != len(data) - HEADER_SIZE:
        raise DamagedEntry(f"{len(data) - HEADER_SIZE} payload bytes, its header says {size}")
    payload = data[HEADER_SIZE:]
    if hashlib.sha256(payload).digest() != digest:
        raise DamagedEntry("its bytes do not match its digest")
    return payload


def _key_of(path: Path) -> str:
    return path.name.removesuffix(ENTRY_SUFFIX)


def _warn(message: str) -> None:
    print(f"uopir: warning: {message}", file=sys.stderr, flush=True)


def _delete(path: Path, ino: int | None = None) -> bool:
    """Delete the entry at `path` (a folder in its place too), unless it is no longer the file `ino` (a writer
    has renamed a fresh entry there meanwhile); whether it is gone."""
    try:
        st = os.lstat(path)
        if ino is not None and st.st_ino != ino:
            return True
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _evicted(path: Path, what: str, ino: int | None = None) -> None:
    """Delete the entry at `path` and say so in one line (`what` is what is wrong with it)."""
    done = "deleted" if _delete(path, ino) else "it cannot be deleted"
    _warn(f"compile cache entry {path} {what}: {done}, compiling it again")


def read_entry(path: Path) -> bytes | None:
    """The checked payload of the entry at `path` (its key is its file name), or None when there is none. A damaged
    or unreadable entry is deleted with a warning (None: the caller compiles again); a good one is touched (its mtime
    is the LRU clock of the size bound)."""
    ino = None
    try:
        with open(path, "rb") as f:
            ino = os.fstat(f.fileno()).st_ino
            data = f.read()
        payload = unseal(_key_of(path), data)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, DamagedEntry) as e:
        _evicted(path, f"is damaged ({e.strerror if isinstance(e, OSError) and e.strerror else e})", ino)
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return payload


def write_entry(path: Path, key: str, payload: bytes) -> bool:
    """Write the entry of `key` at `path` atomically (a temporary file in its folder, then renamed); False when the
    folder cannot be written."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(seal(key, payload))
        try:
            os.replace(tmp, path)
        except IsADirectoryError:  # a folder where the entry goes: it is no entry, replace it
            shutil.rmtree(path, ignore_errors=True)
            os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


# ---- the interface the compilers use ---------------------------------------------------------------------------------
def cache_get(namespace: str, key: str) -> bytes | None:
    """The cached bytes, checked (see the module's docstring), or None (missing, damaged and deleted, unreadable,
    or the cache is off)."""
    if not cache_enabled():
        return None
    max_bytes()  # a bad $UOPIR_CACHE_MAX_MB is an error at the first look-up, not only at the first put
    return read_entry(cache_path(namespace, key))


def cache_put(namespace: str, key: str, data: bytes) -> Path | None:
    """Store `data` atomically; the path written, or None when the cache is off or the folder is not writable.
    Keeps the folder within its size bound."""
    if not cache_enabled():
        return None
    bound = max_bytes()
    path = cache_path(namespace, key)
    if not write_entry(path, key, data):
        return None
    if bound is not None:
        _account(cache_dir(), HEADER_SIZE + len(data), bound, path)
    return path


def cache_evict(namespace: str, key: str, why: str) -> None:
    """Delete the entry of `key`, which a runtime could not load (`why`), with a warning naming it."""
    _evicted(cache_path(namespace, key), f"could not be loaded ({why})")


# ---- the size bound --------------------------------------------------------------------------------------------------
_ACCOUNT_LOCK = threading.Lock()
_SINCE_WALK: dict[str, int] = {}  # cache folder -> bytes this process put there since it last walked it


def _read_usage(root: Path) -> int | None:
    try:
        value = int((root / USAGE_FILE).read_text(encoding="ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return value if value >= 0 else None


def _write_usage(root: Path, value: int) -> None:
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=root)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(f"{value}\n")
        try:
            os.replace(tmp, root / USAGE_FILE)
        except IsADirectoryError:  # a folder in its place: it is no estimate, replace it
            shutil.rmtree(root / USAGE_FILE, ignore_errors=True)
            os.replace(tmp, root / USAGE_FILE)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _account(root: Path, added: int, bound: int, keep: Path) -> None:
    """Count `added` bytes just written (the entry `keep`) against `bound`; walk and trim the folder when due."""
    with _ACCOUNT_LOCK:
        usage = _read_usage(root)
        since = _SINCE_WALK.get(str(root), 0) + added
        if usage is None or usage + added > bound or since > bound // 8:
            _SINCE_WALK[str(root)] = 0
            trim(root, bound, keep)
        else:
            _SINCE_WALK[str(root)] = since
            _write_usage(root, usage + added)


def _is_entry_name(name: str) -> bool:
    if name.startswith(TMP_PREFIX) or name.endswith(ENTRY_SUFFIX):
        return True
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)  # a raw entry of the first format


def _walk(root: Path) -> list[tuple[float, int, str]]:
    """(mtime, size, path) of every entry and temporary file: ROOT/NAMESPACE/KK/FILE (other folders in the cache
    folder, such as the ONNX test data, are not entries)."""
    out = []
    try:
        spaces = [e for e in os.scandir(root) if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    except OSError:
        return out
    for ns in spaces:
        try:
            shards = [e for e in os.scandir(ns.path) if len(e.name) == 2 and e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for shard in shards:
            try:
                files = list(os.scandir(shard.path))
            except OSError:
                continue
            for f in files:
                if not _is_entry_name(f.name):
                    continue
                try:
                    if f.is_file(follow_symlinks=False):
                        st = f.stat(follow_symlinks=False)
                        out.append((st.st_mtime, st.st_size, f.path))
                except OSError:
                    continue
    return out


def trim(root: Path, bound: int, keep: Path | None = None) -> int:
    """Delete the least recently used entries of the cache folder `root` until they take at most LOW_WATER of
    `bound` bytes (only when they take more than `bound`; never `keep`), and stale temporary files; returns the
    entries' bytes left (also written to USAGE_FILE)."""
    entries = _walk(root)
    now = time.time()
    total = 0
    for mtime, size, path in entries:
        if not os.path.basename(path).startswith(TMP_PREFIX):
            total += size
        elif now - mtime > STALE_TMP_SECONDS:  # a young one is a write in flight: its put counts it
            _delete(Path(path))
    if total > bound:
        goal = bound * LOW_WATER
        keep_s = None if keep is None else str(keep)
        for _, size, path in sorted(entries):
            if total <= goal:
                break
            if path == keep_s or os.path.basename(path).startswith(TMP_PREFIX):
                continue
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
    _write_usage(root, total)
    return total


# ---- the detached C compile's last step ------------------------------------------------------------------------------
def seal_command(out: str, dst: Path, key: str) -> list[str] | None:
    """The command that seals the compiler's output `out` as the entry `dst` of `key` (this file run by path in an
    isolated Python, so it starts in milliseconds), or None when there is no Python executable to run it."""
    if not sys.executable:
        return None
    bound = max_bytes()
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "seal", out, str(dst), key, str(bound or 0)]


def main(argv: list[str]) -> int:
    """`seal OUT DST KEY BOUND` (BOUND: the folder's size bound in bytes, 0 for none): exit 0 when the entry is
    written."""
    if len(argv) != 5 or argv[0] != "seal" or not argv[4].isdigit():
        print("usage: cache.py seal OUT DST KEY BOUND", file=sys.stderr)
        return 2
    out, dst, key, bound = argv[1], Path(argv[2]), argv[3], int(argv[4])
    try:
        with open(out, "rb") as f:
            payload = f.read()
    except OSError:
        return 1
    if not write_entry(dst, key, payload):
        return 1
    if bound:
        _account(dst.parent.parent.parent, HEADER_SIZE + len(payload), bound, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
