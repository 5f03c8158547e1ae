"""`canonicalize` and `dce`: the dialect-agnostic clean-up passes every pipeline uses between lowerings.

canonicalize folds core ALU ops and casts on constants with the semantics every backend implements — those of the
reference interpreter (uopir.dialects.semantics: integers wrap, idiv/mod truncate like C with x/0 == 0, shifts take
the amount modulo the width, float-to-int casts saturate, floats round in their own width, bf16 included) — and
removes identities that hold for every value: `x+0`, `x*1`, `x*0` (integers only: for floats NaN and inf make them
unsound), `--x`, `where` on a constant condition, `cast` of a constant or to the same type.

dce: in a hash-consed graph every node is reachable from the root, so "dead" means *computed but unobservable*:
a pure value (no side-effecting op anywhere below it) that is an operand of an op that only collects effects —
`core.group`, `kernel.def` — is dropped, and so is the root `core.sink`'s when `dce{results=false}` (at kernel and
device level a sink holds effects; at tensor level, the default, its operands are the program's results and stay).
Repeated operands of sink/group are dropped, a `core.group` nested in a sink or group is flattened into it, and an
empty group disappears — except in the root `core.sink` while its operands are results (the default): results are
read by position, so that sink is left exactly as it is. Both passes also run inside every nested region (kernel
bodies).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uopir.dialects import core
from uopir.dialects.core import const, const_value
from uopir.dialects.semantics import alu, cast_array, const_array, to_python
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import Trait
from uopir.ir.pattern import PatternMatcher, UPat, graph_rewrite, is_int
from uopir.ir.uop import UOp
from uopir.passes.manager import PassContext, map_regions, register_pass, register_pipeline


# ---- exact scalar semantics: the interpreter's own (uopir.dialects.semantics), so folding never changes a result ---
class _NoFold(Exception):
    """This value is not folded."""


def _fold_lanes(op: str, out: DType, srcs: list[UOp]) -> Any:
    with np.errstate(all="ignore"):  # overflow, inf and NaN are defined results here, not accidents
        arrays = [const_array(s.dtype, const_value(s)) for s in srcs]
        return to_python(alu(op, out, arrays, [s.dtype for s in srcs]), out)


def _lanes(c: UOp) -> tuple[Any, ...]:
    v = const_value(c)
    return v if type(v) is tuple else (v,) * max(1, c.dtype.count)


def _shape_ok(u: UOp) -> tuple[int, ...] | None:
    try:
        return u.shape
    except Exception as e:  # noqa: BLE001 - an invalid graph: leave it to the verifier
        raise _NoFold from e



# ---- patterns -------------------------------------------------------------------------------------------------------
_FOLDABLE = tuple(o for o in core.ALU_OPS if o is not core.WHERE)


def fold_alu(u: UOp) -> UOp | None:
    """An ALU op whose operands are all constants becomes a constant."""
    d = u.src[0].dtype
    if any(s.dtype is not d for s in u.src) or d.count != u.dtype.count:
        return None
    if u.op not in (core.CMPLT, core.CMPNE, core.CMPEQ) and u.dtype is not d:
        return None  # malformed: leave it for the verifier
    try:
        value = _fold_lanes(u.op.name, u.dtype, list(u.src))
        return const(u.dtype, value, _shape_ok(u))
    except (_NoFold, ValueError, TypeError, OverflowError, KeyError, IRError):
        return None


def fold_cast(u: UOp, c: UOp) -> UOp | None:
    if c.dtype.count != u.dtype.count or u.dtype.is_ptr or c.dtype.is_ptr or u.dtype is dtypes.void:
        return None
    try:
        with np.errstate(all="ignore"):
            value = to_python(cast_array(const_array(c.dtype, const_value(c)), c.dtype, u.dtype), u.dtype)
        return const(u.dtype, value, _shape_ok(u))
    except (_NoFold, ValueError, TypeError, OverflowError, IRError):
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
            root_results = u is g and n.op.name == "core.sink" and options.results
            if (n.op.name in _COLLECTORS or n.op.name == "core.sink") and not root_results:
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
