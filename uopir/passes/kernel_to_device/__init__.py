"""kernel-to-device{target=…}: loops made concrete for a target.

- `kernel.reduce %x, %r… {op}` becomes an accumulator: fresh `device.loop`s for its ranges (the ranges are
  replaced by them inside the reduced value only, so the same range outside the reduction keeps its own loop),
  `%acc = device.acc %identity, %loops… {id}` and `%new = device.accstore %acc, (%acc op %x)`, whose value (the
  accumulator after the update) stands for the reduction. device-linearize places the accumulator before its
  loops, the update inside them, and every reader of the result after them.
- A lane reduction (kernel-expand's form: M result lanes from N = M*g operand lanes) keeps an M-lane accumulator
  and updates it g times per iteration, step t folding lanes j*g+t into result lane j (`acc op pick(x, t)`), so
  every lane accumulates in the order the unexpanded reduction did; the picked lanes are computed from the loads and
  vectors that make them (kernel_to_device/lanes.py), not shuffled out of the whole product. With no range left the
  runs fold from the identity without a loop.
- Every other `kernel.range` becomes a `device.loop`, or a hardware id `device.special` where the target's launch
  limits allow: global ranges `global_id` (`group_id` when the kernel has local ranges), local ranges `local_id`,
  the innermost range on dim 0. On a cpu kernel-optimize marks at most one range global, the one its backend
  splits across the cores; on a gpu every output range.
- `kernel.end %v, %r0, %r1` becomes `device.endloop %l0, (device.endloop %l1, %v)` (the first range outermost);
  hardware ids need no end. Its value may be a store or a `core.group` of stores.

The update is exact against the reduction semantics (uopir.dialects.semantics): add/mul/max from the identity 0 / 1
/ the dtype's minimum; min from the maximum, as `-max(-acc, -x)` on floats (NaN and signed zeros as np.minimum),
`x < acc ? x : acc` on integers and `acc & x` on bools. A loop's id is its range's position among the kernel's
ranges (a range reduced twice gets a fresh id for its second loop); accumulators are numbered in the order they are
made (inner reductions first). device-linearize numbers both again in program order.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.core import const_value
from uopir.ir.dtype import DType, dtypes
from uopir.ir.pattern import PatternMatcher, UPat, graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.valuerange import vmax
from uopir.passes.device.common import in_kernels, resolve_target
from uopir.passes.kernel_to_device.lanes import pick_lanes
from uopir.passes.manager import PassContext, register_pass
from uopir.passes.target import Target

__all__ = ["kernel_to_device", "KernelToDeviceOptions", "reduce_identity", "reduce_update"]


# ---- reductions ------------------------------------------------------------------------------------------------------
def reduce_identity(op: str, d: DType) -> UOp:
    """The value a reduction starts from: 0, 1, the dtype's minimum (max) or maximum (min); false/true on bool."""
    s = d.scalar
    if s is dtypes.bool:
        v: object = op in ("mul", "min")
    else:
        v = {"add": 0, "mul": 1, "max": s.min, "min": s.max}[op]
    return UOp.const(d, v)


def reduce_update(op: str, acc: UOp, x: UOp) -> UOp:
    """The accumulator's next value, `acc op x`, exact for every dtype."""
    d = acc.dtype
    if op == "add":
        return UOp(C.ADD, d, (acc, x))
    if op == "mul":
        return UOp(C.MUL, d, (acc, x))
    if op == "max":
        return UOp(C.MAX, d, (acc, x))
    if d.scalar is dtypes.bool:
        return UOp(C.AND, d, (acc, x))
    if d.is_float:
        return UOp(C.NEG, d, (UOp(C.MAX, d, (UOp(C.NEG, d, (acc,)), UOp(C.NEG, d, (x,)))),))
    return UOp(C.WHERE, d, (UOp(C.CMPLT, dtypes.bool.vec(d.count), (x, acc)), x, acc))


@dataclass
class _Lowering:
    target: Target
    range_ids: dict[UOp, int]  # each range's position among the kernel's ranges (toposort): its loop's id
    specials: dict[UOp, UOp] = field(default_factory=dict)  # gpu: range -> its hardware id
    used: set[int] = field(default_factory=set)
    loops: int = 0
    accs: int = 0

    def loop(self, r: UOp) -> UOp:
        """A new loop for range r: the range's id, or a fresh one when that is taken (a range in two reductions)."""
        i = self.range_ids.get(r)
        if i is None or i in self.used:
            i = len(self.range_ids) + len(self.used)
            while i in self.used:
                i += 1
        self.used.add(i)
        self.loops += 1
        return UOp(D.LOOP, dtypes.index, (r.src[0],), i)


def _fold_lanes(op: str, acc: UOp, x: UOp, lanes: int) -> UOp:
    """`acc` updated with every lane of x: result lane j folds x's run j (lanes j*g .. j*g+g-1, in order), the runs
    side by side as one vector op per step (g = x's lanes / `lanes`)."""
    g = x.dtype.count // lanes
    if g == 1:
        return reduce_update(op, acc, x)
    for t in range(g):
        acc = reduce_update(op, acc, pick_lanes(x, tuple(j * g + t for j in range(lanes))))
    return acc


def _lower_reduce(ctx: _Lowering, r: UOp) -> UOp:
    value, ranges = r.src[0], r.src[1:]
    if not ranges:
        if value.dtype.count == r.dtype.count:
            return value  # a reduction over nothing is its value (not `identity op value`: -0.0 + 0.0 is +0.0)
        return _fold_lanes(r.arg, reduce_identity(r.arg, r.dtype), value, r.dtype.count)  # lane runs only
    loops = [ctx.loop(rg) for rg in ranges]
    x = value.substitute(dict(zip(ranges, loops, strict=True)))
    ctx.accs += 1
    acc = UOp(D.ACC, r.dtype, (reduce_identity(r.arg, r.dtype), *loops), ctx.accs - 1)
    return UOp(D.ACCSTORE, r.dtype, (acc, _fold_lanes(r.arg, acc, x, r.dtype.count)))


def _lower_range(ctx: _Lowering, r: UOp) -> UOp:
    return ctx.specials.get(r) or ctx.loop(r)


def _lower_end(e: UOp) -> UOp:
    out = e.src[0]
    for lp in reversed(e.src[1:]):
        if lp.op is D.LOOP:
            out = UOp(D.ENDLOOP, dtypes.void, (lp, out))
    return out


# Two matchers, run one after the other: reductions first (so they see their own ranges), then the ranges left.
REDUCES = PatternMatcher([
    (UPat(K.REDUCE, name="r"), _lower_reduce, "reduce-to-accumulator"),
])
RANGES = PatternMatcher([
    (UPat(K.RANGE, name="r"), _lower_range, "range-to-loop"),
    (UPat(K.END, name="e"), _lower_end, "end-to-endloop"),
])


# ---- launch dimensions (a whole-kernel decision, so plain code) ------------------------------------------------------
def _size(r: UOp) -> int | None:
    """The largest trip count of a range, if bounded."""
    end = r.src[0]
    if end.op is C.CONST:
        return int(const_value(end))
    hi = vmax(end)
    return int(hi) if isinstance(hi, int) and hi < 2**62 else None


def _hardware_ids(kdef: UOp, t: Target) -> dict[UOp, UOp]:
    """Global and local ranges that fit the launch limits, as hardware ids; the innermost range gets dim 0. On a cpu
    (one thread per block) only global ranges qualify: kernel-optimize marks the one to split across the cores."""
    ranges = [u for u in kdef.toposort() if u.op is K.RANGE]
    glob = [r for r in ranges if r.arg[1] == "global"]
    loc = [r for r in ranges if r.arg[1] == "local"]
    out: dict[UOp, UOp] = {}
    threads = 1
    for dim, r in enumerate(reversed(loc[-3:])):
        n = _size(r)
        if n is None or n > t.max_local_dims[dim] or threads * n > t.max_threads_per_block:
            break
        threads *= n
        out[r] = UOp(D.SPECIAL, dtypes.index, (r.src[0],), ("local_id", dim))
    kind = "group_id" if out else "global_id"
    for dim, r in enumerate(reversed(glob[-3:])):
        n = _size(r)
        if n is None or n > t.max_global_dims[dim]:
            break
        out[r] = UOp(D.SPECIAL, dtypes.index, (r.src[0],), (kind, dim))
    return out


@dataclass
class KernelToDeviceOptions:
    target: str = field(default="cpu", metadata={"help": "a target name: cpu, gpu or a device (python, c, ...)"})


@register_pass("kernel-to-device", summary="reductions to accumulators, ranges to loops (cpu) or hardware ids (gpu)",
               consumes=("core", "kernel"), produces=("core", "kernel", "device"), options=KernelToDeviceOptions)
def kernel_to_device(root: UOp, options: KernelToDeviceOptions, ctx: PassContext) -> UOp:
    t = resolve_target(options.target, root, ctx)
    if t is None:
        return root

    def lower(kdef: UOp) -> UOp:
        if kdef.op is not K.DEF:
            return kdef  # already linearized
        ranges = [u for u in kdef.toposort() if u.op is K.RANGE]
        lw = _Lowering(t, {r: i for i, r in enumerate(ranges)}, _hardware_ids(kdef, t))
        out = graph_rewrite(kdef, REDUCES, ctx=lw, stats=ctx.stats)
        out = graph_rewrite(out, RANGES, ctx=lw, stats=ctx.stats)
        ctx.count("accumulators", lw.accs)
        ctx.count("loops", lw.loops)
        ctx.count("hardware-ids", len(lw.specials))
        return out
    return in_kernels(root, lower)
