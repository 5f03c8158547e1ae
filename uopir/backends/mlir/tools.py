"""Finding LLVM's MLIR tools (provisional copy for the h3-mlirrun branch; h3-mlirout owns this module)."""
from __future__ import annotations

import glob
import os
import shutil

__all__ = ["find_mlir_tool"]


def find_mlir_tool(name: str) -> str | None:
    """The path of `name` (mlir-opt, mlir-translate): on PATH, as name-19, or under /usr/lib/llvm-*/bin."""
    for cand in (name, f"{name}-19"):
        p = shutil.which(cand)
        if p:
            return p
    for p in sorted(glob.glob(f"/usr/lib/llvm-*/bin/{name}"), reverse=True):
        if os.access(p, os.X_OK):
            return p
    return None
