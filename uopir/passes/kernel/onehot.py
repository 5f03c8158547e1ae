"""kernel-simplify's one-hot fold: a reduction that picks one element by comparing its range with an index becomes a
load at that index.

The frontend reads `x[idx]`, `gather`, `nn.Embedding` and ONNX Gather as a one-hot pick: a sum over the table's
range r of `where(cast(r) == e, v(r), 0)` (or `cast(r + a) == e` with a free of r: one partial of a reduction
tensor-split-reduce cut in two reads r - a). With e independent of r, exactly one r in [0, n) matches when
0 <= e < n and none otherwise, so the reduction is `where(0 <= e < n, v(e), 0)`: one row read instead of n
compares (tinygrad folds its arange reductions the same way). Memory safety: r becomes `where(0 <= e < n, e, 0)`,
an index always inside the table, so an out-of-range id reads row 0 and the `where` gives the reduction's
identity (0, as before the fold). The other conjuncts of the condition (a second indexed dim, a pad's gate) stay.

Exact for every reduction whose `where` alternative is its identity: integer/bool add, mul, max, min (one term
and identities), and a float add (`v + 0.0`: the sum starts from +0.0, so a picked -0.0 reads +0.0, as the loop
does). A float max/min/mul is left alone (NaN and signed-zero rules of the identities).
"""
from __future__ import annotations

from uopir.dialects import core, kernel
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp
from uopir.ir.valuerange import value_range

__all__ = ["fold_one_hot"]


def _identity(op: str, d: DType) -> object | None:
    """The value a reduction `op` over d starts from, where the fold is exact; None where it is not."""
    if d.is_bool:
        return {"add": False, "max": False, "min": True, "mul": True}.get(op)
    if d.is_float:
        return 0.0 if op == "add" else None
    if d.is_int and d.kind != "index":
        return {"add": 0, "mul": 1, "max": d.min, "min": d.max}.get(op)
    return None


def _is_const(u: UOp, v: object) -> bool:
    return u.op is core.CONST and u.dtype.count == 1 and u.arg == v and type(u.arg) is type(v)


def _flat_and(c: UOp) -> list[UOp]:
    """The conjuncts of a bool condition, in order (c itself when it is no `and`)."""
    out: list[UOp] = []
    stack = [c]
    while stack:
        x = stack.pop()
        if x.op is core.AND and x.dtype is dtypes.bool:
            stack.extend(reversed(x.src))
        else:
            out.append(x)
    return out


def _offset(x: UOp, r: UOp) -> UOp | None:
    """a when x is r + a (or r, a = 0) through integer casts that keep every value of r + a (so x == e picks at most
    one r), a independent of r (a split reduction's partial: r0*k + r1 along r1); else None."""
    while x.op is core.CAST and x.dtype.count == 1 and x.dtype.is_int:
        lo, hi = value_range(x.src[0])
        if lo < x.dtype.min or hi > x.dtype.max:
            return None
        x = x.src[0]
    if x is r:
        return UOp.const(dtypes.index, 0)
    if x.op is core.ADD and x.dtype is dtypes.index:
        for a, b in (x.src, x.src[::-1]):
            if a is r and r not in b.toposort():
                return b
    return None


def _match(cond: list[UOp], r: UOp) -> tuple[int, UOp, UOp] | None:
    """(position of the conjunct `cast(r + a) == e`, e, a) with e and a independent of r, or None."""
    for i, c in enumerate(cond):
        if c.op is not core.CMPEQ or c.dtype is not dtypes.bool:
            continue
        for x, e in (c.src, c.src[::-1]):
            if e.dtype.count == 1 and e.dtype.is_int and (a := _offset(x, r)) is not None and r not in e.toposort():
                return i, e, a
    return None


def fold_one_hot(u: UOp) -> UOp | None:
    """kernel.reduce over ranges of `where(... & cast(r) == e & ..., v(r), identity)` without r: the rest of the
    condition and 0 <= e < n, v at r = e (clamped into the range); None when it does not have that form."""
    w = u.operands.value
    if w.op is not core.WHERE or w.dtype.count != 1:
        return None
    c, v, z = w.src
    zero = _identity(u.attrs.op, w.dtype)
    if zero is None or not _is_const(z, zero):
        return None
    cond = _flat_and(c)
    for r in u.operands.ranges:
        if r.op is not kernel.RANGE or (hit := _match(cond, r)) is None:
            continue
        i, e, a = hit
        n = r.operands.end
        if value_range(n)[0] < 1:  # an empty table has no row to clamp an id to: the sum of nothing stays
            continue
        ei = e if e.dtype is dtypes.index else UOp(core.CAST, dtypes.index, (e,))
        if not (a.op is core.CONST and a.arg == 0):
            ei = ei - a
        valid = UOp.const(dtypes.index, -1).lt(ei) & ei.lt(n)
        at = valid.where(ei, UOp.const(dtypes.index, 0))
        rest = [valid] + [x.substitute({r: at}) for x in cond[:i] + cond[i + 1:]]
        g = rest[0]
        for x in rest[1:]:
            g = g & x
        out = g.where(v.substitute({r: at}), z)
        keep = tuple(x for x in u.operands.ranges if x is not r)
        if keep:
            return u.replace(src=(out, *keep))
        if w.dtype.is_float:  # the loop's sum starts from +0.0: -0.0 picked reads +0.0
            return UOp(core.ADD, w.dtype, (out, UOp.const(w.dtype, 0.0)))
        return out
    return None
