"""Progress of long work (a minimal stand-in: the cache worktree owns this module): a tqdm bar on a terminal,
plain lines (no carriage returns) on a pipe, only when UOPIR_DEBUG is at least 1 there."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["progress"]


class _Lines:
    def __init__(self, total: int | None, desc: str, show: bool) -> None:
        self.total, self.desc, self.show, self.n, self.post = total, desc, show, 0, ""

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, **kw: Any) -> None:
        self.post = ", ".join(f"{k}={v}" for k, v in kw.items())

    def close(self) -> None:
        if self.show:
            print(f"{self.desc}: {self.n}/{self.total if self.total is not None else '?'} {self.post}", file=sys.stderr)


@contextmanager
def progress(total: int | None, desc: str) -> Iterator[Any]:
    """A bar with .update(n=1) and .set_postfix(**kw)."""
    if sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            bar = tqdm(total=total, desc=desc, leave=False)
            try:
                yield bar
            finally:
                bar.close()
            return
    lines = _Lines(total, desc, os.environ.get("UOPIR_DEBUG", "0") not in ("", "0"))
    try:
        yield lines
    finally:
        lines.close()
