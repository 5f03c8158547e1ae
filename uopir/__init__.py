"""uopir: a multi-dialect compiler for tensor programs whose IR is hash-consed UOps.

The public API. Heavier parts (Tensor, PassManager, backends) load on first use.
"""
from __future__ import annotations

from typing import Any

from uopir import dialects as dialects  # registers the core, tensor, kernel and device ops
from uopir.ir import env as _env
from uopir.ir.diagnostics import IRError, Location
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

__all__ = ["UOp", "DType", "dtypes", "IRError", "Location", "parse_ir", "print_ir", "verify", "Tensor",
           "PassManager", "graph_rewrite", "UPat", "PatternMatcher", "Variable", "no_grad", "TinyJit",
           "pyrender"]

_LAZY = {
    "parse_ir": ("uopir.ir.parser", "parse_ir"),
    "print_ir": ("uopir.ir.printer", "print_ir"),
    "pyrender": ("uopir.ir.pyrender", "pyrender"),
    "verify": ("uopir.ir.verify", "verify"),
    "graph_rewrite": ("uopir.ir.rewrite", "graph_rewrite"),
    "UPat": ("uopir.ir.upat", "UPat"),
    "PatternMatcher": ("uopir.ir.pattern_compiler", "PatternMatcher"),
    "PassManager": ("uopir.passes.manager", "PassManager"),
    "Tensor": ("uopir.frontend.tensor", "Tensor"),
    "Variable": ("uopir.frontend.variable", "Variable"),
    "no_grad": ("uopir.frontend.tensor", "no_grad"),
    "TinyJit": ("uopir.frontend.jit", "TinyJit"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'uopir' has no attribute {name!r}")


if _env.PLUGINS.is_set():  # the plugins $UOPIR_PLUGINS names (a failure is a warning here; the tools report it)
    from uopir import plugins as _plugins

    _plugins.load_env(at_import=True)
