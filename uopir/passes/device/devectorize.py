"""device-devectorize{width=N target=…}: split vector ops wider than the target allows into narrower ones.

The limit for a dtype is `width` lanes, or with `width=0` the target's `vector_width(dtype)` (1: scalar code). A
wide op becomes one op per part of at most that many lanes (the last part may be shorter), on `core.gep`s of its
vector operands; the parts are joined back with a `core.vectorize` of their lanes, which the gep folds below dissolve
as soon as every reader is split too:

- elementwise ops and casts (a scalar `where` condition stays whole; a bitcast that changes the lane count is left);
- `kernel.load` of n lanes at offset o: loads of each part at o + start (a gated load's alternative split alike);
- `kernel.store`: one store per part, grouped (`core.group`);
- `device.acc` and its `device.accstore`s: one accumulator per part (fresh ids after the kernel's largest);
- a `core.gep` that picks more lanes than allowed.

Parts are `width` lanes each, the last shorter; a kernel whose stores all write rows of r lanes (more than half a
vector, no multiple of one) splits a value of whole rows at row boundaries instead (rows of 14 by 16: 14, 14, ...). At
the target's width, unless it has `masked_vectors` (LLVM on AVX-512: a masked access for any lane count), each part is
split again into power-of-two parts, the largest first (14 = 8 + 4 + 2; C keeps a vector of another size lane by
lane).

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

__all__ = ["DevectorizeOptions", "kernel_ctx", "device_devectorize", "DEVECTORIZE", "GEP_FOLDS", "gep", "join",
           "at_offset"]


class _Ctx:
    def __init__(self, t: Target, width: int, next_acc: int, row: int = 0, mask: int = 0):
        self.t, self.width, self.next_acc, self.row, self.mask = t, width, next_acc, row, mask
        self.acc_parts: dict[UOp, list[UOp]] = {}  # a split accumulator -> its part accumulators
        self._parts: dict[DType, list[tuple[int, ...]] | None] = {}  # parts() of each dtype met (asked per node)

    def accs(self, u: UOp, parts: list[tuple[int, ...]]) -> list[UOp]:
        """The part accumulators of the wide accumulator u (made once, with fresh ids in part order)."""
        got = self.acc_parts.get(u)
        if got is None:
            got = []
            for p in parts:
                init = _piece(u.operands.init, p, u.dtype.count)
                got.append(UOp(D.ACC, u.dtype.scalar.vec(len(p)), (init, *u.operands.loops), self.next_acc))
                self.next_acc += 1
            self.acc_parts[u] = got
        return got

    def limit(self, d: DType) -> int:
        if d.scalar is dtypes.bool and self.mask and self.width <= 0:
            return self.mask
        return max(1, self.width if self.width > 0 else self.t.vector_width(d.scalar))

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
        elif r > w // 2 and r % w and n % r == 0:  # rows of r lanes: no part crosses a row
            got = [tuple(range(s + i, s + min(i + w, r))) for s in range(0, n, r) for i in range(0, r, w)]
        else:
            got = [tuple(range(i, min(i + w, n))) for i in range(0, n, w)]
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
    """Lanes idx of x (a scalar for one lane)."""
    return UOp(C.GEP, x.dtype.scalar.vec(len(idx)), (x,), tuple(idx))


def join(parts: list[UOp]) -> UOp:
    """One vector of the lanes of parts, in order (a scalar part is one lane)."""
    lanes = [p if p.dtype.count == 1 else gep(p, (i,)) for p in parts for i in range(p.dtype.count)]
    return UOp(C.VECTORIZE, lanes[0].dtype.vec(len(lanes)), tuple(lanes))


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
    masks = [t.vector_width(s.dtype.scalar) for u in order if u.dtype.scalar is dtypes.bool and u.dtype.count > 1
             and u.op in _SPLIT_ALU for s in u.src if s.dtype.scalar is not dtypes.bool and s.dtype.count > 1]
    return _Ctx(t, width, max(ids, default=-1) + 1, rows.pop() if len(rows) == 1 else 0, min(masks, default=0))


# ---- patterns --------------------------------------------------------------------------------------------------------
def _elementwise(ctx: _Ctx, u: UOp) -> UOp | None:
    parts = ctx.parts(u.dtype)
    if parts is None or (u.op is C.BITCAST and u.operands.x.dtype.count != u.dtype.count):
        return None
    n = u.dtype.count
    return join([UOp(u.op, u.dtype.scalar.vec(len(p)), tuple(_piece(s, p, n) for s in u.src), u.arg) for p in parts])


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
                 for p in parts])


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
    return join(ctx.accs(u, parts))


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
    val, stores, start = u.operands.value, [], 0
    for a in accs:
        n = a.dtype.count
        p = tuple(range(start, start + n))
        stores.append(UOp(D.ACCSTORE, a.dtype if u.dtype is not dtypes.void else dtypes.void,
                          (a, gep(val, p))))
        start += n
    return join(stores) if u.dtype is not dtypes.void else UOp(C.GROUP, dtypes.void, tuple(stores))


def _wide_gep(ctx: _Ctx, u: UOp) -> UOp | None:
    parts = ctx.parts(u.dtype)
    if parts is None:
        return None
    idx = u.attrs.idx
    return join([gep(u.operands.x, tuple(idx[i] for i in p)) for p in parts])


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
    parts = ctx.parts(x.dtype)
    if parts is None:
        return None
    lanes = g.attrs.idx
    k = next(j for j, p in enumerate(parts) if p[0] <= lanes[0] <= p[-1])
    p = parts[k]
    if any(not p[0] <= i <= p[-1] for i in lanes):
        return None
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


GEP_FOLDS = [
    (UPat(C.GEP, src=(UPat(C.VECTORIZE, name="v"),), name="g"), _gep_of_vectorize, "gep-of-vectorize"),
    (UPat(C.GEP, src=(UPat(C.GEP, name="h"),), name="g"), _gep_of_gep, "gep-of-gep"),
    (UPat(C.GEP, src=(UPat(C.CONST, name="c"),), name="g"), _gep_of_const, "gep-of-const"),
    (UPat(C.GEP, src=(UPat.var("x"),), name="g"), _gep_all, "gep-of-every-lane"),
    (UPat(C.VECTORIZE, name="v"), _vectorize_of_geps, "vectorize-of-geps"),
]

_SPLIT_ALU = frozenset(C.ELEMENTWISE_OPS)

DEVECTORIZE = PatternMatcher([
    *GEP_FOLDS,
    (UPat(C.GEP, src=(UPat((D.ACC, K.LOAD, *C.ELEMENTWISE_OPS), dtype=is_vector, name="x"),), name="g"), _part_of,
     "split-part-of-gep"),
    (UPat(C.GEP, dtype=is_vector, name="u"), _wide_gep, "split-wide-gep"),
    (UPat(C.ELEMENTWISE_OPS, dtype=is_vector, name="u"), _elementwise, "split-elementwise"),
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
