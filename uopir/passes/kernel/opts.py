"""Opts: the transformations kernel-optimize (and a search) applies to a kernel, and how each is applied.

An *opt* splits a range r of constant extent n by a factor f that divides n: r becomes `r_o * f + r_i` with r_o
(extent n/f) keeping r's axis and kind and r_i (extent f) a new axis of kind `upcast` (an output axis, kept in
registers as f lanes) or `unroll` (a reduction axis, f steps per iteration). In a kernel.end or kernel.reduce, r's
place is taken by `r_o, r_i` (r_o outer), so a reduction still accumulates in the same order. When f == n the range
just changes kind; `local` and `group` split the same way with an inner range of kind local (an output range's
threads in a work-group) or group (a reduction range shared by them). The `global` opt marks an output range as
the one whose iterations run on several threads (cpu) or as thread/block ids (gpu). kernel-expand then turns
upcast/unroll ranges into vector lanes.

The printed kernel says what was done: the kinds of its ranges (and the index math `r_o * f + r_i`), and for
`pack` the scratch buffer, its copy loop nest and the `kernel.after` the packed loads read through.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts, address_of
from uopir.passes.kernel.indexmath import const_extent, linear_coeffs, range_deps
from uopir.passes.kernel.regroup import regroup
from uopir.passes.kernel.stash import stash
from uopir.passes.kernel.tail import split_tail

__all__ = ["Opt", "OptError", "apply_opt", "apply_opts", "SPLIT_KINDS", "THREAD_KINDS", "BY_KINDS", "PACK_MAX_BYTES"]

PACK_MAX_BYTES = 1 << 26  # the largest scratch copy `pack` makes (heap memory, a panel per global iteration)
SPLIT_KINDS = ("upcast", "unroll")
THREAD_KINDS = ("local", "group")  # gpu: output ranges split onto a work-group's threads, reductions shared by them
BY_KINDS = SPLIT_KINDS + THREAD_KINDS + ("tail",)  # the opts with a factor




class OptError(ValueError):
    """An opt that does not apply to the kernel (no such axis, a factor that does not divide the extent, ...)."""


@dataclass(frozen=True)
class Opt:
    """One transformation of a kernel: `upcast`/`unroll` axis `axis` by `factor`, mark it `global`, make it the
    `outer`most loop of every kernel.end that has it, `pack` the panel each of its (global) iterations reads,
    cut it into a body that `factor` divides and a `tail` (uopir.passes.kernel.tail), `stash` a row's operand
    (uopir.passes.kernel.stash), or `regroup` its sums' products along it (uopir.passes.kernel.regroup)."""

    kind: Literal["upcast", "unroll", "global", "outer", "pack", "local", "group", "tail", "stash", "regroup"]
    axis: int
    factor: int = 0

    def __str__(self) -> str:
        return f"{self.kind} {self.axis}" + (f" by {self.factor}" if self.kind in BY_KINDS else "")

    @classmethod
    def parse(cls, text: str) -> Opt:
        """The opt `str(opt)` printed ("upcast 0 by 16", "global 1"): how a tuning cache or a log names one."""
        words = text.split()
        kinds = BY_KINDS + ("global", "outer", "pack", "stash", "regroup")
        split = len(words) == 4 and words[2] == "by"
        if not words or words[0] not in kinds or len(words) != (4 if words[0] in BY_KINDS else 2):
            raise OptError(f"not an opt: {text!r} (expected e.g. 'upcast 0 by 16' or 'global 1')")
        if not words[1].isdigit() or (split and not words[3].isdigit()) or (len(words) == 4 and not split):
            raise OptError(f"not an opt: {text!r} (the axis and factor are non-negative integers)")
        return cls(words[0], int(words[1]), int(words[3]) if split else 0)  # type: ignore[arg-type]


# ---- applying opts ---------------------------------------------------------------------------------------------------
def _iconst(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def range_of(kdef: UOp, axis: int) -> UOp:
    found = [u for u in kdef.toposort() if u.op is K.RANGE and u.attrs.axis == axis]
    if len(found) != 1:
        raise OptError(f"axis {axis}: the kernel has {len(found)} ranges on it (an opt needs exactly one)")
    return found[0]


def _split(kdef: UOp, r: UOp, f: int, kind: str) -> UOp:
    """r becomes r_o * f + r_i (r_i a new axis of `kind`); in ends and reductions, r_o, r_i take r's place. When f
    does not divide r's extent n (a ragged upcast, `ragged_ok`), r_o runs ceil(n / f) times and r becomes
    min(r_o * f + r_i, n - 1): the lanes past the end compute and store row n - 1 again, the same value."""
    n = const_extent(r)
    axis = 1 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)
    if n == f:  # all of r changes kind; lanes take a fresh axis still, so they keep the order the opts were applied in
        return kdef.substitute({r: r.replace(arg=(axis if kind in SPLIT_KINDS else r.attrs.axis, kind))})
    outer = UOp(K.RANGE, dtypes.index, (_iconst(-(-n // f)),), r.arg)
    inner = UOp(K.RANGE, dtypes.index, (_iconst(f),), (axis, kind))
    at = outer * _iconst(f) + inner
    if n % f:  # min(at, n - 1) = n - 1 - max(n - 1 - at, 0)
        at = _iconst(n - 1) - UOp(core.MAX, dtypes.index, (_iconst(n - 1) - at, _iconst(0)))
    new: dict[UOp, UOp] = {r: at}
    for u in kdef.toposort():
        if u is r:
            continue
        if u.op is K.END or u.op is K.REDUCE:
            src: tuple[UOp, ...] = (new[u.operands.value],) + tuple(
                x for s in u.operands.ranges for x in ((outer, inner) if s is r else (new[s],)))
        else:
            src = tuple(new[s] for s in u.src)
        new[u] = u if src == u.src else u.replace(src=src)
    return new[kdef]


def apply_opt(kdef: UOp, opt: Opt) -> UOp:
    """The kernel with one opt applied; OptError when it does not apply."""
    r = range_of(kdef, opt.axis)
    if opt.kind == "global":
        if r.attrs.kind not in ("loop", "global"):
            raise OptError(f"axis {opt.axis} is a {r.attrs.kind} range; only an output (loop) range can be global")
        return kdef.substitute({r: r.replace(arg=(r.attrs.axis, "global"))})
    if opt.kind == "outer":
        if r.attrs.kind not in ("loop", "global"):
            raise OptError(f"axis {opt.axis} is a {r.attrs.kind} range; only an output (loop) range can be reordered")
        return kdef.substitute({u: u.replace(src=(u.operands.value, r, *(x for x in u.operands.ranges if x is not r)))
                                for u in kdef.toposort() if u.op is K.END and r in u.operands.ranges})
    if opt.kind == "pack":
        return _pack(kdef, r)
    if opt.kind in ("stash", "regroup"):
        try:
            return (stash if opt.kind == "stash" else regroup)(kdef, r)
        except ValueError as e:
            raise OptError(str(e)) from None
    if opt.kind in THREAD_KINDS:
        return _split_threads(kdef, r, opt)
    if opt.kind == "tail":
        if r.attrs.kind not in ("loop", "reduce"):
            raise OptError(f"axis {opt.axis} is a {r.attrs.kind} range; only a loop or reduce range takes a tail")
        try:
            return split_tail(kdef, r, opt.factor)
        except ValueError as e:
            raise OptError(str(e)) from None
    if opt.kind not in SPLIT_KINDS:
        raise OptError(f"unknown opt kind {opt.kind!r}")
    n = const_extent(r)
    if n is None or n < 1:
        raise OptError(f"axis {opt.axis} has no positive constant extent to split")
    if r.attrs.kind in SPLIT_KINDS:
        raise OptError(f"axis {opt.axis} is already an {r.attrs.kind} range")
    if opt.factor < 1 or n % opt.factor and not (opt.kind == "upcast" and opt.factor < n and ragged_ok(kdef, r)):
        raise OptError(f"factor {opt.factor} does not divide the extent {n} of axis {opt.axis}")
    if opt.kind == "upcast" and r.attrs.kind == "reduce":
        return _split_accumulators(kdef, r, opt.factor)
    return _split(kdef, r, opt.factor, opt.kind)


def ragged_ok(kdef: UOp, r: UOp) -> bool:
    """Whether r may be upcast by a factor that does not divide it (its last lanes clamped to its last value): r is
    an output loop that no store reads along consecutively (so the repeated lanes are whole stores of their own, not
    lanes of a vector), and no buffer the kernel stores into is loaded by it (a repeated lane stores what the first
    stored, never a value computed from it)."""
    if r.attrs.kind != "loop":
        return False
    order = kdef.toposort()
    stored = {K.pointer_base(u.operands.ptr) for u in order if u.op is K.STORE}
    if None in stored or any(u.op is K.LOAD and K.pointer_base(u.operands.ptr) in stored for u in order):
        return False
    for u in order:
        if u.op is K.STORE and u.src[0].op is K.INDEX:
            idx = u.src[0].src[1]
            coef = linear_coeffs(idx, frozenset([r]), range_deps(idx.toposort()))
            if coef is None or coef.get(r, 0) in (0, 1, -1):
                return False
    return True


def _split_accumulators(kdef: UOp, r: UOp, f: int) -> UOp:
    """`upcast` of a reduction range: r becomes r_o * f + r_i and every `kernel.reduce %x, ..., r, ...` becomes
    `kernel.reduce (kernel.reduce %x, ..., r_o, ...), r_i`: f partial results (lanes) accumulate side by side,
    independent chains a vector unit overlaps, and fold into one after the loop. That reorders a float add/mul, so
    only where the target's `reassociate_float_reductions` allows it (the heuristic checks; an explicit opt may)."""
    n = const_extent(r)
    assert n is not None
    axis = 1 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)
    outer = r if n == f else UOp(K.RANGE, dtypes.index, (_iconst(n // f),), r.arg)  # r's axis and kind
    inner = UOp(K.RANGE, dtypes.index, (_iconst(f),), (axis, "upcast"))
    new: dict[UOp, UOp] = {r: inner if n == f else outer * _iconst(f) + inner}
    for u in kdef.toposort():
        if u is r:
            continue
        if u.op is K.REDUCE and r in u.operands.ranges:
            rs = tuple(x for s in u.operands.ranges for x in (() if s is r and n == f else (outer,) if s is r
                                                                 else (new[s],)))
            part = UOp(K.REDUCE, u.dtype, (new[u.operands.value], *rs), u.arg) if rs else new[u.operands.value]
            new[u] = UOp(K.REDUCE, u.dtype, (part, inner), u.arg)
            continue
        src = tuple(new[s] for s in u.src)
        new[u] = u if src == u.src else u.replace(src=src)
    return new[kdef]


def pack_loads(k: KernelFacts, r0: UOp) -> list[tuple[UOp, list[UOp]]]:
    """The loads `pack` copies for global range r0: (load, its other ranges ordered by stride, largest first) for each
    plain load (a param, no gate, linear address) under a reduction that varies along r0, and otherwise only along
    lane (upcast/unroll) and reduction ranges of constant extent, with some output range of its kernel.end that it
    does not vary along (each packed panel is read again by every iteration of that range)."""
    red = k.red_ranges()
    out = []
    for ld in k.loads:
        d = k.deps[ld]
        a = address_of(ld.operands.ptr)
        if len(ld.src) != 1 or a is None or a[1] is not None or r0 not in d or not d & red:
            continue
        inner = [r for r in d if r is not r0]
        if any(r.attrs.kind not in ("upcast", "unroll", "reduce") or const_extent(r) is None for r in inner):
            continue
        ends = [e for e in k.kdef.toposort() if e.op is K.END and r0 in e.operands.ranges
                and ld in e.operands.value.toposort()]
        if not ends or not any(r not in d for e in ends for r in e.operands.ranges):
            continue
        c = linear_coeffs(a[0], frozenset(inner), k.deps)
        if c is None or any(c.get(r, 0) == 0 for r in inner):
            continue
        out.append((ld, sorted(inner, key=lambda r: -abs(c[r]))))
    return out


def panel_size(inner: list[UOp]) -> int:
    n = 1
    for r in inner:
        n *= const_extent(r) or 1
    return n


def _pack(kdef: UOp, r0: UOp) -> UOp:
    """Each load pack_loads finds reads a scratch copy instead, `kernel.local` laid out [r0][inner ranges,
    row-major, in the order of their strides]: a loop nest over fresh ranges copies the panel of one r0 iteration (its
    lanes kept as upcast ranges, so the copy moves vectors), and the load reads `kernel.after %scratch, %copy`. The
    scratch has a panel per r0 iteration, so the copy is exact under any order of the iterations; on a cpu the global
    range's iterations each copy their panel just before reading it (device-linearize orders the copy first)."""
    if r0.attrs.kind != "global":
        raise OptError(f"axis {r0.attrs.axis} is a {r0.attrs.kind} range; pack needs the global range (mark it global "
                       "first)")
    n0 = const_extent(r0)
    k = KernelFacts(kdef)
    loads = pack_loads(k, r0) if n0 else []
    if not loads:
        raise OptError(f"axis {r0.attrs.axis}: no load under a reduction to pack along it")
    axis = 1 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)
    lid = sum(1 for u in kdef.toposort() if u.op is K.LOCAL)
    new: dict[UOp, UOp] = {}
    for ld, inner in loads:
        sizes = [const_extent(r) or 1 for r in inner]
        strides = [1] * len(inner)
        for i in range(len(inner) - 2, -1, -1):
            strides[i] = strides[i + 1] * sizes[i + 1]
        panel = strides[0] * sizes[0] if inner else 1

        def packed(rs: list[UOp], panel: int = panel, strides: list[int] = strides) -> UOp:
            off = r0 * _iconst(panel)
            for r, st in zip(rs, strides, strict=True):
                off = off + (r * _iconst(st) if st != 1 else r)
            return off
        fresh = []
        for r, n in zip(inner, sizes, strict=True):
            kind = "upcast" if r.attrs.kind == "upcast" else "loop"
            fresh.append(UOp(K.RANGE, dtypes.index, (_iconst(n),), (axis, kind)))
            axis += 1
        base, off = ld.operands.ptr.operands.ptr, ld.operands.ptr.operands.offset
        scratch = UOp(K.LOCAL, base.dtype.base.ptr("local", n0 * panel), (), lid)
        lid += 1
        moved = off.substitute(dict(zip(inner, fresh, strict=True)))
        src = UOp(K.LOAD, ld.dtype, (UOp(K.INDEX, base.dtype, (base, moved)),))
        copy = UOp(K.STORE, dtypes.void, (UOp(K.INDEX, scratch.dtype, (scratch, packed(fresh))), src))
        ready = UOp(K.AFTER, scratch.dtype, (scratch, UOp(K.END, dtypes.void, (copy, r0, *fresh))))
        new[ld] = ld.replace(src=(UOp(K.INDEX, scratch.dtype, (ready, packed(inner))),))
    return kdef.substitute(new)


def _split_threads(kdef: UOp, r: UOp, opt: Opt) -> UOp:
    """`local`: an output range split into (outer, local threads); `group`: a reduction range split into (outer,
    threads of a work-group that each reduce a part)."""
    want = ("loop", "global") if opt.kind == "local" else ("reduce",)
    if r.attrs.kind not in want:
        raise OptError(f"axis {opt.axis} is a {r.attrs.kind} range; a {opt.kind} opt needs a {' or '.join(want)} range")
    n = const_extent(r)
    if n is None or opt.factor < 1 or n % opt.factor:
        raise OptError(f"factor {opt.factor} does not divide the extent {n} of axis {opt.axis}")
    return _split(kdef, r, opt.factor, opt.kind)


def apply_opts(kdef: UOp, opts: list[Opt]) -> UOp:
    for o in opts:
        kdef = apply_opt(kdef, o)
    return kdef


