"""Index arithmetic for tensor-to-kernel: each movement op as a map from its output index to its operand's index.

An index is a tuple of `index`-typed kernel values, one per axis. Every movement op maps the index of its result to
the index of its operand (and pad adds a validity condition); a load turns an index into a row-major offset. The
helpers fold constants as they build, so kernels stay readable before any simplification pass runs; divisions,
modulos and comparisons are decided with the value-range hook (uopir.ir.valuerange) where the bounds allow.
"""
from __future__ import annotations

from uopir.dialects import core, tensor
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.ir.valuerange import value_range

Index = tuple[UOp, ...]


def iconst(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def cval(u: UOp) -> int | None:
    """The value of an index const, else None."""
    return u.arg if u.op is core.CONST and u.dtype is dtypes.index and type(u.arg) is int else None


def iadd(a: UOp, b: UOp | int) -> UOp:
    b = iconst(b) if isinstance(b, int) else b
    ca, cb = cval(a), cval(b)
    if ca is not None and cb is not None:
        return iconst(ca + cb)
    if cb == 0:
        return a
    if ca == 0:
        return b
    if ca is not None:  # constants to the right
        return b + a
    return a + b


def imul(a: UOp, k: int) -> UOp:
    ca = cval(a)
    if ca is not None:
        return iconst(ca * k)
    return iconst(0) if k == 0 else a if k == 1 else a * iconst(k)


def idiv(a: UOp, k: int) -> UOp:
    """a // k for a >= 0 (index values are non-negative here); folded when the bounds decide it."""
    b = value_range(a)
    if k == 1:
        return a
    if b[0] >= 0 and b[0] // k == b[1] // k:
        return iconst(b[0] // k)
    return a // iconst(k)


def imod(a: UOp, k: int) -> UOp:
    b = value_range(a)
    if k == 1:
        return iconst(0)
    if 0 <= b[0] and b[1] < k:
        return a
    return a % iconst(k)


def lt(a: UOp, k: int) -> UOp | None:
    """a < k as a bool, or None when it always holds."""
    b = value_range(a)
    if b[1] < k:
        return None
    return a.lt(iconst(k))


def ge(a: UOp, k: int) -> UOp | None:
    """a >= k as a bool (written k-1 < a), or None when it always holds."""
    b = value_range(a)
    if b[0] >= k:
        return None
    return iconst(k - 1).lt(a)


def and_gate(a: UOp | None, b: UOp | None) -> UOp | None:
    return b if a is None else a if b is None else a & b


def strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def offset(idx: Index, shape: tuple[int, ...]) -> UOp:
    """The row-major element offset of idx in a buffer of `shape`."""
    off = iconst(0)
    for i, st in zip(idx, strides(shape), strict=True):
        off = iadd(off, imul(i, st))
    return off


# ---- movement ops: the operand index of a result index ---------------------------------------------------------------
def reshape_index(idx: Index, out: tuple[int, ...], src: tuple[int, ...]) -> Index:
    """Size-1 axes aside, split both shapes into the shortest runs of equal element count; within a run, flatten
    the result index and unflatten it for the operand (a run of one axis on each side passes its index through)."""
    res: list[UOp] = [iconst(0)] * len(src)
    if 0 in out:  # no elements: nothing is ever read
        return tuple(res)
    o = [a for a in range(len(out)) if out[a] != 1]
    s = [a for a in range(len(src)) if src[a] != 1]
    i = j = 0
    while i < len(o):
        oi, sj = i, j
        po, ps = out[o[i]], src[s[j]]
        i, j = i + 1, j + 1
        while po != ps:
            if po < ps:
                po, i = po * out[o[i]], i + 1
            else:
                ps, j = ps * src[s[j]], j + 1
        o_run, s_run = o[oi:i], s[sj:j]
        if len(o_run) == 1 and len(s_run) == 1:
            res[s_run[0]] = idx[o_run[0]]
            continue
        lin = offset(tuple(idx[a] for a in o_run), tuple(out[a] for a in o_run))
        for k, (a, st) in enumerate(zip(s_run, strides(tuple(src[a] for a in s_run)), strict=True)):
            v = idiv(lin, st)
            res[a] = v if k == 0 else imod(v, src[a])
    return tuple(res)


def permute_index(idx: Index, perm: tuple[int, ...]) -> Index:
    res: list[UOp] = [iconst(0)] * len(perm)
    for i, p in enumerate(perm):
        res[p] = idx[i]
    return tuple(res)


def expand_index(idx: Index, out: tuple[int, ...], src: tuple[int, ...]) -> Index:
    return tuple(iconst(0) if s == 1 and o != 1 else i for i, o, s in zip(idx, out, src, strict=True))


def shrink_index(idx: Index, b: tuple[tuple[int, int], ...]) -> Index:
    return tuple(iadd(i, lo) for i, (lo, _) in zip(idx, b, strict=True))


def flip_index(idx: Index, axes: tuple[int, ...], src: tuple[int, ...]) -> Index:
    return tuple(iadd(imul(i, -1), src[a] - 1) if a in axes else i for a, i in enumerate(idx))


def pad_index(idx: Index, pads: tuple[tuple[int, int], ...], src: tuple[int, ...]) -> tuple[Index, UOp | None]:
    """The operand index and the validity condition (None: always valid) of a pad."""
    res, valid = [], None
    for i, (before, _), n in zip(idx, pads, src, strict=True):
        valid = and_gate(valid, ge(i, before))
        valid = and_gate(valid, lt(i, before + n))
        res.append(iadd(i, -before))
    return tuple(res), valid


def movement_index(u: UOp, idx: Index) -> tuple[Index, UOp | None]:
    """The index of u's operand that u's element at idx reads, and the validity condition a pad adds."""
    op, src = u.op, u.src[0].shape
    assert src is not None
    if op is tensor.RESHAPE:
        return reshape_index(idx, u.arg, src), None
    if op is tensor.PERMUTE:
        return permute_index(idx, u.arg), None
    if op is tensor.EXPAND:
        return expand_index(idx, u.arg, src), None
    if op is tensor.SHRINK:
        return shrink_index(idx, u.arg), None
    if op is tensor.FLIP:
        return flip_index(idx, u.arg, src), None
    return pad_index(idx, u.arg, src)


__all__ = ["Index", "iconst", "cval", "iadd", "imul", "idiv", "imod", "lt", "ge", "and_gate", "strides",
           "offset", "movement_index"]
