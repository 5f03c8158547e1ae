"""kernel-optimize's heuristic: the opts it picks for a kernel from the target description.

This module runs the steps in order; each step that is a choice of its own lives in a module beside it: tail_choice
(0.), window, dot, channeltile, pointwise, convtile, regtile (1.), transpose, rowtile (2.), accumulate, unroll,
codesize (3.), loop_order, cpu_threads, gpu_threads (4.-6.), stash_choice (7.), regroup (8.).

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
     gets a dot-product tile instead (kernel/dot.py): the reduction upcast into vectors of partial sums beside up to
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

from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.passes.kernel.accumulate import accumulators
from uopir.passes.kernel.channeltile import channel_tile
from uopir.passes.kernel.codesize import code_budget, fit_code_size
from uopir.passes.kernel.coltail import column_tail, column_tail_axis
from uopir.passes.kernel.convtile import conv_blocks
from uopir.passes.kernel.cpu_threads import cpu_thread_opts
from uopir.passes.kernel.dot import dot_tile
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.gpu_threads import gpu_thread_opts
from uopir.passes.kernel.loop_order import loop_order
from uopir.passes.kernel.opts import SPLIT_KINDS, THREAD_KINDS, Opt, apply_opts
from uopir.passes.kernel.pointwise import pointwise_blocks
from uopir.passes.kernel.regroup import regroup_products
from uopir.passes.kernel.regtile import fit_upcast, register_tile
from uopir.passes.kernel.rowtile import ROW_TILE_VECTORS, row_upcast
from uopir.passes.kernel.siblings import sibling_opts
from uopir.passes.kernel.stash import stash_candidates
from uopir.passes.kernel.stash_choice import stash_opts
from uopir.passes.kernel.tail_choice import tail_opts
from uopir.passes.kernel.transpose import transpose_tile
from uopir.passes.kernel.unroll import reduction_unrolls
from uopir.passes.kernel.window import window_tile
from uopir.passes.target import Target

__all__ = ["heuristic_opts", "leave_alone", "PARALLEL_MIN_WORK", "WIDE_TILE_VECTORS"]

PARALLEL_MIN_WORK = Target.parallel_min_work  # the default; a target's own field decides (host: see cpu runtime)
WIDE_TILE_VECTORS = 16  # accumulator vectors from which a register tile is two vectors wide (e.g. 8 rows x 2)


def leave_alone(kdef: UOp) -> bool:
    """A kernel the heuristic does not touch: already optimized (upcast/unroll ranges, vectors), or two ranges on
    one axis number (an opt names its range by axis)."""
    order = kdef.toposort()
    axes = [u.attrs.axis for u in order if u.op is K.RANGE]
    return len(axes) != len(set(axes)) or any(
        (u.op is K.RANGE and u.attrs.kind in SPLIT_KINDS + THREAD_KINDS) or u.dtype.count > 1 for u in order)


def heuristic_opts(kdef: UOp, t: Target, stash: bool = True, skip: frozenset[int] = frozenset()) -> list[Opt]:
    """The opts the heuristic picks for one kernel on target t (the module docstring says how; stash=False: without
    the `stash` opt; `skip`: a column tail's axes, upcast whole, never a register tile's candidates)."""
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
    tails = tail_opts(k, t, vw, budget)
    if tails:  # 0. a row no vector divides: a vector body and a tail, then the opts of the kernel that makes
        cols = frozenset([column_tail_axis(kdef)]) if tails == [column_tail(k, vw)] else frozenset()
        return tails + heuristic_opts(apply_opts(kdef, tails), t, skip=cols)
    wide = vw >= 2 and budget // vw >= WIDE_TILE_VECTORS
    upcast: dict[UOp, int] = {}
    vector_range: dict[UOp, int] = {}  # an upcast whose lanes stay whole vectors (code size counts vectors)

    # 1. register tiling of kernels with a reduction (a depthwise window first, then a dot product, a channel tile)
    window = window_tile(k, vw, budget, min(ROW_TILE_VECTORS * vw, budget), code_budget(k))
    dot = dot_tile(k, t, vw, budget) if k.reduces and window is None else None
    channels = channel_tile(k, vw, budget, budget * (t.unroll_sizes[0] if t.unroll_sizes else 1),
                            lambda r, cap: fit_upcast(k, t, vw, wide, r, cap)) \
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
    elif k.reduces:  # a matmul-like tile, each loop nest its own (regtile.py)
        upcast, vector_range, lanes = register_tile(k, t, vw, budget, wide, skip)
    # 2. a vector upcast of the contiguous output range (a copy read with a stride there: a square transpose tile)
    if not upcast and (tt := transpose_tile(k, vw)) is not None:
        upcast.update(tt)
        for f in tt.values():
            lanes *= f
    if not upcast:  # the innermost such range; of a peeled kernel's segments, the interior's (rowtile.py)
        upcast.update(row_upcast(k, vw, budget))
        for f in upcast.values():
            lanes *= f
    # applied in axis order, so the new lane axes keep the order of the ranges they came from (kernel-expand lays
    # lanes out by axis: rows-major register tiles, reductions innermost)
    # 3. partial accumulators of each long reduction read contiguously (a gpu shares it by threads instead: 6.)
    if t.kind == "cpu" and dot is None:
        accs = accumulators(k, t, budget, set(upcast))
        for r, f in accs:
            upcast[r] = f
            done.add(r)
        # folded before anything reads them, so they do not multiply the output's lanes or each other's; but an
        # unrolled range of another reduction may still enclose one: the unroll cap counts the widest
        lanes *= max((f for _, f in accs), default=1)
    # 3. else unroll the innermost range of each reduction (unroll.py)
    cap = budget * (t.unroll_sizes[0] if t.unroll_sizes else 1)
    unroll: dict[UOp, int] = dict(window[1]) if window is not None else dict(channels[1]) if channels else {}
    done.update(unroll)
    unroll.update(reduction_unrolls(k, t, lanes, cap, done))
    fit_code_size(k, upcast, unroll, vector_range)  # codesize.py
    # (a channel tile's vector last, its lanes innermost: one weight vector times a broadcast input per row lane,
    # also where a peeled segment's row range has a later axis than the channels)
    last = next(iter(channels[0])) if channels is not None else None
    opts: list[Opt] = [Opt("upcast", r.attrs.axis, f)
                       for r, f in sorted(upcast.items(), key=lambda rf: (rf[0] is last, rf[0].attrs.axis))]
    opts += [Opt("unroll", r.attrs.axis, f) for r, f in unroll.items()]
    if last is not None and t.kind == "cpu" and t.reassociate_float_reductions and regroup_products(kdef, last):
        opts.insert(0, Opt("regroup", last.attrs.axis))  # a squeeze-excite scale into the weights (regroup.py)
    # loop order: a wide tile's contiguous range outermost (loop_order.py)
    loops, outer = loop_order(k, upcast, wide and channels is None)
    if outer is not None:
        opts.append(outer)
    # 4. threads (gpu_threads.py, cpu_threads.py: and 5. pack)
    if t.kind == "gpu":
        opts += [Opt(kind, axis, f) for kind, axis, f in gpu_thread_opts(apply_opts(kdef, opts), t)]  # type: ignore[arg-type]
    else:
        kind = "dot" if dot is not None else "window" if window is not None else "reduce" if k.reduces \
            else "elementwise"
        opts += cpu_thread_opts(k, t, opts, loops, upcast, kind)
    return opts
