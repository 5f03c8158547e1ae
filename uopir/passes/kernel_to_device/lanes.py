"""Picking lanes of a vector expression: `gep(x, idx)` pushed down to where the lanes are made.

A lane reduction (`kernel.reduce` with fewer result lanes than operand lanes) folds its operand as runs of strided
lanes: result lane j takes lanes j*g+t at step t. A plain gep of the whole product would make every step a shuffle
of a wide vector; pushed through the ALU ops to the loads, vectorizes and constants that make the lanes, each step
computes only the lanes it folds (a matmul's step t multiplies one broadcast row by one loaded vector). The rules:

- `gep(op(a, b…), idx)` of an elementwise op is `op(gep(a, idx), gep(b, idx)…)` (a scalar operand, e.g. the
  condition of a `where`, stays whole; a bitcast that changes the lane count is left alone);
- `gep(load, idx)` of several lanes reads only lanes min(idx)..max(idx): a narrower load at the first of them (a
  scalar load when every index is the same lane), the gep's order kept by a gep of it; a gep of one lane stays (a
  vectorize of lanes of several loads, a depthwise conv's rows side by side, keeps its vector loads, and
  device-devectorize splits it along them);
- and the gep folds of device-devectorize (of a vectorize, a gep, a constant, of every lane in order).
"""
from __future__ import annotations

from uopir.dialects import core as C
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat
from uopir.passes.device.devectorize import GEP_FOLDS, at_offset, gep

__all__ = ["pick_lanes", "PICK_LANES"]


class _AnyWidth:
    """The gep folds' context: any width is allowed (device-devectorize splits later)."""

    def limit(self, d: DType) -> int:
        return d.count


def _through_elementwise(g: UOp, u: UOp) -> UOp | None:
    n = u.dtype.count
    if n == 1 or (u.op is C.BITCAST and u.operands.x.dtype.count != n):
        return None
    if any(s.dtype.count not in (1, n) for s in u.src):
        return None
    idx = g.attrs.idx
    d = u.dtype.scalar.vec(len(idx))
    return UOp(u.op, d, tuple(gep(s, idx) if s.dtype.count == n else s for s in u.src), u.arg)


def _narrow_load(g: UOp, u: UOp) -> UOp | None:
    idx = g.attrs.idx
    n, lo, hi = u.dtype.count, min(idx), max(idx)
    if n == 1 or hi - lo + 1 == n or len(idx) == 1:
        return None
    lanes = tuple(range(lo, hi + 1))
    rest = tuple(gep(s, lanes) if s.dtype.count == n else s for s in u.src[1:])
    ld = UOp(K.LOAD, u.dtype.scalar.vec(len(lanes)), (at_offset(u.operands.ptr, lo), *rest))
    if len(lanes) == 1:
        return ld if len(idx) == 1 else UOp(C.VECTORIZE, g.dtype, (ld,) * len(idx))
    return gep(ld, tuple(i - lo for i in idx))


PICK_LANES = PatternMatcher([
    *GEP_FOLDS,
    (UPat(C.GEP, src=(UPat(C.ELEMENTWISE_OPS, name="u"),), name="g"), _through_elementwise, "gep-through-alu"),
    (UPat(C.GEP, src=(UPat(K.LOAD, name="u"),), name="g"), _narrow_load, "gep-of-load-narrows-it"),
])


def pick_lanes(x: UOp, idx: tuple[int, ...]) -> UOp:
    """Lanes idx of vector x (one index: a scalar), computed from the ops that make them."""
    return graph_rewrite(gep(x, idx), PICK_LANES, ctx=_AnyWidth(), bottom_up=True)
