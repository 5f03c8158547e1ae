"""Shape ops of the Tensor beyond the movement primitives: roll, repeat_interleave, unfold, diag, diagonal,
meshgrid, einsum (pad's modes are movement.py's).

Each is a decomposition into movement ops (reshape, expand, pad, shrink, permute, flip) plus, for einsum, one
broadcast multiply and a sum; nothing here needs the data, so every shape is known when the op is called.

- roll: the dim repeated twice and a window of its length cut out at the wrap point.
- diagonal: the two dims moved last, cut to a square d x d, flattened and padded to d * (d + 1) so that a reshape
  to (d, d + 1) puts the diagonal in column 0 (diag is the same trick run backwards).
- patches (conv and pool windows) and unfold: strided windows (strided windows by movement ops alone).
- einsum (torch's rules): letters a-z A-Z, at most one `...` per operand; a letter repeated inside one operand
  takes that operand's diagonal; dims of one letter (and the ellipsis dims, right-aligned) broadcast across
  operands; the implicit output is the ellipsis dims followed by the letters used once, in sorted order; the
  result keeps the promoted operand dtype (a sum in that dtype, as matmul) unless `dtype=` names the accumulator.

Each op's body is its method in the mixin `ShapeOps` (Tensor inherits it). The module functions are the pieces
other ops share (`patches` for unfold, conv and pooling, also the ONNX importer's; `checked_dim`; the einsum
formula parser); they work through the public methods of the tensors they are given. Tensor is imported only
for type checking (tensor.py imports this module).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uopir.frontend import dtype_promotion as P
from uopir.frontend.shapes import norm_axis
from uopir.ir.diagnostics import ShapeError
from uopir.ir.dtype import dtypes

if TYPE_CHECKING:
    from uopir.frontend.tensor import DTypeLike, Tensor


class TensorArgError(RuntimeError, ValueError):
    """A bad argument that tinygrad (and torch) report as RuntimeError; a ValueError as well, like uopir's other
    argument errors, so either `except` catches it."""


class DimError(IndexError, ValueError):
    """A dim out of range for the tensor (IndexError as in torch and tinygrad; ValueError as uopir's norm_axis)."""


def checked_dim(d: Any, ndim: int, shape: tuple) -> int:
    """norm_axis, raising DimError for an out-of-range dim."""
    try:
        return norm_axis(d, ndim, shape)
    except ValueError as e:
        raise DimError(str(e)) from None


def _ints(v: int | Sequence[int], what: str) -> tuple[int, ...]:
    out = (v,) if isinstance(v, int) else tuple(v)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in out):
        raise TypeError(f"{what} must be ints, got {v!r}")
    return out


# ---- windows ---------------------------------------------------------------------------------------------------------
def _windows_last(x: Tensor, k: int, stride: int, dilation: int, out: int) -> Tensor:
    """(..., i) -> (..., out, k) with [..., o, j] = x[..., o * stride + j * dilation], by movement ops alone: the axis
    repeated and cut into k rows of length r = dilation + m * i (m >= 1, so that r >= out * stride), so row j starts at
    x[j * dilation] (r is dilation past a multiple of i); every stride-th column of a row is a window position.
    (o * stride + j * dilation < i for every window that fits, so no row reads past its wrap.)
    Windows that do not overlap (dilation 1, stride >= k: most pooling) are rows of the axis cut into out x stride, a
    view whose gradient is a pad instead of a sum over the repeats."""
    pre = tuple(x.shape[:-1])
    i = x.shape[-1]
    keep = [None] * len(pre)
    if dilation == 1 and stride >= k:
        n = out * stride
        y = x.shrink(keep + [(0, n)]) if n <= i else x.pad([(0, 0)] * len(pre) + [(0, n - i)])
        return y.reshape(pre + (out, stride)).shrink(keep + [None, (0, k)])
    row = dilation + i * max(1, -(-(out * stride - dilation) // i))
    reps = -(-k * row // i)
    y = x.reshape(pre + (1, i)).expand(pre + (reps, i)).reshape(pre + (reps * i,))
    y = y.shrink(keep + [(0, k * row)]).reshape(pre + (k, row))
    y = y.shrink(keep + [None, (0, out * stride)]).reshape(pre + (k, out, stride))
    y = y.shrink(keep + [None, None, (0, 1)]).reshape(pre + (k, out))
    return y.permute(*range(len(pre)), len(pre) + 1, len(pre))


def patches(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
    """(..., *spatial) -> (..., *out, K): the input under every kernel offset (K = prod(kernel), offsets in row-major
    order), by movement ops only (one window axis per spatial dim, `_windows_last`), so a kernel reading the patches
    indexes the input directly instead of selecting among K stacked slices."""
    nd = len(kernel)
    sp = x.shape[-nd:]
    out = tuple((s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(sp, kernel, stride, dilation, strict=True))
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation):
        raise ValueError(f"stride {stride} and dilation {dilation} must be positive")
    if any(o < 1 for o in out):
        raise ShapeError(f"kernel {kernel} with dilation {dilation} does not fit the (padded) input of shape "
                         f"{x.shape}")
    npre = x.ndim - nd
    for m in range(nd):  # shape: pre, out[:m], spatial[m:], kernel[:m]
        here = npre + m
        x = x.permute(*(a for a in range(x.ndim) if a != here), here)
        x = _windows_last(x, kernel[m], stride[m], dilation[m], out[m])  # pre, out[:m], spatial[m+1:], kernel[:m],
        n = x.ndim                                                       # out[m], kernel[m]
        x = x.permute(*range(here), n - 2, *range(here, n - 2), n - 1)
    return x.reshape(tuple(x.shape[:npre]) + out + (math.prod(kernel),))


# ---- einsum ----------------------------------------------------------------------------------------------------------
_ELL = "..."


def _einsum_terms(formula: str, nops: int) -> tuple[list[str], str | None]:
    f = "".join(formula.split())
    if f.count("->") > 1:
        raise TensorArgError(f"einsum formula {formula!r} has more than one '->'")
    lhs, _, rhs = f.partition("->")
    terms = lhs.split(",")
    if len(terms) != nops:
        raise TensorArgError(f"einsum formula {formula!r} names {len(terms)} operands, got {nops}")
    for t in terms + ([rhs] if "->" in f else []):
        if t.count(_ELL) > 1:
            raise TensorArgError(f"einsum term {t!r} of {formula!r} has more than one ellipsis")
        bad = [ch for ch in t.replace(_ELL, "") if not (ch.isascii() and ch.isalpha())]
        if bad:
            raise TensorArgError(f"einsum formula {formula!r}: {bad[0]!r} is not a subscript letter (a-z, A-Z)")
    return terms, (rhs if "->" in f else None)


class ShapeOps:
    """Tensor's shape ops built from the movement primitives."""

    __slots__ = ()

    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
        """self shifted by `shifts` along `dims` (cyclically; the flattened tensor when dims is None)."""
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        ds, ss = _ints(dims, "roll dims"), _ints(shifts, "roll shifts")
        if len(ds) != len(ss):
            raise TensorArgError(f"roll needs one shift per dim, got shifts {ss} and dims {ds}")
        ds = tuple(checked_dim(d, self.ndim, self.shape) for d in ds)
        if self.ndim == 0 or 0 in self.shape:
            return self
        total = [0] * self.ndim
        for d, s in zip(ds, ss, strict=True):
            total[d] += s
        reps = tuple(2 if t % self.shape[i] else 1 for i, t in enumerate(total))
        bounds = [(self.shape[i] - t % self.shape[i], 2 * self.shape[i] - t % self.shape[i]) if r == 2 else None
                  for i, (t, r) in enumerate(zip(total, reps, strict=True))]
        return self.repeat(reps).shrink(bounds) if any(r == 2 for r in reps) else self

    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
        """Each element repeated `repeats` times along dim (of the flattened tensor when dim is None)."""
        if isinstance(repeats, bool) or not isinstance(repeats, int):
            raise TypeError(f"repeat_interleave takes an int number of repeats, got {type(repeats).__name__}")
        if repeats < 0:
            raise TensorArgError(f"repeat_interleave repeats must be non-negative, got {repeats}")
        x = self
        if dim is None:
            x, dim = x.flatten(), 0
        dim = checked_dim(dim, x.ndim, x.shape)
        if x.ndim == 0:
            x = x.reshape(1)
        s = x.shape
        y = x.reshape(s[:dim + 1] + (1,) + s[dim + 1:]).expand(s[:dim + 1] + (repeats,) + s[dim + 1:])
        return y.reshape(s[:dim] + (s[dim] * repeats,) + s[dim + 1:])

    def unfold(self, dim: int, size: int, step: int) -> Tensor:
        """Windows of `size` every `step` along dim: dim becomes the window count, a new last dim of `size` (torch)."""
        if self.ndim == 0:
            raise DimError(f"unfold dim {dim} is out of range for a 0-d tensor")
        dim = checked_dim(dim, self.ndim, self.shape)
        if size < 0:
            raise TensorArgError(f"unfold size must be >= 0, got {size}")
        if step <= 0:
            raise TensorArgError(f"unfold step must be > 0, got {step}")
        n = self.shape[dim]
        if size > n:
            raise TensorArgError(f"unfold size {size} is larger than dim {dim} of shape {self.shape}")
        count = (n - size) // step + 1
        last = self.transpose(dim, -1) if dim != self.ndim - 1 else self
        if size == 0 or any(s == 0 for s in last.shape[:-1]):
            w = last.shrink([None] * (self.ndim - 1) + [(0, 0)]).reshape(last.shape[:-1] + (count, size))
        else:
            w = patches(last, (size,), (step,), (1,))  # (..., count, size)
        return w.transpose(dim, -2) if dim != self.ndim - 1 else w

    def diag(self) -> Tensor:
        """The (n, n) matrix with the 1-d self on its diagonal."""
        if self.ndim != 1:
            raise ValueError(f"diag needs a 1-d tensor, got shape {self.shape}")
        n = self.shape[0]
        if n == 0:
            return self.reshape(0, 0)
        return self.reshape(n, 1).pad(((0, 0), (0, n))).flatten().shrink(((0, n * n),)).reshape(n, n)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The diagonal of dims dim1 and dim2 (offset above, or below when negative), as a new last dim (torch)."""
        if self.ndim < 2:
            raise DimError(f"diagonal needs at least 2 dims, got shape {self.shape}")
        a, b = checked_dim(dim1, self.ndim, self.shape), checked_dim(dim2, self.ndim, self.shape)
        if a == b:
            raise TensorArgError(f"diagonal dim1 and dim2 are the same dim {a}")
        y = self.permute(*(i for i in range(self.ndim) if i not in (a, b)), a, b)
        pre = y.shape[:-2]
        r, c = y.shape[-2:]
        r0, c0 = (max(0, -offset), max(0, offset))
        n = max(0, min(r - r0, c - c0))
        keep = [None] * len(pre)
        if n == 0:
            return y.shrink(keep + [(0, 0), (0, 0)]).reshape(pre + (0,))
        y = y.shrink(keep + [(r0, r0 + n), (c0, c0 + n)]).reshape(pre + (n * n,))
        y = y.pad([(0, 0)] * len(pre) + [(0, n)]).reshape(pre + (n, n + 1))
        return y.shrink(keep + [None, (0, 1)]).reshape(pre + (n,))

    def meshgrid(self, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
        """self and args (0-d or 1-d) expanded to the grid of their lengths ("xy": the first two swapped)."""
        ts = (self, *args)
        if indexing not in ("ij", "xy"):
            raise TensorArgError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
        for t in ts:
            if t.ndim > 1:
                raise TensorArgError(f"meshgrid takes 0-d or 1-d tensors, got shape {t.shape}")
        if len(ts) == 1:
            return (ts[0],)
        n = len(ts)
        place = list(range(n))
        if indexing == "xy":
            place[0], place[1] = 1, 0
        flat = [t.reshape(-1) for t in ts]
        shape = [0] * n
        for p, t in zip(place, flat, strict=True):
            shape[p] = t.shape[0]
        out = []
        for p, t in zip(place, flat, strict=True):
            out.append(t.reshape(tuple(t.shape[0] if i == p else 1 for i in range(n))).expand(tuple(shape)))
        return tuple(out)

    @classmethod
    def einsum(cls, formula: str, *operands: Tensor | Sequence[Tensor], dtype: DTypeLike = None) -> Tensor:
        """Einstein summation with torch's rules (see the module docstring); operands as arguments or one list."""
        xs = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], Sequence) else list(operands)
        if not all(isinstance(t, cls) for t in xs):
            raise TypeError(f"einsum operands must be Tensors, got {[type(t).__name__ for t in xs]}")
        dtype = P.to_dtype(dtype)
        terms, rhs = _einsum_terms(formula, len(xs))
        # labels: letters stay letters, ellipsis dims become ("...", k) for k counted from the right
        ell = 0
        labeled: list[list[Any]] = []
        for t, x in zip(terms, xs, strict=True):
            letters = len(t.replace(_ELL, ""))
            if _ELL in t:
                k = x.ndim - letters
                if k < 0:
                    raise TensorArgError(f"einsum term {t!r} has more subscripts than operand dims {x.shape}")
                head, tail = t.split(_ELL)
                lab = list(head) + [(_ELL, k - 1 - i) for i in range(k)] + list(tail)
                ell = max(ell, k)
            else:
                if letters != x.ndim:
                    raise TensorArgError(f"einsum term {t!r} has {letters} subscripts for an operand of shape "
                                         f"{x.shape}")
                lab = list(t)
            labeled.append(lab)
        # repeated letters inside one operand: its diagonal
        ops = []
        for lab, x in zip(labeled, xs, strict=True):
            for ch in sorted({c for c in lab if isinstance(c, str) and lab.count(c) > 1}):
                while lab.count(ch) > 1:
                    i = lab.index(ch)
                    j = lab.index(ch, i + 1)
                    if x.shape[i] != x.shape[j]:
                        raise TensorArgError(f"einsum subscript {ch!r} repeats in one operand over dims of sizes "
                                             f"{x.shape[i]} and {x.shape[j]} (shape {x.shape})")
                    x = x.diagonal(0, i, j)
                    lab = [c for k, c in enumerate(lab) if k not in (i, j)] + [ch]
            ops.append((lab, x))
        ell_labels = [(_ELL, k) for k in range(ell - 1, -1, -1)]
        letters_all = [c for lab, _ in ops for c in lab if isinstance(c, str)]
        if rhs is None:  # implicit output: the letters written once in the whole formula ("ii" is a trace, as torch)
            written = [c for lab in labeled for c in lab if isinstance(c, str)]
            out = ell_labels + sorted(c for c in set(written) if written.count(c) == 1)
        else:
            head, _, tail = rhs.partition(_ELL)
            out = list(head) + (ell_labels if _ELL in rhs else []) + list(tail)
            for c in rhs.replace(_ELL, ""):
                if rhs.count(c) > 1:
                    raise TensorArgError(f"einsum output {rhs!r} repeats subscript {c!r}")
                if c not in letters_all:
                    raise TensorArgError(f"einsum output subscript {c!r} does not occur in the inputs of {formula!r}")
        alphabet = out + sorted({c for lab, _ in ops for c in lab if c not in out}, key=str)
        # sizes: equal or 1 per label
        size: dict[Any, int] = {}
        for lab, x in ops:
            for c, s in zip(lab, x.shape, strict=True):
                if size.get(c, 1) != 1 and s != 1 and size[c] != s:
                    shapes = ", ".join(str(y.shape) for y in xs)
                    raise TensorArgError(f"einsum {formula!r}: subscript {c if isinstance(c, str) else '...'!r} has "
                                         f"sizes {size[c]} and {s} that do not broadcast (operand shapes {shapes})")
                if s != 1 or c not in size:
                    size[c] = s
        d = P.promote(*(x.dtype for _, x in ops))
        # half floats multiply and add in float32 (exact products of two halves, one rounding at the end, as numpy)
        wd = dtypes.float32 if d in (dtypes.float16, dtypes.bfloat16) and dtype is None else d
        aligned = []
        for lab, x in ops:
            order = sorted(range(len(lab)), key=lambda i: alphabet.index(lab[i]))
            y = x.cast(wd).permute(*order) if order != list(range(len(lab))) else x.cast(wd)
            y = y.reshape(tuple(x.shape[lab.index(c)] if c in lab else 1 for c in alphabet))
            aligned.append(y)
        prod = aligned[0]
        for y in aligned[1:]:
            prod = prod * y
        prod = prod.expand(tuple(size[c] for c in alphabet))
        red = tuple(range(len(out), len(alphabet)))
        if dtype is not None:
            return prod.sum(red, dtype=dtype) if red else prod.cast(dtype)
        if not red:
            return prod if wd is d else prod.cast(d)
        if d.is_bool:
            return prod.any(red)
        if wd is not d:
            return prod.sum(red, dtype=dtypes.float32).cast(d)
        return prod.sum(red, dtype=d)
