"""The `emit-llvm` pass: every device.program of the graph (nested regions included) becomes a device.source holding
its LLVM IR, so the output stays printable .uop; `uop-opt --emit=llvm` prints just the text.

The IR is what the renderer makes before optimization, without the host's cpu attributes (so it reads the same on
every machine); registered here, beside the renderer, when uopir.backends loads.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.backends.emit import emit_sources
from uopir.ir.uop import UOp
from uopir.passes.registry import register_pass
from uopir.passes.runner import PassContext

__all__ = ["emit_llvm"]


@dataclass
class EmitLLVMOptions:
    noalias: bool = field(default=True, metadata={"help": "mark the buffer pointers noalias"})


@register_pass("emit-llvm", summary="replace the graph by one device.source of LLVM IR per device.program (what "
               "uop-opt --emit=llvm prints)", consumes=("core", "kernel", "device", "tensor"),
               produces=("device", "core"), options=EmitLLVMOptions)
def emit_llvm(root: UOp, options: EmitLLVMOptions, ctx: PassContext) -> UOp:
    from uopir.backends.llvm.renderer import LLVMRenderer, kernel_signature

    renderer = LLVMRenderer(noalias=options.noalias)
    return emit_sources(root, ctx, "llvm", lambda p: (kernel_signature(p).name, renderer.render(p)))
