"""kernel-optimize's register tile of a reduction (the heuristic's step 1 for a matmul-like kernel): the output
ranges along which an input read under the reduction is reused are upcast, so each loaded value feeds several
accumulators held in registers."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import ragged_ok
from uopir.passes.kernel.rowtile import ROW_TILE_VECTORS
from uopir.passes.target import Target

__all__ = ["fit_upcast", "register_tile", "RAGGED_BELOW", "RAGGED_MIN_STEPS"]

RAGGED_BELOW = 4  # a register tile's row range whose largest power-of-two divisor is below this (197 tokens: 1) ...
RAGGED_MIN_STEPS = 4  # ... is upcast by the tile's rows anyway, its last lanes clamped, when it runs this many tiles
# (of as many rows as the budget holds, or the largest power of two of them that still runs that many: 50 by 8)


def fit_upcast(k: KernelFacts, t: Target, vw: int, wide: bool, r: UOp, cap: int, ragged: bool = False) -> int:
    """The upcast of output range r within `cap` lanes: along a contiguous r, whole vectors (two on a `wide` target),
    or all of a short row no full vector divides (56 = 3.5 x 16); otherwise the largest power of two on a wide target
    (with `ragged`, a row range no such power divides upcast by the tile's rows anyway, its last lanes clamped: 197
    tokens), else the first fitting `upcast_sizes`."""
    n = const_extent(r) or 1
    if vw >= 2 and k.contiguous(r, reduced_only=ragged):
        f = pow2_divisor(n, min(vw * (2 if wide else 1), cap))
        if f < vw and n <= min(ROW_TILE_VECTORS * vw, cap) and n % max(2, vw // 2) == 0:
            return n  # a short row no full vector divides (56 = 3.5 x 16): all of it, the tail a half vector
        if f >= 2:
            return f
    if wide:
        f = pow2_divisor(n, cap)
        g = 1 << (cap.bit_length() - 1)  # the rows a tile holds; ragged when no such power of two divides n
        while g > RAGGED_BELOW and n < RAGGED_MIN_STEPS * g:
            g //= 2  # fewer rows a block for fewer rows (50 tokens: 7 blocks of 8, not 2-row tiles)
        if ragged and f < RAGGED_BELOW <= g and n >= RAGGED_MIN_STEPS * g and ragged_ok(k.kdef, r):
            return g
        return f
    return next((f for f in t.upcast_sizes if 2 <= f <= cap and n % f == 0), 1)


def register_tile(k: KernelFacts, t: Target, vw: int, budget: int, wide: bool, skip: frozenset[int] = frozenset()
                  ) -> tuple[dict[UOp, int], dict[UOp, int], int]:
    """(upcast, vector ranges, lanes) of a kernel with a reduction: in each loop nest (a peeled kernel's segments
    run one after the other, their registers not live together) at most two output ranges along which some input
    read under the reduction is reused, the most reused first, then the contiguous one, then the one along which the
    vector loads do not vary (a conv's output channels reuse its input row, where its output rows would reuse only
    the broadcast weight), each by `fit_upcast` within what the budget leaves; lanes: the most of any nest. A lone
    vector range that every reduction varies along (a matrix-vector product with the weight [K, N]) gets up to
    ROW_TILE_VECTORS vectors in half vectors, independent chains through a longer run of each weight row; its lanes
    count in vectors (the vector ranges: {range: vector width}) for the code-size budget. `skip`: a column tail's
    axes (kernel/coltail.py), never candidates, each upcast whole: one short vector beside the rows."""
    upcast: dict[UOp, int] = {}
    vector_range: dict[UOp, int] = {}
    segments = k.segments()
    seg_lanes = 1
    cands: list[UOp] = []
    for seg in segments:
        lanes = 1
        cands = [r for r in seg if (const_extent(r) or 0) >= 2 and k.reuse(r) > 0 and r.attrs.axis not in skip]
        vec = next((r for r in cands if vw >= 2 and k.contiguous(r, reduced_only=True)), None)
        cands.sort(key=lambda r: (-k.reuse(r), not k.contiguous(r, reduced_only=True), -k.vector_reuse(r, vec),
                                  -k.out.index(r)))
        cands = cands[:2]
        smallest = min((f for f in t.upcast_sizes if f >= 2), default=2)
        for i, r in enumerate(cands):
            reserve = smallest ** (len(cands) - 1 - i)
            f = fit_upcast(k, t, vw, wide, r, budget // lanes // reserve, ragged=True)
            if f >= 2:
                upcast[r] = f
                lanes *= f
        for r in seg:  # a column tail: one short vector beside the rows (its lanes not live with the body's)
            if r.attrs.axis in skip and (const_extent(r) or 0) >= 2:
                upcast[r] = const_extent(r) or 1
        seg_lanes = max(seg_lanes, lanes)
    lanes = seg_lanes
    if len(segments) == 1 and len(upcast) == 1 and len(cands) == 1 and k.reduces \
            and all(cands[0] in k.deps[red] for red in k.reduces) and vw >= 2 and k.contiguous(cands[0]):
        # one vector range alone (a matrix-vector product with the weight laid out [K, N]): as many vectors
        # along it as ROW_TILE_VECTORS (in half vectors: 1000 = 25 x 40), so that each step reads a longer run
        # of a weight row into that many independent accumulator chains
        r = cands[0]
        n = const_extent(r) or 1
        f = max((d for d in range(upcast[r], min(n, ROW_TILE_VECTORS * vw, budget) + 1)
                 if n % d == 0 and d % max(2, vw // 2) == 0), default=upcast[r])
        lanes = lanes // upcast[r] * f
        upcast[r] = f
        vector_range[r] = vw
    return upcast, vector_range, lanes
