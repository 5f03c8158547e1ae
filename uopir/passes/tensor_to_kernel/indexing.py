"""Index arithmetic for tensor-to-kernel: each movement op as a map from its output index to its operand's index.

An index is a tuple of `index`-typed kernel values, one per axis. Every movement op maps the index of its result to
the index of its operand (and pad adds a validity condition); a load turns an index into a row-major offset. The
helpers fold constants as they build, so kernels stay readable before any simplification pass runs; divisions,
modulos and comparisons are decided with the value-range hook (uopir.ir.valuerange) where the bounds allow.

Symbolic dimensions: a shape, pad or shrink amount may be a tensor-level index expression over `tensor.var` /
`tensor.bind` (uopir.ir.symbolic). `kernel_dim` turns it into the kernel's own expression over `kernel.var` (same
name and range; the value arrives at run time, so the kernel is the same for every bound value), and the helpers
below take ints and such kernel expressions alike. A reshape between symbolic shapes splits both at the dims where
their running products agree.
"""
from __future__ import annotations

from uopir.dialects import core, kernel, tensor
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import canon, sadd, smul
from uopir.ir.uop import UOp
from uopir.ir.valuerange import value_range

Index = tuple[UOp, ...]
Dim = int | UOp  # an int or a kernel-level index expression


def kernel_dim(d: int | UOp) -> Dim:
    """A tensor-level dimension (int or an expression over tensor.var / tensor.bind) as the kernel's: the same
    expression over kernel.var (a binding's value is not part of the kernel: it is passed at run time)."""
    if not isinstance(d, UOp):
        return d
    mapping = {x: UOp(kernel.VAR, dtypes.index, (), (x if x.op is tensor.VAR else x.operands.var).arg)
               for x in d.toposort()
               if x.op is tensor.VAR or (x.op is tensor.BIND and x.operands.var.op is tensor.VAR)}
    return canon(d.substitute(mapping) if mapping else d)


def kernel_dims(shape: tuple) -> tuple[Dim, ...]:
    return tuple(kernel_dim(d) for d in shape)


def as_index(d: Dim) -> UOp:
    return iconst(d) if isinstance(d, int) else d


def kernel_index(d: int | UOp) -> UOp:
    """A tensor-level dimension as a kernel index value (an index const, or the expression over kernel.var)."""
    return as_index(kernel_dim(d))


def iconst(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def cval(u: UOp) -> int | None:
    """The value of an index const, else None."""
    return u.arg if u.op is core.CONST and u.dtype is dtypes.index and type(u.arg) is int else None


def iadd(a: UOp, b: Dim) -> UOp:
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


def imul(a: UOp, k: Dim) -> UOp:
    ca = cval(a)
    if isinstance(k, UOp):
        return iconst(0) if ca == 0 else k if ca == 1 else a * k
    if ca is not None:
        return iconst(ca * k)
    return iconst(0) if k == 0 else a if k == 1 else a * iconst(k)


def idiv(a: UOp, k: Dim) -> UOp:
    """a // k for a >= 0 (index values are non-negative here); folded when the bounds decide it."""
    b = value_range(a)
    if isinstance(k, UOp):
        return iconst(0) if 0 <= b[0] and b[1] < value_range(k)[0] else a // k
    if k == 1:
        return a
    if b[0] >= 0 and b[0] // k == b[1] // k:
        return iconst(b[0] // k)
    return a // iconst(k)


def imod(a: UOp, k: Dim) -> UOp:
    b = value_range(a)
    if isinstance(k, UOp):
        return a if 0 <= b[0] and b[1] < value_range(k)[0] else a % k
    if k == 1:
        return iconst(0)
    if 0 <= b[0] and b[1] < k:
        return a
    return a % iconst(k)


def lt(a: UOp, k: Dim) -> UOp | None:
    """a < k as a bool, or None when it always holds."""
    b = value_range(a)
    if b[1] < (value_range(k)[0] if isinstance(k, UOp) else k):
        return None
    return a.lt(as_index(k))


def ge(a: UOp, k: Dim) -> UOp | None:
    """a >= k as a bool (written k-1 < a), or None when it always holds."""
    b = value_range(a)
    if b[0] >= (value_range(k)[1] if isinstance(k, UOp) else k):
        return None
    return as_index(sadd(k, -1)).lt(a)


def and_gate(a: UOp | None, b: UOp | None) -> UOp | None:
    return b if a is None else a if b is None else a & b


def strides(shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
    out: list[Dim] = []
    acc: Dim = 1
    for d in reversed(shape):
        out.append(acc)
        acc = acc * d if isinstance(acc, int) and isinstance(d, int) else smul(acc, d)
    return tuple(reversed(out))


def offset(idx: Index, shape: tuple[Dim, ...]) -> UOp:
    """The row-major element offset of idx in a buffer of `shape`."""
    off = iconst(0)
    for i, st in zip(idx, strides(shape), strict=True):
        off = iadd(off, imul(i, st))
    return off


# ---- movement ops: the operand index of a result index ---------------------------------------------------------------
def _runs(o: list[int], s: list[int], out: tuple[Dim, ...], src: tuple[Dim, ...]) -> list[tuple[list, list]]:
    """The shortest runs of axes (o of out, s of src) with equal element counts."""
    runs = []
    i = j = 0
    if all(isinstance(d, int) for d in (*out, *src)):
        while i < len(o):
            oi, sj = i, j
            po, ps = out[o[i]], src[s[j]]
            i, j = i + 1, j + 1
            while po != ps:
                if po < ps:
                    po, i = po * out[o[i]], i + 1
                else:
                    ps, j = ps * src[s[j]], j + 1
            runs.append((o[oi:i], s[sj:j]))
        return runs
    # symbolic: a run ends where the running products agree (as polynomials); the last one ends at the totals
    prefix: dict[int | UOp, int] = {}
    acc: Dim = 1
    for k, a in enumerate(s, 1):
        acc = smul(acc, src[a])
        prefix.setdefault(acc, k)
    acc, oi, sj = 1, 0, 0
    for k, a in enumerate(o, 1):
        acc = smul(acc, out[a])
        j = prefix.get(acc) if k < len(o) else len(s)
        if j is not None and j > sj:
            runs.append((o[oi:k], s[sj:j]))
            oi, sj = k, j
    if oi < len(o) or sj < len(s):
        runs.append((o[oi:], s[sj:]))
    return runs


def reshape_index(idx: Index, out: tuple[Dim, ...], src: tuple[Dim, ...]) -> Index:
    """Size-1 axes aside, split both shapes into the shortest runs of equal element count; within a run, flatten
    the result index and unflatten it for the operand (a run of one axis on each side passes its index through)."""
    res: list[UOp] = [iconst(0)] * len(src)
    if 0 in out:  # no elements: nothing is ever read
        return tuple(res)
    o = [a for a in range(len(out)) if out[a] != 1]
    s = [a for a in range(len(src)) if src[a] != 1]
    for o_run, s_run in _runs(o, s, out, src):
        if not s_run:  # only size-1 source axes are left (their index is 0)
            continue
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


def expand_index(idx: Index, out: tuple[Dim, ...], src: tuple[Dim, ...]) -> Index:
    return tuple(iconst(0) if s == 1 and o != 1 else i for i, o, s in zip(idx, out, src, strict=True))


def shrink_index(idx: Index, b: tuple[tuple[Dim, Dim], ...]) -> Index:
    return tuple(iadd(i, lo) for i, (lo, _) in zip(idx, b, strict=True))


def flip_index(idx: Index, axes: tuple[int, ...], src: tuple[Dim, ...]) -> Index:
    return tuple(iadd(imul(i, -1), sadd(src[a], -1)) if a in axes else i for a, i in enumerate(idx))


def pad_index(idx: Index, pads: tuple[tuple[Dim, Dim], ...], src: tuple[Dim, ...]) -> tuple[Index, UOp | None]:
    """The operand index and the validity condition (None: always valid) of a pad."""
    res, valid = [], None
    for i, (before, _), n in zip(idx, pads, src, strict=True):
        valid = and_gate(valid, ge(i, before))
        valid = and_gate(valid, lt(i, sadd(before, n)))
        res.append(iadd(i, smul(before, -1)))
    return tuple(res), valid


def movement_index(u: UOp, idx: Index) -> tuple[Index, UOp | None]:
    """The index of u's operand that u's element at idx reads, and the validity condition a pad adds."""
    op, src = u.op, u.operands.x.shape
    assert src is not None
    if op is tensor.PERMUTE:
        return permute_index(idx, u.attrs.perm), None
    if len(u.src) == 1 and all(type(d) is int for d in src):
        arg = u.arg
    else:  # symbolic dims: the kernel's expressions over kernel.var
        src = kernel_dims(src)
        arg = tensor.sym_arg(u) if op is not tensor.FLIP else u.arg
        if op is not tensor.FLIP:
            arg = tuple(kernel_dims(x) if type(x) is tuple else kernel_dim(x) for x in arg)
    if op is tensor.RESHAPE:
        return reshape_index(idx, arg, src), None
    if op is tensor.EXPAND:
        return expand_index(idx, arg, src), None
    if op is tensor.SHRINK:
        return shrink_index(idx, arg), None
    if op is tensor.FLIP:
        return flip_index(idx, arg, src), None
    return pad_index(idx, arg, src)


__all__ = ["Index", "Dim", "iconst", "cval", "iadd", "imul", "idiv", "imod", "lt", "ge", "and_gate", "strides",
           "offset", "movement_index", "kernel_dim", "kernel_dims", "kernel_index", "as_index"]
