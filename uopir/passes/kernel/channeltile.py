"""kernel-optimize's channel tile (the heuristic's step 1): a conv whose output rows are too short for a vector,
or no whole number of them, takes its vector along the output channels its packed weights are contiguous in, with
broadcast input pixels beside it (kernel/pointwise.py and kernel/convtile.py add blocks beside this tile)."""
from __future__ import annotations

from collections.abc import Callable

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.unroll import FULL_UNROLL_MAX

__all__ = ["channel_tile", "CHANNEL_TILE_ROWS"]

CHANNEL_TILE_ROWS = 16  # the most lanes of broadcast inputs beside a channel vector (accumulator vectors)


def channel_tile(k: KernelFacts, vw: int, budget: int, cap: int, fit: Callable[[UOp, int], int]
                 ) -> tuple[dict[UOp, int], dict[UOp, int], int] | None:
    """1. (channel vectors) The register tile of a kernel whose contiguous output rows are too short for a vector (a
    conv's 7, 14 or 28 columns; a strided conv's reads, which are no vector at all) or no whole number of vectors (56
    columns: 3.5 x 16, a half vector per row computed twice or packed by shuffles) but which reads some input under
    the reduction with stride 1 along another output range (a conv's weights packed in blocks of output channels,
    nn_ops.CHANNEL_BLOCK): that range is the vector, one vector of the target's width or half of one (each vector
    load of it serves a whole row), and the output range the vector load does not vary along, the row when there is
    one, is upcast beside it by the largest divisor of its extent that fits the budget (at most CHANNEL_TILE_ROWS):
    each of its lanes is one broadcast input times the weight vector. Of a conv whose padded input is read in
    place (kernel-peel's segments inside the channel range), each segment's row is upcast so, the interior's
    deciding, and each segment's reduction has its innermost range (a window row's taps) unrolled in full within
    `cap` lanes: a tile of the first segment alone (a border row) would leave the interior one accumulator per tap,
    and one lane count summed over the segments (which run one after the other) would unroll only the first.
    `fit(r, cap)` is the heuristic's upcast of a row r within cap lanes.
    (upcast, unroll, the lanes of one segment's tile), or None when the kernel is not like that."""
    if vw < 2:
        return None
    red = k.red_ranges()
    rows = sorted((r for r in reversed(k.out) if k.contiguous(r)), key=lambda r: -k.stored(r))
    row = rows[0] if rows else None
    if row is not None and fit(row, budget) % vw == 0:
        return None  # whole vectors along the row (a row tile that a half vector ends is 1/8 waste or shuffles)
    loaded = [x for x in k.loads if k.deps[x] & red]
    chan = next((r for r in reversed(k.out) if (const_extent(r) or 1) % max(2, vw // 2) == 0 and r is not row
                 and any(k.coeff(x, r) == 1 for x in loaded)), None)
    if chan is None:
        return None
    width = pow2_divisor(const_extent(chan) or 1, vw)  # a whole vector, or half of one (blocks of 8 channels)
    vec_loads = [x for x in loaded if chan in k.deps[x]]
    beside = [r for r in reversed(k.out) if r is not chan and not any(r in k.deps[x] for x in vec_loads)
              and (const_extent(r) or 0) >= 2]
    tile = {chan: width}
    tiled = [r for r in rows if r in beside] or beside[:1]
    for r in tiled:
        n = const_extent(r) or 1
        f = next((d for d in range(min(n, CHANNEL_TILE_ROWS, budget // width), 1, -1) if n % d == 0), 1)
        if f >= 2:
            tile[r] = f
    unroll: dict[UOp, int] = {}
    lanes = width * max((tile.get(r, 1) for r in tiled), default=1)
    if len(tiled) > 1:  # peeled segments
        for red_op in k.reduces:
            r = red_op.operands.ranges[-1] if red_op.operands.ranges else None
            n = const_extent(r) if r is not None else None
            if r is not None and r.attrs.kind == "reduce" and n is not None and 2 <= n <= FULL_UNROLL_MAX \
                    and lanes * n <= cap:
                unroll[r] = n
    return tile, unroll, lanes
