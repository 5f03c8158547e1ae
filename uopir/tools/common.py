"""What the command-line tools share: their usage error, and the one rule for every file they write."""
from __future__ import annotations

import os

__all__ = ["UsageError", "check_output_file"]


class UsageError(Exception):
    """Bad command-line arguments: one `PROG: error: ...` line, exit 1."""


def check_output_file(path: str, option: str) -> None:
    """Refuse, before any work, a file an option writes (`-o`, `--viz`, `--reproducer`) whose folder does not exist.

    No tool makes folders: a mistyped path would leave new ones behind (even at the filesystem root), and every
    option that writes a file follows this one rule."""
    folder = os.path.dirname(path)
    if not folder or os.path.isdir(folder):
        return
    why = "is not a folder" if os.path.exists(folder) else "does not exist"
    raise UsageError(f"cannot write '{path}' ({option}): the folder '{folder}' {why} (create it first)")
