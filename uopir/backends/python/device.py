"""Handlers for the device dialect, and `run_program`, which runs a linearized `device.program` on buffers.

The program is sequential (what a C renderer prints): ops in order, loops from `device.loop` to `device.endloop`,
accumulators assigned by `device.accstore` (whose value is the accumulator after the update; read after the loop,
the final value, or the init when the loop ran no iteration). To stay fast it runs a loop as a numpy axis (all
iterations at once) whenever that cannot change a result: when no accumulator declared outside the loop is assigned
inside it, and every buffer stored inside it is loaded there only at the address it is stored to (in the same
iteration). Other loops run one iteration at a time, with the vectorized loops around them as array axes. Hardware
ids (`device.special`) are axes too; a barrier is then a no-op, since every op finishes for all threads before the
next starts. `device.if` masks the effects (stores, accumulator updates) of its block, and so does a loop whose
bound differs between the lanes of an enclosing axis. Scalars span the axes (right-aligned numpy broadcasting);
vectors add a trailing lane axis. Local memory is one buffer per work-group (group ids of constant size number them).
`run_region` runs a kernel region at any stage (a kernel between kernel-to-device and device-linearize is linearized
first).
"""
from __future__ import annotations

import numpy as np

from uopir.backends.python import core
from uopir.backends.python.base import HandlerTable, Value, op_error
from uopir.backends.python.kernel import MAX_AXES, Ptr, gather, param_buffer, run_kernel, scatter
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import const_array, fma_f32, np_dtype
from uopir.ir.diagnostics import IRError
from uopir.ir.uop import UOp
from uopir.passes.device.linearize import linearize

__all__ = ["run_program", "run_region", "HANDLERS", "CONTROL", "REFUSED"]


class DeviceCtx:
    """One run of a program: buffers by param index, variables, the axis of each vectorized loop or hardware id,
    and the mask of lanes whose effects count (None: all)."""

    __slots__ = ("buffers", "var_vals", "axis", "nd", "mask", "groups", "group")

    def __init__(self, buffers: list[np.ndarray], var_vals: dict[str, int], axis: dict[UOp, int]):
        self.buffers, self.var_vals, self.axis = buffers, var_vals, axis
        self.nd = 1 + max(axis.values(), default=-1)  # loops never open together may share an axis
        self.mask: np.ndarray | None = None
        self.groups, self.group = 1, np.zeros((), np.int64)  # work-groups of the launch; each thread's group number

    def number_groups(self, ops: tuple[UOp, ...]) -> None:
        """Number the work-groups (from the group ids of constant size), so local memory is one copy per group."""
        for u in ops:
            if u.op is D.SPECIAL and u.attrs.kind == "group_id" and (size := u.operands.size).op is C.CONST:
                n = max(1, int(size.arg))
                self.group = self.group * n + self.along(u, n)
                self.groups *= n

    def along(self, u: UOp, n: int) -> np.ndarray:
        """0..n-1 along u's axis."""
        shape = [1] * self.nd
        shape[self.axis[u]] = n
        return np.arange(n, dtype=np.int64).reshape(shape)

    def active(self, gate: np.ndarray | None) -> np.ndarray | None:
        m = self.mask
        return gate if m is None else (m if gate is None else m & gate)


def _and(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    return b if a is None else (a if b is None else a & b)


def _lanes(off: np.ndarray, n: int) -> np.ndarray:
    """The element offsets of an n-lane access at `off` (a trailing lane axis), or `off` for a scalar."""
    return off if n == 1 else off[..., None] + np.arange(n, dtype=np.int64)


def _lane_mask(m: np.ndarray | None, n: int) -> np.ndarray | None:
    return m if m is None or n == 1 else m[..., None]


def _scalar(u: UOp, v: Value, what: str) -> int:
    a = np.asarray(v)
    if a.size != 1 and np.any(a != a.reshape(-1)[0]):
        raise op_error(u, f"{what} differs between threads or loop iterations: not interpreted")
    return int(a.reshape(-1)[0]) if a.size else 0


# ---- kernel-level ops in a program -----------------------------------------------------------------------------------
def _param(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    return Ptr(param_buffer(u, ctx.buffers, "program"), np.zeros((), np.int64), None)


def _scratch(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    return Ptr(np.zeros(u.dtype.size, np_dtype(u.dtype.base)), np.zeros((), np.int64), None)


def _local(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    """Local memory: one copy per work-group, each thread addressing its group's."""
    return Ptr(np.zeros(u.dtype.size * ctx.groups, np_dtype(u.dtype.base)), ctx.group * u.dtype.size, None)


def _var(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    name = u.attrs.name
    if name not in ctx.var_vals:
        raise op_error(u, f"variable {name!r} is not bound (pass var_vals)")
    return np.asarray(ctx.var_vals[name], np.int64)


def _index(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    p = s[0]
    return Ptr(p.flat, p.off + np.asarray(s[1], np.int64), _and(p.gate, s[2] if len(s) > 2 else None))


def _load(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    p, n = s[0], u.dtype.count
    gate = _and(p.gate, s[2] if len(s) > 2 else None)
    val = gather(u, p.flat, _lanes(p.off, n), _lane_mask(ctx.active(gate), n))
    if gate is None:
        return val
    alt = s[1] if len(s) > 1 else np.zeros((), p.flat.dtype)
    return np.where(_lane_mask(gate, n), val, alt)


def _store(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    p, n = s[0], u.operands.value.dtype.count
    act = _lane_mask(ctx.active(_and(p.gate, s[2] if len(s) > 2 else None)), n)
    scatter(u, p.flat, _lanes(p.off, n), np.asarray(s[1]), act)
    return None


# ---- device ops ------------------------------------------------------------------------------------------------------
def _special(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    return ctx.along(u, _scalar(u, s[0], "a launch size"))


def _acc(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    return np.array(s[0], copy=True)


def _accstore(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    """Handled by the program loop (it assigns the accumulator); the value is the updated accumulator."""
    return s[1]


def _const(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    return const_array(u.dtype, u.arg)


def _fma(u: UOp, s: list[Value], ctx: DeviceCtx) -> Value:
    return fma_f32(*s)


HANDLERS: HandlerTable = {
    **core.ALU_HANDLERS,
    D.FMA: _fma,
    C.CONST: _const,
    C.CAST: core.HANDLERS[C.CAST],
    C.BITCAST: core.HANDLERS[C.BITCAST],
    C.VECTORIZE: core.HANDLERS[C.VECTORIZE],
    C.GEP: core.HANDLERS[C.GEP],
    K.PARAM: _param,
    K.LOCAL: _local,
    K.REGISTER: _scratch,
    K.VAR: _var,
    K.INDEX: _index,
    K.LOAD: _load,
    K.STORE: _store,
    D.SPECIAL: _special,
    D.ACC: _acc,
    D.ACCSTORE: _accstore,
    D.BARRIER: core.void,
    D.AFTER: lambda u, s, ctx: s[0],
}
CONTROL = frozenset((D.LOOP, D.ENDLOOP, D.IF, D.ENDIF))  # run by the program loop itself (`_control`)
# ops a program may hold that the interpreter does not run (an error naming the op): its rows beside HANDLERS and
# CONTROL, so that every op of uopir.backends.codegen.walk.PROGRAM_OPS is placed (unit_tests/test_codegen_tables.py)
REFUSED = frozenset((D.WMMA, D.PROGRAM, C.SINK, C.GROUP))


# ---- running a program -----------------------------------------------------------------------------------------------
def _base(p: UOp) -> UOp:
    while p.op is K.INDEX or p.op is D.AFTER:
        p = p.operands.ptr
    return p


def _blocks(prog: UOp) -> dict[int, int]:
    """pc of each loop/if -> pc of its end (and back); an error for unbalanced blocks."""
    ops, match, stack = prog.src, {}, []
    for pc, u in enumerate(ops):
        if u.op is D.LOOP or u.op is D.IF:
            stack.append(pc)
        elif u.op is D.ENDLOOP or u.op is D.ENDIF:
            want = D.LOOP if u.op is D.ENDLOOP else D.IF
            if not stack or ops[stack[-1]] is not u.operands.block or ops[stack[-1]].op is not want:
                raise op_error(u, f"{u.op.name} does not close the innermost open block of the program")
            start = stack.pop()
            match[start], match[pc] = pc, start
    if stack:
        raise op_error(ops[stack[-1]], f"{ops[stack[-1]].op.name} is never closed in the program")
    return match


def _sequential(prog: UOp, match: dict[int, int], alias: dict[UOp, int]) -> set[UOp]:
    """The loops that must run one iteration at a time: they assign an accumulator declared before them, or read a
    buffer they write at another address than the one written."""
    ops = prog.src
    pos = {u: i for i, u in enumerate(ops)}
    out: set[UOp] = set()
    for start, u in enumerate(ops):
        if u.op is not D.LOOP:
            continue
        body = ops[start + 1:match[start]]
        stored: dict[int, set[UOp]] = {}
        for b in body:
            if b.op is D.ACCSTORE and pos.get(b.operands.acc, start) < start:
                out.add(u)
                break
            if b.op is K.STORE:
                ptr = b.operands.ptr
                stored.setdefault(alias.get(_base(ptr), -1), set()).add(ptr)
        else:
            for b in body:
                if b.op is K.LOAD:
                    ptr = b.operands.ptr
                    at = stored.get(alias.get(_base(ptr), -1))
                    if at is not None and (len(at) > 1 or ptr not in at):
                        out.add(u)
                        break
    return out


def _aliases(prog: UOp, buffers: list[np.ndarray]) -> dict[UOp, int]:
    """Each pointer base -> a number shared by bases that may overlap in memory."""
    bases = [u for u in prog.src if u.op in (K.PARAM, K.LOCAL, K.REGISTER)]
    out: dict[UOp, int] = {}
    for i, b in enumerate(bases):
        out[b] = i
        if b.op is K.PARAM and 0 <= b.arg < len(buffers):
            for c in bases[:i]:
                if c.op is K.PARAM and 0 <= c.arg < len(buffers) and np.shares_memory(buffers[b.arg],
                                                                                       buffers[c.arg]):
                    out[b] = out[c]
                    break
    return out


def run_program(prog: UOp, buffers: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    """Run a device.program on `buffers` (kernel.param idx i is buffers[i]); stores write them in place."""
    if prog.op is not D.PROGRAM:
        raise op_error(prog, f"run_program needs a device.program, got {prog.op.name}")
    ops = prog.src
    match = _blocks(prog)
    seq = _sequential(prog, match, _aliases(prog, buffers))
    ctx = DeviceCtx(buffers, var_vals or {}, _loop_axes(prog, seq))
    ctx.number_groups(ops)
    vals: dict[UOp, Value] = {}
    masks: list[np.ndarray | None] = []
    counters: dict[int, list[int]] = {}  # pc of a sequential loop -> [next iteration, trip count]
    updates: dict[UOp, list[UOp]] = {}  # accumulator -> its device.accstores
    acc_of: dict[UOp, UOp] = {}  # device.accstore -> its accumulator (read once, not per loop iteration)
    for x in ops:
        if x.op is D.ACCSTORE:
            acc_of[x] = acc = x.operands.acc
            updates.setdefault(acc, []).append(x)
    pc = 0
    while pc < len(ops):
        u = ops[pc]
        op = u.op
        try:
            if op in CONTROL:
                pc = _control(u, pc, ops, match, seq, vals, masks, counters, ctx)
                continue
            h = HANDLERS.get(op)
            if h is None:
                raise op_error(u, f"the reference interpreter has no handler for {op.name} in a device.program")
            v = h(u, [vals[s] for s in u.src], ctx)
            if op is D.ACCSTORE:
                acc = acc_of[u]
                m = _lane_mask(ctx.mask, acc.dtype.count)
                vals[acc] = v if m is None else np.where(m, v, vals[acc])
                v = vals[acc]
            elif op is D.ACC:  # its updates read as the init until they run (a loop of no iterations)
                for st in updates.get(u, ()):
                    vals[st] = v
            vals[u] = v
        except IRError:
            raise
        except KeyError as e:
            raise op_error(u, f"an operand of {op.name} is used before the program computes it") from e
        except (ValueError, TypeError, IndexError) as e:
            raise op_error(u, f"the reference interpreter failed on {op.name}: {e}") from e
        pc += 1


def _loop_axes(prog: UOp, seq: set[UOp]) -> dict[UOp, int]:
    """The numpy axis of each vectorized loop and hardware id: one each while they fit in MAX_AXES. Beyond that (a
    concatenation kernel-peel cut into one loop per source), a loop takes the axis after those of the loops open
    around it, so that loops one after the other share axes while nested ones keep their order (their values never
    outlive their loop: what one computes reaches the next through memory)."""
    ops = prog.src
    spread = [x for x in ops if (x.op is D.LOOP and x not in seq) or x.op is D.SPECIAL]
    if len(spread) <= MAX_AXES:
        return {u: i for i, u in enumerate(spread)}
    axis = {u: i for i, u in enumerate(x for x in ops if x.op is D.SPECIAL)}  # ids: open through the program
    top = len(axis) - 1  # the axis of the innermost vectorized loop or id open here
    open_tops: list[int] = []
    for u in ops:
        if u.op is D.LOOP:
            open_tops.append(top)
            if u not in seq:
                top = axis[u] = top + 1
        elif u.op is D.ENDLOOP:
            top = open_tops.pop()
    if max(axis.values(), default=-1) >= MAX_AXES:
        raise op_error(prog, f"the python backend runs at most {MAX_AXES} nested vectorized loops at once; this "
                             f"program nests {max(axis.values()) + 1}")
    return axis


def _control(u: UOp, pc: int, ops: tuple[UOp, ...], match: dict[int, int], seq: set[UOp], vals: dict[UOp, Value],
             masks: list[np.ndarray | None], counters: dict[int, list[int]], ctx: DeviceCtx) -> int:
    """Run one control op; return the next pc."""
    op = u.op
    if op is D.IF:
        masks.append(ctx.mask)
        ctx.mask = _and(ctx.mask, np.asarray(vals[u.operands.cond], bool))
        return pc + 1
    if op is D.ENDIF:
        ctx.mask = masks.pop()
        return pc + 1
    if op is D.LOOP:
        end = np.asarray(vals[u.operands.end], np.int64)
        n = int(end.max()) if end.size else 0
        ragged = end.size > 1 and bool(np.any(end != n))
        if n <= 0:  # no iteration: skip the body (a vectorized loop's empty axis would not reach ops that do not use
            return match[pc] + 1  # its index, e.g. a store at a constant address)
        if u in seq:
            counters[pc] = [1, n]
            vals[u] = np.zeros((), np.int64)
        else:
            vals[u] = ctx.along(u, max(n, 0))
        masks.append(ctx.mask)
        if ragged:
            ctx.mask = _and(ctx.mask, vals[u] < end)
        return pc + 1
    start = match[pc]  # device.endloop
    loop = ops[start]
    c = counters.get(start)
    if c is not None and c[0] < c[1]:
        i = c[0]
        c[0] += 1
        vals[loop] = np.asarray(i, np.int64)
        ctx.mask = masks[-1]
        end = np.asarray(vals[loop.operands.end], np.int64)
        if end.size > 1 and bool(np.any(end != c[1])):
            ctx.mask = _and(ctx.mask, i < end)
        return start + 1
    counters.pop(start, None)
    ctx.mask = masks.pop()
    return pc + 1



def run_region(body: UOp, buffers: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    """Run a kernel region at any stage: a kernel.def (data-parallel), a kernel.def already lowered by
    kernel-to-device (linearized here first), or a device.program."""
    if body.op is K.DEF and any(u.op.dialect == "device" for u in body.toposort()):
        body = linearize(body)
    (run_program if body.op is D.PROGRAM else run_kernel)(body, buffers, var_vals)
