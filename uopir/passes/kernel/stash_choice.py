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
    """`stash` of each candidate, then `base` (the heuristic's opts for kdef as it is, naming only its own axes, which
    stash keeps), then the fill loops' vectors: as many lanes as the widest upcast in base has (the independent exp
    chains the sum's partial accumulators had), at least one vector. base alone when it names an axis stash would
    take."""
    first = 1 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)
    cands = stash_candidates(kdef)[:1]  # (one: a second would be matched on the kernel the first makes)
    if any(o.axis >= first for o in base) or not cands:
        return base
    reds = {u.operands.ranges[0]: u for u in kdef.toposort() if u.op is K.REDUCE and len(u.operands.ranges) == 1}
    rows = {q for r in cands for q in row_ranges(kdef, reds[r])}
    glob = [o.axis for o in base if o.kind == "global"]
    if len(rows) != 1 or glob != [next(iter(rows)).attrs.axis]:
        # one row range, the global one: each core fills its scratch once per row it runs, in order (device-linearize
        # nests the fill in the global range only; a kernel too small to split across cores keeps the exp twice)
        return base
    vw = max(1, t.vector_width(next(u.dtype for u in kdef.toposort() if u.op is K.REDUCE
                                    and u.operands.ranges == (cands[0],))))
    lanes = max([vw] + [o.factor for o in base if o.kind == "upcast"])
    out = [Opt("stash", r.attrs.axis) for r in cands] + base
    for i, r in enumerate(cands):
        n = const_extent(r) or 1
        f = max((d for d in range(1, min(n, lanes) + 1) if n % d == 0), default=1)
        if f >= 2:
            out.append(Opt("upcast", first + i, f))
    return out
