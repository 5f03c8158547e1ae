"""kernel-optimize's loop order (the heuristic's step after tiling): a wide register tile's contiguous range becomes
the outermost loop (`outer`), so the panel of the input read along it (a matmul's B columns) is reused by every row
block while it is in cache instead of streamed once per row block."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import Opt

__all__ = ["loop_order"]


def loop_order(k: KernelFacts, upcast: dict[UOp, int], wide: bool) -> tuple[list[UOp], Opt | None]:
    """(the output loops left after `upcast`, outermost first; the `outer` opt or None). Of a peeled kernel, the
    interior's loops (the border segments run on every core, beside its share). `outer` only on a `wide` target for
    a kernel with a reduction whose interior has two upcast ranges and two loops (not a transpose tile, which reads no
    panel again), and not when a reduction of this loop nest does not vary along the contiguous range (a row's mean
    beside a tile of columns: every block of columns would compute it again)."""
    segments = k.segments()
    interior = set(segments[0]) if segments else set()
    loops = [r for r in k.out if upcast.get(r) != const_extent(r) and r in interior]
    if wide and k.reduces and len([r for r in upcast if r in interior]) == 2 and len(loops) >= 2:
        first = next((r for r in loops if k.contiguous(r, reduced_only=True) and r in upcast), None)
        if first is not None and first is not loops[0] and all(first in k.deps[red] for red in k.reduces
                                                                 if k.deps[red] & interior):
            return [first, *(r for r in loops if r is not first)], Opt("outer", first.attrs.axis)
    return loops, None
