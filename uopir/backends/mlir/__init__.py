"""MLIR interop through xDSL.

    export.py   device-level uopir -> an xDSL builtin.module (one func.func per device.program): export_module,
                export_text; the walk, control flow and memory
    alu.py      the core ops and casts as arith/math ops with uopir's exact semantics (a mixin of the exporter)
    types.py    dtypes as MLIR types (registers, memory) and exact literals
    ops.py      MLIR ops xDSL 0.75 lacks or restricts, with MLIR's syntax
    emit.py     the `emit-mlir` pass (`uop-opt --emit=mlir`)
    tools.py    find_mlir_tool: where LLVM's mlir-opt / mlir-translate are installed

xDSL is imported only when the export is used (the `mlir` extra; the test extra has it too).
"""
from __future__ import annotations

from typing import Any

from uopir.backends.mlir.tools import find_mlir_tool

__all__ = ["export_module", "export_text", "find_mlir_tool"]


def __getattr__(name: str) -> Any:
    if name in ("export_module", "export_text"):
        from uopir.backends.mlir import export

        return getattr(export, name)
    raise AttributeError(name)
