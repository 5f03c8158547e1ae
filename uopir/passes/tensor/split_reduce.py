"""`tensor-split-reduce{target=…}`: a large reduction to fewer outputs than the target has threads becomes two
reductions with a buffer between them, so that both cores work on it.

kernel-optimize spreads a kernel over the cores by its outermost output range (`global`); a full sum has no output
range, and a reduction to one or a few values runs on one core. Here (tinygrad's split_reduceop does the same in its
scheduler, by reshaping the reduced axis) `reduce(x, axes)` becomes

    partials = contiguous(reduce(reshape(x, [.., P, c, ..]), [c, other reduced axes]))   # outputs x P values
    result   = reduce(partials, [P])                                                       # folds the P partials

The first kernel has an output range of P (a multiple of the threads: it becomes `global`) and a contiguous inner
reduction of c (a multiple of SPLIT_ALIGN: it gets kernel-optimize's vector accumulators); `contiguous` is the
kernel boundary. Size-1 axes are dropped and adjacent axes of one kind merged first, so `x.sum()` over any shape
reduces one flat axis. When P * c does not cover the axis, the rest (fewer than P * SPLIT_ALIGN elements) is reduced
on its own beside the P partials and combined elementwise (add, mul, max; min as a compare), in the second kernel.

Exactness (uopir.backends.tolerance): integer, bool, max and min reductions give the same value in any order; a
float add or mul is split only where the target allows reassociation (`reassociate_float_reductions`). A target of
one thread (the generic cpu, the interpreter), a gpu (kernel-optimize shares long reductions by work-group threads
there) and a symbolic shape are left alone, and so is the frontend's one-hot pick (`where(index == arange, x, 0)`:
kernel-simplify folds it into one load, so there is no long reduction left to share).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from uopir.dialects import core, tensor
from uopir.ir.uop import UOp
from uopir.passes.kernel_to_device import reduce_update
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import Target, UnknownTargetError, check_target_option, target

__all__ = ["split_reductions", "split_reduce", "SplitReduceOptions", "SPLIT_MIN_WORK", "SPLIT_ALIGN",
           "SPLIT_PER_THREAD"]

# elements reduced into each output below which one core does it: the split costs a second kernel and a threaded
# launch, measured 40-50 µs more per call here (a 2^18 f32 sum: 41 -> 61 µs, 2^20: 89 -> 110 µs on llvm under load),
# while one core reads 4 MiB (2^20 f32) in ~100 µs and two in ~50: below that the split cannot pay
SPLIT_MIN_WORK = 1 << 20
# the chunk of each partial is a multiple of this: a whole number of kernel-optimize's vector accumulators
# (4 x 16 lanes), aligned chunk starts
SPLIT_ALIGN = 1024
SPLIT_PER_THREAD = 1  # partials per thread (the runtime splits a global range statically: one each is balanced)


def _one_hot_pick(x: UOp) -> bool:
    """Is x `where(... & v == arange ..., value, z)`, the frontend's one-hot pick (gathers, embeddings)? Its reduction
    becomes one load in kernel-simplify (fold-one-hot): splitting it would only add a kernel and a combine."""
    while x.op is core.CAST or x.op is core.BITCAST:
        x = x.src[0]
    if x.op is not core.WHERE:
        return False
    conds, seen = [x.src[0]], 0
    while conds and seen < 64:
        c, seen = conds.pop(), seen + 1
        if c.op is core.AND:
            conds.extend(c.src)
        elif c.op is core.CMPEQ:
            for side in c.src:
                while side.op in tensor.MOVEMENT_OPS or side.op is core.CAST:
                    side = side.src[0]
                if side.op is tensor.ARANGE:
                    return True
    return False


def _splittable(u: UOp, t: Target) -> bool:
    op, d = u.attrs.op, u.dtype
    if _one_hot_pick(u.operands.x):
        return False
    if d.is_float and op in ("add", "mul") and not t.reassociate_float_reductions:
        return False
    if d.is_bool and op in ("add", "mul"):
        return False
    shape = u.operands.x.shape
    return all(type(s) is int for s in shape)


def split_reduce(u: UOp, t: Target) -> UOp | None:
    """The two-stage form of tensor.reduce u for target t, or None when u stays one reduction."""
    if t.kind != "cpu" or t.threads <= 1 or not _splittable(u, t):
        return None
    x, op, axes = u.operands.x, u.attrs.op, set(u.attrs.axes)
    shape: tuple[int, ...] = x.shape
    outputs = math.prod(s for i, s in enumerate(shape) if i not in axes)
    work = math.prod(s for i, s in enumerate(shape) if i in axes)
    if outputs >= t.threads or work < SPLIT_MIN_WORK:
        return None
    # drop size-1 axes, merge adjacent axes of one kind: (size, reduced) per merged axis
    merged: list[list] = []
    for i, s in enumerate(shape):
        if s == 1:
            continue
        r = i in axes
        if merged and merged[-1][1] == r:
            merged[-1][0] *= s
        else:
            merged.append([s, r])
    m_shape = tuple(s for s, _ in merged)
    red = [i for i, (_, r) in enumerate(merged) if r]
    g = max(red, key=lambda i: (m_shape[i], -i))  # the largest reduced axis (the outermost of equal ones)
    n = m_shape[g]
    p = t.threads * SPLIT_PER_THREAD
    c = n // (p * SPLIT_ALIGN) * SPLIT_ALIGN
    if c == 0:
        return None
    xm = x if m_shape == shape else tensor.movement(tensor.RESHAPE, x, m_shape)
    main = xm if p * c == n else tensor.movement(
        tensor.SHRINK, xm, tuple((0, p * c) if i == g else (0, s) for i, s in enumerate(m_shape)))
    split = tensor.movement(tensor.RESHAPE, main, m_shape[:g] + (p, c) + m_shape[g + 1:])
    axes1 = tuple(sorted({g + 1} | {i if i < g else i + 1 for i in red if i != g}))
    partials = UOp(tensor.CONTIGUOUS, u.dtype, (UOp(tensor.REDUCE, u.dtype, (split,), (op, axes1)),))
    out = UOp(tensor.REDUCE, u.dtype, (partials,), (op, (g,)))
    if p * c != n:
        m_out = tuple(1 if i in red else s for i, s in enumerate(m_shape))
        rest = tensor.movement(tensor.SHRINK, xm,
                               tuple((p * c, n) if i == g else (0, s) for i, s in enumerate(m_shape)))
        out = reduce_update(op, tensor.movement(tensor.RESHAPE, out, m_out),
                       UOp(tensor.REDUCE, u.dtype, (rest,), (op, tuple(red))))
    return out if out.shape == u.shape else tensor.movement(tensor.RESHAPE, out, u.shape)


def split_reductions(root: UOp, t: Target) -> tuple[UOp, int]:
    """root with every reduction that split_reduce splits in two stages, and how many were."""
    new: dict[UOp, UOp] = {}
    count = 0
    for u in root.toposort():  # operands first: a reduction over a split one reads the rewritten graph
        src = tuple(new[s] for s in u.src)
        v = u if src == u.src else u.replace(src=src)
        if v.op is tensor.REDUCE and (s := split_reduce(v, t)) is not None:
            v, count = s, count + 1
        new[u] = v
    return new[root], count


@dataclass
class SplitReduceOptions:
    """tensor-split-reduce's options."""
    target: str = field(default="cpu", metadata={"help": "the target description to read (its threads, and whether "
                                                         "float sums may change order)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)


@register_pass("tensor-split-reduce", summary="split a large reduction to fewer outputs than threads into per-thread "
                                              "partials and a combine (two kernels)",
               consumes=("tensor",), produces=("tensor",), options=SplitReduceOptions)
def _split_reduce_pass(root: UOp, options: SplitReduceOptions, ctx: PassContext) -> UOp:
    try:
        t = target(options.target)
    except UnknownTargetError as e:
        ctx.error(root, str(e))
        return root
    out, n = split_reductions(root, t)
    ctx.count("split", n)
    return out
