"""Index arithmetic that the kernel passes share: which ranges a value depends on, the linear coefficient of a range
in an address, the conjuncts of a gate, and rebuilding a node with new operands, folding constants as it goes.

Plain code over a toposort (no recursion): these are per-node facts, computed once per kernel.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["Deps", "range_deps", "linear_coeffs", "rebuild", "const_extent", "conjuncts", "ALU"]

Deps = dict[UOp, frozenset[UOp]]
ALU = frozenset(core.ALU_OPS)
_EMPTY: frozenset[UOp] = frozenset()


def const_extent(r: UOp) -> int | None:
    """The extent of a range whose end is an index constant, else None."""
    e = r.operands.end
    return e.arg if e.op is core.CONST and e.dtype is dtypes.index and type(e.arg) is int else None


def range_deps(order: Iterable[UOp], keep: Callable[[UOp], bool] = lambda r: True,
               reduce_consumes: bool = False) -> Deps:
    """For every node of `order` (a toposort), the ranges (those `keep` accepts) its value varies over.

    With `reduce_consumes`, a kernel.reduce's value no longer varies over the ranges it reduces (kernel-expand's
    view: they become lanes folded away); without, it does (kernel-optimize's view: which loops touch a value)."""
    out: Deps = {}
    for u in order:
        d = _EMPTY
        for s in u.src:
            ds = out[s]
            if ds:
                d = ds if not d else d | ds
        if u.op is K.RANGE and keep(u):
            d = d | {u}
        elif (u.op is K.REDUCE and reduce_consumes) or u.op is K.END:
            d = d - set(u.operands.ranges)
        out[u] = d
    return out


def linear_coeffs(e: UOp, ranges: frozenset[UOp], deps: Deps) -> dict[UOp, int] | None:
    """e = base + sum(c_r * r) over the given ranges, base independent of them: the nonzero c_r; None when e is
    not linear in them (a range under idiv/mod, a product of two ranges, a range scaled by a non-constant)."""
    forms: dict[UOp, dict[UOp, int] | None] = {}
    for u in e.toposort():
        if not deps[u] & ranges:
            forms[u] = {}
            continue
        if u in ranges:
            forms[u] = {u: 1}
            continue
        f: dict[UOp, int] | None = None
        src = [forms[s] for s in u.src]
        if u.op is core.ADD or u.op is core.SUB:
            a, b = src
            if a is not None and b is not None:
                sign = 1 if u.op is core.ADD else -1
                f = dict(a)
                for r, c in b.items():
                    f[r] = f.get(r, 0) + sign * c
        elif u.op is core.NEG and src[0] is not None:
            f = {r: -c for r, c in src[0].items()}
        elif u.op is core.MUL:
            for x, k in ((0, 1), (1, 0)):
                c = u.src[k]
                if src[x] is not None and c.op is core.CONST and type(c.arg) is int:
                    f = {r: v * c.arg for r, v in src[x].items()}
                    break
        forms[u] = None if f is None else {r: c for r, c in f.items() if c}
        if forms[u] is None:
            return None
    return forms[e]


def _is_const(u: UOp, v: int | bool) -> bool:
    return u.op is core.CONST and type(u.arg) is type(v) and u.arg == v


def _identity(u: UOp) -> UOp | None:
    """Integer and bool identities (x+0, x*1, x*0, x-0, x//1, x&true, ...): exact for every value, and index math
    has no side effects to lose."""
    d = u.dtype
    if d.count != 1 or not (d.is_int or d.is_bool) or len(u.src) != 2:
        return None
    a, b = u.src
    op = u.op
    if d.is_bool and (op is core.AND or op is core.OR):
        keep = op is core.AND  # x & true = x, x & false = false; x | false = x, x | true = true
        for x, c in ((a, b), (b, a)):
            if _is_const(c, keep):
                return x
            if _is_const(c, not keep):
                return c
        return None
    if d.is_bool:
        return None
    if op is core.ADD:
        return b if _is_const(a, 0) else a if _is_const(b, 0) else None
    if op is core.SUB:
        return a if _is_const(b, 0) else None
    if op is core.MUL:
        if _is_const(a, 0) or _is_const(b, 1):
            return a
        if _is_const(b, 0) or _is_const(a, 1):
            return b
    if op is core.IDIV and _is_const(b, 1):
        return a
    return None


def rebuild(u: UOp, src: tuple[UOp, ...], dtype: DType | None = None) -> UOp:
    """u with operands `src` (and result `dtype`), folded: all-constant ALU ops and casts become constants,
    integer/bool identities drop, a where on a constant condition picks its side."""
    d = u.dtype if dtype is None else dtype
    n = u if src == u.src and d is u.dtype else u.replace(src=src, dtype=d)
    if n.op in ALU or n.op is core.CAST:
        if all(s.op is core.CONST for s in src):
            f = core.fold_cast(n, src[0]) if n.op is core.CAST else core.fold_constant(n)
            if f is not None:
                return f
        if n.op is core.WHERE and src[0].op is core.CONST and type(src[0].arg) is bool:
            return src[1] if src[0].arg else src[2]
        if (f := _identity(n)) is not None:
            return f
    return n


def conjuncts(g: UOp) -> set[UOp]:
    """The conditions a bool gate is the `and` of (g itself when it is no `and`)."""
    out: set[UOp] = set()
    stack = [g]
    while stack:
        x = stack.pop()
        if x.op is core.AND and x.dtype is dtypes.bool:
            stack.extend(x.src)
        else:
            out.add(x)
    return out
