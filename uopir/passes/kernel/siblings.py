"""kernel-optimize's schedule of a peeled kernel whose loop nests are alike (the heuristic asks `sibling_opts` first).

kernel-peel cuts a kernel that reads a concat of equal sources into one loop nest per source, of the same extents:
ONNX Concat of two [1, 64, 56, 56] inputs (two copies), or SqueezeNet's max pools, which read the two expand convs
of a Fire module through the concat's gates (two pools over 64 channels each). The heuristic's steps 2 and 4 treat
a peeled kernel as a pad: the interior (the nest that stores the most; here the first of equals) gets the register
tile, the border segments run whole on every core beside its share. With nests alike that tiled one nest and split
the other across the cores untiled (a pool's strided row as scalars), so every core also ran the whole first nest.
Here the heuristic picks the opts of the first nest alone (on the target with its split thresholds divided by the
number of nests: the kernel's work is all of theirs) and every nest gets them, range for range. On a cpu
kernel-to-device gives sibling global ranges of one extent one global id (uopir.passes.kernel_to_device), so the
cores split one loop that runs every nest's body.
"""
from __future__ import annotations

from collections.abc import Callable

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import Opt
from uopir.passes.target import Target

__all__ = ["sibling_opts", "SIBLING_KINDS", "reads_its_stores"]

SIBLING_KINDS = ("upcast", "unroll", "global", "outer")  # the opts copied to every nest (others: the heuristic's own)


def reads_its_stores(order: list[UOp]) -> bool:
    """Some load of the kernel (its nodes `order`) reads a buffer the kernel stores to: its loop nests may not
    interleave (one id for several nests would reorder a store before a load of another nest)."""
    def buf(u: UOp) -> UOp | None:
        p = u.operands.ptr
        return p.operands.ptr if p.op is K.INDEX else None
    stored = {buf(u) for u in order if u.op is K.STORE} - {None}
    return any(u.op is K.LOAD and buf(u) in stored for u in order)


def _ranges(nest: UOp) -> list[UOp]:
    return [u for u in nest.toposort() if u.op is K.RANGE]


def sibling_opts(kdef: UOp, t: Target, heuristic: Callable[[UOp, Target], list[Opt]]) -> list[Opt] | None:
    """The opts of a cpu kernel whose body is two or more loop nests side by side (a `core.group` of `kernel.end`s)
    with the same ranges (extents and kinds, in order), none reading a buffer the kernel stores to: `heuristic`'s
    opts for the first nest alone, each given to every nest on its range in the same place, in the heuristic's
    order. None for any other kernel, or when the first nest's opts include a kind other than SIBLING_KINDS (the
    heuristic's own steps)."""
    body = kdef.src[0] if kdef.src else None
    if t.kind != "cpu" or body is None or body.op is not core.GROUP or len(body.src) < 2 or \
            any(n.op is not K.END for n in body.src):
        return None
    nests = [_ranges(n) for n in body.src]
    shape = [(const_extent(r), r.attrs.kind) for r in nests[0]]
    if not shape or any(e is None for e, _ in shape) or any(len(rs) != len(shape) or len(set(rs) & set(nests[0]))
                                                           for rs in nests[1:]):
        return None
    if any([(const_extent(r), r.attrs.kind) for r in rs] != shape for rs in nests[1:]) or \
            reads_its_stores(list(kdef.toposort())):
        return None
    n = len(nests)
    alone = t.derive(parallel_min_work=max(1, t.parallel_min_work // n), parallel_min_work_by_kind=tuple(
        (kind, max(1, w // n)) for kind, w in t.parallel_min_work_by_kind))
    first = heuristic(kdef.replace(src=(body.src[0],)), alone)
    place = {r.attrs.axis: i for i, r in enumerate(nests[0])}
    if any(o.kind not in SIBLING_KINDS or o.axis not in place for o in first):
        return None
    return [Opt(o.kind, rs[place[o.axis]].attrs.axis, o.factor) for o in first for rs in nests]
