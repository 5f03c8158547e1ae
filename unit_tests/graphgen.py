"""Random VALID graphs that use every registered op (a helper module for the round-trip and fuzz tests, not a test).

`BUILDERS` maps every op name to a builder that makes one valid UOp of that op, drawing its operands from a pool of
earlier values (so graphs get deep and share nodes) or making fresh leaves, and its attributes from edge-case
heavy distributions: floats inf/-inf/nan/-0.0/subnormals/1e300, strings with quotes, backslashes, control
characters and unicode, tags of many literal types, vector and pointer dtypes, tensor shapes with 0-d and zero-size
dims, and regions (`tensor.call` holding a `kernel.def` body, nested).

The randomness comes from a `Source`: `HypSource` draws from hypothesis (so failures shrink), `RandSource` from
`random.Random` (deterministic, fast: the fuzz test and the coverage test use it).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

import uopir  # noqa: F401 - registers the dialects
from uopir.dialects import core, device, kernel, tensor
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import REGISTRY
from uopir.ir.uop import UOp

T = TypeVar("T")

# ---- value distributions ---------------------------------------------------------------------------------------------
FLOAT_EDGES: tuple[float, ...] = (
    0.0, -0.0, 1.0, -1.0, 0.5, 1.5, math.inf, -math.inf, math.nan, 1e300, -1e300, 1e-300, 5e-324, -5e-324,
    2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308, 0.1, 1 / 3, 1e16, 123456789.0, 1e-7,
    3.4028234663852886e38, 6.103515625e-05, 65504.0,
)
INT_EDGES: tuple[int, ...] = (0, 1, -1, 2, 7, 255, 256, -128, 2**31 - 1, -(2**31), 2**32 - 1, 2**63 - 1, -(2**63),
                              2**64 - 1, 10**30, -(10**30))
NASTY_STRINGS: tuple[str, ...] = (
    "", "CPU", "GPU:1", 'a"b', "back\\slash", "\\", '"', "line\nbreak", "tab\there", "cr\rlf\n", "\x00\x01\x1f\x7f",
    "héllo wörld", "中文", "😀 emoji", "\u2028\u2029\x85", "\\x41", "\\n", "}) {", "// not a comment", "%0 = core.sink",
    "// -----", "' single", "${x}", "a" * 200,
)
TAG_WORDS: tuple[str, ...] = ("tag", "cse", "x.y", "with space")

FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
SINTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
UINTS = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
INTS = SINTS + UINTS + (dtypes.index,)
SCALAR_NUMS = FLOATS + INTS  # not bool
SCALARS = SCALAR_NUMS + (dtypes.bool,)
BUFFER_DTYPES = FLOATS + SINTS + UINTS + (dtypes.bool,)  # index buffers are allowed too, but rare in practice
LANES = (2, 3, 4, 8, 16)
ADDRSPACES = ("global", "local", "register")
IDX = dtypes.index
BOOL = dtypes.bool
VOID = dtypes.void


class Source:
    """Where the randomness comes from."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def float_(self) -> float:
        raise NotImplementedError

    def text(self) -> str:
        raise NotImplementedError

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.integer(0, len(seq) - 1)]

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) < percent


class RandSource(Source):
    def __init__(self, seed: int | random.Random):
        self.rng = seed if isinstance(seed, random.Random) else random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def float_(self) -> float:
        r = self.rng.random()
        if r < 0.5:
            return self.rng.choice(FLOAT_EDGES)
        if r < 0.8:
            return self.rng.uniform(-1e3, 1e3)
        return struct_float(self.rng.getrandbits(64))

    def text(self) -> str:
        if self.rng.random() < 0.6:
            return self.rng.choice(NASTY_STRINGS)
        n = self.rng.randint(0, 8)
        return "".join(chr(self.rng.choice((self.rng.randint(0, 0x7f), self.rng.randint(0xa0, 0xd7ff),
                                            self.rng.randint(0xe000, 0x10ffff)))) for _ in range(n))


def struct_float(bits: int) -> float:
    import struct

    return struct.unpack("<d", struct.pack("<Q", bits & (2**64 - 1)))[0]


class HypSource(Source):
    """Draws from hypothesis, so a failing graph shrinks to a small one."""

    _floats = st.one_of(st.sampled_from(FLOAT_EDGES), st.floats(allow_nan=True, allow_infinity=True))
    _texts = st.one_of(st.sampled_from(NASTY_STRINGS), st.text(max_size=8))

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def float_(self) -> float:
        return self.draw(self._floats)

    def text(self) -> str:
        return self.draw(self._texts)


# ---- the generator --------------------------------------------------------------------------------------------------
MAX_REGION_DEPTH = 2


class Gen:
    """Builds one graph (one block); a region (`tensor.call`) gets a Gen of its own, one level deeper."""

    def __init__(self, src: Source, depth: int = 0, tags: bool = True):
        self.s = src
        self.depth = depth
        self.tags = tags
        self.pool: list[UOp] = []
        self.by_type: dict[tuple[DType, tuple[int, ...] | None], list[UOp]] = {}
        self.used: set[str] = set()  # op names built (regions included), for the coverage test

    # --- bookkeeping -----------------------------------------------------------------------------------------------
    def add(self, u: UOp) -> UOp:
        if self.tags and self.s.chance(8):
            u = u.replace(tag=self.tag())
        self.used.add(u.op.name)
        self.pool.append(u)
        self.by_type.setdefault((u.dtype, u.shape), []).append(u)
        return u

    def mk(self, op: Any, dtype: DType, src: tuple[UOp, ...] = (), arg: Any = None) -> UOp:
        return self.add(UOp(op, dtype, src, arg))

    def tag(self, depth: int = 0) -> Any:
        s = self.s
        k = s.integer(0, 7 if depth < 2 else 5)
        if k == 0:
            return s.choice(INT_EDGES) if s.chance(50) else s.integer(-1000, 1000)
        if k == 1:
            return s.float_()
        if k == 2:
            return s.chance(50)
        if k in (3, 4):
            return s.text()
        if k == 5:
            return s.choice(TAG_WORDS)
        if k == 6:
            return s.choice((dtypes.float32, dtypes.bool, dtypes.index, dtypes.float32.vec(4), dtypes.int8.vec(2),
                             dtypes.float32.ptr(), dtypes.int32.ptr("local", 16)))
        return tuple(self.tag(depth + 1) for _ in range(s.integer(0, 3)))

    # --- dtypes and shapes -----------------------------------------------------------------------------------------
    def vec_or_scalar(self, scalars: Sequence[DType], vec_percent: int = 25) -> DType:
        d = self.s.choice(scalars)
        return d.vec(self.s.choice(LANES)) if self.s.chance(vec_percent) else d

    def shape(self, max_rank: int = 4) -> tuple[int, ...]:
        s = self.s
        rank = s.integer(0, max_rank)
        return tuple(s.choice((0, 1, 1, 2, 3, 4, 5, 7)) if s.chance(15) else s.integer(1, 6) for _ in range(rank))

    def maybe_shape(self, dtype: DType) -> tuple[int, ...] | None:
        """A tensor shape for a scalar dtype sometimes; vectors and pointers are never tensor values."""
        if dtype.count == 1 and dtype.kind not in ("ptr", "void") and self.s.chance(35):
            return self.shape()
        return None

    # --- values ----------------------------------------------------------------------------------------------------
    def scalar_value(self, d: DType) -> Any:
        s = self.s
        if d.is_float:
            return s.float_()
        if d.is_bool:
            return s.chance(50)
        if s.chance(40):
            return s.choice(INT_EDGES)  # normalize_const wraps it
        return s.integer(d.min if d.kind != "index" else -(2**63), d.max if d.kind != "index" else 2**63 - 1) \
            if s.chance(30) else s.integer(-10, 300)

    def const(self, d: DType, shape: tuple[int, ...] | None = None) -> UOp:
        if d.count > 1:
            v: Any = tuple(self.scalar_value(d.scalar) for _ in range(d.count)) if self.s.chance(70) \
                else self.scalar_value(d.scalar)
        else:
            v = self.scalar_value(d)
        return self.add(core.const(d, v, shape))

    def buffer(self, d: DType, shape: tuple[int, ...]) -> UOp:
        s = self.s
        bid = s.integer(0, 8) if s.chance(80) else s.choice((2**31, 2**63, 10**25))
        dev = "python" if s.chance(50) else s.text()
        return self.mk(tensor.BUFFER, d, (), (bid, dev, shape))

    def value(self, d: DType, shape: tuple[int, ...] | None = None) -> UOp:
        """A value of exactly this dtype and shape: an earlier one, or a fresh leaf."""
        have = self.by_type.get((d, shape))
        if have and self.s.chance(65):
            return self.s.choice(have)
        if d.is_ptr:
            return self.pointer(d.addrspace)
        if shape is not None and self.s.chance(60):
            return self.buffer(d, shape)
        return self.const(d, shape)

    def any_value(self) -> UOp:
        if self.pool and self.s.chance(75):
            return self.s.choice(self.pool)
        d = self.vec_or_scalar(SCALARS)
        return self.value(d, self.maybe_shape(d))

    def void_value(self) -> UOp:
        voids = [u for u in self.pool if u.dtype is VOID]
        if voids and self.s.chance(70):
            return self.s.choice(voids)
        name = self.s.choice(("kernel.store", "kernel.end", "device.barrier", "core.group", "tensor.call"
                              if self.depth < MAX_REGION_DEPTH else "core.sink"))
        return BUILDERS[name](self)

    def tensor_value(self) -> UOp:
        """Any value with a tensor shape."""
        shaped = [u for u in self.pool if u.shape is not None]
        if shaped and self.s.chance(70):
            return self.s.choice(shaped)
        d = self.s.choice(BUFFER_DTYPES)
        return self.value(d, self.shape())

    def pointer(self, space: str | None = None) -> UOp:
        space = space or self.s.choice(ADDRSPACES)
        have = [u for u in self.pool if u.dtype.is_ptr and u.dtype.addrspace == space]
        if have and self.s.chance(60):
            return self.s.choice(have)
        return BUILDERS[{"global": "kernel.param", "local": "kernel.local", "register": "kernel.register"}[space]](self)

    def index(self) -> UOp:
        return self.value(IDX)

    def boolean(self) -> UOp:
        return self.value(BOOL)

    def ranges(self, lo: int = 0) -> tuple[UOp, ...]:
        return tuple(self.range_() for _ in range(self.s.integer(lo, 3)))

    def range_(self) -> UOp:
        have = [u for u in self.pool if u.op is kernel.RANGE]
        if have and self.s.chance(50):
            return self.s.choice(have)
        return BUILDERS["kernel.range"](self)

    def of_op(self, op: Any, name: str) -> UOp:
        have = [u for u in self.pool if u.op is op]
        if have and self.s.chance(50):
            return self.s.choice(have)
        return BUILDERS[name](self)

    # --- graphs ----------------------------------------------------------------------------------------------------
    def graph(self, n_ops: int, root: str | None = None) -> UOp:
        s = self.s
        names = list(BUILDERS)
        if self.depth >= MAX_REGION_DEPTH:
            names.remove("tensor.call")
        for _ in range(n_ops):
            BUILDERS[s.choice(names)](self)
        if root is None:
            root = s.choice(("core.sink",) * 5 + ("device.program", "kernel.def", "value"))
        if root == "value" and self.pool:
            return self.pool[-1]
        if root == "kernel.def":
            return self.kernel_def()
        # the root keeps (almost) every value built alive: all those no other value uses
        used_as_src = {x for u in self.pool for x in u.src}
        srcs = tuple(dict.fromkeys(u for u in self.pool if u not in used_as_src and (u.dtype is VOID or s.chance(90))))
        if root == "device.program":
            return self.mk(device.PROGRAM, VOID, program_ops(srcs), s.text())
        return self.add(UOp(core.SINK, VOID, srcs))

    def kernel_def(self) -> UOp:
        effects = [u for u in self.pool if u.dtype is VOID and u.op is not kernel.DEF]
        n = self.s.integer(0, 4)
        srcs = tuple(self.s.choice(effects) if effects and self.s.chance(50) else self.void_value() for _ in range(n))
        name = self.s.choice(("E_4", "r_16_16", "k")) if self.s.chance(60) else self.s.text()
        return self.mk(kernel.DEF, VOID, srcs, name)


# ---- per-op builders ------------------------------------------------------------------------------------------------
Builder = Callable[[Gen], UOp]
BUILDERS: dict[str, Builder] = {}


def builder(*names: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        for n in names:
            BUILDERS[n] = fn
        return fn
    return deco


def _alu(name: str, dtypes_: Sequence[DType], vec_percent: int = 25) -> Builder:
    op = REGISTRY[name]
    n = op.n_src[0]

    def build(g: Gen) -> UOp:
        d = g.vec_or_scalar(dtypes_, vec_percent)
        shape = g.maybe_shape(d)
        # a shapeless operand broadcasts against a shaped one
        src = tuple(g.value(d, shape if (shape is not None and (i == 0 or g.s.chance(70))) else None)
                    for i in range(n))
        return g.mk(op, d, src)
    return build


for _n in ("core.add", "core.mul", "core.max"):
    BUILDERS[_n] = _alu(_n, SCALARS)
for _n in ("core.sub", "core.neg", "core.mulacc"):
    BUILDERS[_n] = _alu(_n, SCALAR_NUMS)
for _n in ("core.fdiv", "core.recip", "core.exp2", "core.log2", "core.sin", "core.sqrt", "core.trunc"):
    BUILDERS[_n] = _alu(_n, FLOATS)
for _n in ("core.idiv", "core.shl", "core.shr"):
    BUILDERS[_n] = _alu(_n, INTS)
BUILDERS["core.mod"] = _alu("core.mod", INTS + FLOATS)
for _n in ("core.and", "core.or", "core.xor"):
    BUILDERS[_n] = _alu(_n, INTS + (BOOL,))


for _n in ("core.cmplt", "core.cmpne", "core.cmpeq"):
    def _one_cmp(g: Gen, _op: Any = REGISTRY[_n]) -> UOp:
        d = g.vec_or_scalar(SCALARS)
        shape = g.maybe_shape(d)
        return g.mk(_op, BOOL.vec(d.count), (g.value(d, shape), g.value(d, shape if g.s.chance(60) else None)))
    BUILDERS[_n] = _one_cmp


@builder("core.where")
def _where(g: Gen) -> UOp:
    d = g.vec_or_scalar(SCALARS)
    shape = g.maybe_shape(d)
    cd = BOOL.vec(d.count) if g.s.chance(70) else BOOL
    c = g.value(cd, shape if shape is not None and cd is BOOL and g.s.chance(50) else None)
    return g.mk(core.WHERE, d, (c, g.value(d, shape), g.value(d, shape if g.s.chance(50) else None)))


@builder("core.const")
def _const(g: Gen) -> UOp:
    d = g.vec_or_scalar(SCALARS, 30)
    return g.const(d, g.maybe_shape(d))


@builder("core.cast")
def _cast(g: Gen) -> UOp:
    x = g.any_value() if g.s.chance(50) else g.value(g.vec_or_scalar(SCALARS))
    if x.dtype.kind in ("void", "ptr"):
        x = g.value(g.vec_or_scalar(SCALARS))
    to = g.s.choice(SCALARS)
    return g.mk(core.CAST, to.vec(x.dtype.count), (x,))


_BITCAST_PAIRS: tuple[tuple[DType, DType], ...] = (
    (dtypes.float32, dtypes.int32), (dtypes.float32, dtypes.uint32), (dtypes.float64, dtypes.int64),
    (dtypes.float16, dtypes.int16), (dtypes.bfloat16, dtypes.uint16), (dtypes.float16, dtypes.bfloat16),
    (dtypes.float32.vec(2), dtypes.float64), (dtypes.int8.vec(4), dtypes.float32), (dtypes.uint8.vec(8), IDX),
    (dtypes.float32.ptr(), dtypes.int64), (dtypes.int64, dtypes.float16.ptr("local", 8)),
    (dtypes.int32.vec(4), dtypes.float64.vec(2)), (dtypes.bool, dtypes.bool),
)


@builder("core.bitcast")
def _bitcast(g: Gen) -> UOp:
    a, b = g.s.choice(_BITCAST_PAIRS)
    if g.s.chance(50):
        a, b = b, a
    x = g.value(a, g.maybe_shape(a) if not a.is_ptr else None)
    return g.mk(core.BITCAST, b, (x,))


@builder("core.vectorize")
def _vectorize(g: Gen) -> UOp:
    d = g.s.choice(SCALARS)
    n = g.s.choice((1,) + LANES)
    return g.mk(core.VECTORIZE, d.vec(n), tuple(g.value(d) for _ in range(n)))


@builder("core.gep")
def _gep(g: Gen) -> UOp:
    d = g.vec_or_scalar(SCALARS, 80)
    v = g.value(d)
    idx = tuple(g.s.integer(0, d.count - 1) for _ in range(g.s.choice((1, 1, 2, 3, 4))))
    return g.mk(core.GEP, d.scalar.vec(len(idx)), (v,), idx)


@builder("core.sink")
def _sink(g: Gen) -> UOp:
    return g.mk(core.SINK, VOID, tuple(g.any_value() for _ in range(g.s.integer(0, 3))))


@builder("core.group")
def _group(g: Gen) -> UOp:
    return g.mk(core.GROUP, VOID, tuple(g.any_value() for _ in range(g.s.integer(0, 3))))


# ---- tensor ---------------------------------------------------------------------------------------------------------
@builder("tensor.buffer")
def _buffer(g: Gen) -> UOp:
    return g.buffer(g.s.choice(BUFFER_DTYPES + (IDX,)), g.shape())


@builder("tensor.arange")
def _arange(g: Gen) -> UOp:
    return g.mk(tensor.ARANGE, g.s.choice(SINTS + UINTS), (), (g.s.integer(1, 100),))


def _shuffled(g: Gen, items: Iterable[Any]) -> list[Any]:
    """A Fisher-Yates shuffle drawn from the generator's source (so hypothesis can shrink it)."""
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = g.s.integer(0, i)
        out[i], out[j] = out[j], out[i]
    return out


def _factor_shape(g: Gen, n: int) -> tuple[int, ...]:
    """A random shape with n elements."""
    if n == 0:
        base = [0] + [g.s.integer(0, 4) for _ in range(g.s.integer(0, 2))]
    else:
        base, rest, p = [], n, 2
        while rest > 1:
            if rest % p == 0:
                base.append(p)
                rest //= p
            else:
                p += 1
        # merge some neighbouring factors
        while len(base) > 1 and g.s.chance(40):
            i = g.s.integer(0, len(base) - 2)
            base[i:i + 2] = [base[i] * base[i + 1]]
    for _ in range(g.s.integer(0, 2)):
        base.insert(g.s.integer(0, len(base)), 1)
    return tuple(_shuffled(g, base))


@builder("tensor.reshape")
def _reshape(g: Gen) -> UOp:
    x = g.tensor_value()
    n = math.prod(x.shape)
    return g.mk(tensor.RESHAPE, x.dtype, (x,), _factor_shape(g, n) if n < 10**6 else x.shape)


@builder("tensor.permute")
def _permute(g: Gen) -> UOp:
    x = g.tensor_value()
    return g.mk(tensor.PERMUTE, x.dtype, (x,), tuple(_shuffled(g, range(len(x.shape)))))


@builder("tensor.expand")
def _expand(g: Gen) -> UOp:
    x = g.tensor_value()
    if 1 not in x.shape and g.s.chance(70):  # make axes of size 1 to broadcast
        x = g.mk(tensor.RESHAPE, x.dtype, (x,), tuple(d for ax in x.shape for d in ((1, ax) if g.s.chance(50)
                                                                                  else (ax,))) + (1,))
    new = tuple(g.s.choice((0, 1, 2, 3, 5)) if d == 1 and g.s.chance(70) else d for d in x.shape)
    return g.mk(tensor.EXPAND, x.dtype, (x,), new)


def _symbolic_amount(g: Gen, hi: int) -> UOp:
    """A variable in [0, hi], bound to a value or not: a symbolic pad / shrink amount (printed `?`, an operand)."""
    v = g.mk(tensor.VAR, IDX, (), (g.s.choice(("i", "n", "pos")), 0, hi))
    return g.mk(tensor.BIND, IDX, (v, g.add(core.const(IDX, g.s.integer(0, hi))))) if g.s.chance(50) else v


@builder("tensor.pad")
def _pad(g: Gen) -> UOp:
    x = g.tensor_value()
    if x.shape and g.s.chance(15):  # pads (v, t - v) of a variable v: `?` amounts, a static result
        a, t = g.s.integer(0, len(x.shape) - 1), g.s.integer(0, 3)
        v = _symbolic_amount(g, t)
        pads: list = [(g.s.integer(0, 3), g.s.integer(0, 3)) for _ in x.shape]
        pads[a] = (v, t - v)
        return g.add(tensor.movement(tensor.PAD, x, tuple(pads)))
    pads = tuple((g.s.integer(0, 3), g.s.integer(0, 3)) for _ in x.shape)
    return g.mk(tensor.PAD, x.dtype, (x,), pads)


@builder("tensor.shrink")
def _shrink(g: Gen) -> UOp:
    x = g.tensor_value()
    bounds: list = []
    for d in x.shape:
        a, b = g.s.integer(0, d), g.s.integer(0, d)
        bounds.append((min(a, b), max(a, b)))
    if x.shape and g.s.chance(15):  # a window [v, v + k) at a variable start: `?` bounds, a static size
        a = g.s.integer(0, len(x.shape) - 1)
        k = g.s.integer(0, x.shape[a])
        v = _symbolic_amount(g, x.shape[a] - k)
        bounds[a] = (v, v + k)
        return g.add(tensor.movement(tensor.SHRINK, x, tuple(bounds)))
    return g.mk(tensor.SHRINK, x.dtype, (x,), tuple(bounds))


def _axes(g: Gen, rank: int) -> tuple[int, ...]:
    return tuple(_shuffled(g, [a for a in range(rank) if g.s.chance(50)]))


@builder("tensor.flip")
def _flip(g: Gen) -> UOp:
    x = g.tensor_value()
    return g.mk(tensor.FLIP, x.dtype, (x,), _axes(g, len(x.shape)))


@builder("tensor.reduce")
def _reduce(g: Gen) -> UOp:
    x = g.tensor_value()
    return g.mk(tensor.REDUCE, x.dtype, (x,), (g.s.choice(tensor.REDUCE_OPS), _axes(g, len(x.shape))))


@builder("tensor.copy")
def _copy(g: Gen) -> UOp:
    x = g.tensor_value()
    return g.mk(tensor.COPY, x.dtype, (x,), g.s.choice(("python", "c", "cuda")) if g.s.chance(60) else g.s.text())


_VIEW_OPS = ("tensor.reshape", "tensor.permute", "tensor.shrink", "tensor.flip", "tensor.assign")


def _assignable(u: UOp) -> bool:
    while u.op.name in _VIEW_OPS:
        u = u.src[0]
    return u.op is tensor.BUFFER


@builder("tensor.assign")
def _assign(g: Gen) -> UOp:
    have = [u for u in g.pool if u.shape is not None and _assignable(u)]
    if have and g.s.chance(70):
        t = g.s.choice(have)
    else:
        t = g.buffer(g.s.choice(BUFFER_DTYPES), g.shape())
        for _ in range(g.s.integer(0, 2)):  # a view of it
            t = g.s.choice((_reshape, _permute, _shrink, _flip))(_Pinned(g, t))
    v = g.value(t.dtype, t.shape if g.s.chance(70) else None)
    return g.mk(tensor.ASSIGN, t.dtype, (t, v))


class _Pinned(Gen):
    """A Gen whose tensor_value is one given value (to build a view of it); shares the pool of the wrapped Gen."""

    def __init__(self, g: Gen, x: UOp):
        self.__dict__.update(g.__dict__)
        self._x = x

    def tensor_value(self) -> UOp:
        return self._x


@builder("tensor.contiguous")
def _contiguous(g: Gen) -> UOp:
    x = g.tensor_value()
    return g.mk(tensor.CONTIGUOUS, x.dtype, (x,))


@builder("tensor.detach")
def _detach(g: Gen) -> UOp:
    x = g.tensor_value()
    return g.mk(tensor.DETACH, x.dtype, (x,))


def _var_arg(g: Gen) -> tuple[str, int, int]:
    a, b = (g.s.integer(-5, 64), g.s.integer(-5, 64)) if g.s.chance(80) else (g.s.choice(INT_EDGES),
                                                                             g.s.choice(INT_EDGES))
    name = g.s.choice(("i", "n", "batch", "seq_len")) if g.s.chance(60) else g.s.text()
    return (name, min(a, b), max(a, b))


@builder("tensor.var")
def _tvar(g: Gen) -> UOp:
    return g.mk(tensor.VAR, IDX, (), _var_arg(g))


@builder("tensor.bind")
def _bind(g: Gen) -> UOp:
    var = g.of_op(tensor.VAR, "tensor.var")
    _, lo, hi = var.arg
    lo, hi = max(lo, IDX.min), min(hi, IDX.max)  # the bound value is an index const (64 bits)
    if lo > hi:
        var = g.mk(tensor.VAR, IDX, (), (var.arg[0], 0, 8))
        lo, hi = 0, 8
    v = g.s.integer(lo, hi) if g.s.chance(60) else g.s.choice((lo, hi))
    return g.mk(tensor.BIND, IDX, (var, g.add(core.const(IDX, v))))


@builder("tensor.call")
def _call(g: Gen) -> UOp:
    sub = Gen(g.s, g.depth + 1, g.tags)
    body = sub.graph(g.s.integer(0, 8), root="kernel.def")
    g.used |= sub.used
    bufs = tuple(g.tensor_value() if g.s.chance(70) else g.any_value() for _ in range(g.s.integer(0, 4)))
    # the kernel's variables get their values from operands: one tensor.var per kernel.var name
    kvars = {x.arg[0]: x.arg for x in body.toposort() if x.op is kernel.VAR}
    bufs += tuple(g.mk(tensor.VAR, IDX, (), a) for a in kvars.values())
    name = body.arg if g.s.chance(50) else g.s.text()
    return g.mk(tensor.CALL, VOID, bufs, (body, name))


@builder("tensor.after")
def _after(g: Gen) -> UOp:
    b = g.buffer(g.s.choice(BUFFER_DTYPES), g.shape())
    deps = tuple(_call(g) for _ in range(g.s.integer(1, 2)))
    return g.mk(tensor.AFTER, b.dtype, (b, *deps))


# ---- kernel ---------------------------------------------------------------------------------------------------------
@builder("kernel.def")
def _kdef(g: Gen) -> UOp:
    return g.kernel_def()


def _ptr_base(g: Gen) -> DType:
    return g.vec_or_scalar(SCALARS, 10)


@builder("kernel.param")
def _param(g: Gen) -> UOp:
    size = -1 if g.s.chance(80) else g.s.integer(0, 1024)
    return g.mk(kernel.PARAM, _ptr_base(g).ptr("global", size), (), g.s.integer(0, 9) if g.s.chance(90)
                else g.s.choice((2**40, 2**70)))


@builder("kernel.var")
def _kvar(g: Gen) -> UOp:
    return g.mk(kernel.VAR, IDX, (), _var_arg(g))


@builder("kernel.range")
def _range(g: Gen) -> UOp:
    kind = g.s.choice(kernel.AXIS_KINDS)
    return g.mk(kernel.RANGE, IDX, (g.index(),), (g.s.integer(0, 6), kind))


@builder("kernel.end")
def _end(g: Gen) -> UOp:
    v = g.void_value() if g.s.chance(60) else g.any_value()
    return g.mk(kernel.END, VOID, (v,) + g.ranges(1))


@builder("kernel.index")
def _index(g: Gen) -> UOp:
    p = g.pointer()
    src = (p, g.index()) + ((g.boolean(),) if g.s.chance(30) else ())
    return g.mk(kernel.INDEX, p.dtype, src)


def _loaded(g: Gen, base: DType) -> DType:
    return base.vec(g.s.choice(LANES)) if base.count == 1 and g.s.chance(25) else base


@builder("kernel.load")
def _load(g: Gen) -> UOp:
    p = g.pointer()
    d = _loaded(g, p.dtype.base)
    src = (p,) + ((g.value(d), g.boolean()) if g.s.chance(35) else ())
    return g.mk(kernel.LOAD, d, src)


@builder("kernel.store")
def _store(g: Gen) -> UOp:
    p = g.pointer()
    src = (p, g.value(_loaded(g, p.dtype.base))) + ((g.boolean(),) if g.s.chance(30) else ())
    return g.mk(kernel.STORE, VOID, src)


@builder("kernel.reduce")
def _kreduce(g: Gen) -> UOp:
    v = g.value(g.vec_or_scalar(SCALARS))
    return g.mk(kernel.REDUCE, v.dtype, (v,) + g.ranges(), g.s.choice(kernel.REDUCE_OPS))


@builder("kernel.local")
def _local(g: Gen) -> UOp:
    return g.mk(kernel.LOCAL, _ptr_base(g).ptr("local", g.s.integer(0, 4096)), (), g.s.integer(-3, 9))


@builder("kernel.register")
def _register(g: Gen) -> UOp:
    return g.mk(kernel.REGISTER, _ptr_base(g).ptr("register", g.s.integer(0, 64)), (), g.s.integer(-3, 9))


@builder("kernel.after")
def _after(g: Gen) -> UOp:
    p = BUILDERS[g.s.choice(("kernel.local", "kernel.register"))](g)
    return g.mk(kernel.AFTER, p.dtype, (p,) + tuple(g.void_value() for _ in range(g.s.integer(1, 2))))


# ---- device ---------------------------------------------------------------------------------------------------------
@builder("device.special")
def _special(g: Gen) -> UOp:
    return g.mk(device.SPECIAL, IDX, (g.index(),), (g.s.choice(device.SPECIAL_KINDS), g.s.integer(0, 2)))


@builder("device.barrier")
def _barrier(g: Gen) -> UOp:
    return g.mk(device.BARRIER, VOID, tuple(g.any_value() for _ in range(g.s.integer(0, 3))))


@builder("device.after")
def _after(g: Gen) -> UOp:
    p = g.pointer()
    return g.mk(device.AFTER, p.dtype, (p, *(_barrier(g) for _ in range(g.s.integer(1, 2)))))


@builder("device.if")
def _if(g: Gen) -> UOp:
    return g.mk(device.IF, VOID, (g.boolean(),) + tuple(g.any_value() for _ in range(g.s.integer(0, 2))))


@builder("device.endif")
def _endif(g: Gen) -> UOp:
    i = g.of_op(device.IF, "device.if")
    return g.mk(device.ENDIF, VOID, (i,) + tuple(g.any_value() for _ in range(g.s.integer(0, 2))))


@builder("device.loop")
def _loop(g: Gen) -> UOp:
    return g.mk(device.LOOP, IDX, (g.index(),), g.s.integer(-2, 9))


@builder("device.endloop")
def _endloop(g: Gen) -> UOp:
    lp = g.of_op(device.LOOP, "device.loop")
    return g.mk(device.ENDLOOP, VOID, (lp,) + tuple(g.any_value() for _ in range(g.s.integer(0, 2))))


@builder("device.acc")
def _acc(g: Gen) -> UOp:
    init = g.value(g.vec_or_scalar(SCALARS))
    loops = tuple(g.of_op(device.LOOP, "device.loop") if g.s.chance(60) else g.range_()
                  for _ in range(g.s.integer(0, 2)))
    return g.mk(device.ACC, init.dtype, (init,) + loops, g.s.integer(0, 9))


@builder("device.accstore")
def _accstore(g: Gen) -> UOp:
    acc = g.of_op(device.ACC, "device.acc")
    return g.mk(device.ACCSTORE, VOID if g.s.chance(50) else acc.dtype, (acc, g.value(acc.dtype)))


@builder("device.fma")
def _fma(g: Gen) -> UOp:
    t = dtypes.float32.vec(g.s.choice((1, 1, 4, 16))) if g.s.chance(80) else dtypes.float32
    return g.mk(device.FMA, t, (g.value(t), g.value(t), g.value(t)))


@builder("device.wmma")
def _wmma(g: Gen) -> UOp:
    ab = g.s.choice((dtypes.float16, dtypes.bfloat16, dtypes.int8, dtypes.float32)).vec(g.s.choice((2, 4, 8, 16)))
    c = g.s.choice((dtypes.float32, dtypes.float16, dtypes.int32)).vec(g.s.choice((2, 4, 8)))
    dims = (g.s.choice((8, 16, 32)), g.s.choice((8, 16)), g.s.choice((1, 8, 16)))
    name = f"WMMA_{dims[0]}_{dims[1]}_{dims[2]}" if g.s.chance(70) else g.s.text()
    dev = g.s.choice(("CUDA", "METAL", "AMD")) if g.s.chance(70) else g.s.text()
    return g.mk(device.WMMA, c, (g.value(ab), g.value(ab), g.value(c)), (name, dims, dev))


_BLOCK_OPS = frozenset((device.LOOP, device.ENDLOOP, device.IF, device.ENDIF))


def program_ops(values: tuple[UOp, ...]) -> tuple[UOp, ...]:
    """A valid device.program's operand list for some of these values: every op they need, each after its operands
    (a value that needs a loop or an if is left out: random ops would not nest as blocks must)."""
    out: dict[UOp, None] = {}
    for v in values:
        order = v.toposort()
        if not any(u.op in _BLOCK_OPS for u in order):
            out.update(order)
    return tuple(out)


@builder("device.program")
def _program(g: Gen) -> UOp:
    srcs = tuple(dict.fromkeys(g.any_value() for _ in range(g.s.integer(0, 4))))
    return g.mk(device.PROGRAM, VOID, program_ops(srcs), g.s.text())


@builder("device.source")
def _source(g: Gen) -> UOp:
    lang = g.s.choice(("c", "llvm", "opencl", "cuda", "mlir", "test-lang"))
    name = g.s.choice(("k", "E_4_4", "r_16.3", "main$1"))
    return g.mk(device.SOURCE, VOID, (), (lang, name, g.s.text()))


# ---- entry points ---------------------------------------------------------------------------------------------------
def real_op_names() -> list[str]:
    """Every registered op of a real dialect (tests register throwaway ops in dialects named test*)."""
    return [n for n, od in REGISTRY.items() if not od.dialect.startswith("test")]


def build_graph(src: Source, n_ops: int | None = None, tags: bool = True) -> tuple[UOp, set[str]]:
    """One random valid graph and the names of the ops it was built with."""
    g = Gen(src, tags=tags)
    root = g.graph(n_ops if n_ops is not None else src.integer(1, 25))
    return root, g.used


def random_graph(seed: int | random.Random, n_ops: int | None = None) -> UOp:
    return build_graph(RandSource(seed), n_ops)[0]


@st.composite
def graphs(draw: Callable[[st.SearchStrategy[Any]], Any], max_ops: int = 25) -> UOp:
    """A hypothesis strategy of random valid graphs using every op."""
    src = HypSource(draw)
    return build_graph(src, src.integer(1, max_ops))[0]
