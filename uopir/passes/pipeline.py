"""The pipeline text: parsing `a,b{opt=1},kernel(c)` into steps, and printing steps back as text.

    pipeline := element (',' element)*
    element  := NAME ['{' option* '}'] | ANCHOR '(' pipeline ')'
    option   := KEY '=' VALUE | KEY            (a bare KEY sets a bool option to true)
    VALUE    := "quoted string" | [a,b,...] | text up to a space or '}'   (so `list=1,2` is a list)

NAME is a registered pass or a named pipeline (expanded where it is written, with its options). ANCHOR is a
registered anchor (`any`, and `kernel` from the kernel dialect's passes): the nested pipeline runs on every region
it selects. Option keys are kebab-case (`max-iterations`); the Python field name (`max_iterations`) is accepted too.
Spaces are allowed around every token. Errors are PipelineErrors located in the text, with the closest spellings.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from uopir.ir.diagnostics import Location
from uopir.passes.errors import PipelineError, did_you_mean
from uopir.passes.options import OptionInfo, convert_option, format_value
from uopir.passes.registry import (
    ANCHORS,
    PASSES,
    PIPELINES,
    AnchorInfo,
    PassInfo,
    PipelineInfo,
    load_passes,
    resolve,
)

__all__ = ["PassStep", "AnchorStep", "Step", "parse_pipeline", "expand_pipeline", "build_options"]


def build_options(kind: str, name: str, cls: type | None, infos: tuple[OptionInfo, ...],
                  given: list[tuple[str, str | None, int]], text: str) -> Any:
    """The options object of a pass or pipeline from the `key=value` pairs written in `text` (at columns)."""
    by_name = {o.name: o for o in infos} | {o.field: o for o in infos}
    values: dict[str, Any] = {}
    for key, val, col in given:
        info = by_name.get(key)
        if info is not None and info.field in values:
            raise _perr(f"option '{info.name}' of {kind} '{name}' is given twice", text, col)
        if info is None:
            if not infos:
                raise _perr(f"{kind} '{name}' takes no options (got '{key}')", text, col)
            raise _perr(f"{kind} '{name}' has no option '{key}'{did_you_mean(key, [o.name for o in infos])} "
                        f"(options: {', '.join(o.name for o in infos)})", text, col)
        try:
            values[info.field] = convert_option(info.type, val)
        except ValueError as e:
            shown = "no value" if val is None else f"'{val}'"
            hint = getattr(e, "hint", "")
            raise _perr(f"option '{info.name}' of {kind} '{name}': {e}, got {shown}{hint}", text, col) from None
    if cls is None:
        return None
    try:
        return cls(**values)
    except ValueError as e:  # a range or consistency check of the options class (its __post_init__)
        # at the option the error names (its `option`, a field name) when that was given, else at the first one
        cols = [c for k, _, c in given if by_name[k].field == getattr(e, "option", None)]
        raise _perr(f"{kind} '{name}': {e}", text, cols[0] if cols else given[0][2] if given else 0) from None


# ---- pipeline elements ---------------------------------------------------------------------------------------------
@dataclass
class PassStep:
    """One pass of a parsed pipeline, with its options."""

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
    """An anchor of a parsed pipeline and the steps nested in it."""

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


_WORD = re.compile(r"[A-Za-z0-9_.\-]+")


class PipelineParser:
    """A recursive-descent parser over one pipeline text; `depth` counts named-pipeline expansions."""

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
        m = _WORD.match(self.s, self.i)
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
        resolve(name)  # imports the module that registers it (every pass module when it is unknown)
        if self.peek() == "(":
            if name not in ANCHORS:
                load_passes()  # every anchor, for the message
                raise _perr(f"'{name}' is not an anchor (anchors: {', '.join(sorted(ANCHORS))})"
                            f"{did_you_mean(name, ANCHORS)}", self.s, col)
            if given:
                raise _perr(f"anchor '{name}' takes no options", self.s, given[0][2])
            self.i += 1
            inner = self.pipeline(")")
            self.i += 1  # ')'
            return [AnchorStep(ANCHORS[name], inner)]
        if name in PASSES:
            info = PASSES[name]
            return [PassStep(info, build_options("pass", name, info.options, info.option_infos, given, self.s))]
        if name in PIPELINES:
            pinfo = PIPELINES[name]
            opts = build_options("pipeline", name, pinfo.options, pinfo.option_infos, given, self.s)
            return self.expand(pinfo, opts, col)
        if name in ANCHORS:
            raise _perr(f"anchor '{name}' needs a nested pipeline: {name}(pass,...)", self.s, col)
        raise _perr(f"unknown pass '{name}'{did_you_mean(name, [*PASSES, *PIPELINES, *ANCHORS])}", self.s, col)

    def expand(self, pinfo: PipelineInfo, opts: Any, col: int) -> list[Step]:
        if self.depth > 20:
            raise _perr(f"pipeline '{pinfo.name}' expands into itself", self.s, col)
        body = pinfo.expand(opts)
        text = body if isinstance(body, str) else ",".join(body)
        try:
            return PipelineParser(text, self.depth + 1).pipeline()
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


def parse_pipeline(text: str) -> list[Step]:
    """The steps of pipeline text (named pipelines expanded); raises PipelineError located in the text. Imports the
    modules of the names it meets (uopir.passes.registry.resolve), not every pass module."""
    p = PipelineParser(text)
    steps = p.pipeline()
    if p.peek():
        raise _perr(f"unexpected '{p.peek()}'", text, p.i)
    return steps


def expand_pipeline(info: PipelineInfo, options: Any) -> list[Step]:
    """The steps a named pipeline expands to with the given options."""
    return PipelineParser(info.name).expand(info, options, 0)
