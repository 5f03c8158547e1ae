"""`reorder_magnitudes`: how far a valid reordering of a program's float sums may move each output, to first order.

The reference interpreter sums in index order; a backend may split or vectorize a float sum (partial accumulators,
lanes, threads), which changes its rounding. The error of an n-term sum is bounded by its terms, not by its result:
recursive summation errs by at most (n-1) u sum|x_i| (u the unit roundoff), and random-signed roundings by about
sqrt(n) u sum|x_i|; so a long sum that cancels (48^3 normal values summing to -768 from sum|x| = 238,000) differs
between two orders by far more than a few ulps of its result. The tolerance (uopir.backends.tolerance.compare's
`magnitude`) therefore measures such an output against sum|x|.

For each float value v this evaluates M(v) >= 0, in float64 beside the interpreter's own values: if every float add
reduction s is replaced by any s' with |s' - s| <= e * (sum of |its terms| + M(terms)), then v moves by at most
e * M(v), to first order. Inputs and constants have M = 0; a sum adds sum|x| (its own rounding) to the M of its
terms; movement ops move M as they move values; the ALU ops carry it by their derivatives (a*b: M(a)|b| + |a|M(b),
a/b: M(a)/|b| + |a|M(b)/b^2, ...); max, min and where take the M of what they select; integers, bools and
comparisons have M = 0 (a comparison that flips is not covered: such outputs stay exact). A graph holding an op the
table below does not know (kernels, assigns, a product reduction) gives None: the caller keeps the plain tolerance.
"""
from __future__ import annotations

import math

import numpy as np

from uopir.backends.python.interpreter import TABLE, _writes
from uopir.backends.python.tensor import GraphCtx
from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.ir.uop import UOp

__all__ = ["reorder_magnitudes"]

_MOVES = frozenset((T.RESHAPE, T.PERMUTE, T.EXPAND, T.PAD, T.SHRINK, T.FLIP))
_SAME = frozenset((T.COPY, T.CONTIGUOUS, T.DETACH))
_NONE = frozenset((C.CONST, T.BUFFER, T.VAR, T.BIND, C.BITCAST, C.CMPLT, C.CMPNE, C.CMPEQ, C.AND, C.OR, C.XOR,
                   C.SHL, C.SHR, C.IDIV))


class _Unknown(Exception):
    """An op whose effect on M this table does not know."""


def _f64(v: object) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


def _alu(u: UOp, v: list[np.ndarray], m: list[np.ndarray], out: np.ndarray) -> np.ndarray:
    """M of an ALU op from its operands' values v and magnitudes m (out: its own value)."""
    op = u.op
    if op in (C.ADD, C.SUB):
        return m[0] + m[1]
    if op in (C.NEG, C.SIN, C.TRUNC):
        return m[0]
    if op is C.MUL:
        return m[0] * np.abs(v[1]) + np.abs(v[0]) * m[1]
    if op is C.MULACC:
        return m[0] * np.abs(v[1]) + np.abs(v[0]) * m[1] + m[2]
    if op is C.FDIV:
        return m[0] / np.abs(v[1]) + np.abs(v[0]) * m[1] / (v[1] * v[1])
    if op is C.RECIP:
        return m[0] / (v[0] * v[0])
    if op is C.SQRT:
        return m[0] / (2 * np.sqrt(np.abs(v[0])))
    if op is C.EXP2:
        return math.log(2) * np.abs(out) * m[0]
    if op is C.LOG2:
        return m[0] / (np.abs(v[0]) * math.log(2))
    if op is C.MOD:  # fmod(a, b) = a - trunc(a/b) * b
        return m[0] + np.abs(np.trunc(v[0] / v[1])) * m[1]
    if op is C.MAX or op.name == "core.min":
        return np.maximum(m[0], m[1])
    if op is C.WHERE:
        return np.where(v[0], m[1], m[2])
    raise _Unknown(op.name)


def _reduce(u: UOp, x: np.ndarray, m: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    a = u.attrs
    axes = tuple(a.axes)
    kind = getattr(a.op, "name", a.op)
    if kind == "add":
        return np.sum(np.abs(x) + m, axis=axes, keepdims=True).reshape(shape)
    if kind in ("max", "min"):  # selects one term: its M
        return np.max(np.broadcast_to(m, x.shape), axis=axes, keepdims=True).reshape(shape) if x.size else \
            np.zeros(shape)
    raise _Unknown(f"tensor.reduce {kind}")


def reorder_magnitudes(root: UOp, buffers: dict[int, np.ndarray],
                       var_vals: dict[str, int] | None = None) -> list[np.ndarray] | None:
    """M of each output of tensor-level `root` (the operands of a core.sink, else root itself) on these inputs (not
    modified), float64 of each output's shape (0 for an output of no float sum); None when the graph holds an op the
    table does not know."""
    order = root.toposort()
    vv = dict(var_vals or {})
    ctx = GraphCtx({k: np.array(b, copy=True) for k, b in buffers.items()}, _writes(order, vv), vv)
    vals: dict[UOp, object] = {}
    mags: dict[UOp, np.ndarray] = {}
    try:
        with np.errstate(all="ignore"):
            for u in order:
                h = TABLE.get(u.op)
                if h is None or u.op in (T.CALL, T.ASSIGN, T.AFTER):
                    raise _Unknown(u.op.name)
                val = vals[u] = h(u, [vals[s] for s in u.src], ctx)
                if u.op is C.SINK:
                    continue
                shape = np.shape(val)
                ms = [mags[s] for s in u.src]
                if not u.dtype.scalar.is_float or u.op in _NONE:
                    mags[u] = np.zeros(shape)
                elif u.op in _MOVES:
                    mags[u] = _f64(TABLE[u.op](u, [np.broadcast_to(ms[0], np.shape(vals[u.src[0]]))], ctx))
                elif u.op in _SAME:
                    mags[u] = ms[0]
                elif u.op is C.CAST:
                    mags[u] = ms[0] if u.src[0].dtype.scalar.is_float else np.zeros(shape)
                elif u.op is T.REDUCE:
                    mags[u] = _reduce(u, _f64(vals[u.src[0]]), ms[0], shape)
                elif u.op in C.ALU_OPS:
                    m = _alu(u, [_f64(vals[s]) if s.dtype.scalar.is_float else np.asarray(vals[s]) for s in u.src],
                             ms, _f64(val))
                    mags[u] = np.broadcast_to(np.where(np.isfinite(m), m, 0.0), shape)
                else:
                    raise _Unknown(u.op.name)
    except _Unknown:
        return None
    return [np.array(mags[s], dtype=np.float64) for s in (root.src if root.op is C.SINK else (root,))]
