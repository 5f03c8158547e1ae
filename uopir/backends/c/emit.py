"""The `emit-c` pass: every device.program of the graph (nested regions included) becomes a device.source holding
its C text, so the output stays printable .uop; `uop-opt --emit=c` prints just the text.

Registered here, beside the renderer it runs, when uopir.backends loads (uop-opt imports it; the pass registry itself
never imports a backend).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.backends.emit import emit_sources
from uopir.ir.uop import UOp
from uopir.passes.registry import register_pass
from uopir.passes.runner import PassContext

__all__ = ["emit_c"]


@dataclass
class EmitCOptions:
    restrict: bool = field(default=True, metadata={"help": "mark the buffer pointers restrict (no aliasing)"})


@register_pass("emit-c", summary="replace the graph by one device.source of C text per device.program (what "
               "uop-opt --emit=c prints)", consumes=("core", "kernel", "device", "tensor"), produces=("device", "core"),
               options=EmitCOptions)
def emit_c(root: UOp, options: EmitCOptions, ctx: PassContext) -> UOp:
    from uopir.backends.c.renderer import CRenderer, kernel_signature

    renderer = CRenderer(restrict=options.restrict)
    return emit_sources(root, ctx, "c", lambda p: (kernel_signature(p).name, renderer.render(p)))
