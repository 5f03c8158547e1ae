"""The on-disk compile cache: binaries keyed by (compiler, flags, source), in the user's cache folder.

Where: $UOPIR_CACHE_DIR if set, else $XDG_CACHE_HOME/uopir, else ~/.cache/uopir. `UOPIR_DISABLE_CACHE=1` turns the
cache off (every compile runs). Writes are atomic (a temporary file in the same folder, then os.replace), so a
crash or two processes compiling the same program never leave a torn entry; an unreadable or unwritable folder
only costs a recompile, never an error.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["CACHE_DIR_ENV", "DISABLE_ENV", "cache_dir", "cache_enabled", "cache_key", "cache_get", "cache_put",
           "cache_path"]

CACHE_DIR_ENV = "UOPIR_CACHE_DIR"
DISABLE_ENV = "UOPIR_DISABLE_CACHE"


def cache_dir() -> Path:
    """The cache folder (it may not exist yet)."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "uopir"


def cache_enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "0").strip().lower() in ("", "0", "false", "no", "off")


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
    return cache_dir() / safe / key[:2] / key


def cache_get(namespace: str, key: str) -> bytes | None:
    """The cached bytes, or None (missing, unreadable, or the cache is off)."""
    if not cache_enabled():
        return None
    try:
        return cache_path(namespace, key).read_bytes()
    except OSError:
        return None


def cache_put(namespace: str, key: str, data: bytes) -> Path | None:
    """Store `data` atomically; the path written, or None when the cache is off or the folder is not writable."""
    if not cache_enabled():
        return None
    path = cache_path(namespace, key)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None
