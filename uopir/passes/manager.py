"""The pass manager: a registry of named passes, the textual pipeline syntax, and instrumentation.

Why one module: `uop-opt`, the frontend and the tests all run passes the same way, so registration, pipeline
parsing, verification between passes, IR dumps, timing, statistics and crash reproducers live here once; the CLI
is a thin layer over `PassManager.parse(text).run(root, **instrumentation)`.

Pipeline syntax (spaces allowed around every token):

    pipeline := element (',' element)*
    element  := NAME ['{' option* '}'] | ANCHOR '(' pipeline ')'
    option   := KEY '=' VALUE | KEY            (a bare KEY sets a bool option to true)
    VALUE    := "quoted string" | [a,b,...] | text up to a space or '}'   (so `list=1,2` is a list)

NAME is a registered pass or a named pipeline (expanded where it is written, with its options). ANCHOR is
`kernel` (runs the nested pipeline on every kernel body: a region whose root is `kernel.def`, e.g. the kernel of
`tensor.call`, at any depth) or `any` (every nested region). Option keys are kebab-case (`max-iterations`);
the Python field name (`max_iterations`) is accepted too.
"""
from __future__ import annotations

import dataclasses
import difflib
import enum
import importlib
import io
import os
import pkgutil
import re
import shlex
import sys
import tempfile
import time
import traceback
import typing
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from uopir.ir.diagnostics import Diagnostic, IRError, Location, Severity, diag_at
from uopir.ir.ops import RegionAttr
from uopir.ir.pattern import RewriteStats
from uopir.ir.uop import UOp

__all__ = ["register_pass", "register_pipeline", "register_anchor", "PassManager", "PassContext", "PassInfo",
           "PipelineInfo", "AnchorInfo", "PipelineError", "PassCrash", "PassFailure", "RunReport", "PASSES",
           "PIPELINES", "ANCHORS", "map_regions", "check_pass_names", "load_passes", "get_pass", "PASS_MODULES",
           "LOAD_ERRORS", "DUMP_HEADER"]

# Modules that register passes. Every other module under uopir.passes is imported too (so a new pass file is seen
# by --list-passes without editing this list); a module listed here that fails to import is an error.
PASS_MODULES: list[str] = ["uopir.passes.core", "uopir.passes.testing", "uopir.passes.tensor.canonicalize"]
LOAD_ERRORS: dict[str, str] = {}  # module -> why it could not be imported (shown by --list-passes)

_KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


# ---- registry ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OptionInfo:
    """One typed pass option, from a dataclass field."""

    name: str  # kebab-case spelling
    field: str  # the dataclass field name
    type: Any
    default: Any
    help: str = ""

    def type_text(self) -> str:
        return _type_text(self.type)


@dataclass(frozen=True)
class PassInfo:
    name: str
    fn: Callable[[UOp, Any, PassContext], UOp]
    summary: str
    consumes: tuple[str, ...]
    produces: tuple[str, ...]
    options: type | None
    option_infos: tuple[OptionInfo, ...]


@dataclass(frozen=True)
class PipelineInfo:
    name: str
    expand: Callable[[Any], str | Sequence[str]]
    summary: str
    options: type | None
    option_infos: tuple[OptionInfo, ...]


@dataclass(frozen=True)
class AnchorInfo:
    name: str
    select: Callable[[UOp], bool]  # does the nested pipeline run on this region root?
    summary: str


PASSES: dict[str, PassInfo] = {}
PIPELINES: dict[str, PipelineInfo] = {}
ANCHORS: dict[str, AnchorInfo] = {}


def _option_infos(owner: str, options: type | None) -> tuple[OptionInfo, ...]:
    if options is None:
        return ()
    if not dataclasses.is_dataclass(options) or not isinstance(options, type):
        raise TypeError(f"{owner}: options must be a dataclass type or None")
    hints = typing.get_type_hints(options)
    out = []
    for f in dataclasses.fields(options):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            raise TypeError(f"{owner}: option '{f.name}' needs a default")
        tp = hints[f.name]
        _type_text(tp)  # rejects unsupported types at registration
        out.append(OptionInfo(f.name.replace("_", "-"), f.name, tp, default, f.metadata.get("help", "")))
    return tuple(out)


def _check_name(kind: str, name: str) -> None:
    if not _KEBAB.match(name):
        raise ValueError(f"{kind} name {name!r} must be kebab-case (lowercase words joined by '-')")
    if name in ANCHORS and kind != "anchor":
        raise ValueError(f"{kind} name {name!r} is an anchor")


def register_pass(name: str, summary: str = "", consumes: Iterable[str] = (), produces: Iterable[str] = (),
                  options: type | None = None) -> Callable[[Callable], Callable]:
    """Register `fn(root, options, ctx) -> UOp` as pass `name`. `options` is a dataclass whose fields (typed, each
    with a default) are the pass's options, or None. Registering a name again replaces it (module reloads)."""
    _check_name("pass", name)
    infos = _option_infos(f"pass '{name}'", options)

    def deco(fn: Callable) -> Callable:
        if name in PIPELINES:
            raise ValueError(f"pass name {name!r} is already a pipeline")
        PASSES[name] = PassInfo(name, fn, summary.strip(), tuple(consumes), tuple(produces), options, infos)
        return fn
    return deco


def register_pipeline(name: str, options: type | None, expand: Callable[[Any], str | Sequence[str]],
                      summary: str = "") -> None:
    """Register a named pipeline: `expand(options)` returns pipeline text (or a list of elements) that replaces
    `name{...}` where it is written. `options` is a dataclass type or None (then `expand` gets None)."""
    _check_name("pipeline", name)
    if name in PASSES:
        raise ValueError(f"pipeline name {name!r} is already a pass")
    PIPELINES[name] = PipelineInfo(name, expand, summary.strip(), options, _option_infos(f"pipeline '{name}'", options))


def register_anchor(name: str, select: Callable[[UOp], bool], summary: str = "") -> None:
    """Register `name(...)`: a nested pipeline that runs on every region root for which `select` is true."""
    _check_name("anchor", name)
    ANCHORS[name] = AnchorInfo(name, select, summary)


register_anchor("kernel", lambda r: r.op.name == "kernel.def",
                "run the nested pipeline on every kernel body (a region whose root is kernel.def), at any depth")
register_anchor("any", lambda r: True, "run the nested pipeline on every nested region (outermost first)")

_loaded = False


def load_passes() -> None:
    """Import every pass module once, so the registry is complete (lazy: importing the manager stays cheap)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import uopir  # noqa: F401 - registers the dialects
    import uopir.passes as pkg

    names = list(PASS_MODULES)
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".", onerror=lambda n: LOAD_ERRORS.setdefault(
            n, "could not be imported")):
        if m.name not in names and m.name != __name__:
            names.append(m.name)
    for mod in names:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name is not None and (mod == e.name or mod.startswith(e.name + ".")):
                continue  # a listed pass module not written yet
            LOAD_ERRORS[mod] = f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - a broken pass module must not take the others down
            LOAD_ERRORS[mod] = f"{type(e).__name__}: {e}"


def get_pass(name: str) -> PassInfo:
    load_passes()
    if name not in PASSES:
        raise PipelineError(f"unknown pass '{name}'{_suggest(name, PASSES)}")
    return PASSES[name]


# ---- errors --------------------------------------------------------------------------------------------------------
class PipelineError(IRError):
    """A pipeline text or an instrumentation argument is wrong (unknown pass or option, bad value)."""


class PassFailure(IRError):
    """A pass reported an error, or produced IR that does not verify. `pass_name` says which; `ir` is the IR
    it failed on (its input, or its invalid output)."""

    def __init__(self, pass_name: str, message: str | None = None, *, diagnostics: list[Diagnostic] | None = None,
                 ir: UOp | None = None):
        if message is None and not diagnostics:
            message = f"pass '{pass_name}' failed"
        super().__init__(message, diagnostics=diagnostics)
        self.pass_name, self.ir = pass_name, ir


class PassCrash(Exception):
    """A pass raised something other than IRError: a bug. `reproducer` is the path written (or None)."""

    def __init__(self, pass_name: str, error: BaseException, reproducer: str | None, tb: str):
        self.pass_name, self.error, self.reproducer, self.traceback = pass_name, error, reproducer, tb
        super().__init__(f"pass '{pass_name}' crashed: {type(error).__name__}: {error}")


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"


# ---- option values ---------------------------------------------------------------------------------------------------
def _type_text(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return "bool"
    if tp is int:
        return "int"
    if tp is float:
        return "float"
    if tp is str:
        return "string"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "|".join(m.name for m in tp)
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin in (list, tuple) and args:
        return f"list<{_type_text(args[0])}>"
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return f"optional<{_type_text(inner[0])}>"
    raise TypeError(f"unsupported option type {tp!r} (use bool, int, float, str, Literal, Enum, list[...], X | None)")


def _split_list(text: str) -> list[str]:
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1].strip()
    return [] if not t else [x.strip() for x in t.split(",")]


class _BadValue(ValueError):
    def __init__(self, expected: str, hint: str = ""):
        super().__init__(expected)
        self.hint = hint


def _convert(tp: Any, text: str | None) -> Any:
    """Parse one option value; raises ValueError with what was expected."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        if text is None or text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if text is None:
        raise ValueError(f"expected a value of type {_type_text(tp)}")
    if tp is int:
        try:
            return int(text, 0)
        except ValueError:
            raise ValueError("expected an integer") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    if tp is str:
        return text
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for m in tp:
            if text in (m.name, str(m.value)):
                return m
        raise _BadValue(f"expected one of {', '.join(m.name for m in tp)}", _suggest(text, [m.name for m in tp]))
    if origin is typing.Literal:
        for a in args:
            if text == str(a):
                return a
        raise _BadValue(f"expected one of {', '.join(map(str, args))}", _suggest(text, map(str, args)))
    if origin in (list, tuple):
        vals = [_convert(args[0], x) for x in _split_list(text)]
        return vals if origin is list else tuple(vals)
    inner = [a for a in args if a is not type(None)]
    if text.lower() == "none":
        return None
    return _convert(inner[0], text)


def format_value(v: Any) -> str:
    """An option value as pipeline text (round trips through `_convert`)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return ",".join(format_value(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    if s == "" or any(c in s for c in ' \t{}",()'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def _build_options(kind: str, name: str, cls: type | None, infos: tuple[OptionInfo, ...],
                   given: list[tuple[str, str | None, int]], text: str) -> Any:
    by_name = {o.name: o for o in infos} | {o.field: o for o in infos}
    values: dict[str, Any] = {}
    for key, val, col in given:
        info = by_name.get(key)
        if info is None:
            if not infos:
                raise _perr(f"{kind} '{name}' takes no options (got '{key}')", text, col)
            raise _perr(f"{kind} '{name}' has no option '{key}'{_suggest(key, [o.name for o in infos])} "
                        f"(options: {', '.join(o.name for o in infos)})", text, col)
        try:
            values[info.field] = _convert(info.type, val)
        except ValueError as e:
            shown = "no value" if val is None else f"'{val}'"
            hint = getattr(e, "hint", "")
            raise _perr(f"option '{info.name}' of {kind} '{name}': {e}, got {shown}{hint}", text, col) from None
    return cls(**values) if cls is not None else None


# ---- pipeline elements ---------------------------------------------------------------------------------------------
@dataclass
class PassStep:
    info: PassInfo
    options: Any

    @property
    def name(self) -> str:
        return self.info.name

    def text(self) -> str:
        if not self.info.option_infos:
            return self.info.name
        opts = " ".join(f"{o.name}={format_value(getattr(self.options, o.field))}" for o in self.info.option_infos)
        return f"{self.info.name}{{{opts}}}"


@dataclass
class AnchorStep:
    anchor: AnchorInfo
    steps: list[Step]

    @property
    def name(self) -> str:
        return self.anchor.name

    def text(self) -> str:
        return f"{self.anchor.name}({','.join(s.text() for s in self.steps)})"


Step = PassStep | AnchorStep


def _perr(msg: str, text: str, col: int) -> PipelineError:
    return PipelineError(msg, Location("<pipeline>", 1, col + 1), source_line=text)


class _PipelineParser:
    def __init__(self, text: str, depth: int = 0):
        self.s, self.i, self.depth = text, 0, depth

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def peek(self) -> str:
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def word(self, what: str) -> tuple[str, int]:
        self.ws()
        m = re.compile(r"[A-Za-z0-9_.\-]+").match(self.s, self.i)
        if not m:
            got = f"'{self.s[self.i]}'" if self.i < len(self.s) else "the end"
            raise _perr(f"expected {what}, got {got}", self.s, self.i)
        self.i = m.end()
        return m.group(), m.start()

    def pipeline(self, closer: str = "") -> list[Step]:
        steps: list[Step] = []
        if self.peek() == closer and closer:
            return steps
        if not closer and self.peek() == "":
            return steps
        while True:
            steps.extend(self.element())
            c = self.peek()
            if c == ",":
                self.i += 1
                continue
            if c == closer:
                return steps
            got = f"'{c}'" if c else "the end"
            raise _perr(f"expected ',' or {repr(closer) if closer else 'the end'} after a pass, got {got}",
                        self.s, self.i)

    def element(self) -> list[Step]:
        name, col = self.word("a pass name")
        given: list[tuple[str, str | None, int]] = []
        if self.peek() == "{":
            obrace = self.i
            self.i += 1
            given = self.options(obrace)
        if self.peek() == "(":
            if name not in ANCHORS:
                raise _perr(f"'{name}' is not an anchor (anchors: {', '.join(sorted(ANCHORS))})"
                            f"{_suggest(name, ANCHORS)}", self.s, col)
            if given:
                raise _perr(f"anchor '{name}' takes no options", self.s, given[0][2])
            self.i += 1
            inner = self.pipeline(")")
            self.i += 1  # ')'
            return [AnchorStep(ANCHORS[name], inner)]
        if name in PASSES:
            info = PASSES[name]
            return [PassStep(info, _build_options("pass", name, info.options, info.option_infos, given, self.s))]
        if name in PIPELINES:
            pinfo = PIPELINES[name]
            opts = _build_options("pipeline", name, pinfo.options, pinfo.option_infos, given, self.s)
            return self.expand(pinfo, opts, col)
        if name in ANCHORS:
            raise _perr(f"anchor '{name}' needs a nested pipeline: {name}(pass,...)", self.s, col)
        raise _perr(f"unknown pass '{name}'{_suggest(name, [*PASSES, *PIPELINES, *ANCHORS])}", self.s, col)

    def expand(self, pinfo: PipelineInfo, opts: Any, col: int) -> list[Step]:
        if self.depth > 20:
            raise _perr(f"pipeline '{pinfo.name}' expands into itself", self.s, col)
        body = pinfo.expand(opts)
        text = body if isinstance(body, str) else ",".join(body)
        try:
            return _PipelineParser(text, self.depth + 1).pipeline()
        except PipelineError as e:
            raise _perr(f"in the expansion of pipeline '{pinfo.name}' ({text!r}): {e.message}", self.s, col) from None

    def options(self, obrace: int) -> list[tuple[str, str | None, int]]:
        out: list[tuple[str, str | None, int]] = []
        while True:
            c = self.peek()
            if c == "}":
                self.i += 1
                return out
            if c == "":
                raise _perr("unterminated option list: missing '}'", self.s, obrace)
            key, col = self.word("an option name")
            val: str | None = None
            if self.i < len(self.s) and self.s[self.i] == "=":
                self.i += 1
                val = self.value()
            out.append((key, val, col))

    def value(self) -> str:
        s, i = self.s, self.i
        if i < len(s) and s[i] == '"':
            j, buf = i + 1, []
            while j < len(s) and s[j] != '"':
                if s[j] == "\\" and j + 1 < len(s):
                    j += 1
                buf.append(s[j])
                j += 1
            if j >= len(s):
                raise _perr("unterminated string", s, i)
            self.i = j + 1
            return "".join(buf)
        if i < len(s) and s[i] == "[":
            j = s.find("]", i)
            if j < 0:
                raise _perr("unterminated list: missing ']'", s, i)
            self.i = j + 1
            return s[i:j + 1]
        j = i
        while j < len(s) and not s[j].isspace() and s[j] != "}":
            j += 1
        self.i = j
        return s[i:j]


# ---- running -------------------------------------------------------------------------------------------------------
class PassContext:
    """What a running pass can use: `stats` for graph_rewrite, `options`, diagnostics (`warn`, `note`, `error`),
    `count(name)` for statistics of a plain-code pass, and `anchor`/`region_root` when run under an anchor."""

    def __init__(self, pass_name: str, options: Any, stats: RewriteStats, counters: Counter[str],
                 anchor: str | None = None):
        self.pass_name, self.options, self.stats, self.counters = pass_name, options, stats, counters
        self.anchor = anchor
        self.diagnostics: list[Diagnostic] = []
        self.failed = False

    def emit(self, u: UOp | None, message: str, severity: Severity = "error") -> Diagnostic:
        d = diag_at(u, message, severity)
        self.diagnostics.append(d)
        if severity == "error":
            self.failed = True
        return d

    def error(self, u: UOp | None, message: str) -> Diagnostic:
        """Report an error at u; the pass fails when it returns (its result is dropped)."""
        return self.emit(u, message, "error")

    def warn(self, u: UOp | None, message: str) -> Diagnostic:
        return self.emit(u, message, "warning")

    def note(self, u: UOp | None, message: str) -> Diagnostic:
        return self.emit(u, message, "note")

    def remark(self, u: UOp | None, message: str) -> Diagnostic:
        return self.emit(u, message, "remark")

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n


@dataclass
class StepRecord:
    """Timing and statistics of one pipeline element (summed over every region an anchor ran it on)."""

    label: str  # e.g. "canonicalize" or "kernel(canonicalize)" path-joined
    depth: int
    seconds: float = 0.0
    runs: int = 0
    stats: RewriteStats = field(default_factory=RewriteStats)
    counters: Counter[str] = field(default_factory=Counter)
    nodes_changed: int = 0


@dataclass
class RunReport:
    records: list[StepRecord] = field(default_factory=list)
    verify_seconds: float = 0.0
    total_seconds: float = 0.0
    diagnostics: list[Diagnostic] = field(default_factory=list)  # warnings, notes and remarks passes emitted


DUMP_HEADER = "// -----// IR Dump {when} {what} //----- //"


@dataclass
class _Inst:
    verify: bool = True
    print_before: frozenset[str] = frozenset()
    print_after: frozenset[str] = frozenset()
    before_all: bool = False
    after_all: bool = False
    after_change: bool = False
    after_failure: bool = False
    timing: bool = False
    statistics: bool = False
    generic: bool = False
    out: TextIO | None = None
    reproducer: str | Path | bool | None = None
    reproducer_flags: str = ""


def check_pass_names(names: Iterable[str]) -> None:
    """Raise PipelineError for a name (in a list or comma-separated) that is not a registered pass."""
    load_passes()
    for nm in sorted(_as_names(list(names))):
        if nm not in PASSES:
            raise PipelineError(f"unknown pass '{nm}' in --print-ir-before/--print-ir-after{_suggest(nm, PASSES)}")


def _as_names(v: str | Iterable[str] | None) -> frozenset[str]:
    if v is None:
        return frozenset()
    if isinstance(v, str):
        v = [v]
    return frozenset(x.strip() for item in v for x in item.split(",") if x.strip())


class PassManager:
    """An expanded pipeline. `PassManager.parse("canonicalize,dce").run(root, print_ir_after_all=True)`."""

    def __init__(self, steps: list[Step] | None = None):
        self.steps: list[Step] = list(steps or [])
        self.report = RunReport()

    @classmethod
    def parse(cls, text: str) -> PassManager:
        """Parse pipeline text; raises PipelineError (an IRError) naming the closest valid spellings."""
        load_passes()
        p = _PipelineParser(text)
        steps = p.pipeline()
        if p.peek():
            raise _perr(f"unexpected '{p.peek()}'", text, p.i)
        return cls(steps)

    def add(self, name: str, **options: Any) -> PassManager:
        """Append a pass (or named pipeline) with Python option values."""
        load_passes()
        if name in PIPELINES:
            pi = PIPELINES[name]
            opts = pi.options(**options) if pi.options is not None else None
            self.steps.extend(_PipelineParser(name).expand(pi, opts, 0))
            return self
        info = get_pass(name)
        if info.options is None:
            if options:
                raise PipelineError(f"pass '{name}' takes no options")
            self.steps.append(PassStep(info, None))
            return self
        fields = {f.name for f in dataclasses.fields(info.options)}
        for k in options:
            if k not in fields:
                raise PipelineError(f"pass '{name}' has no option '{k}'{_suggest(k, fields)}")
        self.steps.append(PassStep(info, info.options(**options)))
        return self

    def text(self) -> str:
        """The expanded pipeline with every option's value (what --dump-pass-pipeline prints)."""
        return ",".join(s.text() for s in self.steps)

    def __str__(self) -> str:
        return self.text()

    def pass_names(self) -> set[str]:
        out: set[str] = set()
        stack = list(self.steps)
        while stack:
            s = stack.pop()
            if isinstance(s, AnchorStep):
                stack.extend(s.steps)
            else:
                out.add(s.name)
        return out

    # --- the run ------------------------------------------------------------------------------------------------------
    def run(self, root: UOp, *, verify: bool = True, print_ir_before: str | Iterable[str] | None = None,
            print_ir_after: str | Iterable[str] | None = None, print_ir_before_all: bool = False,
            print_ir_after_all: bool = False, print_ir_after_change: bool = False,
            print_ir_after_failure: bool = False, timing: bool = False, pass_statistics: bool = False,
            print_generic: bool = False, out: TextIO | None = None, reproducer: str | Path | bool | None = None,
            reproducer_flags: str = "") -> UOp:
        """Run the pipeline on `root` and return the new root.

        verify: run the verifier after every pass (not on the input: verify it yourself). A pass whose output does
          not verify raises PassFailure naming it.
        print_ir_*: MLIR-style IR dumps (`// -----// IR Dump After P //----- //` + .uop text) to `out` (stderr).
          `print_ir_before`/`print_ir_after` take pass names (a list, or comma-separated).
        timing / pass_statistics: print the wall-time table / per-pattern fire counts to `out` at the end (also
          kept in `self.report`).
        reproducer: where a crashing pass's reproducer goes: a file path, a directory, None (the directory in
          $UOPIR_REPRODUCER_DIR, else the temp dir), or False (write none). Raises PassCrash with its path.
        """
        check_pass_names([*_as_names(print_ir_before), *_as_names(print_ir_after)])
        inst = _Inst(verify, _as_names(print_ir_before), _as_names(print_ir_after), print_ir_before_all,
                     print_ir_after_all, print_ir_after_change, print_ir_after_failure, timing, pass_statistics,
                     print_generic, out, reproducer, reproducer_flags)
        self.report = RunReport()
        self._records: dict[int, StepRecord] = {}
        t0 = time.perf_counter()
        try:
            for i, step in enumerate(self.steps):
                try:
                    root = self._run_step(step, root, inst, 0, "")
                except _Crashed as c:
                    path = self._write_reproducer(root, self.steps[i:], c, inst)
                    raise PassCrash(c.pass_name, c.error, path, c.tb) from None
        finally:
            self.report.total_seconds = time.perf_counter() - t0
            self.report.records = list(self._records.values())
            stream = inst.out if inst.out is not None else sys.stderr
            if timing:
                stream.write(self.timing_report())
            if pass_statistics:
                stream.write(self.statistics_report())
            stream.flush()
        return root

    def _record(self, step: Step, label: str, depth: int) -> StepRecord:
        rec = self._records.get(id(step))
        if rec is None:
            rec = self._records[id(step)] = StepRecord(label, depth)
        return rec

    def _run_step(self, step: Step, root: UOp, inst: _Inst, depth: int, where: str) -> UOp:
        if isinstance(step, AnchorStep):
            rec = self._record(step, step.anchor.name + "(...)", depth)
            t = time.perf_counter()
            try:
                return map_regions(root, step.anchor.select,
                                    lambda r: self._run_nested(step, r, inst, depth))
            finally:
                rec.seconds += time.perf_counter() - t
                rec.runs += 1
        return self._run_pass(step, root, inst, depth, where)

    def _run_nested(self, step: AnchorStep, region_root: UOp, inst: _Inst, depth: int) -> UOp:
        name = _region_name(region_root)
        where = f" ('{step.anchor.name}' region{f' @{name}' if name else ''})"
        for s in step.steps:
            region_root = self._run_step(s, region_root, inst, depth + 1, where)
        return region_root

    def _dump(self, inst: _Inst, when: str, what: str, u: UOp) -> None:
        from uopir.ir.printer import print_ir

        stream = inst.out if inst.out is not None else sys.stderr
        stream.write(DUMP_HEADER.format(when=when, what=what) + "\n")
        try:
            text = print_ir(u, generic=inst.generic)
        except Exception as e:  # noqa: BLE001 - a dump must not hide the real problem
            text = f"// <could not print the IR: {type(e).__name__}: {e}>\n"
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.write("\n")

    def _run_pass(self, step: PassStep, root: UOp, inst: _Inst, depth: int, where: str) -> UOp:
        name = step.info.name
        rec = self._record(step, name, depth)
        what = name + where
        if inst.before_all or name in inst.print_before:
            self._dump(inst, "Before", what, root)
        ctx = PassContext(name, step.options, rec.stats, rec.counters, where.strip() or None)
        t = time.perf_counter()
        try:
            out = step.info.fn(root, step.options, ctx)
        except IRError as e:
            rec.seconds += time.perf_counter() - t
            if inst.after_failure:
                self._dump(inst, "After", what + " Failed", root)
            raise PassFailure(name, diagnostics=ctx.diagnostics + e.diagnostics, ir=root) from None
        except _Crashed:
            raise
        except Exception as e:  # noqa: BLE001 - any other exception is a crash in the pass
            rec.seconds += time.perf_counter() - t
            if inst.after_failure:
                self._dump(inst, "After", what + " Failed", root)
            raise _Crashed(name, e, traceback.format_exc()) from None
        rec.seconds += time.perf_counter() - t
        rec.runs += 1
        self.report.diagnostics.extend(d for d in ctx.diagnostics if d.severity != "error")
        if ctx.failed:
            if inst.after_failure:
                self._dump(inst, "After", what + " Failed", root)
            raise PassFailure(name, diagnostics=[d for d in ctx.diagnostics if d.severity == "error"], ir=root)
        if not isinstance(out, UOp):
            e = TypeError(f"pass returned {type(out).__name__}, not a UOp")
            raise _Crashed(name, e, "".join(traceback.format_exception_only(e)))
        if inst.statistics and out is not root:
            before = root.toposort()
            rec.nodes_changed += sum(1 for u in out.toposort() if u not in before)
        if inst.verify:
            from uopir.ir.verify import collect_diagnostics

            tv = time.perf_counter()
            diags = collect_diagnostics(out)
            self.report.verify_seconds += time.perf_counter() - tv
            errors = [d for d in diags if d.severity == "error"]
            if errors:
                if inst.after_failure:
                    self._dump(inst, "After", what + " Failed", out)
                raise PassFailure(name, f"pass '{name}' produced invalid IR", diagnostics=errors, ir=out)
            if step.info.produces and out is not root:
                self._check_dialects(step.info, root, out)
        if inst.after_all or name in inst.print_after or (inst.after_change and out is not root):
            self._dump(inst, "After", what, out)
        return out

    @staticmethod
    def _check_dialects(info: PassInfo, root: UOp, out: UOp) -> None:
        """A pass's output holds only what it declares it produces, plus what it was given and does not consume."""
        allowed = set(info.produces) | (set(_ops_by_dialect(root)) - set(info.consumes))
        extra = {d: op for d, op in _ops_by_dialect(out).items() if d not in allowed}
        if extra:
            found = ", ".join(f"'{op}'" for op in extra.values())
            raise PassFailure(info.name, f"pass '{info.name}' produced ops of dialects it does not declare: {found} "
                                         f"(it produces {', '.join(info.produces)} and consumes "
                                         f"{', '.join(info.consumes) or 'nothing'})", ir=out)

    # --- reports -----------------------------------------------------------------------------------------------------
    def timing_report(self) -> str:
        r = self.report
        total = r.total_seconds or 1e-12
        lines = ["===" + "-" * 73 + "===", " " * 25 + "... Execution time report ...", "===" + "-" * 73 + "===",
                 f"  Total Execution Time: {r.total_seconds:.4f} seconds", "",
                 "  ----Wall Time----  ----Name----"]
        for rec in r.records:
            lines.append(f"  {rec.seconds:8.4f} ({100 * rec.seconds / total:5.1f}%)  {'  ' * rec.depth}{rec.label}")
        if r.verify_seconds:
            lines.append(f"  {r.verify_seconds:8.4f} ({100 * r.verify_seconds / total:5.1f}%)  (verifier)")
        lines.append(f"  {r.total_seconds:8.4f} (100.0%)  Total")
        return "\n".join(lines) + "\n"

    def statistics_report(self) -> str:
        lines = ["===" + "-" * 73 + "===", " " * 25 + "... Pass statistics report ...", "===" + "-" * 73 + "==="]
        for rec in self.report.records:
            ind = "  " * rec.depth
            lines.append(f"{ind}{rec.label}")
            if rec.label.endswith("(...)"):
                continue
            for nm, n in sorted(rec.stats.fired.items()):
                lines.append(f"{ind}  (S) {n:4d} {nm} - times the pattern fired")
            for nm, n in sorted(rec.counters.items()):
                lines.append(f"{ind}  (S) {n:4d} {nm}")
            if rec.stats.visits:
                lines.append(f"{ind}  (S) {rec.stats.visits:4d} nodes-visited - nodes the rewriter visited")
                lines.append(f"{ind}  (S) {rec.stats.changed:4d} nodes-changed - nodes replaced by a rewrite")
            else:
                lines.append(f"{ind}  (S) {rec.nodes_changed:4d} nodes-changed - nodes new in the pass's output")
        return "\n".join(lines) + "\n"

    # --- reproducers -------------------------------------------------------------------------------------------------
    def _write_reproducer(self, root: UOp, steps: list[Step], crash: _Crashed, inst: _Inst) -> str | None:
        if inst.reproducer is False:
            return None
        from uopir.ir.printer import print_ir

        pipeline = ",".join(s.text() for s in steps)
        try:
            body = print_ir(root, generic=True)
        except Exception as e:  # noqa: BLE001
            body = f"// could not print the input IR: {type(e).__name__}: {e}\n"
        msg = f"{type(crash.error).__name__}: {crash.error}".replace("\n", " ")
        flags = f" {inst.reproducer_flags}" if inst.reproducer_flags else ""
        text = (f"// uop-opt crash reproducer: pass '{crash.pass_name}' crashed: {msg}\n"
                f"// configuration: {shlex.quote('--pass-pipeline=' + pipeline)}{flags}\n"
                f"// replay: uop-opt --run-reproducer <this file>\n{body}")
        target = inst.reproducer
        try:
            if target is None or target is True:
                target = os.environ.get("UOPIR_REPRODUCER_DIR") or tempfile.gettempdir()
            p = Path(target)
            if p.is_dir():
                fd, name = tempfile.mkstemp(prefix=f"uop-reproducer-{crash.pass_name}-", suffix=".uop", dir=p)
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                return name
            p.write_text(text)
            return str(p)
        except OSError:
            return None


class _Crashed(Exception):
    def __init__(self, pass_name: str, error: BaseException, tb: str):
        super().__init__(pass_name)
        self.pass_name, self.error, self.tb = pass_name, error, tb


def read_reproducer(text: str) -> str:
    """The uop-opt flags stored in a reproducer's `// configuration:` header; PipelineError if there is none."""
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("//"):
            break
        if s.startswith("// configuration:"):
            return s[len("// configuration:"):].strip()
    raise PipelineError("not a reproducer: no '// configuration:' line in the header comment")


# ---- regions -------------------------------------------------------------------------------------------------------
def _region_indices(u: UOp) -> list[int]:
    """Positions in u's arg tuple (or -1 for a one-attribute arg) holding a region."""
    attrs = u.op.attrs
    idx = [i for i, a in enumerate(attrs) if isinstance(a.type, RegionAttr)]
    if not idx:
        return []
    return [-1] if len(attrs) == 1 else idx


def _region_name(r: UOp) -> str | None:
    try:
        vals = r.op.attr_values(r.arg)
    except Exception:  # noqa: BLE001
        return None
    n = vals.get("name")
    return n if isinstance(n, str) else None


def _ops_by_dialect(root: UOp) -> dict[str, str]:
    """One op name per dialect present in the graph and in every region nested in it."""
    out: dict[str, str] = {}
    seen: set[UOp] = set()
    stack = [root]
    while stack:
        for u in stack.pop().toposort():
            if u in seen:
                continue
            seen.add(u)
            out.setdefault(u.op.dialect, u.op.name)
            for i in _region_indices(u):
                r = u.arg if i == -1 else u.arg[i]
                if isinstance(r, UOp):
                    stack.append(r)
    return out


def map_regions(root: UOp, select: Callable[[UOp], bool], fn: Callable[[UOp], UOp]) -> UOp:
    """Apply fn to every region root that `select` accepts (searching inside unselected regions too) and
    rebuild every node above a changed region."""
    new: dict[UOp, UOp] = {}
    done: dict[UOp, UOp] = {}

    def region(r: UOp) -> UOp:
        if r not in done:
            done[r] = fn(r) if select(r) else map_regions(r, select, fn)
        return done[r]

    for u in root.toposort():
        src = tuple(new[s] for s in u.src)
        arg = u.arg
        idxs = _region_indices(u)
        if idxs:
            if idxs == [-1]:
                if isinstance(arg, UOp):
                    arg = region(arg)
            else:
                lst = list(arg)
                for i in idxs:
                    if isinstance(lst[i], UOp):
                        lst[i] = region(lst[i])
                arg = tuple(lst)
        new[u] = u if (src == u.src and (arg is u.arg or arg == u.arg)) else u.replace(src=src, arg=arg)
    return new[root]


def list_passes_text() -> str:
    """What `uop-opt --list-passes` prints."""
    load_passes()
    out = io.StringIO()

    def opts(infos: tuple[OptionInfo, ...]) -> None:
        for o in infos:
            hlp = f"  {o.help}" if o.help else ""
            out.write(f"      {o.name}: {o.type_text()} = {format_value(o.default)}{hlp}\n")

    out.write("Passes:\n")
    for name in sorted(PASSES):
        p = PASSES[name]
        dial = f"  [{','.join(p.consumes) or '-'} -> {','.join(p.produces) or '-'}]"
        out.write(f"  {name}  -  {p.summary}{dial}\n")
        opts(p.option_infos)
    if PIPELINES:
        out.write("Pass pipelines:\n")
        for name in sorted(PIPELINES):
            pl = PIPELINES[name]
            out.write(f"  {name}  -  {pl.summary}\n")
            opts(pl.option_infos)
    out.write("Anchors (ANCHOR(pass,...)):\n")
    for name in sorted(ANCHORS):
        out.write(f"  {name}(...)  -  {ANCHORS[name].summary}\n")
    for mod, why in sorted(LOAD_ERRORS.items()):
        out.write(f"warning: pass module {mod} could not be loaded: {why}\n")
    return out.getvalue()
