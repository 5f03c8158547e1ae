"""kernel-optimize's code-size budget: the lane factors the heuristic chose shrink until kernel-expand's copies of
the body stay within it, so that a long fused chain unrolled and upcast in full does not become tens of thousands of
scalar ops (seconds of lowering and of C compile) for no speed."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.indexmath import const_extent

__all__ = ["code_budget", "fit_code_size", "EXPAND_MAX_OPS", "EXPAND_SMALL_OPS"]

EXPAND_MAX_OPS = 8192  # scalar ops kernel-expand may make of one kernel (the unrolled, upcast body: code size)
EXPAND_SMALL_OPS = 1024  # ... and of a kernel that runs fewer iterations than EXPAND_MAX_OPS: at most its iterations


def code_budget(k: KernelFacts) -> int:
    """The scalar ops kernel-expand may make of kernel k: its iterations, clamped to [EXPAND_SMALL_OPS,
    EXPAND_MAX_OPS] (a kernel that runs a few hundred iterations gains nothing from a full unroll but compile time)."""
    return min(EXPAND_MAX_OPS, max(EXPAND_SMALL_OPS, k.work()))


def fit_code_size(k: KernelFacts, upcast: dict[UOp, int], unroll: dict[UOp, int],
                  vector: dict[UOp, int] | None = None) -> None:
    """Shrink the lane factors (unrolls last to first, then upcasts) until kernel-expand's copies of the body stay
    within `code_budget`: a long fused chain under a reduction, unrolled and upcast in full, would otherwise become
    tens of thousands of scalar ops for no speed. A range in `vector` (its lanes: a matrix-vector product's contiguous
    outputs, whole vectors of that width) counts one copy per vector: an LSTM step's gate math on 4 vectors is 4
    vector statements per op, not 64."""
    vector = vector or {}

    def total() -> int:
        f = {**upcast, **unroll}
        return k.expanded_ops({r: -(-n // vector[r]) if r in vector else n for r, n in f.items()})
    budget = code_budget(k)
    if total() <= budget:
        return
    for factors in (unroll, upcast):
        order = _outer_first(k, list(reversed(list(factors)))) if factors is unroll else list(reversed(list(factors)))
        for r in order:
            n = const_extent(r) or 1
            while factors.get(r, 1) > 1 and total() > budget:
                f = next((d for d in range(factors[r] - 1, 0, -1) if n % d == 0), 1)
                if f > 1:
                    factors[r] = f
                else:
                    del factors[r]
            if total() <= budget:
                break
        _keep_unrolls_innermost(k, unroll, upcast)
        if total() <= budget:
            return


def _outer_first(k: KernelFacts, order: list[UOp]) -> list[UOp]:
    """`order` with the ranges of each reduction swapped among their own places so its outer ones come first: a
    window's taps (ky, kx) shrink ky before kx, so the lanes left are always the reduction's innermost ranges."""
    out = list(order)
    for red in k.reduces:
        rs = red.operands.ranges
        slots = [i for i, r in enumerate(out) if r in rs]
        for i, r in zip(slots, sorted((out[i] for i in slots), key=rs.index), strict=True):
            out[i] = r
    return out


def _keep_unrolls_innermost(k: KernelFacts, unroll: dict[UOp, int], upcast: dict[UOp, int]) -> None:
    """Drop the unrolls kernel-expand cannot lay out: a reduction's laned (unrolled or upcast) ranges must be its
    innermost ones, each but the outermost of them laned whole (a loop left between two unrolled taps, as when a
    7x7 window's kx shrank and its ky did not, would split their lanes)."""
    for red in k.reduces:
        whole = True
        for r in reversed(red.operands.ranges):
            if not whole:
                unroll.pop(r, None)
            elif unroll.get(r, upcast.get(r)) != const_extent(r):
                whole = False
