"""The rewrite trace: what the visualizer shows, recorded while a pipeline runs (passes, and in each pass every rewrite
step with the pattern that fired, where it is written, the node it fired on and what it produced).

Recording is off unless a `Tracer` is the module-level `ACTIVE` (`with tracing() as tr:`; `UOPIR_VIZ=1` for Tensor
programs, `uop-opt --viz=FILE`). When off, the rewrite driver and the pass manager pay one `ACTIVE is None` test per
graph_rewrite call and per pipeline run; when on, graph_rewrite runs with a dispatch table whose functions record
every rule that fires (`Tracer.dispatch`), and the pass manager adds an instrument that opens and closes passes.

The recorder keeps UOps while it runs; `Tracer.to_dict()` turns them into the JSON-serializable trace (format version
1, specified in docs/visualizer.md): every distinct UOp gets one int id (hash-consing: same UOp, same id), each pass
its input and output roots, their .uop texts, and its steps.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from uopir.ir.regions import regions_of
from uopir.ir.uop import UOp

__all__ = ["ACTIVE", "Tracer", "tracing", "start", "TRACE_VERSION", "format_arg", "text_names"]

TRACE_VERSION = 1
ACTIVE: Tracer | None = None  # the recorder graph_rewrite and the pass manager report to; None: tracing is off
_ARG_MAX = 200  # characters of an arg's text kept in a node row


class _Rewrite:
    """One graph_rewrite call inside a pass: its input and output roots, its direction and matcher."""

    __slots__ = ("input", "output", "bottom_up", "matcher")

    def __init__(self, root: UOp, bottom_up: bool, matcher: str):
        self.input, self.output, self.bottom_up, self.matcher = root, root, bottom_up, matcher


class _Pass:
    """One pipeline element as recorded (a nested pass collects every region it ran on)."""

    def __init__(self, name: str, options: str, run: int):
        self.name, self.options, self.run = name, options, run
        self.seconds = 0.0
        self.inputs: list[UOp] = []
        self.outputs: list[UOp] = []
        self.rewrites: list[_Rewrite] = []
        # (pattern, location, before, after, microseconds, rewrite index)
        self.steps: list[tuple[str, str, UOp, UOp, float, int]] = []
        self.failed = False


class _TracedDispatch(dict):
    """A matcher's dispatch table whose functions record each rule that fires as a step of the open pass."""

    def __init__(self, inner: Any, steps: list, sources: dict[str, str], k: int):
        super().__init__()
        self.inner, self.steps, self.sources, self.k = inner, steps, sources, k

    def __missing__(self, op: Any) -> Any:
        f = self.inner[op]
        if f is None:
            self[op] = None
            return None
        steps, sources, k, clock = self.steps, self.sources, self.k, time.perf_counter

        def traced(u: UOp, ctx: Any) -> Any:
            t = clock()
            r = f(u, ctx)
            if r is not None:
                nm = r[1]
                steps.append((nm, sources.get(nm, "?"), u, r[0], (clock() - t) * 1e6, k))
            return r

        self[op] = traced
        return traced


class Tracer:
    """Records pipeline runs, passes and rewrite steps; `to_dict()` is the trace (docs/visualizer.md)."""

    def __init__(self, title: str = ""):
        self.title = title
        self.runs: list[str] = []  # the pipeline text of each PassManager run
        self.passes: list[_Pass] = []
        self.sources: list[dict[str, str]] = []
        self._open: dict[Any, _Pass] = {}  # key (one pipeline element of one run) -> its pass
        self._stack: list[tuple[_Pass, float]] = []  # the passes running now, innermost last (a pass may run one)
        self._current: _Pass | None = None  # the innermost running pass (steps go there); None outside passes

    # --- what the pass manager calls ----------------------------------------------------------------------------------
    def begin_run(self, pipeline: str) -> int:
        """A pipeline run starts; returns its index (the `run` of its passes)."""
        self.runs.append(pipeline)
        return len(self.runs) - 1

    def begin_pass(self, key: Any, name: str, options: str, root: UOp, run: int) -> None:
        """Pass `name` starts on root. `key` names the pipeline element in its run: the runs of one element on
        several regions (under an anchor) make one pass with several input and output roots."""
        p = self._open.get(key)
        if p is None:
            p = self._open[key] = _Pass(name, options, run)
            self.passes.append(p)
        p.inputs.append(root)
        p.outputs.append(root)
        self._stack.append((p, time.perf_counter()))
        self._current = p

    def end_pass(self, root: UOp, failed: bool = False) -> None:
        """The innermost running pass ended with root (its input when it failed)."""
        if not self._stack:
            return
        p, t0 = self._stack.pop()
        p.seconds += time.perf_counter() - t0
        p.outputs[-1] = root
        p.failed = p.failed or failed
        self._current = self._stack[-1][0] if self._stack else None

    def end_run(self, run: int) -> None:
        """A pipeline run ended: close its passes still open (one that crashed before its instruments saw it)."""
        while self._stack and self._stack[-1][0].run == run:
            self.end_pass(self._stack[-1][0].inputs[-1], failed=True)

    def add_source(self, kernel: str, lang: str, text: str) -> None:
        """A kernel's emitted source (what a backend rendered and compiled)."""
        self.sources.append({"kernel": kernel, "lang": lang, "text": text})

    # --- what graph_rewrite calls -------------------------------------------------------------------------------------
    def dispatch(self, pm: Any, root: UOp, bottom_up: bool) -> tuple[Any, _Rewrite | None]:
        """The dispatch table graph_rewrite uses: recording when a pass is open, else the matcher's own."""
        inner = pm.dispatch(True, prefill=False)
        p = self._current
        if p is None:
            return inner, None
        rw = _Rewrite(root, bottom_up, pm.name or "")
        p.rewrites.append(rw)
        return _TracedDispatch(inner, p.steps, pm.sources(), len(p.rewrites) - 1), rw

    # --- the trace ----------------------------------------------------------------------------------------------------
    def to_dict(self, ids: dict[UOp, int] | None = None) -> dict[str, Any]:
        """The JSON-serializable trace (format version 1, docs/visualizer.md). `ids`: a dict to fill with the id each
        UOp got (to map the trace back to the graphs)."""
        from uopir.ir.printer import print_ir

        if ids is None:
            ids = {}
        rows: dict[str, dict[str, Any]] = {}

        def nid(u: UOp) -> int:
            got = ids.get(u)
            return got if got is not None else _number(u, ids, rows)

        passes = []
        for p in self.passes:
            before_names: dict[str, str] = {}
            after_names: dict[str, str] = {}
            texts = []
            for roots, names in ((p.inputs, before_names), (p.outputs, after_names)):
                parts = []
                for r in roots:
                    nid(r)
                    try:
                        parts.append(print_ir(r))
                    except Exception as e:  # noqa: BLE001 - a trace of a broken graph still shows the rest
                        parts.append(f"// could not print: {type(e).__name__}: {e}\n")
                    for u, nm in text_names(r).items():
                        names.setdefault(str(nid(u)), nm)
                texts.append("// -----\n".join(parts))
            steps = [{"pattern": nm, "location": loc, "before": nid(b), "after": nid(a), "time_us": round(us, 3),
                      "rewrite": k} for nm, loc, b, a, us, k in p.steps]
            stats: dict[str, int] = {}
            for s in steps:
                stats[s["pattern"]] = stats.get(s["pattern"], 0) + 1
            passes.append({
                "name": p.name, "options": p.options, "time_ms": round(p.seconds * 1e3, 4),
                "input": [nid(r) for r in p.inputs], "output": [nid(r) for r in p.outputs],
                "before_text": texts[0], "after_text": texts[1], "steps": steps, "stats": stats,
                "run": p.run, "failed": p.failed, "before_names": before_names, "after_names": after_names,
                "rewrites": [{"input": nid(w.input), "output": nid(w.output), "bottom_up": w.bottom_up,
                              "matcher": w.matcher} for w in p.rewrites]})
            for names in (before_names, after_names):
                for i, nm in names.items():
                    if rows[i]["name"] is None:
                        rows[i]["name"] = nm
        return {"version": TRACE_VERSION, "title": self.title, "nodes": rows, "passes": passes,
                "sources": list(self.sources), "runs": [{"pipeline": t} for t in self.runs]}


def _number(root: UOp, ids: dict[UOp, int], rows: dict[str, dict[str, Any]]) -> int:
    """Give every node reachable from root (through sources and regions) not numbered yet an id, sources first."""
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
        u, expanded = stack.pop()
        if u in ids:
            continue
        if not expanded:
            stack.append((u, True))
            stack.extend((s, False) for s in reversed(u.src) if s not in ids)
            stack.extend((r, False) for r in regions_of(u) if r not in ids)
            continue
        i = ids[u] = len(ids)
        regions = [ids[r] for r in regions_of(u)]
        row: dict[str, Any] = {"op": u.op.name, "dialect": u.op.name.split(".", 1)[0], "dtype": u.dtype.name,
                               "arg": format_arg(u.arg), "src": [ids[s] for s in u.src], "name": None}
        if regions:
            row["regions"] = regions
        if u.tag is not None:
            row["tag"] = format_arg(u.tag)
        rows[str(i)] = row
    return ids[root]


def format_arg(arg: Any) -> str | None:
    """A node's arg as short text (None stays None; a region shows as `{...}`; long text is cut with `...`)."""
    if arg is None:
        return None
    from uopir.ir.ops import fmt_literal

    if isinstance(arg, UOp):
        return "{...}"
    if type(arg) is tuple and any(isinstance(a, UOp) for a in arg):
        s = "[" + ", ".join("{...}" if isinstance(a, UOp) else _lit(a, fmt_literal) for a in arg) + "]"
    else:
        s = _lit(arg, fmt_literal)
    return s if len(s) <= _ARG_MAX else s[:_ARG_MAX - 3] + "..."


def _lit(v: Any, fmt: Any) -> str:
    try:
        return fmt(v)
    except Exception:  # noqa: BLE001 - any value still shows
        return repr(v)


def text_names(root: UOp) -> dict[UOp, str]:
    """The `%name` print_ir gives each node of root's block (and, first come, of its regions' blocks: each region
    restarts at %0, as the printer does). The void root of a block has no name."""
    out: dict[UOp, str] = {}
    blocks = [root]
    seen = {root}
    while blocks:
        b = blocks.pop()
        k = 0
        for u in b.toposort():
            if not (u is b and u.dtype.name == "void"):
                out.setdefault(u, f"%{k}")
                k += 1
            for r in regions_of(u):
                if r not in seen:
                    seen.add(r)
                    blocks.append(r)
    return out


@contextmanager
def tracing(title: str = "") -> Iterator[Tracer]:
    """Record every pipeline run inside the block: `with tracing("mlp") as tr: ...; trace = tr.to_dict()`."""
    global ACTIVE
    prev = ACTIVE
    tr = ACTIVE = Tracer(title)
    try:
        yield tr
    finally:
        ACTIVE = prev


def start(title: str = "") -> Tracer:
    """Turn recording on for the rest of the process (UOPIR_VIZ); returns the recorder."""
    global ACTIVE
    if ACTIVE is None:
        ACTIVE = Tracer(title)
    return ACTIVE
