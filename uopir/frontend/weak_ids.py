"""A weak table of live objects by id: what the frontend's registries of live tensors (unrealized, pending assigns,
gradient tracking) need from weakref.WeakValueDictionary, at a third of its cost.

Every eager op registers its new tensor in one or two such tables and the tensor's death removes it, so the table is
on the path of every `x + 1`: WeakValueDictionary makes its reference in two Python methods (KeyedRef's __new__ and
__init__) per insert; here the reference is made in C and only the removal callback is Python.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

try:
    from _weakref import _remove_dead_weakref  # CPython: atomically delete d[key] if it is a dead weak reference
except ImportError:  # pragma: no cover - other interpreters
    def _remove_dead_weakref(d: dict, key: Any) -> None:
        r = d.get(key)
        if r is not None and r() is None:
            del d[key]

__all__ = ["WeakById"]


class _Ref(weakref.ref):
    """A weak reference that knows its table key (set after construction: a subclass __init__ would be Python)."""

    __slots__ = ("key",)


class WeakById:
    """key (an object's id) -> the object, held weakly: an entry goes when its object is collected. The removal drops
    only a dead reference, so a new object registered under a reused id stays."""

    __slots__ = ("data", "_remove")

    def __init__(self) -> None:
        data: dict[int, _Ref] = {}
        self.data = data

        def remove(r: _Ref, _data: dict = data, _drop: Any = _remove_dead_weakref) -> None:
            _drop(_data, r.key)

        self._remove = remove

    def __setitem__(self, key: int, value: Any) -> None:
        r = _Ref(value, self._remove)
        r.key = key
        self.data[key] = r

    def get(self, key: int, default: Any = None) -> Any:
        r = self.data.get(key)
        o = None if r is None else r()
        return default if o is None else o

    def pop(self, key: int, default: Any = None) -> Any:
        r = self.data.pop(key, None)
        o = None if r is None else r()
        return default if o is None else o

    def values(self) -> list[Any]:
        """The live objects (a list: a collection while the caller walks it cannot change it). The table is copied
        first by one C call that makes no objects the collector tracks, so no removal runs during the copy."""
        return [o for r in list(self.data.values()) if (o := r()) is not None]

    def __contains__(self, key: int) -> bool:
        r = self.data.get(key)
        return r is not None and r() is not None

    def __iter__(self) -> Iterator[int]:
        data = self.data
        return iter([k for k in list(data) if (r := data.get(k)) is not None and r() is not None])

    def __len__(self) -> int:
        return len(self.data)

    def __bool__(self) -> bool:
        return bool(self.data)
