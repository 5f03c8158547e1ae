"""Handlers for the tensor dialect: buffers, movement ops as numpy views, reductions, assign, variables, and
`tensor.call`, which runs its kernel region at whatever stage it is (`run_region`).

The graph-level context says which buffers an assign or a call of the graph writes: those are read as private
copies, so every read sees the buffers as they were on entry.
"""
from __future__ import annotations

import numpy as np

from uopir.backends.python.base import HandlerTable, Value, op_error
from uopir.backends.python.device import run_region
from uopir.dialects import tensor as T
from uopir.dialects.semantics import bf16_round, np_dtype, reduce_array
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import sym_infer
from uopir.ir.uop import UOp

# the views a tensor.assign may write through (expand and pad would alias or invent elements)
_WRITABLE_VIEWS = (T.RESHAPE, T.PERMUTE, T.SHRINK, T.FLIP)


class GraphCtx:
    """One evaluation of a graph: buffers by id, the ids written by an assign or a call, variable values."""

    __slots__ = ("buffers", "assigned", "var_vals")

    def __init__(self, buffers: dict[int, np.ndarray], assigned: set[int], var_vals: dict[str, int]):
        self.buffers, self.assigned, self.var_vals = buffers, assigned, var_vals


def buffer_array(u: UOp, buffers: dict[int, np.ndarray]) -> np.ndarray:
    """The array given for a tensor.buffer op, checked against the dtype and shape the IR declares."""
    bid, _device, shape = u.arg
    if bid not in buffers:
        raise op_error(u, f"no buffer with id {bid} was given to the interpreter (have: {sorted(buffers)})")
    arr = buffers[bid]
    if not isinstance(arr, np.ndarray):
        raise op_error(u, f"buffer {bid} must be a numpy array, got {type(arr).__name__}")
    want = np_dtype(u.dtype)
    if arr.dtype != want or arr.shape != tuple(shape):
        raise op_error(u, f"buffer {bid} is {arr.dtype}{list(arr.shape)}, but the IR declares {u.dtype}{list(shape)} "
                          f"(numpy {want}{list(shape)})")
    return arr


def movement_arg(u: UOp, var_vals: dict[str, int]) -> tuple:
    """A movement op's shape / pads / bounds with its symbolic dims (`?`) at their values (bindings give theirs,
    free variables the one var_vals has)."""
    if len(u.src) == 1:
        return u.arg
    try:
        arg = T.sym_arg(u)
        return tuple(tuple(sym_infer(d, var_vals) for d in x) if type(x) is tuple else sym_infer(x, var_vals)
                     for x in arg)
    except ValueError as e:  # an unbound variable, or a dim the interpreter cannot evaluate
        raise op_error(u, str(e)) from None


def _assign_view(u: UOp, target: UOp, buffers: dict[int, np.ndarray], var_vals: dict[str, int]) -> np.ndarray:
    """A writable numpy view of the buffer region that `target` denotes."""
    chain: list[UOp] = []
    t = target
    while t.op is not T.BUFFER:
        if t.op is T.ASSIGN:
            t = t.operands.target
            continue
        if t.op not in _WRITABLE_VIEWS:
            raise op_error(u, f"tensor.assign can write a tensor.buffer or a reshape/permute/shrink/flip view of one, "
                              f"not through {t.op.name}")
        chain.append(t)
        t = t.operands.x
    base = buffer_array(t, buffers)
    v = base
    for m in reversed(chain):
        arg = movement_arg(m, var_vals)
        if m.op is T.RESHAPE:
            nv = v.reshape(arg)
            if nv.size and not np.shares_memory(nv, base):
                raise op_error(u, "tensor.assign cannot write through this reshape: it is not a view of the buffer")
            v = nv
        elif m.op is T.PERMUTE:
            v = np.transpose(v, m.arg)
        elif m.op is T.SHRINK:
            v = v[tuple(slice(b, e) for b, e in arg)]
        else:
            v = np.flip(v, axis=m.arg) if m.arg else v
    return v


def _buffer(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    arr = buffer_array(u, ctx.buffers)
    if u.dtype is dtypes.bfloat16:  # the float32 carrier may hold more precision than bf16 has
        return bf16_round(arr)
    if u.attrs.id in ctx.assigned:
        return arr.copy()
    view = arr.view()
    view.flags.writeable = False
    return view


def _reshape(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    return np.reshape(s[0], movement_arg(u, ctx.var_vals))


def _permute(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    return np.transpose(s[0], u.arg)


def _expand(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    return np.broadcast_to(s[0], movement_arg(u, ctx.var_vals))


def _pad(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    if not u.arg:  # a 0-d tensor: nothing to pad (np.pad rejects an empty pad list)
        return s[0]
    pads = movement_arg(u, ctx.var_vals)
    if any(b < 0 or a < 0 for b, a in pads):
        raise op_error(u, f"pad amounts {[list(p) for p in pads]} are negative at these variable values")
    return np.pad(s[0], [tuple(p) for p in pads], mode="constant", constant_values=np.zeros((), s[0].dtype))


def _shrink(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    bounds = movement_arg(u, ctx.var_vals)
    if len(u.src) > 1:
        for (b, e), n in zip(bounds, np.shape(s[0]), strict=True):
            if not 0 <= b <= e <= n:
                raise op_error(u, f"shrink bounds {[list(x) for x in bounds]} are out of range for shape "
                                  f"{list(np.shape(s[0]))} at these variable values")
    return s[0][tuple(slice(b, e) for b, e in bounds)]


def _flip(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    return np.flip(s[0], axis=u.arg) if u.arg else s[0]


def _reduce(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    a = u.attrs
    return reduce_array(s[0], a.op, tuple(a.axes), u.dtype)


def _identity(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    """tensor.copy / contiguous / detach: the operand's value."""
    return s[0]


def _assign(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    view = _assign_view(u, u.operands.target, ctx.buffers, ctx.var_vals)
    val = np.asarray(s[1], dtype=view.dtype)
    view[...] = val
    return np.broadcast_to(val, view.shape)


def _arange(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    return np.arange(u.attrs.shape[0], dtype=np_dtype(u.dtype))


def _var(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    name = u.attrs.name
    if name not in ctx.var_vals:
        raise op_error(u, f"variable {name!r} is not bound (pass var_vals or use tensor.bind)")
    return np.asarray(ctx.var_vals[name], dtype=np.int64)


def _bind(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    return np.asarray(s[1], dtype=np.int64)


def _after(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    """The live buffer, read now that its effect operands (the calls of a schedule) have run."""
    arr = buffer_array(u.operands.buffer, ctx.buffers)
    return bf16_round(arr) if u.dtype is dtypes.bfloat16 else arr.copy()


def _call(u: UOp, s: list[Value], ctx: GraphCtx) -> Value:
    arrays = [buffer_array(x, ctx.buffers) for x in u.src if x.op is T.BUFFER]
    if any(x.dtype is not dtypes.void and x.op not in (T.BUFFER, T.VAR, T.BIND) for x in u.src):
        raise op_error(u, "tensor.call operands must be tensor.buffer values, variables (tensor.var or tensor.bind, "
                          "the values of the kernel's kernel.vars) or void values that order it")
    try:
        var_vals = {**ctx.var_vals, **T.call_var_vals(u, ctx.var_vals)}
    except ValueError as e:
        raise op_error(u, str(e)) from None
    run_region(u.attrs.kernel, arrays, var_vals)
    return None


HANDLERS: HandlerTable = {
    T.BUFFER: _buffer,
    T.ARANGE: _arange,
    T.RESHAPE: _reshape,
    T.PERMUTE: _permute,
    T.EXPAND: _expand,
    T.PAD: _pad,
    T.SHRINK: _shrink,
    T.FLIP: _flip,
    T.REDUCE: _reduce,
    T.COPY: _identity,
    T.CONTIGUOUS: _identity,
    T.DETACH: _identity,
    T.ASSIGN: _assign,
    T.VAR: _var,
    T.BIND: _bind,
    T.CALL: _call,
    T.AFTER: _after,
}
