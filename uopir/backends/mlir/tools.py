"""Finding LLVM's MLIR tools (mlir-opt, mlir-translate, ...) where they are installed.

Debian's `mlir-19-tools` puts them in /usr/lib/llvm-19/bin and links versioned names (`mlir-opt-19`) onto PATH;
other installs put the plain name on PATH. `find_mlir_tool` looks, in order, at `$UOPIR_MLIR_BIN` (a folder),
the plain name on PATH, the versioned names on PATH (newest first) and the llvm-N/bin folders (newest first).
"""
from __future__ import annotations

import glob
import os
import re
import shutil

from uopir.ir import env

__all__ = ["find_mlir_tool", "MLIR_VERSIONS"]

MLIR_VERSIONS = tuple(range(30, 16, -1))  # the LLVM major versions looked for, newest first


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _llvm_dirs() -> list[str]:
    """/usr/lib/llvm-N/bin folders, newest N first."""
    def version(p: str) -> int:
        m = re.search(r"llvm-(\d+)", p)
        return int(m.group(1)) if m else -1
    return sorted(glob.glob("/usr/lib/llvm-*/bin"), key=version, reverse=True)


def find_mlir_tool(name: str) -> str | None:
    """The path of the MLIR tool `name` (e.g. "mlir-opt"), or None where it is not installed."""
    folder = env.MLIR_BIN.raw()
    if folder:
        cand = os.path.join(folder, name)
        return cand if _executable(cand) else None
    found = shutil.which(name)
    if found:
        return found
    for v in MLIR_VERSIONS:
        found = shutil.which(f"{name}-{v}")
        if found:
            return found
    for d in _llvm_dirs():
        cand = os.path.join(d, name)
        if _executable(cand):
            return cand
    return None
