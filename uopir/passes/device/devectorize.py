"""device-devectorize{width=N target=…}: split vector ops wider than the target allows into narrower ones.

The limit for a dtype is `width` lanes, or with `width=0` the target's `vector_width(dtype)` (1: scalar code). A
wide op becomes one op per part of at most that many lanes (the last part may be shorter), on `core.gep`s of its
vector operands; the parts are joined back with a `core.vectorize` of their lanes, which the gep folds below dissolve
as soon as every reader is split too:

- elementwise ops and casts (a scalar `where` condition stays whole; a bitcast that changes the lane count is left),
  as wide as the narrowest of their result and operands allow (a compare of f32 lanes: the f32 width);
- `kernel.load` of n lanes at offset o: loads of each part at o + start (a gated load's alternative split alike);
- `kernel.store`: one store per part, grouped (`core.group`);
- `device.acc` and its `device.accstore`s: one accumulator per part (fresh ids after the kernel's largest);
- a `core.gep` that picks more lanes than allowed.

Parts are `width` lanes each, the last shorter; a kernel whose stores all write rows of r lanes (more than a quarter
of a vector, no multiple of one) splits a value of whole rows, of at most ROW_SPLIT_MAX_VECTORS vectors, at row
boundaries instead (rows of 14 by 16: 14, 14, ...; a depthwise conv's rows of 7: 7, 7, ...).
When no buffer the kernel stores to is also read by it, a shorter last part (of a value or a row) is instead the last
`width` lanes, overlapping the part before (55 lanes by 16: 0-15, 16-31, 32-47, 39-54): lanes computed twice are
the same values, stored twice, and the row stays vector code instead of a tail of scalars. The join of such parts
is tagged with their (start, lanes), and a gep of it (`gep-of-vectorize` here) takes lanes within one part from that
part, as `split-part-of-gep` below takes them from the value before the split (lanes held twice come from the part
the reader needs, not half from the part before); a gep of it too wide for the target is left to its readers, whose
geps fold through it. So the eager order (every value split before its readers) gives the bottom-up program.
A stride-2 pick of lanes from three or more parts of a load, at most two vectors apart, is its own load of that span.
At the target's width, unless it has `masked_vectors` (LLVM on AVX-512 takes any lane count), each
part is split again into power-of-two parts, the largest first (14 = 8 + 4 + 2; C keeps a vector of another size
lane by lane).

The rewrite runs bottom-up: a reader is seen before the value it reads, so a gep of lanes within one part of a
wide value becomes that part computed alone (`split-part-of-gep`: the op on the same part of its operands, the load
at the part's offset, the part's accumulator), and a wide value read only through geps is never split whole and
joined back lane by lane (what the rules above do for a value read whole; the result is the same program).

Folds: `gep(vectorize(x…), i…)` picks the x's, `gep(gep(x, a), b)` is one gep, a gep of a constant is a constant,
a gep of every lane in order is its operand, and a vectorize of lanes of one x is a gep of x (x itself for all
of its lanes in order; only a gep no wider than allowed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat, is_vector
from uopir.passes.device.common import in_kernels, resolve_target
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import Target, check_target_option

# the most vectors a value of whole rows may span to be split at row boundaries (a depthwise conv's rows of 14);
# a wider one (16 channels x 14 columns of a conv's register tile) is cut into full vectors across rows instead:
# split per row, every row's tail is a short piece of its own (ResNet's 28/14/7-row 3x3 convs ran 2x slower)
ROW_SPLIT_MAX_VECTORS = 4
# ... and whose rows are longer than 1/ROW_SPLIT_MIN_PART of a vector: a depthwise conv's 7 output rows of 7 (kernel-
# optimize's window tile), 7 masked vectors, one per row load, where parts of 16 lanes would gather every lane of
# the rows they cross (1152 x 7x7 5x5, pad copy included: 110 -> 99 us); rows of a few lanes stay packed
ROW_SPLIT_MIN_PART = 4

__all__ = ["DevectorizeOptions", "kernel_ctx", "device_devectorize", "DEVECTORIZE", "GEP_FOLDS", "gep", "join",
           "at_offset"]


class _Ctx:
    def __init__(self, t: Target, width: int, next_acc: int, row: int = 0, overlap: bool = False,
                 bool_lanes: dict[int, int] | None = None):
        self.t, self.width, self.next_acc, self.row, self.overlap = t, width, next_acc, row, overlap
        self.bool_lanes = bool_lanes or {}  # lane count -> the fewest lanes per vector of a data dtype that wide
        self.acc_parts: dict[UOp, list[UOp]] = {}  # a split accumulator -> its part accumulators
        # a part accumulator's id -> the lanes of the wide one it holds (by id: rewriting its init makes a new node)
        self.acc_lanes: dict[int, tuple[int, ...]] = {}
        self._parts: dict[DType, list[tuple[int, ...]] | None] = {}  # parts() of each dtype met (asked per node)

    def accs(self, u: UOp, parts: list[tuple[int, ...]]) -> list[UOp]:
        """The part accumulators of the wide accumulator u (made once, with fresh ids in part order)."""
        got = self.acc_parts.get(u)
        if got is None:
            got = []
            for p in parts:
                init = _piece(u.operands.init, p, u.dtype.count)
                got.append(UOp(D.ACC, u.dtype.scalar.vec(len(p)), (init, *u.operands.loops), self.next_acc))
                self.acc_lanes[self.next_acc] = p
                self.next_acc += 1
            self.acc_parts[u] = got
        return got

    def limit(self, d: DType) -> int:
        """The most lanes of d per vector; bools (compare results, masks) as many as the data of their lane count
        (a 55-lane `x < 0` of f32 lanes: 16, the f32 width, not the 64 a vector of bytes holds), so that a compare
        and the logic on it split into the same parts as the values compared and selected."""
        if self.width > 0:
            return self.width
        w = self.t.vector_width(d.scalar)
        if d.scalar is dtypes.bool:
            w = min(w, self.bool_lanes.get(d.count, w))
        return max(1, w)

    def _cut(self, start: int, n: int, w: int) -> list[tuple[int, ...]]:
        """Lanes start..start+n-1 in parts of w; a shorter last part is the last w lanes (overlapping the one before)
        when the kernel may compute lanes twice, so that a row of 55 is four vectors of 16, not 3 and 7 scalars."""
        got = [tuple(range(start + i, start + min(i + w, n))) for i in range(0, n, w)]
        if self.overlap and n > w and n % w:
            got[-1] = tuple(range(start + n - w, start + n))
        return got

    def parts(self, d: DType) -> list[tuple[int, ...]] | None:
        """The lane indices of each part, or None when d fits (the same list for every node of dtype d: read only)."""
        try:
            return self._parts[d]
        except KeyError:
            pass
        n, w, r = d.count, self.limit(d), self.row
        pow2 = self.width <= 0 and not self.t.masked_vectors and d.scalar is not dtypes.index
        if n <= w:
            got = None if not pow2 or n & (n - 1) == 0 else [tuple(range(n))]
        elif r > w // ROW_SPLIT_MIN_PART and r % w and n % r == 0 and n <= ROW_SPLIT_MAX_VECTORS * w:  # whole rows
            got = [p for s in range(0, n, r) for p in self._cut(s, r, w)]
        else:
            got = self._cut(0, n, w)
        if got is not None and pow2:
            got = [q for p in got for q in _pow2_pieces(p)]
        self._parts[d] = got
        return got


def _pow2_pieces(p: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Lanes p in parts of power-of-two sizes, the largest first (14 lanes: 8, 4, 2)."""
    out, i = [], 0
    while i < len(p):
        k = 1 << ((len(p) - i).bit_length() - 1)
        out.append(p[i:i + k])
        i += k
    return out


def gep(x: UOp, idx: tuple[int, ...]) -> UOp:
    """Lanes idx of x (a scalar for one lane); lanes of a scalar are its broadcast, written as the vectorize the
    eager split builds (so that both rewrite orders give one program)."""
    if x.dtype.count == 1:
        return x if len(idx) == 1 else UOp(C.VECTORIZE, x.dtype.vec(len(idx)), (x,) * len(idx))
    return UOp(C.GEP, x.dtype.scalar.vec(len(idx)), (x,), tuple(idx))


def join(parts: list[UOp], where: list[tuple[int, ...]] | None = None) -> UOp:
    """One vector of the lanes of parts, in order (a scalar part is one lane); with `where` (each part's lanes of
    the whole, ascending), a lane that an earlier part holds too is taken from that one (overlapping parts), and
    the vectorize is tagged with each part's (start, lanes): which lanes a later part holds too, so that a gep of
    lanes within one part is that part (`_part_of_join`), not lanes of two. (Not when the parts are geps: their
    lanes fold into lanes of what they pick, the same lane for a lane two parts hold.)"""
    lanes: list[UOp] = []
    overlapped = False
    for k, p in enumerate(parts):
        skip = 0 if where is None or k == 0 else sum(1 for i in where[k] if i <= where[k - 1][-1])
        overlapped |= skip > 0
        lanes += [p if p.dtype.count == 1 else gep(p, (i,)) for i in range(skip, p.dtype.count)]
    tag = None
    if overlapped and where is not None and all(p.op is not C.GEP for p in parts):
        tag = tuple((w[0], len(w)) for w in where)
    return UOp(C.VECTORIZE, lanes[0].dtype.vec(len(lanes)), tuple(lanes), None, tag)


def _piece(s: UOp, idx: tuple[int, ...], lanes: int) -> UOp:
    """Operand s for the part idx of an op over `lanes` lanes (a scalar operand is shared by every part)."""
    return gep(s, idx) if s.dtype.count == lanes and lanes > 1 else s


def kernel_ctx(k: UOp, t: Target, width: int) -> _Ctx:
    """The splitting context of kernel k: fresh accumulator ids after its largest, and its row: the lanes of its
    stores when they all have the same count (a depthwise conv's rows of 14, stacked in one wide value, split at
    row boundaries, so that each part is one row's vector load instead of lanes gathered across two rows), and its
    mask width: a bool vector splits as the vectors it was compared from (a compare of 28 floats: masks of 16 and
    12 lanes beside their halves, not one 28-lane mask whose bits are moved one by one into each half's select)."""
    order = k.toposort()
    ids = [u.attrs.id for u in order if u.op is D.ACC]
    rows = {u.operands.value.dtype.count for u in order if u.op is K.STORE}
    stored = {K.pointer_base(u.operands.ptr) for u in order if u.op is K.STORE}
    loaded = {K.pointer_base(u.operands.ptr) for u in order if u.op is K.LOAD}
    overlap = all(b is not None and b.op is K.PARAM for b in stored) and not stored & loaded
    bool_lanes: dict[int, int] = {}
    for d in {u.dtype for u in order if u.dtype.count > 1 and u.dtype.scalar not in (dtypes.bool, dtypes.index)}:
        bool_lanes[d.count] = min(bool_lanes.get(d.count, d.count), t.vector_width(d.scalar))
    return _Ctx(t, width, max(ids, default=-1) + 1, rows.pop() if len(rows) == 1 else 0, overlap, bool_lanes)


# ---- patterns --------------------------------------------------------------------------------------------------------
def _op_dtype(ctx: _Ctx, u: UOp) -> DType:
    """The dtype an elementwise op is split by: the one of its result and same-width operands with the fewest lanes
    per vector (a cast of 32 f32 lanes to f16 splits as the f32 do). Only dtypes, which rewriting keeps: the
    same parts whether an operand is met before or after it is split (bottom-up or eager top-down)."""
    n = u.dtype.count
    return min([u.dtype] + [s.dtype for s in u.src if s.dtype.count == n], key=ctx.limit)


def _elementwise(ctx: _Ctx, u: UOp) -> UOp | None:
    parts = ctx.parts(_op_dtype(ctx, u))
    if parts is None or (u.op is C.BITCAST and u.operands.x.dtype.count != u.dtype.count):
        return None
    n = u.dtype.count
    return join([UOp(u.op, u.dtype.scalar.vec(len(p)), tuple(_piece(s, p, n) for s in u.src), u.arg) for p in parts],
                parts)


def at_offset(ptr: UOp, start: int) -> UOp:
    """The pointer `start` elements after ptr."""
    if start == 0:
        return ptr
    off = UOp.const(dtypes.index, start)
    if ptr.op is K.INDEX:
        return ptr.replace(src=(ptr.operands.ptr, _plus(ptr.operands.offset, start), *ptr.src[2:]))
    return UOp(K.INDEX, ptr.dtype, (ptr, off))


def _plus(x: UOp, n: int) -> UOp:
    """The index x + n, folded when x is a constant or already adds one."""
    if x.op is C.CONST:
        return UOp.const(dtypes.index, x.arg + n)
    if x.op is C.ADD and x.src[1].op is C.CONST:
        x, n = x.src[0], x.src[1].arg + n
        if n == 0:
            return x
    return UOp(C.ADD, dtypes.index, (x, UOp.const(dtypes.index, n)))


def _load(ctx: _Ctx, u: UOp) -> UOp | None:
    parts = ctx.parts(u.dtype)
    if parts is None:
        return None
    ptr, rest, n = u.operands.ptr, u.src[1:], u.dtype.count
    return join([UOp(K.LOAD, u.dtype.scalar.vec(len(p)), (at_offset(ptr, p[0]), *(_piece(s, p, n) for s in rest)))
                 for p in parts], parts)


def _store(ctx: _Ctx, u: UOp) -> UOp | None:
    val = u.operands.value
    parts = ctx.parts(val.dtype)
    if parts is None:
        return None
    return UOp(C.GROUP, dtypes.void, tuple(UOp(K.STORE, dtypes.void, (at_offset(u.operands.ptr, p[0]), gep(val, p),
                                                                        *u.src[2:])) for p in parts))


def _acc(ctx: _Ctx, u: UOp) -> UOp | None:
    parts = ctx.parts(u.dtype)
    if parts is None:
        return None
    return join(ctx.accs(u, parts), parts)


def _joined_accs(v: UOp) -> list[UOp] | None:
    """The part accumulators of a split accumulator (a vectorize of their lanes, in order), else None."""
    if v.op is not C.VECTORIZE:
        return None
    accs: list[UOp] = []
    for lane in v.src:
        a = lane.operands.x if lane.op is C.GEP else lane
        if a.op is not D.ACC:
            return None
        if not accs or accs[-1] is not a:
            accs.append(a)
    return accs


def _accstore(ctx: _Ctx, u: UOp) -> UOp | None:
    a = u.operands.acc
    parts = ctx.parts(a.dtype) if a.op is D.ACC else None
    accs = ctx.accs(a, parts) if parts is not None else _joined_accs(a)
    if accs is None:
        return None
    val, stores, where, start = u.operands.value, [], [], 0
    for a in accs:
        n = a.dtype.count
        p = ctx.acc_lanes.get(a.attrs.id, tuple(range(start, start + n)))
        stores.append(UOp(D.ACCSTORE, a.dtype if u.dtype is not dtypes.void else dtypes.void,
                          (a, gep(val, p))))
        where.append(p)
        start = p[-1] + 1
    return join(stores, where) if u.dtype is not dtypes.void else UOp(C.GROUP, dtypes.void, tuple(stores))


def _wide_gep(ctx: _Ctx, u: UOp) -> UOp | None:
    parts = ctx.parts(u.dtype)
    if parts is None:
        return None
    x, idx = u.operands.x, u.attrs.idx
    if x.op is C.VECTORIZE and x.tag is not None:  # left to its readers: see `_gep_of_join`
        return None
    return join([gep(x, tuple(idx[i] for i in p)) for p in parts], parts)


def _gep_of_vectorize(g: UOp, v: UOp) -> UOp:
    picked = [v.src[i] for i in g.attrs.idx]
    return picked[0] if len(picked) == 1 else UOp(C.VECTORIZE, g.dtype, tuple(picked))


def _gep_of_const(g: UOp, c: UOp) -> UOp:
    v = c.arg if type(c.arg) is tuple else (c.arg,) * c.dtype.count  # a scalar const: every lane is it
    idx = g.attrs.idx
    return UOp.const(g.dtype, v[idx[0]] if len(idx) == 1 else tuple(v[i] for i in idx))


def _gep_of_gep(g: UOp, h: UOp) -> UOp:
    return UOp(C.GEP, g.dtype, h.src, tuple(h.attrs.idx[i] for i in g.attrs.idx))


def _gep_all(g: UOp, x: UOp) -> UOp | None:
    return x if g.attrs.idx == tuple(range(x.dtype.count)) else None


def _vectorize_of_geps(ctx: _Ctx, v: UOp) -> UOp | None:
    """Lanes all taken from one vector x: x itself (every lane in order) or one gep of x (when that gep is allowed:
    a wider one would be split again)."""
    first = v.src[0]
    if first.op is not C.GEP:
        return None
    x = first.operands.x
    idx = []
    for s in v.src:
        if s.op is not C.GEP or s.operands.x is not x:
            return None
        idx.extend(s.attrs.idx)
    if x.dtype is v.dtype and idx == list(range(x.dtype.count)):
        return x
    return gep(x, tuple(idx)) if len(idx) <= ctx.limit(v.dtype) else None


def _part_of(ctx: _Ctx, g: UOp, x: UOp) -> UOp | None:
    """A gep of lanes within one part of a value too wide for the target, which is split anyway: that part
    computed alone (an op on the same part of its operands, a load at the part's offset, the part's accumulator),
    and the gep of it. Reached first (devectorize runs bottom-up), so a wide value read only through geps is never
    split whole and joined back lane by lane."""
    parts = ctx.parts(_op_dtype(ctx, x) if x.op in _SPLIT_ALU else x.dtype)
    if parts is None:
        return None
    lanes = g.attrs.idx
    lo, hi = min(lanes), max(lanes)
    k = next((j for j, p in enumerate(parts) if p[0] <= lo and hi <= p[-1]), None)
    if k is None:
        if x.op is not K.LOAD or not ctx.overlap:
            return None
        touched = {next(k for k, p in enumerate(parts) if i in p) for i in lanes}
        return _narrow_load(x, 0, lanes, len(touched), ctx.limit(x.dtype))
    p = parts[k]
    n = x.dtype.count
    if x.op is D.ACC:
        part = ctx.accs(x, parts)[k]
    elif x.op is K.LOAD:
        part = UOp(K.LOAD, x.dtype.scalar.vec(len(p)),
                   (at_offset(x.operands.ptr, p[0]), *(_piece(s, p, n) for s in x.src[1:])))
    elif x.op in _SPLIT_ALU and not (x.op is C.BITCAST and x.operands.x.dtype.count != n):
        part = UOp(x.op, x.dtype.scalar.vec(len(p)), tuple(_piece(s, p, n) for s in x.src), x.arg)
    else:
        return None
    idx = tuple(i - p[0] for i in lanes)
    return part if idx == tuple(range(part.dtype.count)) else gep(part, idx)


def _part_of_join(ctx: _Ctx, g: UOp, v: UOp) -> UOp | None:
    """Lanes of a join of overlapping parts (tagged by `join`) as `split-part-of-gep` takes them from the value
    before it is split, so that both rewrite orders give one program: the first part that holds them all, else a
    load of just their span (`_narrow_load`); else None (also when a part's own lanes are no longer lanes 0.. of
    one node of its width: the tag no longer describes the vectorize)."""
    found: list[UOp | None] = []
    end = 0
    for start, n in v.tag:
        skip = max(0, end - start)
        x = v.src[start + skip].src[0] if v.src[start + skip].op is C.GEP else None
        ok = x is not None and x.dtype.count == n and x.op not in (C.GEP, C.VECTORIZE, C.CONST) and all(
            v.src[start + j].op is C.GEP and v.src[start + j].src[0] is x and v.src[start + j].attrs.idx == (j,)
            for j in range(skip, n))
        found.append(x if ok else None)
        end = start + n
    idx = g.attrs.idx
    lo, hi = min(idx), max(idx)
    for part, (start, n) in zip(found, v.tag, strict=True):
        if start <= lo and hi < start + n:
            if part is None:
                return None
            got = tuple(i - start for i in idx)
            return part if got == tuple(range(n)) else gep(part, got)
    k = next(k for k, (start, n) in enumerate(v.tag) if start <= lo < start + n)
    part = found[k]
    if part is None or part.op is not K.LOAD:
        return None
    touched = {next(j for j, (s, n) in enumerate(v.tag) if s <= i < s + n) for i in idx}
    return _narrow_load(part, v.tag[k][0], idx, len(touched), v.tag[k][1])


def _gep_of_join(ctx: _Ctx, g: UOp, v: UOp) -> UOp | None:
    """`gep-of-vectorize` in device-devectorize: a gep of a tagged join as `_part_of_join` takes it; one too wide
    for the target left whole (not split, not lanes) for its readers, whose geps of its parts fold through it
    (`gep-of-gep`) to geps of the join, as they fold to geps of the value in the bottom-up order."""
    if v.tag is not None:
        if (got := _part_of_join(ctx, g, v)) is not None:
            return got
        if len(g.attrs.idx) > ctx.limit(g.dtype):
            return None
    return _gep_of_vectorize(g, v)


def _narrow_load(x: UOp, start: int, idx: tuple[int, ...], touched: int, width: int) -> UOp | None:
    """Lanes idx of the load x of lanes start.. of a wide load split in overlapping parts of `width`, which no one
    part holds, picked from three or more parts but at most two vectors apart (every other lane of a stride-2
    window's span, past an overlapping last part): a load of just lanes lo..hi, which splits into two overlapping
    vectors, and a gep of it (one shuffle of two vectors, not lanes of three). Ungated loads only."""
    lo, hi = min(idx), max(idx)
    if len(x.src) != 1 or hi - lo + 1 > 2 * width or touched < 3:
        return None
    ld = UOp(K.LOAD, x.dtype.scalar.vec(hi - lo + 1), (at_offset(x.operands.ptr, lo - start),))
    return gep(ld, tuple(i - lo for i in idx))


GEP_FOLDS = [
    (UPat(C.GEP, src=(UPat(C.VECTORIZE, name="v"),), name="g"), _gep_of_vectorize, "gep-of-vectorize"),
    (UPat(C.GEP, src=(UPat(C.GEP, name="h"),), name="g"), _gep_of_gep, "gep-of-gep"),
    (UPat(C.GEP, src=(UPat(C.CONST, name="c"),), name="g"), _gep_of_const, "gep-of-const"),
    (UPat(C.GEP, src=(UPat.var("x"),), name="g"), _gep_all, "gep-of-every-lane"),
    (UPat(C.VECTORIZE, name="v"), _vectorize_of_geps, "vectorize-of-geps"),
]

# device.fma is elementwise too (device-transcendental's polynomials emit it before this pass splits vectors)
_SPLIT_ALU = frozenset((*C.ELEMENTWISE_OPS, D.FMA))

DEVECTORIZE = PatternMatcher([
    (UPat(C.GEP, src=(UPat(C.VECTORIZE, name="v"),), name="g"), _gep_of_join, "gep-of-vectorize"),
    *(f for f in GEP_FOLDS if f[2] != "gep-of-vectorize"),
    (UPat(C.GEP, src=(UPat((D.ACC, K.LOAD, *_SPLIT_ALU), dtype=is_vector, name="x"),), name="g"),
     _part_of, "split-part-of-gep"),
    (UPat(C.GEP, dtype=is_vector, name="u"), _wide_gep, "split-wide-gep"),
    (UPat(tuple(_SPLIT_ALU), dtype=is_vector, name="u"), _elementwise, "split-elementwise"),
    (UPat(K.LOAD, dtype=is_vector, name="u"), _load, "split-load"),
    (UPat(K.STORE, name="u"), _store, "split-store"),
    (UPat(D.ACC, dtype=is_vector, name="u"), _acc, "split-accumulator"),
    (UPat(D.ACCSTORE, name="u"), _accstore, "split-accumulator-update"),
])


@dataclass
class DevectorizeOptions:
    """device-devectorize's options."""
    width: int = field(default=0, metadata={"help": "the most lanes a vector op may have (0: the target's width)"})
    target: str = field(default="cpu", metadata={"help": "a target name: cpu, gpu or a device (python, c, ...)"})

    def __post_init__(self) -> None:
        if self.width < 0:
            raise ValueError(f"width must be >= 0 (0: the target's), got {self.width}")
        check_target_option(self.target)


@register_pass("device-devectorize", summary="split vector ops wider than the target allows into narrower ones",
               consumes=("core", "kernel", "device"), produces=("core", "kernel", "device"), options=DevectorizeOptions)
def device_devectorize(root: UOp, options: DevectorizeOptions, ctx: PassContext) -> UOp:
    t = resolve_target(options.target, root, ctx)
    if t is None:
        return root

    def run(k: UOp) -> UOp:
        return graph_rewrite(k, DEVECTORIZE, ctx=kernel_ctx(k, t, options.width), stats=ctx.stats, bottom_up=True)
    return in_kernels(root, run)
