"""Handlers for the kernel dialect, and `run_kernel`, which runs one kernel.def body on buffers.

Data-parallel semantics: every kernel.range is one numpy axis of the iteration space, and each op is evaluated over
its whole iteration space at once, in toposort order. Values broadcast against that space (a value that does not
depend on a range has size 1 on its axis). A load sees a store of the same kernel only if it depends on it; when
several iterations store to one address, the last in row-major order of the ranges (toposort order) wins.
A vector value (what kernel-expand makes) has one more axis than the space, its lanes, last. A vector load or store
moves consecutive elements from its pointer; a kernel.reduce whose value has more lanes than its result folds each
run of value-lanes/result-lanes consecutive lanes into one result lane, after its ranges (the lanes innermost).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from uopir.backends.python import core
from uopir.backends.python.base import HandlerTable, Value, op_error, run_ops
from uopir.dialects import core as C
from uopir.dialects import kernel as K
from uopir.dialects.semantics import bf16_round, bitcast_array, const_array, np_dtype, reduce_array
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp


class Ptr:
    """A pointer value: a flat buffer plus an offset array (and gate) over the iteration space."""

    __slots__ = ("flat", "off", "gate")

    def __init__(self, flat: np.ndarray, off: np.ndarray, gate: np.ndarray | None):
        self.flat, self.off, self.gate = flat, off, gate


def _and_gate(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    return b if a is None else (a if b is None else a & b)


class KernelCtx:
    """One run of a kernel: its buffers (by param index), variables and the axis of each range."""

    __slots__ = ("buffers", "var_vals", "axis", "nd", "dead")

    def __init__(self, buffers: list[np.ndarray], var_vals: dict[str, int], axis: dict[UOp, int]):
        self.buffers, self.var_vals, self.axis = buffers, var_vals, axis
        self.nd = 1 + max(axis.values(), default=-1)  # ranges never open together may share an axis
        self.dead: frozenset[UOp] = frozenset()  # loads and stores that no iteration runs (see _never_run)

    def space(self, x: Any) -> np.ndarray:
        """`x` with trailing size-1 axes up to the iteration space's rank."""
        x = np.asarray(x)
        nd = self.nd
        return x.reshape(x.shape + (1,) * (nd - x.ndim)) if x.ndim < nd else x


# ---- kernel ops ------------------------------------------------------------------------------------------------------
def param_buffer(u: UOp, buffers: list[np.ndarray], who: str) -> np.ndarray:
    """The flat view of the buffer a kernel.param names: one of `buffers`, of the param's dtype, contiguous (so
    stores reach it); `who` ("kernel", "program") is what got the buffers, for the located errors."""
    if not 0 <= u.arg < len(buffers):
        raise op_error(u, f"kernel.param {u.arg}: the {who} got {len(buffers)} buffers")
    arr = buffers[u.arg]
    if arr.dtype != np_dtype(u.dtype.base):
        raise op_error(u, f"kernel.param {u.arg} is {u.dtype}, but buffer {u.arg} is {arr.dtype}")
    flat = arr.reshape(-1)
    if arr.size and not np.shares_memory(flat, arr):
        raise op_error(u, f"buffer {u.arg} must be contiguous to be written by a {who}")
    return flat


def _param(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    return Ptr(param_buffer(u, ctx.buffers, "kernel"), ctx.space(np.zeros((), np.int64)), None)


def _scratch(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    """kernel.local / kernel.register: a fresh zeroed buffer of the pointer's size."""
    return Ptr(np.zeros(u.dtype.size, np_dtype(u.dtype.base)), ctx.space(np.zeros((), np.int64)), None)


def _var(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    name = u.attrs.name
    if name not in ctx.var_vals:
        raise op_error(u, f"variable {name!r} is not bound (pass var_vals)")
    return ctx.space(np.asarray(ctx.var_vals[name], np.int64))


def _range(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    end = np.asarray(s[0])
    if end.size != 1:
        raise op_error(u, "a range end must not depend on another range")
    ax = ctx.axis[u]
    shape = [1] * ctx.nd
    shape[ax] = int(end.reshape(-1)[0])
    return np.arange(shape[ax], dtype=np.int64).reshape(shape)


def _index(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    p = s[0]
    return Ptr(p.flat, ctx.space(p.off + np.asarray(s[1], np.int64)),
               _and_gate(p.gate, ctx.space(s[2]) if len(s) > 2 else None))


def _lanes(d: DType, off: np.ndarray, gate: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """A vector access of dtype d touches d.count consecutive elements: offsets and gate get the lane axis."""
    if d.count == 1:
        return off, gate
    return off[..., None] + np.arange(d.count, dtype=np.int64), None if gate is None else gate[..., None]


def gather(u: UOp, flat: np.ndarray, off: np.ndarray, active: np.ndarray | None) -> np.ndarray:
    """`flat[off]` for the load `u`: an active lane out of bounds is a located error, inactive lanes read element 0
    (their value is replaced by the alternative), and a bf16 buffer's float32 carrier is rounded when read. Shared by
    the kernel-level and the device-level interpreters."""
    inb = (off >= 0) & (off < flat.size)
    if np.any(~inb if active is None else active & ~inb):
        raise op_error(u, f"out-of-bounds load (buffer of {flat.size} elements)")
    val = flat[np.where(inb, off, 0)] if flat.size else np.zeros(off.shape, flat.dtype)
    # u.src[0] is the load's ptr operand: read by position here (not u.operands.ptr, ~20x the cost), since a load in a
    # sequential device loop gathers once per iteration
    return bf16_round(val) if u.src[0].dtype.base is dtypes.bfloat16 else val


def scatter(u: UOp, flat: np.ndarray, off: np.ndarray, val: np.ndarray, active: np.ndarray | None) -> None:
    """`flat[off] = val` on the active lanes of the store `u`; an active lane out of bounds is a located error."""
    off, val = np.broadcast_arrays(off, val, *(() if active is None else (active,)))[:2]
    mask = np.ones(off.shape, bool) if active is None else np.broadcast_to(active, off.shape)
    o, v = off[mask], val[mask]
    if o.size and (o.min() < 0 or o.max() >= flat.size):
        raise op_error(u, f"out-of-bounds store (buffer of {flat.size} elements)")
    flat[o] = v


def _load(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    p = s[0]
    if u in ctx.dead:  # inside an empty range: its value is never used
        return ctx.space(np.zeros((), p.flat.dtype))
    gate = _and_gate(p.gate, ctx.space(s[2]) if len(s) > 2 else None)
    off, gate = _lanes(u.dtype, p.off, gate)
    val = gather(u, p.flat, off, gate)
    alt = s[1] if len(s) > 1 else np.zeros((), p.flat.dtype)
    return ctx.space(val if gate is None else np.where(gate, val, alt))


def _store(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    p = s[0]
    if u in ctx.dead:
        return None
    gate = _and_gate(p.gate, ctx.space(s[2]) if len(s) > 2 else None)
    poff, gate = _lanes(u.operands.value.dtype, p.off, gate)
    scatter(u, p.flat, poff, ctx.space(s[1]), gate)
    return None


def _reduce(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    x = ctx.space(s[0])
    axis = ctx.axis
    ops = u.operands
    ranges = ops.ranges
    axes = tuple(axis[rr] for rr in ranges)  # accumulate in operand order, the first range outermost
    shape = list(x.shape)
    for rr, rv in zip(ranges, s[1:], strict=True):
        shape[axis[rr]] = rv.shape[axis[rr]]
    x = np.broadcast_to(x, shape)
    n_in = ops.value.dtype.count
    if n_in == 1:
        return reduce_array(x, u.arg, axes, u.dtype)
    # lanes: the value's lane axis splits into (result lane, run); each run folds after the ranges, innermost
    n_out = u.dtype.count
    x = x.reshape(x.shape[:-1] + (n_out, n_in // n_out))
    r = reduce_array(x, u.arg, axes + (x.ndim - 1,), u.dtype.scalar)
    return r.reshape(r.shape[:-2] + ((n_out,) if n_out > 1 else ()))


HANDLERS: HandlerTable = {
    K.PARAM: _param,
    K.LOCAL: _scratch,
    K.REGISTER: _scratch,
    K.AFTER: lambda u, s, ctx: s[0],  # the pointer; the toposort ran the effects it names first
    K.VAR: _var,
    K.RANGE: _range,
    K.INDEX: _index,
    K.LOAD: _load,
    K.STORE: _store,
    K.REDUCE: _reduce,
    K.END: core.void,
    K.DEF: core.void,
}


# ---- core ops inside a kernel: constants span the iteration space; the roots have no value ---------------------------
def _const_in_space(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    a = const_array(u.dtype, u.arg)
    return a.reshape((1,) * ctx.nd + a.shape) if u.dtype.count > 1 else ctx.space(a)


def _scalar_bitcast(u: UOp, s: list[Value], ctx: KernelCtx) -> Value:
    src = u.operands.x.dtype
    if u.dtype.count != src.count:
        raise op_error(u, "the reference interpreter does not run a lane-changing core.bitcast inside a kernel yet")
    return bitcast_array(s[0], src.scalar, u.dtype.scalar)


CORE_HANDLERS: HandlerTable = {
    **core.ALU_HANDLERS,
    C.CONST: _const_in_space,
    C.CAST: core.HANDLERS[C.CAST],
    C.BITCAST: _scalar_bitcast,
    C.VECTORIZE: core.HANDLERS[C.VECTORIZE],
    C.GEP: core.HANDLERS[C.GEP],
    C.SINK: core.void,
    C.GROUP: core.void,
}

TABLE: HandlerTable = {**CORE_HANDLERS, **HANDLERS}


def _missing(u: UOp) -> IRError:
    return op_error(u, f"the reference interpreter has no handler for {u.op.name} inside a kernel")


def run_kernel(kdef: UOp, buffers: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    """Run a kernel.def body on `buffers` (kernel.param idx i is buffers[i]); stores write them in place."""
    if kdef.op is not K.DEF:
        raise op_error(kdef, f"run_kernel needs a kernel.def, got {kdef.op.name}")
    order = kdef.toposort()
    ctx = KernelCtx(buffers, var_vals or {}, _range_axes(kdef, order))
    ctx.dead = _never_run(kdef, order, ctx)
    run_ops(order, TABLE, ctx, _missing)


# numpy's limit on the axes of one array (some of its routines stop at 32), less one for vector lanes
MAX_AXES = 31


def _range_axes(kdef: UOp, order: list[UOp]) -> dict[UOp, int]:
    """The numpy axis of each kernel.range: one each while they fit in MAX_AXES. Beyond that, ranges that are never
    open together (the ranges of separate reductions) share axes: an axis is one more than that of every earlier
    range open at the same time as it, so ranges open together keep their order (the row-major order in which
    repeated stores to one address resolve) and a kernel of many independent reductions needs few axes."""
    ranges = [u for u in order if u.op is K.RANGE]
    if len(ranges) <= MAX_AXES:
        return {u: i for i, u in enumerate(ranges)}
    open_at: dict[UOp, frozenset[UOp]] = {}
    together: dict[UOp, set[UOp]] = {r: set() for r in ranges}
    for u in order:
        live: set[UOp] = set()
        for x in u.src:
            live |= open_at[x]
        if u.op is K.RANGE:
            live.add(u)
        elif u.op is K.REDUCE or u.op is K.END:
            live.difference_update(u.operands.ranges)
        open_at[u] = frozenset(live)
        if len(live) > 1:
            for r in live:
                together[r] |= live
    axis: dict[UOp, int] = {}
    for r in ranges:  # toposort order: every range open with r and placed before it has its axis already
        axis[r] = 1 + max((axis[o] for o in together[r] if o in axis), default=-1)
    if max(axis.values()) >= MAX_AXES:
        raise op_error(kdef, f"the python backend runs at most {MAX_AXES} nested kernel.range ops at once; this "
                             f"kernel nests {max(axis.values()) + 1}")
    return axis


def _never_run(kdef: UOp, order: list[UOp], ctx: KernelCtx) -> frozenset[UOp]:
    """The loads and stores that run in no iteration: those reached only through the body of a kernel.end or a
    kernel.reduce with an empty range. The data-parallel evaluation still computes them (over an iteration space with
    a zero-size axis, or with offsets that do not depend on the empty range), so their bounds must not be checked."""
    ranges = [u for u in order if u.op is K.RANGE]
    if not ranges:
        return frozenset()
    ends = UOp.sink(*(r.operands.end for r in ranges))
    vals = run_ops(ends.toposort(), TABLE, ctx, _missing)
    ends_of = {r: np.asarray(vals[r.operands.end]) for r in ranges}
    empty = {r for r, e in ends_of.items() if e.size == 1 and int(e.reshape(-1)[0]) <= 0}
    if not empty:
        return frozenset()
    live: set[UOp] = set()
    stack = [kdef]
    while stack:
        u = stack.pop()
        if u in live:
            continue
        live.add(u)
        rs = u.operands.ranges if u.op is K.END or u.op is K.REDUCE else ()
        if any(r in empty for r in rs):
            stack.extend(rs)  # the body never runs; the range ends still do
        else:
            stack.extend(u.src)
    return frozenset(u for u in order if (u.op is K.LOAD or u.op is K.STORE) and u not in live)
