"""ONNX element types narrower than any uopir dtype: float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4e2m1,
int4/uint4 and int2/uint2.

Inside uopir such a tensor is held in a wider *storage* dtype that has every value of the type exactly: float32 for
the float8/float4 types (a float8e4m3fn 0.5 is the float32 0.5; the types' NaNs are the float32 quiet NaN of the
same sign, e8m0's smallest value 2^-127 a float32 subnormal) and int8/uint8 for the 4- and 2-bit ints. The importer
tracks which values have such an ONNX type (by value name), converts at the boundary (initializers, Constant values
and inputs are decoded on the host from onnx's ml_dtypes arrays; outputs are given back as ml_dtypes arrays by
`OnnxModel.run`), and the conversions *into* a type (Cast, CastLike, QuantizeLinear) are Tensor API computations
here, exact on every device: rounding to the type's mantissa is a scaling by a power of two built from the exponent
bits, numpy's round-half-even and the scaling back; signs, NaNs and infinities are put together in the bits. The
rules are onnx's reference ones (ml_dtypes `astype`, `onnx.numpy_helper.saturate_cast` and `to_float8e8m0`):

- float8 (saturate, the default): round to nearest even, then |x| > max (inf included) gives +-max; NaN stays NaN.
  Without saturate: e5m2 overflows to +-inf, the others to NaN (e4m3fn keeps the sign). The fnuz types have no -0 (a
  negative value rounding to 0 is +0) and one NaN.
- float4e2m1: round to nearest even, always saturating (+-inf gives +-6), NaN gives 0 with the opposite sign (what
  ml_dtypes does; the type has no NaN).
- float8e8m0: a power of two 2^(e-127) taken from float32's exponent bits (the sign ignored), rounded `up` (any
  fraction bit), `down` or `nearest` as `onnx.numpy_helper.to_float8e8m0`; NaN and inf give NaN; saturate keeps the
  largest exponent from rounding up into NaN.
- int4/uint4/int2/uint2 from an int type wrap (the low bits, two's complement); from a float type the value is
  truncated toward 0 and is 0 when that is out of range (NaN and inf too), as ml_dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.ir.dtype import DType, dtypes

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor

_SIGN32 = -(2 ** 31)          # float32 sign bit as an int32
_QNAN32 = 0x7FC00000          # float32 quiet NaN, positive
_NEG_QNAN32 = _QNAN32 | _SIGN32


@dataclass(frozen=True)
class LowpType:
    """One ONNX element type held wider. Float formats: `mant` mantissa bits, `emin` the smallest normal exponent,
    `max` the largest finite value, `inf` whether it has infinities, `negzero` whether it has -0; ints: `bits`."""
    code: int
    name: str
    storage: DType
    np_name: str
    mant: int = 0
    emin: int = 0
    max: float = 0.0
    inf: bool = False
    negzero: bool = True
    nan: bool = True
    bits: int = 0
    signed: bool = False

    @property
    def is_float(self) -> bool:
        return self.storage == dtypes.float32

    @property
    def np_dtype(self) -> np.dtype:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, self.np_name))

    @property
    def int_range(self) -> tuple[int, int]:
        return (-(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1) if self.signed else (0, (1 << self.bits) - 1)


LOWP: dict[int, LowpType] = {t.code: t for t in (
    LowpType(17, "float8e4m3fn", dtypes.float32, "float8_e4m3fn", mant=3, emin=-6, max=448.0),
    LowpType(18, "float8e4m3fnuz", dtypes.float32, "float8_e4m3fnuz", mant=3, emin=-7, max=240.0, negzero=False),
    LowpType(19, "float8e5m2", dtypes.float32, "float8_e5m2", mant=2, emin=-14, max=57344.0, inf=True),
    LowpType(20, "float8e5m2fnuz", dtypes.float32, "float8_e5m2fnuz", mant=2, emin=-15, max=57344.0, negzero=False),
    LowpType(21, "uint4", dtypes.uint8, "uint4", bits=4),
    LowpType(22, "int4", dtypes.int8, "int4", bits=4, signed=True),
    LowpType(23, "float4e2m1", dtypes.float32, "float4_e2m1fn", mant=1, emin=0, max=6.0, nan=False),
    LowpType(24, "float8e8m0", dtypes.float32, "float8_e8m0fnu", max=2.0 ** 127, negzero=False),
    LowpType(25, "uint2", dtypes.uint8, "uint2", bits=2),
    LowpType(26, "int2", dtypes.int8, "int2", bits=2, signed=True),
)}
_BY_NP_NAME = {t.np_name: t for t in LOWP.values()}


def lowp_of_np(dt: Any) -> LowpType | None:
    """The LowpType of a numpy (ml_dtypes) dtype, None for any other dtype."""
    return _BY_NP_NAME.get(np.dtype(dt).name)


def to_storage(arr: np.ndarray, lt: LowpType) -> np.ndarray:
    """Host decode: an array of the type's ml_dtypes dtype as its storage dtype (exact)."""
    from uopir.frontend.dtype_promotion import to_np
    return np.ascontiguousarray(np.asarray(arr).astype(to_np(lt.storage)))


def from_storage(arr: np.ndarray, lt: LowpType) -> np.ndarray:
    """Host encode: storage values (each one of the type's values) as the type's ml_dtypes array."""
    return np.asarray(arr).astype(lt.np_dtype)


def _bits_layout(d: DType) -> tuple[DType, int, int, int]:
    """(int dtype of the same width, mantissa bits, exponent mask, exponent bias) of float32 / float64."""
    return (dtypes.int64, 52, 0x7FF, 1023) if d == dtypes.float64 else (dtypes.int32, 23, 0xFF, 127)


def _pow2(e: Tensor, fd: DType) -> Tensor:
    """2^e (e an int tensor within the normal exponent range of fd) built from its bits: exact on every device."""
    idt, mbits, _, bias = _bits_layout(fd)
    return ((e.cast(idt) + bias) << mbits).bitcast(fd)


def cast_to(x: Tensor, lt: LowpType, saturate: bool = True, round_mode: str = "up") -> Tensor:
    """x (any uopir dtype; for a value that is itself low-precision pass its storage) converted to `lt`, returned in
    lt's storage dtype."""
    if lt.is_float:
        if lt.code == 24:
            return _to_e8m0(x, saturate, round_mode)
        return _to_float(x, lt, saturate)
    return _to_int(x, lt)


def _to_float(x: Tensor, lt: LowpType, saturate: bool) -> Tensor:
    if x.dtype.is_bool:
        x = x.cast(dtypes.float32)
    elif not x.dtype.is_float:
        x = x.cast(dtypes.float64)  # ints: exact (int32) before the one rounding
    elif x.dtype not in (dtypes.float32, dtypes.float64):
        x = x.cast(dtypes.float32)  # float16/bfloat16: exact
    fd = x.dtype
    idt, mbits, emask, bias = _bits_layout(fd)
    bits = x.bitcast(idt)
    e = ((bits >> mbits) & emask) - bias  # the unbiased exponent (inf/NaN: bias + 1; zero/subnormal: -bias)
    # below the type's normal range the step stays the subnormal one; inf/NaN's exponent is clamped so that both
    # scale factors stay normal floats
    e = e.maximum(lt.emin).minimum(bias)
    a = x.abs()
    r = (a * _pow2(lt.mant - e, fd)).round() * _pow2(e - lt.mant, fd)  # round half to even at the type's step
    over = r > lt.max                     # inf included; NaN is not
    if saturate or not lt.nan:
        r = over.where(lt.max, r)
    elif lt.inf:
        r = over.where(float("inf"), r)
    rb = r.cast(dtypes.float32).bitcast(dtypes.int32)  # every value is a float32 now (NaN/overflow fixed below)
    sign = (bits < 0).where(_SIGN32, 0).cast(dtypes.int32)
    yb = rb | sign
    if not lt.negzero:
        yb = (rb == 0).where(0, yb)
    nan_in = x.isnan()
    if not lt.nan:                        # float4: NaN becomes a zero of the other sign (ml_dtypes)
        yb = nan_in.where(sign ^ _SIGN32, yb)
    else:
        nan_bits = (sign | _QNAN32) if lt.negzero else _NEG_QNAN32  # fnuz: the one NaN decodes as -NaN
        if not saturate and not lt.inf:
            nan_in = nan_in | over
        yb = nan_in.where(nan_bits, yb)
    return yb.cast(dtypes.int32).bitcast(dtypes.float32)


def _to_e8m0(x: Tensor, saturate: bool, round_mode: str) -> Tensor:
    if round_mode not in ("up", "down", "nearest"):
        raise ValueError(f"round_mode must be up, down or nearest, got {round_mode!r}")
    bits = x.cast(dtypes.float32).bitcast(dtypes.int32)
    exp = (bits >> 23) & 0xFF
    special = exp == 0xFF
    if round_mode == "up":
        inc = (bits & 0x7FFFFF) != 0
    elif round_mode == "nearest":
        g, r, s = (bits & 0x400000) != 0, (bits & 0x200000) != 0, (bits & 0x1FFFFF) != 0
        inc = g & (r | s | (exp > 0))
    else:
        inc = None
    code = exp
    if inc is not None:
        if saturate:
            inc = inc & (exp != 0xFE)
        code = (inc & special.logical_not()).where(exp + 1, exp)
    code = special.where(0xFF, code)
    # the value 2^(code-127): code 0 is the float32 subnormal 2^-127, 255 is NaN
    vb = (code == 0xFF).where(_QNAN32, (code == 0).where(0x400000, code << 23))
    return vb.cast(dtypes.int32).bitcast(dtypes.float32)


def _to_int(x: Tensor, lt: LowpType) -> Tensor:
    lo, hi = lt.int_range
    if x.dtype.is_float:
        t = x.trunc()
        return ((t >= lo) & (t <= hi)).where(t, 0).cast(lt.storage)
    if x.dtype.is_bool:
        return x.cast(lt.storage)
    v = (x & ((1 << lt.bits) - 1)).cast(dtypes.int16)
    if lt.signed:
        v = (v > hi).where(v - (1 << lt.bits), v)
    return v.cast(lt.storage)


# Operators that only move, select or repeat their inputs' values (ONNX allows the 8-, 4- and 2-bit types on them):
# a low-precision data input gives an output of the same type. Cast, CastLike, QuantizeLinear, DequantizeLinear and
# Constant handle the types themselves (LOWP_AWARE); any other operator given such a tensor is an OnnxImportError.
LOWP_PASSTHROUGH = frozenset({
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather",
    "GatherElements", "GatherND", "Expand", "Tile", "Where", "DepthToSpace", "SpaceToDepth", "ReverseSequence",
    "Compress", "Shape", "Size", "Pad",
})
LOWP_AWARE = frozenset({"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Constant"})
