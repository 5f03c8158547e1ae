"""Proofs of kernel-simplify's integer rules with the z3 SMT solver.

Every rule of uopir.passes.kernel.simplify_rules (RULES, which the pass compiles into patterns, and IDENTITIES, the
ring laws its collect-terms strategy composes) is proved from the same table the pass reads: at every signed width
(8, 16, 32 and 64 bits; index is 64), for all values of its variables and constants, lhs == rhs whenever the rule's
conditions hold and every node the pattern matched lies in the range the value-range hook may give it (bounds that
are themselves free: any sound range analysis). The machine model is two's complement arithmetic written over z3's
mathematical integers: a w-bit value is an integer in [-2**(w-1), 2**(w-1)), each op computes exactly and wraps
modulo 2**w; idiv and mod truncate toward zero and give 0 for a zero divisor, as uopir.dialects.semantics says
(test_the_model_is_the_semantics checks the model against that module on random and edge values). Bools are 0 / 1.
"""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import z3  # the `test` extra installs z3-solver: a missing solver fails here, it does not skip the proofs

from uopir.dialects.semantics import alu, const_array, to_python
from uopir.ir.dtype import DType, dtypes
from uopir.passes.kernel.simplify_rules import (
    IDENTITIES,
    RULES,
    RULES_BY_NAME,
    App,
    K,
    Lit,
    LoConst,
    QEnv,
    Rule,
    Term,
    V,
    subterms,
)

WIDTHS = {8: dtypes.int8, 16: dtypes.int16, 32: dtypes.int32, 64: dtypes.index}
TIMEOUT_MS = 8_000  # per solver call; the proofs take well under a second to a few seconds each
ATTEMPTS = 4  # solver calls (random seeds) per model before a proof counts as not found


# ---- the machine model: two exact encodings ---------------------------------------------------------------------
class IntModel:
    """w-bit two's complement over z3's mathematical integers: each op computes exactly and wraps modulo 2**w.
    Truncating division is written with its quotient and remainder as fresh variables and the facts that define them
    (a == q*b + r, |r| < |b|, r has the sign of a), which z3's nonlinear arithmetic handles far better than its own
    division; the facts go to `facts`."""

    kind = "int"

    def __init__(self, w: int):
        self.w, self.MIN, self.MAX, self.M = w, -(1 << (w - 1)), (1 << (w - 1)) - 1, 1 << w
        self.facts: list = []
        self.n = 0
        self.ctx = z3.Context()  # one context per proof: the solver's search does not depend on earlier proofs

    def fresh(self, what: str):
        self.n += 1
        return z3.Int(f"{what}{self.n}", self.ctx)

    def var(self, name: str, lo: int, hi: int):
        x = z3.Int(name, self.ctx)
        self.facts += [lo <= x, x <= hi]
        return x

    def lit(self, v: int):
        return z3.IntVal(v, self.ctx)

    def wrap(self, v):
        return z3.If(z3.And(v >= self.MIN, v <= self.MAX), v, ((v - self.MIN) % self.M) + self.MIN)

    def _qr(self, a, b):
        q, r = self.fresh("q"), self.fresh("r")
        self.facts.append(z3.If(b == 0, z3.And(q == 0, r == 0), z3.And(
            a == q * b + r, z3.If(b > 0, z3.And(-b < r, r < b), z3.And(b < r, r < -b)),
            z3.Implies(a > 0, r >= 0), z3.Implies(a < 0, r <= 0))))
        return q, r

    def op(self, key: str, a, b=None):
        if key == "add":
            return self.wrap(a + b)
        if key == "sub":
            return self.wrap(a - b)
        if key == "mul":
            return self.wrap(a * b)
        if key == "neg":
            return self.wrap(-a)
        if key == "idiv":
            return self.wrap(self._qr(a, b)[0])
        if key == "mod":
            return self._qr(a, b)[1]
        if key == "lt":
            return z3.If(a < b, 1, 0)
        if key == "eq":
            return z3.If(a == b, 1, 0)
        if key == "and":  # on bools (0 / 1)
            return z3.If(z3.And(a == 1, b == 1), 1, 0)
        raise KeyError(key)

    # quantities: exact integers
    def quantity(self, v):
        return v

    def num(self, n: int):
        return z3.IntVal(n, self.ctx)

    def floordiv(self, a, b):  # by a positive quantity (the conditions require it before)
        q, r = self.fresh("fq"), self.fresh("fr")
        self.facts.append(z3.Implies(b > 0, z3.And(a == q * b + r, 0 <= r, r < b)))
        return q

    def mod(self, a, b):
        q, r = self.fresh("fq"), self.fresh("fr")
        self.facts.append(z3.Implies(b > 0, z3.And(a == q * b + r, 0 <= r, r < b)))
        return r


class BVModel:
    """w-bit two's complement as z3 bit-vectors (native wraparound; C division is bvsdiv/bvsrem, with the zero
    divisor guarded). Quantities are computed sign-extended to 2w+8 bits, where the conditions' sums and products of
    two w-bit values are exact."""

    kind = "bv"

    def __init__(self, w: int):
        self.w, self.W = w, 2 * w + 8
        self.MIN, self.MAX = -(1 << (w - 1)), (1 << (w - 1)) - 1
        self.facts: list = []
        self.ctx = z3.Context()

    def var(self, name: str, lo: int, hi: int):
        x = z3.BitVec(name, self.w, self.ctx)
        self.facts += [self.lit(lo) <= x, x <= self.lit(hi)]
        return x

    def lit(self, v: int):
        return z3.BitVecVal(v, self.w, self.ctx)

    def op(self, key: str, a, b=None):
        zero, one = self.lit(0), self.lit(1)
        if key == "add":
            return a + b
        if key == "sub":
            return a - b
        if key == "mul":
            return a * b
        if key == "neg":
            return -a
        if key == "idiv":
            return z3.If(b == 0, zero, a / b)  # z3's / on bit-vectors is signed, truncating
        if key == "mod":
            return z3.If(b == 0, zero, z3.SRem(a, b))
        if key == "lt":
            return z3.If(a < b, one, zero)
        if key == "eq":
            return z3.If(a == b, one, zero)
        if key == "and":
            return z3.If(z3.And(a == one, b == one), one, zero)
        raise KeyError(key)

    def quantity(self, v):
        return z3.SignExt(self.W - self.w, v)

    def num(self, n: int):
        return z3.BitVecVal(n, self.W, self.ctx)

    def floordiv(self, a, b):  # positive divisor: signed division of a >= 0 ... or floor for a < 0
        q = a / b
        return z3.If(z3.And(z3.SRem(a, b) != 0, a < 0), q - 1, q)

    def mod(self, a, b):
        return a % b  # z3: the remainder with the sign of the divisor (the floor remainder, as in Python)


_BOOL_KEYS = ("lt", "eq")


def _constant_valued(t: Term) -> bool:
    return all(isinstance(x, (K, Lit, App)) for x in subterms(t))


def _is_bool(t: Term, bool_vars: set[str]) -> bool:
    if isinstance(t, V):
        return t.name in bool_vars
    if isinstance(t, Lit):
        return type(t.value) is bool
    if isinstance(t, App):
        return t.key in _BOOL_KEYS or (t.key == "and" and _is_bool(t.args[0], bool_vars))
    return False


class _Proof(QEnv):
    """One rule at one width in one model: the match's variables, the range facts, and the quantity environment."""

    def __init__(self, r: Rule, m: IntModel | BVModel, bool_vars: set[str]):
        self.m, self.bool_vars = m, bool_vars
        self.MIN, self.MAX = m.num(m.MIN), m.num(m.MAX)
        self.leaf: dict[str, object] = {}
        self.value: dict[str, object] = {}
        self.bounds: dict[str, tuple] = {}
        for i, s in enumerate(subterms(r.lhs)):
            v = self.eval(s)
            if isinstance(s, (K, Lit)):
                self.bounds[repr(s)] = (m.quantity(v),) * 2
                continue
            dom = (0, 1) if _is_bool(s, bool_vars) else (m.MIN, m.MAX)
            lo_, hi_ = m.var(f"lo{i}", *dom), m.var(f"hi{i}", *dom)
            m.facts += [lo_ <= v, v <= hi_]
            self.bounds[repr(s)] = (m.quantity(lo_), m.quantity(hi_))
            self.value[f"lo {s!r}"] = lo_
        if m.kind == "int":
            self._product_lemmas(r)

    def _product_lemmas(self, r: Rule) -> None:
        """For x * k with x a matched node in [lo, hi] and k constant-valued: x * k lies between lo * k and hi * k.
        A consequence of the facts (monotone multiplication), stated so the solver need not search for it."""
        seen: set[str] = set()
        for t in (*subterms(r.lhs), *subterms(r.rhs)):
            if not (isinstance(t, App) and t.key == "mul") or repr(t) in seen:
                continue
            seen.add(repr(t))
            x, k = t.args
            if repr(x) not in self.bounds or isinstance(x, (K, Lit)) or not _constant_valued(k):
                continue
            xv, kv = self.eval(x), self.eval(k)
            lo_, hi_ = self.bounds[repr(x)]
            self.m.facts.append(z3.And(z3.Implies(kv >= 0, z3.And(lo_ * kv <= xv * kv, xv * kv <= hi_ * kv)),
                                       z3.Implies(kv <= 0, z3.And(hi_ * kv <= xv * kv, xv * kv <= lo_ * kv))))

    def eval(self, t: Term):
        key = repr(t)
        if key in self.value:
            return self.value[key]
        m = self.m
        if isinstance(t, (V, K)):
            if t.name not in self.leaf:
                dom = (0, 1) if t.name in self.bool_vars else (m.MIN, m.MAX)
                self.leaf[t.name] = m.var(t.name, *dom)
            v = self.leaf[t.name]
        elif isinstance(t, Lit):
            v = m.lit(int(t.value))
        elif isinstance(t, LoConst):
            v = self.value[f"lo {t.of!r}"]
        else:
            assert isinstance(t, App)
            v = m.op(t.key, *(self.eval(a) for a in t.args))
        self.value[key] = v
        return v

    def lo(self, t: Term):
        return self.bounds[repr(t)][0]

    def hi(self, t: Term):
        return self.bounds[repr(t)][1]

    def val(self, t: Term):
        return self.m.quantity(self.leaf[t.name])

    def num(self, n: int):
        return self.m.num(n)

    def floordiv(self, a, b):
        return self.m.floordiv(a, b)

    def mod(self, a, b):
        return self.m.mod(a, b)


def prove_in(model: IntModel | BVModel, r: Rule, bool_vars: frozenset[str] = frozenset(),
             timeout_ms: int = TIMEOUT_MS) -> tuple[str, object]:
    """('proved', None), ('counterexample', model) or ('unknown', reason)."""
    p = _Proof(r, model, set(bool_vars))
    lhs, rhs = p.eval(r.lhs), p.eval(r.rhs)
    cond = r.holds(p, lambda cs: z3.And(*cs) if cs else z3.BoolVal(True, model.ctx))
    why = ""
    for seed in range(ATTEMPTS):  # nonlinear search times vary a lot with the seed: a few short tries beat one long
        s = z3.Solver(ctx=model.ctx)
        s.set("timeout", timeout_ms)
        s.set("random_seed", seed)
        s.add(*model.facts, cond, lhs != rhs)
        res = s.check()
        if res == z3.unsat:
            return "proved", None
        if res == z3.sat:
            return "counterexample", s.model()
        why = s.reason_unknown()
    return "unknown", why


def prove(r: Rule, w: int, bool_vars: frozenset[str] = frozenset()) -> tuple[str, object]:
    """Proved when either exact model proves it (bit-vectors first when the rule has no condition: ring laws are
    the bit-vector rewriter's strength; integers first otherwise: range conditions are arithmetic)."""
    order = (BVModel, IntModel) if not r.when else (IntModel, BVModel)
    verdicts = []
    for M in order:
        v = prove_in(M(w), r, bool_vars)
        if v[0] in ("proved", "counterexample"):
            return v
        verdicts.append(f"{M.kind}: {v[1]}")
    return "unknown", "; ".join(verdicts)


# Rules whose symbolic proof z3's nonlinear arithmetic does not finish (a remainder of a sum whose divisor and
# coefficients are all unknown): they are proved per constant instead. For every combination of constant values
# from CONSTANTS(w) that the rule's constant-only conditions accept, z3 proves lhs == rhs for all values of the
# variables and all ranges, at the width: linear arithmetic, exhaustive over the constants listed. mod-reduce-coef's
# symbolic proof times out in both models at every width (~25 s of solver time per width before its per-constant
# fallback, which then takes 2-4 s): it goes per constant directly.
PER_CONSTANT = {"mod-peel", "mod-mod", "div-mod-recombine", "mod-as-offset", "mod-reduce-coef"}


def constants(w: int, n: int = 1) -> list[int]:
    """The constant values a per-constant proof covers at width w, for a rule of n constants (shorter for 3+)."""
    lo_, hi_ = -(1 << (w - 1)), (1 << (w - 1)) - 1
    if n >= 3:
        vals = set(range(-4, 9)) | {12, 16, 100, -16, 1 << (w // 2), lo_, lo_ + 1, hi_}
    else:
        vals = set(range(-8, 17)) | {24, 32, 64, 100, -16, -32, 1 << (w // 2), lo_, lo_ + 1, hi_ - 1, hi_}
    return sorted(v for v in vals if lo_ <= v <= hi_)


class _NotConstant(Exception):
    pass


class _ConstEnv(QEnv):
    """Evaluates the conditions that speak only of constants (the filter of the per-constant proof)."""

    def __init__(self, vals: dict[str, int], w: int):
        self.vals, self.MIN, self.MAX = vals, -(1 << (w - 1)), (1 << (w - 1)) - 1

    def lo(self, t: Term):
        raise _NotConstant

    hi = lo

    def val(self, t: Term) -> int:
        return self.vals[t.name]

    def num(self, n: int) -> int:
        return n

    def floordiv(self, a: int, b: int) -> int:
        if b <= 0:
            raise _NotConstant
        return a // b

    def mod(self, a: int, b: int) -> int:
        if b <= 0:
            raise _NotConstant
        return a % b


def _constant_conditions_hold(r: Rule, vals: dict[str, int], w: int) -> bool:
    env = _ConstEnv(vals, w)
    for c in r.when:
        try:
            if not c.eval(env):
                return False
        except _NotConstant:
            continue
    return True


def prove_per_constant(r: Rule, w: int) -> tuple[int, list[dict[str, int]]]:
    """(combinations proved, combinations not proved) over constants(w). The goal (facts, conditions, lhs != rhs) is
    built once with the constants as free variables, then each combination substitutes its values and is checked in
    a fresh solver of the one context: with the constants literal, the products are linear. Building the goal and a
    context per combination cost more than the proofs (about half of the test's time)."""
    names = sorted({t.name for t in subterms(r.lhs) if isinstance(t, K)})
    m = IntModel(w)
    p = _Proof(r, m, set())
    lhs, rhs = p.eval(r.lhs), p.eval(r.rhs)
    goal = z3.And(*m.facts, r.holds(p, lambda cs: z3.And(*cs) if cs else z3.BoolVal(True, m.ctx)), lhs != rhs)
    proved, failed = 0, []
    for combo in itertools.product(constants(w, len(names)), repeat=len(names)):
        vals = dict(zip(names, combo, strict=True))
        if not _constant_conditions_hold(r, vals, w):
            continue
        s = z3.Solver(ctx=m.ctx)
        s.set("timeout", TIMEOUT_MS)
        s.add(z3.substitute(goal, *((p.leaf[n], m.lit(v)) for n, v in vals.items())))
        if s.check() == z3.unsat:
            proved += 1
        else:
            failed.append(vals)
    return proved, failed


def _cases() -> list[tuple[Rule, int, frozenset[str]]]:
    out = []
    for r in RULES + IDENTITIES:
        if r.name in PER_CONSTANT:
            continue
        for w in WIDTHS:
            out.append((r, w, frozenset()))
        if r.scope == "int+bool":
            out.append((r, 8, frozenset({v.name for v in subterms(r.lhs) if isinstance(v, V)})))
    return out


@pytest.mark.parametrize("r,w,bools", _cases(),
                         ids=[f"{r.name}-{'bool' if b else f'i{w}'}" for r, w, b in _cases()])
def test_rule_is_proved(r: Rule, w: int, bools: frozenset[str]) -> None:
    verdict, detail = prove(r, w, bools)
    if verdict == "unknown" and not bools:  # the solver gave up (a slow machine): fall back to every constant
        proved, failed = prove_per_constant(r, w)
        assert not failed and proved, f"{r!r} at {w} bits: no symbolic proof ({detail}), and per constant: {failed}"
        return
    assert verdict == "proved", f"{r!r} at {w} bits: {verdict}: {detail}"


@pytest.mark.parametrize("name", sorted(PER_CONSTANT))
@pytest.mark.parametrize("w", list(WIDTHS))
def test_rule_is_proved_per_constant(name: str, w: int) -> None:
    r = RULES_BY_NAME[name]
    proved, failed = prove_per_constant(r, w)
    assert not failed, f"{r!r} at {w} bits: not proved for constants {failed[:5]}"
    assert proved >= 8, f"{r!r}: only {proved} constant combinations pass its conditions (the filter is wrong)"


def test_every_rule_is_proved_one_way() -> None:
    names = {r.name for r in RULES + IDENTITIES}
    assert PER_CONSTANT <= names
    assert {r.name for r, _, _ in _cases()} | PER_CONSTANT == names


def test_a_wrong_rule_gets_a_counterexample() -> None:
    """The harness can fail: dropping a condition the rule needs gives a counterexample in both models."""
    r = RULES_BY_NAME["mod-small"]  # without hi(x) < c: x % c is not x for x = c
    weak = Rule(r.name, r.lhs, r.rhs, r.when[:1], r.scope, r.where)
    d = RULES_BY_NAME["div-peel"]  # without "x * c1 does not wrap": 16 * 16 wraps to 0 in i8
    weak_peel = Rule(d.name, d.lhs, d.rhs, d.when[:4], d.scope, d.where)
    for M in (IntModel, BVModel):
        assert prove_in(M(8), weak)[0] == "counterexample"
        assert prove_in(M(8), weak_peel)[0] == "counterexample"


# ---- the model is the semantics module ---------------------------------------------------------------------------
def _concrete(m: IntModel | BVModel, key: str, pairs: list[tuple[int, int]]) -> list[int]:
    """The model's value of `a key b` for each pair: one solver call for all of them (each pair its own variables
    and facts, which fix its result; a context and a solver call per pair cost ~20x more)."""
    outs, eqs = [], []
    for i, (a, b) in enumerate(pairs):
        x, y = m.var(f"a{i}", a, a), m.var(f"b{i}", b, b)
        out = z3.Int(f"out{i}", m.ctx) if m.kind == "int" else z3.BitVec(f"out{i}", m.w, m.ctx)
        eqs += [x == m.lit(a), y == m.lit(b), out == m.op(key, x, y)]  # op may add the facts that define it
        outs.append(out)
    s = z3.Solver(ctx=m.ctx)
    s.add(*m.facts, *eqs)
    assert s.check() == z3.sat
    model = s.model()
    return [model[o].as_long() if m.kind == "int" else model[o].as_signed_long() for o in outs]


def _semantics(d: DType, key: str, a: int, b: int) -> int:
    name = {"lt": "core.cmplt", "eq": "core.cmpeq"}.get(key, f"core.{key}")
    srcs = [const_array(d, a)] if key == "neg" else [const_array(d, a), const_array(d, b)]
    out = dtypes.bool if key in ("lt", "eq") else d
    return int(to_python(alu(name, out, srcs, [d] * len(srcs)), out))


@pytest.mark.parametrize("w", list(WIDTHS))  # every width: one solver call per op and model (~0.7 CPU-s a width)
def test_the_model_is_the_semantics(w: int) -> None:
    d = WIDTHS[w]
    lo_, hi_ = -(1 << (w - 1)), (1 << (w - 1)) - 1
    edge = [lo_, lo_ + 1, -7, -1, 0, 1, 3, hi_]
    rnd = random.Random(w)
    vals = edge + [rnd.randint(lo_, hi_) for _ in range(2)]
    pairs = [(a, b) for a in vals for b in vals]
    with np.errstate(all="ignore"):
        for key in ("add", "sub", "mul", "neg", "idiv", "mod", "lt", "eq"):
            want = [_semantics(d, key, a, b) for a, b in pairs]
            for M in (IntModel, BVModel):
                got = _concrete(M(w), key, pairs)
                bad = [(a, b, g, x) for (a, b), g, x in zip(pairs, got, want, strict=True) if g != x]
                assert not bad, (M.kind, key, bad[:5])
