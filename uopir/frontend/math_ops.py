"""Elementwise math of the Tensor beyond the core ALU ops: inverse and hyperbolic trigonometry, log10, logaddexp,
copysign, isclose and a few activations, each a decomposition into existing Tensor ops.

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

Like nn_ops, this module works through Tensor's public methods only (tensor.py imports it, never the reverse).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.ir.dtype import dtypes

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor

_PI_2 = math.pi / 2
_LN_2 = math.log(2)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


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


@_half_in_f32
def asin(x: Tensor) -> Tensor:
    x = _as_float(x)
    a = x.abs()
    big = 2 * _asin_poly(((1 - a) * 0.5).sqrt())
    small = _asin_poly(x)
    mag = _PI_2 - big
    return (a > 0.5).where(x.sign() * mag, small)


@_half_in_f32
def acos(x: Tensor) -> Tensor:
    """pi/2 - asin(x) in the middle; near +-1 from asin(sqrt((1 -+ x) / 2)), which keeps acos(1 - e) accurate."""
    x = _as_float(x)
    mid = _PI_2 - _asin_poly(x)
    pos = 2 * _asin_poly(((1 - x) * 0.5).sqrt())
    neg = math.pi - 2 * _asin_poly(((1 + x) * 0.5).sqrt())
    return (x > 0.5).where(pos, (x < -0.5).where(neg, mid))


@_half_in_f32
def atan(x: Tensor) -> Tensor:
    """Range reduction to |t| <= tan(pi/8) (Cephes atanf): atan(x) = pi/2 + atan(-1/x) above tan(3pi/8), pi/4 +
    atan((x - 1) / (x + 1)) above tan(pi/8); atan(+-inf) = +-pi/2."""
    x = _as_float(x)
    a = x.abs()
    hi, mid = a > 2.414213562373095, a > 0.4142135623730950
    t = hi.where(-1 / a, mid.where((a - 1) / (a + 1), a))
    z = t * t
    p = ((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1
    r = t + t * z * p
    r = hi.where(r + _PI_2, mid.where(r + math.pi / 4, r))
    return (x < 0).where(-r, (x == 0).where(x, r))  # atan(-0.0) = -0.0


@_half_in_f32
def cos(x: Tensor) -> Tensor:
    x = _as_float(x)
    hi = float(np.float32(_PI_2)) if x.dtype is dtypes.float32 else _PI_2
    lo = float(np.float64(_PI_2) - np.float64(hi)) if hi != _PI_2 else 6.123233995736766e-17
    s = hi - x
    bb = s - hi
    d = ((hi - (s - bb)) + (-x - bb)) + lo  # hi - x == s + (the first sum) exactly (TwoSum)
    return s.sin() + d * x.sin()


@_half_in_f32
def sinh(x: Tensor) -> Tensor:
    x = _as_float(x)
    z = x * x
    odd = 1 / 362880 + z * (1 / 39916800 + z / 6227020800)
    series = x + x * z * (1 / 6 + z * (1 / 120 + z * (1 / 5040 + z * odd)))
    half = (x - _LN_2).exp() - (-x - _LN_2).exp()
    return (x.abs() < 1).where(series, half)


@_half_in_f32
def cosh(x: Tensor) -> Tensor:
    """e^x / 2 + e^-x / 2, each half computed as exp(+-x - ln 2) so cosh(89) is finite in float32."""
    x = _as_float(x)
    return (x - _LN_2).exp() + (-x - _LN_2).exp()


@_half_in_f32
def asinh(x: Tensor) -> Tensor:
    """sign(x) log(|x| + sqrt(x^2 + 1)); an odd series below 1/8, log|x| + ln 2 where x^2 would overflow."""
    x = _as_float(x)
    a = x.abs()
    z = x * x
    series = x * (1 + z * (-1 / 6 + z * (3 / 40 + z * (-15 / 336 + z * 105 / 3456))))
    mag = (a > 1e18).where(a.log() + _LN_2, (a + (z + 1).sqrt()).log())
    return (a < 0.125).where(series, x.sign() * mag)


@_half_in_f32
def acosh(x: Tensor) -> Tensor:
    """log(x + sqrt((x - 1)(x + 1))); NaN below 1, log x + ln 2 where the square would overflow."""
    x = _as_float(x)
    out = (x > 1e18).where(x.log() + _LN_2, (x + ((x - 1) * (x + 1)).sqrt()).log())
    # NaN below 1 ((x - 1)(x + 1) overflows to +inf for x far below -1); out + nan, not a constant, so the gradient
    # there is torch's 1 / sqrt(x^2 - 1) (NaN in (-1, 1))
    return (x >= 1).where(out, out + float("nan"))


@_half_in_f32
def atanh(x: Tensor) -> Tensor:
    """log((1 + x) / (1 - x)) / 2; an odd series below 1/8."""
    x = _as_float(x)
    z = x * x
    series = x * (1 + z * (1 / 3 + z * (1 / 5 + z * (1 / 7 + z * (1 / 9 + z / 11)))))
    return (x.abs() < 0.125).where(series, ((1 + x) / (1 - x)).log() * 0.5)


def log10(x: Tensor) -> Tensor:
    return x.log2() * math.log10(2)


def logaddexp(a: Tensor, b: Tensor) -> Tensor:
    """log(e^a + e^b), shifted by the larger operand (taken as 0 where it is infinite, so -inf, -inf gives -inf
    and inf, inf gives inf). a and b come broadcast to one shape and dtype."""
    a, b = _as_float(a), _as_float(b)
    m = a.maximum(b)
    m = m.isinf().where(0.0, m)
    return ((a - m).exp() + (b - m).exp()).log() + m


def copysign(a: Tensor, b: Tensor) -> Tensor:
    """|a| with the sign of b (its sign bit for floats, so -0.0 and -nan count as negative), in a float dtype as
    torch. a and b come broadcast to one shape and dtype."""
    mag = _as_float(a).abs()
    if b.dtype.is_float:
        bits = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[b.dtype.itemsize]
        neg = b.bitcast(bits) >= (1 << (b.dtype.bits - 1))
    elif b.dtype.is_unsigned or b.dtype.is_bool:
        neg = b.zeros_like(dtypes.bool)
    else:
        neg = b < 0
    return neg.where(-mag, mag)


def isclose(a: Tensor, b: Tensor, rtol: float, atol: float, equal_nan: bool) -> Tensor:
    """|a - b| <= atol + rtol |b| (torch/numpy); equal values (infinities included) are close, an infinity is
    close to nothing else, NaNs only to each other and only with equal_nan. a and b come broadcast to one shape
    and dtype; ints compare exactly and measure their distance in the default float."""
    same = a == b
    fa, fb = _as_float(a), _as_float(b)
    diff = (fa - fb).abs()
    close = same | ((diff <= atol + rtol * fb.abs()) & (diff != float("inf")))
    if equal_nan and a.dtype.is_float:
        close = close | (a.isnan() & b.isnan())
    return close


def softsign(x: Tensor) -> Tensor:
    x = _as_float(x)
    return x / (1 + x.abs())


def logsigmoid(x: Tensor) -> Tensor:
    return -(-_as_float(x)).softplus()


def selu(x: Tensor, alpha: float, gamma: float) -> Tensor:
    x = _as_float(x)
    return gamma * (x > 0).where(x, alpha * (x.exp() - 1))

