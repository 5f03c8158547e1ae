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


class Casts:
    """Tensor's dtype casts."""

    __slots__ = ()

    def cast(self, dtype: DTypeLike) -> Tensor:
        d = P.to_dtype(dtype)
        if d is None:
            raise TypeError("cast needs a dtype")
        return self if d is self.dtype else self._new(self.uop.cast(d))

    def bitcast(self, dtype: DTypeLike) -> Tensor:
        """Reinterpret the bits; the element size must not change."""
        d = P.to_dtype(dtype)
        if d is None:
            raise TypeError("bitcast needs a dtype")
        if d.itemsize != self.dtype.itemsize or d.bits != self.dtype.bits:
            raise ValueError(f"bitcast of {T.tensor_type(self.shape, self.dtype)} to {d!r} changes the element size "
                             f"({self.dtype.bits} bits vs {d.bits} bits)")
        return self if d is self.dtype else self._new(UOp(C.BITCAST, d, (self.uop,)))

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
