"""kernel-optimize's column tail: a register tile whose contiguous output range no vector divides.

A matmul whose B is laid out (K, N) with N ragged (attention's q @ k^T over a ViT's 197 tokens, k copied to
(d, tokens) first) gets no vector along its columns: no power of two divides 197, a ragged upcast would clamp lanes
of a vector store, and 197 lanes whole are too many registers. The tile was then one scalar column with the
reduction unrolled: 6 heads of 197 x 197 x 64 ran 3.6 ms. `tail` cuts the columns into a body that a vector divides
(192 = 12 x 16) and a tail (5): the body takes the heuristic's register tile (rows x column vectors, the rows
ragged), the tail one short vector of its columns (5 lanes) beside the same rows. The tail's range is no tile
candidate (`column_tail_axis`): left in, it and the body's columns, both contiguous, would crowd the rows out of the
tile's two upcast ranges; the heuristic upcasts it whole after the tile (a loop of scalar columns instead: 150 ->
135 us for 6 heads of 197 x 197 x 64 on one core).
"""
from __future__ import annotations

from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import Opt
from uopir.passes.kernel.transpose import TRANSPOSE_TILE

__all__ = ["column_tail", "column_tail_axis", "copy_tail", "COLUMN_TAIL_MIN_VECTORS"]

COLUMN_TAIL_MIN_VECTORS = 2  # columns at least this many vectors long get a vector body (50 tokens: 3 of 16)


def column_tail(k: KernelFacts, vw: int) -> Opt | None:
    """`tail` of the innermost output range r by vw when r is a register tile's columns that no more than a quarter
    of a vector divides (a 1x1 conv's 14x14 plane: 196 = 12 x 16 + 4, not 4-lane vectors: one core, 80 -> 480 over
    14x14 111 -> 98 us, 480 -> 112 116 -> 100, 256 -> 256 over 10x10 436 -> 75): every load under the reductions
    reads r with stride 1 or not at all, some of them not at all (each column reuses them: a's row), every reduction
    varies along r (the stores are its sums), r is stored contiguously and spans at least COLUMN_TAIL_MIN_VECTORS
    vectors, and no read under the reductions is contiguous along another output range (a conv over a 55 x 55 plane,
    channels in vectors); None otherwise."""
    r = k.out[-1] if k.out else None
    n = const_extent(r) if r is not None else None
    if r is None or n is None or r.attrs.kind != "loop" or vw < 2 or not k.reduces:
        return None
    if n < COLUMN_TAIL_MIN_VECTORS * vw or pow2_divisor(n, vw) > vw // 4:
        return None
    if not k.contiguous(r, reduced_only=True) or k.reuse(r) == 0 or not all(r in k.deps[red] for red in k.reduces):
        return None
    red = k.red_ranges()
    if any(k.coeff(x, o) == 1 for x in k.loads if k.deps[x] & red for o in k.out if o is not r):
        return None  # a conv's weights packed in channel blocks: its channel tile (channeltile.channel_tile) instead
    return Opt("tail", r.attrs.axis, vw)


def column_tail_axis(kdef: UOp) -> int:
    """The axis the tail range gets when a `tail` opt is applied to kdef (split_tail numbers body, then tail, after
    the kernel's largest axis)."""
    return 2 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)


def copy_tail(k: KernelFacts) -> Opt | None:
    """`tail` by TRANSPOSE_TILE of a transposing copy's stored range s when the tile does not divide it (k^T copied
    to (d, 197) before the tile above): no reduction, s the innermost output range, stored with stride 1 and read with
    another stride by loads that read contiguously along another output range the tile divides (a head's d). The body
    takes kernel/transpose.py's square tile, the tail's columns a loop beside it. None otherwise."""
    f = TRANSPOSE_TILE
    s = k.out[-1] if k.out else None
    n = const_extent(s) if s is not None else None
    if s is None or n is None or k.reduces or not k.stores or n <= f or n % f == 0 or s.attrs.kind != "loop":
        return None
    if not all(k.coeff(m, s) == 1 for m in k.stores):
        return None
    strided = [x for x in k.loads if (k.coeff(x, s) or 0) not in (0, 1)]
    if strided and any(r is not s and (const_extent(r) or 0) % f == 0 and all(k.coeff(x, r) == 1 for x in strided)
                       for r in k.out):
        return Opt("tail", s.attrs.axis, f)
    return None
