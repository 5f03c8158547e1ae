"""IR throughput: UOp construction, text print, text parse and graph_rewrite, on index-math DAGs of 10k and 100k ops.

Prints one machine-readable line per figure:
    ir_throughput metric=<construct|print|parse|rewrite...> nodes=<N> rate=<per wall second> cpu_rate=<per CPU
    second> unit=<...> seconds=<best wall time> [extra fields]
or `... metric=<m> nodes=<N> skipped reason=<why>` when a part (printer, parser) is not available.
Each figure is the best of a few repetitions. Run: python3 bench/ir_throughput.py [--sizes 10000,100000]
"""
from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import uopir  # noqa: E402,F401 - registers the dialects
from uopir.dialects import core, kernel  # noqa: E402
from uopir.ir.dtype import dtypes  # noqa: E402
from uopir.ir.pattern import PatternMatcher, RewriteStats, UPat, graph_rewrite  # noqa: E402
from uopir.ir.uop import UOp  # noqa: E402

IDX = dtypes.index
Recipe = list[tuple[Any, Any, tuple[int, ...], Any]]


def make_recipe(n: int, seed: int = 0) -> Recipe:
    """A kernel-like DAG of index arithmetic as a list of (op, dtype, source positions, arg), sources first.

    Loop ranges combined by mul/add/idiv/mod with constants, reusing recent values (sharing), with the identities
    and foldable constants real lowering produces (x*1, x+0, c1+c2, (x+c1)+c2) so the rewrite has work to do."""
    rng = random.Random(seed)
    rec: Recipe = []
    consts: dict[int, int] = {}

    def const(v: int) -> int:
        if v not in consts:
            consts[v] = len(rec)
            rec.append((core.CONST, IDX, (), v))
        return consts[v]

    def node(op: Any, *src: int) -> int:
        rec.append((op, IDX, src, None))
        return len(rec) - 1

    ranges = []
    for axis in range(6):
        ranges.append(len(rec))
        rec.append((kernel.RANGE, IDX, (const(rng.choice((4, 8, 16, 32))),), (axis, "loop")))
    vals = list(ranges)
    while len(rec) < n - 1:
        x = vals[-rng.randint(1, min(len(vals), 24))]  # mostly recent values: deep chains with sharing
        k = rng.random()
        if k < 0.25:
            y = node(core.ADD, node(core.MUL, x, const(rng.choice((1, 2, 4, 16)))), rng.choice(ranges))
        elif k < 0.40:
            y = node(core.ADD, node(core.ADD, x, const(rng.randint(0, 3))), const(rng.randint(0, 3)))
        elif k < 0.55:
            y = node(core.IDIV, x, const(rng.choice((1, 2, 4))))
        elif k < 0.70:
            y = node(core.MOD, x, const(rng.choice((8, 16, 32))))
        elif k < 0.85:
            y = node(core.ADD, x, node(core.MUL, const(rng.randint(0, 3)), const(rng.randint(1, 3))))
        else:
            y = node(core.ADD, x, vals[-rng.randint(1, min(len(vals), 200))])
        vals.append(y)
    used = {i for _, _, src, _ in rec for i in src}
    rec.append((core.SINK, dtypes.void, tuple(v for v in vals if v not in used), None))  # every value is live
    return rec


def build(rec: Recipe) -> UOp:
    out: list[UOp] = []
    app = out.append
    for op, dt, src, arg in rec:
        app(UOp(op, dt, tuple([out[i] for i in src]), arg))
    return out[-1]


# ---- a simplification pattern set (constant folding + identities + reassociation of constants) -------------------
def _c(v: int) -> UOp:
    return UOp.const(IDX, v)


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _cmod(a: int, b: int) -> int:
    return a - b * _cdiv(a, b)


_FOLD = {core.ADD: lambda a, b: a + b, core.MUL: lambda a, b: a * b, core.SUB: lambda a, b: a - b,
         core.IDIV: lambda a, b: _cdiv(a, b) if b else None, core.MOD: lambda a, b: _cmod(a, b) if b else None}


def fold_const(n: UOp, a: UOp, b: UOp) -> UOp | None:
    v = _FOLD[n.op](a.arg, b.arg)
    return None if v is None else UOp.const(n.dtype, v)


SIMPLIFY = PatternMatcher([
    (UPat(tuple(_FOLD), src=(UPat.cvar("a"), UPat.cvar("b")), name="n"), fold_const),
    (UPat(core.ADD, src=(UPat.var("x"), UPat.const(IDX, 0))), lambda x: x, "add_zero"),
    (UPat(core.MUL, src=(UPat.var("x"), UPat.const(IDX, 1))), lambda x: x, "mul_one"),
    (UPat(core.MUL, src=(UPat.var("x"), UPat.const(IDX, 0))), lambda x: _c(0), "mul_zero"),
    (UPat(core.IDIV, src=(UPat.var("x"), UPat.const(IDX, 1))), lambda x: x, "div_one"),
    (UPat(core.MOD, src=(UPat.var("x"), UPat.const(IDX, 1))), lambda x: _c(0), "mod_one"),
    (UPat(core.ADD, src=(UPat(core.ADD, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
     lambda x, c1, c2: x + (c1.arg + c2.arg), "add_assoc_const"),
    (UPat(core.MUL, src=(UPat(core.MUL, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
     lambda x, c1, c2: x * (c1.arg * c2.arg), "mul_assoc_const"),
    (UPat(core.ADD, src=(UPat.var("x"), UPat.var("x"))), lambda x: x * 2, "add_self"),
])


# ---- timing --------------------------------------------------------------------------------------------------------
_CPU: dict[str, float] = {}  # the best CPU seconds of the last best_of, for report()


def best_of(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    """Best wall time of `reps` runs; the best CPU time is kept for report()."""
    best, cpu, out = float("inf"), float("inf"), None
    for _ in range(reps):
        out = None  # free the previous result outside the timing
        gc.collect()  # the GC stays on while timed: real programs run with it
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        best, cpu = min(best, dt), min(cpu, dc)
    _CPU["last"] = cpu
    return best, out


def report(metric: str, nodes: int, count: int, seconds: float, unit: str, extra: str = "") -> None:
    """`rate` is by wall time; `cpu_rate` by process CPU time (steadier on a loaded machine)."""
    cpu = max(_CPU.get("last", seconds), 1e-9)
    print(f"ir_throughput metric={metric} nodes={nodes} rate={count / seconds:.0f} cpu_rate={count / cpu:.0f} "
          f"unit={unit} seconds={seconds:.4f}{extra}", flush=True)


def skipped(metric: str, nodes: int, why: str) -> None:
    print(f"ir_throughput metric={metric} nodes={nodes} skipped reason={why.replace(' ', '_')}", flush=True)


def run(n: int, reps: int) -> None:
    rec = make_recipe(n)
    count = len(rec)

    def fresh() -> int:  # build from nothing: every UOp is new (the previous graph was freed)
        build(rec)
        return count
    t, _ = best_of(fresh, reps)
    report("construct", count, count, t, "ops/s")

    def fresh_gc_paused() -> int:  # the same with the cyclic GC paused, as uopir's parser and rewriter run
        gc.disable()
        try:
            return fresh()
        finally:
            gc.enable()
    t, _ = best_of(fresh_gc_paused, reps)
    report("construct_gc_paused", count, count, t, "ops/s")
    root = build(rec)
    t, _ = best_of(lambda: build(rec), reps)
    report("construct_cached", count, count, t, "ops/s")  # every UOp already exists: the hash-cons hit path
    nodes = len(root.toposort())

    try:
        from uopir.ir.printer import print_ir
    except Exception as e:  # noqa: BLE001 - the printer may not exist yet
        print_ir = None
        skipped("print", nodes, f"printer unavailable: {type(e).__name__}")
    text = None
    if print_ir is not None:
        try:
            t, text = best_of(lambda: print_ir(root), reps)
            report("print", nodes, nodes, t, "ops/s")
        except Exception as e:  # noqa: BLE001
            skipped("print", nodes, f"print_ir failed: {type(e).__name__}: {e}")
    if text is None:
        skipped("parse", nodes, "no printed text")
    else:
        try:
            from uopir.ir.parser import parse_ir
            t, back = best_of(lambda: parse_ir(text), reps)
            report("parse", nodes, nodes, t, "ops/s", "" if back is root else " roundtrip=MISMATCH")
        except Exception as e:  # noqa: BLE001 - the parser may not exist yet
            skipped("parse", nodes, f"parse_ir unavailable or failed: {type(e).__name__}: {e}")

    for bottom_up in (False, True):
        name = "rewrite_bottom_up" if bottom_up else "rewrite"
        st = RewriteStats()
        out_nodes = len(graph_rewrite(root, SIMPLIFY, stats=st, bottom_up=bottom_up).toposort())  # counts once
        # the result is dropped again: each timed rewrite builds its new nodes from scratch, as a pass does
        ts, _ = best_of(lambda bottom_up=bottom_up: graph_rewrite(root, SIMPLIFY, stats=RewriteStats(),
                                                                  bottom_up=bottom_up), reps)
        t, _ = best_of(lambda bottom_up=bottom_up: graph_rewrite(root, SIMPLIFY, bottom_up=bottom_up), reps)
        report(name, nodes, st.visits, t, "visits/s", f" with_stats_rate={st.visits / ts:.0f} visits={st.visits} "
               f"fired={sum(st.fired.values())} out_nodes={out_nodes}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    SIMPLIFY.dispatch()  # compile the patterns outside the timings
    SIMPLIFY.dispatch(True)
    for n in (int(s) for s in args.sizes.split(",")):
        run(n, args.reps)


if __name__ == "__main__":
    main()
