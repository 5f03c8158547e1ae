"""Source locations and the one error type that every bad input ends in."""
from __future__ import annotations

import itertools
import threading
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from uopir.ir.uop import UOp

Severity = Literal["error", "warning", "note", "remark"]


@dataclass(frozen=True, slots=True)
class Location:
    """Where in a source text: file, 1-based line and column."""

    file: str
    line: int  # 1-based
    col: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(slots=True)
class Diagnostic:
    """One message about the IR: severity, text, where."""

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


# ---- locations: a per-parse table, never a per-node global one ----------------------------------------------------
# A UOp's identity never includes where it was written, and hash-consing shares one node between every file that
# writes the same op. So a location belongs to a parse, not to a node: each `parse_ir` builds a SourceMap (node ->
# line of that text, and the text's lines for the caret display). It lives as long as the root it returned, and a
# diagnostic looks its node up in the map of the parse the user is working on:
#   1. the map made current by `with located(root_or_map):` (the verifier does this for the root it checks);
#   2. otherwise the newest live parse that wrote that node (the behaviour when nothing says which file).
# `set_loc` is for IR built in code (tests, a future frontend recording Python positions): a weak per-node table
# consulted after the parse maps.
_LINE_INDENT = " \t\r\x0b\x0c"


class SourceMap:
    """Where each op of one parse was written (file, line and column) and the lines of that text.

    Held by the parsed root (weakly keyed), so it, and the source text it keeps, go when the graph goes."""

    __slots__ = ("file", "first_line", "lines", "_at", "_root", "_root_li", "__weakref__")

    def __init__(self, file: str, first_line: int, lines: list[str]):
        self.file = file
        self.first_line = first_line  # the file line of lines[0] (a `// -----` chunk starts further down)
        self.lines = lines
        self._at: dict[UOp, int] = {}  # node -> index into lines (the parser fills it; the root is moved out)
        self._root: weakref.ReferenceType[UOp] | None = None
        self._root_li = -1

    def _index(self, u: UOp) -> int | None:
        li = self._at.get(u)
        if li is None and self._root is not None and self._root() is u:
            li = self._root_li
        return li

    def loc(self, u: UOp) -> Location | None:
        """The position of u's line in this parse (column: the first non-blank char), or None."""
        li = self._index(u)
        if li is None:
            return None
        line = self.lines[li]
        return Location(self.file, li + self.first_line, len(line) - len(line.lstrip(_LINE_INDENT)) + 1)

    def line(self, lineno: int) -> str | None:
        """The text of file line `lineno` if this parse covers it."""
        k = lineno - self.first_line
        if not 0 <= k < len(self.lines):
            return None
        ln = self.lines[k]
        return ln[:-1] if ln.endswith("\r") else ln

    def inherit(self, replaced: dict[UOp, UOp]) -> None:
        """Give each new node of a rewrite (`old -> new`) the line of the node it replaces, when it has none here: a
        diagnostic after `canonicalize` or a lowering still points into the file."""
        at = self._at
        for old, new in replaced.items():
            if new is not old and self._index(new) is None and (li := self._index(old)) is not None:
                at[new] = li

    def __contains__(self, u: object) -> bool:
        return self._index(u) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._at) + (self._root is not None)


_BY_ROOT: weakref.WeakKeyDictionary[UOp, SourceMap] = weakref.WeakKeyDictionary()  # root -> its newest parse
_LIVE: weakref.WeakValueDictionary[int, SourceMap] = weakref.WeakValueDictionary()  # serial -> map, oldest first
_SERIAL = itertools.count()
_SCOPE: ContextVar[SourceMap | None] = ContextVar("uopir_source_scope", default=None)
_MANUAL: weakref.WeakKeyDictionary[UOp, Location] = weakref.WeakKeyDictionary()
# recently parsed texts, for the caret under a location whose parse is gone (uop-opt reports a chunk's expected
# diagnostics after its graph is freed); bounded, so a long session does not keep every file it ever read
_RECENT_MAX = 8
_RECENT_CHARS = 1 << 25
_RECENT: deque[tuple[str, int, list[str], int]] = deque()  # (file, first line, lines, chars)
_RECENT_LOCK = threading.Lock()


def register_parse(root: UOp, smap: SourceMap) -> None:
    """Attach a finished parse's map to its root (the parser calls this once per successful parse)."""
    li = smap._at.pop(root, None)  # the map must not hold its own key: it would never be freed
    if li is not None:
        smap._root, smap._root_li = weakref.ref(root), li
    _BY_ROOT[root] = smap
    _LIVE[next(_SERIAL)] = smap


def source_map(root: UOp) -> SourceMap | None:
    """The location table of the newest parse that returned `root` (None for a graph built in code)."""
    return _BY_ROOT.get(root)


def current_source_map() -> SourceMap | None:
    """The map that `located` made current in this thread / context, if any."""
    return _SCOPE.get()


@contextmanager
def located(where: SourceMap | UOp | None) -> Iterator[SourceMap | None]:
    """Within the block, diagnostics point into one parse: `where` is its SourceMap or the root it returned.

    With a root, an enclosing `located` block wins (the caller knows better which file the user is working on),
    and a root that no parse returned changes nothing. Per thread and per asyncio task (a ContextVar)."""
    if where is not None and not isinstance(where, SourceMap):
        where = _BY_ROOT.get(where) if _SCOPE.get() is None else None
    if where is None:
        yield _SCOPE.get()
        return
    tok = _SCOPE.set(where)
    try:
        yield where
    finally:
        _SCOPE.reset(tok)


def _live_maps() -> list[SourceMap]:
    """Live parse maps, newest first."""
    out = []
    for r in reversed(_LIVE.valuerefs()):
        m = r()
        if m is not None:
            out.append(m)
    return out


def _find(u: UOp) -> tuple[Location | None, SourceMap | None]:
    scope = _SCOPE.get()
    if scope is not None:
        loc = scope.loc(u)
        if loc is not None:
            return loc, scope
    else:
        for m in _live_maps():
            loc = m.loc(u)
            if loc is not None:
                return loc, m
    return _MANUAL.get(u), None


def set_loc(u: UOp, loc: Location) -> None:
    """Give a UOp built in code a location (parsed UOps get theirs from their parse's SourceMap)."""
    _MANUAL[u] = loc


def get_loc(u: UOp) -> Location | None:
    """Where u was written, in the current parse (see `located`), else the newest live parse that wrote it."""
    return _find(u)[0]


def register_source(filename: str, text: str, first_line: int = 1, lines: list[str] | None = None) -> None:
    """Keep a text (a file, or a `// -----` chunk starting at `first_line`) for the caret display of later
    diagnostics. Only the few most recent texts are kept; a parse's own map keeps its text while its graph lives.
    `lines` is the text already split on '\\n' (the parser passes its own list: no second copy)."""
    if lines is None:
        lines = text.split("\n")
    with _RECENT_LOCK:
        _RECENT.append((filename, first_line, lines, len(text)))
        total = sum(e[3] for e in _RECENT)
        while len(_RECENT) > 1 and (len(_RECENT) > _RECENT_MAX or total > _RECENT_CHARS):
            total -= _RECENT.popleft()[3]


def source_line(loc: Location | None) -> str | None:
    """The text of a location's line, if its parse is current or alive, or its text is among the recent ones."""
    if loc is None:
        return None
    scope = _SCOPE.get()
    maps = [scope] if scope is not None else []
    for m in maps + _live_maps():
        if m.file == loc.file and (ln := m.line(loc.line)) is not None:
            return ln
    with _RECENT_LOCK:
        recent = list(_RECENT)
    for file, first, lines, _ in reversed(recent):
        k = loc.line - first
        if file == loc.file and 0 <= k < len(lines):
            ln = lines[k]
            return ln[:-1] if ln.endswith("\r") else ln
    return None


def diag_at(u: UOp | None, message: str, severity: Severity = "error") -> Diagnostic:
    """A diagnostic located at a UOp's source position in the current parse (see `located`), if it has one."""
    if u is None:
        return Diagnostic(severity, message)
    loc, m = _find(u)
    if loc is None:
        return Diagnostic(severity, message)
    return Diagnostic(severity, message, loc, m.line(loc.line) if m is not None else source_line(loc))


class ShapeError(RuntimeError, ValueError):
    """A shape rule failed (the message names both shapes); the verifier turns it into a located diagnostic.

    The Tensor frontend raises it for shapes that do not fit together (broadcast, reshape, expand, permute, matmul,
    cat/stack): a RuntimeError, as tinygrad and torch raise there, and a ValueError, as numpy does."""


class BroadcastError(ShapeError, IndexError):
    """Shapes that cannot be broadcast together: a ShapeError, and an IndexError as tinygrad's newer releases raise
    (and as index tensors that do not broadcast raise)."""


class AxisError(IndexError, ValueError):
    """An axis (dim) argument out of range: an IndexError, as tinygrad and torch raise, and a ValueError, as numpy's
    AxisError (which subclasses both) is."""


class ArgumentError(RuntimeError, ValueError):
    """A Tensor op argument tinygrad and torch reject with RuntimeError (an unknown mode, a missing bound); a
    ValueError too, so code written against numpy's behaviour still catches it."""


class DTypeError(RuntimeError, TypeError):
    """A Tensor op that tinygrad and torch refuse for an operand's dtype with RuntimeError (shifts of floats, an
    integer tensor to a negative integer power); a TypeError too."""


class BufferTooLarge(MemoryError):
    """A buffer larger than this machine's memory, refused before anything is allocated (numpy would either fail
    with an allocation error or, with memory overcommit, succeed and let the process be killed on first write)."""


def host_memory_bytes() -> int | None:
    """The physical memory of this machine in bytes, or None where the OS does not say."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_buffer_size(shape: tuple[int, ...], itemsize: int, what: str) -> None:
    """Raise BufferTooLarge when `shape` elements of `itemsize` bytes need more than this machine's memory."""
    n = itemsize
    for d in shape:
        n *= int(d)
    limit = host_memory_bytes()
    if limit is not None and n > limit:
        raise BufferTooLarge(f"{what} of shape {tuple(shape)} needs {_human_bytes(n)}, more than this machine's "
                             f"memory ({_human_bytes(limit)})")


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024:
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.1f} EiB"
