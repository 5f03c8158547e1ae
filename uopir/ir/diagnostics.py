"""Source locations and the one error type that every bad input ends in."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from uopir.ir.uop import UOp

Severity = Literal["error", "warning", "note", "remark"]


@dataclass(frozen=True, slots=True)
class Location:
    file: str
    line: int  # 1-based
    col: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(slots=True)
class Diagnostic:
    severity: Severity
    message: str
    loc: Location | None = None
    source_line: str | None = None  # the text of loc.line, when known, for the caret display

    def format(self) -> str:
        head = f"{self.loc}: {self.severity}: {self.message}" if self.loc else f"{self.severity}: {self.message}"
        if self.loc is None or self.source_line is None:
            return head
        line = self.source_line.rstrip("\n")
        return f"{head}\n{line}\n{' ' * max(0, self.loc.col - 1)}^"


class IRError(Exception):
    """Every parse, verification or lowering failure on user input: one or more located diagnostics."""

    def __init__(self, message: str | None = None, loc: Location | None = None, *,
                 diagnostics: list[Diagnostic] | None = None, source_line: str | None = None):
        self.diagnostics: list[Diagnostic] = list(diagnostics) if diagnostics else []
        if message is not None:
            self.diagnostics.insert(0, Diagnostic("error", message, loc, source_line))
        assert self.diagnostics, "IRError needs a message"
        super().__init__(self.format())

    @property
    def message(self) -> str:
        return self.diagnostics[0].message

    @property
    def loc(self) -> Location | None:
        return self.diagnostics[0].loc

    def format(self) -> str:
        return "\n".join(d.format() for d in self.diagnostics)

    def __str__(self) -> str:
        return self.format()


# ---- the location side table: a UOp's identity never includes where it was written --------------------------------
_LOCS: weakref.WeakKeyDictionary[UOp, Location] = weakref.WeakKeyDictionary()
_SOURCES: dict[str, list[str]] = {}  # file name -> its lines, for caret display of verifier errors


def set_loc(u: UOp, loc: Location) -> None:
    _LOCS[u] = loc


def get_loc(u: UOp) -> Location | None:
    return _LOCS.get(u)


def register_source(filename: str, text: str, first_line: int = 1) -> None:
    """Remember a parsed file's text so that later diagnostics (verifier, passes) can show the line.

    Lines split on '\\n' only, as the parser counts them. With `first_line` > 1 the text is a chunk of a
    file (`// -----`) and is merged into what is known of that file at that position."""
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if first_line <= 1:
        _SOURCES[filename] = lines
        return
    known = _SOURCES.setdefault(filename, [])
    start = first_line - 1
    if len(known) < start + len(lines):
        known.extend([""] * (start + len(lines) - len(known)))
    known[start:start + len(lines)] = lines


def source_line(loc: Location | None) -> str | None:
    if loc is None or (lines := _SOURCES.get(loc.file)) is None or not 0 < loc.line <= len(lines):
        return None
    return lines[loc.line - 1]


def diag_at(u: UOp | None, message: str, severity: Severity = "error") -> Diagnostic:
    """A diagnostic located at a UOp's source position, if it has one."""
    loc = get_loc(u) if u is not None else None
    return Diagnostic(severity, message, loc, source_line(loc))


class ShapeError(ValueError):
    """A shape rule failed (the message names both shapes); the verifier turns it into a located diagnostic."""
