"""kernel-optimize{strategy=beam}: a beam search over kernel-optimize's opts, timed on the target's device.

It starts from the heuristic's opts and, round by round, measures the neighbours of the `width` fastest opt sets
found so far: each opt removed, a split's factor changed to another divisor of its range, an upcast or unroll added
on an axis that has none, the global (threaded) range moved to another output axis or added, `pack` switched on or
off, an output range made the outer loop. A candidate whose opts do not apply, or whose kernel the lowering rejects
(kernel-expand's lane limit, a reduce's range order...: `check`, run here before a job is sent), is dropped before
anything compiles, so a round's MAX_PER_ROUND places go to candidates that can run; one that fails to compile,
crashes, runs over its time limit or computes another result than the starting opts (within a
reassociation tolerance) is skipped with a note, and so is a timing from a device of another fingerprint than the
one the kernel is compiled for (a Ray cluster's other machines). The search stops when a round finds nothing
MIN_GAIN faster than the best so far, after MAX_ROUNDS rounds, or past its budget (BUDGET_S seconds, or
kernel-optimize's budget=S / UOPIR_BEAM_BUDGET); a round that would end past the budget sends only the candidates
the time left allows (at the pace of the rounds before); the winner then replaces the start only when it
is MIN_GAIN faster again in CONFIRM_RUNS more timings of both, taken alternately (a shared machine's noise). The
tuning cache is read first (a hit: no search) and gets the winner. The jobs run in the local process pool, or as
Ray tasks with UOPIR_BEAM_RAY (uopir.search.ray_pool). Over a program's kernels a progress bar counts the kernels
searched, the candidates tried and the current kernel's best time (`beam_session`, entered by kernel-optimize).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from uopir.dialects import kernel as K
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.optimize import Opt, OptError, apply_opts, heuristic_opts
from uopir.passes.kernel.strategies import StrategyUnavailable
from uopir.passes.target import Target
from uopir.search.job import Job, Measurement

__all__ = ["SearchResult", "beam_search", "neighbours", "beam_strategy", "beam_session", "lowering_check", "Measure",
           "Check", "MAX_ROUNDS", "MIN_GAIN", "BUDGET_S", "TIME_LIMIT_S", "RUNS", "CONFIRM_RUNS"]

MAX_ROUNDS = 4
MIN_GAIN = 0.03  # a candidate must be this much faster than the best so far to count (timing noise)
BUDGET_S = 300.0  # a search stops starting rounds after this many seconds
TIME_LIMIT_S = 30.0  # for one candidate's compile, and again for its timing
RUNS = 5  # timed launches per candidate (their median)
CONFIRM_RUNS = 2  # the winner and the start timed again this many times each, alternately, before the winner counts
MAX_PER_ROUND = 48  # candidates measured per round at most (the first found: removals and factor changes first)
_FACTORS = (2, 3, 4, 8, 16, 32)
_SPLITS = ("upcast", "unroll", "local", "group")
_LAST = ("outer", "global", "pack")  # the opts applied after every split, in this order

Measure = Callable[[list[Job]], list[Measurement]]
Check = Callable[[tuple[Opt, ...]], "str | None"]  # why a candidate cannot run (None: it can), before it is sent


@dataclass
class SearchResult:
    """The winning opts, their median time and the starting opts' time, what was measured, and why candidates
    were skipped."""

    opts: list[Opt]
    seconds: float | None
    baseline_seconds: float | None
    tried: int = 0
    rounds: int = 0
    notes: list[str] = field(default_factory=list)
    filtered: int = 0  # candidates `check` dropped before they were sent


def _ordered(opts: list[Opt]) -> tuple[Opt, ...]:
    """Splits first (in their order), then outer, global, pack: the order the heuristic applies them in."""
    return tuple([o for o in opts if o.kind not in _LAST] + [o for k in _LAST for o in opts if o.kind == k])


def neighbours(kernel: UOp, opts: list[Opt] | tuple[Opt, ...], threads: int = 1) -> list[tuple[Opt, ...]]:
    """The opt sets one step from `opts` on `kernel` (the module docstring lists the steps), those that apply."""
    ranges = {u.attrs.axis: u for u in kernel.toposort() if u.op is K.RANGE}
    opts = list(opts)
    split_axes = {o.axis for o in opts if o.kind in _SPLITS}
    glob = next((o.axis for o in opts if o.kind == "global"), None)
    out: list[list[Opt]] = []
    for i, o in enumerate(opts):
        out.append(opts[:i] + opts[i + 1:])
        n = const_extent(ranges[o.axis]) if o.axis in ranges else None
        if o.kind in _SPLITS and n:
            out += [opts[:i] + [Opt(o.kind, o.axis, f)] + opts[i + 1:]
                    for f in _FACTORS if f != o.factor and n % f == 0]
    loops = [a for a, r in ranges.items() if r.attrs.kind == "loop"]
    for a, r in ranges.items():
        n = const_extent(r)
        if a in split_axes or not n or n < 2:
            continue
        kinds = ("upcast",) if r.attrs.kind == "loop" else ("unroll", "upcast") if r.attrs.kind == "reduce" else ()
        out += [opts + [Opt(k, a, f)] for k in kinds for f in _FACTORS if f <= n and n % f == 0]
    if threads > 1:
        out += [[o for o in opts if o.kind not in ("global", "pack")] + [Opt("global", a)] for a in loops if a != glob]
    if glob is not None and not any(o.kind == "pack" for o in opts):
        out.append(opts + [Opt("pack", glob)])
    if not any(o.kind == "outer" for o in opts):
        out += [opts + [Opt("outer", a)] for a in loops]
    seen: set[UOp] = set()
    result = []
    for cand in out:
        c = _ordered(cand)
        try:
            k = apply_opts(kernel, list(c))
        except (OptError, AssertionError):
            continue
        if k not in seen:
            seen.add(k)
            result.append(c)
    return result


def _same(got: tuple[np.ndarray, ...] | None, ref: tuple[np.ndarray, ...] | None) -> bool:
    """Whether a candidate's outputs match the reference's (floats within a reassociation tolerance)."""
    if got is None or ref is None or len(got) != len(ref):
        return False
    for g, r in zip(got, ref, strict=True):
        if g.shape != r.shape:
            return False
        if r.dtype.kind == "f":
            scale = float(np.max(np.abs(r))) if r.size else 0.0
            if not np.allclose(g, r, rtol=1e-3, atol=1e-4 * (scale + 1.0), equal_nan=True):
                return False
        elif not np.array_equal(g, r):
            return False
    return True


def beam_search(kernel: UOp, device: str, width: int, measure: Measure, start: list[Opt] | None = None, *,
                threads: int = 1, rounds: int = MAX_ROUNDS, runs: int = RUNS, budget: float | None = None,
                fingerprint: str | None = None, check: Check | None = None,
                on_round: Callable[[int, int, float | None], None] | None = None) -> SearchResult:
    """Search opts for `kernel` on `device` from `start` (default: none), measuring with `measure`; `budget`
    seconds (None: BUDGET_S); only timings of `fingerprint` compare (None: the start's); `check` drops candidates
    that cannot run before they are sent."""
    budget = BUDGET_S if budget is None else budget
    text = print_ir(kernel)
    t0 = time.perf_counter()

    def job(opts: tuple[Opt, ...]) -> Job:
        return Job(device, text, tuple(map(str, opts)), runs=runs, want_output=True)

    first = _ordered(list(start or []))
    res = SearchResult(list(first), None, None)
    (base,) = measure([job(first)])
    if base.error or base.seconds is None:
        res.notes.append(f"the starting opts [{', '.join(base.opts)}] failed, nothing to compare with: {base.error}")
        return res
    if fingerprint is not None and base.fingerprint != fingerprint:
        res.notes.append(f"the starting opts were timed on another device ({base.fingerprint}), not on the one the "
                         f"kernel is compiled for ({fingerprint}): no search")
        return res
    ref, fingerprint = base.outputs, base.fingerprint
    res.seconds = res.baseline_seconds = base.seconds
    beam: list[tuple[float, tuple[Opt, ...]]] = [(base.seconds, first)]
    seen = {first}
    for rnd in range(rounds):
        spent = time.perf_counter() - t0
        room = MAX_PER_ROUND
        if spent + spent / (res.tried + 1) * MAX_PER_ROUND > budget:  # the time left, at this pace
            room = int((budget - spent) / (spent / (res.tried + 1)))
        cands = []
        for _, opts in beam:
            for c in neighbours(kernel, opts, threads):
                if c in seen or len(cands) >= room:
                    continue
                seen.add(c)
                why = check(c) if check is not None else None
                if why is None:
                    cands.append(c)
                else:
                    res.filtered += 1
                    res.notes.append(f"[{', '.join(map(str, c))}] not sent: {why}")
        if not cands:
            break
        res.rounds = rnd + 1
        found = []
        for c, m in zip(cands, measure([job(c) for c in cands]), strict=True):
            res.tried += 1
            if m.error or m.seconds is None:
                res.notes.append(f"[{', '.join(m.opts)}] skipped: {m.error}")
            elif m.fingerprint != fingerprint:
                res.notes.append(f"[{', '.join(m.opts)}] skipped: timed on another device ({m.fingerprint})")
            elif not _same(m.outputs, ref):
                res.notes.append(f"[{', '.join(m.opts)}] skipped: its result differs from the starting opts'")
            else:
                found.append((m.seconds, c))
        best = beam[0][0]
        beam = sorted(beam + found, key=lambda sc: sc[0])[:width]
        if on_round is not None:
            on_round(rnd + 1, len(cands), beam[0][0])
        if beam[0][0] > best * (1 - MIN_GAIN) or time.perf_counter() - t0 > budget:
            break
    if beam[0][1] != first:  # confirm: the winner and the start timed again, alternately, so a lucky draw (the
        # machine busy while the start ran) does not replace a faster schedule
        again = measure([job(first), job(beam[0][1])] * CONFIRM_RUNS)
        t_first = min((m.seconds for m in again[0::2] if m.seconds is not None), default=None)
        t_best = min((m.seconds for m in again[1::2] if m.seconds is not None), default=None)
        if t_first is not None and t_best is not None and t_best <= t_first * (1 - MIN_GAIN):
            res.seconds, res.baseline_seconds, res.opts = t_best, t_first, list(beam[0][1])
        else:
            res.notes.append(f"[{', '.join(map(str, beam[0][1]))}] not confirmed: {t_best} s against the start's "
                             f"{t_first} s when timed again")
    return res


def _measurer() -> Measure:
    """The pool the jobs run in: Ray's with UOPIR_BEAM_RAY, else the local process pool."""
    from uopir.passes.kernel.strategies import StrategyError, beam_ray_from_env

    try:
        setting = beam_ray_from_env()
    except ValueError as e:
        raise StrategyError(str(e)) from None
    if setting is not None:
        from uopir.search.ray_pool import ray_pool

        pool = ray_pool(setting)
        return lambda jobs: pool.measure(jobs, TIME_LIMIT_S)
    from uopir.search.pool import local_pool

    local = local_pool()
    return lambda jobs: local.measure(jobs, TIME_LIMIT_S)


def lowering_check(kernel: UOp, device: str) -> Check:
    """A Check that lowers each candidate as its job would (kernel-expand, the device passes; no compile)."""
    from uopir.search.job import lower_candidate

    def check(opts: tuple[Opt, ...]) -> str | None:
        try:
            lower_candidate(kernel, tuple(map(str, opts)), device)
        except Exception as e:  # noqa: BLE001 - any rejection drops the candidate, with its reason in a note
            return " ".join(str(e).split())[:300] or type(e).__name__
        return None

    return check


_BAR: list = []  # the progress of the program being searched (beam_session), innermost last


@contextmanager
def beam_session(total: int) -> Iterator[None]:
    """A progress bar over the `total` kernels of one program (kernel-optimize enters it around them): kernels done,
    candidates tried, the current kernel's best time."""
    from uopir.search.progress import progress, progress_setting

    try:
        progress_setting()
    except ValueError:  # beam_strategy reports it at the kernel
        yield
        return
    with progress(total, "beam search") as bar:
        bar.set_postfix(tried=0)
        _BAR.append(bar)
        try:
            yield
        finally:
            _BAR.remove(bar)


def beam_strategy(kdef: UOp, t: Target, width: int, budget: float | None = None) -> list[Opt]:
    """kernel-optimize's `beam`: the tuning cache's opts for this kernel on this device, else a search from the
    heuristic's opts (recorded in the cache); `budget` seconds for the search (None: BUDGET_S)."""
    from uopir.backends.realize import debug_level
    from uopir.backends.registry import DEVICES, get_backend
    from uopir.passes.kernel.strategies import StrategyError
    from uopir.search.cache import get_tuning_cache
    from uopir.search.fingerprint import device_fingerprint
    from uopir.search.progress import progress, progress_setting

    try:
        progress_setting()
    except ValueError as e:
        raise StrategyError(str(e)) from None
    device = t.name
    backend = get_backend(device) if device in DEVICES else None
    if backend is None or backend.compiler is None or not backend.available:
        raise StrategyUnavailable(f"strategy=beam times candidates on a device, and target {device!r} has no device "
                                  f"that compiles here: name a device's target (target=c, target=llvm, ...)")
    fingerprint = device_fingerprint(device)
    cache = get_tuning_cache()  # uop-opt --tuning-cache / set_tuning_cache, else $UOPIR_TUNING_CACHE or the default
    hit = cache.lookup(kdef, device, fingerprint) if cache is not None else None
    outer = _BAR[-1] if _BAR else None
    if hit is not None:
        if outer is not None:
            outer.update(1)
        return hit
    measure = _measurer()
    name = kdef.arg if isinstance(kdef.arg, str) else "kernel"
    with progress(None, f"beam {name}", disable=outer is not None) as own:
        bar = outer or own  # the program's bar counts kernels; a lone kernel's bar counts candidates

        def on_round(rnd: int, n: int, best: float | None) -> None:
            if outer is None:
                own.update(n)
            bar.set_postfix(tried=int(bar.postfix.get("tried", 0)) + n, best_us=f"{(best or 0) * 1e6:.1f}")
        heuristic = heuristic_opts(kdef, t)
        res = beam_search(kdef, device, width, measure, heuristic, threads=t.threads, budget=budget,
                          fingerprint=fingerprint, check=lowering_check(kdef, device), on_round=on_round)
    if outer is not None:
        outer.update(1)
    if res.seconds is not None and cache is not None:
        cache.record(kdef, device, fingerprint, res.opts, res.seconds, res.baseline_seconds)
    if debug_level() >= 1:  # what the search chose, and why candidates were skipped at UOPIR_DEBUG=2
        def us(s: float | None) -> str:
            return "?" if s is None else f"{s * 1e6:.1f} us"
        print(f"beam {name}: [{', '.join(map(str, heuristic))}] {us(res.baseline_seconds)} -> "
              f"[{', '.join(map(str, res.opts))}] {us(res.seconds)} ({res.tried} candidates, {res.rounds} rounds, "
              f"{len(res.notes) - res.filtered} skipped, {res.filtered} not sent)", file=sys.stderr)
        for note in res.notes if debug_level() >= 2 else ():
            print(f"  {note}", file=sys.stderr)
    return res.opts
