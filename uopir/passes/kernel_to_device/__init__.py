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
  runs fold from the identity without a loop; the runs of an accumulator's result (kernel-optimize's partial
  accumulators, after their loop) first halve as a tree where the order may change (integers, max/min, float
  add/mul on a target that reassociates), each run's first half combined with its second in one vector op per step.
- Every other `kernel.range` becomes a `device.loop`, or a hardware id `device.special` where the target's launch
  limits allow: global ranges `global_id` (`group_id` when the kernel has local ranges), local ranges `local_id`,
  the innermost range on dim 0. On a cpu kernel-optimize marks at most one range global, the one its backend
  splits across the cores, or one per loop nest of a peeled copy whose nests are alike (kernel/siblings.py): global
  ranges of one extent side by side share one id, one loop over the ids that runs every nest's body (only where no
  load reads a buffer the kernel stores to: the nests' iterations interleave); on a gpu every output range.
- A reduction over a `group` range that became a local id (a gpu with local memory) is shared by the work-group's
  threads: each reduces its part, stores it to `kernel.local` at its id, and a tree of barrier-separated steps
  combines the parts (`_lower_group_reduce`); a store that varies over no local id is gated to local id 0.
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
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat
from uopir.ir.valuerange import vmax
from uopir.passes.device.common import in_kernels, resolve_target
from uopir.passes.device.devectorize import gep
from uopir.passes.kernel.indexmath import const_extent, range_deps
from uopir.passes.kernel.siblings import reads_its_stores
from uopir.passes.kernel.stash import private_rows
from uopir.passes.kernel_to_device.lanes import pick_lanes
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import Target, check_target_option

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
    """What lowering one kernel keeps: its target, the ids of its loops, its hardware ids and the counts so far."""
    target: Target
    range_ids: dict[UOp, int]  # each range's position among the kernel's ranges (toposort): its loop's id
    specials: dict[UOp, UOp] = field(default_factory=dict)  # gpu: range -> its hardware id
    used: set[int] = field(default_factory=set)
    loops: int = 0
    accs: int = 0
    locals: int = 0  # local buffers made for group reductions

    def loop(self, r: UOp) -> UOp:
        """A new loop for range r: the range's id, or a fresh one when that is taken (a range in two reductions)."""
        i = self.range_ids.get(r)
        if i is None or i in self.used:
            i = len(self.range_ids) + len(self.used)
            while i in self.used:
                i += 1
        self.used.add(i)
        self.loops += 1
        return UOp(D.LOOP, dtypes.index, (r.operands.end,), i)

    def fresh_loop(self, end: UOp) -> UOp:
        """A loop of a fresh id over [0, end) (no range of the kernel had it)."""
        i = len(self.range_ids) + len(self.used)
        while i in self.used:
            i += 1
        self.used.add(i)
        self.loops += 1
        return UOp(D.LOOP, dtypes.index, (end,), i)


def _tree_fold(op: str, x: UOp, lanes: int) -> UOp:
    """x's runs (lanes j*g .. j*g+g-1 for each result lane j) halved while g is even: the first half of every run
    combined with its second half, one vector op per step, log2(g) steps instead of g serial ones. The order of the
    operations changes, so only where it may (`_may_reorder`)."""
    g = x.dtype.count // lanes
    while g > 1 and g % 2 == 0:
        h = g // 2
        lo = gep(x, tuple(j * g + t for j in range(lanes) for t in range(h)))  # a plain gep: the halves stay vectors
        hi = gep(x, tuple(j * g + h + t for j in range(lanes) for t in range(h)))
        x, g = reduce_update(op, lo, hi), h
    return x


def _may_reorder(op: str, dtype: DType, t: Target) -> bool:
    """Whether a reduction's lanes may fold in another order than the sequential one: always for integers, bools,
    max and min (exact in any order); float add/mul where the target allows (the `accumulate` tolerance class)."""
    return not dtype.scalar.is_float or op in ("max", "min") or t.reassociate_float_reductions


def _fold_lanes(op: str, acc: UOp, x: UOp, lanes: int) -> UOp:
    """`acc` updated with every lane of x: result lane j folds x's run j (lanes j*g .. j*g+g-1, in order), the runs
    side by side as one vector op per step (g = x's lanes / `lanes`)."""
    g = x.dtype.count // lanes
    if g == 1:
        return reduce_update(op, acc, x)
    for t in range(g):
        acc = reduce_update(op, acc, pick_lanes(x, tuple(j * g + t for j in range(lanes))))
    return acc


def _lower_group_reduce(ctx: _Lowering, r: UOp, g: UOp) -> UOp:
    """A reduction shared by a work-group's threads (its `group` range g is their local id): each thread reduces its
    part and stores it to local memory at its id; then, for a power-of-two group, a tree: at step s (n/2, n/4, ...,
    1) after a barrier thread i < s combines slots i and i + s into slot i; every thread reads slot 0 after the last
    barrier. (Another size: after one barrier every thread folds the n parts in thread order.)"""
    partial = _lower_reduce(ctx, r.replace(src=(r.operands.value, *(x for x in r.operands.ranges if x is not g))))
    n, lanes = const_extent(g), r.dtype.count
    assert n is not None  # _hardware_ids maps only constant group ranges
    buf = UOp(K.LOCAL, r.dtype.scalar.ptr("local", n * lanes), (), ctx.locals)
    ctx.locals += 1

    def slot(ptr: UOp, i: UOp, gate: UOp | None = None) -> UOp:
        off = i * UOp.const(dtypes.index, lanes) if lanes > 1 else i
        return UOp(K.INDEX, buf.dtype, (ptr, off) if gate is None else (ptr, off, gate))

    def after(st: UOp) -> UOp:
        return UOp(D.AFTER, buf.dtype, (buf, UOp(D.BARRIER, dtypes.void, (st,))))

    ptr = after(UOp(K.STORE, dtypes.void, (slot(buf, g), partial)))
    if n & (n - 1) == 0:
        ident = reduce_identity(r.attrs.op, r.dtype)
        step = n // 2
        while step >= 1:
            s = UOp.const(dtypes.index, step)
            active = UOp(C.CMPLT, dtypes.bool, (g, s))
            mine = UOp(K.LOAD, r.dtype, (slot(ptr, g),))
            other = UOp(K.LOAD, r.dtype, (slot(ptr, g + s), ident, active))
            ptr = after(UOp(K.STORE, dtypes.void, (slot(ptr, g, active), reduce_update(r.attrs.op, mine, other))))
            step //= 2
        return UOp(K.LOAD, r.dtype, (slot(ptr, UOp.const(dtypes.index, 0)),))
    j = ctx.fresh_loop(g.operands.end)
    ctx.accs += 1
    acc = UOp(D.ACC, r.dtype, (reduce_identity(r.attrs.op, r.dtype), j), ctx.accs - 1)
    return UOp(D.ACCSTORE, r.dtype, (acc, reduce_update(r.attrs.op, acc, UOp(K.LOAD, r.dtype, (slot(ptr, j),)))))


def _lower_reduce(ctx: _Lowering, r: UOp) -> UOp:
    value, ranges = r.operands.value, r.operands.ranges
    g = next((x for x in ranges if x.attrs.kind == "group" and x in ctx.specials), None)
    if g is not None:
        return _lower_group_reduce(ctx, r, g)
    if not ranges:
        if value.dtype.count == r.dtype.count:
            return value  # a reduction over nothing is its value (not `identity op value`: -0.0 + 0.0 is +0.0)
        if value.op is D.ACCSTORE and _may_reorder(r.attrs.op, r.dtype, ctx.target):
            value = _tree_fold(r.attrs.op, value, r.dtype.count)  # partial accumulators after their loop: a tree
        return _fold_lanes(r.attrs.op, reduce_identity(r.attrs.op, r.dtype), value, r.dtype.count)  # lane runs only
    loops = [ctx.loop(rg) for rg in ranges]
    x = value.substitute(dict(zip(ranges, loops, strict=True)))
    ctx.accs += 1
    acc = UOp(D.ACC, r.dtype, (reduce_identity(r.attrs.op, r.dtype), *loops), ctx.accs - 1)
    return UOp(D.ACCSTORE, r.dtype, (acc, _fold_lanes(r.attrs.op, acc, x, r.dtype.count)))


def _lower_range(ctx: _Lowering, r: UOp) -> UOp:
    return ctx.specials.get(r) or ctx.loop(r)


def _lower_end(e: UOp) -> UOp:
    out = e.operands.value
    for lp in reversed(e.operands.ranges):
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
    end = r.operands.end
    if end.op is C.CONST:
        return int(const_value(end))
    hi = vmax(end)
    return int(hi) if isinstance(hi, int) and hi < 2**62 else None


def _hardware_ids(kdef: UOp, t: Target) -> dict[UOp, UOp]:
    """Global and local ranges that fit the launch limits, as hardware ids; the innermost range gets dim 0. On a cpu
    (one thread per block) only global ranges qualify: kernel-optimize marks the one to split across the cores.

    A `group` range (a reduction shared by a work-group's threads) takes the local id of a local range of the same
    size that its reduced value does not vary over (the threads first share the reduction, then the elementwise
    work), else a local dim of its own; on a target without local memory it stays a loop."""
    order = kdef.toposort()
    ranges = [u for u in order if u.op is K.RANGE]
    glob = [r for r in ranges if r.attrs.kind == "global"]
    loc = [r for r in ranges if r.attrs.kind == "local"]
    out: dict[UOp, UOp] = {}
    threads, dims = 1, 0
    for dim, r in enumerate(reversed(loc[-3:])):
        n = _size(r)
        if n is None or n > t.max_local_dims[dim] or threads * n > t.max_threads_per_block:
            break
        threads *= n
        dims += 1
        out[r] = UOp(D.SPECIAL, dtypes.index, (r.operands.end,), ("local_id", dim))
    reduces = [u for u in order if u.op is K.REDUCE and any(x.attrs.kind == "group" for x in u.operands.ranges)]
    if reduces and t.has_local:
        deps = range_deps(order, reduce_consumes=True)
        for red in reduces:
            g = next(x for x in red.operands.ranges if x.attrs.kind == "group")
            n = const_extent(g)
            if g in out or n is None:
                continue
            same = next((s for x, s in out.items()
                         if s.operands.size is g.operands.end and x not in deps[red.operands.value]), None)
            if same is not None:
                out[g] = same
            elif dims < 3 and n <= t.max_local_dims[dims] and threads * n <= t.max_threads_per_block:
                out[g] = UOp(D.SPECIAL, dtypes.index, (g.operands.end,), ("local_id", dims))
                threads *= n
                dims += 1
    kind = "group_id" if out else "global_id"
    if t.kind == "cpu" and _siblings(glob, order):  # alike loop nests of a peeled copy: one id splits them all
        shared = UOp(D.SPECIAL, dtypes.index, (glob[0].operands.end,), (kind, 0))
        return {**out, **dict.fromkeys(glob, shared)}
    for dim, r in enumerate(reversed(glob[-3:])):
        n = _size(r)
        if n is None or n > t.max_global_dims[dim]:
            break
        out[r] = UOp(D.SPECIAL, dtypes.index, (r.operands.end,), (kind, dim))
    return out


def _siblings(glob: list[UOp], order: list[UOp]) -> bool:
    """Two or more global ranges of one constant extent, none inside another's loop (each the outermost range of its
    own loop nest: kernel/siblings.py marks a peeled copy's alike nests so), in a kernel that loads from no buffer
    it stores to (each nest's iterations then interleave with the others')."""
    if len(glob) < 2 or glob[0].operands.end.op is not C.CONST or any(r.operands.end is not glob[0].operands.end
                                                                     for r in glob):
        return False
    for u in order:
        if u.op is K.END and (inner := set(u.operands.ranges) & set(glob)):
            body = u.operands.value.toposort()
            if len(inner) > 1 or any(r in body for r in glob if r not in inner):
                return False
    return not reads_its_stores(order)


def _gate_shared_stores(kdef: UOp, specials: dict[UOp, UOp]) -> UOp:
    """Every store that does not vary over a local id (the threads of a group reduction all computed its value) is
    gated to the thread whose id is 0 there, so one thread writes it."""
    local = {s for s in specials.values() if s.attrs.kind == "local_id"}
    if not local:
        return kdef
    order = kdef.toposort()
    deps = range_deps(order, reduce_consumes=True)
    zero = UOp.const(dtypes.index, 0)
    new: dict[UOp, UOp] = {}
    for st in order:
        if st.op is not K.STORE or st.operands.ptr.dtype.addrspace != "global":
            continue
        missing = sorted(local - {specials[r] for r in deps[st] if r in specials}, key=lambda s: s.attrs.dim)
        if not missing:
            continue
        gate = st.operands.gate
        for s in missing:
            first = UOp(C.CMPEQ, dtypes.bool, (s, zero))
            gate = first if gate is None else UOp(C.AND, dtypes.bool, (gate, first))
        new[st] = st.replace(src=(st.operands.ptr, st.operands.value, gate))
    return kdef.substitute(new) if new else kdef


@dataclass
class KernelToDeviceOptions:
    """kernel-to-device's options."""
    target: str = field(default="cpu", metadata={"help": "a target name: cpu, gpu or a device (python, c, ...)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)


@register_pass("kernel-to-device", summary="reductions to accumulators, ranges to loops (cpu) or hardware ids (gpu)",
               consumes=("core", "kernel"), produces=("core", "kernel", "device"), options=KernelToDeviceOptions)
def kernel_to_device(root: UOp, options: KernelToDeviceOptions, ctx: PassContext) -> UOp:
    t = resolve_target(options.target, root, ctx)
    if t is None:
        return root

    def lower(kdef: UOp) -> UOp:
        if kdef.op is not K.DEF:
            return kdef  # already linearized
        rows = private_rows(kdef) if t.kind == "cpu" else kdef  # a row of scratch per global iteration (stash.py)
        ids = _hardware_ids(rows, t)
        if rows is not kdef:  # each iteration a work-group of one thread: its own kernel.local (a cpu loops it alike)
            ids = {r: s.replace(arg=("group_id", s.attrs.dim)) for r, s in ids.items()}
        kdef = rows
        ranges = [u for u in kdef.toposort() if u.op is K.RANGE]
        lw = _Lowering(t, {r: i for i, r in enumerate(ranges)}, ids)
        kdef = _gate_shared_stores(kdef, lw.specials)
        out = graph_rewrite(kdef, REDUCES, ctx=lw, stats=ctx.stats)
        out = graph_rewrite(out, RANGES, ctx=lw, stats=ctx.stats)
        ctx.count("accumulators", lw.accs)
        ctx.count("loops", lw.loops)
        ctx.count("hardware-ids", len(lw.specials))
        ctx.count("group-reductions", lw.locals)
        return out
    return in_kernels(root, lower)
