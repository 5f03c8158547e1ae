"""What every emit-LANG pass does: find the graph's device.programs and replace the graph by their source text.

`programs` lists the device.program ops of a graph and of every region nested in it; `require_programs` is that list
or a located error when it is empty (the graph was not lowered); `emit_sources` is the body of a pass that emits one
`device.source` per program, given a function that renders one program (its name and its text). Each backend's emit
module registers its pass with these (uopir.backends.c.emit, gpu.emit, llvm.emit, mlir.emit).
"""
from __future__ import annotations

from collections.abc import Callable

from uopir.dialects import device as D
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.regions import regions_of
from uopir.ir.uop import UOp
from uopir.passes.runner import PassContext

__all__ = ["programs", "require_programs", "emit_sources"]


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


def emit_sources(root: UOp, ctx: PassContext, language: str, render: Callable[[UOp], tuple[str, str]],
                 target: str | None = None) -> UOp:
    """A sink of one device.source per device.program of the graph: (language, name, text), where `render` gives the
    name and text of a program; counts them as `sources-emitted`. `target` is the one the error for a graph without
    a program suggests (default: the language)."""
    sources = []
    for p in require_programs(root, ctx.pass_name, target or language):
        name, text = render(p)
        sources.append(UOp(D.SOURCE, dtypes.void, (), (language, name, text)))
        ctx.count("sources-emitted")
    return UOp.sink(*sources)
