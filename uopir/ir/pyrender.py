"""pyrender: a graph as the Python source that builds it again (tinygrad's debugging habit).

`pyrender(root)` returns a script of one `UOp(...)` call per node, sources (and region bodies held in args) first,
ending in `root = ...`. Run while the graph is alive, it returns the very same object (UOps are hash-consed):

    ns: dict = {}
    exec(pyrender(g), ns)
    assert ns["root"] is g

Unlike the text IR (print_ir), the result is ordinary Python: paste it into a test or a REPL and edit it.
"""
from __future__ import annotations

import math
from typing import Any

from uopir.ir.dtype import DType
from uopir.ir.ops import DYN, OpDef
from uopir.ir.uop import UOp

__all__ = ["pyrender"]


def _nodes(root: UOp) -> list[UOp]:
    """Every node reachable through sources and args (regions), each after everything it is built from."""
    order: list[UOp] = []
    done: set[UOp] = set()
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
        u, expanded = stack.pop()
        if u in done:
            continue
        if expanded:
            done.add(u)
            order.append(u)
            continue
        stack.append((u, True))
        for s in reversed((*u.src, *_uops_in(u.arg), *_uops_in(u.tag))):
            if s not in done:
                stack.append((s, False))
    return order


def _uops_in(v: Any) -> list[UOp]:
    if isinstance(v, UOp):
        return [v]
    if isinstance(v, tuple):
        return [u for x in v for u in _uops_in(x)]
    return []


def _dtype(d: DType) -> str:
    if d.kind == "ptr":
        assert d.base is not None
        return f"{_dtype(d.base)}.ptr({d.addrspace!r}, {d.size})"
    if d.count > 1:
        return f"{_dtype(d.scalar)}.vec({d.count})"
    r = repr(d)
    return r if r.startswith("dtypes.") else f"dtypes.from_name({d.name!r})"


class _Render:
    def __init__(self) -> None:
        self.names: dict[UOp, str] = {}
        self.ops: dict[OpDef, str] = {}
        self.uses_math = self.uses_dyn = False

    def op(self, o: OpDef) -> str:
        if o not in self.ops:
            name = o.name.replace(".", "_").upper()
            taken = set(self.ops.values())
            self.ops[o] = name if name not in taken else f"{name}_{len(taken)}"
        return self.ops[o]

    def value(self, v: Any) -> str:
        """A Python expression that evaluates to `v` (bit-exactly for floats: -0.0, inf, the sign of a nan)."""
        t = type(v)
        if v is None or t in (bool, int, str):
            return repr(v)
        if t is float:
            if math.isfinite(v):
                return repr(v)
            self.uses_math = True
            body = "math.nan" if math.isnan(v) else "math.inf"
            return f"-{body}" if math.copysign(1.0, v) < 0 else body
        if t is tuple:
            items = [self.value(x) for x in v]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if t is UOp:
            return self.names[v]
        if t is DType:
            return _dtype(v)
        if v is DYN:
            self.uses_dyn = True
            return "DYN"
        raise TypeError(f"pyrender: cannot write an arg of type {t.__name__} ({v!r}) as Python")


def pyrender(root: UOp) -> str:
    """Python source that, run, rebuilds `root`'s graph and binds it to `root` (the same object while it lives)."""
    r = _Render()
    body: list[str] = []
    for i, u in enumerate(_nodes(root)):
        name = r.names[u] = f"u{i}"
        args = [r.op(u.op), _dtype(u.dtype), r.value(u.src)]
        if u.arg is not None or u.tag is not None:
            args.append(r.value(u.arg))
        if u.tag is not None:
            args.append(r.value(u.tag))
        body.append(f"{name} = UOp({', '.join(args)})")
    head = ["import math"] if r.uses_math else []
    head += ["from uopir.ir.dtype import dtypes", f"from uopir.ir.ops import {'DYN, ' if r.uses_dyn else ''}get_op",
             "from uopir.ir.uop import UOp", ""]
    head += [f"{v} = get_op({o.name!r})" for o, v in r.ops.items()]
    return "\n".join([*head, *body, f"root = {r.names[root]}", ""])

