"""The canonicalization table: each dialect declares its ops' folds beside their rows; passes gather them.

A fold is a named rewrite `(UPat, fn, name)` of one op or of a declared group of ops of one dialect, sound for every
value (bit-exact against uopir.dialects.semantics). Constant folds (every operand a constant -> a constant, MLIR's
`fold`) are tried before the other canonicalization patterns of the same op, as MLIR's greedy driver does.
`fold_matcher(dialects)` is the PatternMatcher of the folds of some dialects: the `canonicalize` pass runs it, and
later simplification passes (kernel-simplify) add their own patterns to it.

Fold callbacks that drop a subgraph ask `has_effect(ctx, x)`; run them with a `FoldContext` (or any context with an
`effects` attribute holding an EffectCache) so that question is answered once per node per run, not once per
candidate (a walk per candidate makes a pass quadratic).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from uopir.ir.ops import OpDef, Trait
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.registration import RegistrationError, Sites
from uopir.ir.rewrite import RewriteStats, graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat

__all__ = ["Fold", "declare_folds", "folds_of", "fold_matcher", "EffectCache", "FoldContext", "has_effect",
           "canonicalize_graph"]


@dataclass(frozen=True, eq=False)
class Fold:
    """One entry of the table: a pattern over `ops` (all of `dialect`), its callback and its statistics name."""

    dialect: str
    ops: frozenset[OpDef]
    pat: UPat
    fn: Callable[..., UOp | None]
    name: str
    constant: bool  # a constant fold: tried before the op's other patterns


_TABLE: dict[str, list[Fold]] = {}
_BY_NAME: dict[str, Fold] = {}
_MATCHERS: dict[frozenset[str] | None, PatternMatcher] = {}


_SITES = Sites("fold")


def declare_folds(*rows: tuple[UPat, Callable[..., UOp | None], str], constant: bool = False,
                  replace: bool = False) -> None:
    """Add `(pattern, fn, name)` rows to the table. The pattern's top op(s) say which ops (and dialect) they fold;
    names are unique over the table (statistics and coverage tests identify a fold by its name): a name declared on
    another line is a RegistrationError naming both, unless `replace` (the same line again, a reload, replaces)."""
    for pat, fn, name in rows:
        ops = pat.top_ops()
        if not ops:
            raise RegistrationError(f"fold {name!r}: its pattern must name the op(s) it folds")
        dialects = {o.dialect for o in ops}
        if len(dialects) != 1:
            raise RegistrationError(f"fold {name!r}: its ops belong to several dialects "
                                    f"({', '.join(sorted(dialects))})")
        old = _BY_NAME.get(name)
        _SITES.claim(name, old is not None, replace)
        if old is not None:
            _TABLE[old.dialect].remove(old)
        f = Fold(dialects.pop(), ops, pat, fn, name, constant)
        _TABLE.setdefault(f.dialect, []).append(f)
        _BY_NAME[name] = f
    _MATCHERS.clear()


def folds_of(dialects: Iterable[str] | None = None) -> list[Fold]:
    """The folds of these dialects (all declared ones for None): constant folds first, then declaration order."""
    names = sorted(_TABLE) if dialects is None else sorted(set(dialects) & set(_TABLE))
    every = [f for d in names for f in _TABLE[d]]
    return [f for f in every if f.constant] + [f for f in every if not f.constant]


def fold_matcher(dialects: Iterable[str] | None = None) -> PatternMatcher:
    """The PatternMatcher of the folds of these dialects (every dialect for None); built once per set."""
    key = None if dialects is None else frozenset(dialects)
    if (pm := _MATCHERS.get(key)) is None:
        label = "all" if key is None else ",".join(sorted(key))
        pm = _MATCHERS[key] = PatternMatcher([(f.pat, f.fn, f.name) for f in folds_of(key)],
                                             name=f"canonicalize[{label}]")
    return pm


# ---- effects ---------------------------------------------------------------------------------------------------------
class _SideEffectOps(dict):
    """OpDef -> has the SIDE_EFFECT trait (Flag arithmetic is slow on a hot path)."""

    def __missing__(self, op: OpDef) -> bool:
        v = self[op] = op.has(Trait.SIDE_EFFECT)
        return v


_SIDE_EFFECT = _SideEffectOps()


class EffectCache:
    """"Does computing this value run a side effect (a buffer write, a kernel call)?", answered once per node."""

    __slots__ = ("_memo", "evaluated")

    def __init__(self) -> None:
        self._memo: dict[UOp, bool] = {}
        self.evaluated = 0  # nodes whose answer was computed (each once): the work done, for tests

    def has_effect(self, x: UOp) -> bool:
        memo = self._memo
        if (r := memo.get(x)) is not None:
            return r
        side = _SIDE_EFFECT
        stack = [x]  # explicit stack: graphs can be 10^5 nodes deep
        while stack:
            n = stack[-1]
            if n in memo:
                stack.pop()
                continue
            pending = [s for s in n.src if s not in memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            memo[n] = side[n.op] or any(memo[s] for s in n.src)
            self.evaluated += 1
        return memo[x]


class FoldContext:
    """The rewrite context fold callbacks expect. Passes that add their own patterns to `fold_matcher()` subclass
    it, or give their context an `effects` attribute."""

    def __init__(self) -> None:
        self.effects = EffectCache()


def has_effect(ctx: Any, x: UOp) -> bool:
    """x has a side effect below it; memoized through ctx's EffectCache (a fresh walk when ctx has none)."""
    cache = getattr(ctx, "effects", None)
    return (cache if isinstance(cache, EffectCache) else EffectCache()).has_effect(x)


def canonicalize_graph(root: UOp, dialects: Iterable[str] | None = None, stats: RewriteStats | None = None) -> UOp:
    """Rewrite `root` (not its nested regions) with the folds of `dialects` (all for None) to a fixed point."""
    return graph_rewrite(root, fold_matcher(dialects), ctx=FoldContext(), stats=stats)
