"""IR throughput: UOp construction, text print, text parse and graph_rewrite, on index-math DAGs of 10k and 100k ops.

Prints one machine-readable line per figure:
    ir_throughput metric=<construct|print|parse|rewrite...> nodes=<N> rate=<per wall second> cpu_rate=<per CPU
    second> unit=<...> seconds=<best wall time> [extra fields]
or `... metric=<m> nodes=<N> skipped reason=<why>` when a part (printer, parser) is not available.
Each figure is the best of a few repetitions. Run: python3 bench/ir_throughput.py [--sizes 10000,100000] [--no-compare]

Comparison lines carry `system=tinygrad` or `system=xdsl` (uopir's own lines carry no system field) and
`ratio=<the other system's best time / uopir's best time on the same graph>`: above 1, uopir is faster. They are
measured only when the package imports (`pip install -e '.[bench]'`); otherwise the line is
`... system=<s> skipped reason=<why>`, and the bench never fails because of them:
  tinygrad: the same recipe built with tinygrad's UOp (construct, construct_gc_paused, construct_cached), and
            graph_rewrite with the same simplification patterns written as a tinygrad PatternMatcher (rewrite,
            rewrite_bottom_up; visits= is the number of nodes tinygrad's rewriter settled).
  xdsl:     our graph as generic MLIR text in the arith dialect (index type; loop ranges become function
            arguments, the sink the func.return), parsed by xDSL's Parser (parse) and printed back in the generic
            format by xDSL's Printer (print); nodes= counts xDSL operations (module, func and return included).
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
from uopir.ir.pattern_compiler import PatternMatcher  # noqa: E402
from uopir.ir.rewrite import RewriteStats, graph_rewrite
from uopir.ir.uop import UOp  # noqa: E402
from uopir.ir.upat import UPat

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


OURS: dict[str, float] = {}  # uopir's best wall seconds per metric for the current size, for the comparisons' ratio


def _gc_paused(fn: Callable[[], Any]) -> Any:
    """fn() with the cyclic GC paused (uopir.ir.uop.gc_paused)."""
    from uopir.ir.uop import gc_paused

    with gc_paused():
        return fn()


def report(metric: str, nodes: int, count: int, seconds: float, unit: str, extra: str = "", system: str = "") -> None:
    """`rate` is by wall time; `cpu_rate` by process CPU time (steadier on a loaded machine). With `system` (a
    comparison), `ratio=` is that system's time over uopir's time for the same metric, when uopir's is known."""
    cpu = max(_CPU.get("last", seconds), 1e-9)
    sys_field = f" system={system}" if system else ""
    if not system:
        OURS[metric] = seconds
    elif metric in OURS:
        extra = f" ratio={seconds / OURS[metric]:.2f}{extra}"
    print(f"ir_throughput metric={metric} nodes={nodes}{sys_field} rate={count / seconds:.0f} "
          f"cpu_rate={count / cpu:.0f} unit={unit} seconds={seconds:.4f}{extra}", flush=True)


def skipped(metric: str, nodes: int, why: str, system: str = "") -> None:
    sys_field = f" system={system}" if system else ""
    why = "_".join(str(why).split()) or "unknown"
    print(f"ir_throughput metric={metric} nodes={nodes}{sys_field} skipped reason={why}", flush=True)


def run(n: int, reps: int, compare: bool = True) -> None:
    rec = make_recipe(n)
    count = len(rec)
    OURS.clear()

    def fresh() -> int:  # build from nothing: every UOp is new (the previous graph was freed)
        build(rec)
        return count
    t, _ = best_of(fresh, reps)
    report("construct", count, count, t, "ops/s")

    t, _ = best_of(lambda: _gc_paused(fresh), reps)  # as uopir's parser and rewriter run
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

    if compare:
        for system, fn in (("tinygrad", compare_tinygrad), ("xdsl", compare_xdsl)):
            try:
                fn(rec, root, reps)
            except Exception as e:  # noqa: BLE001 - a comparison never fails the bench
                skipped("compare", nodes, f"{type(e).__name__}: {e}", system)


# ---- comparisons: tinygrad's UOp and xDSL's parser/printer on the same graph (optional, never required) ------------
_TG_DEFAULT_ENV = {"TRACK_MATCH_STATS": "0", "VIZ": "0", "SPEC": "1", "DEBUG": "0"}  # tinygrad's defaults: no tracing


def _import_tinygrad() -> Any:
    for k, v in _TG_DEFAULT_ENV.items():
        os.environ.setdefault(k, v)
    from tinygrad.dtype import dtypes as tdt
    from tinygrad.uop import ops as tops
    return tops, tdt


# tinygrad's compiled patterns accept no closures: the rewrite functions are module-level and find tinygrad's classes
# here, filled in by _tinygrad_simplify.
_TG: dict[str, Any] = {}


def _tg_const(dt: Any, v: int) -> Any:
    return _TG["UOp"](_TG["CONST"], dt, (), v)


def _tg_fold(n: Any, a: Any, b: Any) -> Any:
    v = _TG["fold"][n.op](a.arg, b.arg)
    return None if v is None else _tg_const(n.dtype, v)


def _tg_same(x: Any) -> Any:
    return x


def _tg_zero(x: Any) -> Any:
    return _tg_const(x.dtype, 0)


def _tg_add_assoc(x: Any, c1: Any, c2: Any) -> Any:
    return _TG["UOp"](_TG["ADD"], x.dtype, (x, _tg_const(x.dtype, c1.arg + c2.arg)))


def _tg_mul_assoc(x: Any, c1: Any, c2: Any) -> Any:
    return _TG["UOp"](_TG["MUL"], x.dtype, (x, _tg_const(x.dtype, c1.arg * c2.arg)))


def _tg_add_self(x: Any) -> Any:
    return _TG["UOp"](_TG["MUL"], x.dtype, (x, _tg_const(x.dtype, 2)))


def _tinygrad_simplify(tops: Any) -> Any:
    """SIMPLIFY written again with tinygrad's UPat: src given as a list matches every order (as uopir's tuple src does
    for commutative ops); a tuple matches in order."""
    Ops, UPat = tops.Ops, tops.UPat
    idiv, mod = getattr(Ops, "IDIV", None) or Ops.CDIV, getattr(Ops, "MOD", None) or Ops.CMOD
    _TG.update(UOp=tops.UOp, CONST=Ops.CONST, ADD=Ops.ADD, MUL=Ops.MUL,
               fold={Ops.ADD: _FOLD[core.ADD], Ops.MUL: _FOLD[core.MUL], Ops.SUB: _FOLD[core.SUB],
                     idiv: _FOLD[core.IDIV], mod: _FOLD[core.MOD]})
    x, c1, c2 = UPat.var("x"), UPat.cvar("c1"), UPat.cvar("c2")
    return tops.PatternMatcher([
        (UPat(tuple(_TG["fold"]), src=(UPat.cvar("a"), UPat.cvar("b")), name="n"), _tg_fold),
        (UPat(Ops.ADD, src=[x, UPat.const(0)]), _tg_same),
        (UPat(Ops.MUL, src=[x, UPat.const(1)]), _tg_same),
        (UPat(Ops.MUL, src=[x, UPat.const(0)]), _tg_zero),
        (UPat(idiv, src=(x, UPat.const(1))), _tg_same),
        (UPat(mod, src=(x, UPat.const(1))), _tg_zero),
        (UPat(Ops.ADD, src=[UPat(Ops.ADD, src=[x, c1]), c2]), _tg_add_assoc),
        (UPat(Ops.MUL, src=[UPat(Ops.MUL, src=[x, c1]), c2]), _tg_mul_assoc),
        (UPat(Ops.ADD, src=(x, x)), _tg_add_self),
    ])


def compare_tinygrad(rec: Recipe, root: UOp, reps: int) -> None:
    count, nodes = len(rec), len(root.toposort())
    try:
        tops, tdt = _import_tinygrad()
    except Exception as e:  # noqa: BLE001
        for m, k in (("construct", count), ("rewrite", nodes)):
            skipped(m, k, f"tinygrad not importable: {type(e).__name__}: {e}", "tinygrad")
        return
    Ops, TUOp = tops.Ops, tops.UOp
    tidx = getattr(tdt, "index", None) or tdt.weakint
    opmap = {core.CONST: Ops.CONST, kernel.RANGE: Ops.RANGE, core.ADD: Ops.ADD, core.MUL: Ops.MUL,
             core.SUB: Ops.SUB, core.IDIV: getattr(Ops, "IDIV", None) or Ops.CDIV,
             core.MOD: getattr(Ops, "MOD", None) or Ops.CMOD, core.CMPLT: Ops.CMPLT, core.WHERE: Ops.WHERE,
             core.SINK: Ops.SINK}
    dtmap = {IDX: tidx, dtypes.void: tdt.void, dtypes.bool: tdt.bool}
    loop = tops.AxisType.LOOP
    trec = [(opmap[op], dtmap[dt], src, (arg[0], loop) if op is kernel.RANGE else arg) for op, dt, src, arg in rec]

    def build_tg() -> Any:
        out: list[Any] = []
        app = out.append
        for op, dt, src, arg in trec:
            app(TUOp(op, dt, tuple([out[i] for i in src]), arg))
        return out[-1]

    def fresh() -> int:
        build_tg()
        return count

    t, _ = best_of(fresh, reps)
    report("construct", count, count, t, "ops/s", system="tinygrad")
    t, _ = best_of(lambda: _gc_paused(fresh), reps)
    report("construct_gc_paused", count, count, t, "ops/s", system="tinygrad")
    troot = build_tg()
    t, _ = best_of(build_tg, reps)
    report("construct_cached", count, count, t, "ops/s", system="tinygrad")
    tnodes = len(troot.toposort())

    pm = _tinygrad_simplify(tops)
    for bottom_up in (False, True):
        name = "rewrite_bottom_up" if bottom_up else "rewrite"
        try:
            out_nodes = len(tops.graph_rewrite(troot, pm, bottom_up=bottom_up).toposort())  # also compiles the UPats
            try:  # visits: the nodes tinygrad's rewriter settles (its internal RewriteContext; untimed)
                rc = tops.RewriteContext(None if bottom_up else pm, pm if bottom_up else None)
                rc.unified_rewrite(troot)
                visits = f" visits={len(rc.replace)}"
            except Exception:  # noqa: BLE001 - internal API: the count is optional
                visits = ""
            t, _ = best_of(lambda bottom_up=bottom_up: tops.graph_rewrite(troot, pm, bottom_up=bottom_up), reps)
        except Exception as e:  # noqa: BLE001
            skipped(name, tnodes, f"tinygrad graph_rewrite failed: {type(e).__name__}: {e}", "tinygrad")
            continue
        report(name, tnodes, tnodes, t, "nodes/s", f"{visits} out_nodes={out_nodes}", system="tinygrad")


_ARITH = {core.ADD: "arith.addi", core.MUL: "arith.muli", core.SUB: "arith.subi", core.IDIV: "arith.divsi",
          core.MOD: "arith.remsi"}


def to_generic_arith(root: UOp) -> str:
    """Our graph as generic-format MLIR: one func.func in a builtin.module; the loop ranges become the function's
    index arguments, every other node one arith op, the sink's sources the func.return."""
    names: dict[UOp, str] = {}
    ranges = [u for u in root.toposort() if u.op is kernel.RANGE]
    for i, r in enumerate(ranges):
        names[r] = f"%arg{i}"
    ty = {IDX: "index", dtypes.bool: "i1"}
    lines: list[str] = []
    app = lines.append
    for u in root.toposort():
        if u in names or u.op is core.SINK:
            continue
        v = names[u] = f"%{len(names) - len(ranges)}"
        t = ty[u.dtype]
        if u.op is core.CONST:
            app(f'    {v} = "arith.constant"() <{{value = {int(u.arg)} : {t}}}> : () -> {t}')
        elif u.op in _ARITH:
            a, b = u.src
            app(f'    {v} = "{_ARITH[u.op]}"({names[a]}, {names[b]}) : ({t}, {t}) -> {t}')
        elif u.op is core.CMPLT:
            a, b = u.src
            at = ty[a.dtype]
            app(f'    {v} = "arith.cmpi"({names[a]}, {names[b]}) <{{predicate = 2 : i64}}> : ({at}, {at}) -> i1')
        elif u.op is core.WHERE:
            c, a, b = u.src
            app(f'    {v} = "arith.select"({names[c]}, {names[a]}, {names[b]}) : (i1, {t}, {t}) -> {t}')
        else:
            raise NotImplementedError(f"no arith op for {u.op}")
    outs = [names[s] for s in root.src]
    out_types = ", ".join(ty[s.dtype] for s in root.src)
    args = ", ".join(f"{names[r]}: index" for r in ranges)
    arg_types = ", ".join("index" for _ in ranges)
    return "\n".join([
        '"builtin.module"() ({',
        f'  "func.func"() <{{sym_name = "kernel", function_type = ({arg_types}) -> ({out_types})}}> ({{',
        f"  ^bb0({args}):", *lines,
        f'    "func.return"({", ".join(outs)}) : ({out_types}) -> ()',
        "  }) : () -> ()", "}) : () -> ()", ""])


def compare_xdsl(rec: Recipe, root: UOp, reps: int) -> None:
    nodes = len(root.toposort())
    try:
        import io

        from xdsl.context import Context
        from xdsl.dialects.arith import Arith
        from xdsl.dialects.builtin import Builtin
        from xdsl.dialects.func import Func
        from xdsl.parser import Parser
        from xdsl.printer import Printer
    except Exception as e:  # noqa: BLE001
        for m in ("parse", "print"):
            skipped(m, nodes, f"xdsl not importable: {type(e).__name__}: {e}", "xdsl")
        return
    ctx = Context()
    for d in (Builtin, Func, Arith):
        ctx.load_dialect(d)
    text = to_generic_arith(root)
    reps = min(reps, 3 if nodes < 50_000 else 2)  # xDSL parses ~10k ops/s: fewer repetitions keep the bench short
    try:
        t, module = best_of(lambda: Parser(ctx, text, "ir_throughput").parse_module(), reps)
    except Exception as e:  # noqa: BLE001
        skipped("parse", nodes, f"xdsl parse of our text failed: {type(e).__name__}: {e}", "xdsl")
        return
    try:
        module.verify()  # untimed: the text is valid arith, not just parseable
        verified = "yes"
    except Exception as e:  # noqa: BLE001
        verified = f"no:{type(e).__name__}"
    ops = sum(1 for _ in module.walk())
    report("parse", ops, ops, t, "ops/s", f" text_bytes={len(text)} verified={verified}", system="xdsl")

    def print_generic() -> str:
        s = io.StringIO()
        Printer(stream=s, print_generic_format=True).print_op(module)
        return s.getvalue()
    t, _ = best_of(print_generic, reps)
    report("print", ops, ops, t, "ops/s", system="xdsl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-compare", action="store_true", help="skip the tinygrad and xDSL comparison figures")
    args = ap.parse_args()
    SIMPLIFY.dispatch()  # compile the patterns outside the timings
    SIMPLIFY.dispatch(True)
    for n in (int(s) for s in args.sizes.split(",")):
        run(n, args.reps, compare=not args.no_compare)


if __name__ == "__main__":
    main()
