"""What kernel-optimize's heuristic (and the opts that read a kernel's structure, `pack`) know about a kernel: its
output and reduction ranges, loads and stores, and which depends on which."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import Deps, const_extent, linear_coeffs, range_deps

__all__ = ["KernelFacts", "address_of", "pow2_divisor", "fullest_divisor"]


def address_of(ptr: UOp) -> tuple[UOp, UOp | None] | None:
    """(offset, gate) of a pointer `kernel.index base, off [, gate]` on a base that varies over no range."""
    if ptr.op is not K.INDEX or ptr.operands.ptr.op is not K.PARAM:
        return None
    return ptr.operands.offset, ptr.operands.gate


@dataclass
class KernelFacts:
    """Facts about one kernel: its output and reduction ranges, loads and stores, and who depends on what."""

    kdef: UOp
    deps: Deps = field(init=False)
    out: list[UOp] = field(init=False)  # output ranges, outermost first (as the ends list them)
    loads: list[UOp] = field(init=False)
    stores: list[UOp] = field(init=False)
    reduces: list[UOp] = field(init=False)
    _lane_deps: Deps | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        order = list(self.kdef.toposort())
        self.deps = range_deps(order)
        self.loads = [u for u in order if u.op is K.LOAD]
        self.stores = [u for u in order if u.op is K.STORE]
        self.reduces = [u for u in order if u.op is K.REDUCE]
        out: dict[UOp, None] = {}
        for u in reversed(order):  # the outermost end first (it consumes the ends nested in it: kernel-peel's)
            if u.op is K.END:
                out.update((r, None) for r in u.operands.ranges if r.attrs.kind in ("loop", "global"))
        self.out = list(out)

    def stored(self, r: UOp) -> int:
        """How many elements the stores inside range r write (of a peeled kernel's segments, the interior's most)."""
        most = 0
        for st in self.stores:
            deps = self.deps[st]
            if r in deps:
                most = max(most, math.prod(const_extent(q) or 1 for q in deps if q.attrs.kind in ("loop", "global")))
        return most

    def segments(self) -> list[list[UOp]]:
        """The output ranges grouped by the loop nests they form (a kernel-peel segment each: ranges joined by a
        store under them), the nest that stores the most first (the interior); one group for an unpeeled kernel."""
        group: dict[UOp, int] = {r: i for i, r in enumerate(self.out)}

        def find(r: UOp) -> UOp:
            while self.out[group[r]] is not r:
                r = self.out[group[r]]
            return r
        for st in self.stores:
            rs = [r for r in self.deps[st] if r in group]
            for r in rs[1:]:
                a, b = find(rs[0]), find(r)
                if a is not b:
                    group[b] = group[a]
        segs: dict[UOp, list[UOp]] = {}
        for r in self.out:
            segs.setdefault(find(r), []).append(r)
        return sorted(segs.values(), key=lambda rs: -max(self.stored(r) for r in rs))

    def red_ranges(self) -> set[UOp]:
        return {r for u in self.reduces for r in u.operands.ranges}

    def coeff(self, mem: UOp, r: UOp) -> int | None:
        """The stride of r in the address of a load/store (0: it does not vary along r); None when not linear or
        gated along r."""
        a = address_of(mem.operands.ptr)
        if a is None:
            return None
        off, gate = a
        gates = [gate] if gate is not None else []
        if mem.op is K.LOAD and mem.operands.gate is not None:
            gates.append(mem.operands.gate)
        if any(r in self.deps[g] for g in gates):
            return None
        c = linear_coeffs(off, frozenset((r,)), self.deps)
        return None if c is None else c.get(r, 0)

    def contiguous(self, r: UOp, load_strides: tuple[int, ...] = (1,), reduced_only: bool = False) -> bool:
        """Every store varying along r has stride 1 in it, and every load that varies along r one of `load_strides`
        (gates along r count as no stride). (1, LOAD_STRIDE): kernel-expand reads a stride-2 load's span (a pool).
        `reduced_only`: only the loads under a reduction count (a register tile's inner loop; an epilogue's strided
        read, once per output, becomes a gather of lanes: a ViT's residual read from the transposed patch conv)."""
        st = [s for s in self.stores if r in self.deps[s]]
        red = self.red_ranges() if reduced_only else set()
        return bool(st) and all(self.coeff(m, r) == 1 for m in st) and \
            all(self.coeff(x, r) in load_strides for x in self.loads
                if r in self.deps[x] and (not reduced_only or self.deps[x] & red))

    def reuse(self, r: UOp) -> int:
        """How many reads under a reduction do not vary along r (each is reused by every r iteration)."""
        red = self.red_ranges()
        return sum(1 for x in self.loads if self.deps[x] & red and r not in self.deps[x])

    def vector_reuse(self, r: UOp, vec: UOp | None) -> int:
        """How many reads under a reduction that vary along the vector range `vec` (vector loads) do not vary along
        r: tiling r beside vec reuses each such vector r times (a conv's input row across output channels), where a
        range whose tile reuses only broadcast scalars (a conv's weights across rows) would reload the vectors."""
        if vec is None or r is vec:
            return 0
        red = self.red_ranges()
        return sum(1 for x in self.loads if self.deps[x] & red and vec in self.deps[x] and r not in self.deps[x])

    def out_dtype(self) -> DType:
        return self.stores[0].operands.value.dtype if self.stores else dtypes.float32

    def expanded_ops(self, factors: dict[UOp, int]) -> int:
        """How many scalar ops kernel-expand can make of this kernel when each range r in `factors` becomes
        factors[r] lanes: an op is copied once per lane of the split ranges it depends on (an upper bound; a
        contiguous access becomes one vector op instead)."""
        if self._lane_deps is None:
            self._lane_deps = range_deps(self.kdef.toposort(), reduce_consumes=True)
        total = 0
        for rs in self._lane_deps.values():
            n = 1
            for r in rs:
                n *= factors.get(r, 1)
            total += n
        return total

    def work(self) -> int:
        """The iterations the kernel runs: over its loop nests (kernel-peel's segments, a tail's body and tail, a
        concat's pieces) the sum of each nest's output iterations times the reduction steps of what it stores (each
        reduction counted once, in the first store that reads it). What the thread split and the code-size budget
        weigh: a product over every nest's ranges would count a padded copy's border rows times its columns."""
        seen: set[UOp] = set()

        def steps(v: UOp) -> int:
            total = 0
            for u in v.toposort():
                if u.op is K.REDUCE and u not in seen:
                    seen.add(u)
                    total += math.prod(const_extent(r) or 1 for r in u.operands.ranges)
            return max(1, total)

        def runs(u: UOp) -> int:
            if u.op is K.END:
                n = math.prod(const_extent(r) or 1 for r in u.operands.ranges if r.attrs.kind in ("loop", "global"))
                return n * runs(u.operands.value)
            if u.op is K.STORE:
                return steps(u.operands.value)
            return sum(runs(s) for s in u.src) if u.op is core.GROUP else 0
        return max(1, sum(runs(s) for s in self.kdef.src))


def pow2_divisor(n: int, cap: int) -> int:
    """The largest power of two <= cap that divides n (1 if none above 1)."""
    f = 1
    while f * 2 <= cap and n % (f * 2) == 0:
        f *= 2
    return f


def fullest_divisor(n: int, vw: int, cap: int, f: int) -> int:
    """The divisor of n up to cap whose lanes fill their vectors best (lanes / (vectors * vw)), the larger on a tie;
    f (a power of two below vw) unless one fills them better: a 14x14 plane's 196 = 7 x 28 lanes (two vectors of 16,
    7/8 full) where its power of two, 4, fills a quarter of one; a 7-wide row whole rather than scalar."""
    def fill(d: int) -> float:
        return d / (-(-d // vw) * vw)
    best = max((d for d in range(2, min(n, cap) + 1) if n % d == 0), key=lambda d: (fill(d), d), default=f)
    return best if fill(best) > fill(f) else f


