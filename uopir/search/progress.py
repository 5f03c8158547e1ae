"""Progress of long work the user waits on (a search, training, a test suite): a tqdm bar on a terminal, plain lines
on a pipe.

Why two forms: a bar redraws one line with `\\r`, which a log file or CI console shows as one unreadable line per
redraw; a pipe gets a complete line each `interval` seconds and a last one at the end (none but the last for work
shorter than that; none at all with `leave=False`, as a bar that leaves no trace). The output goes to stderr by
default, so that stdout stays the program's result. `UOPIR_PROGRESS=0` turns both off, `UOPIR_PROGRESS=lines` asks
for the plain lines on a terminal too.
"""
from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import Any, TextIO

from uopir.ir import env

__all__ = ["PROGRESS_ENV", "LINE_INTERVAL_S", "Progress", "progress", "progress_setting"]

PROGRESS_ENV = env.PROGRESS.name
LINE_INTERVAL_S = 10.0  # the least time between two plain lines (the first and the last are always written)


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Progress:
    """Counts work done out of `total` (None: unknown) and shows it; `update` and `set_postfix` as in tqdm."""

    def __init__(self, total: int | None, desc: str, stream: TextIO | None = None, mode: str | None = None,
                 interval: float | None = None, leave: bool = True, disable: bool = False) -> None:
        self.total, self.desc, self.n = total, desc, 0
        self.stream = sys.stderr if stream is None else stream
        self.mode = "off" if disable else mode if mode is not None else _mode(self.stream)
        self.interval = LINE_INTERVAL_S if interval is None else interval
        self.postfix: dict[str, Any] = {}
        self._t0 = time.perf_counter()
        self._last = self._t0
        self._shown: tuple | None = None  # (count, figures) of the last plain line written
        self.leave = leave
        self._bar: Any = None
        if self.mode == "bar":
            from tqdm import tqdm

            # a terminal that reports no size (a bare pty: 0 x 0) would hide tqdm's bar: it gets 80 x 24
            sized = _columns(self.stream) > 0
            self._bar = tqdm(total=total, desc=desc, file=self.stream, leave=leave, dynamic_ncols=sized,
                             ncols=None if sized else 80, nrows=None if sized else 24)

    def update(self, n: int = 1) -> None:
        """`n` more units done."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.mode == "lines":
            now = time.perf_counter()
            if now - self._last >= self.interval:
                self._line(now)

    def set_postfix(self, **kw: Any) -> None:
        """Figures shown after the count (`best=1.2e-3`), until changed."""
        self.postfix.update(kw)
        if self._bar is not None:
            self._bar.set_postfix({k: _fmt(v) for k, v in self.postfix.items()}, refresh=False)

    def line(self) -> str:
        """The plain line of the progress so far (no `\\r`, no newline)."""
        count = f"{self.n}/{self.total}" if self.total is not None else str(self.n)
        pct = f" ({100 * self.n // self.total}%)" if self.total else ""
        post = "".join(f" {k}={_fmt(v)}" for k, v in self.postfix.items())
        return f"{self.desc}: {count}{pct}{post} [{time.perf_counter() - self._t0:.1f} s]"

    def _line(self, now: float) -> None:
        self._last = now
        self._shown = (self.n, tuple(self.postfix.items()))
        try:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or full stream: progress is not worth an error
            self.mode = "off"

    def close(self) -> None:
        """Show the final state (the bar stays on its line; a pipe gets its last line), unless `leave` is False."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.mode == "lines":
            if self.leave and self._shown != (self.n, tuple(self.postfix.items())):  # not the line just written
                self._line(time.perf_counter())
            self.mode = "off"

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 0


def progress_setting() -> str:
    """$UOPIR_PROGRESS, checked: "off", "lines" or "auto". ValueError for another value (a program's main calls
    this first, to turn a bad value into its usage error rather than a failure halfway through)."""
    return env.PROGRESS.get()


def _mode(stream: TextIO) -> str:
    setting = progress_setting()
    if setting == "off":
        return "off"
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if setting == "lines" or not tty:
        return "lines"
    try:
        import tqdm  # noqa: F401 - a base dependency; an install without it still gets the plain lines
    except ImportError:
        return "lines"
    return "bar"


def progress(total: int | None, desc: str, stream: TextIO | None = None, leave: bool = True,
             disable: bool = False) -> Progress:
    """A context manager that shows the progress of `total` units of work (None: unknown) named `desc` on `stream`
    (default stderr): `with progress(n, "search") as p: ... p.update(); p.set_postfix(best=t)`. `leave=False`: no
    trace of it at the end (a summary line follows); `disable=True`: show nothing (a quiet mode of the caller)."""
    return Progress(total, desc, stream, leave=leave, disable=disable)
