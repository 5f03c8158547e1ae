"""uopir dtypes as MLIR types and literals (for uopir.backends.mlir.export).

A value's type in registers (`mlir_type`: bool i1, signless ints, index, f16/bf16/f32/f64, `vector<N x T>`) and in
memory (`memory_type`: bool a byte, bf16 its f32 carrier, as the runtime's numpy buffers hold them); constants
through the semantics' carriers, exactly.
"""
from __future__ import annotations

import struct

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    VectorType,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute

from uopir.ir.dtype import DType, dtypes

__all__ = ["SCALAR", "mlir_type", "memory_type", "mem_scalar", "bit_width", "vec", "signed", "py_value", "same",
           "zero_of", "const_attr"]

# ---- types -----------------------------------------------------------------------------------------------------------
SCALAR: dict[DType, Attribute] = {
    dtypes.bool: i1, dtypes.int8: i8, dtypes.int16: i16, dtypes.int32: i32, dtypes.int64: i64,
    dtypes.uint8: i8, dtypes.uint16: i16, dtypes.uint32: i32, dtypes.uint64: i64, dtypes.index: IndexType(),
    dtypes.float16: f16, dtypes.bfloat16: bf16, dtypes.float32: f32, dtypes.float64: f64,
}
_WIDTH = {dtypes.index: 64}


def bit_width(d: DType) -> int:
    return _WIDTH.get(d.scalar, d.scalar.itemsize * 8)


def vec(t: Attribute, n: int) -> Attribute:
    return t if n == 1 else VectorType(t, [n])


def mlir_type(d: DType) -> Attribute:
    """The MLIR type of a uopir value dtype (a vector dtype is a `vector<N x T>`)."""
    s = d.scalar
    if s not in SCALAR:
        raise KeyError(d)
    return vec(SCALAR[s], d.count)


def mem_scalar(d: DType) -> Attribute:
    s = d.scalar
    if s is dtypes.bool:
        return i8
    if s is dtypes.bfloat16:
        return f32
    return SCALAR[s]


def memory_type(d: DType) -> Attribute:
    """The MLIR element type of a buffer of dtype d: bool is a byte (i8), bf16 its f32 carrier."""
    return vec(mem_scalar(d), d.count)


# ---- literals --------------------------------------------------------------------------------------------------------
def signed(bits: int, v: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits > 1 and v >> (bits - 1) else v


def py_value(d: DType, v: object) -> object:
    """A carrier scalar as the Python value of an MLIR literal (ints signed in their width, bool as bool)."""
    if d is dtypes.bool:
        return bool(v)
    if d.is_float:
        return float(v)  # type: ignore[arg-type]
    return signed(bit_width(d), int(v))  # type: ignore[call-overload]


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def zero_of(t: Attribute) -> object:
    if isinstance(t, VectorType):
        t = t.element_type
    if t == i1:
        return False
    return 0.0 if isinstance(t, Float16Type | BFloat16Type | Float32Type | Float64Type) else 0


def const_attr(t: Attribute, value: object) -> Attribute:
    """The value attribute of an arith.constant of type t (a splat for a vector)."""
    if isinstance(t, VectorType):
        return DenseIntOrFPElementsAttr.from_list(t, [value] * t.get_shape()[0])  # type: ignore[list-item]
    if isinstance(t, IndexType | IntegerType):
        if t == i1:
            return IntegerAttr(1 if value else 0, i1)
        return IntegerAttr(int(value), t)  # type: ignore[call-overload]
    return FloatAttr(float(value), t)  # type: ignore[arg-type]
