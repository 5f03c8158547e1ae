"""kernel-simplify's integer rules as data: each rule's pattern, replacement and side conditions, written once.

A rule is `rule(name, lhs, rhs, *when)` over a small term language: `V("x")` is any scalar value of the rule's
integer dtype (signed integers and index), `K("c")` a constant of it, and operators build core ops
(`V("x") * K("c") + V("y")`; `//` and `%` are core.idiv and core.mod, `<` core.cmplt, `.eq()` core.cmpeq, `&`
core.and, unary `-` core.neg). In a replacement, a Python number is a constant of the rule's dtype and
`lo_const(t)` is the constant vmin(t). `when` is a conjunction of conditions over *quantities*: `lo(t)` and `hi(t)`
(the value range, from uopir.ir.valuerange, of the node that the lhs subterm t matched), `val(c)` (a constant's
value), `MIN` and `MAX` (the dtype's bounds) and integers, combined with `+ - *` and with `//` and `%` by a
quantity that an earlier condition requires to be positive. Quantities are exact integers (no wraparound):
`fits(q)` says q is a value of the dtype.

Two readers, so the conditions cannot drift apart:
- uopir.passes.kernel.simplify compiles every rule of RULES into a named pattern whose callback evaluates `when` on
  the matched nodes and builds `rhs`;
- unit_tests/test_kernel_simplify_proofs.py proves every rule (RULES and IDENTITIES) with z3: at every signed width
  (8, 16, 32, 64 bits; index is 64), in two's complement with C division (uopir.dialects.semantics), lhs == rhs for
  every value of the variables and constants for which the conditions hold and each matched node lies in its range
  (four remainder rules that z3 does not finish with symbolic constants are proved for every constant of a list per
  width instead: that test's PER_CONSTANT says which).
IDENTITIES are the ring laws (which hold with wraparound) that the pass's `collect-terms` strategy composes when it
flattens a sum; they are proved, not compiled into patterns.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Term", "V", "K", "Lit", "App", "LoConst", "Q", "Cond", "Rule", "rule", "lo", "hi", "val", "fits", "MIN",
           "MAX", "lo_const", "RULES", "IDENTITIES", "RULES_BY_NAME", "subterms", "QEnv"]


# ---- terms: patterns and replacements --------------------------------------------------------------------------------
class Term:
    """A node of a rule's lhs or rhs. Operators build core ops; identity is equality (terms are used as keys)."""

    __slots__ = ()

    def __add__(self, o: Any) -> App:
        return App("add", (self, _term(o)))

    def __radd__(self, o: Any) -> App:
        return App("add", (_term(o), self))

    def __sub__(self, o: Any) -> App:
        return App("sub", (self, _term(o)))

    def __mul__(self, o: Any) -> App:
        return App("mul", (self, _term(o)))

    def __rmul__(self, o: Any) -> App:
        return App("mul", (_term(o), self))

    def __floordiv__(self, o: Any) -> App:
        return App("idiv", (self, _term(o)))

    def __mod__(self, o: Any) -> App:
        return App("mod", (self, _term(o)))

    def __neg__(self) -> App:
        return App("neg", (self,))

    def __lt__(self, o: Any) -> App:  # type: ignore[override]
        return App("lt", (self, _term(o)))

    def __and__(self, o: Any) -> App:
        return App("and", (self, _term(o)))

    def eq(self, o: Any) -> App:
        """core.cmpeq (`==` stays identity: terms are keys)."""
        return App("eq", (self, _term(o)))


@dataclass(frozen=True, eq=False, slots=True)
class V(Term):
    """Any scalar value of the rule's dtype, captured as `name` (a name used twice is one node)."""
    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, slots=True)
class K(Term):
    """A constant of the rule's dtype, captured as `name`."""
    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, slots=True)
class Lit(Term):
    """A literal in a replacement: an int (of the rule's dtype) or a bool."""
    value: int | bool

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, eq=False, slots=True)
class App(Term):
    """A core op (an operator role of uopir.ir.roles: "add", "lt", ...) applied to terms."""
    key: str
    args: tuple[Term, ...]

    def __repr__(self) -> str:
        sym = {"add": "+", "sub": "-", "mul": "*", "idiv": "//", "mod": "%", "lt": "<", "and": "&", "eq": "=="}
        if len(self.args) == 2 and self.key in sym:
            return f"({self.args[0]!r} {sym[self.key]} {self.args[1]!r})"
        return f"{self.key}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True, eq=False, slots=True)
class LoConst(Term):
    """In a replacement: the constant vmin of the node that an lhs subterm matched."""
    of: Term

    def __repr__(self) -> str:
        return f"lo_const({self.of!r})"


def lo_const(t: Term) -> LoConst:
    return LoConst(t)


def _term(o: Any) -> Term:
    if isinstance(o, Term):
        return o
    if type(o) in (int, bool):
        return Lit(o)
    raise TypeError(f"a rule term must be a Term or an int, got {type(o).__name__}")


def subterms(t: Term) -> Iterator[Term]:
    """Every subterm of t, t first, each once (terms are shallow: plain recursion is fine here)."""
    seen: set[int] = set()
    stack = [t]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        if isinstance(x, App):
            stack.extend(reversed(x.args))
        elif isinstance(x, LoConst):
            stack.append(x.of)


# ---- quantities and conditions ---------------------------------------------------------------------------------------
class QEnv:
    """What evaluating a quantity needs; the pass answers with Python ints, the proof with z3 integer terms."""

    def lo(self, t: Term) -> Any: ...
    def hi(self, t: Term) -> Any: ...
    def val(self, t: Term) -> Any: ...
    def num(self, n: int) -> Any: ...
    def floordiv(self, a: Any, b: Any) -> Any: ...
    def mod(self, a: Any, b: Any) -> Any: ...

    MIN: Any
    MAX: Any


class Q:
    """A quantity: an exact integer computed from ranges and constant values of a match."""

    __slots__ = ("kind", "args")
    __hash__ = object.__hash__

    def __init__(self, kind: str, *args: Any):
        self.kind, self.args = kind, args

    def __add__(self, o: Any) -> Q:
        return Q("+", self, _q(o))

    def __radd__(self, o: Any) -> Q:
        return Q("+", _q(o), self)

    def __sub__(self, o: Any) -> Q:
        return Q("-", self, _q(o))

    def __rsub__(self, o: Any) -> Q:
        return Q("-", _q(o), self)

    def __mul__(self, o: Any) -> Q:
        return Q("*", self, _q(o))

    def __rmul__(self, o: Any) -> Q:
        return Q("*", _q(o), self)

    def __floordiv__(self, o: Any) -> Q:
        return Q("//", self, _q(o))

    def __mod__(self, o: Any) -> Q:
        return Q("%", self, _q(o))

    def __lt__(self, o: Any) -> Cond:
        return Cond("<", self, _q(o))

    def __le__(self, o: Any) -> Cond:
        return Cond("<=", self, _q(o))

    def __gt__(self, o: Any) -> Cond:
        return Cond("<", _q(o), self)

    def __ge__(self, o: Any) -> Cond:
        return Cond("<=", _q(o), self)

    def __eq__(self, o: Any) -> Cond:  # type: ignore[override]
        return Cond("==", self, _q(o))

    def __ne__(self, o: Any) -> Cond:  # type: ignore[override]
        return Cond("!=", self, _q(o))

    def eval(self, env: QEnv) -> Any:
        k, a = self.kind, self.args
        if k == "num":
            return env.num(a[0])
        if k == "lo":
            return env.lo(a[0])
        if k == "hi":
            return env.hi(a[0])
        if k == "val":
            return env.val(a[0])
        if k == "MIN":
            return env.MIN
        if k == "MAX":
            return env.MAX
        x, y = a[0].eval(env), a[1].eval(env)
        if k == "+":
            return x + y
        if k == "-":
            return x - y
        if k == "*":
            return x * y
        if k == "//":
            return env.floordiv(x, y)
        return env.mod(x, y)

    def __repr__(self) -> str:
        k, a = self.kind, self.args
        if k == "num":
            return str(a[0])
        if k in ("lo", "hi", "val"):
            return f"{k}({a[0]!r})"
        if k in ("MIN", "MAX"):
            return k
        return f"({a[0]!r} {k} {a[1]!r})"


def _q(o: Any) -> Q:
    if isinstance(o, Q):
        return o
    if type(o) is int:
        return Q("num", o)
    raise TypeError(f"a quantity must be a Q or an int, got {type(o).__name__} (write val(c) for a constant)")


@dataclass(frozen=True, eq=False)
class Cond:
    """One side condition: a comparison of two quantities."""
    op: str
    a: Q
    b: Q

    def eval(self, env: QEnv) -> Any:
        x, y = self.a.eval(env), self.b.eval(env)
        if self.op == "<":
            return x < y
        if self.op == "<=":
            return x <= y
        if self.op == "==":
            return x == y
        return x != y

    def __repr__(self) -> str:
        return f"{self.a!r} {self.op} {self.b!r}"


def lo(t: Term) -> Q:
    """The smallest value of the node t matched."""
    return Q("lo", t)


def hi(t: Term) -> Q:
    """The largest value of the node t matched."""
    return Q("hi", t)


def val(c: Term) -> Q:
    """The value of a matched constant (a K)."""
    if not isinstance(c, K):
        raise TypeError(f"val() takes a constant K, got {c!r}")
    return Q("val", c)


MIN, MAX = Q("MIN"), Q("MAX")


def fits(q: Q) -> tuple[Cond, Cond]:
    """q is a value of the dtype (two conditions)."""
    return (MIN <= q, q <= MAX)


# ---- rules -----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Rule:
    """lhs -> rhs when every condition holds. `scope` is the dtypes it applies to: "int" (signed integers and index,
    scalars) or "int+bool" (also bool); `where` is the row's "file:line" (shown in --pass-statistics)."""

    name: str
    lhs: Term
    rhs: Term
    when: tuple[Cond, ...]
    scope: str
    where: str

    def holds(self, env: QEnv, all_of: Callable[[list[Any]], Any] = all) -> Any:
        return all_of([c.eval(env) for c in self.when])

    def __repr__(self) -> str:
        cond = f" when {', '.join(map(repr, self.when))}" if self.when else ""
        return f"{self.name}: {self.lhs!r} -> {self.rhs!r}{cond}"


def rule(name: str, lhs: Term, rhs: Term | int | bool, *when: Cond | tuple[Cond, ...], scope: str = "int") -> Rule:
    conds: list[Cond] = []
    for c in when:
        conds.extend(c if isinstance(c, tuple) else (c,))
    f = sys._getframe(1)
    where = f"{__name__.replace('.', '/')}.py:{f.f_lineno}"
    return Rule(name, lhs, _term(rhs), tuple(conds), scope, where)


X, Y, Z = V("x"), V("y"), V("z")
C, C1, C2 = K("c"), K("c1"), K("c2")

# The rules the pass compiles into patterns, in the order they are tried.
RULES: list[Rule] = [
    # a value whose range is one point is that constant (a gate always true or false; x // 8 with 0 <= x < 8)
    rule("range-const", X, lo_const(X), lo(X) == hi(X), scope="int+bool"),
    # division and remainder by a constant, when the ranges allow
    rule("mod-small", X % C, X, lo(X) >= 0, hi(X) < val(C)),
    # x % c is x minus a constant when x stays within one multiple of c (then x // c folds by range-const)
    rule("mod-as-offset", X % C, X - (X // C) * C, val(C) > 0, lo(X) >= 0, lo(X) // val(C) == hi(X) // val(C)),
    rule("mod-of-multiple", (X * C1) % C2, 0, val(C2) > 0, val(C1) % val(C2) == 0, fits(lo(X) * val(C1)),
         fits(hi(X) * val(C1))),
    rule("div-of-multiple", (X * C1) // C2, X * (C1 // C2), val(C2) > 0, val(C1) % val(C2) == 0,
         fits(lo(X) * val(C1)), fits(hi(X) * val(C1))),
    rule("div-peel", (X * C1 + Y) // C2, X * (C1 // C2) + Y // C2, val(C2) > 0, val(C1) % val(C2) == 0,
         lo(Y) >= 0, lo(X * C1 + Y) >= 0, fits(lo(X) * val(C1)), fits(hi(X) * val(C1))),
    rule("mod-peel", (X * C1 + Y) % C2, Y % C2, val(C2) > 0, val(C1) % val(C2) == 0, lo(Y) >= 0,
         lo(X * C1 + Y) >= 0, fits(lo(X) * val(C1)), fits(hi(X) * val(C1))),
    # a coefficient at least the divisor leaves only its remainder: (y*59 + x) % 58 -> (y + x) % 58, which mod-small
    # then drops when y + x < 58 (a sliding window over a padded row: patches read (ky*(w+1) + x) % w)
    rule("mod-reduce-coef", (X * C1 + Y) % C2, (X * (C1 % C2) + Y) % C2, val(C2) > 0, val(C1) > 0,
         val(C1) % val(C2) != val(C1), lo(X) >= 0, lo(Y) >= 0, fits(hi(X) * val(C1) + hi(Y))),
    rule("div-div", (X // C1) // C2, X // (C1 * C2), val(C1) > 0, val(C2) > 0, val(C1) * val(C2) <= MAX),
    rule("mod-mod", (X % C1) % C2, X % C2, val(C1) > 0, val(C2) > 0, val(C1) % val(C2) == 0),
    rule("div-mod-recombine", (X // C) * C1 + (X % C) * C2, X * C2, val(C) != 0, val(C1) == val(C) * val(C2)),
    # comparisons (validity gates): constants to one side, conjunctions of bounds merged
    rule("lt-add-const", (X + C1) < C2, X < (C2 - C1), fits(lo(X) + val(C1)), fits(hi(X) + val(C1)),
         fits(val(C2) - val(C1))),
    rule("const-lt-add", C1 < (X + C2), (C1 - C2) < X, fits(lo(X) + val(C2)), fits(hi(X) + val(C2)),
         fits(val(C1) - val(C2))),
    rule("lt-and-lt", (X < C1) & (X < C2), X < C1, val(C1) <= val(C2)),
    rule("gt-and-gt", (C1 < X) & (C2 < X), C2 < X, val(C1) <= val(C2)),
    rule("empty-interval", (C1 < X) & (X < C2), False, val(C2) <= val(C1) + 1),
    rule("one-point-interval", (C1 < X) & (X < C2), X.eq(C1 + 1), val(C2) == val(C1) + 2),
]

# The ring laws `collect-terms` composes (each holds with wraparound, so it has no condition): it reads a sum as
# terms with constant coefficients (through add, sub, neg and multiplication by a constant), adds the coefficients
# of equal terms, and rebuilds the sum in first-occurrence order with the constant last.
IDENTITIES: list[Rule] = [
    rule("add-assoc", (X + Y) + Z, X + (Y + Z)),
    rule("add-comm", X + Y, Y + X),
    rule("like-terms", X * C1 + X * C2, X * (C1 + C2)),
    rule("like-term-once", X + X * C, X * (C + 1)),
    rule("distribute", (X + Y) * C, X * C + Y * C),
    rule("mul-const-assoc", (X * C1) * C2, X * (C1 * C2)),
    rule("sub-as-add", X - Y, X + Y * -1),
    rule("neg-as-mul", -X, X * -1),
    rule("mul-one", X * 1, X),
    rule("mul-zero", X * 0, 0),
    rule("add-zero", X + 0, X),
]

RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES + IDENTITIES}
assert len(RULES_BY_NAME) == len(RULES) + len(IDENTITIES), "rule names must be unique"
