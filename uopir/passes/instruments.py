"""Pass instrumentation: objects that observe a pipeline run through hooks, as MLIR's PassInstrumentation does.

The pass manager calls, for every instrument in its list and in list order:

    run_before_pipeline(root, report)        once, before the first pass
    run_before_pass(event, ir)               before each pass (at every nesting depth)
    run_after_pass(event, before, after)     after a pass succeeded; may raise PassFailure (the Verifier does),
                                             which fails the pass: later instruments do not see its output
    run_after_pass_failed(event, ir)         after a pass failed or crashed (ir: its input, or its invalid output)
    run_after_crash(crash) -> path | None    a pass raised a non-IRError: the first path returned is the reproducer
    run_after_pipeline(report)               once at the end, whether the run succeeded or not

A new kind of observation is a new small subclass, not a keyword threaded through `PassManager.run`. The
standard ones: `IRPrinter` (print IR before/after passes, after a change, after a failure), `Verifier` (verify
after each pass and check the dialects a pass declares), `Timing`, `Statistics`, `Reproducer`.
`standard_instruments(**flags)` builds the list that `PassManager.run(root, **flags)` uses.
"""
from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from uopir.ir import env, trace
from uopir.ir.diagnostics import Diagnostic
from uopir.ir.regions import ops_by_dialect
from uopir.ir.rewrite import RewriteStats
from uopir.ir.uop import UOp
from uopir.passes.errors import PassFailure, PipelineError
from uopir.passes.registry import PassInfo, as_names, check_pass_names

__all__ = ["PassInstrumentation", "PassEvent", "CrashEvent", "StepRecord", "RunReport", "IRPrinter", "Verifier",
           "Timing", "Statistics", "Reproducer", "standard_instruments", "timing_report", "statistics_report",
           "reproducer_text", "read_reproducer", "DUMP_HEADER", "Tracing"]

DUMP_HEADER = "// -----// IR Dump {when} {what} //----- //"


# ---- what instruments observe ----------------------------------------------------------------------------------------
@dataclass
class StepRecord:
    """Timing and statistics of one pipeline element (summed over every region an anchor ran it on)."""

    label: str  # e.g. "canonicalize", or "kernel(...)" for an anchor
    depth: int
    seconds: float = 0.0
    runs: int = 0
    stats: RewriteStats = field(default_factory=RewriteStats)
    counters: Counter[str] = field(default_factory=Counter)
    nodes_changed: int = 0


@dataclass
class RunReport:
    """What a run measured; `PassManager.report` after `run`."""

    records: list[StepRecord] = field(default_factory=list)
    verify_seconds: float = 0.0
    total_seconds: float = 0.0
    diagnostics: list[Diagnostic] = field(default_factory=list)  # warnings, notes and remarks passes emitted


@dataclass(frozen=True)
class PassEvent:
    """One run of one pass on one graph: the top level, or one region under an anchor."""

    pass_name: str
    info: PassInfo
    label: str  # the pass name plus the region it runs on, e.g. "dce ('kernel' region @k0)"
    record: StepRecord
    report: RunReport
    step: Any = None  # the pipeline element (a PassStep: its options)


@dataclass(frozen=True)
class CrashEvent:
    """A pass raised an exception that is not an IRError (a bug in the pass)."""

    pass_name: str
    error: BaseException
    traceback: str
    ir: UOp  # the input of the top-level pipeline element that crashed
    pipeline: str  # the pipeline text from that element on: what replays the crash


class PassInstrumentation:
    """Base class: every hook does nothing; override the ones an observation needs."""

    def run_before_pipeline(self, root: UOp, report: RunReport) -> None:
        pass

    def run_before_pass(self, event: PassEvent, ir: UOp) -> None:
        pass

    def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
        pass

    def run_after_pass_failed(self, event: PassEvent, ir: UOp) -> None:
        pass

    def run_after_crash(self, crash: CrashEvent) -> str | None:
        return None

    def run_after_pipeline(self, report: RunReport) -> None:
        pass


def _stream(out: TextIO | None) -> TextIO:
    return out if out is not None else sys.stderr


# ---- IR printing -----------------------------------------------------------------------------------------------------
class IRPrinter(PassInstrumentation):
    """MLIR-style IR dumps (`// -----// IR Dump After P //----- //` + .uop text) to `out` (default stderr).

    before/after: pass names (a list, or comma-separated); PipelineError for a name that is not a pass."""

    def __init__(self, *, before: str | Iterable[str] | None = None, after: str | Iterable[str] | None = None,
                 before_all: bool = False, after_all: bool = False, after_change: bool = False,
                 after_failure: bool = False, generic: bool = False, out: TextIO | None = None):
        self.before, self.after = as_names(before), as_names(after)
        check_pass_names([*self.before, *self.after])
        self.before_all, self.after_all, self.after_change = before_all, after_all, after_change
        self.after_failure, self.generic, self.out = after_failure, generic, out

    def dump(self, when: str, what: str, u: UOp) -> None:
        from uopir.ir.printer import print_ir

        stream = _stream(self.out)
        stream.write(DUMP_HEADER.format(when=when, what=what) + "\n")
        try:
            text = print_ir(u, generic=self.generic)
        except Exception as e:  # noqa: BLE001 - a dump must not hide the real problem
            text = f"// <could not print the IR: {type(e).__name__}: {e}>\n"
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.write("\n")

    def run_before_pass(self, event: PassEvent, ir: UOp) -> None:
        if self.before_all or event.pass_name in self.before:
            self.dump("Before", event.label, ir)

    def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
        if self.after_all or event.pass_name in self.after or (self.after_change and after is not before):
            self.dump("After", event.label, after)

    def run_after_pass_failed(self, event: PassEvent, ir: UOp) -> None:
        if self.after_failure:
            self.dump("After", event.label + " Failed", ir)


# ---- verification ----------------------------------------------------------------------------------------------------
class Verifier(PassInstrumentation):
    """Verify the IR after every pass (not the input: verify it yourself) and check that a pass's output holds
    only the dialects it declares; a pass whose output fails raises PassFailure naming it."""

    def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
        from uopir.ir.verify import collect_diagnostics

        name = event.pass_name
        t = time.perf_counter()
        diags = collect_diagnostics(after)
        event.report.verify_seconds += time.perf_counter() - t
        errors = [d for d in diags if d.severity == "error"]
        if errors:
            raise PassFailure(name, f"pass '{name}' produced invalid IR", diagnostics=errors, ir=after)
        info = event.info
        if info.produces and after is not before:
            allowed = set(info.produces) | (set(ops_by_dialect(before)) - set(info.consumes))
            extra = {d: op for d, op in ops_by_dialect(after).items() if d not in allowed}
            if extra:
                found = ", ".join(f"'{op}'" for op in extra.values())
                raise PassFailure(name, f"pass '{name}' produced ops of dialects it does not declare: {found} "
                                        f"(it produces {', '.join(info.produces)} and consumes "
                                        f"{', '.join(info.consumes) or 'nothing'})", ir=after)


# ---- timing and statistics -------------------------------------------------------------------------------------------
def timing_report(report: RunReport) -> str:
    """The wall-time table of a run (MLIR's `-mlir-timing` layout)."""
    total = report.total_seconds or 1e-12
    lines = ["===" + "-" * 73 + "===", " " * 25 + "... Execution time report ...", "===" + "-" * 73 + "===",
             f"  Total Execution Time: {report.total_seconds:.4f} seconds", "",
             "  ----Wall Time----  ----Name----"]
    for rec in report.records:
        lines.append(f"  {rec.seconds:8.4f} ({100 * rec.seconds / total:5.1f}%)  {'  ' * rec.depth}{rec.label}")
    if report.verify_seconds:
        lines.append(f"  {report.verify_seconds:8.4f} ({100 * report.verify_seconds / total:5.1f}%)  (verifier)")
    lines.append(f"  {report.total_seconds:8.4f} (100.0%)  Total")
    return "\n".join(lines) + "\n"


def statistics_report(report: RunReport) -> str:
    """Per-pass pattern fire counts, counters and change counts of a run. A pattern whose source line the rewriter
    recorded (`RewriteStats.sources`: name -> "file:line") shows it after its name."""
    lines = ["===" + "-" * 73 + "===", " " * 25 + "... Pass statistics report ...", "===" + "-" * 73 + "==="]
    for rec in report.records:
        ind = "  " * rec.depth
        lines.append(f"{ind}{rec.label}")
        if rec.label.endswith("(...)"):
            continue
        sources: dict[str, str] = getattr(rec.stats, "sources", None) or {}
        for nm, n in sorted(rec.stats.fired.items()):
            where = f" ({sources[nm]})" if nm in sources else ""
            lines.append(f"{ind}  (S) {n:4d} {nm}{where} - times the pattern fired")
        for nm, n in sorted(rec.counters.items()):
            lines.append(f"{ind}  (S) {n:4d} {nm}")
        if rec.stats.visits:
            lines.append(f"{ind}  (S) {rec.stats.visits:4d} nodes-visited - nodes the rewriter visited")
            lines.append(f"{ind}  (S) {rec.stats.changed:4d} nodes-changed - nodes replaced by a rewrite")
        else:
            lines.append(f"{ind}  (S) {rec.nodes_changed:4d} nodes-changed - nodes new in the pass's output")
    return "\n".join(lines) + "\n"


class Timing(PassInstrumentation):
    """Print the wall time of every pipeline element to `out` (default stderr) at the end of the run."""

    def __init__(self, out: TextIO | None = None):
        self.out = out

    def run_after_pipeline(self, report: RunReport) -> None:
        stream = _stream(self.out)
        stream.write(timing_report(report))
        stream.flush()


class Statistics(PassInstrumentation):
    """Count the nodes each pass changed and print per-pass statistics to `out` at the end of the run."""

    def __init__(self, out: TextIO | None = None):
        self.out = out

    def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
        if after is not before:
            old = before.toposort()
            event.record.nodes_changed += sum(1 for u in after.toposort() if u not in old)

    def run_after_pipeline(self, report: RunReport) -> None:
        stream = _stream(self.out)
        stream.write(statistics_report(report))
        stream.flush()


# ---- reproducers -----------------------------------------------------------------------------------------------------
def reproducer_text(crash: CrashEvent, flags: str = "") -> str:
    """A .uop file that replays a crash: a header naming the pass and the configuration, then the input IR."""
    from uopir.ir.printer import print_ir

    try:
        body = print_ir(crash.ir, generic=True)
    except Exception as e:  # noqa: BLE001
        body = f"// could not print the input IR: {type(e).__name__}: {e}\n"
    msg = f"{type(crash.error).__name__}: {crash.error}".replace("\n", " ")
    flags = f" {flags}" if flags else ""
    return (f"// uop-opt crash reproducer: pass '{crash.pass_name}' crashed: {msg}\n"
            f"// configuration: {shlex.quote('--pass-pipeline=' + crash.pipeline)}{flags}\n"
            f"// replay: uop-opt --run-reproducer <this file>\n{body}")


def read_reproducer(text: str) -> str:
    """The uop-opt flags stored in a reproducer's `// configuration:` header; PipelineError if there is none."""
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("//"):
            break
        if s.startswith("// configuration:"):
            return s[len("// configuration:"):].strip()
    raise PipelineError("not a reproducer: no '// configuration:' line in the header comment")


class Reproducer(PassInstrumentation):
    """Write a crash reproducer (.uop input + pipeline) when a pass crashes.

    target: a file path, a directory, or None (the directory in $UOPIR_REPRODUCER_DIR, else the temp dir).
    flags: extra uop-opt flags stored in the configuration line (e.g. --no-verify)."""

    def __init__(self, target: str | Path | None = None, flags: str = ""):
        self.target, self.flags = target, flags

    def run_after_crash(self, crash: CrashEvent) -> str | None:
        text = reproducer_text(crash, self.flags)
        target = self.target
        try:
            if target is None:
                target = env.REPRODUCER_DIR.raw() or tempfile.gettempdir()
            p = Path(target)
            if p.is_dir():
                fd, name = tempfile.mkstemp(prefix=f"uop-reproducer-{crash.pass_name}-", suffix=".uop", dir=p)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                return name
            p.write_text(text, encoding="utf-8")
            return str(p)
        except OSError:
            return None


# ---- the visualizer's trace -----------------------------------------------------------------------------------------
class Tracing(PassInstrumentation):
    """Record the run's passes into a `uopir.ir.trace.Tracer` (each pass: options, time, input and output roots; the
    rewrite driver adds the steps). PassManager.run adds it by itself while `uopir.ir.trace.ACTIVE` is set."""

    def __init__(self, tracer: trace.Tracer, pipeline: str):
        self.tracer, self.pipeline, self.run = tracer, pipeline, -1

    def run_before_pipeline(self, root: UOp, report: RunReport) -> None:
        self.run = self.tracer.begin_run(self.pipeline)

    def run_before_pass(self, event: PassEvent, ir: UOp) -> None:
        step = event.step
        text = step.text() if step is not None else event.pass_name
        opts = text[len(event.pass_name):] if text.startswith(event.pass_name) else ""
        self.tracer.begin_pass((self.run, id(event.record)), event.pass_name, opts, ir, self.run)

    def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
        self.tracer.end_pass(after)

    def run_after_pass_failed(self, event: PassEvent, ir: UOp) -> None:
        self.tracer.end_pass(ir, failed=True)

    def run_after_pipeline(self, report: RunReport) -> None:
        self.tracer.end_run(self.run)


# ---- the keyword interface -------------------------------------------------------------------------------------------
def standard_instruments(*, verify: bool = True, print_ir_before: str | Iterable[str] | None = None,
                         print_ir_after: str | Iterable[str] | None = None, print_ir_before_all: bool = False,
                         print_ir_after_all: bool = False, print_ir_after_change: bool = False,
                         print_ir_after_failure: bool = False, timing: bool = False, pass_statistics: bool = False,
                         print_generic: bool = False, out: TextIO | None = None,
                         reproducer: str | Path | bool | None = None,
                         reproducer_flags: str = "") -> list[PassInstrumentation]:
    """The instruments that uop-opt's flags ask for, in the order that keeps dumps truthful (verify before printing
    a pass's output; timing before statistics at the end). `reproducer=False` writes none; None or True writes one
    to $UOPIR_REPRODUCER_DIR or the temp directory."""
    out_list: list[PassInstrumentation] = []
    if verify:
        out_list.append(Verifier())
    if (print_ir_before or print_ir_after or print_ir_before_all or print_ir_after_all or print_ir_after_change
            or print_ir_after_failure):
        out_list.append(IRPrinter(before=print_ir_before, after=print_ir_after, before_all=print_ir_before_all,
                                  after_all=print_ir_after_all, after_change=print_ir_after_change,
                                  after_failure=print_ir_after_failure, generic=print_generic, out=out))
    if timing:
        out_list.append(Timing(out))
    if pass_statistics:
        out_list.append(Statistics(out))
    if reproducer is not False:
        out_list.append(Reproducer(None if reproducer is True else reproducer, reproducer_flags))
    return out_list
