"""The errors of the pass manager: a wrong pipeline, a pass that failed, a pass that crashed.

Kept apart so that pass code, the pipeline parser, the runner and the tools can raise and catch them without
importing one another.
"""
from __future__ import annotations

from collections.abc import Iterable

from uopir.ir.diagnostics import Diagnostic, IRError
from uopir.ir.uop import UOp

__all__ = ["PipelineError", "PassFailure", "PassCrash", "did_you_mean"]


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


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest spellings of `word` among `choices`, or ''."""
    import difflib  # only for a message: not imported by a run that has no error

    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
