"""The rewrite driver: graph_rewrite applies a PatternMatcher to every node of a graph, to a fixed point.

It walks the graph with an explicit stack (graphs can be 100k nodes deep), memoizes each distinct UOp, and rewrites
either top-down (sources first, then the node) or bottom-up (the node first). RewriteStats records what fired, by
rule name, and where each rule of the matcher is written. While the visualizer's trace records (uopir.ir.trace), the
same walk runs with a dispatch table that records each rule that fires; otherwise tracing costs one test per call.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uopir.ir import trace
from uopir.ir.diagnostics import current_source_map
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.uop import UOp, gc_paused

__all__ = ["graph_rewrite", "RewriteStats", "RewriteError"]


@dataclass
class RewriteStats:
    """What a graph_rewrite did: how often each rule fired (by rule name), nodes visited, nodes whose result changed.

    `sources` maps the name of every rule of the matchers used (fired or not) to "file:line" where it is written
    (see PatternMatcher.sources), so a report can say where a fired pattern lives."""

    fired: Counter[str] = field(default_factory=Counter)
    visits: int = 0
    changed: int = 0
    sources: dict[str, str] = field(default_factory=dict)

    def merge(self, other: RewriteStats) -> None:
        self.fired.update(other.fired)
        self.visits += other.visits
        self.changed += other.changed
        self.add_sources(other.sources)

    def add_sources(self, sources: dict[str, str]) -> None:
        """Record where rules are written (a name already known at another place keeps both places)."""
        mine = self.sources
        for nm, where in sources.items():
            have = mine.get(nm)
            if have is None:
                mine[nm] = where
            elif have != where:
                places = have.split(", ")
                mine[nm] = ", ".join(places + [w for w in where.split(", ") if w not in places])


class RewriteError(RuntimeError):
    """The patterns do not reach a fixed point (a rewrite loop); the message names the pattern."""


def _loop_error(pm: PatternMatcher, u: UOp, ctx: Any, why: str) -> RewriteError:
    try:
        hit = pm.rewrite_named(u, ctx)
    except Exception:  # noqa: BLE001 - only for the message
        hit = None
    what = f"pattern '{hit[1]}'" if hit is not None else "an unknown pattern"
    return RewriteError(f"graph_rewrite: {why}; last rewrite by {what} on {u!r}")


def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False,
                  stats: RewriteStats | None = None, max_iters: int = 1000) -> UOp:
    """Rewrite every node reachable from `root` through `src` (not into region args) to a fixed point.

    Top-down (default): a node's sources are rewritten first, the node is rebuilt on them, the patterns are
    applied until none fires, and a new result is itself processed. Bottom-up: the patterns are applied to a node
    before its sources (they see the original sources), then its sources are processed and a rebuilt node is
    processed again. Each distinct UOp is processed once. More than `max_iters` successive rewrites of one
    node (not counting rewrites to one of its own sources, which only shrink the graph), or a node rewritten
    into a graph containing itself, raises RewriteError naming the pattern.
    """
    if stats is not None:
        stats.add_sources(pm.sources())
    tracer = trace.ACTIVE
    with gc_paused():  # rewriting allocates many short-lived UOps and tuples and makes no cycles
        if tracer is None:  # one table per matcher (generating it is most of a cold pass's cost)
            return _rewrite(root, pm, pm.dispatch(True, prefill=False), ctx, bottom_up, stats, max_iters)
        disp, rec = tracer.dispatch(pm, root, bottom_up)  # the same walk with functions that record each step
        out = _rewrite(root, pm, disp, ctx, bottom_up, stats, max_iters)
        if rec is not None:
            rec.output = out
        return out


def _rewrite(root: UOp, pm: PatternMatcher, disp: Any, ctx: Any, bottom_up: bool, stats: RewriteStats | None,
             max_iters: int) -> UOp:
    fired = stats.fired if stats is not None else None
    memo: dict[UOp, UOp] = {}
    active: set[UOp] = set()  # entered and not finished: meeting one again means a rewrite loop
    visits = changed = 0
    # frames: (node, stage, other, chain). stage 0: enter n; 1: the sources of `other` (n itself, or in bottom-up
    # what n was rewritten to) are done; 2: n's result is the result of `other`. chain counts successive rewrites.
    stack: list[tuple[UOp, int, Any, int]] = [(root, 0, None, 0)]
    push, pop = stack.append, stack.pop
    while stack:
        n, stage, x, chain = pop()
        if stage == 0:
            if n in memo:
                continue
            if n in active:
                again = n.replace(src=tuple(memo.get(s, s) for s in n.src))
                raise _loop_error(pm, again if pm.rewrite(again, ctx) is not None else n, ctx,
                                  "a node is rewritten into a graph that contains it (infinite rewrite)")
            visits += 1
            x = n
            if bottom_up:
                while (f := disp[x.op]) is not None and (r := f(x, ctx)) is not None:
                    r, nm = r
                    if fired is not None:
                        fired[nm] += 1
                    if r not in x.src:  # returning a source strictly shrinks the graph: not a loop step
                        chain += 1
                        if chain > max_iters:
                            raise _loop_error(pm, x, ctx, f"no fixed point after {max_iters} rewrites of one node")
                    x = r
                if x is not n and (res := memo.get(x)) is not None:
                    memo[n] = res
                    changed += 1
                    continue
            active.add(n)
            waiting = False
            for s in reversed(x.src):
                if s not in memo:
                    if not waiting:
                        push((n, 1, x, chain))
                        waiting = True
                    push((s, 0, None, 0))
            if waiting:
                continue
            stage = 1  # every source is done already: go on without a round trip through the stack
        if stage == 1:
            src = x.src
            if src:
                new = tuple([memo[s] for s in src])
                m = x if new == src else UOp(x.op, x.dtype, new, x.arg, x.tag)
            else:
                m = x
            if bottom_up:
                if m is x:  # x was settled in stage 0 and its sources did not change
                    memo[n] = x
                    active.discard(n)
                    if x is not n:
                        changed += 1
                    continue
                chain += 1
            else:
                while (f := disp[m.op]) is not None and (r := f(m, ctx)) is not None:
                    r, nm = r
                    if fired is not None:
                        fired[nm] += 1
                    if r not in m.src:
                        chain += 1
                        if chain > max_iters:
                            raise _loop_error(pm, m, ctx, f"no fixed point after {max_iters} rewrites of one node")
                    m = r
                if m is n:
                    memo[n] = n
                    active.discard(n)
                    continue
            if (res := memo.get(m)) is not None:
                memo[n] = res
                active.discard(n)
                if res is not n:
                    changed += 1
                continue
            if not bottom_up and m not in active:
                for s in m.src:
                    if memo.get(s) is not s:
                        break
                else:  # no pattern fires on m and its sources are final: m is final (no need to process it again)
                    memo[n] = memo[m] = m
                    active.discard(n)
                    changed += 1
                    continue
            push((n, 2, m, 0))
            push((m, 0, None, chain))
        else:
            memo[n] = res = memo[x]
            active.discard(n)
            if res is not n:
                changed += 1
    if stats is not None:
        stats.visits += visits
        stats.changed += changed
    if changed and (smap := current_source_map()) is not None:
        smap.inherit(memo)  # a rewritten node is written where the node it replaces was: errors still point there
    return memo[root]
