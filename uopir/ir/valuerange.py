"""Value ranges: a sound [vmin, vmax] for every node, from per-op rules that the dialects register.

`kernel-simplify` folds index math with them (`x % 8` is `x` when 0 <= x < 8). The rule for an op gets the node
and its sources' ranges and returns the mathematically exact bounds of the result (as Python ints); this module
then applies the dtype: an integer result whose bounds leave the dtype's range could have wrapped around, so its
range is the dtype's full range. An op without a rule, or a rule that returns None, gives the full range.

Ranges speak about integers, index and bool (as False/True), scalar or vector (one range over every lane). Float
results get (-inf, inf) except where a rule is registered with `floats=True` (a finite float const is exact);
NaN is not tracked, so a float range is a bound on the non-NaN values only and rules never decide from one that
is not a single finite point.

Results are cached per node (weakly: a node that dies leaves the cache), computed iteratively (graphs may be a
million nodes deep). Registering a rule clears the cache.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from uopir.ir.dtype import DType
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["Range", "RangeFn", "register_range", "value_range", "vmin", "vmax", "full_range", "clear_range_cache"]

Range = tuple[Any, Any]  # (lo, hi), inclusive; ints for integers, bools for bool, floats for floats
RangeFn = Callable[[UOp, tuple[Range, ...]], "Range | None"]

_RULES: dict[OpDef, tuple[RangeFn, bool]] = {}
_CACHE: weakref.WeakKeyDictionary[UOp, Range] = weakref.WeakKeyDictionary()
_INF = float("inf")


def register_range(op: OpDef, fn: RangeFn, floats: bool = False) -> RangeFn:
    """Declare how `op` bounds its result. `fn(u, src_ranges)` returns (lo, hi) or None (unknown); it is asked for
    integer, index and bool results, and for float results only with `floats=True`."""
    _RULES[op] = (fn, floats)
    _CACHE.clear()
    return fn


def clear_range_cache() -> None:
    _CACHE.clear()


def _int_like(d: DType) -> bool:
    return d.kind in ("int", "uint", "index", "bool")


def full_range(d: DType) -> Range:
    """Every value the dtype can hold ((-inf, inf) for floats and for types that hold no number)."""
    if _int_like(d):
        return (d.min, d.max)
    return (-_INF, _INF)


def _finish(d: DType, r: Range | None) -> Range:
    """Apply the dtype to a rule's exact bounds: wraparound means the full range; bool bounds become bools."""
    if r is None:
        return full_range(d)
    lo, hi = r
    if d.kind == "float":
        return (float(lo), float(hi)) if lo <= hi else (-_INF, _INF)
    if not (d.min <= lo <= hi <= d.max):
        return full_range(d)
    if d.kind == "bool":
        return (bool(lo), bool(hi))
    return (int(lo), int(hi))


def _compute(u: UOp, srcs: tuple[Range, ...]) -> Range:
    d = u.dtype
    entry = _RULES.get(u.op)
    if entry is None:
        return full_range(d)
    fn, floats = entry
    if _int_like(d) or (floats and d.kind == "float"):
        return _finish(d, fn(u, srcs))
    return full_range(d)


def value_range(u: UOp) -> Range:
    """(vmin, vmax) of `u`: every value `u` can take (each lane of a vector) lies in it."""
    cache = _CACHE
    r = cache.get(u)
    if r is not None:
        return r
    stack: list[tuple[UOp, bool]] = [(u, False)]
    while stack:
        n, ready = stack.pop()
        if n in cache:
            continue
        if ready:
            cache[n] = _compute(n, tuple([cache[s] for s in n.src]))
            continue
        stack.append((n, True))
        for s in n.src:
            if s not in cache:
                stack.append((s, False))
    return cache[u]


def vmin(u: UOp) -> Any:
    """The smallest value `u` can take."""
    return value_range(u)[0]


def vmax(u: UOp) -> Any:
    """The largest value `u` can take."""
    return value_range(u)[1]
