"""Symbolic integers (`sint`): a tensor dimension is an int or an `index` UOp over variables (tensor.var, bound or
not, tensor.bind): `n`, `n*4`, `n + 2`, `10 - n`.

Dimensions are compared by identity (shapes are tuples; UOps are hash-consed), so every dimension is kept in one
canonical form: a sum of terms, each an integer coefficient times a product of atoms (variables, bindings, and
opaque pieces such as `x // 3` whose operand is not divisible), terms in a fixed order, the constant last.
`canon(n + 2)`, `canon(2 + n)` and `canon((n + 4) - 2)` are the same UOp; `canon((n + 2) - n)` is the int 2. The
arithmetic here (`sadd`, `ssub`, `smul`, `sprod`) always returns canonical values, ints when nothing symbolic is
left. Value bounds come from the value-range hook (a variable spans its [min, max]; a binding too: its value is not
part of its shape, so a shape holds for every value).

Graph helpers for the runtime and the schedule cache: `var_vals(root)` gives the value each bound variable has
(by name), `unbind(root)` the graph with every binding replaced by its variable (so two programs that differ only in
bound values are the same graph); UOp.unbind_all does both at once, as in tinygrad.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Union

from uopir.ir.dtype import dtypes
from uopir.ir.roles import role_op
from uopir.ir.uop import UOp
from uopir.ir.valuerange import value_range

__all__ = ["sint", "is_sym", "canon", "sadd", "ssub", "smul", "sprod", "sfloordiv", "seq", "smin", "smax",
           "sym_infer", "render", "var_vals", "unbind", "variables_of", "has_symbols"]

sint = Union[int, UOp]  # noqa: UP007 - a runtime alias (used in isinstance-free annotations and docs)

_Poly = dict[tuple[UOp, ...], int]  # sorted atoms (with repetition) -> coefficient; () is the constant term
_IDX = dtypes.index


def is_sym(x: object) -> bool:
    """Is x a symbolic dimension (an index UOp) rather than an int?"""
    return isinstance(x, UOp)


def has_symbols(dims: Iterable[object]) -> bool:
    return any(isinstance(d, UOp) for d in dims)


# ---- canonical form --------------------------------------------------------------------------------------------------
# weak keys: a memo must not keep a node alive (bound values make new nodes on every call of a loop: a strong table
# grew the hash-cons table by two nodes per value)
_KEYS: weakref.WeakKeyDictionary[UOp, str] = weakref.WeakKeyDictionary()


def _key(u: UOp) -> str:
    """A structural sort key (stable across runs, unlike ids): the op, its arg and its operands' keys."""
    k = _KEYS.get(u)
    if k is not None:
        return k
    for x in u.toposort():
        if x not in _KEYS:
            if len(_KEYS) > 100_000:
                _KEYS.clear()
            _KEYS[x] = f"{x.op.name}{x.arg!r}(" + ",".join(_KEYS[s] for s in x.src) + ")"
    return _KEYS[u]


def _const(v: int) -> UOp:
    return UOp.const(_IDX, v)


def _pmul(a: _Poly, b: _Poly) -> _Poly:
    out: _Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb, key=_key))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def _padd(a: _Poly, b: _Poly, sign: int = 1) -> _Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _to_uop(p: _Poly) -> int | UOp:
    """The canonical UOp of a polynomial (an int when it is constant)."""
    mul, add = role_op("mul"), role_op("add")
    terms = sorted((m for m in p if m), key=lambda m: (len(m), [_key(a) for a in m]))
    out: UOp | None = None
    for m in terms:
        t = m[0]
        for a in m[1:]:
            t = UOp(mul, _IDX, (t, a))
        if p[m] != 1:
            t = UOp(mul, _IDX, (t, _const(p[m])))
        out = t if out is None else UOp(add, _IDX, (out, t))
    c = p.get((), 0)
    if out is None:
        return c
    return UOp(add, _IDX, (out, _const(c))) if c else out


def _poly(x: int | UOp) -> _Poly:
    """x as a polynomial over atoms, iteratively (sources first)."""
    if not isinstance(x, UOp):
        return {(): int(x)} if x else {}
    ops = {role_op(k): k for k in ("const", "add", "sub", "mul", "neg", "idiv", "mod", "max")}
    memo: dict[UOp, _Poly] = {}
    for u in x.toposort():
        kind = ops.get(u.op)
        if kind == "const" and type(u.arg) is int:
            memo[u] = {(): u.arg} if u.arg else {}
        elif kind == "add":
            memo[u] = _padd(memo[u.src[0]], memo[u.src[1]])
        elif kind == "sub":
            memo[u] = _padd(memo[u.src[0]], memo[u.src[1]], -1)
        elif kind == "neg":
            memo[u] = {m: -c for m, c in memo[u.src[0]].items()}
        elif kind == "mul":
            memo[u] = _pmul(memo[u.src[0]], memo[u.src[1]])
        elif kind in ("idiv", "mod") and set(memo[u.src[1]]) <= {()} and memo[u.src[1]].get((), 0) > 0:
            k, p = memo[u.src[1]][()], memo[u.src[0]]
            if all(c % k == 0 for c in p.values()):  # exact: every term (and so the sum) is a multiple of k
                memo[u] = {m: c // k for m, c in p.items()} if kind == "idiv" else {}
            else:
                inner = _to_uop(p)
                inner = _const(inner) if isinstance(inner, int) else inner
                memo[u] = {(UOp(u.op, _IDX, (inner, _const(k))),): 1}
        elif kind in ("idiv", "mod", "max"):  # by a non-constant, or a max: one atom over canonical operands
            srcs = tuple(_to_uop(memo[s]) for s in u.src)
            memo[u] = {(u.replace(src=tuple(_const(s) if isinstance(s, int) else s for s in srcs)),): 1}
        else:  # a variable, a binding, or anything else: an atom
            memo[u] = {(u,): 1}
    return memo[x]


def canon(x: int | UOp) -> int | UOp:
    """The canonical form of a dimension: an int when it is constant, else the one UOp of its value."""
    if not isinstance(x, UOp):
        return int(x)
    return _to_uop(_poly(x))


def sadd(*xs: int | UOp) -> int | UOp:
    p: _Poly = {}
    for x in xs:
        p = _padd(p, _poly(x))
    return _to_uop(p)


def ssub(a: int | UOp, b: int | UOp) -> int | UOp:
    return _to_uop(_padd(_poly(a), _poly(b), -1))


def smul(a: int | UOp, b: int | UOp) -> int | UOp:
    return _to_uop(_pmul(_poly(a), _poly(b)))


def sprod(xs: Iterable[int | UOp]) -> int | UOp:
    p: _Poly = {(): 1}
    for x in xs:
        p = _pmul(p, _poly(x))
    return _to_uop(p)


def sfloordiv(a: int | UOp, k: int | UOp) -> int | UOp:
    """a // k for a >= 0: exact when k divides every term, else an opaque `core.idiv` atom."""
    if not isinstance(a, UOp) and not isinstance(k, UOp):
        return a // k
    ua = a if isinstance(a, UOp) else _const(a)
    uk = k if isinstance(k, UOp) else _const(k)
    return canon(UOp(role_op("idiv"), _IDX, (ua, uk)))


def seq(a: int | UOp, b: int | UOp) -> bool:
    """Are a and b the same value for every value of their variables (as far as the canonical form shows)?"""
    return not _padd(_poly(a), _poly(b), -1)


def smin(x: int | UOp) -> int:
    """The smallest value x can take (its variables anywhere in their ranges)."""
    return x if not isinstance(x, UOp) else int(value_range(x)[0])


def smax(x: int | UOp) -> int:
    """The largest value x can take."""
    return x if not isinstance(x, UOp) else int(value_range(x)[1])


# ---- values ----------------------------------------------------------------------------------------------------------
def sym_infer(x: int | UOp, var_vals: Mapping[str, int] | None = None) -> int:
    """The value of x: a binding gives its own value, a free variable the one `var_vals` has for its name (else
    ValueError naming it). Integer arithmetic of the index ops (C division, as core.idiv)."""
    if not isinstance(x, UOp):
        return int(x)
    var, kvar, bind = role_op("var"), role_op("kernel_var"), role_op("bind")
    ops = {role_op(k): k for k in ("const", "add", "sub", "mul", "neg", "idiv", "mod", "max")}
    vals: dict[UOp, int] = {}
    for u in x.toposort(gate=lambda u: u.op is not bind):
        if u.op is bind:
            vals[u] = int(u.operands.value.arg)
        elif u.op is var or u.op is kvar:
            name = u.attrs.name
            if var_vals is None or name not in var_vals:
                raise ValueError(f"variable {name!r} has no value (bind it: Variable(...).bind(n))")
            vals[u] = int(var_vals[name])
        else:
            kind = ops.get(u.op)
            s = [vals[v] for v in u.src]
            if kind == "const":
                vals[u] = int(u.arg)
            elif kind == "add":
                vals[u] = s[0] + s[1]
            elif kind == "sub":
                vals[u] = s[0] - s[1]
            elif kind == "mul":
                vals[u] = s[0] * s[1]
            elif kind == "neg":
                vals[u] = -s[0]
            elif kind == "max":
                vals[u] = max(s)
            elif kind in ("idiv", "mod"):
                q = 0 if s[1] == 0 else abs(s[0]) // abs(s[1]) * (1 if (s[0] < 0) == (s[1] < 0) else -1)
                vals[u] = q if kind == "idiv" else (0 if s[1] == 0 else s[0] - q * s[1])
            else:
                raise ValueError(f"{u.op.name} cannot be part of a symbolic dimension")
    return vals[x]


def render(x: int | UOp) -> str:
    """Readable text of a dimension: `n`, `n*4`, `n+2`, `(n+2)//3` (for messages and kernel names)."""
    if not isinstance(x, UOp):
        return str(x)
    var, kvar, bind = role_op("var"), role_op("kernel_var"), role_op("bind")
    sym = {role_op("add"): ("+", 1), role_op("sub"): ("-", 1), role_op("mul"): ("*", 2), role_op("idiv"): ("//", 2),
           role_op("mod"): ("%", 2)}
    txt: dict[UOp, str] = {}
    prec: dict[UOp, int] = {}
    for u in x.toposort(gate=lambda u: u.op is not bind):
        prec[u] = 3
        if u.op in (var, kvar, bind):
            txt[u] = (u.operands.var if u.op is bind else u).attrs.name
        elif u.op is role_op("const"):
            txt[u] = str(u.arg)
        elif u.op is role_op("mul") and len(u.src) == 2 and u.src[1].op is role_op("const") and \
                type(u.src[1].arg) is int and u.src[1].arg < 0:  # a negative term: -x, -x*3
            a, c = u.src[0], -u.src[1].arg
            ta = txt[a] if prec[a] >= 2 else f"({txt[a]})"
            txt[u], prec[u] = ("-" + ta if c == 1 else f"-{ta}*{c}"), 1
        elif u.op in sym and len(u.src) == 2:
            s, p = sym[u.op]
            a, b = u.src
            ta = txt[a] if prec[a] >= p else f"({txt[a]})"
            tb = txt[b] if prec[b] > p or (prec[b] == p and s in "+*") else f"({txt[b]})"
            txt[u] = f"{ta}-{tb[1:]}" if s == "+" and tb[:1] == "-" else f"{ta}{s}{tb}"
            prec[u] = p
        elif u.op is role_op("neg"):
            txt[u] = f"-{txt[u.src[0]]}" if prec[u.src[0]] == 3 else f"-({txt[u.src[0]]})"
        else:
            txt[u] = u.op.mnemonic + "(" + ", ".join(txt[s] for s in u.src) + ")"
    return txt[x]


# ---- graphs: bound values, unbinding ---------------------------------------------------------------------------------
def variables_of(root: UOp) -> list[UOp]:
    """The tensor.var / kernel.var ops of the graph, sorted by name (UOp.variables)."""
    return root.variables()


def var_vals(root: UOp) -> dict[str, int]:
    """{variable name: bound value} for every tensor.bind in the graph (regions not entered); ValueError when one
    name is bound to two values or names two different variables."""
    bind = role_op("bind")
    out: dict[str, int] = {}
    seen: dict[str, UOp] = {}
    for u in root.toposort():
        if u.op is bind:
            var, v = u.operands.var, int(u.operands.value.arg)
            name = var.attrs.name
            if seen.setdefault(name, var) is not var:
                raise ValueError(f"two different variables are named {name!r}: {seen[name].arg} and {var.arg}")
            if out.setdefault(name, v) != v:
                raise ValueError(f"variable {name!r} is bound to two values: {out[name]} and {v}")
    return out


def unbind(root: UOp) -> UOp:
    """The graph with every tensor.bind replaced by its tensor.var: what two programs that differ only in bound
    values have in common (a schedule cache keys on it; `var_vals(root)` supplies the values at run time)."""
    return root.unbind_all()[0]
