"""The `emit-llvm` pass (uopir.backends.codegen.emit.emit_pass): each device.program becomes a device.source of its
LLVM IR; `uop-opt --emit=llvm` prints just the text. The IR is what the renderer makes before optimization, without
the host's cpu attributes (so it reads the same on every machine)."""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.backends.codegen.emit import Render, emit_pass
from uopir.ir.uop import UOp

__all__ = ["emit_llvm", "EmitLLVMOptions"]


@dataclass
class EmitLLVMOptions:
    noalias: bool = field(default=True, metadata={"help": "mark the buffer pointers noalias"})


def llvm_render(options: EmitLLVMOptions) -> Render:
    """A program -> (its kernel name, its LLVM IR)."""
    from uopir.backends.llvm.renderer import LLVMRenderer, kernel_signature

    renderer = LLVMRenderer(noalias=options.noalias)

    def render(p: UOp) -> tuple[str, str]:
        return kernel_signature(p).name, renderer.render(p)
    return render


emit_llvm = emit_pass("llvm", llvm_render, what="LLVM IR", options=EmitLLVMOptions)
