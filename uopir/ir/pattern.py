"""The rewrite engine: UPat (a pattern over UOps), PatternMatcher (patterns + callbacks) and graph_rewrite.

Patterns are plain data written at module level. A PatternMatcher compiles them lazily, on first use, into one
generated Python function per op (every pattern that can match that op, in list order, as nested `if`s), because
matching is the hot path of every pass: generated code is several times faster than walking the UPat tree.
`UPat.match` is the reference interpreter; the compiler falls back to it for patterns too large to generate.

graph_rewrite walks the graph with an explicit stack (graphs can be 100k nodes deep), memoizes each distinct UOp,
and rewrites to a fixed point, either top-down (sources first, then the node) or bottom-up (the node first).
"""
from __future__ import annotations

import inspect
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from uopir.ir.dtype import DType
from uopir.ir.ops import OpDef, Trait, get_op
from uopir.ir.uop import UOp, _argkey, gc_paused, normalize_const

__all__ = ["UPat", "PatternMatcher", "graph_rewrite", "RewriteStats", "RewriteError",
           "is_float", "is_int", "is_bool", "is_ptr", "is_vector"]


class _AnyArg:
    def __repr__(self) -> str:
        return "<any>"


_ANY: Any = _AnyArg()

OpSpec = OpDef | str
DTypeSpec = DType | tuple[DType, ...] | Callable[[DType], bool] | None


# ---- dtype predicates (pass as `dtype=`) -----------------------------------------------------------------------------
def is_float(d: DType) -> bool:
    """Floats, scalar or vector."""
    return d.kind == "float"


def is_int(d: DType) -> bool:
    """Integers of any signedness, and index; scalar or vector."""
    return d.kind in ("int", "uint", "index")


def is_bool(d: DType) -> bool:
    return d.kind == "bool"


def is_ptr(d: DType) -> bool:
    return d.kind == "ptr"


def is_vector(d: DType) -> bool:
    return d.count > 1


class _CommCache(dict):
    """OpDef -> is it commutative; Flag arithmetic is slow, so generated code asks this dict."""

    def __missing__(self, op: OpDef) -> bool:
        v = self[op] = op.has(Trait.COMMUTATIVE)
        return v


_IS_COMM = _CommCache()


class UPat:
    """A pattern over one UOp and (optionally) its sources.

    op: an OpDef, an op name (resolved when the matcher is compiled), a tuple of them, or None for any op.
    dtype: a DType, a tuple of DTypes, a predicate on the dtype (`is_float`), or None.
    src: None (any sources), a tuple of UPats matched in order (both orders for a commutative op with two sources),
         or one UPat that every source must match.
    arg: the exact arg (floats compare bit-exactly, so 0.0 is not -0.0) or a predicate on it; any when omitted.
    name: capture the node under this name; a name used twice must bind the same UOp.
    allow_any_len: with a tuple src, the node may have more sources than patterns (the prefix is matched).
    check: a predicate on the whole UOp, tried after everything else about this node matched.
    """

    __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "check", "alts", "_opset")

    def __init__(self, op: OpSpec | tuple[OpSpec, ...] | None = None, dtype: DTypeSpec = None,
                 src: UPat | tuple[UPat, ...] | None = None, arg: Any = _ANY, name: str | None = None,
                 allow_any_len: bool = False, check: Callable[[UOp], bool] | None = None):
        self.op: tuple[OpSpec, ...] | None = None if op is None else (op if isinstance(op, tuple) else (op,))
        if isinstance(dtype, list):
            dtype = tuple(dtype)
        self.dtype = dtype
        if isinstance(src, list):
            raise TypeError("UPat src must be a tuple (ordered) or a single UPat; commutative ops already match "
                            "both orders")
        if src is not None and not isinstance(src, (tuple, UPat)):
            raise TypeError(f"UPat src must be a tuple of UPats or a UPat, got {type(src).__name__}")
        if isinstance(src, tuple) and not all(isinstance(s, UPat) for s in src):
            raise TypeError("every element of a UPat src tuple must be a UPat")
        self.src = src
        self.arg = arg
        if name is not None and not name.isidentifier():
            raise ValueError(f"UPat name {name!r} must be a Python identifier (it becomes a keyword argument)")
        self.name = name
        self.allow_any_len = allow_any_len
        self.check = check
        self.alts: tuple[UPat, ...] | None = None
        self._opset: frozenset[OpDef] | None = None

    # --- convenience constructors --------------------------------------------------------------------------------
    @staticmethod
    def var(name: str | None = None, dtype: DTypeSpec = None) -> UPat:
        """Any UOp (of the given dtype), captured as `name`."""
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str | None = None, dtype: DTypeSpec = None) -> UPat:
        """A core.const, captured as `name`."""
        return UPat("core.const", dtype=dtype, name=name)

    @staticmethod
    def const(dtype: DTypeSpec, value: Any, name: str | None = None) -> UPat:
        """A core.const with this value. With one DType the value is normalized like UOp.const (exact match);
        otherwise any scalar const equal to it by `==` matches (0 matches 0, 0.0 and -0.0)."""
        if isinstance(dtype, DType):
            return UPat("core.const", dtype=dtype, arg=normalize_const(dtype, value), name=name)
        return UPat("core.const", dtype=dtype, arg=_EqArg(value), name=name)

    @staticmethod
    def any(*pats: UPat, name: str | None = None) -> UPat:
        """Matches when one of `pats` matches (tried in order; each alternative's captures are its own)."""
        p = UPat(name=name)
        p.alts = tuple(pats)
        return p

    # --- introspection ---------------------------------------------------------------------------------------------
    def opset(self) -> frozenset[OpDef] | None:
        """The ops this node accepts (names resolved now), or None for any op."""
        if self.op is None:
            return None
        if self._opset is None:
            try:
                self._opset = frozenset(get_op(o) if isinstance(o, str) else o for o in self.op)
            except KeyError as e:
                raise KeyError(f"UPat op {e.args[0]!r} is not registered (are the dialects loaded?)") from None
        return self._opset

    def top_ops(self) -> frozenset[OpDef] | None:
        """The ops a UOp matched by this pattern can have at the top (None: any), for dispatch."""
        if self.alts is None:
            return self.opset()
        out: set[OpDef] = set()
        for a in self.alts:
            s = a.top_ops()
            if s is None:
                return None
            out |= s
        return frozenset(out)

    def names(self) -> set[str]:
        """Every capture name used anywhere in the pattern."""
        out: set[str] = set()
        stack = [self]
        while stack:
            p = stack.pop()
            if p.name is not None:
                out.add(p.name)
            if p.alts is not None:
                stack.extend(p.alts)
            if isinstance(p.src, tuple):
                stack.extend(p.src)
            elif isinstance(p.src, UPat):
                stack.append(p.src)
        return out

    def __repr__(self) -> str:
        if self.alts is not None:
            inner = ", ".join(map(repr, self.alts))
            return f"UPat.any({inner}{'' if self.name is None else f', name={self.name!r}'})"
        parts = []
        if self.op is not None:
            ops = [o if isinstance(o, str) else o.name for o in self.op]
            parts.append(ops[0] if len(ops) == 1 else "(" + ", ".join(ops) + ")")
        if self.dtype is not None:
            parts.append(f"dtype={getattr(self.dtype, '__name__', self.dtype)}")
        if self.src is not None:
            parts.append(f"src={self.src!r}")
        if self.arg is not _ANY:
            parts.append(f"arg={self.arg!r}")
        if self.name is not None:
            parts.append(f"name={self.name!r}")
        if self.allow_any_len:
            parts.append("allow_any_len=True")
        return f"UPat({', '.join(parts)})"

    # --- the reference interpreter ----------------------------------------------------------------------------------
    def match(self, u: UOp, bindings: dict[str, UOp] | None = None) -> list[dict[str, UOp]]:
        """Every way this pattern matches `u`: a list of capture dicts (empty when it does not match)."""
        return self._match(u, {} if bindings is None else dict(bindings))

    def _match(self, u: UOp, st: dict[str, UOp]) -> list[dict[str, UOp]]:
        if self.name is not None:
            bound = st.get(self.name)
            if bound is not None and bound is not u:
                return []
        if self.alts is not None:
            if self.name is not None:
                st = {**st, self.name: u}
            return [r for a in self.alts for r in a._match(u, st)]
        ops = self.opset()
        if ops is not None and u.op not in ops:
            return []
        if not _dtype_ok(self.dtype, u.dtype) or not _arg_ok(self.arg, u.arg):
            return []
        src = self.src
        if isinstance(src, tuple):
            n = len(src)
            if len(u.src) < n or (not self.allow_any_len and len(u.src) != n):
                return []
        if self.check is not None and not self.check(u):
            return []
        if self.name is not None:
            st = {**st, self.name: u}
        if src is None:
            return [st]
        if isinstance(src, UPat):
            stores = [st]
            for s in u.src:
                stores = [r for x in stores for r in src._match(s, x)]
                if not stores:
                    break
            return stores
        orders = [u.src[:len(src)]]
        if len(src) == 2 and not self.allow_any_len and u.src[0] is not u.src[1] and _IS_COMM[u.op]:
            orders.append((u.src[1], u.src[0]))
        out: list[dict[str, UOp]] = []
        for order in orders:
            stores = [st]
            for p, s in zip(src, order, strict=True):
                stores = [r for x in stores for r in p._match(s, x)]
                if not stores:
                    break
            out.extend(stores)
        return out


class _EqArg:
    """An arg predicate `a == value` for scalar args (used by UPat.const without a single dtype)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __call__(self, a: Any) -> bool:
        return type(a) is not tuple and a == self.value

    def __repr__(self) -> str:
        return f"=={self.value!r}"


def _dtype_ok(spec: DTypeSpec, d: DType) -> bool:
    if spec is None:
        return True
    if isinstance(spec, DType):
        return spec is d
    if isinstance(spec, tuple):
        return d in spec
    return bool(spec(d))


def _arg_is_pred(arg: Any) -> bool:
    return callable(arg) and not isinstance(arg, (DType, UOp, type))


def _arg_ok(spec: Any, a: Any) -> bool:
    if spec is _ANY:
        return True
    if _arg_is_pred(spec):
        return bool(spec(a))
    if spec is a:
        return True
    ts = type(spec)
    if ts is int:
        return type(a) is int and a == spec
    if ts is float or ts is bool or ts is tuple:
        return _argkey(a) == _argkey(spec)
    return type(a) is ts and a == spec


# ---- compiling patterns into Python ----------------------------------------------------------------------------------
_MAX_DEPTH = 80  # nesting levels of generated code (the tokenizer allows 100)
_MAX_LINES = 4000  # per pattern per op; larger patterns use the interpreter
_DUMP = os.environ.get("UOPIR_DUMP_PATTERNS", "") not in ("", "0")


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
@dataclass(slots=True)
class _Rule:
    pat: UPat
    fn: Callable[..., UOp | None]
    name: str
    takes_ctx: bool
    params: list[tuple[str, bool]]  # (capture name, passed by keyword) in call order
    var_kw: bool  # fn takes **kwargs: every capture not in params is passed by keyword


def _rule_name(fn: Callable) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if name == "<lambda>":
        code = getattr(fn, "__code__", None)
        if code is not None:
            return f"<lambda>@{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
    return name


def _make_rule(pat: UPat, fn: Callable, name: str | None) -> _Rule:
    if not isinstance(pat, UPat):
        raise TypeError(f"a PatternMatcher entry must start with a UPat, got {type(pat).__name__}")
    if not callable(fn):
        raise TypeError(f"the callback of {pat!r} is not callable")
    rname = name if name is not None else _rule_name(fn)
    caps = pat.names()
    try:
        sig = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: pass every capture by keyword
        return _Rule(pat, fn, rname, False, [], True)
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
    return _Rule(pat, fn, rname, takes_ctx, params, var_kw)


def _call_expr(g: _Gen, r: _Rule, bound: dict[str, str]) -> str:
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


def _interp_caller(r: _Rule) -> Callable[[UOp, Any], UOp | None]:
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


class _Dispatch(dict):
    """OpDef -> generated rewrite function (or None when no pattern can match that op), compiled on demand."""

    def __init__(self, pm: PatternMatcher, with_names: bool):
        super().__init__()
        self.pm, self.with_names = pm, with_names

    def __missing__(self, op: OpDef) -> RewriteFn | None:
        f = self[op] = self.pm._compile_op(op, self.with_names)
        return f


class PatternMatcher:
    """An ordered list of (UPat, callback[, name]). The first pattern whose callback returns a UOp wins.

    A callback receives the captures as keyword arguments (None for a name this match did not bind, e.g. in an
    alternative of UPat.any not taken); if its first positional parameter is not a capture (conventionally `ctx`),
    it also receives the rewrite context. The signature is checked when the matcher is built. Returning None (or
    the node itself) means "no match": the next binding or pattern is tried.
    """

    def __init__(self, patterns: Iterable[tuple], name: str | None = None):
        self.name = name
        self.rules: list[_Rule] = []
        for entry in patterns:
            if len(entry) not in (2, 3):
                raise TypeError(f"a PatternMatcher entry is (UPat, fn) or (UPat, fn, name), got {len(entry)} items")
            self.rules.append(_make_rule(entry[0], entry[1], entry[2] if len(entry) == 3 else None))
        self._disp: _Dispatch | None = None
        self._ndisp: _Dispatch | None = None

    @property
    def patterns(self) -> list[tuple[UPat, Callable, str]]:
        return [(r.pat, r.fn, r.name) for r in self.rules]

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher(self.patterns + other.patterns)

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"PatternMatcher({self.name or ''}, {len(self.rules)} patterns)"

    # --- compilation --------------------------------------------------------------------------------------------
    def _tops(self) -> list[frozenset[OpDef] | None]:
        return [r.pat.top_ops() for r in self.rules]

    def dispatch(self, with_names: bool = False) -> _Dispatch:
        """The op -> function table. With names, each function returns (result, pattern name) instead of result."""
        if with_names:
            if self._ndisp is None:
                self._ndisp = self._prefill(_Dispatch(self, True))
            return self._ndisp
        if self._disp is None:
            self._disp = self._prefill(_Dispatch(self, False))
        return self._disp

    def _prefill(self, d: _Dispatch) -> _Dispatch:
        for ops in self._tops():
            for op in ops or ():
                if op not in d:
                    d[op] = self._compile_op(op, d.with_names)
        return d

    def _compile_op(self, op: OpDef, with_names: bool) -> RewriteFn | None:
        rules = [r for r, ops in zip(self.rules, self._tops(), strict=True) if ops is None or op in ops]
        if not rules:
            return None
        consts: dict[str, Any] = {"_argkey": _argkey, "_all_match": _all_match, "_IS_COMM": _IS_COMM}
        body: list[str] = []
        for r in rules:
            g = _Gen(consts)
            g.ntmp = 0

            def fire(bound: dict[str, str], depth: int, r: _Rule = r, g: _Gen = g) -> None:
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
            print(f"# --- {self!r} {op.name} ---\n{src}")
        ns = dict(consts)
        exec(compile(src, f"<patterns {op.name}>", "exec"), ns)  # noqa: S102 - generated matcher code
        return ns["_rw"]

    # --- use ------------------------------------------------------------------------------------------------------
    def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
        """The result of the first pattern that fires on `u` (not on its sources), or None."""
        disp = self._disp if self._disp is not None else self.dispatch()
        f = disp[u.op]
        return None if f is None else f(u, ctx)

    def rewrite_named(self, u: UOp, ctx: Any = None) -> tuple[UOp, str] | None:
        """Like rewrite, but also says which pattern fired: (result, pattern name) or None."""
        f = self.dispatch(True)[u.op]
        return None if f is None else f(u, ctx)


# ---- graph rewriting -------------------------------------------------------------------------------------------------
@dataclass
class RewriteStats:
    """What a graph_rewrite did: how often each pattern fired, nodes visited, nodes whose result changed."""

    fired: Counter[str] = field(default_factory=Counter)
    visits: int = 0
    changed: int = 0

    def merge(self, other: RewriteStats) -> None:
        self.fired.update(other.fired)
        self.visits += other.visits
        self.changed += other.changed


class RewriteError(RuntimeError):
    """The patterns do not reach a fixed point (a rewrite loop); the message names the pattern."""


def _loop_error(pm: PatternMatcher, u: UOp, ctx: Any, why: str) -> RewriteError:
    try:
        hit = pm.rewrite_named(u, ctx)
    except Exception:  # noqa: BLE001 - only for the message
        hit = None
    what = f"pattern '{hit[1]}'" if hit is not None else "an unknown pattern"
    return RewriteError(f"graph_rewrite: {why}; last rewrite by {what} on {u!r}")


def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False,
                  stats: RewriteStats | None = None, max_iters: int = 1000) -> UOp:
    """Rewrite every node reachable from `root` through `src` (not into region args) to a fixed point.

    Top-down (default): a node's sources are rewritten first, the node is rebuilt on them, the patterns are
    applied until none fires, and a new result is itself processed. Bottom-up: the patterns are applied to a node
    before its sources (they see the original sources), then its sources are processed and a rebuilt node is
    processed again. Each distinct UOp is processed once. More than `max_iters` successive rewrites of one
    node (not counting rewrites to one of its own sources, which only shrink the graph), or a node rewritten
    into a graph containing itself, raises RewriteError naming the pattern.
    """
    with gc_paused():  # rewriting allocates many short-lived UOps and tuples and makes no cycles
        return _rewrite(root, pm, ctx, bottom_up, stats, max_iters)


def _rewrite(root: UOp, pm: PatternMatcher, ctx: Any, bottom_up: bool, stats: RewriteStats | None,
             max_iters: int) -> UOp:
    disp = pm.dispatch(stats is not None)
    fired = stats.fired if stats is not None else None
    memo: dict[UOp, UOp] = {}
    active: set[UOp] = set()  # entered and not finished: meeting one again means a rewrite loop
    visits = changed = 0
    # frames: (node, stage, other, chain). stage 0: enter n; 1: the sources of `other` (n itself, or in bottom-up
    # what n was rewritten to) are done; 2: n's result is the result of `other`. chain counts successive rewrites.
    stack: list[tuple[UOp, int, Any, int]] = [(root, 0, None, 0)]
    push, pop = stack.append, stack.pop
    while stack:
        n, stage, x, chain = pop()
        if stage == 0:
            if n in memo:
                continue
            if n in active:
                again = n.replace(src=tuple(memo.get(s, s) for s in n.src))
                raise _loop_error(pm, again if pm.rewrite(again, ctx) is not None else n, ctx,
                                  "a node is rewritten into a graph that contains it (infinite rewrite)")
            visits += 1
            x = n
            if bottom_up:
                while (f := disp[x.op]) is not None and (r := f(x, ctx)) is not None:
                    if fired is not None:
                        r, nm = r
                        fired[nm] += 1
                    if r not in x.src:  # returning a source strictly shrinks the graph: not a loop step
                        chain += 1
                        if chain > max_iters:
                            raise _loop_error(pm, x, ctx, f"no fixed point after {max_iters} rewrites of one node")
                    x = r
                if x is not n and (res := memo.get(x)) is not None:
                    memo[n] = res
                    changed += 1
                    continue
            active.add(n)
            waiting = False
            for s in reversed(x.src):
                if s not in memo:
                    if not waiting:
                        push((n, 1, x, chain))
                        waiting = True
                    push((s, 0, None, 0))
            if waiting:
                continue
            stage = 1  # every source is done already: go on without a round trip through the stack
        if stage == 1:
            src = x.src
            if src:
                new = tuple([memo[s] for s in src])
                m = x if new == src else UOp(x.op, x.dtype, new, x.arg, x.tag)
            else:
                m = x
            if bottom_up:
                if m is x:  # x was settled in stage 0 and its sources did not change
                    memo[n] = x
                    active.discard(n)
                    if x is not n:
                        changed += 1
                    continue
                chain += 1
            else:
                while (f := disp[m.op]) is not None and (r := f(m, ctx)) is not None:
                    if fired is not None:
                        r, nm = r
                        fired[nm] += 1
                    if r not in m.src:
                        chain += 1
                        if chain > max_iters:
                            raise _loop_error(pm, m, ctx, f"no fixed point after {max_iters} rewrites of one node")
                    m = r
                if m is n:
                    memo[n] = n
                    active.discard(n)
                    continue
            if (res := memo.get(m)) is not None:
                memo[n] = res
                active.discard(n)
                if res is not n:
                    changed += 1
                continue
            if not bottom_up and m not in active:
                for s in m.src:
                    if memo.get(s) is not s:
                        break
                else:  # no pattern fires on m and its sources are final: m is final (no need to process it again)
                    memo[n] = memo[m] = m
                    active.discard(n)
                    changed += 1
                    continue
            push((n, 2, m, 0))
            push((m, 0, None, chain))
        else:
            memo[n] = res = memo[x]
            active.discard(n)
            if res is not n:
                changed += 1
    if stats is not None:
        stats.visits += visits
        stats.changed += changed
    return memo[root]
