"""kernel-optimize's heuristic: the opts it picks for a kernel from the target description.

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
     range under reductions that all vary along it (a matrix-vector product, weight [K, N]; an LSTM step's gate
     products, each its own reduction) gets up to ROW_TILE_VECTORS vectors in half vectors (1000: 40 lanes),
     independent chains through a longer run of each weight row, its code size counted in vectors. On a cpu, a kernel
     whose one reduction reads every load contiguously along its innermost range while no output range is
     contiguous (a matrix-vector product with the weight [N, K], a 1x1-spatial squeeze-excite conv, a global pool)
     gets a dot-product tile instead (`_dot_tile`): the reduction upcast into vectors of partial sums beside up to
     DOT_ROWS rows that share each vector of x (or, with nothing to share, as many rows as fill one vector);
  2. otherwise, a vector upcast of the contiguous output range (stride 1 in the store, and in every load that reads
     along it, or 2 where kernel-expand reads the span: a stride-2 pool, whose row no half vector divides is upcast
     whole up to ROW_TILE_VECTORS vectors) by the largest power of two that divides it and fits the vector width and
     `max_upcast`; when that is less than a vector, by the divisor up to ROW_TILE_VECTORS vectors whose lanes fill
     their vectors best (a 14x14 plane: 28 lanes, 7/8 of two vectors, not 4; a row of 7 whole, not scalar);
     a copy with no such range, stored contiguously along one range and read contiguously along another (a
     transpose), gets a square tile of both instead (kernel/transpose.py);
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
     (else the longest) becomes `global` when the kernel does at least `parallel_work(kind)` iterations: the
     target's row for what the kernel does per iteration (no reduction: "elementwise"; a window tile; a dot-product
     tile, all vectors at memory speed: a 1152 -> 48 SE conv runs in 12 us on one core; else "reduce"); on a
     gpu target every output range does; on a one-thread cpu a wide tile's outer range becomes global when it can
     pack (5.);
  5. pack: when that global range is a wide tile's `outer` contiguous range, each input read under the reduction
     along it and otherwise only along lanes and reduction ranges (a matmul's B: a 32-column panel whose rows lie a
     row of B apart, 4 KiB for 1024 columns, so they alias in the caches and defeat the prefetchers) is copied into
     a `kernel.local` laid out [global iteration][panel, row-major, by decreasing stride] (at most PACK_MAX_BYTES;
     only a panel read again by enough row blocks: kernel/pointwise.py's pack_pays)
     by a loop nest over fresh ranges, and the tile reads its panel from there, contiguous, through `kernel.after`
     (which orders the copy first). Each global iteration has its own panel, so the copy is exact under any order of
     the iterations; on a cpu each thread copies the panel of the block it is about to compute;
  6. gpu threads: on a gpu target kernel/gpu_threads.py picks `local` opts (an output range split onto a
     work-group's threads, the rest `global`: work-group ids) or `group` opts (a long reduction into few results
     shared by a work-group's threads).
  7. stash (kernel/stash.py): on a cpu, when the opts above make the one row range global and the output computes a
     row sum's operand again (softmax's exp), `stash` first, the same opts, then the fill loop upcast.
  8. regroup (kernel/regroup.py): on a cpu that may reorder float sums, a channel tile whose sum multiplies a factor
     of the reduction step alone (a squeeze-excite scale of the input) multiplies it into the weight vector first.
A peeled kernel whose loop nests are alike (a concat of equal sources) gets the opts of kernel/siblings.py instead.
A kernel that already has upcast/unroll ranges or vectors is left alone (the pass is idempotent). `UOPIR_NOOPT=1`
in the environment makes `heuristic` behave like `none` (tinygrad's NOOPT).
"""
from __future__ import annotations

from collections.abc import Callable

from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.passes.kernel.convtile import conv_blocks
from uopir.passes.kernel.expand import LOAD_STRIDE
from uopir.passes.kernel.facts import KernelFacts, fullest_divisor, pow2_divisor
from uopir.passes.kernel.gpu_threads import gpu_thread_opts
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.opts import (
    PACK_MAX_BYTES,
    SPLIT_KINDS,
    THREAD_KINDS,
    Opt,
    apply_opts,
    pack_loads,
    panel_size,
    ragged_ok,
    range_of,
)
from uopir.passes.kernel.pointwise import pack_pays, pointwise_blocks
from uopir.passes.kernel.regroup import regroup_products
from uopir.passes.kernel.siblings import sibling_opts
from uopir.passes.kernel.stash import stash_candidates
from uopir.passes.kernel.stash_choice import stash_opts
from uopir.passes.kernel.tail import TAIL_OPS
from uopir.passes.kernel.transpose import transpose_tile
from uopir.passes.kernel.window import window_tile
from uopir.passes.target import Target

__all__ = ["heuristic_opts", "leave_alone", "PARALLEL_MIN_WORK"]

PARALLEL_MIN_WORK = Target.parallel_min_work  # the default; a target's own field decides (host: see cpu runtime)
FULL_UNROLL_MAX = 16  # a reduction loop this short is unrolled completely
EXPAND_MAX_OPS = 8192  # scalar ops kernel-expand may make of one kernel (the unrolled, upcast body: code size)
EXPAND_SMALL_OPS = 1024  # ... and of a kernel that runs fewer iterations than EXPAND_MAX_OPS: at most its iterations
ACC_VECTORS = 4  # partial-result vectors of a long contiguous reduction (independent add chains: 4-cycle latency)
ACC_MIN_STEPS = 8  # ... when the reduction runs at least this many iterations of them (the fold after it is scalar)
ACC_SHORT_STEPS = 2  # a shorter one that runs at least this many vectors still gets one vector of partial results
ROW_TILE_VECTORS = 4  # a contiguous range no vector divides is upcast whole when it spans at most this many vectors
CHANNEL_TILE_ROWS = 16  # the most lanes of broadcast inputs beside a channel vector (accumulator vectors)
WIDE_TILE_VECTORS = 16  # accumulator vectors from which a register tile is two vectors wide (e.g. 8 rows x 2)
DOT_VECTORS = 2  # vectors of partial sums along a dot product's reduction (times DOT_ROWS rows: accumulators)
DOT_ROWS = 4  # output rows of a dot-product tile (each reuses the vector of x loaded for the others)
DOT_MIN_LANES = 4  # a dot product's reduction this few lanes wide is no vector worth its fold
DOT_MIN_STEPS = 2  # ... and steps of a short one beside rows (an SE conv's 48 -> 1152: 3 steps of 16 lanes)
TAIL_MIN_VECTORS = 2  # a ragged row this many vectors long or more gets a vector body and a scalar tail
RAGGED_BELOW = 4  # a register tile's row range whose largest power-of-two divisor is below this (197 tokens: 1) ...
RAGGED_MIN_STEPS = 4  # ... is upcast by the tile's rows anyway, its last lanes clamped, when it runs this many tiles


def leave_alone(kdef: UOp) -> bool:
    """A kernel the heuristic does not touch: already optimized (upcast/unroll ranges, vectors), or two ranges on
    one axis number (an opt names its range by axis)."""
    order = kdef.toposort()
    axes = [u.attrs.axis for u in order if u.op is K.RANGE]
    return len(axes) != len(set(axes)) or any(
        (u.op is K.RANGE and u.attrs.kind in SPLIT_KINDS + THREAD_KINDS) or u.dtype.count > 1 for u in order)




def heuristic_opts(kdef: UOp, t: Target, stash: bool = True) -> list[Opt]:
    """The opts the heuristic picks for one kernel on target t (the module docstring says how; stash=False: without
    the `stash` opt)."""
    if leave_alone(kdef):
        return []
    if (alike := sibling_opts(kdef, t, heuristic_opts)) is not None:  # a concat's nests alike (kernel/siblings.py)
        return alike
    if stash and t.kind == "cpu" and stash_candidates(kdef):  # a row's exp once into scratch (stash.py)
        return stash_opts(kdef, heuristic_opts(kdef, t, stash=False), t)
    k = KernelFacts(kdef)
    budget = max(1, t.max_upcast)
    lanes = 1
    vw = t.vector_width(k.out_dtype())
    tails = _tail_opts(k, t, vw, budget)
    if tails:  # 0. a row no vector divides: a vector body and a tail, then the opts of the kernel that makes
        return tails + heuristic_opts(apply_opts(kdef, tails), t)
    wide = vw >= 2 and budget // vw >= WIDE_TILE_VECTORS
    upcast: dict[UOp, int] = {}
    vector_range: dict[UOp, int] = {}  # an upcast whose lanes stay whole vectors (code size counts vectors)
    segments = k.segments()
    interior = set(segments[0]) if segments else set()

    def fit_upcast(r: UOp, cap: int, ragged: bool = False) -> int:
        n = const_extent(r) or 1
        if vw >= 2 and k.contiguous(r, reduced_only=ragged):
            f = pow2_divisor(n, min(vw * (2 if wide else 1), cap))
            if f < vw and n <= min(ROW_TILE_VECTORS * vw, cap) and n % max(2, vw // 2) == 0:
                return n  # a short row no full vector divides (56 = 3.5 x 16): all of it, the tail a half vector
            if f >= 2:
                return f
        if wide:
            f = pow2_divisor(n, cap)
            g = 1 << (cap.bit_length() - 1)  # the rows a tile holds; ragged when no such power of two divides n
            if ragged and f < RAGGED_BELOW <= g and n >= RAGGED_MIN_STEPS * g and ragged_ok(kdef, r):
                return g
            return f
        return next((f for f in t.upcast_sizes if 2 <= f <= cap and n % f == 0), 1)

    # 1. register tiling of kernels with a reduction (a depthwise window first, then a dot product)
    window = window_tile(k, vw, budget, min(ROW_TILE_VECTORS * vw, budget),
                         min(EXPAND_MAX_OPS, max(EXPAND_SMALL_OPS, k.work())))
    dot = _dot_tile(k, t, vw, budget) if k.reduces and window is None else None
    channels = _channel_tile(k, vw, budget, budget * (t.unroll_sizes[0] if t.unroll_sizes else 1), fit_upcast) \
        if k.reduces and window is None and dot is None else None
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
        upcast.update(channels[0])
        lanes = channels[2]
        blocks = pointwise_blocks(k, channels[0], budget)
        if blocks is not None:  # a pointwise conv over a small plane: more channel blocks, no unroll (pointwise.py)
            upcast[blocks[0]] = blocks[1]
            lanes *= blocks[1]
            done.update(k.red_ranges())
        elif (cb := conv_blocks(k, channels[0])) is not None:  # a window conv over few pixels (convtile.py)
            upcast[cb[0]] = cb[1]
            lanes *= cb[1]
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
        if len(segments) == 1 and len(upcast) == 1 and len(cands) == 1 and k.reduces \
                and all(cands[0] in k.deps[red] for red in k.reduces) and vw >= 2 and k.contiguous(cands[0]):
            # one vector range alone (a matrix-vector product with the weight laid out [K, N]): as many vectors
            # along it as ROW_TILE_VECTORS (in half vectors: 1000 = 25 x 40), so that each step reads a longer run
            # of a weight row into that many independent accumulator chains
            r = cands[0]
            n = const_extent(r) or 1
            f = max((d for d in range(upcast[r], min(n, ROW_TILE_VECTORS * vw, budget) + 1)
                     if n % d == 0 and d % max(2, vw // 2) == 0), default=upcast[r])
            lanes = lanes // upcast[r] * f
            upcast[r] = f
            vector_range[r] = vw
    # 2. a vector upcast of the contiguous output range (a copy read with a stride there: a square transpose tile)
    if not upcast and (tt := transpose_tile(k, vw)) is not None:
        upcast.update(tt)
        for f in tt.values():
            lanes *= f
    if not upcast and vw >= 2:  # the innermost such range; of a peeled kernel's segments, the interior's
        for r in sorted(reversed(k.out), key=lambda r: -k.stored(r)):
            n = const_extent(r)
            strided = n is not None and not k.contiguous(r) and k.contiguous(r, (1, LOAD_STRIDE))
            if n is not None and n >= 2 and (k.contiguous(r) or strided):
                f = pow2_divisor(n, min(vw, budget))
                if strided and f < vw // 2 and vw <= n <= min(ROW_TILE_VECTORS * vw, budget):
                    f = n  # a strided row no half vector divides (a pool's 55 columns): all of it
                elif f < vw:
                    f = fullest_divisor(n, vw, min(ROW_TILE_VECTORS * vw, budget), f)
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
    unroll: dict[UOp, int] = dict(window[1]) if window is not None else dict(channels[1]) if channels else {}
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
    _fit_code_size(k, upcast, unroll, vector_range)
    # (a channel tile's vector last, its lanes innermost: one weight vector times a broadcast input per row lane,
    # also where a peeled segment's row range has a later axis than the channels)
    last = next(iter(channels[0])) if channels is not None else None
    opts: list[Opt] = [Opt("upcast", r.attrs.axis, f)
                       for r, f in sorted(upcast.items(), key=lambda rf: (rf[0] is last, rf[0].attrs.axis))]
    opts += [Opt("unroll", r.attrs.axis, f) for r, f in unroll.items()]
    if last is not None and t.kind == "cpu" and t.reassociate_float_reductions and regroup_products(kdef, last):
        opts.insert(0, Opt("regroup", last.attrs.axis))  # a squeeze-excite scale into the weights (regroup.py)
    # loop order: a wide tile's contiguous range outermost (only when another output range is tiled too; not a
    # transpose tile, which reads no panel again)
    # of a peeled kernel, the interior's loops (the border segments run on every core, beside its share)
    loops = [r for r in k.out if upcast.get(r) != const_extent(r) and r in interior]
    if wide and k.reduces and len([r for r in upcast if r in interior]) == 2 and len(loops) >= 2 \
            and channels is None:
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
    elif t.threads > 1 and loops and k.work() >= t.parallel_work(
            "dot" if dot is not None else "window" if window is not None else "reduce" if k.reduces else "elementwise"):
        def outer(r: UOp) -> int:
            return (const_extent(r) or t.threads) // upcast.get(r, 1)
        r = next((r for r in loops if outer(r) >= t.threads), max(loops, key=outer))
        if outer(r) >= 2 and r.attrs.kind == "loop":
            opts.append(Opt("global", r.attrs.axis))
            if len(opts) >= 2 and opts[-2] == Opt("outer", r.attrs.axis) and _packs(kdef, opts, r.attrs.axis):
                opts.append(Opt("pack", r.attrs.axis))
    elif t.kind == "cpu" and opts and opts[-1].kind == "outer" and k.work() >= t.parallel_min_work:
        # one thread: the outer range is still made global (one core runs all of it) when that lets it pack
        r = loops[0]
        if r.attrs.kind == "loop" and _packs(kdef, opts + [Opt("global", r.attrs.axis)], r.attrs.axis):
            opts += [Opt("global", r.attrs.axis), Opt("pack", r.attrs.axis)]
    return opts


def _ragged(n: int, vw: int) -> bool:
    """A range of n that no quarter of a vector divides (197; not a 14x14 pool's 196, whose 4 lanes the dot tile
    fills up with channels), spanning at least TAIL_MIN_VECTORS vectors."""
    return n >= TAIL_MIN_VECTORS * vw and pow2_divisor(n, vw) < vw // 4


def _tail_opts(k: KernelFacts, t: Target, vw: int, budget: int) -> list[Opt]:
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
        best = fullest_divisor(n, vw, min(ROW_TILE_VECTORS * vw, budget), pow2_divisor(n, vw))
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


def _dot_tile(k: KernelFacts, t: Target, vw: int, budget: int) -> dict[UOp, int] | None:
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
        f = pow2_divisor(n, min(rw * (DOT_VECTORS if g >= 2 else ACC_VECTORS), budget // g,
                                 n // (ACC_MIN_STEPS if long else DOT_MIN_STEPS)))
        if f < DOT_MIN_LANES:
            return None
        return {r: f, rows: g} if g >= 2 else {r: f}
    f = pow2_divisor(n, min(rw * ACC_VECTORS, budget, n // ACC_MIN_STEPS)) if long else 1
    if f >= rw or not outs:
        return None
    g = pow2_divisor(const_extent(outs[0]) or 1, rw // f)
    if g < 2:  # no rows to fill the vector with: a short row alone keeps its order (an unroll)
        return None
    # a vector too short to fold keeps the reduction's order: rows alone (a 7x7 pool's 49: 16 rows, loads gathered)
    return {outs[0]: g} if f < DOT_MIN_LANES else {r: f, outs[0]: g}


def _channel_tile(k: KernelFacts, vw: int, budget: int, cap: int, fit: Callable[[UOp, int], int]
                  ) -> tuple[dict[UOp, int], dict[UOp, int], int] | None:
    """1. (channel vectors) The register tile of a kernel whose contiguous output rows are too short for a vector (a
    conv's 7, 14 or 28 columns; a strided conv's reads, which are no vector at all) or no whole number of vectors (56
    columns: 3.5 x 16, a half vector per row computed twice or packed by shuffles) but which reads some input under
    the reduction with stride 1 along another output range (a conv's weights packed in blocks of output channels,
    nn_ops.CHANNEL_BLOCK): that range is the vector, one vector of the target's width or half of one (each vector
    load of it serves a whole row), and the output range the vector load does not vary along, the row when there is
    one, is upcast beside it by the largest divisor of its extent that fits the budget (at most CHANNEL_TILE_ROWS):
    each of its lanes is one broadcast input times the weight vector. Of a conv whose padded input is read in
    place (kernel-peel's segments inside the channel range), each segment's row is upcast so, the interior's
    deciding, and each segment's reduction has its innermost range (a window row's taps) unrolled in full within
    `cap` lanes: a tile of the first segment alone (a border row) would leave the interior one accumulator per tap,
    and one lane count summed over the segments (which run one after the other) would unroll only the first.
    (upcast, unroll, the lanes of one segment's tile), or None when the kernel is not like that."""
    if vw < 2:
        return None
    red = k.red_ranges()
    rows = sorted((r for r in reversed(k.out) if k.contiguous(r)), key=lambda r: -k.stored(r))
    row = rows[0] if rows else None
    if row is not None and fit(row, budget) % vw == 0:
        return None  # whole vectors along the row (a row tile that a half vector ends is 1/8 waste or shuffles)
    loaded = [x for x in k.loads if k.deps[x] & red]
    chan = next((r for r in reversed(k.out) if (const_extent(r) or 1) % max(2, vw // 2) == 0 and r is not row
                 and any(k.coeff(x, r) == 1 for x in loaded)), None)
    if chan is None:
        return None
    width = pow2_divisor(const_extent(chan) or 1, vw)  # a whole vector, or half of one (blocks of 8 channels)
    vec_loads = [x for x in loaded if chan in k.deps[x]]
    beside = [r for r in reversed(k.out) if r is not chan and not any(r in k.deps[x] for x in vec_loads)
              and (const_extent(r) or 0) >= 2]
    tile = {chan: width}
    tiled = [r for r in rows if r in beside] or beside[:1]
    for r in tiled:
        n = const_extent(r) or 1
        f = next((d for d in range(min(n, CHANNEL_TILE_ROWS, budget // width), 1, -1) if n % d == 0), 1)
        if f >= 2:
            tile[r] = f
    unroll: dict[UOp, int] = {}
    lanes = width * max((tile.get(r, 1) for r in tiled), default=1)
    if len(tiled) > 1:  # peeled segments
        for red_op in k.reduces:
            r = red_op.operands.ranges[-1] if red_op.operands.ranges else None
            n = const_extent(r) if r is not None else None
            if r is not None and r.attrs.kind == "reduce" and n is not None and 2 <= n <= FULL_UNROLL_MAX \
                    and lanes * n <= cap:
                unroll[r] = n
    return tile, unroll, lanes


def _accumulators(k: KernelFacts, t: Target, budget: int, upcast: set[UOp]) -> list[tuple[UOp, int]]:
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
        f = pow2_divisor(n, min(vw * ACC_VECTORS, budget, n // ACC_MIN_STEPS))
        if f < vw <= budget and n % vw == 0 and n >= ACC_SHORT_STEPS * vw:
            f = vw  # a short row (a TransformerEncoder's 64 tokens): one vector, its exps vector code, not libm calls
        if f >= vw:
            accs.append((r, f))
    return accs


def _fit_code_size(k: KernelFacts, upcast: dict[UOp, int], unroll: dict[UOp, int],
                   vector: dict[UOp, int] | None = None) -> None:
    """Shrink the lane factors (unrolls last to first, then upcasts) until kernel-expand's copies of the body stay
    within the budget (the kernel's iterations, clamped to [EXPAND_SMALL_OPS, EXPAND_MAX_OPS]): a long fused chain
    under a reduction, unrolled and upcast in full, would otherwise become tens of thousands of scalar ops (seconds of
    lowering and of C compile) for no speed. A range in `vector` (its lanes: a matrix-vector product's contiguous
    outputs, whole vectors of that width) counts one copy per vector: an LSTM step's gate math on 4 vectors is 4
    vector statements per op, not 64."""
    vector = vector or {}

    def total() -> int:
        f = {**upcast, **unroll}
        return k.expanded_ops({r: -(-n // vector[r]) if r in vector else n for r, n in f.items()})
    budget = min(EXPAND_MAX_OPS, max(EXPAND_SMALL_OPS, k.work()))
    if total() <= budget:
        return
    for factors in (unroll, upcast):
        order = _outer_first(k, list(reversed(list(factors)))) if factors is unroll else list(reversed(list(factors)))
        for r in order:
            n = const_extent(r) or 1
            while factors.get(r, 1) > 1 and total() > budget:
                f = next((d for d in range(factors[r] - 1, 0, -1) if n % d == 0), 1)
                if f > 1:
                    factors[r] = f
                else:
                    del factors[r]
            if total() <= budget:
                break
        _keep_unrolls_innermost(k, unroll, upcast)
        if total() <= budget:
            return


def _outer_first(k: KernelFacts, order: list[UOp]) -> list[UOp]:
    """`order` with the ranges of each reduction swapped among their own places so its outer ones come first: a
    window's taps (ky, kx) shrink ky before kx, so the lanes left are always the reduction's innermost ranges."""
    out = list(order)
    for red in k.reduces:
        rs = red.operands.ranges
        slots = [i for i, r in enumerate(out) if r in rs]
        for i, r in zip(slots, sorted((out[i] for i in slots), key=rs.index), strict=True):
            out[i] = r
    return out


def _keep_unrolls_innermost(k: KernelFacts, unroll: dict[UOp, int], upcast: dict[UOp, int]) -> None:
    """Drop the unrolls kernel-expand cannot lay out: a reduction's laned (unrolled or upcast) ranges must be its
    innermost ones, each but the outermost of them laned whole (a loop left between two unrolled taps, as when a
    7x7 window's kx shrank and its ky did not, would split their lanes)."""
    for red in k.reduces:
        whole = True
        for r in reversed(red.operands.ranges):
            if not whole:
                unroll.pop(r, None)
            elif unroll.get(r, upcast.get(r)) != const_extent(r):
                whole = False


def _packs(kdef: UOp, opts: list[Opt], axis: int) -> bool:
    """5. pack: whether, after `opts`, the global range on `axis` has panels to pack within PACK_MAX_BYTES."""
    tiled = apply_opts(kdef, opts)
    r0 = range_of(tiled, axis)
    n0 = const_extent(r0) or 0
    k = KernelFacts(tiled)
    loads = pack_loads(k, r0)
    panels = [n0 * panel_size(inner) * ld.dtype.itemsize for ld, inner in loads]
    return bool(panels) and sum(panels) <= PACK_MAX_BYTES and pack_pays(k, loads)


