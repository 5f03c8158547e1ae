"""The `emit-c` pass: every device.program of the graph (nested regions included) becomes a device.source holding
its C text, so the output stays printable .uop; `uop-opt --emit=c` prints just the text.

Registered here, beside the renderer it runs, when uopir.backends loads (uop-opt imports it; the pass registry itself
never imports a backend).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.dialects import device as D
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.regions import regions_of
from uopir.ir.uop import UOp
from uopir.passes.registry import register_pass
from uopir.passes.runner import PassContext

__all__ = ["programs", "emit_c"]


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


@dataclass
class EmitCOptions:
    restrict: bool = field(default=True, metadata={"help": "mark the buffer pointers restrict (no aliasing)"})


@register_pass("emit-c", summary="replace the graph by one device.source of C text per device.program (what "
               "uop-opt --emit=c prints)", consumes=("core", "kernel", "device", "tensor"), produces=("device", "core"),
               options=EmitCOptions)
def emit_c(root: UOp, options: EmitCOptions, ctx: PassContext) -> UOp:
    from uopir.backends.c.renderer import CRenderer, kernel_signature

    progs = programs(root)
    if not progs:
        raise IRError(diagnostics=[diag_at(root, "emit-c: the graph has no device.program (lower it first, e.g. "
                                           "with -p 'default{target=c}')")])
    renderer = CRenderer(restrict=options.restrict)
    sources = []
    for p in progs:
        sources.append(UOp(D.SOURCE, dtypes.void, (), ("c", kernel_signature(p).name, renderer.render(p))))
        ctx.count("sources-emitted")
    return UOp.sink(*sources)
