"""`canonicalize` and `dce`: the dialect-agnostic clean-up passes every pipeline uses between lowerings.

canonicalize folds core ALU ops on constants with the exact semantics of the dtype (integers wrap, idiv/mod
truncate like C, floats round in their own width through numpy scalars) and removes identities that hold for every
value: `x+0`, `x*1`, `x*0` (integers only: for floats NaN and inf make them unsound), `--x`, `where` on a constant
condition, `cast` of a constant or to the same type. It never folds what a target may define differently:
division or remainder by zero, shifts by a negative amount or by the width or more, float-to-int casts out of range,
`max` with a NaN, float `mulacc` (fused or not), and anything of type bf16.

dce: in a hash-consed graph every node is reachable from the root, so "dead" means *computed but unobservable*:
a pure value (no side-effecting op anywhere below it) that is an operand of an op that only collects effects —
`core.group`, `kernel.def` — is dropped, and so is the root `core.sink`'s when `dce{results=false}` (at kernel and
device level a sink holds effects; at tensor level, the default, its operands are the program's results and stay).
Repeated operands of sink/group are dropped, a `core.group` nested in a sink or group is flattened into it, and an
empty group disappears. Both passes also run inside every nested region (kernel bodies).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uopir.dialects import core
from uopir.dialects.core import const, const_value
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import Trait
from uopir.ir.pattern import PatternMatcher, UPat, graph_rewrite, is_int
from uopir.ir.uop import UOp, normalize_const
from uopir.passes.manager import PassContext, map_regions, register_pass, register_pipeline

# ---- exact scalar semantics ------------------------------------------------------------------------------------------
_NP_FLOAT = {16: np.float16, 32: np.float32, 64: np.float64}


class _NoFold(Exception):
    """This value is not folded (undefined or target-defined behaviour)."""


def _fl(d: DType, v: Any) -> Any:
    """v rounded to the float dtype d, as a numpy scalar of that width."""
    if d.scalar is dtypes.bfloat16:
        raise _NoFold
    with np.errstate(all="ignore"):  # a literal too large for the width becomes inf, as in C
        return _NP_FLOAT[d.scalar.bits](v)


def _idiv(a: int, b: int) -> int:
    if b == 0:
        raise _NoFold
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _mod(a: int, b: int) -> int:
    return a - b * _idiv(a, b)


def _shift_amount(d: DType, b: int) -> int:
    if b < 0 or b >= d.scalar.bits:
        raise _NoFold
    return b


def _fold_lane(op: str, d: DType, vals: tuple[Any, ...]) -> Any:
    """One lane of `op` on operands of dtype `d` (the operands' dtype; comparisons return bool)."""
    s = d.scalar
    if s.is_float:
        x = [_fl(s, v) if type(v) is not bool else v for v in vals]
        with np.errstate(all="ignore"):
            if op == "core.add":
                return float(x[0] + x[1])
            if op == "core.sub":
                return float(x[0] - x[1])
            if op == "core.mul":
                return float(x[0] * x[1])
            if op == "core.fdiv":
                if x[1] == 0:
                    raise _NoFold
                return float(x[0] / x[1])
            if op == "core.recip":
                if x[0] == 0:
                    raise _NoFold
                return float(_fl(s, 1.0) / x[0])
            if op == "core.neg":
                return float(-x[0])
            if op == "core.max":
                if math.isnan(x[0]) or math.isnan(x[1]):
                    raise _NoFold
                return float(max(x[0], x[1]))
            unary: dict[str, Callable] = {"core.exp2": np.exp2, "core.log2": np.log2, "core.sin": np.sin,
                                          "core.sqrt": np.sqrt, "core.trunc": np.trunc}
            if op in unary:
                return float(unary[op](x[0]))
            if op == "core.cmplt":
                return bool(x[0] < x[1])
            if op == "core.cmpne":
                return bool(x[0] != x[1])
            if op == "core.cmpeq":
                return bool(x[0] == x[1])
        raise _NoFold
    a = [int(v) for v in vals]  # bool and ints as Python ints: exact, then wrapped by normalize_const
    if op == "core.add":
        r: Any = a[0] + a[1] if not s.is_bool else (a[0] | a[1])
    elif op == "core.sub":
        r = a[0] - a[1]
    elif op == "core.mul":
        r = a[0] * a[1] if not s.is_bool else (a[0] & a[1])
    elif op == "core.neg":
        r = -a[0]
    elif op == "core.max":
        r = max(a[0], a[1])
    elif op == "core.idiv":
        r = _idiv(a[0], a[1])
    elif op == "core.mod":
        r = _mod(a[0], a[1])
    elif op == "core.and":
        r = a[0] & a[1]
    elif op == "core.or":
        r = a[0] | a[1]
    elif op == "core.xor":
        r = a[0] ^ a[1]
    elif op == "core.shl":
        r = a[0] << _shift_amount(s, a[1])
    elif op == "core.shr":
        r = a[0] >> _shift_amount(s, a[1])
    elif op == "core.mulacc":
        r = a[0] * a[1] + a[2]
    elif op == "core.cmplt":
        return a[0] < a[1]
    elif op == "core.cmpne":
        return a[0] != a[1]
    elif op == "core.cmpeq":
        return a[0] == a[1]
    else:
        raise _NoFold
    return normalize_const(s, r)


def _cast_lane(src: DType, dst: DType, v: Any) -> Any:
    s, t = src.scalar, dst.scalar
    if s is dtypes.bfloat16 or t is dtypes.bfloat16:
        raise _NoFold
    if s.is_float:
        v = _fl(s, v)
    if t.is_bool:
        return bool(v != 0)
    if t.is_float:
        with np.errstate(all="ignore"):
            return float(_fl(t, float(v) if s.is_float else int(v)))
    if t.is_int:
        if s.is_float:
            if not math.isfinite(v):
                raise _NoFold
            iv = int(math.trunc(float(v)))
            if not t.min <= iv <= t.max:
                raise _NoFold
            return iv
        return normalize_const(t, int(v))
    raise _NoFold


def _lanes(c: UOp) -> tuple[Any, ...]:
    v = const_value(c)
    return v if type(v) is tuple else (v,) * max(1, c.dtype.count)


def _shape_ok(u: UOp) -> tuple[int, ...] | None:
    try:
        return u.shape
    except Exception as e:  # noqa: BLE001 - an invalid graph: leave it to the verifier
        raise _NoFold from e


def _make_const(u: UOp, lanes: list[Any]) -> UOp:
    value: Any = lanes[0] if u.dtype.count == 1 else tuple(lanes)
    return const(u.dtype, value, _shape_ok(u))


# ---- patterns -------------------------------------------------------------------------------------------------------
_FOLDABLE = tuple(o for o in core.ALU_OPS if o is not core.WHERE)


def fold_alu(u: UOp) -> UOp | None:
    """An ALU op whose operands are all constants becomes a constant."""
    d = u.src[0].dtype
    if any(s.dtype is not d for s in u.src) or d.count != u.dtype.count:
        return None
    if d.is_float and u.op is core.MULACC:
        return None
    if u.op not in (core.CMPLT, core.CMPNE, core.CMPEQ) and u.dtype is not d:
        return None  # malformed: leave it for the verifier
    try:
        per = [_lanes(s) for s in u.src]
        lanes = [_fold_lane(u.op.name, d, tuple(p[i] for p in per)) for i in range(max(1, d.count))]
        return _make_const(u, lanes)
    except (_NoFold, ValueError, TypeError, OverflowError):
        return None


def fold_cast(u: UOp, c: UOp) -> UOp | None:
    if c.dtype.count != u.dtype.count or u.dtype.is_ptr or c.dtype.is_ptr or u.dtype is dtypes.void:
        return None
    try:
        return _make_const(u, [_cast_lane(c.dtype, u.dtype, v) for v in _lanes(c)])
    except (_NoFold, ValueError, TypeError, OverflowError):
        return None


def _same_type(u: UOp, x: UOp) -> bool:
    """x may replace u: same dtype and same tensor shape (a shapeless operand cannot stand in for a tensor)."""
    try:
        return x.dtype is u.dtype and x.shape == u.shape
    except Exception:  # noqa: BLE001
        return False


def _pure(x: UOp) -> bool:
    """Nothing with a side effect is computed below x (so dropping x loses nothing)."""
    return not any(n.op.has(Trait.SIDE_EFFECT) for n in x.toposort())


def _is(c: UOp, v: int) -> bool:
    return all(type(x) is not float and x == v for x in _lanes(c))


def _keep(u: UOp, x: UOp) -> UOp | None:
    return x if _same_type(u, x) else None


def add_zero(u: UOp, x: UOp, c: UOp) -> UOp | None:
    return _keep(u, x) if _is(c, 0) else None


def mul_one(u: UOp, x: UOp, c: UOp) -> UOp | None:
    return _keep(u, x) if _is(c, 1) else None


def mul_zero(u: UOp, x: UOp, c: UOp) -> UOp | None:
    if not _is(c, 0) or not _pure(x):
        return None
    try:
        return const(u.dtype, 0 if u.dtype.count == 1 else (0,) * u.dtype.count, _shape_ok(u))
    except _NoFold:
        return None


def sub_zero(u: UOp, x: UOp, c: UOp) -> UOp | None:
    return _keep(u, x) if _is(c, 0) else None


def div_one(u: UOp, x: UOp, c: UOp) -> UOp | None:
    return _keep(u, x) if _is(c, 1) else None


def double_neg(u: UOp, x: UOp) -> UOp | None:
    return _keep(u, x)


def where_const(u: UOp, c: UOp, a: UOp, b: UOp) -> UOp | None:
    lanes = set(_lanes(c))
    if len(lanes) != 1:
        return None
    return _keep(u, a if lanes.pop() else b)


def where_same(u: UOp, c: UOp, a: UOp) -> UOp | None:
    return _keep(u, a) if _pure(c) else None


def cast_noop(u: UOp, x: UOp) -> UOp | None:
    return _keep(u, x)


_I = is_int
canonicalize_patterns = PatternMatcher([
    (UPat(_FOLDABLE, src=UPat("core.const"), name="u"), fold_alu, "fold-constant"),
    (UPat("core.cast", src=(UPat("core.const", name="c"),), name="u"), fold_cast, "fold-cast"),
    (UPat("core.cast", src=(UPat(name="x"),), name="u", check=lambda u: u.src[0].dtype is u.dtype), cast_noop,
     "cast-same-type"),
    (UPat("core.add", _I, (UPat(name="x"), UPat("core.const", name="c")), name="u"), add_zero, "add-zero"),
    (UPat("core.sub", _I, (UPat(name="x"), UPat("core.const", name="c")), name="u"), sub_zero, "sub-zero"),
    (UPat("core.mul", _I, (UPat(name="x"), UPat("core.const", name="c")), name="u"), mul_one, "mul-one"),
    (UPat("core.mul", _I, (UPat(name="x"), UPat("core.const", name="c")), name="u"), mul_zero, "mul-zero"),
    (UPat("core.idiv", _I, (UPat(name="x"), UPat("core.const", name="c")), name="u"), div_one, "idiv-one"),
    (UPat("core.neg", src=(UPat("core.neg", src=(UPat(name="x"),)),), name="u"), double_neg, "double-neg"),
    (UPat("core.where", src=(UPat("core.const", name="c"), UPat(name="a"), UPat(name="b")), name="u"),
     where_const, "where-const-cond"),
    (UPat("core.where", src=(UPat(name="c"), UPat(name="a"), UPat(name="a")), name="u"), where_same,
     "where-same-branches"),
], name="canonicalize")


def _in_regions(root: UOp, fn: Callable[[UOp], UOp]) -> UOp:
    """Apply fn to the graph and to every nested region in it."""
    root = fn(root)
    return map_regions(root, lambda r: True, lambda r: _in_regions(r, fn))


@dataclass
class CanonicalizeOptions:
    regions: bool = field(default=True, metadata={"help": "also canonicalize nested regions (kernel bodies)"})


@register_pass("canonicalize", summary="fold constants and remove algebraic identities of core ALU ops",
               consumes=("core",), produces=("core",), options=CanonicalizeOptions)
def canonicalize(root: UOp, options: CanonicalizeOptions, ctx: PassContext) -> UOp:
    def run(g: UOp) -> UOp:
        return graph_rewrite(g, canonicalize_patterns, ctx=ctx, stats=ctx.stats)
    return _in_regions(root, run) if options.regions else run(root)


# ---- dce -----------------------------------------------------------------------------------------------------------
_COLLECTORS = ("core.group", "kernel.def")  # ops whose operands are effects, never values anyone reads


def _dead(x: UOp) -> bool:
    return x.dtype is not dtypes.void and _pure(x)


def _prune(u: UOp, drop_values: bool, ctx: PassContext) -> UOp:
    """Operands of a sink/group/def without duplicates, nested groups flattened, dead values dropped."""
    out: list[UOp] = []
    seen: set[UOp] = set()
    stack = list(reversed(u.src))
    while stack:
        s = stack.pop()
        if s.op.name == "core.group" and u.op.name in ("core.group", "core.sink") and s.tag is None:
            stack.extend(reversed(s.src))
            ctx.count("groups-flattened")
            continue
        if s in seen:
            ctx.count("duplicates-removed")
            continue
        if drop_values and _dead(s):
            ctx.count("dead-values-removed")
            continue
        seen.add(s)
        out.append(s)
    return u if tuple(out) == u.src else u.replace(src=tuple(out))


@dataclass
class DceOptions:
    results: bool = field(default=True, metadata={
        "help": "the root sink's value operands are results (kept); false drops pure values from it too"})


@register_pass("dce", summary="remove unobservable values from sinks and groups; flatten and dedupe them",
               consumes=(), produces=(), options=DceOptions)
def dce(root: UOp, options: DceOptions, ctx: PassContext) -> UOp:
    def run(g: UOp) -> UOp:
        new_map: dict[UOp, UOp] = {}
        for u in g.toposort():  # sources first, so a pruned collector is seen pruned by its users
            src = tuple(new_map[s] for s in u.src)
            n = u if src == u.src else u.replace(src=src)
            if n.op.name in _COLLECTORS or n.op.name == "core.sink":
                drop = n.op.name in _COLLECTORS or u is not g or not options.results
                n = _prune(n, drop, ctx)
            new_map[u] = n
        out = new_map[g]
        ctx.count("nodes-removed", max(0, len(g.toposort()) - len(out.toposort())))
        return out
    return _in_regions(root, run)


# ---- named pipelines -------------------------------------------------------------------------------------------------
@dataclass
class CleanupOptions:
    dce: bool = field(default=True, metadata={"help": "run dce after canonicalize"})


register_pipeline("cleanup", CleanupOptions, lambda o: "canonicalize,dce" if o.dce else "canonicalize",
                  summary="canonicalize, then dce")
