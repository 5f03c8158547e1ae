"""kernel-optimize's schedule of a peeled copy whose segments are alike (the heuristic asks `sibling_opts` first).

kernel-peel cuts a concat of two equal sources (ONNX Concat of two [1, 64, 56, 56] inputs along channels) into two
loop nests of the same extents, one per source. The heuristic's steps 2 and 4 treat a peeled kernel as a pad: the
interior (the nest that stores the most) is vectorized, the border segments run whole on every core beside its share.
With two halves alike that vectorized one half and split the other across the cores as scalars, so every core copied
the whole first half. Here every nest gets the same opts instead: its innermost contiguous range upcast by the
largest power of two up to the vector width, and its outermost range `global`. On a cpu kernel-to-device gives
sibling global ranges of one extent one global id (uopir.passes.kernel_to_device), so the cores split one loop that
copies a vector of each source per iteration.
"""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import Opt
from uopir.passes.target import Target

__all__ = ["sibling_opts"]


def _extents(seg: list[UOp]) -> tuple[int | None, ...]:
    return tuple(const_extent(r) for r in seg)


def sibling_opts(k: KernelFacts, t: Target, vw: int, budget: int) -> list[Opt] | None:
    """The opts of a cpu kernel with no reduction cut into two or more loop nests of the same extents, each storing
    contiguously along its innermost range: that range upcast by the largest power of two dividing it up to the
    vector width (within `budget`), and, when the kernel is worth splitting (`parallel_work("elementwise")`), its
    outermost range global in every nest. None for any other kernel (the heuristic's own steps)."""
    segs = k.segments()
    if t.kind != "cpu" or k.reduces or len(segs) < 2 or len({_extents(s) for s in segs}) != 1 \
            or None in _extents(segs[0]) or any(r.attrs.kind != "loop" for s in segs for r in s):
        return None
    upcast: dict[UOp, int] = {}
    for seg in segs:
        r = seg[-1]
        f = pow2_divisor(const_extent(r) or 1, min(vw, budget)) if vw >= 2 and k.contiguous(r) else 1
        if f >= 2:
            upcast[r] = f
    if upcast and len(upcast) != len(segs):
        return None  # (nests alike in extents but not in how they store: the heuristic's own steps)
    opts = [Opt("upcast", r.attrs.axis, f) for r, f in sorted(upcast.items(), key=lambda rf: rf[0].attrs.axis)]
    outer = [s[0] for s in segs]
    if t.threads > 1 and k.work() >= t.parallel_work("elementwise") and \
            (const_extent(outer[0]) or 1) // upcast.get(outer[0], 1) >= t.threads:
        opts += [Opt("global", r.attrs.axis) for r in sorted(outer, key=lambda r: r.attrs.axis)]
    return opts
