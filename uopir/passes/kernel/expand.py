"""kernel-expand: upcast and unroll ranges become vector lanes; afterwards no range of those kinds remains.

A value that varies over some upcast/unroll ranges (its *lane axes*, ordered by axis number, the last fastest)
becomes one lane per point of those ranges, in one of two forms:
  - a vector: ALU ops, casts and loads of data become one op on `vector<L x T>`; an operand with fewer lane axes is
    widened with `core.gep` (repeated or permuted lanes) or, when it has none, a vector constant / `core.vectorize`;
  - per-lane scalars: index math, pointers and conditions built from them stay scalar, one copy per lane with the
    range replaced by the lane's constant and folded (`r_o * 4 + 2`), so addresses stay plain integers.
Memory: a load or store whose address is linear in a lane axis with stride 1 (and whose gates do not vary along it)
becomes one vector access per point of its other lane axes, at the address of that run's first lane (`kernel.load
%p : vector<4xf32>` reads 4 consecutive elements); an ungated load reading every other element along one
(LOAD_STRIDE: a stride-2 pool's window, a stride-2 conv's row) reads the run's span and takes every other lane
(`core.gep`), also where a shorter stride-1 run exists (a 5x5/2 window: 16 outputs beside 5 taps of a row are 25
spans of 31, not 80 loads of 5 taps); on a target with masked vectors a shorter strided row reads one span for all
the taps of a window row (`row_taps`); any other access is one scalar access per lane (a gather, a scatter: the
stores grouped with `core.group`).
Reductions: a kernel.reduce over unroll (or upcast) ranges, which must be its innermost (last) range operands,
becomes a kernel.reduce of a vector with fewer result lanes: its value is arranged result-lane-major, reduced lanes
minor (in the reduce's range order), and each run of lanes folds into one result lane after the remaining ranges,
exactly the order the unexpanded reduce accumulated in (so float sums are bit-identical). A kernel.end forgets its
upcast/unroll ranges (an end with none left is dropped, its value taking its place).

Plain code rather than patterns: a node's lanes depend on the lane axes of the whole graph below it, computed once in
one toposort pass.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.regions import map_regions
from uopir.ir.uop import UOp
from uopir.passes.kernel.anchors import is_kernel_body
from uopir.passes.kernel.indexmath import ALU, const_extent, linear_coeffs, range_deps, rebuild
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import check_target_option, target

__all__ = ["expand_kernel", "LANE_KINDS", "MAX_LANES"]

LANE_KINDS = ("upcast", "unroll")
MAX_LANES = 4096  # the widest vector kernel-expand builds (a bound on the IR it writes, far above any target's)
LOAD_STRIDE = 2  # a load reading every other element along a lane axis reads the span and picks its lanes
SHORT_RUN = 4  # a load whose stride-1 run is shorter than this reads the span of all its lanes when it is dense
SPAN_DENSITY = 2  # ... at most this many elements per lane
# a strided row of at most this many lanes (a 7x7 plane's 7 outputs at stride 2) reads its taps' span once per window
# row (row_taps); a longer row's taps each read the span of the row (a row of 16: 5 spans of 31, not 1 of 35 that
# device-devectorize would cut into loads of 31 again)
TAP_SPAN_MAX_ROW = 8
Layout = tuple[UOp, ...]  # lane axes, the last fastest
_VECTOR_OPS = ALU | {core.CAST, core.BITCAST}
_VOID_COLLECTORS = frozenset((K.DEF, core.GROUP, core.SINK))


class _Fail(Exception):
    def __init__(self, u: UOp, msg: str):
        super().__init__(msg)
        self.u, self.msg = u, msg


# ---- lane helpers that fold as they build ----------------------------------------------------------------------------
def gep(v: UOp, idx: list[int]) -> UOp:
    """Lanes idx of vector v (one index: a scalar), looking through gep, vectorize and vector constants."""
    if idx == list(range(v.dtype.count)):
        return v
    if v.op is core.GEP:
        lanes = v.attrs.idx
        return gep(v.operands.x, [lanes[i] for i in idx])
    d = v.dtype.scalar.vec(len(idx))
    if v.op is core.VECTORIZE:
        return v.src[idx[0]] if len(idx) == 1 else vectorize([v.src[i] for i in idx])
    if v.op is core.CONST and type(v.arg) is tuple:
        vals = v.attrs.value
        return UOp.const(d, vals[idx[0]] if len(idx) == 1 else tuple(vals[i] for i in idx))
    return UOp(core.GEP, d, (v,), tuple(idx))


def vectorize(xs: list[UOp]) -> UOp:
    """A vector of scalars xs; lanes picked from one vector become a gep of it, constants a vector constant."""
    if len(xs) == 1:
        return xs[0]
    if all(x.op is core.GEP and len(x.attrs.idx) == 1 and x.operands.x is xs[0].operands.x for x in xs):
        return gep(xs[0].operands.x, [x.attrs.idx[0] for x in xs])
    if all(x.op is core.CONST for x in xs):
        return UOp.const(xs[0].dtype.vec(len(xs)), tuple(x.arg for x in xs))
    return UOp(core.VECTORIZE, xs[0].dtype.vec(len(xs)), tuple(xs))


# ---- layouts ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Lanes:
    """The points of a layout, in lane order, each as {range: value}."""

    layout: Layout
    extents: tuple[int, ...]

    def points(self) -> list[dict[UOp, int]]:
        return [dict(zip(self.layout, p, strict=True)) for p in itertools.product(*(range(n) for n in self.extents))]

    def index(self, point: dict[UOp, int]) -> int:
        i = 0
        for r, n in zip(self.layout, self.extents, strict=True):
            i = i * n + point[r]
        return i

    @property
    def size(self) -> int:
        n = 1
        for e in self.extents:
            n *= e
        return n


class _Expander:
    """Expands one kernel body (see the module docstring)."""

    def __init__(self, kdef: UOp, row_taps: bool = False):
        self.row_taps_ok = row_taps  # a short strided row's taps read one span (row_taps)
        self.order = list(kdef.toposort())
        self.lane_ranges = [u for u in self.order if u.op is K.RANGE and u.attrs.kind in LANE_KINDS]
        axes = [r.attrs.axis for r in self.lane_ranges]
        for r in self.lane_ranges:
            n = const_extent(r)
            if n is None:
                raise _Fail(r, f"an {r.attrs.kind} range needs a constant extent to become vector lanes")
            if not 1 <= n <= MAX_LANES:
                raise _Fail(r, f"an {r.attrs.kind} range of extent {n} cannot become vector lanes (1 to {MAX_LANES})")
            if axes.count(r.attrs.axis) > 1:
                raise _Fail(r, f"two {'/'.join(LANE_KINDS)} ranges share axis {r.attrs.axis}")
        lane_set = frozenset(self.lane_ranges)
        self.extent = {r: const_extent(r) for r in self.lane_ranges}
        self.deps = range_deps(self.order, keep=lambda r: r in lane_set, reduce_consumes=True)
        self.new: dict[UOp, UOp] = {}  # nodes without lane axes, rebuilt
        self.vecs: dict[UOp, UOp] = {}  # nodes with lane axes as one vector (lanes in layout order)
        self.lanes: dict[UOp, list[UOp]] = {}  # nodes with lane axes as one scalar per lane
        self._layouts: dict[Layout, _Lanes] = {}
        self._points: dict[_Lanes, list[dict[UOp, int]]] = {}  # each layout's points, made once (read only)
        self._proj: dict[tuple[UOp, Layout], list[int]] = {}  # project(s, the points of a layout), made once
        self._own: dict[UOp, _Lanes] = {}  # each node's own lanes (project)
        self.stats: dict[str, int] = {}
        self.current = kdef  # the node being expanded (where an error is reported)

    def count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    # layouts and projections
    def lanes_of(self, layout: Layout) -> _Lanes:
        lanes = self._layouts.get(layout)
        if lanes is not None:
            return lanes
        lanes = _Lanes(layout, tuple(self.extent[r] for r in layout))
        if lanes.size > MAX_LANES:
            u = self.current
            axes = ", ".join(f"axis {r.attrs.axis}" for r in layout)
            raise _Fail(u, f"{u.op.name} would have {lanes.size} lanes (over {axes}); kernel-expand makes at most "
                           f"{MAX_LANES}")
        self._layouts[layout] = lanes
        return lanes

    def points_of(self, layout: Layout) -> list[dict[UOp, int]]:
        """The points of a layout (`_Lanes.points`), the same list for every reader: not to be changed."""
        lanes = self.lanes_of(layout)
        pts = self._points.get(lanes)
        if pts is None:
            pts = self._points[lanes] = lanes.points()
        return pts

    def layout(self, u: UOp) -> Layout:
        return tuple(sorted(self.deps[u], key=lambda r: r.attrs.axis))

    def project(self, s: UOp, points: list[dict[UOp, int]]) -> list[int]:
        """For each point (of a layout containing s's lane axes), the index of s's lane at that point."""
        own = self._own.get(s)
        if own is None:  # once per node: scalar() projects every lane of every reader
            own = self._own[s] = self.lanes_of(self.layout(s))
        return [own.index(p) for p in points]

    def project_all(self, s: UOp, layout: Layout) -> list[int]:
        """project(s, the points of layout), computed once per (s, layout) by strides rather than point by point
        (s's lane index is the sum over its axes of the point's value times the axis's stride): read only."""
        got = self._proj.get((s, layout))
        if got is not None:
            return got
        own = self._own.get(s)
        if own is None:
            own = self._own[s] = self.lanes_of(self.layout(s))
        if not set(own.layout) <= set(layout):  # a point would lack an axis of s: let project say so
            got = self.project(s, self.points_of(layout))
        else:
            stride, weight = 1, {}
            for r, n in zip(reversed(own.layout), reversed(own.extents), strict=True):
                weight[r] = stride
                stride *= n
            got = [0]
            for r in layout:  # outermost first: product order, the last axis fastest
                w = weight.get(r, 0)
                got = [x + i * w for x in got for i in range(self.extent[r])]
        self._proj[s, layout] = got
        return got

    # a source in the form a user needs
    def scalar(self, s: UOp, point: dict[UOp, int]) -> UOp:
        """s's scalar at one point."""
        if not self.deps[s]:
            return self.new[s]
        i = self.project(s, [point])[0]
        return self.lanes[s][i] if s in self.lanes else gep(self.vecs[s], [i])

    def scalars(self, s: UOp, layout: Layout) -> list[UOp]:
        """s's scalar at each point of layout (`scalar` for each point, in order)."""
        if not self.deps[s]:
            return [self.new[s]] * self.lanes_of(layout).size
        idx = self.project_all(s, layout)
        lanes = self.lanes.get(s)
        if lanes is not None:
            return [lanes[i] for i in idx]
        v = self.vecs[s]
        return [gep(v, [i]) for i in idx]

    def vector(self, s: UOp, points: list[dict[UOp, int]]) -> UOp:
        """s at these points, as one vector (a scalar for one point)."""
        if not self.deps[s]:
            x = self.new[s]
            if len(points) == 1:
                return x
            if x.op is core.CONST:
                return UOp.const(x.dtype.vec(len(points)), (x.arg,) * len(points))
            return UOp(core.VECTORIZE, x.dtype.vec(len(points)), (x,) * len(points))
        idx = self.project(s, points)
        return gep(self.vecs[s], idx) if s in self.vecs else vectorize([self.lanes[s][i] for i in idx])

    # ---- the walk ----------------------------------------------------------------------------------------------------
    def run(self) -> UOp:
        for u in self.order:
            self.visit(u)
        return self.new[self.order[-1]]

    def visit(self, u: UOp) -> None:
        self.current = u
        op = u.op
        if op is K.STORE:
            self.new[u] = self.store(u) if self.deps[u] else self.same(u)
        elif op is K.END:
            rest = tuple(self.new[r] for r in u.operands.ranges if r not in self.extent)
            v = self.effect(u, u.operands.value)
            self.new[u] = u.replace(src=(v, *rest)) if rest else v
            if not rest:
                self.count("ends-dropped")
        elif op is K.REDUCE:
            self.reduce(u)
        elif u.dtype is dtypes.void or op in _VOID_COLLECTORS:
            src = tuple(self.effect(u, s) for s in u.src)
            self.new[u] = u if src == u.src else u.replace(src=src)
        elif not self.deps[u]:
            self.new[u] = self.same(u)
        elif u.dtype.count > 1:
            raise _Fail(u, f"{op.name} is already a vector ({u.dtype}); kernel-expand widens scalars only")
        elif op is K.RANGE:
            if u not in self.extent:
                raise _Fail(u, f"a range's extent cannot vary over upcast/unroll ranges ({self._names(u)})")
            self.lanes[u] = [UOp.const(dtypes.index, i) for i in range(self.extent[u])]
        elif op is K.LOAD:
            self.load(u)
        elif op in _VECTOR_OPS and not u.dtype.is_ptr and u.dtype is not dtypes.index and \
                any(s in self.vecs for s in u.src):
            points = self.points_of(self.layout(u))
            self.vecs[u] = rebuild(u, tuple(self.vector(s, points) for s in u.src), u.dtype.vec(len(points)))
            self.count("vector-ops")
        else:  # per-lane scalars: each source's lane at every point, then one rebuilt node per point
            layout = self.layout(u)
            n = self.lanes_of(layout).size
            cols = [self.scalars(s, layout) for s in u.src]
            self.lanes[u] = [rebuild(u, tuple(c[j] for c in cols)) for j in range(n)]

    def same(self, u: UOp) -> UOp:
        """u (without lane axes) on its rebuilt operands, not folded: expansion changes nothing else."""
        src = tuple(self.new[s] for s in u.src)
        return u if src == u.src else u.replace(src=src)

    def effect(self, u: UOp, s: UOp) -> UOp:
        """Operand s of a void op u, which must not be a value that varies over lanes (effects are per lane)."""
        if s not in self.new:
            raise _Fail(u, f"{u.op.name} takes {s.op.name}, a value that varies over {self._names(s)}; kernel-expand "
                           f"only expands effects (stores) under void ops")
        return self.new[s]

    def _names(self, u: UOp) -> str:
        return ", ".join(f"axis {r.attrs.axis}" for r in self.layout(u))

    # ---- memory ------------------------------------------------------------------------------------------------------
    def run_axis(self, ptr: UOp, gates: list[UOp], layout: Layout, stride: int = 1) -> UOp | None:
        """The lane axis along which the access at ptr touches every `stride`-th element (1: consecutive ones; gates
        constant along it), the longest such, the innermost of equals; None when there is none (a gather/scatter)."""
        if ptr.op is not K.INDEX or self.deps[ptr.operands.ptr]:
            return None
        gate = ptr.operands.gate
        gates = gates + ([gate] if gate is not None else [])
        best: UOp | None = None
        for r in reversed(layout):  # linear in r alone: the other lane axes may index any way (a tap k//3, k%3)
            if self.extent[r] < 2 or any(r in self.deps[g] for g in gates):
                continue
            c = linear_coeffs(ptr.operands.offset, frozenset((r,)), self.deps)
            if c is not None and c.get(r) == stride and (best is None or self.extent[r] > self.extent[best]):
                best = r  # the longest run (a conv's row of 56 under 3 taps), the innermost of equals
        return best

    def span(self, ptr: UOp, layout: Layout) -> tuple[dict[UOp, int], list[int], int] | None:
        """When the address is linear in every lane axis with non-negative strides and the lanes cover a span at most
        SPAN_DENSITY times their count (a stride-2 pool's row and taps: 2*x + kx), (the first point, each lane's
        offset in the span, its width); else None."""
        if len(layout) < 2 or ptr.op is not K.INDEX or self.deps[ptr.operands.ptr] or ptr.operands.gate is not None:
            return None
        c = linear_coeffs(ptr.operands.offset, frozenset(layout), self.deps)
        if c is None or any(c.get(r, 0) < 0 for r in layout):
            return None
        lanes = self.lanes_of(layout)
        width = 1 + sum(c.get(r, 0) * (self.extent[r] - 1) for r in layout)
        if width > SPAN_DENSITY * lanes.size or width > MAX_LANES:
            return None
        first = {r: 0 for r in layout}
        return first, [sum(c.get(r, 0) * p[r] for r in layout) for p in lanes.points()], width

    def runs(self, layout: Layout, axis: UOp) -> list[tuple[dict[UOp, int], list[dict[UOp, int]]]]:
        """The layout's points grouped into runs along `axis`: (first point, the run's points in order)."""
        other = self.lanes_of(tuple(r for r in layout if r is not axis))
        out = []
        for p in other.points():
            run = [{**p, axis: i} for i in range(self.extent[axis])]
            out.append((run[0], run))
        return out

    def load(self, u: UOp) -> None:
        layout = self.layout(u)
        lanes = self.lanes_of(layout)
        ptr, alt, gate = u.operands.ptr, u.operands.alt, u.operands.gate
        gated = gate is not None
        axis, stride = self.run_axis(ptr, [gate] if gated else [], layout), 1
        if not gated and (axis is None or self.extent[axis] < SHORT_RUN) and (span := self.span(ptr, layout)):
            first, lens, width = span  # one load of the span the lanes read, each lane picked from it
            wide = UOp(K.LOAD, u.dtype.vec(width), (self.scalar(ptr, first),))
            self.vecs[u] = gep(wide, lens)
            self.count("span-loads")
            return
        if not gated and ptr.op is K.INDEX and ptr.operands.gate is None:  # a longer run at stride 2 wins
            wide = self.run_axis(ptr, [], layout, LOAD_STRIDE)
            if wide is not None and (axis is None or self.extent[wide] > self.extent[axis]):
                if self.row_taps_ok and axis is not None and self.extent[wide] <= TAP_SPAN_MAX_ROW and \
                        self.row_taps(u, ptr, layout, (axis, wide)):
                    return
                axis, stride = wide, LOAD_STRIDE
        if axis is None:  # one scalar load per lane
            self.lanes[u] = [rebuild(u, tuple(self.scalar(s, p) for s in u.src)) for p in lanes.points()]
            self.count("scalar-loads", lanes.size)
            return
        chunks: list[tuple[list[dict[UOp, int]], UOp]] = []
        for first, run in self.runs(layout, axis):
            src = (self.scalar(ptr, first),)
            if gated:
                src += (self.vector(alt, run), self.scalar(gate, first))
            if stride == 1:
                chunks.append((run, UOp(K.LOAD, u.dtype.vec(len(run)), src)))
            else:  # the span the run reads, and every other lane of it (a stride-2 window: a pool's)
                span = UOp(K.LOAD, u.dtype.vec((len(run) - 1) * stride + 1), src)
                chunks.append((run, gep(span, list(range(0, (len(run) - 1) * stride + 1, stride)))))
            self.count("vector-loads" if stride == 1 else "strided-vector-loads")
        if len(chunks) == 1 and layout[-1] is axis:
            self.vecs[u] = chunks[0][1]
            return
        where = {}
        for run, v in chunks:
            for i, p in enumerate(run):
                where[lanes.index(p)] = (v, i)
        self.vecs[u] = vectorize([gep(where[i][0], [where[i][1]]) for i in range(lanes.size)])

    def row_taps(self, u: UOp, ptr: UOp, layout: Layout, axes: tuple[UOp, UOp]) -> bool:
        """A short strided row's taps (`axes`: the taps' stride-1 range, the row's stride-2 one) read as one span
        per point of the other lane axes, each tap's lanes picked from it (a 5x5/2 window's row of 7: one span of
        17 for its 5 taps, not 5 of 13; output rows that read the same input row share it: 672 x 14x14 5x5/2, llvm,
        862 -> 597 instructions, 38 -> 25 us); True when done, False when the span would be over SPAN_DENSITY
        elements per lane or MAX_LANES."""
        c = linear_coeffs(ptr.operands.offset, frozenset(axes), self.deps)
        if c is None:
            return False
        n = self.extent[axes[0]] * self.extent[axes[1]]
        width = 1 + sum(c.get(r, 0) * (self.extent[r] - 1) for r in axes)
        if width > SPAN_DENSITY * n or width > MAX_LANES:
            return False
        lanes = self.lanes_of(layout)
        where: dict[int, tuple[UOp, int]] = {}
        other = tuple(r for r in layout if r not in axes)
        for p in self.points_of(other) if other else [{}]:
            first = {**p, **{r: 0 for r in axes}}
            span = UOp(K.LOAD, u.dtype.vec(width), (self.scalar(ptr, first),))
            for i in range(self.extent[axes[0]]):
                for j in range(self.extent[axes[1]]):
                    where[lanes.index({**p, axes[0]: i, axes[1]: j})] = (span, c[axes[0]] * i + c[axes[1]] * j)
            self.count("tap-span-loads")
        self.vecs[u] = vectorize([gep(where[i][0], [where[i][1]]) for i in range(lanes.size)])
        return True

    def store(self, u: UOp) -> UOp:
        layout = self.layout(u)
        ptr, val, gate = u.operands.ptr, u.operands.value, u.operands.gate
        gated = gate is not None
        axis = self.run_axis(ptr, [gate] if gated else [], layout)
        stores: list[UOp] = []
        if axis is None:  # one scalar store per lane
            for p in self.lanes_of(layout).points():
                stores.append(rebuild(u, tuple(self.scalar(s, p) for s in u.src)))
            self.count("scalar-stores", len(stores))
        else:
            for first, run in self.runs(layout, axis):
                src = (self.scalar(ptr, first), self.vector(val, run))
                stores.append(UOp(K.STORE, dtypes.void, src + ((self.scalar(gate, first),) if gated else ())))
            self.count("vector-stores", len(stores))
        return stores[0] if len(stores) == 1 else UOp(core.GROUP, dtypes.void, tuple(stores))

    # ---- reductions --------------------------------------------------------------------------------------------------
    def reduce(self, u: UOp) -> None:
        rs = u.operands.ranges
        red = tuple(r for r in rs if r in self.extent)
        keep = tuple(r for r in rs if r not in self.extent)
        if rs[len(keep):] != red:
            raise _Fail(u, "the upcast/unroll ranges of a kernel.reduce must be its last (innermost) range operands, "
                           "so its lanes can fold after the other ranges in the same order")
        if u.dtype.count > 1 and (red or self.deps[u]):
            raise _Fail(u, f"kernel.reduce is already a vector ({u.dtype}); kernel-expand widens scalars only")
        out = self.layout(u)
        value = u.operands.value
        if not out and not red:
            self.new[u] = self.same(u)
            return
        points = self.lanes_of(out + red).points()
        vin = self.vector(value, points)
        n_out = self.lanes_of(out).size
        r = UOp(K.REDUCE, u.dtype.vec(n_out), (vin, *(self.new[r] for r in keep)), u.arg)
        if red:
            self.count("lane-reductions")
        if out:
            self.vecs[u] = r
        else:
            self.new[u] = r


def expand_kernel(kdef: UOp) -> UOp:
    """One kernel body with its upcast/unroll ranges turned into vector lanes; an IRError located at the op that
    cannot be expanded."""
    try:
        return _expand(kdef)[0]
    except _Fail as f:
        raise IRError(diagnostics=[diag_at(f.u, f"kernel-expand: {f.msg}")]) from None


def _expand(kdef: UOp, row_taps: bool = False) -> tuple[UOp, dict[str, int]]:
    e = _Expander(kdef, row_taps)
    if not e.lane_ranges:
        return kdef, {}
    return e.run(), e.stats


@dataclass
class KernelExpandOptions:
    """The options of kernel-expand."""
    target: str = field(default="cpu", metadata={
        "help": "the target whose description says whether a short strided row's taps read one span (row_taps: on "
                "a target with masked_vectors, where a pick of its lanes is one shuffle)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)


@register_pass("kernel-expand", summary="turn upcast/unroll ranges into vector lanes (vector loads, stores, ALU ops, "
               "lane reductions)", consumes=("kernel",), produces=("kernel", "core"), options=KernelExpandOptions)
def kernel_expand(root: UOp, options: KernelExpandOptions, ctx: PassContext) -> UOp:
    taps = target(options.target).masked_vectors  # the name was checked with the options

    def run(kdef: UOp) -> UOp:
        try:
            out, stats = _expand(kdef, taps)
        except _Fail as f:
            ctx.error(f.u, f"kernel-expand: {f.msg}")
            return kdef
        for k, n in stats.items():
            ctx.count(k, n)
        return out

    return run(root) if is_kernel_body(root) else map_regions(root, is_kernel_body, run)
