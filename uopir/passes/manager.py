"""The pass manager, running a pipeline: `PassManager` holds the parsed steps and runs them on a graph, calling its
instruments around every pass; `PassContext` is what a running pass sees (options, diagnostics, statistics).

`PassManager.parse("canonicalize,dce").run(root)` verifies after every pass and writes a reproducer if one
crashes; `run(root, print_ir_after_all=True, timing=True, ...)` is shorthand for a list of instruments
(`uopir.passes.instruments.standard_instruments`), and `run(root, instruments=[...])` takes the list itself.
"""
from __future__ import annotations

import dataclasses
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

from uopir.ir import trace
from uopir.ir.diagnostics import Diagnostic, IRError, Severity, SourceMap, diag_at, located
from uopir.ir.regions import count_regions, map_regions, region_name
from uopir.ir.rewrite import RewriteStats
from uopir.ir.uop import UOp
from uopir.passes.errors import PassCrash, PassFailure, PipelineError, did_you_mean
from uopir.passes.instruments import (
    CrashEvent,
    PassEvent,
    PassInstrumentation,
    RunReport,
    StepRecord,
    Tracing,
    standard_instruments,
    statistics_report,
    timing_report,
)
from uopir.passes.pipeline import AnchorStep, PassStep, Step, expand_pipeline, parse_pipeline
from uopir.passes.registry import PIPELINES, get_pass, resolve

__all__ = ["PassManager", "PassContext"]


class PassContext:
    """What a running pass can use: `stats` for graph_rewrite, `options`, diagnostics (`warn`, `note`, `error`),
    `count(name)` for statistics of a plain-code pass, and `anchor` (the region it runs on) under an anchor."""

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


class _Crashed(Exception):
    """Carries a pass crash up through anchors to the top level, where the reproducer is written."""

    def __init__(self, pass_name: str, error: BaseException, tb: str):
        super().__init__(pass_name)
        self.pass_name, self.error, self.tb = pass_name, error, tb


class PassManager:
    """An expanded pipeline. `PassManager.parse("canonicalize,dce").run(root, print_ir_after_all=True)`."""

    def __init__(self, steps: list[Step] | None = None):
        self.steps: list[Step] = list(steps or [])
        self.report = RunReport()

    @classmethod
    def parse(cls, text: str) -> PassManager:
        """Parse pipeline text; raises PipelineError (an IRError) naming the closest valid spellings."""
        return cls(parse_pipeline(text))

    def add(self, name: str, **options: Any) -> PassManager:
        """Append a pass (or named pipeline) with Python option values."""
        resolve(name)
        if name in PIPELINES:
            pi = PIPELINES[name]
            opts = pi.options(**options) if pi.options is not None else None
            self.steps.extend(expand_pipeline(pi, opts))
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
                raise PipelineError(f"pass '{name}' has no option '{k}'{did_you_mean(k, fields)}")
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
    def run(self, root: UOp, *, instruments: Sequence[PassInstrumentation] | None = None,
            source: SourceMap | None = None, **keywords: Any) -> UOp:
        """Run the pipeline on `root` and return the new root.

        source: the SourceMap of the parse `root` came from (`parse_with_source_map`): diagnostics point into that
          file (without it: into the parse a `located` block made current, else the newest parse of `root`).

        instruments: the observers of the run, called in list order (see uopir.passes.instruments). Without it,
          the keywords build the standard list (`standard_instruments`): verify=True (verify after every pass),
          print_ir_before / print_ir_after (pass names), print_ir_before_all, print_ir_after_all,
          print_ir_after_change, print_ir_after_failure, print_generic, timing, pass_statistics, out (the stream
          of dumps and reports; stderr), reproducer (a path, a directory, None for $UOPIR_REPRODUCER_DIR or the
          temp dir, False for none), reproducer_flags. With no keyword: verification and a reproducer.
        Raises PassFailure (an IRError) when a pass fails, PassCrash (with the reproducer's path) when one crashes.
        """
        if instruments is None:
            insts = standard_instruments(**keywords)
        elif keywords:
            raise TypeError(f"PassManager.run: give either instruments=[...] or keywords, not both "
                            f"(got {', '.join(sorted(keywords))})")
        else:
            insts = list(instruments)
        tracer = trace.ACTIVE
        if tracer is not None:  # the visualizer records this run (uopir.ir.trace)
            insts.append(Tracing(tracer, self.text()))
        self.report = RunReport()
        self._records: dict[int, StepRecord] = {}
        for inst in insts:
            inst.run_before_pipeline(root, self.report)
        t0 = time.perf_counter()
        with located(source if source is not None else root):  # diagnostics point into the file root came from
            try:
                for i, step in enumerate(self.steps):
                    try:
                        root = self._run_step(step, root, insts, 0, "")
                    except _Crashed as c:
                        crash = CrashEvent(c.pass_name, c.error, c.tb, root, ",".join(s.text() for s in self.steps[i:]))
                        path = None
                        for inst in insts:
                            got = inst.run_after_crash(crash)
                            path = path or got
                        raise PassCrash(c.pass_name, c.error, path, c.tb) from None
            finally:
                self.report.total_seconds = time.perf_counter() - t0
                self.report.records = list(self._records.values())
                for inst in insts:
                    inst.run_after_pipeline(self.report)
        return root

    def _record(self, step: Step, label: str, depth: int) -> StepRecord:
        rec = self._records.get(id(step))
        if rec is None:
            rec = self._records[id(step)] = StepRecord(label, depth)
        return rec

    def _run_step(self, step: Step, root: UOp, insts: list[PassInstrumentation], depth: int, where: str) -> UOp:
        if isinstance(step, AnchorStep):
            rec = self._record(step, step.anchor.name + "(...)", depth)
            t = time.perf_counter()
            try:
                with ExitStack() as around:
                    arounds = [s for s in step.steps if isinstance(s, PassStep) and s.info.around_regions is not None]
                    if arounds:  # e.g. the search's progress bar over the kernels (PassInfo.around_regions)
                        def total() -> int:  # counted only when a hook asks (a walk of the whole graph)
                            return count_regions(root, step.anchor.select)
                        for s in arounds:
                            around.enter_context(s.info.around_regions(s.options, total))
                    return map_regions(root, step.anchor.select, lambda r: self._run_nested(step, r, insts, depth))
            finally:
                rec.seconds += time.perf_counter() - t
                rec.runs += 1
        return self._run_pass(step, root, insts, depth, where)

    def _run_nested(self, step: AnchorStep, region_root: UOp, insts: list[PassInstrumentation], depth: int) -> UOp:
        name = region_name(region_root)
        where = f" ('{step.anchor.name}' region{f' @{name}' if name else ''})"
        for s in step.steps:
            region_root = self._run_step(s, region_root, insts, depth + 1, where)
        return region_root

    @staticmethod
    def _failed(insts: list[PassInstrumentation], event: PassEvent, ir: UOp) -> None:
        for inst in insts:
            inst.run_after_pass_failed(event, ir)

    def _run_pass(self, step: PassStep, root: UOp, insts: list[PassInstrumentation], depth: int, where: str) -> UOp:
        name = step.info.name
        rec = self._record(step, name, depth)
        event = PassEvent(name, step.info, name + where, rec, self.report, step)
        for inst in insts:
            inst.run_before_pass(event, root)
        ctx = PassContext(name, step.options, rec.stats, rec.counters, where.strip() or None)
        t = time.perf_counter()
        try:
            out = step.info.fn(root, step.options, ctx)
        except IRError as e:
            rec.seconds += time.perf_counter() - t
            self._failed(insts, event, root)
            raise PassFailure(name, diagnostics=ctx.diagnostics + e.diagnostics, ir=root) from None
        except _Crashed:
            raise
        except Exception as e:  # noqa: BLE001 - any other exception is a crash in the pass
            rec.seconds += time.perf_counter() - t
            self._failed(insts, event, root)
            raise _Crashed(name, e, traceback.format_exc()) from None
        rec.seconds += time.perf_counter() - t
        rec.runs += 1
        self.report.diagnostics.extend(d for d in ctx.diagnostics if d.severity != "error")
        if ctx.failed:
            self._failed(insts, event, root)
            raise PassFailure(name, diagnostics=[d for d in ctx.diagnostics if d.severity == "error"], ir=root)
        if not isinstance(out, UOp):
            e = TypeError(f"pass returned {type(out).__name__}, not a UOp")
            raise _Crashed(name, e, "".join(traceback.format_exception_only(e)))
        try:
            for inst in insts:
                inst.run_after_pass(event, root, out)
        except PassFailure as f:
            self._failed(insts, event, f.ir if f.ir is not None else out)
            raise
        return out

    # --- reports -----------------------------------------------------------------------------------------------------
    def timing_report(self) -> str:
        """The wall-time table of the last run."""
        return timing_report(self.report)

    def statistics_report(self) -> str:
        """The per-pass statistics of the last run (nodes-changed counts need the Statistics instrument)."""
        return statistics_report(self.report)
