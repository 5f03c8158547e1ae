"""The `emit-mlir` pass (uopir.backends.codegen.emit.emit_pass): the graph's device.programs become one device.source
holding an MLIR module (xDSL's text, one func.func per program); `uop-opt --emit=mlir` prints just the text. xDSL is
imported when a pipeline runs the pass; without it the pass is a located error saying how to install it."""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.backends.codegen.emit import Render, emit_pass
from uopir.ir.uop import UOp

__all__ = ["emit_mlir", "EmitMLIROptions"]


@dataclass
class EmitMLIROptions:
    generic: bool = field(default=False, metadata={"help": "print MLIR's generic op form instead of the pretty one"})


def mlir_render(options: EmitMLIROptions) -> Render:
    """The graph -> ("module", its MLIR module's text); the module is verified by xDSL."""
    from uopir.backends.mlir.export import export_module, print_module

    def render(root: UOp) -> tuple[str, str]:
        return "module", print_module(export_module(root), options.generic)
    return render


emit_mlir = emit_pass("mlir", mlir_render, what="an MLIR module", note="func/scf/arith/math/memref/vector",
                      options=EmitMLIROptions, one_module=True, needs=("xDSL", "pip install -e '.[mlir]'"))
