"""The executable meaning of the core ops and of tensor reductions: exact numpy semantics per dtype.

This module is the specification every stage is checked against: the reference interpreter
(uopir.backends.python) runs these functions, constant folding calls them (so a folded constant is bit for bit what
the program would have computed), and every compiled backend must reproduce them. Each choice below is exact and
implementable in C.

Values are numpy arrays ("carriers"; 0-d for shapeless scalars); a vector dtype adds a trailing lane axis.

Semantics, per dtype (the choices a C backend must reproduce):

- Integers (every width, and `index` = int64) wrap in two's complement on add/sub/mul/neg/shl/casts.
- `core.idiv` / `core.mod`: C semantics, truncate toward zero; the remainder has the sign of the dividend.
  Division by zero is defined: `x idiv 0 == 0` and `x mod 0 == 0`. `INT_MIN idiv -1 == INT_MIN` (wraps),
  `INT_MIN mod -1 == 0`. On floats `core.mod` is C's `fmod` (exact, sign of the dividend; `x mod 0.0` is NaN).
- `core.shl` / `core.shr`: the shift amount is taken modulo the bit width (`b & (bits - 1)`, so negative amounts
  wrap too); `shr` is arithmetic for signed types and logical for unsigned ones; `shl` wraps.
- `core.cast`:
  float -> int truncates toward zero and SATURATES to [min, max] of the target; NaN -> 0 (so +inf -> max,
  -inf -> min, -1.5 -> 0 for unsigned targets);
  int -> int wraps; int/float -> bool is `x != 0` (NaN -> true); bool -> number is 0 / 1;
  to a float: round to nearest even, correctly rounded from the exact source value (no double rounding,
  including to bf16 from f64 and from 64-bit ints).
- `core.bitcast`: reinterprets the bits (numpy `.view`); bf16 bits are the top half of its float32 carrier.
- Floats: IEEE in the dtype's precision. f16 is computed by numpy in f16 (results rounded to f16 after every op).
  bf16 is carried as float32 and rounded to bf16 (round to nearest even; NaN stays a quiet NaN) after every op,
  which equals the correctly rounded result for add/sub/mul/div/sqrt (24 >= 2*8+2 bits).
- `core.mulacc a, b, c` is NOT fused: `(a*b)` is rounded, then `+ c` is rounded (C backends: -ffp-contract=off).
  `device.fma a, b, c` (f32 only; what device-contract makes of a float sum's `acc + a*b` on targets that fuse) IS:
  the exact `a*b + c` rounded once (`fma_f32`).
- `core.max` (and reductions max/min) propagate NaN; they order +0.0 above -0.0, so max/min are commutative
  bit for bit (max(-0.0, 0.0) = 0.0, min(-0.0, 0.0) = -0.0). Comparisons are IEEE (NaN compares unequal).
- `core.neg` of a bool is logical not (the verifier rejects it; the interpreter stays total).
- `tensor.reduce`: add/mul accumulate sequentially in the dtype, in row-major order of the reduced elements,
  starting from the identity (0 / 1): `((0 + x0) + x1) + ...`, rounding after every step (f16 accumulates in f16,
  bf16 in bf16); this is what a plain C loop with an accumulator computes. Integer sums/products wrap in the dtype.
  max/min start from the identity (-inf / +inf, or the int type's min / max), so an empty reduction yields it.
- `tensor.pad` pads with zero (false for bool). Movement ops are numpy views; values are never written in place,
  except by `tensor.assign`, which writes the target buffer (directly or through reshape/permute/shrink/flip
  views of it). Every buffer an assign in the graph targets is read as a private copy, so a graph reads all
  buffers as they were on entry; the result of an assign is the written value.
- `tensor.copy` / `tensor.contiguous` / `tensor.detach` are the identity on values.
- `tensor.var` needs a value in `var_vals` (by name); `tensor.bind` gives its const value (an index). A movement
  op's symbolic dims (`?`, its extra operands) are those values' index arithmetic; a shrink out of range or a
  negative pad at these values is an error. A `tensor.call` gives its kernel's `kernel.var`s the values of its
  variable operands.
- A bf16 buffer's float32 carrier is rounded to bf16 when read.
- NaN payloads and signs are not part of the contract: any NaN equals any NaN (`values_equal`).

Kernel level (`tensor.call` of a `kernel.def`): every kernel.range is an iteration axis; loads read, stores write
the buffers given as operands; several stores to one address: the last in row-major order of the ranges wins. A
`kernel.reduce` accumulates sequentially in row-major order of its range operands (the first one outermost), like
nested loops in operand order. `tensor.after buf, effects...` reads the buffer as it is once its effect operands
(the calls of a schedule) have run: how a schedule hands back the buffers its kernels wrote.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import DType, dtypes

__all__ = ["alu", "cast_array", "bitcast_array", "const_array", "bf16_round", "np_dtype", "to_python", "values_equal",
           "reduce_array", "ALU_NAMES"]


def np_dtype(d: DType) -> np.dtype:
    """The numpy element type that carries `d` (bf16 rides in float32; index is int64)."""
    name = d.scalar.np_name
    if name is None:
        raise IRError(f"the reference interpreter has no numpy type for {d}")
    return np.dtype(name)


# ---- bf16 and exact conversions -----------------------------------------------------------------------------------
def _f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
    """Round f64 to f32 with round-to-odd, so that a later round-to-nearest to bf16 is not a double rounding."""
    x = np.asarray(x).reshape(-1)
    f = x.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != x) & ~np.isnan(x)
    f = np.where(inexact & (np.abs(back) > np.abs(x)), np.nextafter(f, np.float32(0)), f).astype(np.float32)
    bits = f.view(np.uint32)
    return np.where(inexact, bits | np.uint32(1), bits).astype(np.uint32).view(np.float32)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """Round float32 (or float64, exactly) values to the nearest-even bf16 value, carried as float32."""
    x = np.asarray(x)
    shape = x.shape
    if x.dtype == np.float64:
        x = _f64_to_f32_odd(x)
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    b = x.view(np.uint32)
    r = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    r = np.where(np.isnan(x), (b & np.uint32(0xFFFF0000)) | np.uint32(0x00400000), r).astype(np.uint32)
    return r.view(np.float32).reshape(shape)


def _int_to_f64_sticky(a: np.ndarray) -> np.ndarray:
    """Ints as f64 that round correctly to any precision <= 51 bits: exact below 2**53, else with a sticky bit."""
    a = np.asarray(a)
    if a.dtype.itemsize < 8 or a.dtype == np.bool_:
        return a.astype(np.float64)
    neg = a < 0 if a.dtype.kind == "i" else np.zeros(a.shape, bool)
    m = np.where(neg, (~a.view(np.uint64)) + np.uint64(1), a.view(np.uint64)).astype(np.uint64)
    big = m >= np.uint64(1 << 53)
    sticky = (m & np.uint64(0x7FF)) != 0
    reduced = ((m >> np.uint64(11)) | sticky.astype(np.uint64)).astype(np.float64) * 2048.0
    mag = np.where(big, reduced, m.astype(np.float64))
    return np.where(neg, -mag, mag)


def cast_array(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """core.cast on a carrier array (see the module docstring for the rules)."""
    s, d = src.scalar, dst.scalar
    to = np_dtype(d)
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if d.is_bool:
            return np.asarray(x != 0)
        if s.is_bool:
            out = x.astype(to)
        elif d.is_float:
            if d is dtypes.bfloat16:
                out = bf16_round(_int_to_f64_sticky(x) if not s.is_float else x.astype(np.float64))
            else:
                out = x.astype(to)
        elif s.is_float:  # float -> int: truncate, saturate, NaN -> 0
            t = np.trunc(x.astype(np.float64))
            lo, hi = float(d.min), float(d.max) + 1.0  # hi is a power of two: exact
            nan, over, under = np.isnan(t), t >= hi, t < lo
            out = np.where(nan | over | under, 0.0, t).astype(to)
            out = np.where(over, to.type(d.max), out)
            out = np.where(under, to.type(d.min), out)
            out = np.where(nan, to.type(0), out)
        else:  # int -> int wraps
            out = x.astype(to)
    return np.asarray(out, dtype=to)


def const_array(dtype: DType, value: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The carrier array of a const (a vector const gets a trailing lane axis)."""
    to = np_dtype(dtype)
    if dtype.count > 1:
        lanes = value if type(value) is tuple else (value,) * dtype.count
        return np.asarray([const_array(dtype.scalar, v) for v in lanes], dtype=to)
    if dtype is dtypes.bfloat16:
        arr = bf16_round(np.full(shape or (), value, dtype=np.float64))
    else:
        with np.errstate(all="ignore"):
            arr = np.full(shape or (), value, dtype=to)
    return arr


def to_python(x: np.ndarray, dtype: DType) -> Any:
    """A scalar carrier value as the canonical Python const value (float / int / bool, a tuple for vectors)."""
    x = np.asarray(x)
    if dtype.count > 1:
        return tuple(to_python(x[..., i], dtype.scalar) for i in range(dtype.count))
    v = x.reshape(-1)[0] if x.size else x.item()
    if dtype.is_float:
        return float(v)
    if dtype.is_bool:
        return bool(v)
    return int(v)


def values_equal(a: Any, b: Any) -> bool:
    """Bit-exact equality of evaluated values (shape, dtype, bits; any NaN equals any NaN)."""
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and \
            all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        na, nb = np.isnan(a), np.isnan(b)
        if not np.array_equal(na, nb):
            return False
        u = np.dtype(f"u{a.dtype.itemsize}")
        return bool(np.array_equal(np.ascontiguousarray(a).view(u)[~na], np.ascontiguousarray(b).view(u)[~nb]))
    return bool(np.array_equal(a, b))


# ---- the ALU -------------------------------------------------------------------------------------------------------
def _fix_zero_sign(r: np.ndarray, a: np.ndarray, b: np.ndarray, want_positive: bool) -> np.ndarray:
    """max/min of +0.0 and -0.0: +0.0 for max, -0.0 for min, whatever the operand order."""
    both = (a == 0) & (b == 0)
    if not np.any(both):
        return r
    sa, sb = np.signbit(a), np.signbit(b)
    pick_neg = (sa & sb) if want_positive else (sa | sb)
    zero = np.where(pick_neg, -np.zeros((), r.dtype), np.zeros((), r.dtype))
    return np.where(both, zero, r)


def _max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.maximum(a, b)
    return _fix_zero_sign(r, a, b, True) if r.dtype.kind == "f" else r


def _int_divmod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C division and remainder in the operand dtype: truncating, x/0 = x%0 = 0, MIN/-1 wraps."""
    a, b = np.broadcast_arrays(a, b)
    zero = np.zeros((), a.dtype)
    if a.dtype.kind == "u" or a.dtype == np.bool_:
        b0 = np.where(b == 0, np.ones((), a.dtype), b)
        q, r = a // b0, a % b0
        return np.where(b == 0, zero, q), np.where(b == 0, zero, r)
    minus1 = b == -1
    special = (b == 0) | minus1
    b0 = np.where(special, np.ones((), a.dtype), b)
    q = a // b0
    r = a - q * b0
    adj = (r != 0) & ((a < 0) != (b0 < 0))
    q = np.where(adj, q + 1, q)
    r = np.where(adj, r - b0, r)
    q = np.where(minus1, np.negative(a), np.where(b == 0, zero, q))
    r = np.where(special, zero, r)
    return q, r


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C `%` on ints; `fmod` on floats (exact, the sign of a; x mod 0.0 and inf mod x are NaN)."""
    return np.fmod(a, b) if np.asarray(a).dtype.kind == "f" else _int_divmod(a, b)[1]


def _shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    u = np.dtype(f"u{a.dtype.itemsize}")
    amt = (np.asarray(b).astype(u) & u.type(bits - 1))
    if left:
        return (np.asarray(a).astype(u) << amt).astype(a.dtype)
    return np.right_shift(a, amt.astype(a.dtype))


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "core.add": np.add, "core.sub": np.subtract, "core.mul": np.multiply, "core.fdiv": np.divide,
    "core.max": _max, "core.and": np.bitwise_and, "core.or": np.bitwise_or, "core.xor": np.bitwise_xor,
    "core.cmplt": np.less, "core.cmpne": np.not_equal, "core.cmpeq": np.equal,
    "core.idiv": lambda a, b: _int_divmod(a, b)[0], "core.mod": lambda a, b: _mod(a, b),
    "core.shl": lambda a, b: _shift(a, b, True), "core.shr": lambda a, b: _shift(a, b, False),
}
_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "core.recip": np.reciprocal, "core.exp2": np.exp2, "core.log2": np.log2, "core.sin": np.sin,
    "core.sqrt": np.sqrt, "core.trunc": np.trunc,
}
_LAYOUT_DEPENDENT = frozenset(("core.exp2", "core.log2", "core.sin"))
ALU_NAMES = frozenset(_BINARY) | frozenset(_UNARY) | {"core.neg", "core.where", "core.mulacc"}


def _round(x: np.ndarray, d: DType) -> np.ndarray:
    """Bring a result to its dtype's carrier (and to bf16 precision)."""
    x = np.asarray(x, dtype=np_dtype(d))
    return bf16_round(x) if d.scalar is dtypes.bfloat16 else x


def alu(name: str, dtype: DType, srcs: list[np.ndarray], src_dtypes: list[DType] | None = None) -> np.ndarray:
    """One elementwise core op on carrier arrays; `dtype` is the result dtype. Used by constant folding too."""
    with np.errstate(all="ignore"):
        if name in _BINARY:
            a, b = srcs
            r = _BINARY[name](a, b)
            return np.asarray(r, dtype=np.bool_) if dtype.scalar.is_bool else _round(r, dtype)
        if name in _UNARY:
            x = srcs[0]
            if name in _LAYOUT_DEPENDENT:  # numpy's SIMD loop (unit-stride input) and its strided loop differ by
                x = np.array(x, order="C", copy=True)  # an ulp: always a fresh copy (a reversed 1-element view is
                # flagged C-contiguous, yet its stride is negative and numpy takes the strided loop)
            return _round(_UNARY[name](x), dtype)
        if name == "core.neg":
            x = srcs[0]
            return np.asarray(np.logical_not(x)) if x.dtype == np.bool_ else _round(np.negative(x), dtype)
        if name == "core.where":
            c, a, b = srcs
            if dtype.count > 1 and (src_dtypes is None or src_dtypes[0].count == 1) and c.ndim < a.ndim:
                c = c[..., None]
            return _round(np.where(c, a, b), dtype)
        if name == "core.mulacc":
            a, b, c = srcs
            return _round(np.add(_round(np.multiply(a, b), dtype), c), dtype)
    raise KeyError(name)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The f32 fused multiply-add, correctly rounded: the product of two f32 is exact in f64; the f64 sum is made
    round-to-odd (TwoSum gives its exact error; a nonzero error with an even last bit moves it one f64 step toward
    the exact value), and rounding a round-to-odd f64 to f32 is correct (53 >= 24 + 2 bits), so no double rounding."""
    with np.errstate(all="ignore"):
        p = np.multiply(np.asarray(a, np.float64), np.asarray(b, np.float64))
        c64 = np.asarray(c, np.float64)
        s = p + c64
        bv = s - p
        err = (p - (s - bv)) + (c64 - bv)
        s = np.array(s, dtype=np.float64, copy=True, ndmin=0)
        bits = s.view(np.int64)
        fix = np.isfinite(err) & (err != 0) & ((bits & 1) == 0)
        # one step away from zero where the error has the sum's sign, toward zero where it has the other
        step = np.where(np.signbit(err) == np.signbit(s), 1, -1)
        bits[...] = np.where(fix, bits + step, bits)
        return np.asarray(s.astype(np.float32))


def reduce_array(x: np.ndarray, op: str, axes: tuple[int, ...], d: DType) -> np.ndarray:
    """tensor.reduce with keepdims: sequential accumulation from the identity, in the dtype."""
    out_shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    if not axes:
        return x
    keep = [i for i in range(x.ndim) if i not in axes]
    n = 1
    for a in axes:
        n *= x.shape[a]
    flat = np.transpose(x, keep + list(axes)).reshape(tuple(x.shape[i] for i in keep) + (n,))
    to = np_dtype(d)
    with np.errstate(all="ignore"):
        if op in ("max", "min"):
            ident = to.type(d.min if op == "max" else d.max) if not d.is_bool else np.bool_(op == "min")
            fn = np.maximum if op == "max" else np.minimum
            r = fn.reduce(flat, axis=-1, initial=ident) if flat.shape[-1] else np.full(flat.shape[:-1], ident, to)
            if to.kind == "f" and r.size:
                # signed zeros: max picks +0.0 if any +0.0 is present, min picks -0.0 if any -0.0 is present
                zmask = flat == 0
                if op == "max":
                    has = np.any(zmask & ~np.signbit(flat), axis=-1)
                    r = np.where((r == 0) & has, np.zeros((), to), r)
                else:
                    has = np.any(zmask & np.signbit(flat), axis=-1)
                    r = np.where((r == 0) & has, -np.zeros((), to), r)
            return np.asarray(r, dtype=to).reshape(out_shape)
        ufunc = np.add if op == "add" else np.multiply
        ident_v = 0 if op == "add" else 1
        if to.kind != "f":
            r = ufunc.reduce(flat, axis=-1, dtype=to)
            return np.asarray(r, dtype=to).reshape(out_shape)
        if d.scalar is dtypes.bfloat16:
            acc = np.full(flat.shape[:-1], ident_v, np.float32)
            for i in range(flat.shape[-1]):
                acc = bf16_round(ufunc(acc, flat[..., i]))
            return acc.reshape(out_shape)
        init = np.full(flat.shape[:-1] + (1,), ident_v, to)
        r = ufunc.accumulate(np.concatenate([init, flat], axis=-1), axis=-1, dtype=to)[..., -1]
        return np.asarray(r, dtype=to).reshape(out_shape)


def bitcast_array(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """core.bitcast on a carrier array: the same bits read as `dst` (bf16 bits are the top half of its carrier)."""
    x = np.asarray(x)
    shape = x.shape[:-1] if src.count > 1 else x.shape
    x = np.ascontiguousarray(x).reshape(-1)
    if src.scalar is dtypes.bfloat16:
        x = (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    if dst.scalar is dtypes.bfloat16:
        raw = np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << np.uint32(16)
        out = raw.view(np.float32)
    else:
        out = np.ascontiguousarray(x).view(np_dtype(dst))
    return out.reshape(shape + ((dst.count,) if dst.count > 1 else ()))
