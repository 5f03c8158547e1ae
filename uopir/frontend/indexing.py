"""Tensor.__getitem__: basic indexing as movement ops, integer-tensor indexing as a masked reduction (torch's and
tinygrad's rules).

The index: a list of ints is one integer-array index (`t[[0, 2]]`); a tuple, or a list holding anything else, is
one index per dim (`t[(0, 1), :]` indexes dim 0 with [0, 1]); anything else is the index of dim 0. Inside it, a
list or tuple (nested ones too), a numpy array or a Tensor is an integer-array index.

Basic indices (ints, slices with any step, None, ...) become one shrink, flips, a pad/reshape/shrink per stepped
dim, and a final reshape; an int removes its dim (basic indexing, as torch and tinygrad: it is not an advanced
index). Integer tensors index "gather style": for each indexed dim a one-hot mask `index == arange(n)` selects the
element and a sum over that dim (in the tensor's own dtype) reads it out (the arange is lazy, so kernel-simplify's
fold-one-hot turns that sum into one load at the index). The broadcast index dims are placed as
torch does: where the first index tensor stood when the index tensors are adjacent among the dims left after the
ints are taken out (a None between them separates them, an ellipsis only if it stands for some dims), else in
front. So `t[1, :, 3:11:2, idx, 0:2]` keeps idx's dims in the place of its dim. Out-of-range tensor indices read 0
(they are not checked: that would need the data); negative ones count from the end. Boolean masks (a bool tensor,
or a list of bools only) are an IndexError: their result shape depends on the data.

The indexing itself is `Indexing.__getitem__` (a mixin Tensor inherits); its steps and `pick` (which selection,
scatter, nn_ops and the ONNX importer share) are module functions that use the public methods of the tensor they
are given and build new tensors with `type(x)`. Tensor is imported only for type checking (tensor.py imports this
module).

Symbolic indices (uopir.frontend.variable): a Variable (bound or not) as an int index or a slice bound (`t[:, :n]`,
`t[n:n + 2]`), and any index into a symbolic dim, become a shrink with symbolic bounds; such slices take step 1, and
a negative int counts from the (symbolic) end.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.frontend import dtype_promotion as P
from uopir.frontend import variable as V
from uopir.frontend.shapes import broadcast_shape, norm_axis
from uopir.ir.diagnostics import ArgumentError, ShapeError
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import render, sadd, smax, smin, ssub
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


def _as_index_tensor(x: Tensor, i: Any) -> Tensor:
    if isinstance(i, list | tuple):
        try:
            arr = np.asarray(i)
        except ValueError:
            raise IndexError(f"an index list must be rectangular, got {i!r}") from None
        if arr.size == 0:
            arr = arr.astype(np.int64)
        elif arr.dtype.kind not in "biu":
            raise IndexError(f"an index list must hold ints, got {i!r}")
        i = arr
    t = i if isinstance(i, type(x)) else type(x)(np.asarray(i), device=x.device)
    if t.dtype.is_bool:
        raise IndexError("boolean mask indexing has a data-dependent shape; use where() or masked_fill() instead")
    if not t.dtype.is_int:
        raise IndexError(f"tensor indices must be integers, got {t.dtype!r}")
    return t if t.dtype.itemsize >= 4 and not t.dtype.is_unsigned else t.cast(dtypes.int64)


def pick(values: Tensor, onehot: Tensor, axes: tuple[int, ...]) -> Tensor:
    """The element of `values` where the bool `onehot` is set along `axes` (at most one there; none reads 0).

    A sum of `where(onehot, values, 0)` in the values' own dtype, done on the bits for floats: adding the zeros
    that fill the other positions would turn a picked -0.0 into +0.0 (and the sum starts from +0.0 anyway), while
    an integer sum with one nonzero term is exact, so every value arrives bit for bit (NaN payloads included)."""
    d = values.dtype
    if d.is_bool:
        return onehot.where(values, False).any(axes)
    bits = values.bitcast(P.UINT_OF_SIZE[d.itemsize]) if d.is_float else values
    out = onehot.where(bits, 0).cast(bits.dtype).sum(axes, dtype=bits.dtype)
    return out.bitcast(d) if d.is_float else out


def _stride(x: Tensor, dim: int, step: int) -> Tensor:
    """Every step-th element along dim, from the first (pad to a multiple, split the dim, keep column 0)."""
    n = x.shape[dim]
    count = -(-n // step)
    pads = [(0, 0)] * x.ndim
    pads[dim] = (0, count * step - n)
    x = x.pad(pads)
    x = x.reshape(x.shape[:dim] + (count, step) + x.shape[dim + 1:])
    bounds: list[Any] = [None] * x.ndim
    bounds[dim + 1] = (0, 1)
    x = x.shrink(bounds)
    return x.reshape(x.shape[:dim] + (count,) + x.shape[dim + 2:])


def _index_items(x: Tensor, index: Any) -> list[Any]:
    """The index of x as one item per dim or None (ints, slices, Variables, index tensors), its ellipsis expanded."""
    tensor = type(x)
    if isinstance(index, list) and all(isinstance(v, int | np.integer) for v in index):
        items: list[Any] = [index]  # a list of ints (bools among them read as ints) is one index
    else:
        items = list(index) if isinstance(index, tuple | list) else [index]
    for k, it in enumerate(items):
        if isinstance(it, list | tuple | np.ndarray | tensor):
            items[k] = _as_index_tensor(x, it)
        elif isinstance(it, bool):
            raise IndexError("boolean indices are not supported; use where() instead")
        elif isinstance(it, np.integer):
            items[k] = int(it)
        elif isinstance(it, slice):
            for v in (it.start, it.stop, it.step):
                if not (v is None or isinstance(v, int | np.integer | UOp)):
                    raise TypeError(f"slice bounds must be ints, None or Variables, got {type(v).__name__} in "
                                    f"{it!r}")
        elif not (it is None or it is Ellipsis or isinstance(it, int | slice | UOp)):
            raise IndexError(f"unsupported index {it!r} of type {type(it).__name__}")
    if sum(it is Ellipsis for it in items) > 1:
        raise IndexError("an index can only have a single ellipsis (...)")
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for a tensor of shape {x.shape}: {consumed} given")
    fill = [slice(None)] * (x.ndim - consumed)
    ell = [k for k, it in enumerate(items) if it is Ellipsis]
    if ell:
        e = ell[0]
        items = items[:e] + fill + items[e + 1:]
    else:
        items = items + fill
    return items


def _symbolic(it: Any, n: Any) -> bool:
    """Does the index item (or the dim it indexes) hold a symbolic value?"""
    if isinstance(it, slice):
        return V.is_sym(n) or any(V.is_sym(v) for v in (it.start, it.stop, it.step))
    return V.is_sym(it) or (V.is_sym(n) and isinstance(it, int))


def _symbolic_bounds(it: Any, n: Any, d: int) -> tuple[tuple[Any, Any], Any]:
    """((start, end), size) of a symbolic slice, or ((i, i + 1), None) of a symbolic int index."""
    def pos(v: Any) -> Any:
        """A non-negative position: a negative index (an int, or a symbolic one negative for every value) counts
        from the end."""
        v = V.as_dim(v, f"index of dim {d}")
        if not V.is_sym(v):
            return sadd(n, v) if v < 0 else v
        if smax(v) < 0:
            return sadd(n, v)
        if smin(v) < 0:
            raise IndexError(f"symbolic index {render(v)} of dim {d} can be negative or not (its variables' ranges "
                             f"allow both); make its sign known")
        return v

    if isinstance(it, slice):
        if it.step is not None and (V.is_sym(it.step) or it.step != 1):
            raise IndexError(f"a slice with a symbolic bound, or of a symbolic dim, takes step 1; got step {it.step} "
                             f"for dim {d}")
        lo = 0 if it.start is None else pos(it.start)
        hi = n if it.stop is None else pos(it.stop)
        return (lo, hi), ssub(hi, lo)
    i = pos(it)
    return (i, sadd(i, 1)), None


def _advanced(x: Tensor, tensor_dims: list[tuple[int, Tensor, int]], adjacent: bool, insert_at: int) -> Tensor:
    try:
        bshape = broadcast_shape(*(t.shape for _, t, _ in tensor_dims))
    except ValueError as e:
        raise IndexError(f"index tensors cannot be broadcast together: {e}") from None
    tdims = [p for p, _, _ in tensor_dims]
    rest = [i for i in range(x.ndim) if i not in tdims]
    k, nb, nr = len(tdims), len(bshape), len(rest)
    xp = x.permute(tdims + rest)
    xp = xp.reshape((1,) * nb + xp.shape).expand(bshape + xp.shape)
    mask: Tensor | None = None
    for j, (_, t, n) in enumerate(tensor_dims):
        t = (t < 0).where(t + n, t).expand(bshape)
        lhs = t.reshape(bshape + (1,) * (k + nr))
        onehot = (1,) * nb + tuple(n if i == j else 1 for i in range(k)) + (1,) * nr
        m = lhs == type(x).arange(n, device=x.device).reshape(onehot)
        mask = m if mask is None else mask & m
    assert mask is not None
    out = pick(xp, mask, tuple(range(nb, nb + k)))  # B + rest
    if adjacent and insert_at:
        order = list(range(nb, nb + insert_at)) + list(range(nb)) + list(range(nb + insert_at, nb + nr))
        out = out.permute(order)
    return out


class Indexing:
    """Tensor's indexing: `t[...]`, gather, one_hot."""

    __slots__ = ()

    def __getitem__(self, index: Any) -> Tensor:
        """self[index] with torch's and tinygrad's rules (basic and integer-array indexing; no boolean masks)."""
        items = _index_items(self, index)
        # ---- basic indexing: one shrink, flips, strides, one reshape ----
        bounds: list[tuple[int, int]] = []
        flips: list[int] = []
        strides: list[tuple[int, int]] = []
        out_shape: list[int] = []
        tensor_dims: list[tuple[int, Tensor, int]] = []  # (output dim, index tensor, size of that dim)
        d = 0
        for it in items:
            if it is None:
                out_shape.append(1)
                continue
            n = self.shape[d]
            if _symbolic(it, n):
                (lo, hi), count = _symbolic_bounds(it, n, d)
                bounds.append((lo, hi))
                if count is not None:
                    out_shape.append(count)
            elif isinstance(it, int):
                if not -n <= it < n:
                    raise IndexError(f"index {it} is out of bounds for dim {d} with size {n} (shape {self.shape})")
                i = it % n
                bounds.append((i, i + 1))
            elif isinstance(it, slice):
                start, stop, step = it.indices(n)
                count = len(range(start, stop, step))
                if count == 0:
                    bounds.append((0, 0))
                elif step > 0:
                    bounds.append((start, start + (count - 1) * step + 1))
                else:
                    bounds.append((start + (count - 1) * step, start + 1))
                    flips.append(d)
                if count > 1 and abs(step) > 1:
                    strides.append((d, abs(step)))
                out_shape.append(count)
            else:
                bounds.append((0, n))
                tensor_dims.append((len(out_shape), it, n))
                out_shape.append(n)
            d += 1
        x = self.shrink(tuple(bounds))
        if flips:
            x = x.flip(flips)
        for dim, step in strides:
            x = _stride(x, dim, step)
        x = x.reshape(tuple(out_shape))
        if not tensor_dims:
            return x
        # torch's placement: the index tensors' dims (ints already removed) side by side keep their place
        pos = [p for p, _, _ in tensor_dims]
        adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
        return _advanced(x, tensor_dims, adjacent=adjacent, insert_at=pos[0])

    def gather(self, dim: int, index: Tensor) -> Tensor:
        """out[..., i, ...] = self[..., index[..., i, ...], ...] along dim (torch.gather)."""
        if not isinstance(index, type(self)):
            index = type(self)(index, device=self.device)
        x = self
        if not index.dtype.is_int:
            raise TypeError(f"gather index must be an integer tensor, got {index.dtype!r}")
        if index.ndim != x.ndim:
            raise ShapeError(f"gather index shape {index.shape} must have the rank of the input shape {x.shape}")
        d = norm_axis(dim, x.ndim, x.shape)
        for i, (a, b) in enumerate(zip(index.shape, x.shape, strict=True)):
            if i != d and a > b:
                raise ShapeError(f"gather index shape {index.shape} exceeds input shape {x.shape} at dim {i}")
        n = x.shape[d]
        xs = x.shrink(tuple(None if i == d else (0, s) for i, s in enumerate(index.shape)))
        xe = xs.unsqueeze(-1).transpose(d, -1).expand(index.shape + (n,))
        index = index if index.dtype.itemsize >= 4 and not index.dtype.is_unsigned else index.cast(dtypes.int64)
        idx = (index < 0).where(index + n, index)
        mask = idx.unsqueeze(-1) == type(x).arange(n, device=x.device)
        return pick(xe, mask, (xe.ndim - 1,))

    def one_hot(self, num_classes: int) -> Tensor:
        """int32 one-hot along a new last axis. A negative count (torch's -1, "from the data") is a ValueError, as in
        tinygrad and jax: the count fixes the shape, which must be known without running the graph."""
        x = self
        if not x.dtype.is_int:
            raise TypeError(f"one_hot needs an integer tensor, got {x.dtype!r}")
        if num_classes < 0:
            raise ArgumentError(f"one_hot num_classes must be >= 0, got {num_classes} (no count from the data)")
        return (x.unsqueeze(-1) == type(x).arange(num_classes, device=x.device)).where(1, 0)
