"""The reference interpreter: executes core + tensor dialect graphs with numpy, op by op. It is the oracle every
later stage (passes, backends) is checked against, so every choice below is exact and implementable in C.

Values are numpy arrays (0-d for shapeless scalars); a vector dtype adds a trailing lane axis. Each node is
evaluated once (memoized), iteratively over `root.toposort()`.

Semantics, per dtype (the choices a C backend must reproduce):

- Integers (every width, and `index` = int64) wrap in two's complement on add/sub/mul/neg/shl/casts.
- `core.idiv` / `core.mod`: C semantics, truncate toward zero; the remainder has the sign of the dividend.
  Division by zero is defined: `x idiv 0 == 0` and `x mod 0 == 0`. `INT_MIN idiv -1 == INT_MIN` (wraps),
  `INT_MIN mod -1 == 0`.
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
- `tensor.var` needs a value in `var_vals` (by name); `tensor.bind` gives its const value (an index).
- A bf16 buffer's float32 carrier is rounded to bf16 when read.
- NaN payloads and signs are not part of the contract: any NaN equals any NaN.

Kernel level: `tensor.call` runs its kernel.def region on the buffers given as operands (`run_kernel`), data-
parallel (each range is a numpy axis; see run_kernel). Device-level ops are not interpreted yet: they raise
IRError.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["evaluate", "run_kernel", "alu", "cast_array", "bitcast_array", "const_array", "bf16_round", "np_dtype",
           "to_python", "values_equal"]

Value = Any  # np.ndarray, a list of values (sink) or None (void)


def np_dtype(d: DType) -> np.dtype:
    """The numpy element type that carries `d` (bf16 rides in float32; index is int64)."""
    name = d.scalar.np_name
    if name is None:
        raise IRError(f"the reference interpreter has no numpy type for {d}")
    return np.dtype(name)


def _err(u: UOp, msg: str) -> IRError:
    return IRError(diagnostics=[diag_at(u, msg)])


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
    "core.idiv": lambda a, b: _int_divmod(a, b)[0], "core.mod": lambda a, b: _int_divmod(a, b)[1],
    "core.shl": lambda a, b: _shift(a, b, True), "core.shr": lambda a, b: _shift(a, b, False),
}
_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "core.recip": np.reciprocal, "core.exp2": np.exp2, "core.log2": np.log2, "core.sin": np.sin,
    "core.sqrt": np.sqrt, "core.trunc": np.trunc,
}
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
            return _round(_UNARY[name](srcs[0]), dtype)
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


# ---- tensor ops ----------------------------------------------------------------------------------------------------
def _reduce(x: np.ndarray, op: str, axes: tuple[int, ...], d: DType) -> np.ndarray:
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


def _assign_view(u: UOp, target: UOp, buffers: dict[int, np.ndarray]) -> np.ndarray:
    """A writable numpy view of the buffer region that `target` denotes."""
    chain: list[UOp] = []
    t = target
    while t.op.name != "tensor.buffer":
        if t.op.name == "tensor.assign":
            t = t.src[0]
            continue
        if t.op.name not in ("tensor.reshape", "tensor.permute", "tensor.shrink", "tensor.flip"):
            raise _err(u, f"tensor.assign can write a tensor.buffer or a reshape/permute/shrink/flip view of one, "
                          f"not through {t.op.name}")
        chain.append(t)
        t = t.src[0]
    base = _buffer_array(t, buffers)
    v = base
    for m in reversed(chain):
        n = m.op.name
        if n == "tensor.reshape":
            nv = v.reshape(m.arg)
            if nv.size and not np.shares_memory(nv, base):
                raise _err(u, "tensor.assign cannot write through this reshape: it is not a view of the buffer")
            v = nv
        elif n == "tensor.permute":
            v = np.transpose(v, m.arg)
        elif n == "tensor.shrink":
            v = v[tuple(slice(b, e) for b, e in m.arg)]
        else:
            v = np.flip(v, axis=m.arg) if m.arg else v
    return v


def _buffer_array(u: UOp, buffers: dict[int, np.ndarray]) -> np.ndarray:
    bid, _device, shape = u.arg
    if bid not in buffers:
        raise _err(u, f"no buffer with id {bid} was given to the interpreter (have: {sorted(buffers)})")
    arr = buffers[bid]
    if not isinstance(arr, np.ndarray):
        raise _err(u, f"buffer {bid} must be a numpy array, got {type(arr).__name__}")
    want = np_dtype(u.dtype)
    if arr.dtype != want or arr.shape != tuple(shape):
        raise _err(u, f"buffer {bid} is {arr.dtype}{list(arr.shape)}, but the IR declares {u.dtype}{list(shape)} "
                      f"(numpy {want}{list(shape)})")
    return arr


class _Ctx:
    __slots__ = ("buffers", "assigned", "var_vals")

    def __init__(self, buffers: dict[int, np.ndarray], assigned: set[int], var_vals: dict[str, int]):
        self.buffers, self.assigned, self.var_vals = buffers, assigned, var_vals


def _eval_node(u: UOp, s: list[Value], ctx: _Ctx) -> Value:
    name = u.op.name
    if name in ALU_NAMES:
        return alu(name, u.dtype, s, [x.dtype for x in u.src])
    if name == "core.const":
        a = u.arg
        shaped = type(a) is tuple and len(a) == 2 and type(a[1]) is tuple and u.dtype.count == 1
        return const_array(u.dtype, a[0], a[1]) if shaped else const_array(u.dtype, a)
    if name == "core.cast":
        return cast_array(s[0], u.src[0].dtype, u.dtype)
    if name == "core.bitcast":
        return bitcast_array(s[0], u.src[0].dtype, u.dtype)
    if name == "core.sink":
        return list(s)
    if name == "core.group":
        return None
    if name == "core.vectorize":
        return np.stack([np.asarray(x) for x in np.broadcast_arrays(*s)], axis=-1)
    if name == "core.gep":
        r = s[0][..., list(u.arg)]
        return r[..., 0] if len(u.arg) == 1 else r
    if name == "tensor.buffer":
        arr = _buffer_array(u, ctx.buffers)
        if u.dtype is dtypes.bfloat16:  # the float32 carrier may hold more precision than bf16 has
            return bf16_round(arr)
        if u.arg[0] in ctx.assigned:
            return arr.copy()
        view = arr.view()
        view.flags.writeable = False
        return view
    if name == "tensor.reshape":
        return np.reshape(s[0], u.arg)
    if name == "tensor.permute":
        return np.transpose(s[0], u.arg)
    if name == "tensor.expand":
        return np.broadcast_to(s[0], u.arg)
    if name == "tensor.pad":
        return np.pad(s[0], [tuple(p) for p in u.arg], mode="constant", constant_values=np.zeros((), s[0].dtype))
    if name == "tensor.shrink":
        return s[0][tuple(slice(b, e) for b, e in u.arg)]
    if name == "tensor.flip":
        return np.flip(s[0], axis=u.arg) if u.arg else s[0]
    if name == "tensor.reduce":
        return _reduce(s[0], u.arg[0], tuple(u.arg[1]), u.dtype)
    if name in ("tensor.copy", "tensor.contiguous", "tensor.detach"):
        return s[0]
    if name == "tensor.assign":
        view = _assign_view(u, u.src[0], ctx.buffers)
        val = np.asarray(s[1], dtype=view.dtype)
        view[...] = val
        return np.broadcast_to(val, view.shape)
    if name == "tensor.var":
        if u.arg[0] not in ctx.var_vals:
            raise _err(u, f"variable {u.arg[0]!r} is not bound (pass var_vals or use tensor.bind)")
        return np.asarray(ctx.var_vals[u.arg[0]], dtype=np.int64)
    if name == "tensor.bind":
        return np.asarray(s[1], dtype=np.int64)
    if name == "tensor.call":
        arrays = [_buffer_array(x, ctx.buffers) for x in u.src if x.op.name == "tensor.buffer"]
        if any(x.dtype is not dtypes.void and x.op.name != "tensor.buffer" for x in u.src):
            raise _err(u, "tensor.call operands must be tensor.buffer values (or void values that order it)")
        run_kernel(u.arg[0], arrays, ctx.var_vals)
        return None
    if u.op.dialect in ("kernel", "device"):
        raise _err(u, f"{name} outside a tensor.call: the reference interpreter runs kernel-level ops only as the "
                      f"body of a kernel (run_kernel); device-level ops are not interpreted yet")
    raise _err(u, f"the reference interpreter does not know {name}")


def bitcast_array(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
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


def evaluate(root: UOp, buffers: dict[int, np.ndarray],
             var_vals: dict[str, int] | None = None) -> np.ndarray | list[np.ndarray]:
    """Run the graph under `root`; a core.sink root gives the list of its sources' values.

    `buffers` maps tensor.buffer ids to arrays (bf16 as float32); tensor.assign writes into them in place.
    `var_vals` gives tensor.var values by name (a tensor.bind in the graph binds its variable everywhere)."""
    order = root.toposort()
    assigned: set[int] = set()
    var_vals = dict(var_vals or {})
    for u in order:
        if u.op.name == "tensor.bind" and u.src[0].op.name == "tensor.var":
            var_vals.setdefault(u.src[0].arg[0], int(u.src[1].arg))
        if u.op.name == "tensor.call":
            assigned.update(x.arg[0] for x in u.src if x.op.name == "tensor.buffer")
        if u.op.name == "tensor.assign":
            t = u.src[0]
            while t.src and t.op.name != "tensor.buffer":
                t = t.src[0]
            if t.op.name == "tensor.buffer":
                assigned.add(t.arg[0])
    ctx = _Ctx(buffers, assigned, var_vals)
    vals: dict[UOp, Value] = {}
    for u in order:
        try:
            vals[u] = _eval_node(u, [vals[s] for s in u.src], ctx)
        except IRError:
            raise
        except (ValueError, TypeError, IndexError, KeyError) as e:
            raise _err(u, f"the reference interpreter failed on {u.op.name}: {e}") from e
    return _own(vals[root])


def _own(v: Value) -> Value:
    """Results never alias the caller's buffers or internal views."""
    if isinstance(v, list):
        return [_own(x) for x in v]
    return None if v is None else np.array(v, copy=True)


# ---- kernel level ---------------------------------------------------------------------------------------------------
class _Ptr:
    """A pointer value: a flat buffer plus an offset array (and gate) over the iteration space."""

    __slots__ = ("flat", "off", "gate")

    def __init__(self, flat: np.ndarray, off: np.ndarray, gate: np.ndarray | None):
        self.flat, self.off, self.gate = flat, off, gate


def _and_gate(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    return b if a is None else (a if b is None else a & b)


def run_kernel(kdef: UOp, buffers: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    """Run a kernel.def body on `buffers` (kernel.param idx i is buffers[i]); stores write them in place.

    Data-parallel semantics: every kernel.range is one numpy axis, each op is evaluated over its whole iteration
    space at once, in toposort order. A load sees a store of the same kernel only if it depends on it; when several
    iterations store to one address, the last in row-major order of the ranges (toposort order) wins."""
    if kdef.op.name != "kernel.def":
        raise _err(kdef, f"run_kernel needs a kernel.def, got {kdef.op.name}")
    order = kdef.toposort()
    ranges = [u for u in order if u.op.name == "kernel.range"]
    nd = len(ranges)
    axis = {r: i for i, r in enumerate(ranges)}
    vv = var_vals or {}
    vals: dict[UOp, Any] = {}

    def space(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return x.reshape(x.shape + (1,) * (nd - x.ndim)) if x.ndim < nd else x

    for u in order:
        name = u.op.name
        s = [vals.get(x) for x in u.src]
        try:
            if name == "kernel.param":
                if not 0 <= u.arg < len(buffers):
                    raise _err(u, f"kernel.param {u.arg}: the kernel got {len(buffers)} buffers")
                arr = buffers[u.arg]
                if arr.dtype != np_dtype(u.dtype.base):
                    raise _err(u, f"kernel.param {u.arg} is {u.dtype}, but buffer {u.arg} is {arr.dtype}")
                r: Any = _Ptr(arr.reshape(-1), space(np.zeros((), np.int64)), None)
                if not np.shares_memory(r.flat, arr) and arr.size:
                    raise _err(u, f"buffer {u.arg} must be contiguous to be written by a kernel")
            elif name in ("kernel.local", "kernel.register"):
                r = _Ptr(np.zeros(u.dtype.size, np_dtype(u.dtype.base)), space(np.zeros((), np.int64)), None)
            elif name == "kernel.var":
                if u.arg[0] not in vv:
                    raise _err(u, f"variable {u.arg[0]!r} is not bound (pass var_vals)")
                r = space(np.asarray(vv[u.arg[0]], np.int64))
            elif name == "kernel.range":
                end = np.asarray(s[0])
                if end.size != 1:
                    raise _err(u, "a range end must not depend on another range")
                shape = [1] * nd
                shape[axis[u]] = int(end.reshape(-1)[0])
                r = np.arange(shape[axis[u]], dtype=np.int64).reshape(shape)
            elif name == "kernel.index":
                p = s[0]
                r = _Ptr(p.flat, space(p.off + np.asarray(s[1], np.int64)),
                         _and_gate(p.gate, space(s[2]) if len(s) > 2 else None))
            elif name == "kernel.load":
                p = s[0]
                gate = _and_gate(p.gate, space(s[2]) if len(s) > 2 else None)
                inb = (p.off >= 0) & (p.off < p.flat.size)
                if np.any(~inb if gate is None else gate & ~inb):
                    raise _err(u, f"out-of-bounds load (buffer of {p.flat.size} elements)")
                off = np.where(inb, p.off, 0)
                val = p.flat[off] if p.flat.size else np.zeros(off.shape, p.flat.dtype)
                alt = s[1] if len(s) > 1 else np.zeros((), p.flat.dtype)
                r = space(val if gate is None else np.where(gate, val, alt))
            elif name == "kernel.store":
                p = s[0]
                gate = _and_gate(p.gate, space(s[2]) if len(s) > 2 else None)
                off, val = np.broadcast_arrays(p.off, space(s[1]), *(() if gate is None else (gate,)))[:2]
                mask = np.ones(off.shape, bool) if gate is None else np.broadcast_to(gate, off.shape)
                o, v = off[mask], val[mask]
                if o.size and (o.min() < 0 or o.max() >= p.flat.size):
                    raise _err(u, f"out-of-bounds store (buffer of {p.flat.size} elements)")
                p.flat[o] = v
                r = None
            elif name == "kernel.reduce":
                x = space(s[0])
                axes = tuple(sorted(axis[rr] for rr in u.src[1:]))
                shape = list(x.shape)
                for rr in u.src[1:]:
                    shape[axis[rr]] = vals[rr].shape[axis[rr]]
                r = _reduce(np.broadcast_to(x, shape), u.arg, axes, u.dtype)
            elif name in ("kernel.end", "kernel.def", "core.group", "core.sink"):
                r = None
            elif name == "core.const":
                r = space(const_array(u.dtype, u.arg))
            elif name in ALU_NAMES:
                r = alu(name, u.dtype, [np.asarray(x) for x in s], [x.dtype for x in u.src])
            elif name == "core.cast":
                r = cast_array(s[0], u.src[0].dtype, u.dtype)
            elif name == "core.bitcast" and u.dtype.count == 1 and u.src[0].dtype.count == 1:
                r = bitcast_array(s[0], u.src[0].dtype, u.dtype)
            else:
                raise _err(u, f"the reference interpreter does not run {name} inside a kernel yet")
        except IRError:
            raise
        except (ValueError, TypeError, IndexError, KeyError) as e:
            raise _err(u, f"the reference interpreter failed on {name}: {e}") from e
        vals[u] = r
