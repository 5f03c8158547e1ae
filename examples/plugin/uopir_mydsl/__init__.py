"""uopir_mydsl: an out-of-tree uopir plugin (the sample of docs/plugins.md).

`register()` is its entry point (group `uopir.plugins`): importing the submodules registers the `mydsl` dialect
(two ops, a fold, verifiers, a custom syntax), its lowering to the core dialect (which joins `default{...}` and every
backend's pipeline), the reference interpreter's handlers for its ops, and a backend `mydsl-c` (the C backend's
output compiled at -O1).
"""
from __future__ import annotations


def register() -> None:
    """Register everything the plugin provides (importing a module twice registers nothing twice)."""
    from uopir_mydsl import backend, dialect, interpreter, lowering  # noqa: F401 - each registers on import
