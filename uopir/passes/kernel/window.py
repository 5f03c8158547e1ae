"""kernel-optimize's register tile of a depthwise convolution (or another short window that no output range
shares): the output row is the vector, every tap unrolled, output rows beside it (heuristic.py step 1 asks
`window_tile` first)."""
from __future__ import annotations

import math

from uopir.ir.uop import UOp
from uopir.passes.kernel.expand import LOAD_STRIDE
from uopir.passes.kernel.facts import KernelFacts, fullest_divisor, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent

__all__ = ["window_tile", "WINDOW_MAX_TAPS", "WINDOW_ROW_VECTORS"]

WINDOW_MAX_TAPS = 49  # a depthwise window (7x7 at most) unrolled whole beside its row vector
WINDOW_ROW_VECTORS = 4  # ... and output rows beside it, up to this many vectors (devectorize's ROW_SPLIT_MAX_VECTORS)


def window_tile(k: KernelFacts, vw: int, budget: int, cap: int,
                max_ops: int) -> tuple[dict[UOp, int], dict[UOp, int]] | None:
    """(upcast, unroll) of a kernel whose one reduction is a short window (at most WINDOW_MAX_TAPS taps of constant
    extent) that no output range shares: every load under it varies along the outermost output range (a depthwise
    conv's channel: nothing to reuse across channels; its input and weights, a pool's one load keeps its own
    schedule), and the input read along the contiguous output row moves with the window's innermost range by 1
    (stride 1 or LOAD_STRIDE along the row). The row is the vector, whole when it spans at most `cap` lanes (a row of
    14: one masked vector), and every tap is unrolled, so each tap is one vector load of the input row times the
    channel's weight, a broadcast that does not vary along the rows (hoisted out of their loop).
    An unpeeled kernel whose whole row is at most half a vector (a 7x7 plane's 7 columns, any stride) gets output rows
    beside it, the most that divide them within WINDOW_ROW_VECTORS vectors (device-devectorize splits such a value
    at row boundaries) and whose body kernel-expand makes within `max_ops` ops (the code-size budget, which would
    otherwise cut the taps' unroll): independent accumulator chains instead of one chain through every tap per row,
    and each input row can be loaded once for all the output rows it serves (a 5x5 window: 7 rows, 55 distinct row
    loads of 175). Longer rows keep one (rows of 14 beside a second one measured no faster: 672 x 14x14 5x5 0.96-0.98
    of the time within a ~4% order bias; a strided row of 14 or 28 slower: 96 x 28x28 5x5/2 26 -> 31 us).
    Of a peeled kernel (a padded window read in place: a reduction per segment), the interior's reduction, the one
    over the most outputs; the border segments keep the plain unroll. None when the kernel is not like that."""
    if vw < 2 or not k.reduces or not k.out:
        return None
    outs = {red: [r for r in k.out if r in k.deps[red]] for red in k.reduces}
    red = max(k.reduces, key=lambda u: math.prod(const_extent(r) or 1 for r in outs[u]))
    if len(outs[red]) < 2 or any(set(u.operands.ranges) & set(red.operands.ranges) for u in k.reduces if u is not red):
        return None
    taps = [r for r in red.operands.ranges]
    n_taps = 1
    for r in taps:
        n_taps *= const_extent(r) or WINDOW_MAX_TAPS + 1
    chan, row = outs[red][0], outs[red][-1]
    loaded = [x for x in k.loads if k.deps[x] & set(taps)]
    n = const_extent(row) or 0
    if not taps or n_taps > WINDOW_MAX_TAPS or chan is row or n < 2 or len(loaded) < 2 or \
            any(chan not in k.deps[x] for x in loaded) or not k.contiguous(row, (1, LOAD_STRIDE)):
        return None
    if not any(k.coeff(x, row) in (1, LOAD_STRIDE) and k.coeff(x, taps[-1]) == 1 for x in loaded):
        return None
    f = n if n <= cap else pow2_divisor(n, vw)
    if f < vw // 2 and n > cap:  # a long row no half vector divides (a peeled interior of 110): its fullest divisor
        f = fullest_divisor(n, vw, cap, f)
    if f < 2 or f * n_taps > budget * WINDOW_MAX_TAPS:
        return None
    unroll = {r: const_extent(r) or 1 for r in taps if (const_extent(r) or 1) > 1}
    rows = outs[red][-2]
    m = const_extent(rows) or 0
    if len(k.reduces) == 1 and rows is not chan and f == n <= vw // 2 and m >= 2:
        fits = [d for d in range(2, min(m, WINDOW_ROW_VECTORS * vw // f) + 1)
                if m % d == 0 and k.expanded_ops({rows: d, row: f, **unroll}) <= max_ops]
        if fits:
            return {rows: fits[-1], row: f}, unroll
    return {row: f}, unroll
