"""Walking the regions nested in a graph: which attributes hold regions, a region's name, and rebuilding a graph
after a function changed some of its regions.

Generic over `RegionAttr`: no dialect is named here, so any op whose schema declares a region attribute (a kernel
body inside a tensor-level call, say) is walked the same way.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from uopir.ir.ops import RegionAttr
from uopir.ir.uop import UOp

__all__ = ["region_indices", "regions_of", "region_name", "ops_by_dialect", "count_regions", "map_regions"]


def region_indices(u: UOp) -> list[int]:
    """Positions in u's arg tuple holding a region, or [-1] when the op's only attribute is a region."""
    attrs = u.op.attrs
    idx = [i for i, a in enumerate(attrs) if isinstance(a.type, RegionAttr)]
    if not idx:
        return []
    return [-1] if len(attrs) == 1 else idx


def regions_of(u: UOp) -> Iterator[UOp]:
    """The region roots held by u's attributes (none for most ops)."""
    for i in region_indices(u):
        r = u.arg if i == -1 else u.arg[i]
        if isinstance(r, UOp):
            yield r


def region_name(r: UOp) -> str | None:
    """The `name` attribute of a region root (a kernel's name), if it has one."""
    try:
        vals = r.op.attr_values(r.arg)
    except Exception:  # noqa: BLE001 - a malformed arg has no name; the verifier reports it elsewhere
        return None
    n = vals.get("name")
    return n if isinstance(n, str) else None


def ops_by_dialect(root: UOp) -> dict[str, str]:
    """One op name per dialect present in the graph and in every region nested in it."""
    out: dict[str, str] = {}
    seen: set[UOp] = set()
    stack = [root]
    while stack:
        for u in stack.pop().toposort():
            if u in seen:
                continue
            seen.add(u)
            out.setdefault(u.op.dialect, u.op.name)
            stack.extend(regions_of(u))
    return out


def count_regions(root: UOp, select: Callable[[UOp], bool]) -> int:
    """How many distinct region roots `select` accepts under `root` (searching inside unselected regions too, not
    inside selected ones): the regions map_regions hands to its function."""
    seen, found, stack = set(), set(), [root]
    while stack:
        for u in stack.pop().toposort():
            for r in regions_of(u):
                if r not in seen:
                    seen.add(r)
                    (found.add if select(r) else stack.append)(r)
    return len(found)


def map_regions(root: UOp, select: Callable[[UOp], bool], fn: Callable[[UOp], UOp]) -> UOp:
    """Apply fn to every region root that `select` accepts (searching inside unselected regions too) and
    rebuild every node above a changed region. Each distinct region is transformed once."""
    new: dict[UOp, UOp] = {}
    done: dict[UOp, UOp] = {}

    def region(r: UOp) -> UOp:
        if r not in done:
            done[r] = fn(r) if select(r) else map_regions(r, select, fn)
        return done[r]

    for u in root.toposort():
        src = tuple(new[s] for s in u.src)
        arg = u.arg
        idxs = region_indices(u)
        if idxs:
            if idxs == [-1]:
                if isinstance(arg, UOp):
                    arg = region(arg)
            else:
                lst = list(arg)
                for i in idxs:
                    if isinstance(lst[i], UOp):
                        lst[i] = region(lst[i])
                arg = tuple(lst)
        new[u] = u if (src == u.src and (arg is u.arg or arg == u.arg)) else u.replace(src=src, arg=arg)
    return new[root]
