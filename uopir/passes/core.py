"""`canonicalize` and `dce`: the dialect-agnostic clean-up passes every pipeline uses between lowerings.

canonicalize runs the folds and canonicalization patterns that each dialect declares beside its ops
(uopir.ir.folds, filled by uopir.dialects.*): for each graph, those of the dialects present in it (or only of the
dialects named by `canonicalize{dialects=core,tensor}`), to a fixed point. Every fold is exact against the
reference semantics (uopir.dialects.semantics), so canonicalizing never changes a result.

dce: in a hash-consed graph every node is reachable from the root, so "dead" means *computed but unobservable*:
a pure value (no side-effecting op anywhere below it) that is an operand of an op that only collects effects (trait
COLLECTS_EFFECTS: `core.group`, `kernel.def`) is dropped, and so is the root `core.sink`'s when `dce{results=false}`
(at kernel and device level a sink holds effects; at tensor level, the default, its operands are the program's
results and stay, and so do those of a sink nested in it: a tuple of results). Repeated operands of sink/group are
dropped, a `core.group` nested in a sink or group is flattened into it, and an empty group disappears — except in
the root `core.sink` (and its nested result sinks) while its operands are results (the default): results are read by
position, so that sink is left exactly as it is. Both passes also run inside every
nested region (kernel bodies). Both answer "has a side effect below?" once per node per run (an EffectCache).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from uopir.dialects import core
from uopir.ir.dtype import dtypes
from uopir.ir.folds import EffectCache, FoldContext, fold_matcher
from uopir.ir.ops import DIALECTS, Trait
from uopir.ir.regions import map_regions
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp, gc_paused
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass, register_pipeline

__all__ = ["canonicalize", "dce", "CanonicalizeOptions", "DceOptions"]


def _in_regions(root: UOp, fn: Callable[[UOp], UOp]) -> UOp:
    """Apply fn to the graph and to every nested region in it."""
    root = fn(root)
    return map_regions(root, lambda r: True, lambda r: _in_regions(r, fn))


# ---- canonicalize ----------------------------------------------------------------------------------------------------
@dataclass
class CanonicalizeOptions:
    """canonicalize's options."""
    regions: bool = field(default=True, metadata={"help": "also canonicalize nested regions (kernel bodies)"})
    dialects: list[str] = field(default_factory=list, metadata={
        "help": "only the folds of these dialects (default: of every dialect present in the graph)"})

    def __post_init__(self) -> None:
        unknown = [d for d in self.dialects if d not in DIALECTS]
        if unknown:
            raise ValueError(f"unknown dialect '{unknown[0]}' in dialects (dialects: {', '.join(sorted(DIALECTS))})")


@register_pass("canonicalize", summary="fold constants and apply the canonicalization patterns each dialect declares",
               consumes=(), produces=("core",), options=CanonicalizeOptions)
def canonicalize(root: UOp, options: CanonicalizeOptions, ctx: PassContext) -> UOp:
    only = set(options.dialects)

    def run(g: UOp) -> UOp:
        present = {u.op.dialect for u in g.toposort()}
        return graph_rewrite(g, fold_matcher(present & only if only else present), ctx=FoldContext(),
                             stats=ctx.stats)
    return _in_regions(root, run) if options.regions else run(root)


# ---- dce -----------------------------------------------------------------------------------------------------------
def _prune(u: UOp, effects: EffectCache, ctx: PassContext) -> UOp:
    """Operands of a sink/group/def without duplicates, nested groups flattened, dead values dropped."""
    out: list[UOp] = []
    seen: set[UOp] = set()
    stack = list(reversed(u.src))
    flatten_into = u.op is core.GROUP or u.op is core.SINK
    while stack:
        s = stack.pop()
        if flatten_into and s.op is core.GROUP and s.tag is None:
            stack.extend(reversed(s.src))
            ctx.count("groups-flattened")
            continue
        if s in seen:
            ctx.count("duplicates-removed")
            continue
        if s.dtype is not dtypes.void and not effects.has_effect(s):
            ctx.count("dead-values-removed")
            continue
        seen.add(s)
        out.append(s)
    return u if tuple(out) == u.src else u.replace(src=tuple(out))


def _result_sinks(g: UOp) -> set[UOp]:
    """The root sink and every sink nested in it as a result (a tuple of results): their operands are read by
    position, so dce leaves them as written."""
    out: set[UOp] = set()
    stack = [g] if g.op is core.SINK else []
    while stack:
        u = stack.pop()
        if u not in out:
            out.add(u)
            stack.extend(s for s in u.src if s.op is core.SINK)
    return out


@dataclass
class DceOptions:
    """dce's options."""
    results: bool = field(default=True, metadata={
        "help": "the root sink's value operands are results (kept); false drops pure values from it too"})


@register_pass("dce", summary="remove unobservable values from sinks and groups; flatten and dedupe them",
               consumes=(), produces=(), options=DceOptions)
def dce(root: UOp, options: DceOptions, ctx: PassContext) -> UOp:
    def run(g: UOp) -> UOp:
        effects = EffectCache()
        new_map: dict[UOp, UOp] = {}
        before = g.toposort()
        results = _result_sinks(g) if options.results else set()
        for u in before:  # sources first, so a pruned collector is seen pruned by its users
            src = tuple([new_map[s] for s in u.src])
            n = u if src == u.src else u.replace(src=src)
            if n.op.has(Trait.COLLECTS_EFFECTS) and u not in results:
                n = _prune(n, effects, ctx)
            new_map[u] = n
        out = new_map[g]
        ctx.count("nodes-removed", max(0, len(before) - len(out.toposort())))
        return out

    with gc_paused():  # like the rewriter: many short-lived nodes, no cycles
        return _in_regions(root, run)


# ---- named pipelines -------------------------------------------------------------------------------------------------
@dataclass
class CleanupOptions:
    """cleanup's options."""
    dce: bool = field(default=True, metadata={"help": "run dce after canonicalize"})


register_pipeline("cleanup", CleanupOptions, lambda o: "canonicalize,dce" if o.dce else "canonicalize",
                  summary="canonicalize, then dce")
