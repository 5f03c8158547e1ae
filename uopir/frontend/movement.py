"""Movement ops of the Tensor: reshape, permute, expand, pad (every mode), shrink, flip and what is built from them
(squeeze, flatten, repeat, cat, stack, split, tril/triu).

The primitives become one tensor-dialect op each; symbolic dims (uopir.frontend.variable) are checked here at their
bound values. reflect / replicate / circular padding are pieces cut and joined by `cat` (torch's semantics).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import dtype_promotion as P
from uopir.frontend import variable as V
from uopir.frontend.shape_ops import TensorArgError
from uopir.frontend.shapes import check_shape, norm_axis, shape_args, tensor_args
from uopir.ir.diagnostics import AxisError, ShapeError
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import render, seq, sfloordiv, smul, sprod, ssub
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import Scalar, Tensor


def pad_mode(x: Tensor, pairs: Sequence[tuple[int, int]], mode: str) -> Tensor:
    """reflect / replicate / circular padding (torch's). Negative amounts crop: for circular before wrapping (as
    torch), for reflect and replicate after the padding was built from the whole dim."""
    if any(not isinstance(v, int) for p in pairs for v in p) or any(not isinstance(s, int) for s in x.shape):
        raise ValueError(f"pad mode {mode!r} needs static shapes and amounts, got {tuple(pairs)} for {x.shape}")
    nd = x.ndim
    if mode == "circular":
        x = x.shrink([(max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, x.shape, strict=True)])
        pairs = [(max(0, b), max(0, a)) for b, a in pairs]
        for d, (b, a) in enumerate(pairs):
            s = x.shape[d]
            if b > s or a > s:
                raise TensorArgError(f"circular padding {(b, a)} wraps around dim {d} of size {s} more than once")
            pieces = [x.shrink(_on(nd, d, (s - b, s)))] if b else []
            pieces.append(x)
            if a:
                pieces.append(x.shrink(_on(nd, d, (0, a))))
            x = pieces[0].cat(*pieces[1:], dim=d) if len(pieces) > 1 else x
        return x
    for d, (b, a) in enumerate(pairs):
        b, a = max(0, b), max(0, a)
        if not b and not a:
            continue
        s = x.shape[d]
        if mode == "reflect":
            if b >= s or a >= s:
                raise TensorArgError(f"reflect padding {(b, a)} must be smaller than dim {d} of size {s}")
            before = x.shrink(_on(nd, d, (1, b + 1))).flip(d) if b else None
            after = x.shrink(_on(nd, d, (s - 1 - a, s - 1))).flip(d) if a else None
        else:
            if s == 0:
                raise TensorArgError(f"replicate padding of dim {d} needs a non-empty dim, got shape {x.shape}")
            before = _edge(x, d, 0, b) if b else None
            after = _edge(x, d, s - 1, a) if a else None
        pieces = [p for p in (before, x, after) if p is not None]
        x = pieces[0].cat(*pieces[1:], dim=d)
    bounds = [(max(0, -b), s - max(0, -a)) for (b, a), s in zip(pairs, x.shape, strict=True)]
    if any(lo > hi for lo, hi in bounds):
        raise ValueError(f"padding {tuple(pairs)} crops more than shape {x.shape} has")
    return x.shrink(bounds)


def _edge(x: Tensor, d: int, at: int, n: int) -> Tensor:
    """Element `at` of dim d repeated n times along d."""
    e = x.shrink(_on(x.ndim, d, (at, at + 1)))
    return e.expand(tuple(n if i == d else v for i, v in enumerate(e.shape)))


def _on(nd: int, d: int, b: tuple[int, int]) -> list[tuple[int, int] | None]:
    out: list[tuple[int, int] | None] = [None] * nd
    out[d] = b
    return out


class Movement:
    """Tensor's movement ops."""

    __slots__ = ()

    def reshape(self, shape: Any, *args: int) -> Tensor:
        """New shape with the same elements; one -1 is inferred, None keeps that dim."""
        new = list(shape_args(shape, args))
        new = [self.shape[i] if s is None else s for i, s in enumerate(new)]
        if any(V.is_sym(s) for s in new) or any(V.is_sym(s) for s in self.shape):
            return self._reshape_symbolic(new)
        for s in new:
            if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < -1:
                raise ShapeError(f"cannot reshape {self.shape} to {tuple(new)}: dims must be ints >= -1")
        if new.count(-1) > 1:
            raise ShapeError(f"cannot reshape {self.shape} to {tuple(new)}: only one dim can be -1")
        if -1 in new:
            known = math.prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known:
                raise ShapeError(f"cannot reshape {self.shape} ({self.numel()} elements) to {tuple(new)}")
            new[new.index(-1)] = self.numel() // known
        shp = tuple(int(s) for s in new)
        if math.prod(shp) != self.numel():
            raise ShapeError(f"cannot reshape {self.shape} ({self.numel()} elements) to {shp} "
                             f"({math.prod(shp)} elements)")
        return self if shp == self.shape else self._mv(T.RESHAPE, shp)

    def _reshape_symbolic(self, new: list) -> Tensor:
        """reshape where a dim is symbolic: the element counts must be equal for every value of the variables
        (so a static shape cannot become a symbolic one, as in tinygrad)."""
        new = [s if V.is_sym(s) or s != -1 else -1 for s in new]
        if new.count(-1) > 1:
            raise ShapeError(f"reshape: cannot reshape {V.fmt_dims(self.shape)} to {V.fmt_dims(new)}: only one dim "
                             f"can be -1")
        for s in new:
            if not V.is_sym(s) and (isinstance(s, bool) or not isinstance(s, int | np.integer) or s < -1):
                raise ShapeError(f"reshape: cannot reshape {V.fmt_dims(self.shape)} to {V.fmt_dims(new)}: dims must "
                                 f"be ints >= -1 or Variables")
        n = self.numel()
        if -1 in new:
            known = sprod(V.as_dim(s, "reshape") for s in new if V.is_sym(s) or s != -1)
            q = sfloordiv(n, known) if not V.is_sym(known) and known else None
            if q is None or not seq(smul(q, known), n):
                raise ShapeError(f"reshape: cannot infer the -1 of {V.fmt_dims(new)} from "
                                 f"{V.fmt_dims(self.shape)} ({render(n)} elements)")
            new[new.index(-1)] = q
        shp = V.dims(new, "reshape")
        if not seq(sprod(shp), n):
            raise ShapeError(f"reshape: cannot reshape {V.fmt_dims(self.shape)} ({render(n)} elements) to "
                             f"{V.fmt_dims(shp)} ({render(sprod(shp))} elements)")
        return self if shp == self.shape else self._mv(T.RESHAPE, shp)

    def view(self, shape: Any, *args: int) -> Tensor:
        return self.reshape(shape, *args)

    def permute(self, order: Any, *args: int) -> Tensor:
        perm = tuple(norm_axis(a, self.ndim, self.shape) for a in shape_args(order, args))
        if sorted(perm) != list(range(self.ndim)):
            raise ShapeError(f"{shape_args(order, args)} is not a permutation of the axes of shape {self.shape}")
        return self if perm == tuple(range(self.ndim)) else self._mv(T.PERMUTE, perm)

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
        """Swap two axes (defaults as tinygrad: 1 and 0)."""
        order = list(range(self.ndim))
        a, b = norm_axis(dim0, self.ndim, self.shape), norm_axis(dim1, self.ndim, self.shape)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> Tensor:  # noqa: N802 - tinygrad's name
        """transpose(1, 0), as tinygrad (numpy's .T reverses all axes; the two agree for 2-d)."""
        return self.transpose()

    def expand(self, shape: Any, *args: int) -> Tensor:
        """Broadcast to a shape; -1 keeps a dim; new leading dims may be added."""
        new = shape_args(shape, args)
        if len(new) < self.ndim:
            raise ShapeError(f"cannot expand {self.shape} to {tuple(new)}: the target has fewer dims")
        lead = len(new) - self.ndim
        full = tuple(self.shape[i - lead] if not V.is_sym(s) and s == -1 and i >= lead else s
                     for i, s in enumerate(new))
        if any(V.is_sym(s) for s in full):
            full = V.dims(full, "expand")
            if any(not V.is_sym(s) and s < 0 for s in full):
                raise ValueError(f"expand: shape {V.fmt_dims(full)} must have non-negative dims")
        else:
            check_shape(full, "expand shape")
        for i, s in enumerate(self.shape):
            if s != full[i + lead] and s != 1:
                raise ShapeError(f"cannot expand {V.fmt_dims(self.shape)} to {V.fmt_dims(full)}: dim {i} has size "
                                 f"{render(s)}, not 1")
        return self._broadcast_to(full)

    def broadcast_to(self, shape: Any) -> Tensor:
        return self.expand(shape)

    def pad(self, padding: Sequence[Any], mode: str = "constant", value: Scalar = 0.0) -> Tensor:
        """Pad with a constant (or, with mode "reflect" / "replicate" / "circular", torch's mirrored, edge or
        wrapped values: pad_mode). padding: one (before, after) pair (or None) per dim, or a flat
        torch-style (left, right, top, bottom, ...) tuple starting at the last dim. Negative amounts crop."""
        if mode not in ("constant", "reflect", "replicate", "circular"):
            raise NotImplementedError(f"pad mode {mode!r} is not supported (constant, reflect, replicate, circular)")
        if not isinstance(padding, Sequence):
            raise TypeError(f"padding must be a sequence, got {type(padding).__name__}")
        if all(isinstance(p, int | np.integer | UOp) for p in padding):
            if len(padding) % 2 or len(padding) > 2 * self.ndim:
                raise ValueError(f"flat padding {tuple(padding)} needs an even length <= {2 * self.ndim} "
                                 f"for shape {self.shape}")
            pairs = [(0, 0)] * self.ndim
            for i in range(len(padding) // 2):
                pairs[self.ndim - 1 - i] = (V.as_dim(padding[2 * i], "pad"), V.as_dim(padding[2 * i + 1], "pad"))
        else:
            if len(padding) != self.ndim:
                raise ValueError(f"padding {tuple(padding)} needs {self.ndim} (before, after) pairs for shape "
                                 f"{self.shape}")
            pairs = [(0, 0) if p is None else (V.as_dim(p[0], "pad"), V.as_dim(p[1], "pad")) for p in padding]
        if mode != "constant":
            return pad_mode(self, pairs, mode)
        for v in (v for pr in pairs for v in pr if V.is_sym(v)):
            val = V.value_of(v)
            if val is not None and val < 0:
                raise ValueError(f"pad: amount {render(v)} is {val} at its bound value; a symbolic amount must not be "
                                 f"negative (crop with shrink)")
        x = self
        if any(not V.is_sym(v) and v < 0 for pr in pairs for v in pr):
            def crop(v: int | UOp) -> int:
                return 0 if V.is_sym(v) else max(0, -v)

            bounds = tuple((crop(b), ssub(s, crop(a))) for (b, a), s in zip(pairs, self.shape, strict=True))
            if any(not V.is_sym(lo) and not V.is_sym(hi) and lo > hi for lo, hi in bounds):
                raise ValueError(f"padding {tuple(pairs)} crops more than shape {self.shape} has")
            x = x.shrink(bounds)
            pairs = [(b if V.is_sym(b) else max(0, b), a if V.is_sym(a) else max(0, a)) for b, a in pairs]
        if all(not V.is_sym(b) and not V.is_sym(a) and b == 0 and a == 0 for b, a in pairs):
            return x
        pads = tuple(pairs)
        out = x._mv(T.PAD, pads)
        if value == 0 and math.copysign(1.0, value) > 0:  # -0.0 == 0, but pads with its own sign
            return out
        mask = type(self).full(x.shape, True, dtypes.bool, self.device)._mv(T.PAD, pads)
        return out._new(UOp(C.WHERE, out.dtype, (mask.uop, out.uop, C.const(out.dtype, value))))

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """Keep [start, end) on each dim (None keeps the dim)."""
        if len(arg) != self.ndim:
            raise ValueError(f"shrink {tuple(arg)} needs one (start, end) per dim of shape {self.shape}")
        bounds = tuple((0, s) if a is None else (V.as_dim(a[0], "shrink"), V.as_dim(a[1], "shrink"))
                       for a, s in zip(arg, self.shape, strict=True))
        if any(V.is_sym(v) for v in (*self.shape, *(v for b in bounds for v in b))):
            self._check_symbolic_shrink(bounds)
            return self if all(b == (0, s) for b, s in zip(bounds, self.shape, strict=True)) else \
                self._mv(T.SHRINK, bounds)
        for (lo, hi), s in zip(bounds, self.shape, strict=True):
            if not 0 <= lo <= hi <= s:
                raise ValueError(f"shrink {bounds} is out of bounds for shape {self.shape}")
        if all(b == (0, s) for b, s in zip(bounds, self.shape, strict=True)):
            return self
        return self._mv(T.SHRINK, bounds)

    def _check_symbolic_shrink(self, bounds: tuple) -> None:
        """0 <= start <= end <= size on each dim, at the bound values where every variable has one."""
        for i, ((lo, hi), s) in enumerate(zip(bounds, self.shape, strict=True)):
            vals = [V.value_of(v) for v in (lo, hi, s)]
            if None not in vals and not 0 <= vals[0] <= vals[1] <= vals[2]:
                raise ValueError(f"shrink ({', '.join(V.fmt_dims(b) for b in bounds)}) is out of bounds for "
                                 f"shape {V.fmt_dims(self.shape)}: dim {i} needs 0 <= {render(lo)} <= {render(hi)} <= "
                                 f"{render(s)}, which is 0 <= {vals[0]} <= {vals[1]} <= {vals[2]} at the bound values")

    def flip(self, axis: Any, *args: int) -> Tensor:
        axes = tuple(norm_axis(a, self.ndim, self.shape) for a in shape_args(axis, args))
        if len(set(axes)) != len(axes):
            raise ShapeError(f"flip axes {axes} repeat an axis")
        return self._mv(T.FLIP, axes) if axes else self

    def squeeze(self, dim: int | None = None) -> Tensor:
        """Drop size-1 dims (all, or just `dim` when it has size 1)."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        d = norm_axis(dim, self.ndim, self.shape)  # a 0-d tensor takes 0 and -1, else AxisError (tinygrad)
        if self.ndim == 0:
            return self
        return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])

    def unsqueeze(self, dim: int) -> Tensor:
        d = norm_axis(dim, self.ndim + 1, self.shape)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = norm_axis(start_dim, self.ndim, self.shape), norm_axis(end_dim, self.ndim, self.shape)
        if s > e:
            raise ValueError(f"flatten start_dim {start_dim} comes after end_dim {end_dim} for shape {self.shape}")
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        d = norm_axis(dim, self.ndim, self.shape)
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def repeat(self, repeats: Any, *args: int) -> Tensor:
        """Tile the tensor (torch's repeat / numpy's tile): repeats has at least ndim entries."""
        reps = shape_args(repeats, args)
        if len(reps) < self.ndim:
            raise ValueError(f"repeat {reps} needs at least {self.ndim} entries for shape {self.shape}")
        check_shape(reps, "repeats")
        base = self.reshape((1,) * (len(reps) - self.ndim) + self.shape)
        inter = tuple(v for s in base.shape for v in (1, s))
        target = tuple(v for r, s in zip(reps, base.shape, strict=True) for v in (r, s))
        return base.reshape(inter).expand(target).reshape(tuple(r * s for r, s in zip(reps, base.shape, strict=True)))

    def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
        """Join along an existing dim: each piece padded into place and selected by a padded mask (a `where`, so
        every value, -0.0 and NaN payloads included, arrives bit for bit). `Tensor.cat((a, b))` works too."""
        ts = tensor_args(self, args, "cat")
        self = ts[0]
        for t in ts:
            if not isinstance(t, type(self)):
                raise TypeError(f"cat takes Tensors, got {type(t).__name__}")
            if t.ndim != self.ndim:
                raise ShapeError(f"cat needs tensors of one rank, got shapes {', '.join(str(x.shape) for x in ts)}")
        if self.ndim == 0:
            raise AxisError("cannot cat 0-d tensors (they have no dim to join along); use stack")
        d = norm_axis(dim, self.ndim, self.shape)
        for t in ts:
            if t.shape[:d] + t.shape[d + 1:] != self.shape[:d] + self.shape[d + 1:]:
                raise ShapeError(f"cat along dim {d} needs equal other dims, got shapes "
                                 f"{', '.join(str(x.shape) for x in ts)}")
        dt = P.promote(*(t.dtype for t in ts))
        total = sum(t.shape[d] for t in ts)
        out: type(self) | None = None
        off = 0
        for t in ts:
            pads = [(0, 0)] * self.ndim
            pads[d] = (off, total - off - t.shape[d])
            off += t.shape[d]
            p = t.cast(dt).pad(pads)
            if out is None:
                out = p
            else:
                inside = type(self).full(t.shape, True, dtype=dtypes.bool, device=self.device).pad(pads)
                out = inside.where(p, out)
        return out  # type: ignore[return-value]

    def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
        """Join along a new dim; `Tensor.stack(a, b)`, `a.stack(b)` and `Tensor.stack((a, b))` (tinygrad's forms)."""
        ts = tensor_args(self, args, "stack")
        self = ts[0]
        if not isinstance(self, type(self)):
            raise TypeError(f"stack takes Tensors, got {type(self).__name__}")
        for t in ts:
            if t.shape != self.shape:
                raise ShapeError(f"stack needs equal shapes, got {', '.join(str(x.shape) for x in ts)}")
        d = norm_axis(dim, self.ndim + 1, self.shape)
        return ts[0].unsqueeze(d).cat(*(t.unsqueeze(d) for t in ts[1:]), dim=d)

    def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces of `sizes` along dim (an int: equal pieces, the last may be smaller)."""
        d = norm_axis(dim, self.ndim, self.shape)
        n = self.shape[d]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise ValueError(f"split size must be positive, got {sizes}")
            sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
        if sum(sizes) != n:
            raise ValueError(f"split sizes {tuple(sizes)} do not add up to dim {d} of shape {self.shape}")
        out, off = [], 0
        for s in sizes:
            bounds = [None] * self.ndim
            bounds[d] = (off, off + s)  # type: ignore[call-overload]
            out.append(self.shrink(bounds))
            off += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        if chunks <= 0:
            raise ValueError(f"chunk count must be positive, got {chunks}")
        d = norm_axis(dim, self.ndim, self.shape)
        return self.split(max(1, math.ceil(self.shape[d] / chunks)), d)

    def tril(self, diagonal: int = 0) -> Tensor:
        return self._triangle(diagonal, lower=True)

    def triu(self, diagonal: int = 0) -> Tensor:
        return self._triangle(diagonal, lower=False)

    def _triangle(self, diagonal: int, lower: bool) -> Tensor:
        if self.ndim < 2:
            raise ValueError(f"tril/triu need at least 2 dims, got shape {self.shape}")
        r, c = self.shape[-2:]
        rows = type(self).arange(r, device=self.device).reshape(r, 1)
        cols = type(self).arange(c, device=self.device).reshape(1, c)
        keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
        return keep.where(self, self.zeros_like())
