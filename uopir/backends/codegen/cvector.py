"""Vector code in GCC/clang vector extensions (C on a cpu: `Language.gnu_vectors`): the ALU, casts and bitcasts of
whole vectors, so that kernels built of integer bit tricks (device-transcendental's exp2/log2) stay vector code.

- f32/f64 and integer vectors of 8..64 bytes live in vector types (`f32x16`, `i32x16`, `u8x16`, ...); a vector op
  wider than 64 bytes (a 64-lane compare that kernel-expand groups) is written in 64-byte pieces, each a variable,
  and the lanes read back in order (`core.gep`) are that variable again (`Lanes.src`).
- bool vectors are masks: the signed integer vector a GCC/clang compare yields (every bit set where true), as wide
  as the compared lanes (`i32x16` for f32 lanes); a lane read alone is `(m[i] != 0)`. `core.where` is a bit select
  through the mask (NaN payloads and signed zeros pass unchanged), a mask of another width is converted
  (`__builtin_convertvector`: -1 stays -1), bools that are no mask become one (`-(i32x16){b0, ...}`).
- integers: add/sub/mul/neg/mulacc wrap (-fwrapv; vector lanes never promote, so i8 lanes wrap at 8 bits as the
  scalar code's store back to int8_t does), and/or/xor, max by compare and select; `shl` shifts the unsigned view
  (no signed overflow), `shr` is arithmetic on signed and logical on unsigned lanes, the amount taken modulo the
  width as the semantics say (a constant amount is reduced here, a variable one masked); compares are signed or
  unsigned by the lane type. Integer division and remainder stay lane by lane (their zero and MIN/-1 rules); a
  float reciprocal is one vector division `1.0f / v` (a sigmoid's 16 scalar divisions were most of its cost).
- casts: int -> int (wraps), int -> f32/f64 and f32 <-> f64 by `__builtin_convertvector` (C's conversion: exactly
  the scalar cast), float/int -> bool as `x != 0`, a mask -> int/float as `-m` (converted to another width);
  float -> int (saturating) stays lane by lane. Bitcasts between
  vector types of the same size are `(T)v`, which moves no bits.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.backends.codegen.clanes import Lanes
from uopir.backends.codegen.cprelude import mask_type, vector_max
from uopir.dialects import core as C
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.backends.codegen.cstyle import CEmitter

__all__ = ["vector_alu", "vector_cast", "vector_bitcast", "MASK_LANE"]

MASK_LANE = "({v}[{i}] != 0)"  # one lane of a mask, as a C bool
_FLOAT_OPS = {"core.add": "{0} + {1}", "core.sub": "{0} - {1}", "core.mul": "{0} * {1}", "core.fdiv": "{0} / {1}",
              "core.neg": "-{0}", "core.mulacc": "{0} * {1} + {2}"}
_INT_OPS = {"core.add": "{0} + {1}", "core.sub": "{0} - {1}", "core.mul": "{0} * {1}", "core.neg": "-{0}",
            "core.mulacc": "{0} * {1} + {2}", "core.and": "{0} & {1}", "core.or": "{0} | {1}",
            "core.xor": "{0} ^ {1}"}
_CMP = {"core.cmplt": "<", "core.cmpne": "!=", "core.cmpeq": "=="}
_MASK_OPS = {"core.and": "{0} & {1}", "core.or": "{0} | {1}", "core.xor": "{0} ^ {1}", "core.neg": "~{0}",
             "core.add": "{0} | {1}", "core.mul": "{0} & {1}", "core.max": "{0} | {1}"}
_PIECE = 64  # bytes of the widest vector type


def _ok(em: CEmitter, d: DType) -> bool:
    return em.lang.any_vector_ok(d)


def _piece(em: CEmitter, scalar: DType, n: int) -> int | None:
    """Lanes per piece for an op on n lanes of `scalar`: n when they fit one vector type, else 64 bytes' worth when
    that divides n; None when the op stays lane by lane."""
    if _ok(em, scalar.vec(n)):
        return n
    per = _PIECE // scalar.itemsize
    if n > per and n % per == 0 and _ok(em, scalar.vec(per)):
        return per
    return None


def _mask_name(em: CEmitter, v: Lanes, lanes: range) -> str | None:
    """The mask variable whose lanes are exactly `lanes` of v, all of them (else None)."""
    name = v.whole(lanes) if len(v.exprs) > 1 else None
    if name is None or name not in em.masks or not em.vec_types[name].endswith(f"x{len(lanes)}"):
        return None
    return name


def mask_of(em: CEmitter, v: Lanes, first: int, n: int, bits: int) -> str:
    """An expression of the `bits`-wide mask type holding bool lanes first..first+n-1 of v."""
    mt = em.vtype(mask_type(bits, n))
    name = _mask_name(em, v, range(first, first + n))
    if name is not None:
        return name if em.vec_types[name] == mt else f"__builtin_convertvector({name}, {mt})"
    return f"-({mt}){{{', '.join(v.lane(i) for i in range(first, first + n))}}}"


def _set(em: CEmitter, u: UOp, exprs: list[tuple[str, str]], n: int, escapes: bool, mask: bool) -> None:
    """u's value: one vector local per piece ((C type, expression) each), its lanes in order."""
    names = [em.vector_local(t, e, escapes) for t, e in exprs]
    if mask:
        em.masks.update(names)
    lane = MASK_LANE if mask else "{v}[{i}]"
    parts = [Lanes.of_vector(name, n, lane) for name in names]
    if len(parts) == 1:
        em.vals[u] = parts[0]
        return
    em.vals[u] = Lanes([e for p in parts for e in p.exprs], None, [s for p in parts for s in p.src or ()])


def _shift_amount(em: CEmitter, u: UOp, b: str, bits: int, unsigned_t: str) -> str:
    amt = u.src[1]
    if amt.op is C.CONST:
        vals = amt.arg if type(amt.arg) is tuple else (amt.arg,)
        if len(set(vals)) == 1:
            return str(int(vals[0]) & (bits - 1))
    return f"(({unsigned_t}){b} & {bits - 1}u)"


def vector_alu(em: CEmitter, u: UOp, srcs: list[Lanes], escapes: bool) -> bool:
    """Render u (a vector ALU op) as vector code when its types allow; False leaves it to the lane-by-lane rows."""
    name, d, n = u.op.name, u.dtype, u.dtype.count
    if d.scalar is dtypes.bool:
        if name in _CMP:
            s = u.src[0].dtype.scalar
            if s is dtypes.bool or (per := _piece(em, s, n)) is None:
                return False
            bits = s.itemsize * 8
            mt = em.vtype(mask_type(bits, per))
            exprs = []
            for f in range(0, n, per):
                a, b = (em.pack(x, s.vec(per), f) for x in srcs)
                exprs.append((mt, f"{a} {_CMP[name]} {b}"))
            _set(em, u, exprs, per, escapes, True)
            return True
        if name not in _MASK_OPS:
            return False
        # a logic op on masks: as wide as the first operand that is one; else lane by lane
        first = next((em.vec_types[src[0]] for x in srcs if (src := x.lane_src(0)) is not None and src[0] in em.masks),
                     None)
        if first is None:
            return False
        bits = int(first[1:first.index("x")])
        per = _piece(em, mask_type(bits, 1).scalar, n)
        if per is None:
            return False
        mt = em.vtype(mask_type(bits, per))
        exprs = [(mt, _MASK_OPS[name].format(*(mask_of(em, x, f, per, bits) for x in srcs))) for f in range(0, n, per)]
        _set(em, u, exprs, per, escapes, True)
        return True
    s = d.scalar
    if s.is_float and s not in (dtypes.float32, dtypes.float64):
        return False
    per = _piece(em, s, n)
    if per is None:
        return False
    vd = s.vec(per)
    t = em.vtype(vd)
    bits = s.itemsize * 8
    exprs: list[tuple[str, str]] = []
    for f in range(0, n, per):
        if name == "core.where":
            m = mask_of(em, srcs[0], f, per, bits)
            a, b = em.pack(srcs[1], vd, f), em.pack(srcs[2], vd, f)
            mt = em.vec_types.get(m) or em.vtype(mask_type(bits, per))
            if mt == t:
                e = f"({a} & {m}) | ({b} & ~{m})"
            else:
                e = f"({t})((({mt}){a} & {m}) | (({mt}){b} & ~{m}))"
            exprs.append((t, e))
            continue
        args = [em.pack(x, vd, f) for x in srcs]
        table = _FLOAT_OPS if s.is_float else _INT_OPS
        if name in table:
            e = table[name].format(*args)
        elif name == "core.recip" and s.is_float:  # one vector division (each lane IEEE 1/x, as the scalar code)
            e = f"{'1.0' if s is dtypes.float64 else '1.0f'} / {args[0]}"
        elif name == "core.max":
            hname, helper = vector_max(vd)
            em.vtype(mask_type(bits, per))  # the helper's mask type (a dependency it names)
            em.use(hname, helper)
            e = f"{hname}({args[0]}, {args[1]})"
        elif name in ("core.shl", "core.shr") and not s.is_float:
            ut = em.vtype((dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)[bits.bit_length() - 4].vec(per))
            amt = _shift_amount(em, u, args[1], bits, ut)
            if name == "core.shl":
                e = f"({t})(({ut}){args[0]} << {amt})"
            else:
                e = f"{args[0]} >> {amt}"
        else:
            return False
        exprs.append((t, e))
    _set(em, u, exprs, per, escapes, False)
    return True


def vector_cast(em: CEmitter, u: UOp, escapes: bool) -> bool:
    """A vector cast as vector code where C's conversion is the semantics' (see the module docstring)."""
    x = u.operands.x
    s, d, n = x.dtype.scalar, u.dtype.scalar, u.dtype.count
    if s is dtypes.bool and n > 1 and d is not dtypes.bool and _ok(em, u.dtype) and \
            (not d.is_float or d in (dtypes.float32, dtypes.float64)):
        return _mask_cast(em, u, em.lanes(x), escapes)
    if n < 2 or not _ok(em, x.dtype):
        return False
    src = em.lanes(x)
    a = em.pack(src, x.dtype)
    if d is dtypes.bool:
        bits = s.itemsize * 8
        _set(em, u, [(em.vtype(mask_type(bits, n)), f"{a} != 0")], n, escapes, True)
        return True
    if not _ok(em, u.dtype) or (s.is_float and not d.is_float):
        return False
    t = em.vtype(u.dtype)
    _set(em, u, [(t, a if em.vtype(x.dtype) == t else f"__builtin_convertvector({a}, {t})")], n, escapes, False)
    return True


def _mask_cast(em: CEmitter, u: UOp, src: Lanes, escapes: bool) -> bool:
    """A bool vector held whole in one mask (-1 where true) cast to numbers: the mask negated (1 / 0) in its own
    type, converted when another (a count of compares summed as i32x16, not 16 lane-by-lane casts); False when the
    lanes are not one mask (left to the lane-by-lane rows)."""
    n = u.dtype.count
    name = _mask_name(em, src, range(n))
    if name is None:
        return False
    t = em.vtype(u.dtype)
    mt = em.vec_types[name]
    _set(em, u, [(t, f"-{name}" if mt == t else f"__builtin_convertvector(-{name}, {t})")], n, escapes, False)
    return True


def vector_bitcast(em: CEmitter, u: UOp, escapes: bool) -> bool:
    """A bitcast between vector types of the same size: `(T)v` (in 64-byte pieces when lanes map one to one)."""
    x = u.operands.x
    s, d = x.dtype, u.dtype
    if s.count * s.scalar.itemsize != d.count * d.scalar.itemsize:
        return False
    if _ok(em, s) and _ok(em, d):
        t = em.vtype(d)
        _set(em, u, [(t, f"({t}){em.pack(em.lanes(x), s)}")], d.count, escapes, False)
        return True
    if s.count != d.count or s.scalar.is_float and s.scalar not in (dtypes.float32, dtypes.float64):
        return False
    if (per := _piece(em, s.scalar, s.count)) is None or not _ok(em, d.scalar.vec(per)):
        return False
    src, t = em.lanes(x), em.vtype(d.scalar.vec(per))
    _set(em, u, [(t, f"({t}){em.pack(src, s.scalar.vec(per), f)}") for f in range(0, s.count, per)], per, escapes,
         False)
    return True
