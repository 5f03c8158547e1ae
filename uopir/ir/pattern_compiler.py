"""The matcher compiler: a PatternMatcher turns its (UPat, callback, name) rules into one generated Python function
per op (every rule that can match that op, in list order, as nested `if`s), compiled lazily on first use.

Matching is the hot path of every pass: generated code is several times faster than walking the UPat tree.
`UPat.match` stays the reference; the compiler falls back to it for patterns too large to generate. Each rule
keeps a name (statistics key) and the source line where it was written (`PatternMatcher.sources()`), and a matcher
can be inspected by op (`pm.by_op`, `pm.patterns_for(op)`) as one debugs a rewrite.
"""
from __future__ import annotations

import functools
import inspect
import math
import os
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from uopir.ir import env
from uopir.ir.dtype import DType
from uopir.ir.ops import OpDef, get_op
from uopir.ir.uop import UOp, _argkey
from uopir.ir.upat import _ANY, _IS_COMM, DTypeSpec, UPat, ValueArg, _arg_is_pred

__all__ = ["PatternMatcher", "Rule"]


# ---- compiling patterns into Python ----------------------------------------------------------------------------------
_MAX_DEPTH = 80  # nesting levels of generated code (the tokenizer allows 100)
_MAX_LINES = 4000  # per pattern per op; larger patterns use the interpreter
_DUMP = env.DUMP_PATTERNS.get_at_import()


class _TooBig(Exception):
    pass


class _Gen:
    """Accumulates the source of one generated function and the constants it refers to."""

    def __init__(self, consts: dict[str, Any]):
        self.lines: list[str] = []
        self.consts = consts
        self._ids: dict[int, str] = {}
        self.ntmp = 0

    def const(self, obj: Any, prefix: str = "K") -> str:
        nm = self._ids.get(id(obj))
        if nm is None or self.consts.get(nm) is not obj:
            nm = f"{prefix}{len(self.consts)}"
            self.consts[nm] = obj
            self._ids[id(obj)] = nm
        return nm

    def tmp(self) -> str:
        self.ntmp += 1
        return f"t{self.ntmp}"

    def line(self, depth: int, s: str) -> None:
        if depth > _MAX_DEPTH or len(self.lines) > _MAX_LINES:
            raise _TooBig
        self.lines.append(" " * depth + s)


Cont = Callable[[dict[str, str], int], None]


def _arg_cond(g: _Gen, v: str, arg: Any) -> str | None:
    if arg is _ANY:
        return None
    if type(arg) is ValueArg:
        return _value_cond(g, f"{v}.arg", arg)
    if _arg_is_pred(arg):
        return f"{g.const(arg, 'A')}({v}.arg)"
    if arg is None or arg is True or arg is False:
        return f"{v}.arg is {arg}"
    ta = type(arg)
    if ta is int:
        return f"type({v}.arg) is int and {v}.arg == {arg!r}"
    if ta is float:
        return f"type({v}.arg) is float and {v}.arg.hex() == {arg.hex()!r}"
    if ta is str:
        return f"{v}.arg == {arg!r}"
    if ta is tuple:
        return f"_argkey({v}.arg) == {g.const(_argkey(arg), 'A')}"
    if isinstance(arg, (DType, UOp)):
        return f"{v}.arg is {g.const(arg, 'A')}"
    return f"{v}.arg == {g.const(arg, 'A')}"


def _value_cond(g: _Gen, a: str, arg: ValueArg) -> str:
    """UPat.value's rule as inline code: the scalar test first (cheap), the vector-splat test only for tuples."""
    vec = f"type({a}) is tuple and {g.const(arg, 'A')}({a})"
    val = arg.value
    if arg.nan:
        return f"({a} != {a} or {vec})"
    if val != 0:
        lit = repr(val) if type(val) is int else g.const(val, "A")
        return f"({a} == {lit} or {vec})"
    sign = "<" if arg.neg_zero else ">"
    return f"({a} == 0 and (type({a}) is not float or _copysign(1.0, {a}) {sign} 0.0) or {vec})"


def _dtype_cond(g: _Gen, v: str, spec: DTypeSpec) -> str | None:
    if spec is None:
        return None
    if isinstance(spec, DType):
        return f"{v}.dtype is {g.const(spec, 'D')}"
    if isinstance(spec, tuple):
        return f"{v}.dtype in {g.const(frozenset(spec), 'D')}"
    return f"{g.const(spec, 'D')}({v}.dtype)"


def _emit(g: _Gen, p: UPat, v: str, bound: dict[str, str], depth: int, k: Cont, known_op: OpDef | None) -> None:
    """Emit code matching `p` against the local `v`; on success run the continuation `k` nested inside."""
    conds: list[str] = []
    newname = None
    if p.name is not None:
        loc = bound.get(p.name)
        if loc is None:
            newname = p.name
        elif loc[0] == "?":  # maybe bound (by an all-sources pattern): None means not yet
            conds.append(f"({loc[1:]} is None or {v} is {loc[1:]})")
            newname = p.name
        else:
            conds.append(f"{v} is {loc}")
    if p.alts is not None:
        if conds:
            g.line(depth, f"if {conds[0]}:")
            depth += 1
        if newname is not None:
            loc = f"c_{newname}"
            g.line(depth, f"{loc} = {v}")
            bound = {**bound, newname: loc}
        start = len(g.lines)
        for a in p.alts:
            aops = a.top_ops()
            if known_op is not None and aops is not None and known_op not in aops:
                continue
            _emit(g, a, v, bound, depth, k, known_op)
        if len(g.lines) == start:
            g.line(depth, "pass")
        return
    ops = p.opset()
    if ops is not None:
        if known_op is not None:
            if known_op not in ops:
                return  # statically impossible
        elif len(ops) == 1:
            conds.append(f"{v}.op is {g.const(next(iter(ops)), 'O')}")
        else:
            conds.append(f"{v}.op in {g.const(ops, 'O')}")
    for c in (_dtype_cond(g, v, p.dtype), _arg_cond(g, v, p.arg)):
        if c is not None:
            conds.append(c)
    src = p.src
    if isinstance(src, tuple):
        conds.append(f"len({v}.src) {'>=' if p.allow_any_len else '=='} {len(src)}")
    if p.check is not None:
        conds.append(f"{g.const(p.check, 'C')}({v})")
    start = len(g.lines)
    if conds:
        g.line(depth, f"if {' and '.join(conds)}:")
        depth += 1
    if newname is not None:
        loc = f"c_{newname}"
        g.line(depth, f"{loc} = {v}")
        bound = {**bound, newname: loc}
    if src is None:
        k(bound, depth)
    elif isinstance(src, UPat):
        _emit_all(g, src, v, bound, depth, k)
    else:
        _emit_tuple(g, p, src, v, bound, depth, k, known_op, ops)
    if len(g.lines) == start + 1 and conds:
        g.line(depth, "pass")


def _emit_all(g: _Gen, q: UPat, v: str, bound: dict[str, str], depth: int, k: Cont) -> None:
    qnames = q.names()
    if not qnames:  # a pure predicate: any one way of matching is enough
        pg = _Gen(g.consts)
        pg.line(0, "def _pred(u):")
        _emit(pg, q, "u", {}, 1, lambda b, d: pg.line(d, "return True"), None)
        pg.line(1, "return False")
        ns = dict(g.consts)
        exec(compile("\n".join(pg.lines), "<upat-pred>", "exec"), ns)  # noqa: S102 - generated matcher code
        g.line(depth, f"if all(map({g.const(ns['_pred'], 'P')}, {v}.src)):")
        k(bound, depth + 1)
        return
    # captures inside: enumerate every consistent assignment with the interpreter
    known = {n: loc.lstrip("?") for n, loc in bound.items() if n in qnames}
    st = "{" + ", ".join(f"{n!r}: {loc}" for n, loc in known.items()) + "}"
    b = g.tmp()
    g.line(depth, f"for {b} in _all_match({g.const(q, 'Q')}, {v}.src, {st}):")
    bound = dict(bound)
    for n in sorted(qnames):
        if n not in bound or bound[n][0] == "?":  # zero sources or another alternative may leave it unbound
            g.line(depth + 1, f"c_{n} = {b}.get({n!r})")
            bound[n] = f"?c_{n}"
    k(bound, depth + 1)


def _emit_tuple(g: _Gen, p: UPat, src: tuple[UPat, ...], v: str, bound: dict[str, str], depth: int, k: Cont,
                known_op: OpDef | None, ops: frozenset[OpDef] | None) -> None:
    n = len(src)
    if n == 0:
        k(bound, depth)
        return
    temps = [g.tmp() for _ in src]
    if p.allow_any_len:
        for i, t in enumerate(temps):
            g.line(depth, f"{t} = {v}.src[{i}]")
    else:
        g.line(depth, f"{', '.join(temps)}{',' if n == 1 else ''} = {v}.src")

    def chain(order: list[str], bound: dict[str, str], depth: int) -> None:
        def step(i: int, bound: dict[str, str], depth: int) -> None:
            if i == n:
                k(bound, depth)
            else:
                _emit(g, src[i], order[i], bound, depth, lambda b, d: step(i + 1, b, d), None)
        step(0, bound, depth)

    chain(temps, bound, depth)
    if n != 2 or p.allow_any_len:
        return
    cands = (known_op,) if known_op is not None else ops
    if cands is None:
        comm = f" and _IS_COMM[{v}.op]"
    elif all(_IS_COMM[o] for o in cands):
        comm = ""
    elif not any(_IS_COMM[o] for o in cands):
        return
    else:
        comm = f" and {v}.op in {g.const(frozenset(o for o in cands if _IS_COMM[o]), 'O')}"
    g.line(depth, f"if {temps[0]} is not {temps[1]}{comm}:")
    chain([temps[1], temps[0]], bound, depth + 1)


def _all_match(q: UPat, srcs: tuple[UOp, ...], st: dict[str, UOp]) -> Iterator[dict[str, UOp]]:
    stores = [st]
    for s in srcs:
        stores = [r for x in stores for r in q._match(s, x)]
        if not stores:
            return iter(())
    return iter(stores)


# ---- callbacks -------------------------------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class Rule:
    """One entry of a PatternMatcher: its pattern, callback, name (the statistics key) and where it was written."""

    pat: UPat
    fn: Callable[..., UOp | None]
    name: str
    takes_ctx: bool
    params: list[tuple[str, bool]]  # (capture name, passed by keyword) in call order
    var_kw: bool  # fn takes **kwargs: every capture not in params is passed by keyword
    source: str = "?"  # "file:line": the callback's definition (a lambda: the entry's line), else the matcher's

    def ops(self) -> frozenset[OpDef] | None:
        """The ops this rule can fire on (None: any op)."""
        return self.pat.top_ops()

    def __repr__(self) -> str:
        return f"Rule({self.name!r} at {self.source}: {self.pat!r})"


@functools.cache
def _repo_relative(path: str) -> str:
    """A source path as shown to users: relative to the checkout that holds the uopir package, when inside it
    (once per file: every rule of a module asks for the same path)."""
    p = os.path.abspath(path)
    return os.path.relpath(p, _ROOT) if p.startswith(_ROOT + os.sep) else p


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _source_of(fn: Callable) -> str | None:
    """"file:line" of a callback's code (through functools.partial and decorators), or None (a builtin)."""
    for _ in range(8):
        code = getattr(fn, "__code__", None)
        if code is not None:
            return f"{_repo_relative(code.co_filename)}:{code.co_firstlineno}"
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
        if inner is None or inner is fn:
            return None
        fn = inner
    return None


def _caller_source(skip: int) -> str:
    """"file:line" of the first frame outside this module, at least `skip` frames up."""
    f = sys._getframe(skip)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    return "?" if f is None else f"{_repo_relative(f.f_code.co_filename)}:{f.f_lineno}"


def _rule_name(fn: Callable) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if name == "<lambda>":
        code = getattr(fn, "__code__", None)
        if code is not None:
            return f"<lambda>@{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
    return name


def _make_rule(pat: UPat, fn: Callable, name: str | None, where: str = "?") -> Rule:
    """Check the callback's signature against the pattern's captures and record how to call it."""
    r = _make_rule_shape(pat, fn, name)
    r.source = _source_of(fn) or where
    return r


_EMPTY = inspect.Parameter.empty


def _parameters(fn: Callable) -> list[inspect.Parameter]:
    """fn's parameters: read from its code object for a plain function (inspect.signature costs ~10x more, and every
    rule of every matcher built at import asks), else from inspect.signature (partials, builtins, wrappers)."""
    if type(fn) is not types.FunctionType or hasattr(fn, "__wrapped__"):
        return list(inspect.signature(fn).parameters.values())
    P = inspect.Parameter
    code = fn.__code__
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    defaults = fn.__defaults__ or ()
    kwdefaults = fn.__kwdefaults__ or {}
    out = []
    for i in range(npos):
        kind = P.POSITIONAL_ONLY if i < code.co_posonlyargcount else P.POSITIONAL_OR_KEYWORD
        d = defaults[i - (npos - len(defaults))] if i >= npos - len(defaults) else _EMPTY
        out.append(P(names[i], kind, default=d))
    at = npos + nkw
    if code.co_flags & inspect.CO_VARARGS:
        out.append(P(names[at], P.VAR_POSITIONAL))
        at += 1
    for i in range(npos, npos + nkw):
        out.append(P(names[i], P.KEYWORD_ONLY, default=kwdefaults.get(names[i], _EMPTY)))
    if code.co_flags & inspect.CO_VARKEYWORDS:
        out.append(P(names[at], P.VAR_KEYWORD))
    return out


def _make_rule_shape(pat: UPat, fn: Callable, name: str | None) -> Rule:
    if not isinstance(pat, UPat):
        raise TypeError(f"a PatternMatcher entry must start with a UPat, got {type(pat).__name__}")
    if not callable(fn):
        raise TypeError(f"the callback of {pat!r} is not callable")
    if name is not None and (type(name) is not str or not name):
        raise TypeError(f"a rule name must be a non-empty string, got {name!r}")
    rname = name if name is not None else _rule_name(fn)
    caps = pat.names()
    try:
        sig = _parameters(fn)
    except (TypeError, ValueError):  # a builtin without a signature: pass every capture by keyword
        return Rule(pat, fn, rname, False, [], True)
    P = inspect.Parameter
    takes_ctx = bool(sig) and sig[0].kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD) and \
        (sig[0].name == "ctx" or sig[0].name not in caps)
    if takes_ctx:
        sig = sig[1:]
    params: list[tuple[str, bool]] = []
    var_kw = by_kw = False  # after a skipped parameter, captures must go by keyword
    for prm in sig:
        if prm.kind is P.VAR_KEYWORD:
            var_kw = True
        elif prm.kind is P.VAR_POSITIONAL:
            by_kw = True
        elif prm.name in caps:
            if prm.kind is P.POSITIONAL_ONLY:
                raise TypeError(f"pattern callback {rname}: capture {prm.name!r} cannot be positional-only")
            by_kw = by_kw or prm.kind is P.KEYWORD_ONLY
            params.append((prm.name, by_kw))
        elif prm.default is not P.empty:
            by_kw = True
        else:
            raise TypeError(f"pattern callback {rname} needs {prm.name!r}, but {pat!r} captures only "
                            f"{sorted(caps)}")
    extra = caps - {nm for nm, _ in params}
    if extra and not var_kw:
        raise TypeError(f"pattern callback {rname} does not take the capture(s) {sorted(extra)} of {pat!r}")
    return Rule(pat, fn, rname, takes_ctx, params, var_kw)


def _call_expr(g: _Gen, r: Rule, bound: dict[str, str]) -> str:
    args = ["ctx"] if r.takes_ctx else []
    kw = False
    for nm, by_kw in r.params:
        val = bound.get(nm, "None").lstrip("?")
        kw = kw or by_kw
        args.append(f"{nm}={val}" if kw else val)
    if r.var_kw:
        named = {nm for nm, _ in r.params}
        args += [f"{nm}={bound.get(nm, 'None').lstrip('?')}" for nm in sorted(r.pat.names() - named)]
    return f"{g.const(r.fn, 'F')}({', '.join(args)})"


def _interp_caller(r: Rule) -> Callable[[UOp, Any], UOp | None]:
    """A matcher for one rule that uses the interpreter (patterns too large to generate)."""
    fn, takes_ctx = r.fn, r.takes_ctx
    names = r.pat.names() if r.var_kw else [nm for nm, _ in r.params]

    def run(u: UOp, ctx: Any) -> UOp | None:
        for caps in r.pat.match(u):
            kw = {nm: caps.get(nm) for nm in names}
            res = fn(ctx, **kw) if takes_ctx else fn(**kw)
            if res is not None and res is not u:
                return res
        return None
    return run


# ---- the matcher -----------------------------------------------------------------------------------------------------
RewriteFn = Callable[[UOp, Any], Any]


# Generating and compiling an op's function costs about as much as a few hundred interpreted matches, and most
# ops of a matcher are met a handful of times in a process's first realize. So an op's function starts as the
# interpreter (UPat.match, the reference) and is replaced by the generated one on its HOT_CALLS-th call: what a
# cold start pays is proportional to the matching it does, and a long rewrite still runs compiled code.
HOT_CALLS = 48


class _Dispatch(dict):
    """OpDef -> rewrite function (or None when no pattern can match that op): interpreted for its first
    HOT_CALLS calls, then generated and compiled (at once for a table filled by `PatternMatcher.dispatch()`)."""

    def __init__(self, pm: PatternMatcher, with_names: bool):
        super().__init__()
        self.pm, self.with_names = pm, with_names
        self.filled = False  # every op some rule names has its compiled function

    def __missing__(self, op: OpDef) -> RewriteFn | None:
        f = self[op] = self.pm._tiered_op(self, op) if HOT_CALLS > 0 else self.pm._compile_op(op, self.with_names)
        return f


class PatternMatcher:
    """An ordered list of rules (UPat, callback, name). The first pattern whose callback returns a UOp wins.

    Entries are `(pat, fn)` or `(pat, fn, "name")`; or, to write the rule as a named function, decorate it:

        pm = PatternMatcher([], name="simplify")
        @pm.rule(UPat.var("x") + 0)
        def add_zero(x): return x

    A rule's name (given, else the function's name, else `<lambda>@file:line`) keys RewriteStats.fired; its source
    (where the callback is defined, for a lambda the line of the entry) is in `sources()` and `patterns_for(op)`.

    A callback receives the captures as keyword arguments (None for a name this match did not bind, e.g. in an
    alternative of UPat.any not taken); if its first positional parameter is not a capture (conventionally `ctx`),
    it also receives the rewrite context. The signature is checked when the matcher is built. Returning None (or
    the node itself) means "no match": the next binding or pattern is tried.
    """

    def __init__(self, patterns: Iterable[tuple | Rule], name: str | None = None):
        self.name = name
        self.rules: list[Rule] = []
        where = _caller_source(1)
        for entry in patterns:
            if isinstance(entry, Rule):
                self.rules.append(entry)
                continue
            if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3):
                n = f"{len(entry)} items" if isinstance(entry, (tuple, list)) else type(entry).__name__
                raise TypeError(f"a PatternMatcher entry is (UPat, fn) or (UPat, fn, name), got {n}")
            self.rules.append(_make_rule(entry[0], entry[1], entry[2] if len(entry) == 3 else None, where))
        self._reset()

    def _reset(self) -> None:
        self._disp: _Dispatch | None = None
        self._ndisp: _Dispatch | None = None
        self._sources: dict[str, str] | None = None
        self._tops_memo: list[frozenset[OpDef] | None] | None = None
        self._pdict: dict[OpDef, list[tuple[UPat, Callable, str]]] | None = None

    def rule(self, pat: UPat, name: str | None = None) -> Callable[[Callable], Callable]:
        """Decorator: append the rule (pat, the function, name or the function's name); returns the function."""
        def add(fn: Callable) -> Callable:
            self.rules.append(_make_rule(pat, fn, name, _caller_source(2)))
            self._reset()
            return fn
        return add

    @property
    def patterns(self) -> list[tuple[UPat, Callable, str]]:
        return [(r.pat, r.fn, r.name) for r in self.rules]

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        both = " + ".join(n for n in (self.name, other.name) if n) or None
        return PatternMatcher(self.rules + other.rules, both)

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"PatternMatcher({self.name or ''}, {len(self.rules)} patterns)"

    # --- inspection ---------------------------------------------------------------------------------------------
    def sources(self) -> dict[str, str]:
        """Rule name -> "file:line" where it is written (names shared by several rules list each place once)."""
        if self._sources is None:
            out: dict[str, str] = {}
            for r in self.rules:
                have = out.get(r.name)
                if have is None:
                    out[r.name] = r.source
                elif r.source not in have.split(", "):
                    out[r.name] = f"{have}, {r.source}"
            self._sources = out
        return self._sources

    def patterns_for(self, op: OpDef | str) -> list[Rule]:
        """The rules that can fire on `op` (an OpDef or its name), in the order they are tried."""
        o = get_op(op) if isinstance(op, str) else op
        return [r for r, ops in zip(self.rules, self._tops(), strict=True) if ops is None or o in ops]

    @property
    def by_op(self) -> dict[OpDef, list[Rule]]:
        """Op -> the rules tried on it (as tinygrad's `pm.pdict`), for every op some rule names; rules for any op
        are in every list. For an op not listed, `patterns_for(op)` gives the rules for any op."""
        ops: dict[OpDef, None] = {}
        for t in self._tops():
            for o in sorted(t or (), key=lambda o: o.name):
                ops[o] = None
        return {o: self.patterns_for(o) for o in ops}

    @property
    def pdict(self) -> dict[OpDef, list[tuple[UPat, Callable, str]]]:
        """tinygrad's name for the op index: op -> the (pattern, callback, name) entries tried on it, in order, for
        every op some rule names (a rule for any op is in every list). Kept so a tinygrad habit works here."""
        if self._pdict is None:
            self._pdict = {o: [(r.pat, r.fn, r.name) for r in rules] for o, rules in self.by_op.items()}
        return self._pdict

    def describe(self) -> str:
        """One line per rule: name, source, the ops it fires on, the pattern."""
        lines = [f"{self!r}:"]
        for r in self.rules:
            ops = r.ops()
            opt = "*" if ops is None else ",".join(sorted(o.name for o in ops))
            lines.append(f"  {r.name}  {r.source}  [{opt}]  {r.pat!r}")
        return "\n".join(lines)

    # --- compilation --------------------------------------------------------------------------------------------
    def _tops(self) -> list[frozenset[OpDef] | None]:
        if self._tops_memo is None:
            self._tops_memo = [r.pat.top_ops() for r in self.rules]
        return self._tops_memo

    def dispatch(self, with_names: bool = False, prefill: bool = True) -> _Dispatch:
        """The op -> function table. With names, each function returns (result, pattern name) instead of result.
        Without prefill an op's function is generated when the table is first asked for it (graph_rewrite: a pass
        run on a small graph pays only for the ops it meets, which keeps a process's first realize cheap).
        graph_rewrite and rewrite use the table with names whether or not they count (a fired rewrite unpacks one
        tuple), so a matcher's functions are generated once per process, not once per table."""
        if with_names:
            if self._ndisp is None:
                self._ndisp = _Dispatch(self, True)
            d = self._ndisp
        else:
            if self._disp is None:
                self._disp = _Dispatch(self, False)
            d = self._disp
        return self._prefill(d) if prefill else d

    def _prefill(self, d: _Dispatch) -> _Dispatch:
        if d.filled:
            return d
        d.filled = True
        for op in list(d):  # an op met before (still interpreted, or without a rule) compiles too
            if d[op] is not None and getattr(d[op], "interpreted", False):
                d[op] = self._compile_op(op, d.with_names)
        for ops in self._tops():
            for op in ops or ():
                if op not in d:
                    d[op] = self._compile_op(op, d.with_names)
        return d

    def _tiered_op(self, d: _Dispatch, op: OpDef) -> RewriteFn | None:
        """The interpreted function of `op` (None when no rule can fire on it); on its HOT_CALLS-th call it puts the
        generated function in its place in `d` and runs that."""
        tops = self._tops()
        rules = [r for r, ops in zip(self.rules, tops, strict=True) if ops is None or op in ops]
        if not rules:
            return None
        callers = [(_interp_caller(r), r.name) for r in rules]
        with_names = d.with_names
        calls = 0

        def interpreted(u: UOp, ctx: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls >= HOT_CALLS:
                f = d[op] = self._compile_op(op, with_names)
                return f(u, ctx) if f is not None else None
            for call, name in callers:
                r = call(u, ctx)
                if r is not None:
                    return (r, name) if with_names else r
            return None
        interpreted.interpreted = True  # type: ignore[attr-defined]
        return interpreted

    def _compile_op(self, op: OpDef, with_names: bool) -> RewriteFn | None:
        rules = [r for r, ops in zip(self.rules, self._tops(), strict=True) if ops is None or op in ops]
        if not rules:
            return None
        consts: dict[str, Any] = {"_argkey": _argkey, "_all_match": _all_match, "_IS_COMM": _IS_COMM,
                                  "_copysign": math.copysign}
        body: list[str] = []
        for r in rules:
            g = _Gen(consts)
            g.ntmp = 0

            def fire(bound: dict[str, str], depth: int, r: Rule = r, g: _Gen = g) -> None:
                g.line(depth, f"r = {_call_expr(g, r, bound)}")
                g.line(depth, "if r is not None and r is not u:")
                g.line(depth + 1, f"return (r, {r.name!r})" if with_names else "return r")
            try:
                _emit(g, r.pat, "u", {}, 1, fire, op)
                body += g.lines
            except (_TooBig, RecursionError):
                nm = g.const(_interp_caller(r), "I")
                body.append(f" r = {nm}(u, ctx)")
                body.append(" if r is not None:")
                body.append(f"  return (r, {r.name!r})" if with_names else "  return r")
        src = "\n".join(["def _rw(u, ctx):", *body, " return None"])
        if _DUMP:
            print(f"# --- {self!r} {op.name} ---\n{src}", file=sys.stderr)  # a debug dump: never into a tool's output
        ns = dict(consts)
        exec(compile(src, f"<patterns {op.name}>", "exec"), ns)  # noqa: S102 - generated matcher code
        return ns["_rw"]

    # --- use ------------------------------------------------------------------------------------------------------
    def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
        """The result of the first pattern that fires on `u` (not on its sources), or None."""
        f = self.dispatch(True, prefill=False)[u.op]
        if f is None or (r := f(u, ctx)) is None:
            return None
        return r[0]

    def rewrite_named(self, u: UOp, ctx: Any = None) -> tuple[UOp, str] | None:
        """Like rewrite, but also says which pattern fired: (result, pattern name) or None."""
        f = self.dispatch(True, prefill=False)[u.op]
        return None if f is None else f(u, ctx)

