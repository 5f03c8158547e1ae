"""kernel-optimize's choice of the `stash` opt (uopir.passes.kernel.stash does the rewrite; this module builds the
opts, so the stash rewrite need not import the opts that apply it)."""
from __future__ import annotations

from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import Opt
from uopir.passes.kernel.stash import row_ranges, stash_candidates
from uopir.passes.target import Target


def stash_opts(kdef: UOp, base: list[Opt], t: Target) -> list[Opt]:
    """`stash` of the candidate, then (where base cuts the sum's row into a vector body and a tail: a ViT's rows of
    197) a `tail` of the fill loop by the same vector, then `base` (the heuristic's opts for kdef as it is; the axes
    its opts make are renumbered past the ones stash and the fill's tail make: each opt numbers a new range one past
    the kernel's last), then the fill loop's (or its body's) vectors: as many lanes as the widest upcast in base has
    (the independent exp chains the sum's partial accumulators had), at least one vector. base alone where the one
    row range is not the global one."""
    first = 1 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)
    cands = stash_candidates(kdef)[:1]  # (one: a second would be matched on the kernel the first makes)
    if not cands:
        return base
    (r,) = cands
    red = next(u for u in kdef.toposort() if u.op is K.REDUCE and u.operands.ranges == (r,))
    rows = row_ranges(kdef, red)
    glob = [o.axis for o in base if o.kind == "global"]
    if len(rows) != 1 or glob != [next(iter(rows)).attrs.axis]:
        # one row range, the global one: each core fills its scratch once per row it runs, in order (device-linearize
        # nests the fill in the global range only; a kernel too small to split across cores keeps the exp twice)
        return base
    n = const_extent(r) or 1
    tail = next((o.factor for o in base if o.kind == "tail" and o.axis == r.attrs.axis), 0)
    shift = 3 if tail else 1  # the fill (axis first), and its tail's body and rest (first + 1, first + 2)
    moved = [Opt(o.kind, o.axis + shift if o.axis >= first else o.axis, o.factor) for o in base]
    vw = max(1, t.vector_width(red.dtype))
    lanes = max([vw] + [o.factor for o in base if o.kind == "upcast"])
    body = n - n % tail if tail else n
    f = max((d for d in range(1, min(body, lanes) + 1) if body % d == 0), default=1)
    out = [Opt("stash", r.attrs.axis)] + ([Opt("tail", first, tail)] if tail else []) + moved
    if f >= 2:
        out.append(Opt("upcast", first + 1 if tail else first, f))
    return out
