"""`evaluate`: run a core + tensor dialect graph with numpy, op by op, with the handler tables of each dialect.

It is the oracle every later stage (passes, backends) is checked against; the exact per-dtype semantics it
implements are written down in uopir.dialects.semantics. Each node is evaluated once (memoized), iteratively over
`root.toposort()`; kernel bodies run through `tensor.call` (see kernel.py). An op whose dialect this level has no
handler for is a located IRError naming the op.
"""
from __future__ import annotations

import numpy as np

from uopir.backends.python import core, tensor
from uopir.backends.python.base import HandlerTable, Value, op_error, run_ops
from uopir.backends.python.tensor import GraphCtx
from uopir.dialects import tensor as T
from uopir.ir.diagnostics import IRError
from uopir.ir.uop import UOp

TABLE: HandlerTable = {**core.HANDLERS, **tensor.HANDLERS}


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
