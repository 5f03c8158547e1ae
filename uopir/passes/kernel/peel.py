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
(the body is copied once per segment). A segment's copy keeps only the branches its gates take (`_prune`: a
`core.where` whose condition, a gated load whose gate, is constant on the segment), so a concat of many sources
(a `cat` of 33 pieces: each element picked through a chain of 33 gated loads and wheres) is cut into up to
PEEL_MAX_PIECES segments, each copying its own source alone, while their bodies together stay within
PEEL_MAX_SEGMENTS copies of the whole and one fewer than the segments (the cut must shrink them): one loop per
piece instead of one loop that evaluates every piece's gates per element (and that LLVM's vectorizers turned into
100 KB of gathers in 5 s).

A reduction gated the same way along one of its own ranges (a conv or a pool over a channel concat fused into it:
SqueezeNet's classifier reads the last Fire module's two expand outputs, `ci < 256` picks the source) is cut
likewise into one reduction per segment, combined by the reduction's op:

    kernel.reduce %v, ..., ci, ... {add}  ->  core.add (kernel.reduce %v[ci := c0], ..., c0, ...),
                                                       (kernel.reduce %v[ci := c1 + 256], ..., c1, ...)

so each reads one source without a gate (kernel-optimize then tiles each as it would a conv of its own). Max and min
are exact in any order; a float add or mul changes its order, so it is cut only where the target allows that
(`reassociate_float_reductions`; the `target` option).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.dialects.core import const_value
from uopir.ir.dtype import dtypes
from uopir.ir.regions import map_regions
from uopir.ir.uop import UOp
from uopir.ir.valuerange import vmax, vmin
from uopir.passes.kernel.anchors import is_kernel_body
from uopir.passes.kernel.indexmath import conjuncts, const_extent, linear_coeffs, range_deps
from uopir.passes.kernel.simplify import simplify_kernel
from uopir.passes.kernel.tail import TAIL_OPS
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import check_target_option, target

__all__ = ["peel_kernel", "PEEL_MAX_SEGMENTS", "PEEL_MAX_PARTS", "PEEL_MAX_PIECES"]

# the most loops one range is cut into (a zero pad's 3; an edge or reflect pad's 5: its pieces' gates cut at the
# border and one in from it; a concat of up to 5 sources)
PEEL_MAX_SEGMENTS = 5
PEEL_MAX_PARTS = 9  # the most copies of one body (a pool's or a padded window's 3 rows x 3 columns)
# ... and the most segments of a range whose segments keep a part of the body each (a concat of many sources: each
# segment its own source), as long as their bodies together are no more than PEEL_MAX_SEGMENTS copies of it (and
# fewer than one per segment)
PEEL_MAX_PIECES = 64


def _int(u: UOp) -> int | None:
    return const_value(u) if u.op is core.CONST and u.dtype is dtypes.index else None


def _cuts(gates: list[UOp], x: UOp, partial: bool = False) -> set[int] | None:
    """The points where a bound on x changes between "false for the whole window", "depends on the window" and "true
    for the whole window", or None when some gate depends on x otherwise (then the segments would not fold it; with
    `partial`, such a condition is passed over: it stays a gate inside the segments).

    A bound is `a < b` with b - a = s*x + rest, s a constant and rest a function of reduction ranges only (a pool's or
    a conv's window offset, or nothing: `c < x` cuts at c + 1, `x < c` at c): rest lies in [m, M], so the bound holds
    for every window position where s*x + m >= 1 and for none where s*x + M <= 0."""
    cuts: set[int] = set()
    for g in gates:
        for c in conjuncts(g):
            order = c.toposort()
            if x not in order:
                continue
            if c.op is not core.CMPLT:
                if partial:
                    continue
                return None
            a, b = c.src
            if b is x and (v := _int(a)) is not None:
                cuts.add(v + 1)
                continue
            if a is x and (v := _int(b)) is not None:
                cuts.add(v)
                continue
            if any(u.op is K.RANGE and u is not x and u.attrs.kind != "reduce" for u in order):
                if partial:
                    continue
                return None  # a bound that moves with another output range (a diagonal): no segment holds it
            diff = UOp(core.SUB, dtypes.index, (b, a))
            coef = linear_coeffs(diff, frozenset([x]), range_deps(diff.toposort(), lambda r: r is x))
            if coef is None or x not in coef:
                if partial:
                    continue
                return None
            rest = diff.substitute({x: UOp.const(dtypes.index, 0)})
            m, big = vmin(rest), vmax(rest)
            if type(m) is not int or type(big) is not int:
                if partial:
                    continue
                return None
            sx = coef[x]
            if sx > 0:  # true from ceil((1 - m) / s), false up to floor(-M / s)
                cuts |= {-((m - 1) // sx), -big // sx + 1}
            else:  # true up to floor((m - 1) / -s), false from ceil(M / -s)
                cuts |= {(m - 1) // -sx + 1, -(-big // -sx)}
    return cuts


def _gates(value: UOp) -> list[UOp]:
    out = []
    for u in value.toposort():
        if u.op is K.LOAD and u.operands.gate is not None:
            out.append(u.operands.gate)
        if u.op is K.INDEX and u.operands.gate is not None:
            out.append(u.operands.gate)
    return out


def _bound_inside(value: UOp) -> list[UOp]:
    """The ranges an end or a reduction inside value closes (its own loops, copied with each segment)."""
    out: dict[UOp, None] = {}
    for u in value.toposort():
        if u.op is K.END or u.op is K.REDUCE:
            out.update(dict.fromkeys(u.operands.ranges))
    return list(out)


def _segments(gates: list[UOp], x: UOp, kind: str, most: int,
              partial: bool = False) -> list[tuple[int, int]] | None:
    """The [a, b) pieces the gates' bounds cut range x (of `kind`, constant extent) into: at least 2, at most
    `most`; None when x cannot be cut so (`partial`: by the bounds among the gates' conditions, see _cuts)."""
    n = const_extent(x)
    if n is None or n < 2 or x.attrs.kind != kind:
        return None
    cuts = _cuts(gates, x, partial)
    if not cuts:
        return None
    segs = list(itertools.pairwise(sorted({0, n} | {c for c in cuts if 0 < c < n})))
    return segs if 2 <= len(segs) <= most else None


def _segment_range(x: UOp, a: int, b: int, next_axis: list[int]) -> tuple[UOp, UOp]:
    """A fresh range over x's segment [a, b) (the next free axis, x's kind) and the index it stands for in x."""
    r = UOp(K.RANGE, dtypes.index, (UOp.const(dtypes.index, b - a),), (next_axis[0], *x.arg[1:]))
    next_axis[0] += 1
    return r, (r if a == 0 else UOp(core.ADD, dtypes.index, (r, UOp.const(dtypes.index, a))))


def _prune(value: UOp, x: UOp, at: UOp, deps: dict[UOp, frozenset[UOp]]) -> UOp:
    """value where x stands for `at` (a segment of it) with each `core.where` whose condition, and each gated load
    whose gate, is constant there replaced by the branch it takes (the load by its alternative). Walked from the root,
    so the branches not taken are never visited; `deps`: the nodes of value that vary along x."""
    truths: dict[UOp, bool | None] = {}

    def truth(g: UOp) -> bool | None:
        if g not in truths:
            lo = hi = None
            if deps.get(g):
                h = g.substitute({x: at})
                lo, hi = vmin(h), vmax(h)
            truths[g] = bool(lo) if lo is not None and lo == hi else None
        return truths[g]

    def taken(u: UOp) -> UOp | None:
        if u.op is core.WHERE and (c := truth(u.src[0])) is not None:
            return u.src[1] if c else u.src[2]
        if u.op is K.LOAD and len(u.src) == 3 and truth(u.src[2]) is False:
            return u.src[1]
        return None

    memo: dict[UOp, UOp] = {}
    stack: list[UOp] = [value]
    while stack:
        u = stack[-1]
        if u in memo:
            stack.pop()
        elif not deps.get(u):
            memo[u] = u
            stack.pop()
        elif (t := taken(u)) is not None:
            if t in memo:
                memo[u] = memo[t]
                stack.pop()
            else:
                stack.append(t)
        elif (todo := [s for s in u.src if s not in memo]):
            stack.extend(todo)
        else:
            src = tuple(memo[s] for s in u.src)
            memo[u] = u if all(a is b for a, b in zip(src, u.src, strict=True)) else u.replace(src=src)
            stack.pop()
    return memo[value]


def _simplify_part(part: UOp, next_axis: list[int]) -> UOp:
    """One segment's end simplified on its own, each range its simplify made (a split's, numbered from the part's
    own axes) moved to a fresh axis of the kernel, so that no two segments share one."""
    before = {u for u in part.toposort() if u.op is K.RANGE}
    out = simplify_kernel(part)
    made = sorted((u for u in out.toposort() if u.op is K.RANGE and u not in before), key=lambda r: r.attrs.axis)
    fresh = {}
    for r in made:
        fresh[r] = UOp(K.RANGE, dtypes.index, r.src, (next_axis[0], *r.arg[1:]))
        next_axis[0] += 1
    return out.substitute(fresh) if fresh else out


def _peel_end(e: UOp, next_axis: list[int], room: int = PEEL_MAX_PARTS, cut: list[bool] | None = None) -> UOp | None:
    """The end e with its ranges cut into segments (the innermost one whose gates allow it first, then the ranges
    around it, while the copies of the body stay within `room`), or None when nothing is to gain. `cut` collects,
    per range cut, whether its segments were pieces simplified on their own."""
    rs = e.operands.ranges
    value = e.operands.value
    gates = _gates(value)
    if not rs or not gates:
        return None
    most = min(PEEL_MAX_SEGMENTS, room)
    for k in range(len(rs) - 1, -1, -1):
        x = rs[k]
        segs = _segments(gates, x, "loop", most) if most >= 2 else None
        pieces = segs is None and most >= 2  # cut by the bounds among the gates, kept only where the copies shrink
        if pieces:
            segs = _segments(gates, x, "loop", PEEL_MAX_PIECES, partial=True)
        if segs is None:
            continue
        own = list(dict.fromkeys([*rs[k + 1:], *_bound_inside(value)]))
        first_axis = next_axis[0]
        deps = range_deps(value.toposort(), lambda r, x=x: r is x) if pieces else {}
        parts, copied = [], 0
        for a, b in segs:
            r, at = _segment_range(x, a, b, next_axis)
            # every segment has loops of its own: the ranges inside x, and those its reductions and ends close
            fresh = {q: UOp(K.RANGE, dtypes.index, q.src, (next_axis[0] + i, *q.arg[1:])) for i, q in enumerate(own)}
            next_axis[0] += len(fresh)
            inner = [fresh[q] for q in rs[k + 1:]]
            body = value
            if pieces:  # each segment keeps the branches its gates take
                body = _prune(value, x, at, deps)
                copied += len(body.toposort())
            part = UOp(K.END, e.dtype, (body.substitute({x: at, **fresh}), r, *inner), e.arg)
            # (a piece simplified alone: the kernel's simplify tries each split of a range on the whole kernel)
            parts.append(_simplify_part(part, next_axis) if pieces else part)
        if pieces and copied > min(most, len(segs) - 1) * len(value.toposort()):
            next_axis[0] = first_axis  # the segments would not fold to parts of the body: not this range
            continue
        if cut is not None:
            cut.append(pieces)
        body = UOp(core.GROUP, e.dtype, tuple(parts))
        if k == 0:
            return body
        out = UOp(K.END, e.dtype, (body, *rs[:k]), e.arg)
        return _peel_end(out, next_axis, room // len(segs), cut) or out
    return None


def _peel_reduce(red: UOp, next_axis: list[int], reassociate: bool) -> UOp | None:
    """The reduction red cut along its innermost range whose gates allow it into one reduction per segment, combined
    by red's op; None when no range can be cut (or the cut would reorder a float add/mul the target keeps in order)."""
    op = TAIL_OPS.get(red.attrs.op)
    if op is None or (red.attrs.op in ("add", "mul") and red.dtype.scalar.is_float and not reassociate):
        return None
    value, rs = red.operands.value, red.operands.ranges
    gates = _gates(value)
    if not gates:
        return None
    for x in reversed(rs):
        segs = _segments(gates, x, "reduce", PEEL_MAX_SEGMENTS)
        if segs is None:
            continue
        parts = []
        for a, b in segs:
            r, at = _segment_range(x, a, b, next_axis)
            parts.append(UOp(K.REDUCE, red.dtype, (value.substitute({x: at}), *(r if q is x else q for q in rs)),
                             red.arg))
        out = parts[0]
        for p in parts[1:]:
            out = UOp(op, red.dtype, (out, p))
        return out
    return None


def peel_kernel(kdef: UOp, reassociate: bool = False) -> UOp:
    """One kernel body with the borders of its gated copies peeled, and its gated reductions cut (the module
    docstring says which); `reassociate`: a float add or mul reduction may be cut (its order changes)."""
    order = kdef.toposort()
    ranges = [u for u in order if u.op is K.RANGE]
    if not ranges:
        return kdef
    next_axis = [1 + max(r.attrs.axis for r in ranges)]
    reds: dict[UOp, UOp] = {}
    for u in order:
        if u.op is K.REDUCE and not any(s.op is K.REDUCE for s in u.operands.value.toposort() if s is not u):
            p = _peel_reduce(u, next_axis, reassociate)
            if p is not None:
                reds[u] = p
    if reds:
        kdef = simplify_kernel(kdef.substitute(reds))
        order = kdef.toposort()
    new: dict[UOp, UOp] = {}
    cut: list[bool] = []
    for u in order:
        if u.op is K.END and not any(s.op is K.END for s in u.operands.value.toposort() if s is not u):
            p = _peel_end(u, next_axis, cut=cut)
            if p is not None:
                new[u] = p
    if not new:
        return kdef
    # pieces were simplified one by one, their ranges merged there: merging again tries every pair on the whole
    # kernel (a rewrite of all of it per pair: seconds for a concat of 33)
    return simplify_kernel(kdef.substitute(new), merge_ranges=not all(cut))


@dataclass
class KernelPeelOptions:
    """The options of kernel-peel."""
    target: str = field(default="cpu", metadata={
        "help": "the target whose description says whether a float sum may be cut (reassociate_float_reductions)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)


@register_pass("kernel-peel", summary="cut a gated output loop or reduction into segments whose gates fold (pads, "
               "concats)", consumes=("kernel",), produces=("kernel", "core"), options=KernelPeelOptions)
def kernel_peel(root: UOp, options: KernelPeelOptions, ctx: PassContext) -> UOp:
    reassociate = target(options.target).reassociate_float_reductions

    def peel(k: UOp) -> UOp:
        return peel_kernel(k, reassociate)
    return peel(root) if is_kernel_body(root) else map_regions(root, is_kernel_body, peel)
