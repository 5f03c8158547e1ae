"""kernel-optimize's choice of the `tail` opt (the heuristic's step 0; uopir.passes.kernel.tail does the rewrite): a
row no vector divides (a ViT's 197 tokens) is cut into a vector body and a scalar tail before the other opts are
chosen, instead of running all of it scalar."""
from __future__ import annotations

from uopir.passes.kernel.coltail import column_tail, copy_tail
from uopir.passes.kernel.dot import dot_tile
from uopir.passes.kernel.facts import KernelFacts, fullest_divisor, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import Opt
from uopir.passes.kernel.rowtile import ROW_TILE_VECTORS
from uopir.passes.kernel.tail import TAIL_OPS
from uopir.passes.kernel.transpose import TRANSPOSE_TILE
from uopir.passes.target import Target

__all__ = ["tail_opts", "ragged", "TAIL_MIN_VECTORS"]

TAIL_MIN_VECTORS = 2  # a ragged row this many vectors long or more gets a vector body and a scalar tail


def ragged(n: int, vw: int) -> bool:
    """A range of n that no quarter of a vector divides (197; not a 14x14 pool's 196, whose 4 lanes the dot tile
    fills up with channels), spanning at least TAIL_MIN_VECTORS vectors."""
    return n >= TAIL_MIN_VECTORS * vw and pow2_divisor(n, vw) < vw // 4


def tail_opts(k: KernelFacts, t: Target, vw: int, budget: int) -> list[Opt]:
    """0. on a cpu, `tail` opts (uopir.passes.kernel.tail) for the ranges step 2 and the accumulators of step 3 would
    leave scalar because no vector divides them (a ViT's attention rows of 197): the innermost output range of an
    unpeeled kernel, stored and read contiguously, that no reduction varies along, when no divisor up to
    ROW_TILE_VECTORS vectors fills half its vectors; and the innermost range of each reduction read contiguously
    (a float add or mul only where the target reassociates), unless the kernel takes a dot-product tile. The tail
    is the n % vw iterations left. A register tile's ragged columns (kernel/coltail.py) get a tail by vw alone, a
    transposing copy's ragged stored range one by the transpose tile."""
    if t.kind != "cpu" or vw < 2 or len(k.segments()) != 1 or dot_tile(k, t, vw, budget) is not None:
        return []  # (a dot-product tile fills its vectors with rows: a 7x7 global pool's 49)
    if (col := column_tail(k, vw) or (copy_tail(k) if vw >= TRANSPOSE_TILE else None)) is not None:
        return [col]  # a register tile's ragged columns, a transposing copy's (kernel/coltail.py)
    opts: list[Opt] = []
    r = k.out[-1] if k.out else None
    n = const_extent(r) if r is not None else None
    if r is not None and n is not None and r.attrs.kind == "loop" and ragged(n, vw) and k.contiguous(r) \
            and not any(r in k.deps[red] for red in k.reduces):
        best = fullest_divisor(n, vw, min(ROW_TILE_VECTORS * vw, budget), pow2_divisor(n, vw))
        if best / (-(-best // vw) * vw) < 0.5:
            opts.append(Opt("tail", r.attrs.axis, vw))
    for red in k.reduces:
        rs = red.operands.ranges
        r = rs[-1] if rs else None
        n = const_extent(r) if r is not None else None
        if r is None or n is None or r.attrs.kind != "reduce" or not ragged(n, vw) or red.attrs.op not in TAIL_OPS:
            continue
        if any(r in u.operands.ranges[:-1] for u in k.reduces) or any(o.axis == r.attrs.axis for o in opts):
            continue
        if red.dtype.scalar.is_float and red.attrs.op in ("add", "mul") and not t.reassociate_float_reductions:
            continue
        reads = [x for x in k.loads if r in k.deps[x] and x in red.operands.value.toposort()]
        if reads and all(k.coeff(x, r) == 1 for x in reads):
            opts.append(Opt("tail", r.attrs.axis, vw))
    return opts
