"""`kernel-simplify`: symbolic simplification of the index math, gates and loads of kernel bodies.

What it does, as named rules (each shows in --pass-statistics):
- the core dialect's folds (uopir.ir.folds: the canonicalize table; constants fold by the semantics module);
- the integer rules of uopir.passes.kernel.simplify_rules (one table, proved with z3 by the unit tests): a value whose
  range is one point becomes that constant (gates always true or false), division and remainder by constants when
  the ranges allow, constants moved across comparisons, merged bounds;
- strategies that apply those rules inside a sum: `collect-terms` reads a sum as terms with constant coefficients
  and rebuilds it with like terms collected (x*a + x*b -> x*(a+b)), constants last, `(x//c)*c + x%c` recombined;
  `div-peel-in-sum` / `mod-peel-in-sum` peel a term whose coefficient the divisor divides out of a longer sum;
- kernel rules: a range of extent 1 becomes 0 (and leaves its kernel.end / kernel.reduce), a one-hot reduction
  `sum_r where(cast(r) == e, v(r), 0)` becomes a load at e (`fold-one-hot`, uopir.passes.kernel.onehot: gathers and
  embeddings read one row), a gate that is always true is dropped, a load whose gate is always false is its
  alternative (a dead load), a `where` that repeats the gate of the load it selects is that load;
- range splitting (plain code, before merging): a range r of constant extent that the index reads as r // b or
  r % b, b dividing the extent (a 3x3 window reshaped into 9 taps, channels blocked by 16), becomes two ranges
  r0 in [0, n/b) (r's axis) and r1 in [0, b) (a fresh axis), r = r0*b + r1, when that leaves fewer divisions;
- range merging (plain code: it needs every use of two ranges, which no local pattern sees): two adjacent ranges
  r0 in [0, a), r1 in [0, b) closed together become one range R in [0, a*b) when, with r0 = R // b and r1 = R % b,
  the kernel simplifies back to no more divisions and no more nodes than it had (so r0 and r1 were used only as
  r0*b + r1, scaled). Row-major order is kept, so reductions accumulate in the same order (bit for bit).

It runs on every kernel body (a region whose root is kernel.def, at any depth) and on a kernel.def root.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from uopir.dialects import core, kernel
from uopir.dialects.core import const_value
from uopir.ir.dtype import DType, dtypes
from uopir.ir.folds import FoldContext, fold_matcher
from uopir.ir.once import FirstUse
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.pattern_compiler import Rule as PatternRule
from uopir.ir.regions import map_regions
from uopir.ir.rewrite import RewriteStats, graph_rewrite
from uopir.ir.roles import role_op
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat
from uopir.ir.valuerange import value_range
from uopir.passes.kernel.indexmath import conjuncts
from uopir.passes.kernel.onehot import fold_one_hot
from uopir.passes.kernel.simplify_rules import RULES, App, K, Lit, LoConst, QEnv, Rule, Term, V, subterms
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass

__all__ = ["kernel_simplify", "simplify_kernel", "KernelSimplifyOptions", "SIMPLIFY", "int_scope", "one_rule_matcher"]


# ---- the table's rules as patterns -----------------------------------------------------------------------------------
def int_scope(d: DType) -> bool:
    """The dtypes the integer rules speak about: scalar signed integers and index."""
    return d.count == 1 and (d.kind == "int" or d.kind == "index")


def _int_or_bool(d: DType) -> bool:
    return d.count == 1 and (d.kind == "int" or d.kind == "index" or d.kind == "bool")


# a value whose range is one point: ops with a range rule that are worth replacing (not const, not kernel.range: a
# range of extent 1 has its own rule, which also takes it out of its end/reduce)
_RANGE_CONST_OPS = frozenset(core.ALU_OPS) | {core.CAST, kernel.VAR}


def _upat(t: Term, scope: Callable[[DType], bool], names: dict[str, str], top: bool) -> UPat:
    if isinstance(t, V):
        if top:  # a rule whose lhs is a bare variable (range-const): dispatch on the ops it can fire on
            return UPat(_RANGE_CONST_OPS, dtype=scope, name=t.name)
        return UPat.var(t.name, dtype=scope)
    if isinstance(t, K):
        return UPat.cvar(t.name, dtype=int_scope)
    if isinstance(t, Lit):
        return UPat.value(t.value)
    assert isinstance(t, App), f"{t!r} cannot appear in a pattern"
    nm = names.setdefault(repr(t), f"t{len(names)}")
    return UPat(role_op(t.key), src=tuple(_upat(a, scope, names, False) for a in t.args), name=nm)


class _Match(QEnv):
    """A match of a rule's lhs: the nodes of its subterms, and its quantities as Python ints."""

    def __init__(self, caps: dict[str, UOp], names: dict[str, str], dtype: DType):
        self.caps, self.names, self.dtype = caps, names, dtype
        self.MIN, self.MAX = dtype.min, dtype.max

    def node(self, t: Term) -> UOp:
        return self.caps[t.name] if isinstance(t, (V, K)) else self.caps[self.names[repr(t)]]

    def lo(self, t: Term) -> int:
        return value_range(self.node(t))[0]

    def hi(self, t: Term) -> int:
        return value_range(self.node(t))[1]

    def val(self, t: Term) -> int:
        return const_value(self.node(t))

    def num(self, n: int) -> int:
        return n

    def floordiv(self, a: int, b: int) -> int:
        return a // b

    def mod(self, a: int, b: int) -> int:
        return a % b

    def build(self, t: Term) -> UOp:
        if isinstance(t, (V, K)):
            return self.node(t)
        if isinstance(t, Lit):
            return UOp.const(dtypes.bool if type(t.value) is bool else self.dtype, t.value)
        if isinstance(t, LoConst):
            n = self.node(t.of)
            return UOp.const(n.dtype, value_range(n)[0])
        assert isinstance(t, App)
        srcs = tuple(self.build(a) for a in t.args)
        return UOp(role_op(t.key), dtypes.bool if t.key in ("lt", "eq") else srcs[0].dtype, srcs)


def _compile(r: Rule) -> PatternRule:
    names: dict[str, str] = {}
    scope = _int_or_bool if r.scope == "int+bool" else int_scope
    pat = _upat(r.lhs, scope, names, True)
    leaves = [t.name for t in subterms(r.lhs) if isinstance(t, (V, K))]

    def fn(ctx: Any, **caps: UOp) -> UOp | None:
        m = _Match(caps, names, caps[leaves[0]].dtype)
        if not r.holds(m):
            return None
        return m.build(r.rhs)
    fn.__name__ = fn.__qualname__ = r.name.replace("-", "_")
    pr = PatternMatcher([(pat, fn, r.name)]).rules[0]
    pr.source = r.where  # --pass-statistics points at the table row
    return pr


_TABLE = PatternMatcher([_compile(r) for r in RULES], name="kernel-simplify[rules]")
_RULE_INDEX = {r.name: i for i, r in enumerate(RULES)}
_ONE: dict[str, PatternMatcher] = {}  # one rule's matcher, made when a strategy first applies it (not at import)
_ONE_FIRST_USE = FirstUse("one-rule matcher")


def one_rule_matcher(name: str) -> PatternMatcher:
    """The matcher of rule `name` of the table alone: made once, when first asked for (from any thread)."""
    pm = _ONE.get(name)
    if pm is None:
        pm = _ONE_FIRST_USE.get(_ONE, name, lambda: PatternMatcher([_TABLE.rules[_RULE_INDEX[name]]], name=name))
    return pm


def apply_rule(name: str, instance: UOp) -> UOp | None:
    """Rule `name` of the table applied at the root of `instance` (a node built to match its lhs), or None."""
    return one_rule_matcher(name).rewrite(instance)


# ---- sums as terms with constant coefficients (collect-terms and the peel strategies) --------------------------------
def _const_int(u: UOp) -> int | None:
    return u.arg if u.op is core.CONST and type(u.arg) is int else None


_TERM_BUDGET = 512  # nodes one sum may be read through (a DAG of shared sub-sums read as a tree can be exponential)


def linear_terms(u: UOp) -> tuple[list[tuple[UOp, int]], int]:
    """u as sum(coefficient * term) + constant, reading add, sub, neg and multiplication by a constant; terms in
    first-occurrence order, equal terms collected (coefficients are exact integers: wrap them to the dtype)."""
    coeff: dict[UOp, int] = {}
    const = 0
    stack: list[tuple[UOp, int]] = [(u, 1)]
    d = u.dtype
    budget = _TERM_BUDGET
    while stack:
        budget -= 1
        if budget < 0:  # a sum that shares sub-sums many times over: read it as one opaque term
            return [(u, 1)], 0
        x, k = stack.pop()
        op = x.op
        if x.dtype is d and (c := _const_int(x)) is not None:
            const += k * c
        elif op is core.ADD:
            stack += [(x.src[1], k), (x.src[0], k)]
        elif op is core.SUB:
            stack += [(x.src[1], -k), (x.src[0], k)]
        elif op is core.NEG:
            stack.append((x.src[0], -k))
        elif op is core.MUL and (c := _const_int(x.src[1])) is not None:
            stack.append((x.src[0], k * c))
        elif op is core.MUL and (c := _const_int(x.src[0])) is not None:
            stack.append((x.src[1], k * c))
        else:
            coeff[x] = coeff.get(x, 0) + k
    return list(coeff.items()), const


def _wrap(d: DType, v: int) -> int:
    m = 1 << d.bits
    return ((v - d.min) % m) + d.min


def build_sum(d: DType, terms: list[tuple[UOp, int]], const: int) -> UOp:
    """The sum in its canonical form: ((t0*c0 + t1*c1) + ...) + const, coefficient 1 and constant 0 left out."""
    out: UOp | None = None
    for t, c in terms:
        c = _wrap(d, c)
        if c == 0:
            continue
        x = t if c == 1 else UOp(core.MUL, d, (t, UOp.const(d, c)))
        out = x if out is None else UOp(core.ADD, d, (out, x))
    const = _wrap(d, const)
    if out is None:
        return UOp.const(d, const)
    return out if const == 0 else UOp(core.ADD, d, (out, UOp.const(d, const)))


def _recombine(d: DType, terms: list[tuple[UOp, int]]) -> list[tuple[UOp, int]] | None:
    """(x//c)*c1 + (x%c)*c2 -> x*c2 (table rule div-mod-recombine) for a pair of terms of the sum, once."""
    mods = {t.src: (t, c) for t, c in terms if t.op is core.MOD}
    if not mods:
        return None
    for t, c1 in terms:
        if t.op is core.IDIV and (hit := mods.get(t.src)) is not None:
            m, c2 = hit
            inst = UOp(core.ADD, d, (UOp(core.MUL, d, (t, UOp.const(d, _wrap(d, c1)))),
                                     UOp(core.MUL, d, (m, UOp.const(d, _wrap(d, c2))))))
            if apply_rule("div-mod-recombine", inst) is None:
                continue
            out = [(x, c) for x, c in terms if x is not m and x is not t]
            return out + [(t.src[0], c2)]
    return None


def _collect_terms(u: UOp) -> UOp | None:
    if not int_scope(u.dtype):
        return None
    terms, const = linear_terms(u)
    while (again := _recombine(u.dtype, terms)) is not None:
        merged: dict[UOp, int] = {}
        for t, c in again:
            merged[t] = merged.get(t, 0) + c
        terms = list(merged.items())
    r = build_sum(u.dtype, terms, const)
    return None if r is u else r


def _peel(rule_name: str, u: UOp) -> UOp | None:
    """Apply div-peel / mod-peel to (term*k + rest) // c for each term of a longer sum, the first that fires."""
    x, c = u.src
    if not int_scope(u.dtype) or (_const_int(c) or 0) <= 0 or x.op is not core.ADD:
        return None
    d = u.dtype
    terms, const = linear_terms(x)
    cands = terms + ([(UOp.const(d, 1), const)] if const else [])
    if len(cands) < 2:
        return None
    for i, (t, k) in enumerate(cands):
        if k % c.arg:
            continue
        others = cands[:i] + cands[i + 1:]
        rest = build_sum(d, [(o, kk) for o, kk in others if o.op is not core.CONST],
                         sum(kk for o, kk in others if o.op is core.CONST))
        inst = UOp(u.op, d, (UOp(core.ADD, d, (UOp(core.MUL, d, (t, UOp.const(d, _wrap(d, k)))), rest)), c))
        if (r := apply_rule(rule_name, inst)) is not None:
            return r
    return None


_I = UPat.var("u", dtype=int_scope)
_STRATEGIES = PatternMatcher([
    (UPat(core.IDIV, src=(UPat(core.ADD), UPat.cvar()), name="u"), lambda u: _peel("div-peel", u), "div-peel-in-sum"),
    (UPat(core.MOD, src=(UPat(core.ADD), UPat.cvar()), name="u"), lambda u: _peel("mod-peel", u), "mod-peel-in-sum"),
    (UPat((core.ADD, core.SUB, core.NEG), dtype=int_scope, name="u"), _collect_terms, "collect-terms"),
    (UPat(core.MUL, dtype=int_scope, src=(UPat.var(), UPat.cvar()), name="u"), _collect_terms, "collect-terms"),
], name="kernel-simplify[sums]")


# ---- kernel rules: size-1 ranges, gates, dead loads ------------------------------------------------------------------
def _drop_closed(u: UOp) -> UOp | None:
    """kernel.end / kernel.reduce without the ranges that became constants (a range of extent 1 is 0)."""
    ranges = u.operands.ranges
    keep = tuple(r for r in ranges if r.op is kernel.RANGE)
    if len(keep) == len(ranges):
        return None
    v = u.operands.value
    if keep:
        return u.replace(src=(v, *keep))
    if u.op is kernel.END:
        return v
    if u.attrs.op == "add" and u.dtype.is_float:  # one step of the reduction from its identity: 0.0 + v (-0.0 -> 0.0)
        return UOp(core.ADD, u.dtype, (v, UOp.const(u.dtype, 0.0)))
    return v  # 1 * v, max(lowest, v), min(highest, v), 0 + v on integers: exactly v


def _where_gated_load(g: UOp, ld: UOp, p: UOp, a: UOp) -> UOp | None:
    """where(g, load(p, a, h), a) is the load when h implies g (g's conjuncts are among h's): where g is false, so is
    h, and the load gives a."""
    return ld if conjuncts(g) <= conjuncts(ld.operands.gate) else None


_TRUE, _FALSE = UPat.const(dtypes.bool, True), UPat.const(dtypes.bool, False)
_P = UPat.var("p")
_KERNEL = PatternMatcher([
    (UPat(kernel.RANGE, src=(UPat.const(dtypes.index, 1),)), lambda: UOp.const(dtypes.index, 0), "range-size-one"),
    (UPat((kernel.END, kernel.REDUCE), name="u"), _drop_closed, "close-constant-ranges"),
    (UPat(kernel.REDUCE, src=(UPat(core.WHERE),), allow_any_len=True, name="u"), fold_one_hot, "fold-one-hot"),
    (UPat(kernel.LOAD, src=(_P, UPat.var(), _TRUE), name="u"), lambda u, p: UOp(kernel.LOAD, u.dtype, (p,)),
     "load-gate-true"),
    (UPat(kernel.LOAD, src=(_P, UPat.var("a"), _FALSE)), lambda p, a: a, "dead-load"),
    (UPat(kernel.INDEX, src=(_P, UPat.var("o"), _TRUE), name="u"), lambda u, p, o: u.replace(src=(p, o)),
     "index-gate-true"),
    (UPat(kernel.STORE, src=(_P, UPat.var("v"), _TRUE), name="u"), lambda u, p, v: u.replace(src=(p, v)),
     "store-gate-true"),
    (UPat.var("g").where(UPat(kernel.LOAD, src=(_P, UPat.var("a"), UPat.var()), name="ld"), UPat.var("a")),
     _where_gated_load, "where-gated-load"),
], name="kernel-simplify[kernel]")

# The core folds first (constant folds before identities), then the kernel rules, the table, the sum strategies.
SIMPLIFY: PatternMatcher = fold_matcher(("core",)) + _KERNEL + _TABLE + _STRATEGIES


# ---- merging adjacent ranges -----------------------------------------------------------------------------------------
def _closers(nodes: list[UOp]) -> list[UOp]:
    return [u for u in nodes if u.op is kernel.END or u.op is kernel.REDUCE]


def _pairs(closers: list[UOp]) -> list[tuple[UOp, UOp]]:
    out: dict[tuple[UOp, UOp], None] = {}
    for c in closers:
        rs = c.operands.ranges
        for a, b in itertools.pairwise(rs):
            out[(a, b)] = None
    return list(out)


def _cost(g: UOp, nodes: Collection[UOp] | None = None) -> tuple[int, int]:
    """(divisions and remainders, nodes) of g; `nodes`: its toposort when the caller has it."""
    nodes = g.toposort() if nodes is None else nodes
    return sum(1 for u in nodes if u.op is core.IDIV or u.op is core.MOD), len(nodes)


def _merge_pair(g: UOp, nodes: list[UOp], r0: UOp, r1: UOp) -> UOp | None:
    """g with r0, r1 merged into one range, or None when they cannot be merged exactly."""
    if r0.op is not kernel.RANGE or r1.op is not kernel.RANGE or r0.attrs.kind != r1.attrs.kind:
        return None
    a, b = _const_int(r0.operands.end), _const_int(r1.operands.end)
    if a is None or b is None or a < 1 or b < 1:
        return None
    order = [u for u in nodes if u.op is kernel.RANGE]
    if order.index(r1) != order.index(r0) + 1:
        return None  # not neighbours in the kernel's loop order: iterations would be reordered
    for c in _closers(nodes):
        rs = c.operands.ranges
        if (r0 in rs or r1 in rs) and not any(x is r0 and y is r1 for x, y in itertools.pairwise(rs)):
            return None  # closed apart, or in the other order: merging would change the iteration order
    merged = UOp(kernel.RANGE, dtypes.index, (UOp.const(dtypes.index, a * b),), r0.arg)
    if merged in nodes:
        return None
    bc = UOp.const(dtypes.index, b)
    new: dict[UOp, UOp] = {r0: UOp(core.IDIV, dtypes.index, (merged, bc)),
                           r1: UOp(core.MOD, dtypes.index, (merged, bc))}
    for u in nodes:
        if u in new:
            continue
        if u.op is kernel.END or u.op is kernel.REDUCE:
            rs = [merged if r is r0 else r for r in u.operands.ranges if r is not r1]
            v = u.operands.value
            src = (new.get(v, v), *(new.get(r, r) if r is not merged else r for r in rs))
        else:
            src = tuple(new.get(s, s) for s in u.src)
        if src != u.src:
            new[u] = u.replace(src=src)
    return new.get(g, g)


def _merge_once(g: UOp, rewrite: Callable[[UOp], UOp]) -> UOp | None:
    nodes = list(g.toposort())
    before = _cost(g, nodes)
    for r0, r1 in _pairs(_closers(nodes)):
        cand = _merge_pair(g, nodes, r0, r1)
        if cand is None:
            continue
        cand = rewrite(cand)
        after = _cost(cand)
        if after[0] <= before[0] and after[1] <= before[1]:
            return cand
    return None


def _split_range(g: UOp, nodes: list[UOp], r: UOp, b: int) -> UOp:
    """g with range r (extent n) split into r0 in [0, n/b) (r's axis and kind) and r1 in [0, b) (a fresh axis, the
    same kind), r = r0*b + r1 everywhere, r0 r1 in r's place in every end/reduce: the iteration order is r's."""
    n = _const_int(r.operands.end)
    assert n is not None
    axis = 1 + max(u.attrs.axis for u in nodes if u.op is kernel.RANGE)
    r0 = UOp(kernel.RANGE, dtypes.index, (UOp.const(dtypes.index, n // b),), r.arg)
    r1 = UOp(kernel.RANGE, dtypes.index, (UOp.const(dtypes.index, b),), (axis, *r.arg[1:]))
    new: dict[UOp, UOp] = {r: UOp(core.ADD, dtypes.index, (UOp(core.MUL, dtypes.index, (r0, UOp.const(dtypes.index,
                                                                                                    b))), r1))}
    for u in nodes:
        if u is r:
            continue
        if u.op is kernel.END or u.op is kernel.REDUCE:
            v = u.operands.value
            rs = tuple(x for q in u.operands.ranges for x in ((r0, r1) if q is r else (new.get(q, q),)))
            src = (new.get(v, v), *rs)
        else:
            src = tuple(new.get(s, s) for s in u.src)
        if src != u.src:
            new[u] = u.replace(src=src)
    return new.get(g, g)


def _split_once(g: UOp, rewrite: Callable[[UOp], UOp]) -> UOp | None:
    """Undo a merge the graph above made: a range r of constant extent that the index math reads as r // b or r % b
    (b dividing its extent: a reshape of a 3x3 window into 9 taps, channels blocked by 16) becomes two ranges when
    that leaves fewer divisions (then r // b is r0 and r % b is r1); the first such split, or None."""
    nodes = list(g.toposort())
    before = _cost(g, nodes)
    tried: set[tuple[UOp, int]] = set()
    for u in nodes:
        if u.op is not core.IDIV and u.op is not core.MOD:
            continue
        r, c = u.src
        b, n = _const_int(c), _const_int(r.operands.end) if r.op is kernel.RANGE else None
        if b is None or n is None or not 1 < b < n or n % b or (r, b) in tried:
            continue
        tried.add((r, b))
        cand = rewrite(_split_range(g, nodes, r, b))
        after = _cost(cand)
        if after[0] < before[0] and after[1] <= before[1] + 8:
            return cand
    return None


# ---- the pass --------------------------------------------------------------------------------------------------------
@dataclass
class KernelSimplifyOptions:
    """kernel-simplify's options."""
    merge_ranges: bool = field(default=True, metadata={
        "help": "merge two adjacent ranges into one when the index uses them only as r0*b + r1"})


class _Ctx(FoldContext):
    """The rewrite context: the fold table's effect cache."""


def simplify_kernel(g: UOp, merge_ranges: bool = True, stats: Any = None) -> UOp:
    """One kernel body (a kernel.def), simplified."""
    tried: list[RewriteStats] = []  # the counts of the last candidate's rewrite, merged when it is kept

    def candidate(x: UOp) -> UOp:
        tried[:] = [RewriteStats()] if stats is not None else []
        return graph_rewrite(x, SIMPLIFY, ctx=_Ctx(), stats=tried[0] if tried else None)

    def keep(kind: str) -> None:  # an accepted candidate is already at the rewrite's fixed point: not rewritten again
        if stats is not None:
            stats.merge(tried[0])
            stats.fired[kind] += 1
    g = graph_rewrite(g, SIMPLIFY, ctx=_Ctx(), stats=stats)
    while (m := _split_once(g, candidate)) is not None:
        g = m
        keep("split-ranges")
    if merge_ranges:
        while (m := _merge_once(g, candidate)) is not None:
            g = m
            keep("merge-ranges")
    return g


def _is_kernel(r: UOp) -> bool:
    return r.op is kernel.DEF


@register_pass("kernel-simplify", summary="simplify index math, gates and loads of every kernel body (value ranges)",
               consumes=("kernel",), produces=("core", "kernel"), options=KernelSimplifyOptions)
def kernel_simplify(root: UOp, options: KernelSimplifyOptions, ctx: PassContext) -> UOp:
    def run(g: UOp) -> UOp:
        return simplify_kernel(g, options.merge_ranges, ctx.stats)
    if root.op is kernel.DEF:
        return run(root)
    return map_regions(root, _is_kernel, run)

