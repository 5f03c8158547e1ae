"""The device.programs of a graph, which every emit-LANG pass emits.

`programs` lists the device.program ops of a graph and of every region nested in it; `require_programs` is that list
or a located error when it is empty (the graph was not lowered). The emit passes themselves are one factory,
uopir.backends.codegen.emit.emit_pass.
"""
from __future__ import annotations

from uopir.dialects import device as D
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.regions import regions_of
from uopir.ir.uop import UOp

__all__ = ["programs", "require_programs"]


def programs(root: UOp) -> list[UOp]:
    """The device.program ops of the graph and of every region nested in it, in order of first appearance."""
    out: list[UOp] = []
    seen: set[UOp] = set()
    stack = [root]
    while stack:
        r = stack.pop()
        nested: list[UOp] = []
        for u in r.toposort():
            if u in seen:
                continue
            seen.add(u)
            if u.op is D.PROGRAM:
                out.append(u)
            nested.extend(regions_of(u))
        stack.extend(reversed(nested))
    return out


def require_programs(root: UOp, pass_name: str, target: str) -> list[UOp]:
    """The graph's device.programs; a located error naming the pass when there is none (`target`: the one the error
    suggests lowering for)."""
    progs = programs(root)
    if not progs:
        raise IRError(diagnostics=[diag_at(root, f"{pass_name}: the graph has no device.program (lower it first, e.g. "
                                                 f"with -p 'default{{target={target}}}')")])
    return progs

