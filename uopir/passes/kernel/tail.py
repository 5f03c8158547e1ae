"""kernel-optimize's `tail` opt: a range no vector divides becomes a vector body and a short tail.

A row of 197 (a ViT's attention: 196 patches and the class token) has no power-of-two divisor, so an upcast of it
is scalar; 197 lanes whole are too many registers. `tail r by f` cuts r (extent n) into a body of n - n % f
iterations, which f divides (later opts upcast it), and a tail of the n % f left:

    output range (in a kernel.end):  kernel.end %v, ..., r, %inner...
        -> kernel.end (core.group (kernel.end %v[r := b], b, %inner...),
                                  (kernel.end %v[r := body + t], t, %inner'...)), ...
    reduction range:                 kernel.reduce %x, ..., r, ... {op}
        -> op(kernel.reduce %x[r := b], ..., b, ..., kernel.reduce %x[r := body + t], ..., t, ...)

b and t are new ranges of r's kind (fresh axes), and the ranges inside r in the end get fresh copies in the tail's
end (each segment its own loops); a reduction that does not vary along r stays one value read by both segments
(softmax's max and sum, computed once per row). The stores are the same, so the output loop's cut is exact; the
reduction's cut changes the order of a float add or mul (the caller asks `reassociate_float_reductions`), max and
min are exact in any order.
"""
from __future__ import annotations

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import const_extent

__all__ = ["split_tail", "TAIL_OPS"]

TAIL_OPS = {"add": core.ADD, "mul": core.MUL, "max": core.MAX}  # reductions whose two halves combine by one ALU op


def _range(n: int, axis: int, like: UOp) -> UOp:
    return UOp(K.RANGE, dtypes.index, (UOp.const(dtypes.index, n),), (axis, *like.arg[1:]))


def split_tail(kdef: UOp, r: UOp, f: int) -> UOp:
    """kdef with range r cut into a body that f divides and a tail (the module docstring says how); ValueError when
    r is no such range (no constant extent, f divides it already or exceeds it, a reduction op without a
    combining ALU op, an output range no end closes)."""
    n = const_extent(r)
    if n is None or f < 2 or n <= f or n % f == 0:
        raise ValueError(f"axis {r.attrs.axis}: tail by {f} needs an extent above {f} that {f} does not divide")
    body, rest = n - n % f, n % f
    order = kdef.toposort()
    axis = 1 + max(u.attrs.axis for u in order if u.op is K.RANGE)
    b, t = _range(body, axis, r), _range(rest, axis + 1, r)
    at = UOp(core.ADD, dtypes.index, (t, UOp.const(dtypes.index, body)))
    new: dict[UOp, UOp] = {}
    if r.attrs.kind == "reduce":
        for u in order:
            if u.op is not K.REDUCE or r not in u.operands.ranges:
                continue
            op = TAIL_OPS.get(u.attrs.op)
            if op is None:
                raise ValueError(f"axis {r.attrs.axis}: a {u.attrs.op} reduction has no tail")
            v, rs = u.operands.value, u.operands.ranges
            first = UOp(K.REDUCE, u.dtype, (v.substitute({r: b}), *(b if x is r else x for x in rs)), u.arg)
            second = UOp(K.REDUCE, u.dtype, (v.substitute({r: at}), *(t if x is r else x for x in rs)), u.arg)
            new[u] = UOp(op, u.dtype, (first, second))
    else:
        next_axis = axis + 2
        for e in order:
            if e.op is not K.END or r not in e.operands.ranges:
                continue
            rs = list(e.operands.ranges)
            k = rs.index(r)
            inner = rs[k + 1:]
            fresh = {q: _range(const_extent(q) or 0, next_axis + i, q) if const_extent(q) is not None
                     else UOp(K.RANGE, dtypes.index, q.src, (next_axis + i, *q.arg[1:])) for i, q in enumerate(inner)}
            next_axis += len(fresh)
            v = e.operands.value
            parts = (UOp(K.END, e.dtype, (v.substitute({r: b}), b, *inner), e.arg),
                     UOp(K.END, e.dtype, (v.substitute({r: at, **fresh}), t, *fresh.values()), e.arg))
            group = UOp(core.GROUP, e.dtype, parts)
            new[e] = group if k == 0 else UOp(K.END, e.dtype, (group, *rs[:k]), e.arg)
    if not new:
        raise ValueError(f"axis {r.attrs.axis}: no {'reduction' if r.attrs.kind == 'reduce' else 'end'} has it")
    return kdef.substitute(new)
