"""What every handler table of the reference interpreter shares: the handler signature and the loop that runs one.

A handler computes one op: `handler(u, srcs, ctx) -> value`, where `srcs` are the values of `u.src` and `ctx` is
the level's context (the buffers, bound variables, the iteration space of a kernel). Tables are plain dicts keyed
by OpDef (identity), one per dialect module; a level (graph, kernel) runs the union of the tables it allows.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

Value = Any  # np.ndarray, a list of values (sink), a pointer (kernel level) or None (void)
Handler = Callable[[UOp, list[Value], Any], Value]
HandlerTable = dict[OpDef, Handler]


def op_error(u: UOp, msg: str) -> IRError:
    """An IRError located at `u` (its source line when it was parsed from text)."""
    return IRError(diagnostics=[diag_at(u, msg)])


def run_ops(order: Sequence[UOp], table: HandlerTable, ctx: Any,
            missing: Callable[[UOp], IRError]) -> dict[UOp, Value]:
    """Evaluate `order` (a toposort) op by op with `table`; an op without a handler raises `missing(u)`.

    numpy's ValueError/TypeError/IndexError/KeyError on strange input become IRErrors located at the op."""
    vals: dict[UOp, Value] = {}
    get = table.get
    for u in order:
        h = get(u.op)
        if h is None:
            raise missing(u)
        try:
            vals[u] = h(u, [vals[s] for s in u.src], ctx)
        except IRError:
            raise
        except (ValueError, TypeError, IndexError, KeyError) as e:
            raise op_error(u, f"the reference interpreter failed on {u.op.name}: {e}") from e
    return vals
