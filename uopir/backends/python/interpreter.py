"""`evaluate`: run a core + tensor dialect graph with numpy, op by op, with the handler tables of each dialect.

It is the oracle every later stage (passes, backends) is checked against; the exact per-dtype semantics it
implements are written down in uopir.dialects.semantics. A dialect defined elsewhere (a plugin) teaches it its ops
with `register_handler`. Each node is evaluated once (memoized), iteratively over
`root.toposort()`; kernel bodies run through `tensor.call` (see kernel.py). An op whose dialect this level has no
handler for is a located IRError naming the op.
"""
from __future__ import annotations

import numpy as np

from uopir.backends.python import core, kernel, tensor
from uopir.backends.python.base import Handler, HandlerTable, Value, op_error, run_ops
from uopir.backends.python.tensor import GraphCtx
from uopir.dialects import tensor as T
from uopir.ir.diagnostics import IRError
from uopir.ir.ops import OpDef
from uopir.ir.registration import RegistrationError, Sites
from uopir.ir.uop import UOp

__all__ = ["TABLE", "evaluate", "register_handler", "LEVELS"]

TABLE: HandlerTable = {**core.HANDLERS, **tensor.HANDLERS}

# level -> the table that runs it: "graph" a whole tensor-dialect program (values are whole arrays), "kernel" the
# body of a kernel.def (values are arrays over the kernel's iteration space)
LEVELS: dict[str, HandlerTable] = {"graph": TABLE, "kernel": kernel.TABLE}
_SITES = {lv: Sites(f"reference-interpreter handler ({lv} level) of op") for lv in LEVELS}


def register_handler(op: OpDef, fn: Handler, *, levels: tuple[str, ...] = ("graph", "kernel"),
                     replace: bool = False) -> Handler:
    """Teach the reference interpreter `op`: `fn(u, srcs, ctx)` computes u's value from its operands' values (numpy
    arrays; an elementwise numpy function serves both levels). An op that already has a handler at a level is a
    RegistrationError naming both places, unless `replace` (or the same line again)."""
    if not isinstance(op, OpDef):
        raise RegistrationError(f"register_handler needs an OpDef (uopir.ir.ops.get_op(name)), got {op!r}")
    for lv in levels:
        if lv not in LEVELS:
            raise RegistrationError(f"unknown interpreter level {lv!r}; levels: {', '.join(LEVELS)}")
        _SITES[lv].claim(op.name, op in LEVELS[lv], replace)
        LEVELS[lv][op] = fn
    return fn


def _missing(u: UOp) -> IRError:
    name = u.op.name
    if u.op.dialect == "kernel":
        return op_error(u, f"{name} outside a tensor.call: the reference interpreter runs kernel-level ops only as "
                           f"the body of a kernel (run_kernel)")
    if u.op.dialect == "device":
        return op_error(u, f"{name} outside a device.program: the reference interpreter runs device-level ops "
                           f"only in a linearized kernel (run_program)")
    return op_error(u, f"the reference interpreter has no handler for {name}")


def _writes(order: list[UOp], var_vals: dict[str, int]) -> set[int]:
    """The buffer ids a tensor.call or tensor.assign of the graph writes; binds its variables into `var_vals`."""
    assigned: set[int] = set()
    for u in order:
        op = u.op
        if op is T.BIND and (var := u.operands.var).op is T.VAR:
            var_vals.setdefault(var.attrs.name, int(u.operands.value.arg))
        elif op is T.CALL:
            assigned.update(x.attrs.id for x in u.src if x.op is T.BUFFER)
        elif op is T.ASSIGN:
            t = u.operands.target
            while t.src and t.op is not T.BUFFER:
                t = t.src[0]
            if t.op is T.BUFFER:
                assigned.add(t.attrs.id)
    return assigned


def evaluate(root: UOp, buffers: dict[int, np.ndarray],
             var_vals: dict[str, int] | None = None) -> np.ndarray | list[np.ndarray]:
    """Run the graph under `root`; a core.sink root gives the list of its sources' values.

    `buffers` maps tensor.buffer ids to arrays (bf16 as float32); tensor.assign writes into them in place.
    `var_vals` gives tensor.var values by name (a tensor.bind in the graph binds its variable everywhere)."""
    order = root.toposort()
    vv = dict(var_vals or {})
    ctx = GraphCtx(buffers, _writes(order, vv), vv)
    return _own(run_ops(order, TABLE, ctx, _missing)[root])


def _own(v: Value) -> Value:
    """Results never alias the caller's buffers or internal views."""
    if isinstance(v, list):
        return [_own(x) for x in v]
    return None if v is None else np.array(v, copy=True)
