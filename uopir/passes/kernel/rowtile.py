"""kernel-optimize's row vector (the heuristic's step 2): a kernel with no register tile gets its contiguous output
row upcast into vectors, the stores and the loads along it whole vector operations."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.expand import LOAD_STRIDE
from uopir.passes.kernel.facts import KernelFacts, fullest_divisor, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent

__all__ = ["row_upcast", "ROW_TILE_VECTORS"]

ROW_TILE_VECTORS = 4  # a contiguous range no vector divides is upcast whole when it spans at most this many vectors


def row_upcast(k: KernelFacts, vw: int, budget: int) -> dict[UOp, int]:
    """{range: factor} of the innermost contiguous output range (stride 1 in the store and in every load that reads
    along it, or LOAD_STRIDE where kernel-expand reads the span: a stride-2 pool; of a peeled kernel's segments, the
    interior's): the largest power of two that divides it within the vector width and `budget`; when that is less
    than a vector, the divisor up to ROW_TILE_VECTORS vectors whose lanes fill their vectors best (a 14x14 plane: 28
    lanes, not 4), or a strided row no half vector divides whole (a pool's 55 columns). Empty when there is none."""
    if vw < 2:
        return {}
    for r in sorted(reversed(k.out), key=lambda r: -k.stored(r)):
        n = const_extent(r)
        strided = n is not None and not k.contiguous(r) and k.contiguous(r, (1, LOAD_STRIDE))
        if n is not None and n >= 2 and (k.contiguous(r) or strided):
            f = pow2_divisor(n, min(vw, budget))
            if strided and f < vw // 2 and vw <= n <= min(ROW_TILE_VECTORS * vw, budget):
                f = n  # a strided row no half vector divides (a pool's 55 columns): all of it
            elif f < vw:
                f = fullest_divisor(n, vw, min(ROW_TILE_VECTORS * vw, budget), f)
            return {r: f} if f >= 2 else {}
    return {}
