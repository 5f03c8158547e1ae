"""Handlers for the core dialect at the graph level: constants, casts, the ALU, vectors and roots.

Each ALU op runs `uopir.dialects.semantics.alu`, the same function constant folding uses, so the interpreter and the
folds cannot disagree. Vector values carry their lanes on a trailing axis.
"""
from __future__ import annotations

import numpy as np

from uopir.backends.python.base import Handler, HandlerTable, Value
from uopir.dialects import core as C
from uopir.dialects.semantics import alu, bitcast_array, cast_array, const_array
from uopir.ir.uop import UOp


def _const(u: UOp, s: list[Value], ctx: object) -> Value:
    a = u.arg
    shaped = type(a) is tuple and len(a) == 2 and type(a[1]) is tuple and u.dtype.count == 1
    return const_array(u.dtype, a[0], a[1]) if shaped else const_array(u.dtype, a)


def _cast(u: UOp, s: list[Value], ctx: object) -> Value:
    return cast_array(s[0], u.operands.x.dtype, u.dtype)


def _bitcast(u: UOp, s: list[Value], ctx: object) -> Value:
    return bitcast_array(s[0], u.operands.x.dtype, u.dtype)


def _sink(u: UOp, s: list[Value], ctx: object) -> Value:
    return list(s)


def void(u: UOp, s: list[Value], ctx: object) -> Value:
    """Ops that only order or group effects have no value."""
    return None


def _vectorize(u: UOp, s: list[Value], ctx: object) -> Value:
    return np.stack([np.asarray(x) for x in np.broadcast_arrays(*s)], axis=-1)


def _gep(u: UOp, s: list[Value], ctx: object) -> Value:
    """Lanes of a vector; a scalar operand (one lane, `gep x [0, 0, ...]` is a broadcast) gets its lane axis first,
    since its trailing array axis, if any, is a loop's or thread's, not a lane."""
    a = np.asarray(s[0])
    r = (a[..., None] if u.operands.x.dtype.count == 1 else a)[..., list(u.arg)]
    return r[..., 0] if len(u.arg) == 1 else r


def alu_handler(name: str) -> Handler:
    """The handler of one elementwise op: the semantics module's `alu` with the op's name bound."""
    def run(u: UOp, s: list[Value], ctx: object) -> Value:
        return alu(name, u.dtype, s, [x.dtype for x in u.src])
    run.__name__ = f"alu_{name.partition('.')[2]}"
    return run


ALU_HANDLERS: HandlerTable = {op: alu_handler(op.name) for op in C.ALU_OPS}

HANDLERS: HandlerTable = {
    **ALU_HANDLERS,
    C.CONST: _const,
    C.CAST: _cast,
    C.BITCAST: _bitcast,
    C.VECTORIZE: _vectorize,
    C.GEP: _gep,
    C.SINK: _sink,
    C.GROUP: void,
}
