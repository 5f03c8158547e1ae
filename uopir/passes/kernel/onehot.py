"""kernel-simplify's one-hot fold: a reduction that picks one element by comparing its range with an index becomes a
load at that index.

The frontend reads `x[idx]`, `gather`, `nn.Embedding` and ONNX Gather as a one-hot pick: a sum over the table's
range r of `where(cast(r) == e, v(r), 0)`. With e independent of r, exactly one r in [0, n) matches when
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


def _is_range(x: UOp, r: UOp, n: int | None) -> bool:
    """Is x the range r itself, or r through integer casts that keep every value of [0, n) (so x == e picks one r)?"""
    while x.op is core.CAST and x.dtype.count == 1 and x.dtype.is_int and n is not None and x.dtype.max >= n - 1:
        x = x.src[0]
    return x is r


def _match(cond: list[UOp], r: UOp) -> tuple[int, UOp] | None:
    """(position of the conjunct `cast(r) == e`, e) with e independent of r, or None."""
    end = r.operands.end
    n = end.arg if end.op is core.CONST and type(end.arg) is int else None
    for i, c in enumerate(cond):
        if c.op is not core.CMPEQ or c.dtype is not dtypes.bool:
            continue
        for a, b in (c.src, c.src[::-1]):
            if _is_range(a, r, n) and b.dtype.count == 1 and b.dtype.is_int and r not in b.toposort():
                return i, b
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
        i, e = hit
        n = r.operands.end
        ei = e if e.dtype is dtypes.index else UOp(core.CAST, dtypes.index, (e,))
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
