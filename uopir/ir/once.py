"""First use under threads: a value that is built on first use is built once, however many threads ask at once.

A lazy registry (targets, backends, one-rule matchers, worker pools) keeps what it built in a plain dict and builds
through a `FirstUse`: a lookup of a built value takes no lock (the hot path costs one dict read); a miss takes the
registry's lock, looks again, and builds. The lock is reentrant, so building one entry may look up another entry of
the same registry; building an entry that needs itself is an error, not a hang. (Pass modules load under the pass
registry's own lock: uopir.passes.registry.resolve.) Registering a factory never takes the lock: module bodies
register, and a module body that waited for a lock held by a thread that is importing that module would deadlock.
For the same reason no module builds a lazy entry while it is imported.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable, MutableMapping
from typing import Any, TypeVar

__all__ = ["FirstUse", "once"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MISSING: Any = object()


class FirstUse:
    """The lock of one lazy registry. `get(table, key, build)` returns `table[key]`, building it with `build()` and
    storing it when it is missing: every thread that asks for a missing key at the same time gets the one value the
    first of them built. An exception from `build()` stores nothing (the next caller builds again)."""

    def __init__(self, what: str) -> None:
        self.what = what  # what an entry is, for the error of an entry that needs itself ("target", "backend")
        self.lock = threading.RLock()
        self._building: set[Hashable] = set()

    def get(self, table: MutableMapping[K, V], key: K, build: Callable[[], V]) -> V:
        v = table.get(key, _MISSING)
        if v is not _MISSING:
            return v
        with self.lock:
            v = table.get(key, _MISSING)
            if v is not _MISSING:  # another thread built it while this one waited
                return v
            if key in self._building:  # only this thread can be building it: it holds the lock
                raise RuntimeError(f"building {self.what} {key!r} needs {self.what} {key!r} itself")
            self._building.add(key)
            try:
                v = build()
            finally:
                self._building.discard(key)
            table[key] = v
            return v


def once(fn: Callable[..., V]) -> Callable[..., V]:
    """`functools.cache` for a factory whose result must be unique (a worker pool, a compiler, a device handle): under
    concurrent first use `fn` runs once per argument tuple and every caller gets that result. `cache_clear()`
    forgets the results (tests)."""
    values: dict[tuple, V] = {}
    first = FirstUse(getattr(fn, "__qualname__", type(fn).__name__))

    @functools.wraps(fn)
    def get(*args: Hashable) -> V:
        v = values.get(args, _MISSING)
        if v is not _MISSING:
            return v
        return first.get(values, args, lambda: fn(*args))

    get.cache_clear = values.clear  # type: ignore[attr-defined]
    return get
