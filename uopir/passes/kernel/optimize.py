"""kernel-optimize: choose, per kernel, how its ranges map onto registers, vector lanes and threads.

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

`strategy=heuristic` picks opts from the target description (uopir.passes.target; never from a backend's name):
  1. register tiling: in a kernel with a reduction, the output ranges along which some input read under the
     reduction is reused (its address does not vary along them) are upcast, at most two, the most reused first:
     a contiguous, vector-friendly one by the target's vector width of the stored dtype, the others by the first
     fitting `upcast_sizes`; the product of upcast factors stays within `max_upcast`. A target whose budget holds
     at least WIDE_TILE_VECTORS vectors (`max_upcast` / vector width: accumulator registers) gets a wider tile:
     two vectors along the contiguous range and as many rows as the remaining budget allows (a power of two), and
     the contiguous range becomes the outermost loop (`outer`), so the panel of the input read along it (a
     matmul's B columns) is reused by every row block while it is in cache instead of streamed once per row block.
     Among ranges reused alike, the one along which the vector loads (those varying along the contiguous range) do
     not vary goes first: a conv's output channels reuse its input row, where its output rows would reuse only the
     broadcast weight. A contiguous range that no full vector divides but that spans at most ROW_TILE_VECTORS
     vectors in multiples of half a vector is upcast whole (a conv's row of 56: 3.5 vectors of 16). A lone vector
     range under a lone reduction (a matrix-vector product, weight [K, N]) gets up to ROW_TILE_VECTORS vectors in
     half vectors (1000: 40 lanes), independent chains through a longer run of each weight row. On a cpu, a kernel
     whose one reduction reads every load contiguously along its innermost range while no output range is
     contiguous (a matrix-vector product with the weight [N, K], a 1x1-spatial squeeze-excite conv, a global pool)
     gets a dot-product tile instead (`_dot_tile`): the reduction upcast into vectors of partial sums beside up to
     DOT_ROWS rows that share each vector of x (or, with nothing to share, as many rows as fill one vector);
  2. otherwise, a vector upcast of the contiguous output range (stride 1 in the store, and in every load that reads
     along it, or 2 where kernel-expand reads the span: a stride-2 pool, whose row no half vector divides is upcast
     whole up to ROW_TILE_VECTORS vectors) by the largest power of two that divides it and fits the vector width and
     `max_upcast`; when that is less than a vector, by the divisor up to ROW_TILE_VECTORS vectors whose lanes fill
     their vectors best (a 14x14 plane: 28 lanes, 7/8 of two vectors, not 4; a row of 7 whole, not scalar);
  3. reductions: on a cpu target, the innermost range of each reduction that depends on no upcast output range
     (a full sum, a row sum, softmax's max and sum beside its vector of outputs) and along which every load under it
     reads consecutive elements gets partial accumulators: `upcast` of the reduce range by ACC_VECTORS vectors of
     the reduced dtype's width (as long as it runs ACC_MIN_STEPS iterations of them; each reduction's lanes are its
     own, within `max_upcast`, folded before anything reads them), which splits it r_o * f + r_i and reduces
     `kernel.reduce (kernel.reduce %x, r_o), r_i`: f independent partial results (one vector add per vector and
     iteration instead of a chain of scalar adds through one register), folded once after the loop. A float
     add/mul changes order so, allowed by `reassociate_float_reductions` (the differential tolerances' `accumulate`
     class); integer, bool, max and min reductions are exact in any order.
     Otherwise unroll: the innermost range of each reduction (the last operand of every kernel.reduce that has it) is
     unrolled fully when its extent is at most 16, else by the first of `unroll_sizes` that divides it (else the
     largest divisor below the largest of them: 9 taps by 3), as long as
     the lanes of a value (upcast times unroll factors) stay within `max_upcast` times the first unroll size;
     code size: when kernel-expand would copy the body into more scalar ops (an op once per lane of the split
     ranges it depends on) than the kernel runs iterations (at least EXPAND_SMALL_OPS) or than EXPAND_MAX_OPS, the
     unrolls, then the upcasts, shrink to smaller divisors until it does not: a long fused chain of gathers under a
     reduction, or a kernel that runs a few hundred iterations, gains nothing from a full unroll but compile time;
  4. threads: on a cpu target with threads > 1, the outermost output range with at least `threads` iterations
     (else the longest) becomes `global` when the kernel does at least PARALLEL_MIN_WORK iterations (a dot-product
     tile, all vectors at memory speed, DOT_PARALLEL_MIN_WORK: a 1152 -> 48 SE conv runs in 12 us on one core); on a
     gpu target every output range does; on a one-thread cpu a wide tile's outer range becomes global when it can
     pack (5.);
  5. pack: when that global range is a wide tile's `outer` contiguous range, each input read under the reduction
     along it and otherwise only along lanes and reduction ranges (a matmul's B: a 32-column panel whose rows lie a
     row of B apart, 4 KiB for 1024 columns, so they alias in the caches and defeat the prefetchers) is copied into
     a `kernel.local` laid out [global iteration][panel, row-major, by decreasing stride] (at most PACK_MAX_BYTES)
     by a loop nest over fresh ranges, and the tile reads its panel from there, contiguous, through `kernel.after`
     (which orders the copy first). Each global iteration has its own panel, so the copy is exact under any order of
     the iterations; on a cpu each thread copies the panel of the block it is about to compute;
  6. gpu threads: on a gpu target kernel/gpu_threads.py picks `local` opts (an output range split onto a
     work-group's threads, the rest `global`: work-group ids) or `group` opts (a long reduction into few results
     shared by a work-group's threads).
A kernel that already has upcast/unroll ranges or vectors is left alone (the pass is idempotent). `UOPIR_NOOPT=1`
in the environment makes `heuristic` behave like `none` (tinygrad's NOOPT).

`strategy=beam width=N` (or `UOPIR_BEAM=N` in place of the heuristic, on a target that has a device to time on; the
heuristic elsewhere) asks the strategy that uopir.search installs (uopir.passes.kernel.strategies): a search from
the heuristic's opts, timed on the device; its winner is applied and printed exactly as the heuristic's would be.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Literal

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.regions import count_regions, map_regions
from uopir.ir.uop import UOp
from uopir.passes.kernel.anchors import is_kernel_body
from uopir.passes.kernel.expand import LOAD_STRIDE
from uopir.passes.kernel.gpu_threads import gpu_thread_opts
from uopir.passes.kernel.indexmath import Deps, const_extent, linear_coeffs, range_deps
from uopir.passes.kernel.strategies import (
    BEAM_ENV,
    BUDGET_ENV,
    StrategyError,
    StrategyUnavailable,
    beam_budget_from_env,
    beam_ray_from_env,
    beam_width_from_env,
    check_budget,
    get_strategy,
    strategy_session,
)
from uopir.passes.kernel.tail import TAIL_OPS, split_tail
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import Target, UnknownTargetError, check_target_option, target

__all__ = ["Opt", "OptError", "apply_opt", "apply_opts", "heuristic_opts", "optimize_kernel", "PARALLEL_MIN_WORK",
           "NOOPT_ENV", "PACK_MAX_BYTES"]

NOOPT_ENV = "UOPIR_NOOPT"
PARALLEL_MIN_WORK = 1 << 15  # iterations below which a thread split costs more than it saves
FULL_UNROLL_MAX = 16  # a reduction loop this short is unrolled completely
PACK_MAX_BYTES = 1 << 26  # the largest scratch copy `pack` makes (heap memory, a panel per global iteration)
EXPAND_MAX_OPS = 8192  # scalar ops kernel-expand may make of one kernel (the unrolled, upcast body: code size)
EXPAND_SMALL_OPS = 1024  # ... and of a kernel that runs fewer iterations than EXPAND_MAX_OPS: at most its iterations
ACC_VECTORS = 4  # partial-result vectors of a long contiguous reduction (independent add chains: 4-cycle latency)
ACC_MIN_STEPS = 8  # ... when the reduction runs at least this many iterations of them (the fold after it is scalar)
ACC_SHORT_STEPS = 2  # a shorter one that runs at least this many vectors still gets one vector of partial results
ROW_TILE_VECTORS = 4  # a contiguous range no vector divides is upcast whole when it spans at most this many vectors
CHANNEL_TILE_ROWS = 16  # the most lanes of broadcast inputs beside a channel vector (accumulator vectors)
WINDOW_MAX_TAPS = 49  # a depthwise window (7x7 at most) unrolled whole beside its row vector
WIDE_TILE_VECTORS = 16  # accumulator vectors from which a register tile is two vectors wide (e.g. 8 rows x 2)
DOT_VECTORS = 2  # vectors of partial sums along a dot product's reduction (times DOT_ROWS rows: accumulators)
DOT_ROWS = 4  # output rows of a dot-product tile (each reuses the vector of x loaded for the others)
DOT_PARALLEL_MIN_WORK = 1 << 18  # a dot-product tile reads below 1 MiB faster than a second core wakes for it
DOT_MIN_LANES = 4  # a dot product's reduction this few lanes wide is no vector worth its fold
DOT_MIN_STEPS = 2  # ... and steps of a short one beside rows (an SE conv's 48 -> 1152: 3 steps of 16 lanes)
TAIL_MIN_VECTORS = 2  # a ragged row this many vectors long or more gets a vector body and a scalar tail
RAGGED_BELOW = 4  # a register tile's row range whose largest power-of-two divisor is below this (197 tokens: 1) ...
RAGGED_MIN_STEPS = 4  # ... is upcast by the tile's rows anyway, its last lanes clamped, when it runs this many tiles
_SPLIT_KINDS = ("upcast", "unroll")
_THREAD_KINDS = ("local", "group")  # gpu: output ranges split onto a work-group's threads, reductions shared by them
_BY_KINDS = _SPLIT_KINDS + _THREAD_KINDS + ("tail",)  # the opts with a factor


class OptError(ValueError):
    """An opt that does not apply to the kernel (no such axis, a factor that does not divide the extent, ...)."""


@dataclass(frozen=True)
class Opt:
    """One transformation of a kernel: `upcast`/`unroll` axis `axis` by `factor`, mark it `global`, make it the
    `outer`most loop of every kernel.end that has it, `pack` the panel each of its (global) iterations reads, or
    cut it into a body that `factor` divides and a `tail` (uopir.passes.kernel.tail)."""

    kind: Literal["upcast", "unroll", "global", "outer", "pack", "local", "group", "tail"]
    axis: int
    factor: int = 0

    def __str__(self) -> str:
        return f"{self.kind} {self.axis}" + (f" by {self.factor}" if self.kind in _BY_KINDS else "")

    @classmethod
    def parse(cls, text: str) -> Opt:
        """The opt `str(opt)` printed ("upcast 0 by 16", "global 1"): how a tuning cache or a log names one."""
        words = text.split()
        kinds = _BY_KINDS + ("global", "outer", "pack")
        split = len(words) == 4 and words[2] == "by"
        if not words or words[0] not in kinds or len(words) != (4 if words[0] in _BY_KINDS else 2):
            raise OptError(f"not an opt: {text!r} (expected e.g. 'upcast 0 by 16' or 'global 1')")
        if not words[1].isdigit() or (split and not words[3].isdigit()) or (len(words) == 4 and not split):
            raise OptError(f"not an opt: {text!r} (the axis and factor are non-negative integers)")
        return cls(words[0], int(words[1]), int(words[3]) if split else 0)  # type: ignore[arg-type]


# ---- applying opts ---------------------------------------------------------------------------------------------------
def _iconst(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def _range_of(kdef: UOp, axis: int) -> UOp:
    found = [u for u in kdef.toposort() if u.op is K.RANGE and u.attrs.axis == axis]
    if len(found) != 1:
        raise OptError(f"axis {axis}: the kernel has {len(found)} ranges on it (an opt needs exactly one)")
    return found[0]


def _split(kdef: UOp, r: UOp, f: int, kind: str) -> UOp:
    """r becomes r_o * f + r_i (r_i a new axis of `kind`); in ends and reductions, r_o, r_i take r's place. When f
    does not divide r's extent n (a ragged upcast, `_ragged_ok`), r_o runs ceil(n / f) times and r becomes
    min(r_o * f + r_i, n - 1): the lanes past the end compute and store row n - 1 again, the same value."""
    n = const_extent(r)
    axis = 1 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)
    if n == f:  # all of r changes kind; lanes take a fresh axis still, so they keep the order the opts were applied in
        return kdef.substitute({r: r.replace(arg=(axis if kind in _SPLIT_KINDS else r.attrs.axis, kind))})
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
    r = _range_of(kdef, opt.axis)
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
    if opt.kind in _THREAD_KINDS:
        return _split_threads(kdef, r, opt)
    if opt.kind == "tail":
        if r.attrs.kind not in ("loop", "reduce"):
            raise OptError(f"axis {opt.axis} is a {r.attrs.kind} range; only a loop or reduce range takes a tail")
        try:
            return split_tail(kdef, r, opt.factor)
        except ValueError as e:
            raise OptError(str(e)) from None
    if opt.kind not in _SPLIT_KINDS:
        raise OptError(f"unknown opt kind {opt.kind!r}")
    n = const_extent(r)
    if n is None or n < 1:
        raise OptError(f"axis {opt.axis} has no positive constant extent to split")
    if r.attrs.kind in _SPLIT_KINDS:
        raise OptError(f"axis {opt.axis} is already an {r.attrs.kind} range")
    if opt.factor < 1 or n % opt.factor and not (opt.kind == "upcast" and opt.factor < n and _ragged_ok(kdef, r)):
        raise OptError(f"factor {opt.factor} does not divide the extent {n} of axis {opt.axis}")
    if opt.kind == "upcast" and r.attrs.kind == "reduce":
        return _split_accumulators(kdef, r, opt.factor)
    return _split(kdef, r, opt.factor, opt.kind)


def _ragged_ok(kdef: UOp, r: UOp) -> bool:
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


def _pack_loads(k: _Kernel, r0: UOp) -> list[tuple[UOp, list[UOp]]]:
    """The loads `pack` copies for global range r0: (load, its other ranges ordered by stride, largest first) for each
    plain load (a param, no gate, linear address) under a reduction that varies along r0, and otherwise only along
    lane (upcast/unroll) and reduction ranges of constant extent, with some output range of its kernel.end that it
    does not vary along (each packed panel is read again by every iteration of that range)."""
    red = k.red_ranges()
    out = []
    for ld in k.loads:
        d = k.deps[ld]
        a = _address(ld.operands.ptr)
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


def _panel(inner: list[UOp]) -> int:
    n = 1
    for r in inner:
        n *= const_extent(r) or 1
    return n


def _pack(kdef: UOp, r0: UOp) -> UOp:
    """Each load _pack_loads finds reads a scratch copy instead, `kernel.local` laid out [r0][inner ranges,
    row-major, in the order of their strides]: a loop nest over fresh ranges copies the panel of one r0 iteration (its
    lanes kept as upcast ranges, so the copy moves vectors), and the load reads `kernel.after %scratch, %copy`. The
    scratch has a panel per r0 iteration, so the copy is exact under any order of the iterations; on a cpu the global
    range's iterations each copy their panel just before reading it (device-linearize orders the copy first)."""
    if r0.attrs.kind != "global":
        raise OptError(f"axis {r0.attrs.axis} is a {r0.attrs.kind} range; pack needs the global range (mark it global "
                       "first)")
    n0 = const_extent(r0)
    k = _Kernel(kdef)
    loads = _pack_loads(k, r0) if n0 else []
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


# ---- what the heuristic looks at -------------------------------------------------------------------------------------
def _address(ptr: UOp) -> tuple[UOp, UOp | None] | None:
    """(offset, gate) of a pointer `kernel.index base, off [, gate]` on a base that varies over no range."""
    if ptr.op is not K.INDEX or ptr.operands.ptr.op is not K.PARAM:
        return None
    return ptr.operands.offset, ptr.operands.gate


@dataclass
class _Kernel:
    """Facts about one kernel: its output and reduction ranges, loads and stores, and who depends on what."""

    kdef: UOp
    deps: Deps = field(init=False)
    out: list[UOp] = field(init=False)  # output ranges, outermost first (as the ends list them)
    loads: list[UOp] = field(init=False)
    stores: list[UOp] = field(init=False)
    reduces: list[UOp] = field(init=False)
    _lane_deps: Deps | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        order = list(self.kdef.toposort())
        self.deps = range_deps(order)
        self.loads = [u for u in order if u.op is K.LOAD]
        self.stores = [u for u in order if u.op is K.STORE]
        self.reduces = [u for u in order if u.op is K.REDUCE]
        out: dict[UOp, None] = {}
        for u in reversed(order):  # the outermost end first (it consumes the ends nested in it: kernel-peel's)
            if u.op is K.END:
                out.update((r, None) for r in u.operands.ranges if r.attrs.kind in ("loop", "global"))
        self.out = list(out)

    def stored(self, r: UOp) -> int:
        """How many elements the stores inside range r write (of a peeled kernel's segments, the interior's most)."""
        most = 0
        for st in self.stores:
            deps = self.deps[st]
            if r in deps:
                most = max(most, math.prod(const_extent(q) or 1 for q in deps if q.attrs.kind in ("loop", "global")))
        return most

    def segments(self) -> list[list[UOp]]:
        """The output ranges grouped by the loop nests they form (a kernel-peel segment each: ranges joined by a
        store under them), the nest that stores the most first (the interior); one group for an unpeeled kernel."""
        group: dict[UOp, int] = {r: i for i, r in enumerate(self.out)}

        def find(r: UOp) -> UOp:
            while self.out[group[r]] is not r:
                r = self.out[group[r]]
            return r
        for st in self.stores:
            rs = [r for r in self.deps[st] if r in group]
            for r in rs[1:]:
                a, b = find(rs[0]), find(r)
                if a is not b:
                    group[b] = group[a]
        segs: dict[UOp, list[UOp]] = {}
        for r in self.out:
            segs.setdefault(find(r), []).append(r)
        return sorted(segs.values(), key=lambda rs: -max(self.stored(r) for r in rs))

    def red_ranges(self) -> set[UOp]:
        return {r for u in self.reduces for r in u.operands.ranges}

    def coeff(self, mem: UOp, r: UOp) -> int | None:
        """The stride of r in the address of a load/store (0: it does not vary along r); None when not linear or
        gated along r."""
        a = _address(mem.operands.ptr)
        if a is None:
            return None
        off, gate = a
        gates = [gate] if gate is not None else []
        if mem.op is K.LOAD and mem.operands.gate is not None:
            gates.append(mem.operands.gate)
        if any(r in self.deps[g] for g in gates):
            return None
        c = linear_coeffs(off, frozenset((r,)), self.deps)
        return None if c is None else c.get(r, 0)

    def contiguous(self, r: UOp, load_strides: tuple[int, ...] = (1,), reduced_only: bool = False) -> bool:
        """Every store varying along r has stride 1 in it, and every load that varies along r one of `load_strides`
        (gates along r count as no stride). (1, LOAD_STRIDE): kernel-expand reads a stride-2 load's span (a pool).
        `reduced_only`: only the loads under a reduction count (a register tile's inner loop; an epilogue's strided
        read, once per output, becomes a gather of lanes: a ViT's residual read from the transposed patch conv)."""
        st = [s for s in self.stores if r in self.deps[s]]
        red = self.red_ranges() if reduced_only else set()
        return bool(st) and all(self.coeff(m, r) == 1 for m in st) and \
            all(self.coeff(x, r) in load_strides for x in self.loads
                if r in self.deps[x] and (not reduced_only or self.deps[x] & red))

    def reuse(self, r: UOp) -> int:
        """How many reads under a reduction do not vary along r (each is reused by every r iteration)."""
        red = self.red_ranges()
        return sum(1 for x in self.loads if self.deps[x] & red and r not in self.deps[x])

    def vector_reuse(self, r: UOp, vec: UOp | None) -> int:
        """How many reads under a reduction that vary along the vector range `vec` (vector loads) do not vary along
        r: tiling r beside vec reuses each such vector r times (a conv's input row across output channels), where a
        range whose tile reuses only broadcast scalars (a conv's weights across rows) would reload the vectors."""
        if vec is None or r is vec:
            return 0
        red = self.red_ranges()
        return sum(1 for x in self.loads if self.deps[x] & red and vec in self.deps[x] and r not in self.deps[x])

    def out_dtype(self) -> DType:
        return self.stores[0].operands.value.dtype if self.stores else dtypes.float32

    def expanded_ops(self, factors: dict[UOp, int]) -> int:
        """How many scalar ops kernel-expand can make of this kernel when each range r in `factors` becomes
        factors[r] lanes: an op is copied once per lane of the split ranges it depends on (an upper bound; a
        contiguous access becomes one vector op instead)."""
        if self._lane_deps is None:
            self._lane_deps = range_deps(self.kdef.toposort(), reduce_consumes=True)
        total = 0
        for rs in self._lane_deps.values():
            n = 1
            for r in rs:
                n *= factors.get(r, 1)
            total += n
        return total

    def work(self) -> int:
        n = 1
        for r in self.out:
            n *= const_extent(r) or 1
        red = 1
        for u in self.reduces:
            k = 1
            for r in u.operands.ranges:
                k *= const_extent(r) or 1
            red = max(red, k)
        return n * red


def _pow2_divisor(n: int, cap: int) -> int:
    """The largest power of two <= cap that divides n (1 if none above 1)."""
    f = 1
    while f * 2 <= cap and n % (f * 2) == 0:
        f *= 2
    return f


def _fullest_divisor(n: int, vw: int, cap: int, f: int) -> int:
    """The divisor of n up to cap whose lanes fill their vectors best (lanes / (vectors * vw)), the larger on a tie;
    f (a power of two below vw) unless one fills them better: a 14x14 plane's 196 = 7 x 28 lanes (two vectors of 16,
    7/8 full) where its power of two, 4, fills a quarter of one; a 7-wide row whole rather than scalar."""
    def fill(d: int) -> float:
        return d / (-(-d // vw) * vw)
    best = max((d for d in range(2, min(n, cap) + 1) if n % d == 0), key=lambda d: (fill(d), d), default=f)
    return best if fill(best) > fill(f) else f


def _leave_alone(kdef: UOp) -> bool:
    """A kernel the heuristic does not touch: already optimized (upcast/unroll ranges, vectors), or two ranges on
    one axis number (an opt names its range by axis)."""
    order = kdef.toposort()
    axes = [u.attrs.axis for u in order if u.op is K.RANGE]
    return len(axes) != len(set(axes)) or any(
        (u.op is K.RANGE and u.attrs.kind in _SPLIT_KINDS + _THREAD_KINDS) or u.dtype.count > 1 for u in order)


def heuristic_opts(kdef: UOp, t: Target) -> list[Opt]:
    """The opts the heuristic picks for one kernel on target t (the module docstring says how)."""
    if _leave_alone(kdef):
        return []
    k = _Kernel(kdef)
    budget = max(1, t.max_upcast)
    lanes = 1
    vw = t.vector_width(k.out_dtype())
    tails = _tail_opts(k, t, vw, budget)
    if tails:  # 0. a row no vector divides: a vector body and a tail, then the opts of the kernel that makes
        return tails + heuristic_opts(apply_opts(kdef, tails), t)
    wide = vw >= 2 and budget // vw >= WIDE_TILE_VECTORS
    upcast: dict[UOp, int] = {}
    segments = k.segments()
    interior = set(segments[0]) if segments else set()

    def fit_upcast(r: UOp, cap: int, ragged: bool = False) -> int:
        n = const_extent(r) or 1
        if vw >= 2 and k.contiguous(r, reduced_only=ragged):
            f = _pow2_divisor(n, min(vw * (2 if wide else 1), cap))
            if f < vw and n <= min(ROW_TILE_VECTORS * vw, cap) and n % max(2, vw // 2) == 0:
                return n  # a short row no full vector divides (56 = 3.5 x 16): all of it, the tail a half vector
            if f >= 2:
                return f
        if wide:
            f = _pow2_divisor(n, cap)
            g = 1 << (cap.bit_length() - 1)  # the rows a tile holds; ragged when no such power of two divides n
            if ragged and f < RAGGED_BELOW <= g and n >= RAGGED_MIN_STEPS * g and _ragged_ok(kdef, r):
                return g
            return f
        return next((f for f in t.upcast_sizes if 2 <= f <= cap and n % f == 0), 1)

    # 1. register tiling of kernels with a reduction (a depthwise window first, then a dot product)
    window = _window_tile(k, vw, budget)
    dot = _dot_tile(k, t, vw, budget) if k.reduces and window is None else None
    channels = _channel_tile(k, vw, budget, fit_upcast) if k.reduces and window is None and dot is None else None
    done: set[UOp] = set()
    if window is not None:
        upcast.update(window[0])
        for f in window[0].values():
            lanes *= f
    elif dot is not None:
        upcast.update(dot)
        done.update(r for r in dot if r.attrs.kind == "reduce")
        for f in dot.values():
            lanes *= f
    elif channels is not None:
        upcast.update(channels)
        for f in channels.values():
            lanes *= f
    elif k.reduces:
        # each loop nest its own tile (a peeled kernel's segments run one after the other: their registers are
        # not live together), the lanes the most of any
        seg_lanes = 1
        for seg in segments:
            lanes = 1
            cands = [r for r in seg if (const_extent(r) or 0) >= 2 and k.reuse(r) > 0]
            vec = next((r for r in cands if vw >= 2 and k.contiguous(r, reduced_only=True)), None)
            cands.sort(key=lambda r: (-k.reuse(r), not k.contiguous(r, reduced_only=True), -k.vector_reuse(r, vec),
                                      -k.out.index(r)))
            cands = cands[:2]
            smallest = min((f for f in t.upcast_sizes if f >= 2), default=2)
            for i, r in enumerate(cands):
                reserve = smallest ** (len(cands) - 1 - i)
                f = fit_upcast(r, budget // lanes // reserve, ragged=True)
                if f >= 2:
                    upcast[r] = f
                    lanes *= f
            seg_lanes = max(seg_lanes, lanes)
        lanes = seg_lanes
        if len(segments) == 1 and len(upcast) == 1 and len(cands) == 1 and len(k.reduces) == 1 \
                and cands[0] in k.deps[k.reduces[0]] and vw >= 2 and k.contiguous(cands[0]):
            # one vector range alone (a matrix-vector product with the weight laid out [K, N]): as many vectors
            # along it as ROW_TILE_VECTORS (in half vectors: 1000 = 25 x 40), so that each step reads a longer run
            # of a weight row into that many independent accumulator chains
            r = cands[0]
            n = const_extent(r) or 1
            f = max((d for d in range(upcast[r], min(n, ROW_TILE_VECTORS * vw, budget) + 1)
                     if n % d == 0 and d % max(2, vw // 2) == 0), default=upcast[r])
            lanes = lanes // upcast[r] * f
            upcast[r] = f
    # 2. a vector upcast of the contiguous output range
    if not upcast and vw >= 2:  # the innermost such range; of a peeled kernel's segments, the interior's
        for r in sorted(reversed(k.out), key=lambda r: -k.stored(r)):
            n = const_extent(r)
            strided = n is not None and not k.contiguous(r) and k.contiguous(r, (1, LOAD_STRIDE))
            if n is not None and n >= 2 and (k.contiguous(r) or strided):
                f = _pow2_divisor(n, min(vw, budget))
                if strided and f < vw // 2 and vw <= n <= min(ROW_TILE_VECTORS * vw, budget):
                    f = n  # a strided row no half vector divides (a pool's 55 columns): all of it
                elif f < vw:
                    f = _fullest_divisor(n, vw, min(ROW_TILE_VECTORS * vw, budget), f)
                if f >= 2:
                    upcast[r] = f
                    lanes *= f
                break
    # applied in axis order, so the new lane axes keep the order of the ranges they came from (kernel-expand lays
    # lanes out by axis: rows-major register tiles, reductions innermost)
    in_ends = set(k.out)
    # 3. partial accumulators of each long reduction read contiguously (a gpu shares it by threads instead: 6.)
    if t.kind == "cpu" and dot is None:
        accs = _accumulators(k, t, budget, set(upcast))
        for r, f in accs:
            upcast[r] = f
            done.add(r)
        # folded before anything reads them, so they do not multiply the output's lanes or each other's; but an
        # unrolled range of another reduction may still enclose one: the unroll cap counts the widest
        lanes *= max((f for _, f in accs), default=1)
    # 3. else unroll the innermost range of each reduction
    cap = budget * (t.unroll_sizes[0] if t.unroll_sizes else 1)
    unroll: dict[UOp, int] = dict(window[1]) if window is not None else {}
    done.update(unroll)
    for red in k.reduces:
        rs = red.operands.ranges
        r = rs[-1] if rs else None
        if r is None or r in done or r in in_ends or r.attrs.kind != "reduce":
            continue
        n = const_extent(r)
        if n is None or n < 2 or any(r in u.operands.ranges[:-1] for u in k.reduces):
            continue
        done.add(r)
        if n <= FULL_UNROLL_MAX and lanes * n <= cap:
            f = n
        else:
            f = next((u for u in t.unroll_sizes if 2 <= u < n and n % u == 0 and lanes * u <= cap), 1)
            if f == 1:  # none of the preferred sizes divides it (a 3x3 window's 9 taps): the largest divisor below them
                f = next((u for u in range(max(t.unroll_sizes, default=1), 1, -1) if n % u == 0 and lanes * u <= cap),
                         1)
        if f >= 2:
            unroll[r] = f
            lanes *= f
    _fit_code_size(k, upcast, unroll)
    opts: list[Opt] = [Opt("upcast", r.attrs.axis, f)
                       for r, f in sorted(upcast.items(), key=lambda rf: rf[0].attrs.axis)]
    opts += [Opt("unroll", r.attrs.axis, f) for r, f in unroll.items()]
    # loop order: a wide tile's contiguous range outermost (only when another output range is tiled too)
    # of a peeled kernel, the interior's loops (the border segments run on every core, beside its share)
    loops = [r for r in k.out if upcast.get(r) != const_extent(r) and r in interior]
    if wide and len([r for r in upcast if r in interior]) == 2 and len(loops) >= 2 and channels is None:
        first = next((r for r in loops if k.contiguous(r, reduced_only=True) and r in upcast), None)
        # not when a reduction of this loop nest does not vary along it (a row's mean beside a tile of columns):
        # every block of columns would compute it again
        if first is not None and first is not loops[0] and all(first in k.deps[red] for red in k.reduces
                                                                 if k.deps[red] & interior):
            opts.append(Opt("outer", first.attrs.axis))
            loops = [first, *(r for r in loops if r is not first)]
    # 4. threads
    if t.kind == "gpu":
        opts += [Opt(kind, axis, f) for kind, axis, f in gpu_thread_opts(apply_opts(kdef, opts), t)]  # type: ignore[arg-type]
    elif t.threads > 1 and loops and k.work() >= (PARALLEL_MIN_WORK if dot is None else DOT_PARALLEL_MIN_WORK):
        def outer(r: UOp) -> int:
            return (const_extent(r) or t.threads) // upcast.get(r, 1)
        r = next((r for r in loops if outer(r) >= t.threads), max(loops, key=outer))
        if outer(r) >= 2 and r.attrs.kind == "loop":
            opts.append(Opt("global", r.attrs.axis))
            if len(opts) >= 2 and opts[-2] == Opt("outer", r.attrs.axis) and _packs(kdef, opts, r.attrs.axis):
                opts.append(Opt("pack", r.attrs.axis))
    elif t.kind == "cpu" and opts and opts[-1].kind == "outer" and k.work() >= PARALLEL_MIN_WORK:
        # one thread: the outer range is still made global (one core runs all of it) when that lets it pack
        r = loops[0]
        if r.attrs.kind == "loop" and _packs(kdef, opts + [Opt("global", r.attrs.axis)], r.attrs.axis):
            opts += [Opt("global", r.attrs.axis), Opt("pack", r.attrs.axis)]
    return opts


def _ragged(n: int, vw: int) -> bool:
    """A range of n that no quarter of a vector divides (197; not a 14x14 pool's 196, whose 4 lanes the dot tile
    fills up with channels), spanning at least TAIL_MIN_VECTORS vectors."""
    return n >= TAIL_MIN_VECTORS * vw and _pow2_divisor(n, vw) < vw // 4


def _tail_opts(k: _Kernel, t: Target, vw: int, budget: int) -> list[Opt]:
    """0. on a cpu, `tail` opts (uopir.passes.kernel.tail) for the ranges step 2 and the accumulators of step 3 would
    leave scalar because no vector divides them (a ViT's attention rows of 197): the innermost output range of an
    unpeeled kernel, stored and read contiguously, that no reduction varies along, when no divisor up to
    ROW_TILE_VECTORS vectors fills half its vectors; and the innermost range of each reduction read contiguously
    (a float add or mul only where the target reassociates), unless the kernel takes a dot-product tile. The tail
    is the n % vw iterations left."""
    if t.kind != "cpu" or vw < 2 or len(k.segments()) != 1 or _dot_tile(k, t, vw, budget) is not None:
        return []  # (a dot-product tile fills its vectors with rows: a 7x7 global pool's 49)
    opts: list[Opt] = []
    r = k.out[-1] if k.out else None
    n = const_extent(r) if r is not None else None
    if r is not None and n is not None and r.attrs.kind == "loop" and _ragged(n, vw) and k.contiguous(r) \
            and not any(r in k.deps[red] for red in k.reduces):
        best = _fullest_divisor(n, vw, min(ROW_TILE_VECTORS * vw, budget), _pow2_divisor(n, vw))
        if best / (-(-best // vw) * vw) < 0.5:
            opts.append(Opt("tail", r.attrs.axis, vw))
    for red in k.reduces:
        rs = red.operands.ranges
        r = rs[-1] if rs else None
        n = const_extent(r) if r is not None else None
        if r is None or n is None or r.attrs.kind != "reduce" or not _ragged(n, vw) or red.attrs.op not in TAIL_OPS:
            continue
        if any(r in u.operands.ranges[:-1] for u in k.reduces) or any(o.axis == r.attrs.axis for o in opts):
            continue
        if red.dtype.scalar.is_float and red.attrs.op in ("add", "mul") and not t.reassociate_float_reductions:
            continue
        reads = [x for x in k.loads if r in k.deps[x] and x in red.operands.value.toposort()]
        if reads and all(k.coeff(x, r) == 1 for x in reads):
            opts.append(Opt("tail", r.attrs.axis, vw))
    return opts


def _window_tile(k: _Kernel, vw: int, budget: int) -> tuple[dict[UOp, int], dict[UOp, int]] | None:
    """1. (depthwise window) (upcast, unroll) of a kernel whose one reduction is a short window (at most
    WINDOW_MAX_TAPS taps of constant extent) that no output range shares: every load under it varies along the
    outermost output range (a depthwise conv's channel: nothing to reuse across channels; its input and weights, a
    pool's one load keeps its own schedule), and the input read along
    the contiguous output row moves with the window's innermost range by 1 (stride 1 or LOAD_STRIDE along the row).
    The row is the vector, whole when it spans at most ROW_TILE_VECTORS vectors (a row of 14: one masked vector),
    and every tap is unrolled, so each tap is one vector load of the input row times the channel's weight, a
    broadcast that does not vary along the rows (hoisted out of their loop). Of a peeled kernel (a padded window read
    in place: a reduction per segment), the interior's reduction, the one over the most outputs; the border segments
    keep the plain unroll. None when the kernel is not like that."""
    if vw < 2 or not k.reduces or not k.out:
        return None
    outs = {red: [r for r in k.out if r in k.deps[red]] for red in k.reduces}
    red = max(k.reduces, key=lambda u: math.prod(const_extent(r) or 1 for r in outs[u]))
    if len(outs[red]) < 2 or any(set(u.operands.ranges) & set(red.operands.ranges) for u in k.reduces if u is not red):
        return None
    taps = [r for r in red.operands.ranges]
    n_taps = 1
    for r in taps:
        n_taps *= const_extent(r) or WINDOW_MAX_TAPS + 1
    chan, row = outs[red][0], outs[red][-1]
    loaded = [x for x in k.loads if k.deps[x] & set(taps)]
    n = const_extent(row) or 0
    if not taps or n_taps > WINDOW_MAX_TAPS or chan is row or n < 2 or len(loaded) < 2 or \
            any(chan not in k.deps[x] for x in loaded) or not k.contiguous(row, (1, LOAD_STRIDE)):
        return None
    if not any(k.coeff(x, row) in (1, LOAD_STRIDE) and k.coeff(x, taps[-1]) == 1 for x in loaded):
        return None
    cap = min(ROW_TILE_VECTORS * vw, budget)
    f = n if n <= cap else _pow2_divisor(n, vw)
    if f < vw // 2 and n > cap:  # a long row no half vector divides (a peeled interior of 110): its fullest divisor
        f = _fullest_divisor(n, vw, cap, f)
    if f < 2 or f * n_taps > budget * WINDOW_MAX_TAPS:
        return None
    return {row: f}, {r: const_extent(r) or 1 for r in taps if (const_extent(r) or 1) > 1}


def _dot_tile(k: _Kernel, t: Target, vw: int, budget: int) -> dict[UOp, int] | None:
    """1. (dot products) The register tile of a kernel whose one reduction reads every load along its innermost
    range r with stride 1 while no output range is contiguous in its loads (nor a span kernel-expand reads: a
    strided pool's row): a matrix-vector product with the weight laid out [N, K], a squeeze-excite 1x1 conv on a 1x1
    input, a global pool. A vector of outputs would gather each lane from another row, so r is the vector instead:
    f partial sums (`upcast` of r, folded once per output after the loop), at least ACC_MIN_STEPS iterations of them.
    Beside it the innermost output range is upcast (its rows): by up to DOT_ROWS when some load under the reduction
    does not vary along it (each step loads one vector of x that every row's vector of weights reuses; f is
    DOT_VECTORS vectors then), else by as many rows as fill one vector when r is shorter than one (a 14x14 pool's
    196 = 4 x 49: 4 rows of 4, so its fused swish runs on full vectors; a 7x7 pool's 49, no vector at all: 16 rows,
    each lane's load its own, each sum in its order). Without rows that share x, partial sums only for a reduction
    of at least ACC_MIN_STEPS vectors, as _accumulators; beside them at least DOT_MIN_STEPS steps (an SE conv's
    48 -> 1152: 3 of 16 lanes). None when the kernel is not like that, or its reduction's vector with reuse would be
    under DOT_MIN_LANES (a long row with no reuse is _accumulators' case and gets the same partial sums there)."""
    if t.kind != "cpu" or vw < 2 or len(k.reduces) != 1 or any(k.contiguous(r, (1, LOAD_STRIDE)) for r in k.out):
        return None
    red = k.reduces[0]
    rs = red.operands.ranges
    r = rs[-1] if rs else None
    n = const_extent(r) if r is not None else None
    if r is None or n is None or r.attrs.kind != "reduce":
        return None
    if red.dtype.scalar.is_float and red.attrs.op in ("add", "mul") and not t.reassociate_float_reductions:
        return None
    reads = [x for x in k.loads if r in k.deps[x] and x in red.operands.value.toposort()]
    if not reads or any(k.coeff(x, r) != 1 for x in reads):
        return None
    rw = t.vector_width(red.dtype)
    long = n >= ACC_MIN_STEPS * rw  # partial sums change a float sum's order: only where they pay (_accumulators')
    outs = [o for o in reversed(k.out) if (const_extent(o) or 0) >= 2]
    rows = next((o for o in outs if k.reuse(o) > 0), None)
    if rows is not None:
        m = const_extent(rows) or 1
        g = next((d for d in range(min(m, DOT_ROWS), 1, -1) if m % d == 0), 1)
        f = _pow2_divisor(n, min(rw * (DOT_VECTORS if g >= 2 else ACC_VECTORS), budget // g,
                                 n // (ACC_MIN_STEPS if long else DOT_MIN_STEPS)))
        if f < DOT_MIN_LANES:
            return None
        return {r: f, rows: g} if g >= 2 else {r: f}
    f = _pow2_divisor(n, min(rw * ACC_VECTORS, budget, n // ACC_MIN_STEPS)) if long else 1
    if f >= rw or not outs:
        return None
    g = _pow2_divisor(const_extent(outs[0]) or 1, rw // f)
    if g < 2:  # no rows to fill the vector with: a short row alone keeps its order (an unroll)
        return None
    # a vector too short to fold keeps the reduction's order: rows alone (a 7x7 pool's 49: 16 rows, loads gathered)
    return {outs[0]: g} if f < DOT_MIN_LANES else {r: f, outs[0]: g}


def _channel_tile(k: _Kernel, vw: int, budget: int, fit: Callable[[UOp, int], int]) -> dict[UOp, int] | None:
    """1. (channel vectors) The register tile of a kernel whose contiguous output rows are too short for a vector (a
    conv's 7, 14 or 28 columns; a strided conv's reads, which are no vector at all) or no whole number of vectors (56
    columns: 3.5 x 16, a half vector per row computed twice or packed by shuffles) but which reads some input under
    the reduction with stride 1 along another output range (a conv's weights packed in blocks of output channels,
    nn_ops.CHANNEL_BLOCK): that range is the vector, one vector of the target's width or half of one (each vector
    load of it serves a whole row), and the output range the vector load does not vary along, the row when there is
    one, is upcast beside it by the largest divisor of its extent that fits the budget (at most CHANNEL_TILE_ROWS):
    each of its lanes is one broadcast input times the weight vector. None when the kernel is not like that."""
    if vw < 2:
        return None
    red = k.red_ranges()
    row = next((r for r in reversed(k.out) if k.contiguous(r)), None)
    if row is not None and fit(row, budget) % vw == 0:
        return None  # whole vectors along the row (a row tile that a half vector ends is 1/8 waste or shuffles)
    loaded = [x for x in k.loads if k.deps[x] & red]
    chan = next((r for r in reversed(k.out) if (const_extent(r) or 1) % max(2, vw // 2) == 0 and r is not row
                 and any(k.coeff(x, r) == 1 for x in loaded)), None)
    if chan is None:
        return None
    width = _pow2_divisor(const_extent(chan) or 1, vw)  # a whole vector, or half of one (blocks of 8 channels)
    vec_loads = [x for x in loaded if chan in k.deps[x]]
    beside = [r for r in reversed(k.out) if r is not chan and not any(r in k.deps[x] for x in vec_loads)
              and (const_extent(r) or 0) >= 2]
    if row in beside:
        beside.remove(row)
        beside.insert(0, row)
    tile = {chan: width}
    if beside:
        n = const_extent(beside[0]) or 1
        f = next((d for d in range(min(n, CHANNEL_TILE_ROWS, budget // width), 1, -1) if n % d == 0), 1)
        if f >= 2:
            tile[beside[0]] = f
    return tile


def _accumulators(k: _Kernel, t: Target, budget: int, upcast: set[UOp]) -> list[tuple[UOp, int]]:
    """3. on a cpu: (range, factor) of each reduction kept as partial results: the innermost range r of a
    kernel.reduce (its last operand, and no reduction's other one) along which every load under it reads consecutive
    elements (stride 1: a full sum's or a row sum's input) becomes ACC_VECTORS vectors of the reduced dtype's width
    (`upcast` of a reduce range), when the reduction runs at least ACC_MIN_STEPS iterations of them (else one vector
    when it runs at least ACC_SHORT_STEPS vectors: a 64-wide softmax row): independent
    vector chains instead of one scalar one, folded once after the loop. Only a reduction that depends on none of
    the `upcast` output ranges (softmax's max and sum beside its vector of outputs: its lanes are its own, within
    `budget`; a matmul's sum is in its register tile's lanes already). A float add/mul only on a target that lets
    it reassociate (`reassociate_float_reductions`)."""
    accs: list[tuple[UOp, int]] = []
    for red in k.reduces:
        rs = red.operands.ranges
        r = rs[-1] if rs else None
        n = const_extent(r) if r is not None else None
        if r is None or n is None or r.attrs.kind != "reduce" or any(r in u.operands.ranges[:-1] for u in k.reduces):
            continue
        if k.deps[red] & upcast or any(r is a for a, _ in accs):
            continue
        if red.dtype.scalar.is_float and red.attrs.op in ("add", "mul") and not t.reassociate_float_reductions:
            continue
        vw = t.vector_width(red.dtype)
        reads = [x for x in k.loads if r in k.deps[x] and x in red.operands.value.toposort()]
        if vw < 2 or not reads or any(k.coeff(x, r) != 1 for x in reads):
            continue
        f = _pow2_divisor(n, min(vw * ACC_VECTORS, budget, n // ACC_MIN_STEPS))
        if f < vw <= budget and n % vw == 0 and n >= ACC_SHORT_STEPS * vw:
            f = vw  # a short row (a TransformerEncoder's 64 tokens): one vector, its exps vector code, not libm calls
        if f >= vw:
            accs.append((r, f))
    return accs


def _fit_code_size(k: _Kernel, upcast: dict[UOp, int], unroll: dict[UOp, int]) -> None:
    """Shrink the lane factors (unrolls last to first, then upcasts) until kernel-expand's copies of the body stay
    within the budget (the kernel's iterations, clamped to [EXPAND_SMALL_OPS, EXPAND_MAX_OPS]): a long fused chain
    under a reduction, unrolled and upcast in full, would otherwise become tens of thousands of scalar ops (seconds of
    lowering and of C compile) for no speed."""
    def total() -> int:
        return k.expanded_ops({**upcast, **unroll})
    budget = min(EXPAND_MAX_OPS, max(EXPAND_SMALL_OPS, k.work()))
    if total() <= budget:
        return
    for factors in (unroll, upcast):
        for r in reversed(list(factors)):
            n = const_extent(r) or 1
            while factors.get(r, 1) > 1 and total() > budget:
                f = next((d for d in range(factors[r] - 1, 0, -1) if n % d == 0), 1)
                if f > 1:
                    factors[r] = f
                else:
                    del factors[r]
            if total() <= budget:
                return


def _packs(kdef: UOp, opts: list[Opt], axis: int) -> bool:
    """5. pack: whether, after `opts`, the global range on `axis` has panels to pack within PACK_MAX_BYTES."""
    tiled = apply_opts(kdef, opts)
    r0 = _range_of(tiled, axis)
    n0 = const_extent(r0) or 0
    panels = [n0 * _panel(inner) * ld.dtype.itemsize for ld, inner in _pack_loads(_Kernel(tiled), r0)]
    return bool(panels) and sum(panels) <= PACK_MAX_BYTES


def optimize_kernel(kdef: UOp, t: Target, strategy: str = "heuristic", width: int = 4,
                    budget: float | None = None) -> tuple[UOp, list[Opt]]:
    """One kernel optimized by `strategy` on target t: (the new kernel, the opts applied). A measured strategy
    (`beam`, uopir.passes.kernel.strategies; `budget` seconds, None: its default) raises StrategyUnavailable when
    nothing can measure on t, StrategyError when it is set up wrong."""
    if strategy == "none" or (strategy != "heuristic" and _leave_alone(kdef)):
        return kdef, []
    opts = heuristic_opts(kdef, t) if strategy == "heuristic" else get_strategy(strategy)(kdef, t, width, budget)
    return apply_opts(kdef, opts), opts


# ---- the pass --------------------------------------------------------------------------------------------------------
@dataclass
class KernelOptimizeOptions:
    """The options of kernel-optimize."""

    strategy: Literal["heuristic", "beam", "none"] = field(default="heuristic", metadata={
        "help": f"how opts are chosen (heuristic: from the target description; beam: a search timed on the target's "
                f"device, starting from the heuristic's opts; none: no change; {NOOPT_ENV}=1 in the environment makes "
                f"heuristic none, {BEAM_ENV}=N makes it beam with width N)"})
    target: str = field(default="cpu", metadata={"help": "the target description to read (cpu, gpu, a device)"})
    width: int = field(default=4, metadata={"help": "beam: the candidates kept per round"})
    budget: float = field(default=0.0, metadata={
        "help": f"beam: seconds one kernel's search may take (0: ${BUDGET_ENV}, else the search's default)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)
        if self.width < 1:
            e = ValueError(f"width={self.width}: a beam keeps at least one candidate")
            e.option = "width"  # type: ignore[attr-defined]
            raise e
        if self.budget != 0:
            try:
                check_budget(self.budget, "budget")
            except ValueError as e:
                e.option = "budget"  # type: ignore[attr-defined]
                raise


def _strategy(options: KernelOptimizeOptions) -> tuple[str, int]:
    """The strategy and width the options and the environment ask for (ValueError for a bad UOPIR_BEAM)."""
    strategy, width = options.strategy, options.width
    if strategy == "heuristic" and os.environ.get(NOOPT_ENV, "") not in ("", "0"):
        strategy = "none"
    if strategy == "heuristic":
        width = beam_width_from_env() or 0
        strategy = "beam" if width else strategy
    return strategy, width


def _around_kernels(options: KernelOptimizeOptions, total: Callable[[], int]) -> AbstractContextManager[object]:
    """What a measured strategy opens around a program's kernels (`total()` of them: its progress bar), else
    nothing (the heuristic does not count them)."""
    try:
        strategy, _ = _strategy(options)
    except ValueError:  # reported by the pass, at the kernel
        return nullcontext()
    return nullcontext() if strategy in ("heuristic", "none") else strategy_session(strategy, total())


@register_pass("kernel-optimize", summary="choose upcast/unroll/thread opts per kernel from the target description",
               consumes=("kernel",), produces=("kernel",), options=KernelOptimizeOptions,
               around_regions=_around_kernels)
def kernel_optimize(root: UOp, options: KernelOptimizeOptions, ctx: PassContext) -> UOp:
    try:
        strategy, width = _strategy(options)
    except ValueError as e:
        ctx.error(root, str(e))
        return root
    from_env = strategy != options.strategy  # UOPIR_BEAM: where nothing can measure (no device), the heuristic
    budget = options.budget or None
    try:
        t = target(options.target)
        if strategy == "beam":  # the search's settings, checked before any kernel
            budget = budget or beam_budget_from_env()
            beam_ray_from_env()
    except (UnknownTargetError, ValueError) as e:
        ctx.error(root, str(e))
        return root

    def run(kdef: UOp) -> UOp:
        try:
            try:
                new, opts = optimize_kernel(kdef, t, strategy, width, budget)
            except StrategyUnavailable:
                if not from_env:
                    raise
                new, opts = optimize_kernel(kdef, t, "heuristic")
        except (OptError, StrategyUnavailable, StrategyError) as e:
            ctx.error(kdef, f"kernel-optimize: {e}")
            return kdef
        if opts:
            ctx.count("kernels-optimized")
            for o in opts:
                ctx.count(f"{o.kind}-opts")
        return new

    if is_kernel_body(root):
        return run(root)
    with _around_kernels(options, lambda: count_regions(root, is_kernel_body)):  # the search's bar over the kernels
        return map_regions(root, is_kernel_body, run)
