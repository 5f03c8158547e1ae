"""kernel-optimize's dot-product tile (the heuristic's step 1 on a cpu): a reduction read contiguously along its
innermost range while no output range is contiguous (a matrix-vector product with the weight [N, K], a 1x1-spatial
squeeze-excite conv, a global pool) takes its vectors along the reduction, with output rows beside it that share
each loaded vector of x."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.accumulate import ACC_MIN_STEPS, ACC_VECTORS
from uopir.passes.kernel.expand import LOAD_STRIDE
from uopir.passes.kernel.facts import KernelFacts, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.target import Target

__all__ = ["dot_tile", "DOT_VECTORS", "DOT_ROWS", "DOT_MIN_LANES", "DOT_MIN_STEPS"]

DOT_VECTORS = 2  # vectors of partial sums along a dot product's reduction (times DOT_ROWS rows: accumulators)
DOT_ROWS = 4  # output rows of a dot-product tile (each reuses the vector of x loaded for the others)
DOT_MIN_LANES = 4  # a dot product's reduction this few lanes wide is no vector worth its fold
DOT_MIN_STEPS = 2  # ... and steps of a short one beside rows (an SE conv's 48 -> 1152: 3 steps of 16 lanes)


def dot_tile(k: KernelFacts, t: Target, vw: int, budget: int) -> dict[UOp, int] | None:
    """1. (dot products) The register tile of a kernel whose one reduction reads every load along its innermost
    range r with stride 1 while no output range is contiguous in its loads (nor a span kernel-expand reads: a
    strided pool's row): a matrix-vector product with the weight laid out [N, K], a squeeze-excite 1x1 conv on a 1x1
    input, a global pool. A vector of outputs would gather each lane from another row, so r is the vector instead:
    f partial sums (`upcast` of r, folded once per output after the loop), at least ACC_MIN_STEPS iterations of them.
    Beside it the innermost output range is upcast (its rows): by up to DOT_ROWS when some load under the reduction
    does not vary along it (each step loads one vector of x that every row's vector of weights reuses; f is
    DOT_VECTORS vectors then), else by as many rows as fill one vector when r is shorter than one (a 14x14 pool's
    196 = 4 x 49: 4 rows of 4, so its fused swish runs on full vectors; a 7x7 pool's 49, no vector at all: 16 rows,
    each lane's load its own, each sum in its order). Without rows that share x, partial sums only for a reduction
    of at least ACC_MIN_STEPS vectors, as `accumulators`; beside them at least DOT_MIN_STEPS steps (an SE conv's
    48 -> 1152: 3 of 16 lanes). None when the kernel is not like that, or its reduction's vector with reuse would be
    under DOT_MIN_LANES (a long row with no reuse is `accumulators`' case and gets the same partial sums there)."""
    if t.kind != "cpu" or vw < 2 or len(k.reduces) != 1 or any(k.contiguous(r, (1, LOAD_STRIDE)) for r in k.out):
        return None
    red = k.reduces[0]
    rs = red.operands.ranges
    r = rs[-1] if rs else None
    n = const_extent(r) if r is not None else None
    if r is None or n is None or r.attrs.kind != "reduce":
        return None
    if red.dtype.scalar.is_float and red.attrs.op in ("add", "mul") and not t.reassociate_float_reductions:
        return None
    reads = [x for x in k.loads if r in k.deps[x] and x in red.operands.value.toposort()]
    if not reads or any(k.coeff(x, r) != 1 for x in reads):
        return None
    rw = t.vector_width(red.dtype)
    long = n >= ACC_MIN_STEPS * rw  # partial sums change a float sum's order: only where they pay (accumulators')
    outs = [o for o in reversed(k.out) if (const_extent(o) or 0) >= 2]
    rows = next((o for o in outs if k.reuse(o) > 0), None)
    if rows is not None:
        m = const_extent(rows) or 1
        g = next((d for d in range(min(m, DOT_ROWS), 1, -1) if m % d == 0), 1)
        f = pow2_divisor(n, min(rw * (DOT_VECTORS if g >= 2 else ACC_VECTORS), budget // g,
                                 n // (ACC_MIN_STEPS if long else DOT_MIN_STEPS)))
        if f < DOT_MIN_LANES:
            return None
        return {r: f, rows: g} if g >= 2 else {r: f}
    f = pow2_divisor(n, min(rw * ACC_VECTORS, budget, n // ACC_MIN_STEPS)) if long else 1
    if f >= rw or not outs:
        return None
    g = pow2_divisor(const_extent(outs[0]) or 1, rw // f)
    if g < 2:  # no rows to fill the vector with: a short row alone keeps its order (an unroll)
        return None
    # a vector too short to fold keeps the reduction's order: rows alone (a 7x7 pool's 49: 16 rows, loads gathered)
    return {outs[0]: g} if f < DOT_MIN_LANES else {r: f, outs[0]: g}
