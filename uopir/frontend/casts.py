"""dtype casts of the Tensor: `cast`, `bitcast` and tinygrad's shorthands (`float`, `half`, `int`, ...).

Promotion (which dtype two operands meet at) is dtype_promotion.py's job; this family only changes a tensor's dtype.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import dtype_promotion as P
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import DTypeLike, Tensor
    from uopir.ir.dtype import DType


class Casts:
    """Tensor's dtype casts."""

    __slots__ = ()

    def cast(self, dtype: DTypeLike) -> Tensor:
        d = P.to_dtype(dtype)
        if d is None:
            raise TypeError("cast needs a dtype")
        return self if d is self.dtype else self._new(self.uop.cast(d))

    def bitcast(self, dtype: DTypeLike) -> Tensor:
        """Reinterpret the bits. To a dtype of another byte size the last axis is rescaled (tinygrad's and torch's
        `view(dtype)`): its bytes, little-endian, regrouped; the axis must hold a whole number of new elements."""
        d = P.to_dtype(dtype)
        if d is None:
            raise TypeError("bitcast needs a dtype")
        if d.itemsize != self.dtype.itemsize and d is not dtypes.bool and self.dtype is not dtypes.bool:
            return self._bitcast_resized(d)
        if d.itemsize != self.dtype.itemsize or d.bits != self.dtype.bits:
            raise ValueError(f"bitcast of {T.tensor_type(self.shape, self.dtype)} to {d!r} changes the element size "
                             f"({self.dtype.bits} bits vs {d.bits} bits)")
        return self if d is self.dtype else self._new(UOp(C.BITCAST, d, (self.uop,)))

    def _bitcast_resized(self, d: DType) -> Tensor:
        """The bytes of the last axis regrouped into elements of d, as unsigned shifts and masks (no new op)."""
        a, b = self.dtype.itemsize, d.itemsize
        n = self.shape[-1] if self.shape else None
        if not isinstance(n, int) or (n * a) % b:
            raise ValueError(f"bitcast of {T.tensor_type(self.shape, self.dtype)} to {d!r}: the last axis must hold "
                             f"a whole number of {b}-byte elements")
        uint = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}
        u = self.bitcast(uint[a])
        if a > b:  # each element splits into a // b smaller ones, low bytes first
            parts = [((u >> (8 * b * i)) & ((1 << (8 * b)) - 1)).cast(uint[b]) for i in range(a // b)]
            out = parts[0].stack(*parts[1:], dim=-1).reshape(*self.shape[:-1], n * a // b)
        else:  # each group of b // a elements joins into one
            g = u.reshape(*self.shape[:-1], n * a // b, b // a).cast(uint[b])
            out = g[..., 0]
            for i in range(1, b // a):
                out = out | (g[..., i] << (8 * a * i))
        return out.bitcast(d)

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        return self.cast(dtypes.float16)

    def double(self) -> Tensor:
        return self.cast(dtypes.float64)

    def bfloat16(self) -> Tensor:
        return self.cast(dtypes.bfloat16)

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def long(self) -> Tensor:
        return self.cast(dtypes.int64)

    def short(self) -> Tensor:
        return self.cast(dtypes.int16)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)
