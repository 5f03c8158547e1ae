"""kernel-peel: cut an output loop of a gated kernel into its segments, each with constant gates.

A kernel that reads through validity gates on an output range x (a pad's copy: `0 < x` and `x < 57` around a load
of x - 1; a concat's two sources, on any axis) computes a gate per element and, since the gate varies along x, can
never read a vector of x: kernel-expand makes one gated scalar load per lane. Where the gates are bounds on x alone,
the values of x fall into segments on which each gate is constant; this pass gives each segment its own loop

    kernel.end (store ... x ...), ..., x          (x in [0, n))
    ->  kernel.end (core.group (kernel.end (store ... x0 ...), x0),              x0 in [0, a)
                               (kernel.end (store ... x1 + a ...), x1),          x1 in [0, b - a)
                               (kernel.end (store ... x2 + b ...), x2)), ...     x2 in [0, n - b)

and simplifies the result (uopir.passes.kernel.simplify): inside a segment every such gate has one value, so it
folds away (a load whose gate is always false is its alternative, a zero border): the interior reads and writes
plain runs that kernel-optimize vectorizes. The innermost range that allows it is cut; when that is an outer one (a
concat along channels under a max-pool), the ranges inside it and those of the reductions in its body are copied
into each segment, so every segment is a loop nest of its own. The stores are the same, in the same order, so the
result is exact. A gate that also depends on another range (a conv's padded window: y + ky) is no bound on x alone
and is left alone (the frontend copies a conv's padding out instead); at most PEEL_MAX_SEGMENTS segments are made
(the body is copied once per segment).
"""
from __future__ import annotations

import itertools

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.dialects.core import const_value
from uopir.ir.dtype import dtypes
from uopir.ir.regions import map_regions
from uopir.ir.uop import UOp
from uopir.passes.kernel.anchors import is_kernel_body
from uopir.passes.kernel.indexmath import conjuncts, const_extent
from uopir.passes.kernel.simplify import simplify_kernel
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass

__all__ = ["peel_kernel", "PEEL_MAX_SEGMENTS"]

PEEL_MAX_SEGMENTS = 4  # the most loops one range is cut into (a pad's 3; a concat of up to 4 sources)


def _int(u: UOp) -> int | None:
    return const_value(u) if u.op is core.CONST and u.dtype is dtypes.index else None


def _cuts(gates: list[UOp], x: UOp) -> set[int] | None:
    """The points where a bound on x alone changes value (`c < x`: at c + 1; `x < c`: at c), or None when some gate
    depends on x otherwise (then the segments would not fold it)."""
    cuts: set[int] = set()
    for g in gates:
        for c in conjuncts(g):
            if x not in c.toposort():
                continue
            if c.op is not core.CMPLT:
                return None
            a, b = c.src
            if b is x and (v := _int(a)) is not None:
                cuts.add(v + 1)
            elif a is x and (v := _int(b)) is not None:
                cuts.add(v)
            else:
                return None
    return cuts


def _gates(value: UOp) -> list[UOp]:
    out = []
    for u in value.toposort():
        if u.op is K.LOAD and u.operands.gate is not None:
            out.append(u.operands.gate)
        if u.op is K.INDEX and u.operands.gate is not None:
            out.append(u.operands.gate)
    return out


def _peel_end(e: UOp, next_axis: list[int]) -> UOp | None:
    """The end e with one of its ranges cut into segments (the innermost one whose gates allow it), or None when
    nothing is to gain."""
    rs = e.operands.ranges
    value = e.operands.value
    gates = _gates(value)
    if not rs or not gates:
        return None
    for k in range(len(rs) - 1, -1, -1):
        x = rs[k]
        n = const_extent(x)
        if n is None or n < 2 or x.attrs.kind != "loop":
            continue
        cuts = _cuts(gates, x)
        if not cuts:
            continue
        points = sorted({0, n} | {c for c in cuts if 0 < c < n})
        segs = list(itertools.pairwise(points))
        if len(segs) < 2 or len(segs) > PEEL_MAX_SEGMENTS:
            continue
        parts = []
        for a, b in segs:
            r = UOp(K.RANGE, dtypes.index, (UOp.const(dtypes.index, b - a),), (next_axis[0], *x.arg[1:]))
            next_axis[0] += 1
            at = r if a == 0 else UOp(core.ADD, dtypes.index, (r, UOp.const(dtypes.index, a)))
            # every segment has ranges of its own: those inside x and those its reductions run over
            own = [*rs[k + 1:], *(u for u in value.toposort() if u.op is K.RANGE and u.attrs.kind == "reduce")]
            fresh = {q: UOp(K.RANGE, dtypes.index, q.src, (next_axis[0] + i, *q.arg[1:])) for i, q in enumerate(own)}
            next_axis[0] += len(fresh)
            inner = [fresh[q] for q in rs[k + 1:]]
            parts.append(UOp(K.END, e.dtype, (value.substitute({x: at, **fresh}), r, *inner), e.arg))
        body = UOp(core.GROUP, e.dtype, tuple(parts))
        return body if k == 0 else UOp(K.END, e.dtype, (body, *rs[:k]), e.arg)
    return None


def peel_kernel(kdef: UOp) -> UOp:
    """One kernel body with the borders of its gated copies peeled (the module docstring says which)."""
    order = kdef.toposort()
    ranges = [u for u in order if u.op is K.RANGE]
    if not ranges:
        return kdef
    next_axis = [1 + max(r.attrs.axis for r in ranges)]
    new: dict[UOp, UOp] = {}
    for u in order:
        if u.op is K.END and not any(s.op is K.END for s in u.operands.value.toposort() if s is not u):
            p = _peel_end(u, next_axis)
            if p is not None:
                new[u] = p
    if not new:
        return kdef
    return simplify_kernel(kdef.substitute(new))


@register_pass("kernel-peel", summary="cut a gated output loop into segments whose gates fold (pads, concats)",
               consumes=("kernel",), produces=("kernel", "core"))
def kernel_peel(root: UOp, options: None, ctx: PassContext) -> UOp:
    return peel_kernel(root) if is_kernel_body(root) else map_regions(root, is_kernel_body, peel_kernel)
