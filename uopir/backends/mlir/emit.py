"""The `emit-mlir` pass: the graph's device.programs become one device.source holding an MLIR module (xDSL's text,
one func.func per program), so the output stays printable .uop; `uop-opt --emit=mlir` prints just the text.

Registered by name when uopir.backends loads; xDSL is imported when a pipeline runs the pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.dialects import device as D
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.registry import register_pass
from uopir.passes.runner import PassContext

__all__ = ["emit_mlir"]


@dataclass
class EmitMLIROptions:
    generic: bool = field(default=False, metadata={"help": "print MLIR's generic op form instead of the pretty one"})


@register_pass("emit-mlir", summary="replace the graph by one device.source holding an MLIR module (func/scf/arith/"
               "math/memref/vector; what uop-opt --emit=mlir prints)", consumes=("core", "kernel", "device", "tensor"),
               produces=("device", "core"), options=EmitMLIROptions)
def emit_mlir(root: UOp, options: EmitMLIROptions, ctx: PassContext) -> UOp:
    try:
        from uopir.backends.mlir.export import export_module, print_module
    except ImportError as e:
        raise IRError(diagnostics=[diag_at(root, f"emit-mlir needs xDSL ({e}): pip install -e '.[mlir]'")]) from None
    module = export_module(root)
    ctx.count("functions-emitted", len(module.body.block.ops))
    return UOp.sink(UOp(D.SOURCE, dtypes.void, (), ("mlir", "module", print_module(module, options.generic))))
