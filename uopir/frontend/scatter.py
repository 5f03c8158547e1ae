"""scatter and scatter_reduce of the Tensor (torch semantics), as masked reductions.

Every position p of `index` sends src[p] to the position of `self` that has p's coordinates except along dim,
where it has index[p]. With m = index.shape[dim], the sources that can land on one output position lie on a line
of length m, so the op is: a one-hot `index == arange(n)` mask moved to self's shape with that line as a trailing
axis, the src values beside it, and a reduction over the trailing axis (a pick of the last hit for plain scatter:
the last write wins on duplicate indices, as torch on CPU; a sum, prod, max, min or mean for scatter_reduce).
Positions no index names keep self (and with include_self=False only those). Index values outside [0, n) hit
nothing (torch raises; checking needs the data).

Each op's body is its method in the mixin `Scatter` (Tensor inherits it); the steps both share (`_lines`, `_as_1d`)
are module functions that work through the public methods of the tensors they are given. Tensor is imported
only for type checking (tensor.py imports this module): new tensors come from `type(x)`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.frontend import dtype_promotion as P
from uopir.frontend.indexing import pick
from uopir.frontend.shapes import norm_axis

if TYPE_CHECKING:
    from uopir.frontend.tensor import Scalar, Tensor

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _lines(x: Tensor, dim: int, index: Tensor, src: Tensor) -> tuple[Tensor, Tensor]:
    """(hit, vals), both of shape x.shape + (m,): hit[q, j] says that the j-th source on q's line lands on q."""
    if not index.dtype.is_int:
        raise RuntimeError(f"scatter index must be an integer tensor, got {index.dtype!r}")
    if not index.ndim == x.ndim == src.ndim:
        raise RuntimeError(f"scatter needs self, index and src of one rank, got shapes {x.shape}, {index.shape} "
                           f"and {src.shape}")
    d = norm_axis(dim, x.ndim, x.shape)
    for i, (si, ii, ss) in enumerate(zip(x.shape, index.shape, src.shape, strict=True)):
        if ii > ss or (i != d and ii > si):
            raise RuntimeError(f"scatter index shape {index.shape} must not exceed src shape {src.shape}, nor self "
                               f"shape {x.shape} outside dim {d}")
    if x.dtype is not src.dtype:
        raise RuntimeError(f"scatter needs src of self's dtype: {src.dtype!r} != {x.dtype!r}")
    n = x.shape[d]
    src = src.shrink(tuple((0, s) for s in index.shape))
    targets = type(x).arange(n, dtype=P.DEFAULT_INT, device=x.device)
    hit = (index.unsqueeze(-1) == targets).transpose(d, -1)  # [..., n at d, ..., m]
    vals = src.unsqueeze(-1).expand(index.shape + (n,)).transpose(d, -1)
    pads = tuple((0, 0) if i == d else (0, s - hit.shape[i]) for i, s in enumerate(x.shape)) + ((0, 0),)
    return hit.pad(pads), vals.pad(pads)


def _as_1d(x: Tensor, index: Tensor, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """0-d operands as 1-element vectors (torch scatters into a 0-d tensor along dim 0 / -1)."""
    return tuple(t.reshape(1) if t.ndim == 0 else t for t in (x, index, src))  # type: ignore[return-value]


class Scatter:
    """Tensor's scatter ops."""

    __slots__ = ()

    def scatter(self, dim: int, index: Tensor, src: Tensor | Scalar, reduce: str | None = None) -> Tensor:
        """out[..., index[p], ...] = src[p] along dim (the last write wins); reduce="add"|"multiply" with a
        scalar src (a tensor src with reduce: scatter_reduce, as tinygrad)."""
        if reduce not in (None, "add", "multiply"):
            raise TypeError(f"scatter: reduce={reduce!r} must be None, 'add' or 'multiply'")
        index = index if isinstance(index, type(self)) else type(self)(index, device=self.device)
        if P.is_scalar(src):
            src = type(self).full(index.shape, src, dtype=self.dtype, device=self.device)
        elif reduce is not None:
            raise TypeError("scatter with reduce takes a scalar src; use scatter_reduce for a tensor src")
        elif not isinstance(src, type(self)):
            src = type(self)(src, dtype=self.dtype, device=self.device)
        if reduce is not None:
            return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")  # type: ignore[arg-type]
        if self.ndim == 0:
            norm_axis(dim, 0)
            x1, i1, s1 = _as_1d(self, index, src)  # type: ignore[arg-type]
            return x1.scatter(0, i1, s1).reshape(())
        if index.numel() == 0:
            _lines(self, dim, index, src)  # type: ignore[arg-type]
            return self
        hit, vals = _lines(self, dim, index, src)  # type: ignore[arg-type]
        m = hit.shape[-1]
        order = type(self).arange(1, m + 1, dtype=P.DEFAULT_INT, device=self.device)
        last = hit.where(order, 0).max(-1)  # 1 + the last source landing here, 0 for none
        val = pick(vals, hit & (order == last.unsqueeze(-1)), (vals.ndim - 1,))
        return (last > 0).where(val, self)

    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
        """reduce (sum, prod, mean, amax, amin) of src into self along dim; include_self=False leaves self out
        wherever an index lands (int mean rounds down, as torch)."""
        index = index if isinstance(index, type(self)) else type(self)(index, device=self.device)
        src = src if isinstance(src, type(self)) else type(self)(src, dtype=self.dtype, device=self.device)
        if reduce not in REDUCTIONS:
            raise RuntimeError(f"scatter_reduce: reduce={reduce!r} must be one of {', '.join(REDUCTIONS)}")
        if self.ndim == 0:
            norm_axis(dim, 0)
            x1, i1, s1 = _as_1d(self, index, src)
            return x1.scatter_reduce(0, i1, s1, reduce, include_self).reshape(())
        hit, vals = _lines(self, dim, index, src)
        if index.numel() == 0:
            return self
        d = self.dtype
        landed = hit.any(-1)
        last = vals.ndim - 1
        if reduce in ("sum", "mean"):
            r = hit.where(vals, 0).sum(last).cast(d)
            if reduce == "sum":
                return r + self if include_self else landed.where(r, self)
            count = hit.sum(last) + (1 if include_self else 0)
            total = r + self if include_self else r
            mean = total / count if d.is_float else total.div(count, rounding_mode="floor")
            return (count > 0).where(mean.cast(d), self)
        if reduce == "prod":
            r = hit.where(vals, 1).prod(last).cast(d)
            return r * self if include_self else landed.where(r, self)
        largest = reduce == "amax"
        fill = (d.min if largest else d.max) if not d.is_float else float("-inf" if largest else "inf")
        masked = hit.where(vals, fill)
        r = masked.max(last) if largest else masked.min(last)
        if include_self:
            return r.maximum(self) if largest else r.minimum(self)
        return landed.where(r, self)
