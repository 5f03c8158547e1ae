"""The one `emit-<lang>` pass: `emit_pass(lang, renderer, ...)` registers it for a language from its renderer.

Every emit pass does the same thing, so a language is one call from the module of its backend that renders it
(uopir.backends.c.emit, gpu.emit, llvm.emit, mlir.emit) plus the row naming that module in the pass table (the
`register_lazy` rows of uopir.backends): the pass finds the graph's device.programs (nested regions included; a graph
with none is a located error suggesting a lowering) and replaces the graph by one `device.source {lang, name, text}`
per program, so the output stays printable .uop and `uop-opt --emit=<lang>` prints just the text. A language that
writes one module for the whole graph (MLIR) says `one_module=True`. `EMITTERS` records each registered language.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uopir.backends.emit import programs, require_programs
from uopir.dialects import device as D
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.registry import register_pass

if TYPE_CHECKING:
    from uopir.passes.manager import PassContext

__all__ = ["Render", "EmitOptions", "Emitter", "EMITTERS", "EMIT_CONSUMES", "EMIT_PRODUCES", "emit_pass"]

# what a renderer factory gives for the options of one run: a program (the graph's root for a one-module language)
# -> (the name of what it rendered, its text)
Render = Callable[[UOp], tuple[str, str]]
EMIT_CONSUMES = ("core", "kernel", "device", "tensor")  # a graph of any stage: its programs are what is emitted
EMIT_PRODUCES = ("device", "core")  # a core.sink of device.sources


@dataclass
class EmitOptions:
    """The options of an emit pass whose renderer has none (`emit-opencl{}`; an unknown option names the pass)."""


@dataclass(frozen=True)
class Emitter:
    """A language `emit_pass` registered: its pass function and how it renders."""

    lang: str
    pass_name: str
    fn: Callable[[UOp, Any, PassContext], UOp]
    renderer: Callable[[Any], Render]
    options: type
    one_module: bool


EMITTERS: dict[str, Emitter] = {}  # language -> its emitter (those whose module has loaded)


def emit_pass(lang: str, renderer: Callable[[Any], Render], *, what: str, options: type = EmitOptions,
              note: str = "", target: str | None = None, one_module: bool = False,
              needs: tuple[str, str] | None = None) -> Callable[[UOp, Any, PassContext], UOp]:
    """Register the pass `emit-<lang>` and return its function.

    renderer: options -> Render, called once per run (importing the renderer then, so registering costs nothing).
      The pass function is reported as defined where `renderer` is (the module the pass table names for it).
    what: what the text is, for the summary ("C text"); note: said first in the summary's parentheses.
    options: the pass's options dataclass (an empty one by default).
    target: the target the error for a graph without a device.program suggests lowering for (default: `lang`; a
      one-module renderer reports that error itself).
    one_module: `renderer` renders the graph's root as one module (counted as `functions-emitted`, one per program)
      instead of each program (counted as `sources-emitted`).
    needs: (what, how to install it) when the renderer imports an optional package: its ImportError becomes a
      located error saying so."""
    pass_name = f"emit-{lang}"
    per = "" if one_module else " per device.program"
    shape = "holding" if one_module else "of"
    summary = (f"replace the graph by one device.source {shape} {what}{per} ({note + '; ' if note else ''}what "
               f"uop-opt --emit={lang} prints)")

    def emit(root: UOp, opts: Any, ctx: PassContext) -> UOp:
        try:
            render = renderer(opts)
        except ImportError as e:
            if needs is None:
                raise
            raise IRError(diagnostics=[diag_at(root, f"{pass_name} needs {needs[0]} ({e}): {needs[1]}")]) from None
        if one_module:
            name, text = render(root)
            ctx.count("functions-emitted", len(programs(root)))
            return UOp.sink(UOp(D.SOURCE, dtypes.void, (), (lang, name, text)))
        sources = []
        for p in require_programs(root, pass_name, target or lang):
            name, text = render(p)
            sources.append(UOp(D.SOURCE, dtypes.void, (), (lang, name, text)))
            ctx.count("sources-emitted")
        return UOp.sink(*sources)

    emit.__name__ = emit.__qualname__ = f"emit_{lang}"
    emit.__module__ = renderer.__module__
    emit.__doc__ = f"The {pass_name} pass (uopir.backends.codegen.emit.emit_pass)."
    register_pass(pass_name, summary=summary, consumes=EMIT_CONSUMES, produces=EMIT_PRODUCES, options=options)(emit)
    EMITTERS[lang] = Emitter(lang, pass_name, emit, renderer, options, one_module)
    return emit
