"""Elementwise arithmetic of the Tensor: + - * / // % **, comparisons, bit ops and shifts, where, maximum/minimum,
clip, and the Python operator dunders that spell them.

Operands meet through the core's `_broadcasted` (tensor.py): numpy broadcasting made explicit and tinygrad's dtype
promotion with weak Python scalars. `//` and `%` are Python's (floor) on ints, numpy's bit for bit on floats.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import dtype_promotion as P
from uopir.frontend.shapes import broadcast_shape
from uopir.ir.diagnostics import ArgumentError, DTypeError
from uopir.ir.dtype import dtypes
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import Scalar, Tensor


class Elementwise:
    """Tensor's arithmetic, comparisons, bit ops, where/maximum/minimum/clip and the operator dunders."""

    __slots__ = ()
    __hash__ = object.__hash__  # == builds a Tensor (defining __eq__ would unset it), so hashing is by identity

    def add(self, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        return self._apply(C.OR if self._first(a, b).uop.dtype.is_bool else C.ADD, a, b)

    def sub(self, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        if self._first(a, b).dtype.is_bool:
            raise TypeError("subtraction of bool tensors is not supported; use ^ or logical_not instead")
        return self._apply(C.SUB, a, b)

    def mul(self, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        return self._apply(C.AND if self._first(a, b).uop.dtype.is_bool else C.MUL, a, b)

    def div(self, y: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
        """True division; ints and bools divide in the default float (float32). rounding_mode: trunc|floor."""
        if rounding_mode == "floor":
            return self.floordiv(y, reverse)
        if rounding_mode == "trunc":
            a, b = self._broadcasted(y, reverse)
            t = self._first(a, b)
            if t.dtype.is_int:
                return t._binary(C.IDIV, b, False) if t is a else t._binary(C.IDIV, a, True)
            return (a / b).trunc()  # type: ignore[operator]
        if rounding_mode is not None:
            raise ArgumentError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        a, b = self._broadcasted(y, reverse)
        d = P.float_of(self._first(a, b).dtype)
        return self._binary(C.FDIV, y, reverse, dtype=d)

    @classmethod
    def _float_divmod(cls, a: Any, b: Any) -> tuple[Tensor, Tensor]:
        """numpy's float floor division and remainder, bit for bit: built, as numpy builds them, on the exact
        remainder `fmod` (core.mod on floats); half floats are computed in float32 and rounded, as numpy does."""
        t = a if isinstance(a, cls) else b
        d = t.dtype
        work = d if d.itemsize >= 4 else dtypes.float32
        a, b = (x.cast(work) if isinstance(x, cls) else cls.full(t.shape, x, dtype=work, device=t.device)
                for x in (a, b))
        zero = cls.full(t.shape, 0.0, dtype=work, device=t.device)
        mod = a._op(C.MOD, b)
        div = (a - mod) / b
        fix = (mod != 0) & ((b < 0) ^ (mod < 0))  # the remainder takes the divisor's sign
        mod = fix.where(mod + b, mod)
        div = fix.where(div - 1, div)
        mod = (mod == 0).where((b < 0).where(-zero, zero), mod)
        floor = div.floor()
        floor = ((div - floor) > 0.5).where(floor + 1, floor)
        quotient = a / b
        floor = (div == 0).where(quotient * 0.0, floor)  # a zero quotient keeps the sign of a / b
        floor = (b == 0).where(quotient, floor)
        return floor.cast(d), mod.cast(d)

    def floordiv(self, y: Any, reverse: bool = False) -> Tensor:
        """Python/numpy floor division: ints from C truncation plus a sign fix-up, floats as numpy computes them."""
        a, b = self._broadcasted(y, reverse)
        t = self._first(a, b)
        d = t.dtype
        if d.is_bool:
            return type(self)._int8_pair(a, b, type(self).floordiv)
        if d.is_float:
            return type(self)._float_divmod(a, b)[0]
        q = t._binary(C.IDIV, b if t is a else a, t is not a)
        if d.is_unsigned:
            return q
        r = t._binary(C.MOD, b if t is a else a, t is not a)
        fix = (r != 0) & ((r < 0) ^ (b < 0))
        return q - fix.cast(d)

    def mod(self, y: Any, reverse: bool = False) -> Tensor:
        """Python/numpy remainder: the result has the sign of the divisor."""
        a, b = self._broadcasted(y, reverse)
        t = self._first(a, b)
        d = t.dtype
        if d.is_bool:
            return type(self)._int8_pair(a, b, type(self).mod)
        if d.is_float:
            return type(self)._float_divmod(a, b)[1]
        r = t._binary(C.MOD, b if t is a else a, t is not a)
        if d.is_unsigned:
            return r
        fix = (r != 0) & ((r < 0) ^ (b < 0))
        return fix.where(r + b, r)

    @classmethod
    def _int8_pair(cls, a: Tensor | Scalar, b: Tensor | Scalar, op: Any) -> Tensor:
        """op on bool operands as int8 (numpy's bool // and %); either one may be a Python scalar."""
        a8, b8 = (v.cast(dtypes.int8) if isinstance(v, cls) else int(v) for v in (a, b))
        return op(a8, b8) if isinstance(a8, cls) else op(b8, a8, True)

    def pow(self, y: Any, reverse: bool = False) -> Tensor:
        """x ** y. Small non-negative integer scalar exponents multiply (exact); integer tensors use square-and-
        multiply over the exponent's bits, so they wrap like numpy (bool ** bool is int8, as numpy); floats use
        exp2(y * log2|x|) with C pow's rules for negative and signed-zero bases, infinities and 1 ** nan, half
        floats computed in float32. An int/bool tensor to a negative Python int raises DTypeError (a RuntimeError, as
        tinygrad and torch); a negative element of an integer exponent tensor truncates 1 / x**|y|."""
        y = self._to_tensor(y)
        if not reverse and type(y) is int and y < 0 and not self.dtype.is_float:
            raise DTypeError(f"{T.tensor_type(self.shape, self.dtype)} ** {y}: integers to negative integer powers are "
                             f"not allowed (tinygrad, torch); cast to a float first")
        if not reverse and P.is_scalar(y) and not isinstance(y, bool) and float(y).is_integer() and 0 <= y <= 64 \
                and (y > 0 or not self.dtype.is_float):  # float x**0 goes the general way: x stays in the graph
            n = int(y)
            d = P.promote_scalar(self.dtype, y)
            base, acc = self.cast(d), None
            while True:
                if n & 1:
                    acc = base if acc is None else acc * base
                n >>= 1
                if not n:
                    break
                base = base * base
            return acc if acc is not None else self.cast(d).ones_like()
        a, b = self._broadcasted(y, reverse)
        t = self._first(a, b)
        d = t.dtype
        A = a if isinstance(a, type(self)) else t.full_like(a)
        B = b if isinstance(b, type(self)) else t.full_like(b)
        if d.is_bool:
            A, B, d = A.cast(dtypes.int8), B.cast(dtypes.int8), dtypes.int8
        if not d.is_float:
            return type(self)._ipow(A, B)
        if d in (dtypes.float16, dtypes.bfloat16):
            return type(self)._fpow(A.cast(dtypes.float32), B.cast(dtypes.float32)).cast(d)
        return type(self)._fpow(A, B)

    @classmethod
    def _ipow(cls, a: Tensor, b: Tensor) -> Tensor:
        """Integer power with wrap-around: square and multiply over every bit of b (b < 0: trunc(1 / a**|b|))."""
        d = a.dtype
        nbits = d.bits - (0 if d.is_unsigned else 1)
        e = b if d.is_unsigned else b.maximum(0)
        acc, base = a.ones_like(), a
        for i in range(nbits):
            acc = ((e >> i) & 1).cast(dtypes.bool).where(acc * base, acc)
            if i + 1 < nbits:
                base = base * base
        if d.is_unsigned:
            return acc
        f64 = dtypes.float64
        neg = cls._fpow(a.cast(f64), b.cast(f64)).trunc().cast(d)
        return (b < 0).where(neg, acc)

    @staticmethod
    def _fpow(a: Tensor, b: Tensor) -> Tensor:
        mag = (b * a.abs().log2()).exp2()
        bi = b.trunc()
        is_int = bi == b  # true for ±inf, false for nan
        odd = (bi - (bi * 0.5).trunc() * 2).abs() == 1  # false for ±inf and nan
        negbase = (a < 0) | ((a == 0) & (a.reciprocal() < 0))  # -0.0 counts as negative (its sign can show)
        nonint = ((a == 0) | (a == float("-inf"))).where(mag, float("nan"))  # (-0)**0.5 = 0, (-inf)**0.5 = inf
        signed = negbase.where(is_int.where(odd.where(-mag, mag), nonint), mag)
        one = (b == 0) | (a == 1) | ((a.abs() == 1) & b.isinf())  # x**0 = 1**y = (-1)**±inf = 1, even for nan
        return one.where(1.0, signed)

    def __add__(self, y: Any) -> Tensor:
        return self.add(y)

    def __radd__(self, y: Any) -> Tensor:
        return self.add(y, True)

    def __sub__(self, y: Any) -> Tensor:
        return self.sub(y)

    def __rsub__(self, y: Any) -> Tensor:
        return self.sub(y, True)

    def __mul__(self, y: Any) -> Tensor:
        return self.mul(y)

    def __rmul__(self, y: Any) -> Tensor:
        return self.mul(y, True)

    def __truediv__(self, y: Any) -> Tensor:
        return self.div(y)

    def __rtruediv__(self, y: Any) -> Tensor:
        return self.div(y, True)

    def __floordiv__(self, y: Any) -> Tensor:
        return self.floordiv(y)

    def __rfloordiv__(self, y: Any) -> Tensor:
        return self.floordiv(y, True)

    def __mod__(self, y: Any) -> Tensor:
        return self.mod(y)

    def __rmod__(self, y: Any) -> Tensor:
        return self.mod(y, True)

    def __pow__(self, y: Any) -> Tensor:
        return self.pow(y)

    def __rpow__(self, y: Any) -> Tensor:
        return self.pow(y, True)

    def __matmul__(self, y: Tensor) -> Tensor:
        return self.matmul(y)

    def __rmatmul__(self, y: Any) -> Tensor:
        return type(self)(y, device=self.device).matmul(self)

    def __neg__(self) -> Tensor:
        return self.neg()

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return self.abs()

    def __invert__(self) -> Tensor:
        return self.bitwise_not()

    def neg(self) -> Tensor:
        """-x; for bool the logical not (tinygrad)."""
        return self.logical_not() if self.dtype.is_bool else self._op(C.NEG)

    def _compare(self, op: OpDef, y: Any, reverse: bool = False) -> Tensor:
        """A comparison; with a Python int outside an int tensor's range the answer is known (numpy 2 defines it)."""
        if type(y) is int and self.dtype.is_int and not self.dtype.min <= y <= self.dtype.max:
            above = y > self.dtype.max  # y is above every element (else below every one)
            value = {C.CMPEQ: False, C.CMPNE: True}.get(op, above != reverse)  # self < y, or y < self when reversed
            return type(self).full(self.shape, value, dtype=dtypes.bool, device=self.device)
        return self._binary(op, y, reverse, out=dtypes.bool)

    def __lt__(self, y: Any) -> Tensor:
        return self._compare(C.CMPLT, y)

    def __gt__(self, y: Any) -> Tensor:
        return self._compare(C.CMPLT, y, reverse=True)

    def __le__(self, y: Any) -> Tensor:
        return (self < y) | (self == y)

    def __ge__(self, y: Any) -> Tensor:
        return (self > y) | (self == y)

    def __eq__(self, y: Any) -> Tensor:  # type: ignore[override]
        return self._compare(C.CMPEQ, y)

    def __ne__(self, y: Any) -> Tensor:  # type: ignore[override]
        return self._compare(C.CMPNE, y)

    def _bitwise(self, op: OpDef, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        d = self._first(a, b).dtype
        if not (d.is_int or d.is_bool):
            raise TypeError(f"{op.mnemonic} needs int or bool tensors, got {d!r}")
        return self._binary(op, y, reverse)

    def bitwise_and(self, y: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(C.AND, y, reverse)

    def bitwise_or(self, y: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(C.OR, y, reverse)

    def bitwise_xor(self, y: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(C.XOR, y, reverse)

    def __and__(self, y: Any) -> Tensor:
        return self.bitwise_and(y)

    def __rand__(self, y: Any) -> Tensor:
        return self.bitwise_and(y, True)

    def __or__(self, y: Any) -> Tensor:
        return self.bitwise_or(y)

    def __ror__(self, y: Any) -> Tensor:
        return self.bitwise_or(y, True)

    def __xor__(self, y: Any) -> Tensor:
        return self.bitwise_xor(y)

    def __rxor__(self, y: Any) -> Tensor:
        return self.bitwise_xor(y, True)

    def bitwise_not(self) -> Tensor:
        if self.dtype.is_bool:
            return self._op(C.XOR, True)
        if not self.dtype.is_int:
            raise TypeError(f"~ needs an int or bool tensor, got {self.dtype!r}")
        return self._op(C.XOR, -1)

    def logical_not(self) -> Tensor:
        return self.cast(dtypes.bool)._op(C.XOR, True)

    def _shift(self, op: OpDef, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        d = self._first(a, b).dtype
        if not d.is_int:
            raise DTypeError(f"shifts need int tensors, got {d!r}")
        if not reverse and isinstance(y, int) and not 0 <= y < d.bits:
            # a shift by a negative amount or by the width or more has no one meaning (C: undefined, numpy: 0)
            raise ValueError(f"shift amount {y} is out of range for {d.name} (0 to {d.bits - 1})")
        return self._binary(op, y, reverse)

    def lshift(self, y: Any) -> Tensor:
        return self._shift(C.SHL, y)

    def rshift(self, y: Any) -> Tensor:
        return self._shift(C.SHR, y)

    def __lshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHL, y)

    def __rshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHR, y)

    def __rlshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHL, y, True)

    def __rrshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHR, y, True)

    def where(self: Tensor, x: Any, y: Any) -> Tensor:
        """self ? x : y, with the three broadcast together; x and y promote like a binary op."""
        cond = self.cast(dtypes.bool)
        xt, yt = cond._to_tensor(x), cond._to_tensor(y)
        if isinstance(xt, type(self)) and isinstance(yt, type(self)):
            d = P.promote(xt.dtype, yt.dtype)
        elif isinstance(xt, type(self)):
            d = P.promote_scalar(xt.dtype, yt)  # type: ignore[arg-type]
        elif isinstance(yt, type(self)):
            d = P.promote_scalar(yt.dtype, xt)  # type: ignore[arg-type]
        else:
            d = P.promote_scalars(xt, yt)  # type: ignore[arg-type]
        shapes = [v.shape for v in (cond, xt, yt) if isinstance(v, type(self))]
        shape = broadcast_shape(*shapes)
        for v in (xt, yt):
            P.check_fits(v, d)
        us = tuple(v.cast(d)._broadcast_to(shape).uop if isinstance(v, type(self)) else C.const(d, v) for v in (xt, yt))
        return self._new(UOp(C.WHERE, d, (cond._broadcast_to(shape).uop, *us)))

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        return mask.where(value, self)

    def maximum(self, y: Any) -> Tensor:
        a, b = self._broadcasted(y)
        if self._first(a, b).dtype.is_bool:
            return a | b  # type: ignore[operator]
        return self._binary(C.MAX, y)

    def minimum(self, y: Any) -> Tensor:
        a, b = self._broadcasted(y)
        t = self._first(a, b)
        if t.dtype.is_bool:
            return a & b  # type: ignore[operator]
        if t.dtype.is_float:
            return -((-a).maximum(-b))  # type: ignore[operator]
        return (a < b).where(a, b) if isinstance(a, type(self)) else (b > a).where(a, b)  # type: ignore[operator]

    def clip(self, min_: Any = None, max_: Any = None) -> Tensor:
        """numpy clip: minimum(maximum(x, min_), max_). On floats it selects the bound where x is at or past it, so the
        gradient is 0 there (torch's) and NaN stays NaN."""
        if min_ is None and max_ is None:
            raise ArgumentError("clip needs min_ or max_")
        if self.dtype.is_float and not isinstance(min_, type(self)) and not isinstance(max_, type(self)):
            x = self if min_ is None else (self <= min_).where(min_, self)
            return x if max_ is None else (x >= max_).where(max_, x)
        x = self if min_ is None else self.maximum(min_)
        return x if max_ is None else x.minimum(max_)

    clamp = clip

    def fmod(self, x: Any) -> Tensor:
        """C remainder (sign of the dividend): core.mod, which is C's % on ints and fmod on floats."""
        a, b = self._broadcasted(x)
        t = self._first(a, b)
        if t.dtype.is_bool:
            return type(self)._int8_pair(a, b, type(self).fmod)
        if t.dtype in (dtypes.float16, dtypes.bfloat16):
            return type(self).fmod(*(v.float() if isinstance(v, type(self)) else v for v in (a, b))).cast(t.dtype)
        return self._binary(C.MOD, x)
