"""The `emit-c` pass (uopir.backends.codegen.emit.emit_pass): each device.program becomes a device.source of its C
text; `uop-opt --emit=c` prints just the text. Loaded when a pipeline names the pass (uopir.backends' table)."""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.backends.codegen.emit import Render, emit_pass
from uopir.ir.uop import UOp

__all__ = ["emit_c", "EmitCOptions"]


@dataclass
class EmitCOptions:
    restrict: bool = field(default=True, metadata={"help": "mark the buffer pointers restrict (no aliasing)"})


def c_render(options: EmitCOptions) -> Render:
    """A program -> (its kernel name, its C text)."""
    from uopir.backends.c.renderer import CRenderer, kernel_signature

    renderer = CRenderer(restrict=options.restrict)

    def render(p: UOp) -> tuple[str, str]:
        return kernel_signature(p).name, renderer.render(p)
    return render


emit_c = emit_pass("c", c_render, what="C text", options=EmitCOptions)
