"""Unary math of the Tensor: exp/log, sqrt, sin/cos/tan, rounding, abs/sign, inverse and hyperbolic trigonometry,
log10, logaddexp, copysign, isclose; beyond the core ALU ops, each a decomposition into existing Tensor ops.

- asin / atan: Cephes-style single-precision minimax polynomials after a range reduction (|x| <= 1/2 directly,
  above that asin(x) = pi/2 - 2 asin(sqrt((1 - x) / 2)); atan reduced by tan(pi/8) and tan(3 pi/8)), so the
  relative error stays near float32 rounding (about 2 ulp) instead of the cancellation near 0 that pi/2 - ... has.
  float64 inputs get the same float32-accurate polynomial (a few 1e-8 relative). acos is built from asin without
  subtracting from pi/2 where that cancels.
- sinh / asinh use a short odd series near 0 (where e^x - e^-x and log(x + ...) cancel); cosh and the large-|x|
  branches are arranged so nothing overflows before the result does.
- cos(x) = sin(pi/2 - x) with the subtraction carried exactly: pi/2 = hi + lo in x's dtype, s = hi - x rounded,
  its rounding error recovered (TwoSum) and added to lo as d, then cos x = sin(s) + d sin(x) (first order in d, a
  few ulps of s: the rest is below rounding). The plain sin(pi/2 - x) is off by up to 1e-3 relative near the zeros
  away from pi/2 (3 pi/2: 4.712 - pi/2 rounds to a multiple of 2.4e-7 while cos is 1.7e-4).
- NaN in gives NaN out; out-of-domain inputs give NaN (asin(2), acosh(0.5), atanh(2)) and the poles give
  infinities (atanh(+-1) = +-inf), as torch.

`MathOps` is the mixin `Tensor` inherits these methods from (tensor.py imports this module, never the reverse); the
primitive ones (exp2, log2, sqrt, recip, sin, trunc) are one core op each.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.dialects import core as C
from uopir.frontend import dtype_promotion as P
from uopir.ir.dtype import dtypes

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor

_PI_2 = math.pi / 2
_LN_2 = math.log(2)
_LOG2_E = math.log2(math.e)


def _as_float(x: Tensor) -> Tensor:
    return x if x.dtype.is_float else x.float()


def _half_in_f32(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """Run fn on float32 for float16/bfloat16 inputs and round the result back (as numpy computes half ufuncs)."""
    @functools.wraps(fn)
    def run(x: Tensor, *args: Any) -> Tensor:
        if x.dtype in (dtypes.float16, dtypes.bfloat16):
            return fn(x.float(), *args).cast(x.dtype)
        return fn(x, *args)
    return run


def _asin_poly(x: Tensor) -> Tensor:
    """asin on [-1/2, 1/2]: x + x^3 p(x^2) (Cephes asinf coefficients)."""
    z = x * x
    p = (((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z + 7.4953002686e-2) * z + 1.6666752422e-1
    return x + x * z * p


class MathOps:
    """Tensor's unary math: exp/log, sqrt, the trigonometric and hyperbolic functions, rounding, abs/sign, the
    float class tests (isnan, isinf), and isclose."""

    __slots__ = ()

    def _float(self) -> Tensor:
        return self.cast(P.float_of(self.dtype))

    def exp2(self) -> Tensor:
        return self._float()._op(C.EXP2)

    def log2(self) -> Tensor:
        return self._float()._op(C.LOG2)

    def exp(self) -> Tensor:
        return (self._float() * _LOG2_E).exp2()

    def log(self) -> Tensor:
        return self.log2() * _LN_2

    def sqrt(self) -> Tensor:
        return self._float()._op(C.SQRT)

    def rsqrt(self) -> Tensor:
        return self.sqrt().reciprocal()

    def reciprocal(self) -> Tensor:
        return self._float()._op(C.RECIP)

    def sin(self) -> Tensor:
        return self._float()._op(C.SIN)

    def cos(self) -> Tensor:
        """sin(pi/2 - x) with pi/2 - x carried exactly (see the module docstring)."""
        x = self._float()
        if x.dtype in (dtypes.float16, dtypes.bfloat16):
            return x.float().cos().cast(x.dtype)
        hi = float(np.float32(_PI_2)) if x.dtype is dtypes.float32 else _PI_2
        lo = float(np.float64(_PI_2) - np.float64(hi)) if hi != _PI_2 else 6.123233995736766e-17
        s = hi - x
        bb = s - hi
        d = ((hi - (s - bb)) + (-x - bb)) + lo  # hi - x == s + (the first sum) exactly (TwoSum)
        return s.sin() + d * x.sin()

    def tan(self) -> Tensor:
        return self.sin() / self.cos()

    def square(self) -> Tensor:
        return self * self

    def trunc(self) -> Tensor:
        return self._op(C.TRUNC) if self.dtype.is_float else self

    def floor(self) -> Tensor:
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return (t > self).where(t - 1, t)

    def ceil(self) -> Tensor:
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return (t < self).where(t + 1, t)  # not t + 0.0, which would lose the sign of ceil(-0.3) = -0.0

    def round(self) -> Tensor:
        """Round half to even (numpy)."""
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        frac = self - t
        away = t + self.sign()
        odd = (t - (t * 0.5).trunc() * 2) != 0
        half = frac.abs() == 0.5
        return (frac.abs() > 0.5).where(away, (half & odd).where(away, t))

    def abs(self) -> Tensor:
        """|x|; on floats the sign bit is cleared, as numpy (abs(-0.0) is +0.0, a NaN keeps its payload)."""
        d = self.dtype
        if d.is_bool or d.is_unsigned:
            return self
        if d.is_float:
            bits = P.UINT_OF_SIZE[d.itemsize]
            return (self.bitcast(bits) & ((1 << (d.bits - 1)) - 1)).bitcast(d)
        return (self < 0).where(-self, self)

    def sign(self) -> Tensor:
        d = self.dtype
        if d.is_bool:
            return self
        pos = (self > 0).cast(d)
        if d.is_unsigned:
            return pos
        if d.is_float:
            return (self > 0).where(1.0, (self < 0).where(-1.0, (self == 0).where(0.0, self)))  # ±0 -> +0, nan
        return pos - (self < 0).cast(d)

    def isnan(self) -> Tensor:
        return self != self

    def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
        pos = self == float("inf") if detect_positive and self.dtype.is_float else self.zeros_like(dtypes.bool)
        neg = self == float("-inf") if detect_negative and self.dtype.is_float else self.zeros_like(dtypes.bool)
        return pos | neg

    def isfinite(self) -> Tensor:
        return (self.isinf() | self.isnan()).logical_not()

    def lerp(self, end: Any, weight: Any) -> Tensor:
        return self + (end - self) * weight

    @_half_in_f32
    def asin(self) -> Tensor:
        x = _as_float(self)
        a = x.abs()
        big = 2 * _asin_poly(((1 - a) * 0.5).sqrt())
        small = _asin_poly(x)
        mag = _PI_2 - big
        return (a > 0.5).where(x.sign() * mag, small)

    @_half_in_f32
    def acos(self) -> Tensor:
        """pi/2 - asin(x) in the middle; near +-1 from asin(sqrt((1 -+ x) / 2)), which keeps acos(1 - e) accurate."""
        x = _as_float(self)
        mid = _PI_2 - _asin_poly(x)
        pos = 2 * _asin_poly(((1 - x) * 0.5).sqrt())
        neg = math.pi - 2 * _asin_poly(((1 + x) * 0.5).sqrt())
        return (x > 0.5).where(pos, (x < -0.5).where(neg, mid))

    @_half_in_f32
    def atan(self) -> Tensor:
        """Range reduction to |t| <= tan(pi/8) (Cephes atanf): atan(x) = pi/2 + atan(-1/x) above tan(3pi/8), pi/4 +
        atan((x - 1) / (x + 1)) above tan(pi/8); atan(+-inf) = +-pi/2."""
        x = _as_float(self)
        a = x.abs()
        hi, mid = a > 2.414213562373095, a > 0.4142135623730950
        t = hi.where(-1 / a, mid.where((a - 1) / (a + 1), a))
        z = t * t
        p = ((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1
        r = t + t * z * p
        r = hi.where(r + _PI_2, mid.where(r + math.pi / 4, r))
        return (x < 0).where(-r, (x == 0).where(x, r))  # atan(-0.0) = -0.0

    @_half_in_f32
    def sinh(self) -> Tensor:
        x = _as_float(self)
        z = x * x
        odd = 1 / 362880 + z * (1 / 39916800 + z / 6227020800)
        series = x + x * z * (1 / 6 + z * (1 / 120 + z * (1 / 5040 + z * odd)))
        half = (x - _LN_2).exp() - (-x - _LN_2).exp()
        return (x.abs() < 1).where(series, half)

    @_half_in_f32
    def cosh(self) -> Tensor:
        """e^x / 2 + e^-x / 2, each half computed as exp(+-x - ln 2) so cosh(89) is finite in float32."""
        x = _as_float(self)
        return (x - _LN_2).exp() + (-x - _LN_2).exp()

    @_half_in_f32
    def asinh(self) -> Tensor:
        """sign(x) log(|x| + sqrt(x^2 + 1)); an odd series below 1/8, log|x| + ln 2 where x^2 would overflow."""
        x = _as_float(self)
        a = x.abs()
        z = x * x
        series = x * (1 + z * (-1 / 6 + z * (3 / 40 + z * (-15 / 336 + z * 105 / 3456))))
        mag = (a > 1e18).where(a.log() + _LN_2, (a + (z + 1).sqrt()).log())
        return (a < 0.125).where(series, x.sign() * mag)

    @_half_in_f32
    def acosh(self) -> Tensor:
        """log(x + sqrt((x - 1)(x + 1))); NaN below 1, log x + ln 2 where the square would overflow."""
        x = _as_float(self)
        out = (x > 1e18).where(x.log() + _LN_2, (x + ((x - 1) * (x + 1)).sqrt()).log())
        # NaN below 1 ((x - 1)(x + 1) overflows to +inf for x far below -1); out + nan, not a constant, so the gradient
        # there is torch's 1 / sqrt(x^2 - 1) (NaN in (-1, 1))
        return (x >= 1).where(out, out + float("nan"))

    @_half_in_f32
    def atanh(self) -> Tensor:
        """log((1 + x) / (1 - x)) / 2; an odd series below 1/8."""
        x = _as_float(self)
        z = x * x
        series = x * (1 + z * (1 / 3 + z * (1 / 5 + z * (1 / 7 + z * (1 / 9 + z / 11)))))
        return (x.abs() < 0.125).where(series, ((1 + x) / (1 - x)).log() * 0.5)

    def log10(self) -> Tensor:
        return self.log2() * math.log10(2)

    def logaddexp(self, other: Any) -> Tensor:
        """log(e^a + e^b), shifted by the larger operand (taken as 0 where it is infinite, so -inf, -inf gives -inf
        and inf, inf gives inf)."""
        a, b = (_as_float(v) for v in self._broadcast_pair(other))
        m = a.maximum(b)
        m = m.isinf().where(0.0, m)
        return ((a - m).exp() + (b - m).exp()).log() + m

    def copysign(self, other: Any) -> Tensor:
        """|a| with the sign of b (its sign bit for floats, so -0.0 and -nan count as negative), in a float dtype as
        torch."""
        a, b = self._broadcast_pair(other)
        mag = _as_float(a).abs()
        if b.dtype.is_float:
            bits = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[b.dtype.itemsize]
            neg = b.bitcast(bits) >= (1 << (b.dtype.bits - 1))
        elif b.dtype.is_unsigned or b.dtype.is_bool:
            neg = b.zeros_like(dtypes.bool)
        else:
            neg = b < 0
        return neg.where(-mag, mag)

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """|a - b| <= atol + rtol |b| (torch/numpy); equal values (infinities included) are close, an infinity is
        close to nothing else, NaNs only to each other and only with equal_nan. Ints compare exactly and measure their
        distance in the default float."""
        a, b = self._broadcast_pair(other)
        same = a == b
        fa, fb = _as_float(a), _as_float(b)
        diff = (fa - fb).abs()
        close = same | ((diff <= atol + rtol * fb.abs()) & (diff != float("inf")))
        if equal_nan and a.dtype.is_float:
            close = close | (a.isnan() & b.isnan())
        return close

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        return self.isclose(other, rtol, atol, equal_nan).all()

    def erf(self) -> Tensor:
        """Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7). The argument of GELU's erf(x / sqrt(2)) is taken
        as x * (1 / sqrt(2)) (_erf_argument): one vector division fewer per element."""
        x = self._float()._erf_argument()
        t = 1.0 / (1.0 + 0.3275911 * x.abs())
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        return x.sign() * (1.0 - poly * (-(x * x)).exp())

    def _erf_argument(self) -> Tensor:
        """self = x / c with a constant c as x * (1 / c), for erf alone (x / c itself keeps its division for any
        other reader), in float32/float64: the product is within ~1 ulp (2**-23 relative in float32) of the
        quotient, which moves erf by at most max|z erf'(z)| = 0.48 of that (5.8e-8), under the polynomial's own
        1.5e-7. torch's GELU and onnxruntime's fused Gelu compute erf(x * M_SQRT1_2) the same way; tinygrad's every
        division is a multiply by the reciprocal."""
        from uopir.dialects import tensor as T
        from uopir.ir.uop import UOp
        q = self.uop.src[0] if self.uop.op is T.DETACH else self.uop
        if q.op is not C.FDIV or self.dtype not in (dtypes.float32, dtypes.float64):
            return self
        c = q.src[1]
        while c.op in (T.RESHAPE, T.EXPAND):  # a one-element constant tensor broadcast (an ONNX scalar Constant)
            c = c.src[0]
        v = C.const_value(c) if c.op is C.CONST and c.dtype.count == 1 else None
        if not isinstance(v, float) or not math.isfinite(v) or v == 0:
            return self
        if self.dtype is dtypes.float32:  # the divisor's own value (a float const holds the Python float it was given)
            v = float(np.float32(v))
        if v == 0 or not math.isfinite(1.0 / v):
            return self
        return self._new(UOp(C.MUL, q.dtype, (q.src[0], C.const(q.dtype, 1.0 / v))))

