"""Reductions of the Tensor: sum, prod, max/min, any/all, mean/var/std, argmax/argmin, logsumexp, softmax and
the running (cumulative) sums and products.

Each is one `tensor.reduce` over the sorted axes (kept as size 1, then reshaped away unless keepdim) around
elementwise work; sums accumulate as dtype_promotion says (bool/int in int64, halves in float32).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import dtype_promotion as P
from uopir.frontend import variable as V
from uopir.frontend.shapes import norm_axis
from uopir.ir.symbolic import sprod, ssub
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import DTypeLike, Scalar, Tensor

# a running sum/product along an axis longer than twice this is computed in blocks of this many (_blocked_scan):
# kernel-optimize unrolls a block's 16 terms whole, so the triangle's mask is a constant vector (a block of 32, unrolled
# by 4, compared j <= i lane by lane: 64x1024 on c 605 -> 12 us for the block scans)
SCAN_BLOCK = 16


class Reduction:
    """Tensor's reductions."""

    __slots__ = ()

    def _axes(self, axis: Any) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(self.ndim))
        axes = tuple(norm_axis(a, self.ndim, self.shape) for a in (axis if isinstance(axis, Sequence) else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError(f"axis {axis} repeats an axis of shape {self.shape}")
        return tuple(sorted(axes)) if self.ndim else ()

    def _reduce(self, op: str, axis: Any = None, keepdim: bool = False) -> Tensor:
        """One tensor.reduce in the tensor's dtype (the op keeps reduced dims as 1; drop them unless keepdim)."""
        axes = self._axes(axis)
        out = self._mv(T.REDUCE, (op, axes)) if axes else self
        if keepdim:
            return out
        return out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def sum(self, axis: Any = None, keepdim: bool = False, dtype: DTypeLike = None) -> Tensor:
        """Sum; bool/int accumulate in int64 (uint in uint64), half floats in float32 (see dtype_promotion)."""
        acc = P.to_dtype(dtype) or P.sum_acc(self.dtype)
        out = self.cast(acc)._reduce("add", axis, keepdim)
        return out if dtype is not None else out.cast(P.sum_result(self.dtype))

    def prod(self, axis: Any = None, keepdim: bool = False, dtype: DTypeLike = None) -> Tensor:
        acc = P.to_dtype(dtype) or P.sum_acc(self.dtype)
        out = self.cast(acc)._reduce("mul", axis, keepdim)
        return out if dtype is not None else out.cast(P.sum_result(self.dtype))

    def _check_nonempty(self, axis: Any, what: str) -> None:
        if any(self.shape[a] == 0 for a in self._axes(axis)):
            raise ValueError(f"{what} of an empty axis of shape {self.shape} has no identity")

    def max(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        self._check_nonempty(axis, "max")
        return self._reduce("max", axis, keepdim)

    def min(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        self._check_nonempty(axis, "min")
        return self._reduce("min", axis, keepdim)

    def any(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return (self if self.dtype.is_bool else self != 0)._reduce("max", axis, keepdim)

    def all(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return (self if self.dtype.is_bool else self != 0)._reduce("min", axis, keepdim)

    def mean(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        """Mean in the default float for ints (numpy gives float64); half floats keep their dtype."""
        x = self._float()
        n = sprod(self.shape[a] for a in self._axes(axis))
        return x.sum(axis, keepdim)._div_count(n)

    def var(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """Variance with `correction` (Bessel's, 1, by default as tinygrad/torch; numpy's ddof=0 is correction=0)."""
        x = self._float()
        d = x - x.mean(axis, keepdim=True)
        n = sprod(self.shape[a] for a in self._axes(axis))
        s = (d * d).sum(axis, keepdim)
        return s._div_count(ssub(n, correction).maximum(0) if V.is_sym(n) else max(0, n - correction))

    def _div_count(self, n: int | UOp) -> Tensor:
        """self / n for an element count; a symbolic count is a shapeless index value cast to self's dtype."""
        if not V.is_sym(n):
            return self / float(n)
        return self._new(UOp(C.FDIV, self.dtype, (self.uop, UOp(C.CAST, self.dtype, (n,)))))

    def std(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return self.var(axis, keepdim, correction).sqrt()

    def var_mean(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    def std_mean(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    def _arg_extreme(self, op: str, axis: int | None, keepdim: bool) -> Tensor:
        if axis is None:
            out = self.flatten()._arg_extreme(op, 0, False)
            return out.reshape((1,) * self.ndim) if keepdim else out
        a = norm_axis(axis, self.ndim, self.shape)
        if self.ndim == 0:  # axis 0 / -1 of a 0-d tensor: its one element
            return type(self).full((), 0, P.DEFAULT_INT, self.device)
        n = self.shape[a]
        if n == 0:
            raise ValueError(f"arg{op} of an empty axis of shape {self.shape}")
        m = self._reduce(op, a, keepdim=True)
        hit = self == m
        if self.dtype.is_float:
            hit = hit | self.isnan()
        idx = type(self).arange(n, 0, -1, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
        first = hit.where(idx, 0)._reduce("max", a, keepdim)
        return (n - first).cast(P.DEFAULT_INT)

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum (int32, tinygrad's dtype; numpy returns int64)."""
        return self._arg_extreme("max", axis, keepdim)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        return self._arg_extreme("min", axis, keepdim)

    def _shift_max(self, axis: Any, finite: bool = True) -> Tensor:
        """The max over axis (keepdim) that stabilizes an exp sum: 0 for an empty axis (and, if finite, where the
        max is infinite). Detached: the result does not depend on it, and its gradient would only add rounding noise."""
        if any(self.shape[a] == 0 for a in self._axes(axis)):
            return self._reduce("add", axis, keepdim=True).zeros_like()
        m = self.max(axis, keepdim=True).detach()
        return m.isinf().where(0.0, m) if finite else m

    def logsumexp(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        """log(sum(exp(x))) over axis; an empty axis gives -inf."""
        x = self._float()
        m = x._shift_max(axis)
        s = (x - m).exp().sum(axis, keepdim=True).log() + m
        return s if keepdim else s.reshape(tuple(d for i, d in enumerate(x.shape) if i not in x._axes(axis)))

    def softmax(self, axis: int = -1) -> Tensor:
        x = self._float()
        e = (x - x._shift_max(axis, finite=False)).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """(x - max) - log(sum(exp(x - max))): x - logsumexp would round the large sum first."""
        x = self._float()
        y = x - x._shift_max(axis)
        return y - y.exp().sum(axis, keepdim=True).log()

    def _cumulative(self, axis: int, fill: Scalar, combine: str) -> Tensor:
        a = norm_axis(axis, self.ndim, self.shape)
        if self.ndim == 0:  # one element: itself, in the accumulation dtype
            return self.sum() if combine == "add" else self.prod()
        x = self.transpose(a, -1)
        n = x.shape[-1]
        if isinstance(n, int) and n > 2 * SCAN_BLOCK:
            return x._blocked_scan(fill, combine).transpose(a, -1)
        rows = type(self).arange(n, device=self.device).reshape(n, 1)
        cols = type(self).arange(n, device=self.device).reshape(1, n)
        tri = x.unsqueeze(-2).expand(x.shape[:-1] + (n, n))
        upto = cols <= rows
        vals = upto.where(tri, fill)
        out = vals.sum(-1) if combine == "add" else vals.prod(-1)
        if combine == "add" and x.dtype.is_float and not (isinstance(n, int) and n == 0):
            # a running sum is -0.0 exactly while every element so far is -0.0 (numpy's add.accumulate); the
            # masked sum starts from +0.0 and would say +0.0. Where the first element that is not -0.0 is, per row
            # (a reduction of n, not of the n x n triangle: on c that triangle cost 10x the sum itself)
            negzero = (x == 0) & (x.reciprocal() < 0)
            first = negzero.where(n, cols.reshape(n)).min(-1, keepdim=True)
            out = (cols.reshape(n) < first).where(-0.0, out)
        return out.transpose(a, -1)

    def _blocked_scan(self, fill: Scalar, combine: str) -> Tensor:
        """The running sum/product along the last axis in blocks of SCAN_BLOCK: each block's own scan (a triangle of
        SCAN_BLOCK**2, not n**2: 1024 elements 64x less work), combined with the scan of the block totals before it
        (the same, recursively). The first block combines with -0.0 (add) or 1 (mul), which leave every value as it
        is, -0.0 and NaN included."""
        n = self.shape[-1]
        nb = -(-n // SCAN_BLOCK)
        x = self.pad([(0, 0)] * (self.ndim - 1) + [(0, nb * SCAN_BLOCK - n)], value=fill)
        inner = x.reshape(x.shape[:-1] + (nb, SCAN_BLOCK))._cumulative(-1, fill, combine)
        totals = inner[..., :-1, -1]  # each block's total, but the last block's (no block after it needs it)
        before = totals._cumulative(-1, fill, combine).pad([(0, 0)] * (self.ndim - 1) + [(1, 0)],
                                                             value=-0.0 if combine == "add" else 1)
        out = inner + before.unsqueeze(-1) if combine == "add" else inner * before.unsqueeze(-1)
        return out.reshape(out.shape[:-2] + (nb * SCAN_BLOCK,))[..., :n]

    def cumsum(self, axis: int = 0) -> Tensor:
        """Running sum along an axis (accumulating like sum); built as a masked triangle sum (in blocks when long)."""
        return self._cumulative(axis, 0, "add")

    def cumprod(self, axis: int = 0) -> Tensor:
        return self._cumulative(axis, 1, "mul")

    def softmin(self, axis: int = -1, dtype: DTypeLike = None) -> Tensor:
        x = self.cast(dtype) if dtype is not None else self
        return (-x._float()).softmax(axis)
