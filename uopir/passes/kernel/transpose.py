"""kernel-optimize's transpose tile: a square block of a copy whose store and reads run along different ranges.

A kernel without a reduction whose store is contiguous along one output range s but whose input is read there with
a large stride, and contiguous along another output range l (attention's k^T copied into a (K, N) panel before q @
k^T; x.T + 1), gets no vector upcast from the heuristic's rule 2 (it would be a gather) and runs one scalar load
and store per element, each load a row of the input apart. Upcasting both s and l by TRANSPOSE_TILE makes a square
block: kernel-expand reads each of its input rows as one vector along l and stores each output row as one vector
along s, and the block's lanes between them become shuffles. BERT's 12 heads of 128 x 64: 42 -> 18 us.
"""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.expand import LOAD_STRIDE
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.indexmath import const_extent

__all__ = ["transpose_tile", "TRANSPOSE_TILE"]

TRANSPOSE_TILE = 8  # lanes along each of the two ranges: 8 x 8 (8 input and 8 output vectors of half a 512-bit one)


def transpose_tile(k: KernelFacts, vw: int) -> dict[UOp, int] | None:
    """The upcasts {s: TRANSPOSE_TILE, l: TRANSPOSE_TILE} of a transposing copy (the module docstring), or None:
    not one (a reduction, a range read contiguously where it is stored, no load contiguous along another range, a
    vector narrower than the tile, an extent the tile does not divide)."""
    f = TRANSPOSE_TILE
    if k.reduces or vw < f or not k.stores:
        return None
    if any(k.contiguous(r, (1, LOAD_STRIDE)) for r in k.out):
        return None  # rule 2's vector upcast applies
    s = next((r for r in reversed(k.out) if all(k.coeff(m, r) == 1 for m in k.stores if r in k.deps[m])
              and any(r in k.deps[m] for m in k.stores)), None)  # (a tail's body: the stores along s)
    if s is None or (const_extent(s) or 0) % f:
        return None
    strided = [x for x in k.loads if (k.coeff(x, s) or 0) not in (0, 1)]
    for r in reversed(k.out):
        if r is not s and (const_extent(r) or 0) % f == 0 and strided and all(k.coeff(x, r) == 1 for x in strided):
            return {s: f, r: f}
    return None
