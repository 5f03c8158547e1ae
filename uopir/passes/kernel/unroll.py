"""kernel-optimize's unroll of reductions (the heuristic's step 3 where no partial accumulators apply): the innermost
range of each reduction unrolled, so a short loop's taps become straight-line code and a long one runs fewer
loop-carried steps per element."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.target import Target

__all__ = ["reduction_unrolls", "FULL_UNROLL_MAX"]

FULL_UNROLL_MAX = 16  # a reduction loop this short is unrolled completely


def reduction_unrolls(k: KernelFacts, t: Target, lanes: int, cap: int, done: set[UOp]) -> dict[UOp, int]:
    """{range: factor} unrolling the innermost range of each reduction (the last operand of every kernel.reduce that
    has it; not one in `done`, an output range, or another reduction's outer range): fully when its extent is at most
    FULL_UNROLL_MAX, else by the first of the target's `unroll_sizes` that divides it (else the largest divisor below
    the largest of them: 9 taps by 3), as long as the lanes of a value (`lanes`, times the unrolls so far) stay
    within `cap`."""
    done, outs = set(done), set(k.out)
    unroll: dict[UOp, int] = {}
    for red in k.reduces:
        rs = red.operands.ranges
        r = rs[-1] if rs else None
        if r is None or r in done or r in outs or r.attrs.kind != "reduce":
            continue
        n = const_extent(r)
        if n is None or n < 2 or any(r in u.operands.ranges[:-1] for u in k.reduces):
            continue
        done.add(r)
        if n <= FULL_UNROLL_MAX and lanes * n <= cap:
            f = n
        else:
            f = next((u for u in t.unroll_sizes if 2 <= u < n and n % u == 0 and lanes * u <= cap), 1)
            if f == 1:  # none of the preferred sizes divides it (a 3x3 window's 9 taps): the largest divisor below them
                f = next((u for u in range(max(t.unroll_sizes, default=1), 1, -1) if n % u == 0 and lanes * u <= cap),
                         1)
        if f >= 2:
            unroll[r] = f
            lanes *= f
    return unroll
