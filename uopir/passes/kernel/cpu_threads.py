"""kernel-optimize's thread split on a cpu (the heuristic's steps 4 and 5): one output range becomes `global` (its
iterations shared by the worker threads) when the kernel does enough work to pay for waking them, and a wide tile's
outer range also packs the panels it reads (`pack`) when that pays."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import PACK_MAX_BYTES, Opt, apply_opts, pack_loads, panel_size, range_of
from uopir.passes.kernel.pointwise import pack_pays
from uopir.passes.target import Target

__all__ = ["cpu_thread_opts", "packs"]


def cpu_thread_opts(k: KernelFacts, t: Target, opts: list[Opt], loops: list[UOp], upcast: dict[UOp, int],
                    kind: str) -> list[Opt]:
    """The opts to add after `opts` on a cpu target t: with threads > 1, the first of `loops` (the output loops,
    outermost first) with at least `threads` iterations left after `upcast` (else the longest) becomes `global` when
    the kernel does at least `t.parallel_work(kind)` iterations (KernelFacts.work: every loop nest's, a tail's body
    and tail summed; `kind`: the target's row for what one iteration does), and `pack` follows when it is the wide
    tile's `outer` range and its panels fit (`packs`). On one thread, an `outer` range is made global only to pack
    (one core runs all of it)."""
    if t.threads > 1 and loops and k.work() >= t.parallel_work(kind):
        def outer(r: UOp) -> int:
            return (const_extent(r) or t.threads) // upcast.get(r, 1)
        r = next((r for r in loops if outer(r) >= t.threads), max(loops, key=outer))
        if outer(r) >= 2 and r.attrs.kind == "loop":
            new = [Opt("global", r.attrs.axis)]
            if opts and opts[-1] == Opt("outer", r.attrs.axis) and packs(k.kdef, opts + new, r.attrs.axis):
                new.append(Opt("pack", r.attrs.axis))
            return new
        return []
    if t.kind == "cpu" and opts and opts[-1].kind == "outer" and k.work() >= t.parallel_min_work:
        r = loops[0]
        if r.attrs.kind == "loop" and packs(k.kdef, opts + [Opt("global", r.attrs.axis)], r.attrs.axis):
            return [Opt("global", r.attrs.axis), Opt("pack", r.attrs.axis)]
    return []


def packs(kdef: UOp, opts: list[Opt], axis: int) -> bool:
    """5. pack: whether, after `opts`, the global range on `axis` has panels to pack within PACK_MAX_BYTES."""
    tiled = apply_opts(kdef, opts)
    r0 = range_of(tiled, axis)
    n0 = const_extent(r0) or 0
    k = KernelFacts(tiled)
    loads = pack_loads(k, r0)
    panels = [n0 * panel_size(inner) * ld.dtype.itemsize for ld, inner in loads]
    return bool(panels) and sum(panels) <= PACK_MAX_BYTES and pack_pays(k, loads)
