"""Linear algebra and neural-network ops of the Tensor, as decompositions into movement, elementwise and reduce.

- matmul: broadcast the operands to (..., n, m, k), multiply, reduce over k (numpy's rules for 1-d operands and
  batch broadcasting; ints keep their dtype as in numpy, half floats accumulate in float32).
- conv / pool: each kernel offset reads a (strided, dilated) slice of the padded input; the K slices are stacked on
  a last axis, giving (N, C, *out, K) patches that a multiply-and-sum (conv) or a max/mean (pool) reduces.
- gather / one_hot: a one-hot mask `index == arange(n)` and a reduction.

This module imports no Tensor: its functions work through the public methods of the tensors they are given and
build new ones with `type(x)` (tensor.py imports this module, never the other way round). The Tensor methods
convert their arguments to tensors before they call in here.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uopir.frontend import dtype_promotion as P
from uopir.frontend.indexing import pick
from uopir.frontend.shapes import broadcast_shape, norm_axis
from uopir.ir.diagnostics import ArgumentError, ShapeError
from uopir.ir.dtype import dtypes

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


def sum_keep_dtype(x: Tensor, axis: Any) -> Tensor:
    """A sum in x's own dtype (bool: any; half floats accumulate in float32): numpy's matmul/conv accumulation."""
    if x.dtype.is_bool:
        return x.any(axis)
    if x.dtype in (dtypes.float16, dtypes.bfloat16):
        return x.sum(axis, dtype=dtypes.float32).cast(x.dtype)
    return x.sum(axis, dtype=x.dtype)


def matmul(x: Tensor, w: Tensor) -> Tensor:
    if x.ndim == 0 or w.ndim == 0:
        raise ShapeError(f"matmul needs operands of at least 1 dim, got shapes {x.shape} and {w.shape}")
    k1, k2 = x.shape[-1], w.shape[-2] if w.ndim >= 2 else w.shape[0]
    if k1 != k2:
        raise ShapeError(f"matmul inner dimensions differ: {x.shape} @ {w.shape} ({k1} != {k2})")
    try:
        broadcast_shape(x.shape[:-2], w.shape[:-2])
    except ValueError:
        raise ShapeError(f"matmul batch dimensions of {x.shape} and {w.shape} cannot be broadcast together") from None
    d = P.promote(x.dtype, w.dtype)
    x, w = x.cast(d), w.cast(d)
    nd = min(x.ndim - 1, w.ndim - 1, 1)
    wk = min(w.ndim, 2)
    xx = x.reshape(x.shape[:-1] + (1,) * nd + x.shape[-1:])
    ww = w.reshape(w.shape[:-2] + (1,) * nd + w.shape[-wk:]).transpose(-1, -wk)
    return sum_keep_dtype(xx * ww, -1)


def _tuple(v: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    if len(v) != n:
        raise ValueError(f"{what} {tuple(v)} needs {n} entries")
    return tuple(v)


def resolve_pads(padding: int | Sequence[int], nd: int) -> list[tuple[int, int]]:
    """Per spatial dim (before, after): an int, one int per dim (both sides), or torch's flat (left, right, top,
    bottom, ...) which starts at the last dim."""
    if isinstance(padding, int):
        return [(padding, padding)] * nd
    p = tuple(padding)
    if len(p) == nd:
        return [(v, v) for v in p]
    if len(p) == 2 * nd:
        return [(p[2 * (nd - 1 - i)], p[2 * (nd - 1 - i) + 1]) for i in range(nd)]
    raise ValueError(f"padding {p} needs 1, {nd} or {2 * nd} entries")


def _windows_last(x: Tensor, k: int, stride: int, dilation: int, out: int) -> Tensor:
    """(..., i) -> (..., out, k) with [..., o, j] = x[..., o * stride + j * dilation], by movement ops alone: the axis
    repeated and cut into k rows of length r = dilation + m * i (m >= 1, so that r >= out * stride), so row j starts at
    x[j * dilation] (r is dilation past a multiple of i); every stride-th column of a row is a window position.
    (o * stride + j * dilation < i for every window that fits, so no row reads past its wrap.)"""
    pre = tuple(x.shape[:-1])
    i = x.shape[-1]
    row = dilation + i * max(1, -(-(out * stride - dilation) // i))
    reps = -(-k * row // i)
    keep = [None] * len(pre)
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
        raise ValueError(f"kernel {kernel} with dilation {dilation} does not fit the (padded) input of shape "
                         f"{x.shape}")
    npre = x.ndim - nd
    for m in range(nd):  # shape: pre, out[:m], spatial[m:], kernel[:m]
        here = npre + m
        x = x.permute(*(a for a in range(x.ndim) if a != here), here)
        x = _windows_last(x, kernel[m], stride[m], dilation[m], out[m])  # pre, out[:m], spatial[m+1:], kernel[:m],
        n = x.ndim                                                       # out[m], kernel[m]
        x = x.permute(*range(here), n - 2, *range(here, n - 2), n - 1)
    return x.reshape(tuple(x.shape[:npre]) + out + (math.prod(kernel),))


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride: Any, dilation: Any,
           padding: Any) -> Tensor:
    """Grouped, strided, dilated, padded convolution over the last weight.ndim-2 dims (cross-correlation)."""
    nd = weight.ndim - 2
    if nd < 1:
        raise ValueError(f"conv weight must be (out, in/groups, *kernel), got shape {weight.shape}")
    if x.ndim != nd + 2:
        raise ValueError(f"conv input of shape {x.shape} needs {nd + 2} dims to match weight of shape "
                         f"{weight.shape}")
    n, cin = x.shape[:2]
    cout, cg = weight.shape[:2]
    if groups < 1 or cin != groups * cg:
        raise ValueError(f"conv input channels do not match: input shape {x.shape} has {cin} channels, weight shape "
                         f"{weight.shape} with groups={groups} expects {groups * cg}")
    if cout % groups:
        raise ValueError(f"conv weight shape {weight.shape}: {cout} output channels are not divisible by "
                         f"groups={groups}")
    if bias is not None and bias.shape != (cout,):
        raise ValueError(f"conv bias shape {bias.shape} must be ({cout},) for weight shape {weight.shape}")
    k = weight.shape[2:]
    st, dl = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    d = P.promote(x.dtype, weight.dtype)
    xp = x.cast(d).pad([(0, 0), (0, 0)] + resolve_pads(padding, nd))
    pt = patches(xp, k, st, dl)  # (N, Cin, *out, K)
    out = pt.shape[2:-1]
    kk = math.prod(k)
    og = cout // groups
    xr = pt.reshape((n, groups, 1, cg) + out + (kk,))
    wr = weight.cast(d).reshape((1, groups, og, cg) + (1,) * nd + (kk,))
    ret = sum_keep_dtype(xr * wr, (3, xr.ndim - 1)).reshape((n, cout) + out)
    return ret + bias.reshape((1, cout) + (1,) * nd) if bias is not None else ret


def _pool_args(x: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any
               ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], list[tuple[int, int]]]:
    k = _tuple(kernel_size, 2, "kernel_size") if isinstance(kernel_size, int) else tuple(kernel_size)
    nd = len(k)
    if x.ndim < nd:
        raise ValueError(f"pooling with kernel {k} needs at least {nd} dims, got shape {x.shape}")
    st = k if stride is None else _tuple(stride, nd, "stride")
    return k, st, _tuple(dilation, nd, "dilation"), resolve_pads(padding, nd)


def max_pool(x: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any) -> Tensor:
    k, st, dl, pads = _pool_args(x, kernel_size, stride, dilation, padding)
    fill = float("-inf") if x.dtype.is_float else x.dtype.min
    xp = x.pad([(0, 0)] * (x.ndim - len(k)) + pads, value=fill)
    return patches(xp, k, st, dl).max(-1)


def avg_pool(x: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any,
             count_include_pad: bool) -> Tensor:
    k, st, dl, pads = _pool_args(x, kernel_size, stride, dilation, padding)
    full = [(0, 0)] * (x.ndim - len(k)) + pads
    pt = patches(x.pad(full), k, st, dl)
    if count_include_pad or not any(a or b for a, b in pads):
        return pt.mean(-1)
    ones = x.ones_like(dtypes.float32).pad(full)
    return pt.cast(P.float_of(pt.dtype)).sum(-1) / patches(ones, k, st, dl).sum(-1)


def one_hot(x: Tensor, num_classes: int) -> Tensor:
    """int32 one-hot along a new last axis. A negative count (torch's -1, "from the data") is a ValueError, as in
    tinygrad and jax: the count fixes the shape, which must be known without running the graph."""
    if not x.dtype.is_int:
        raise TypeError(f"one_hot needs an integer tensor, got {x.dtype!r}")
    if num_classes < 0:
        raise ArgumentError(f"one_hot num_classes must be >= 0, got {num_classes} (no count from the data)")
    return (x.unsqueeze(-1) == type(x).arange(num_classes, device=x.device)).where(1, 0)


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """out[..., i, ...] = x[..., index[..., i, ...], ...] along dim (torch.gather)."""
    if not index.dtype.is_int:
        raise TypeError(f"gather index must be an integer tensor, got {index.dtype!r}")
    if index.ndim != x.ndim:
        raise ValueError(f"gather index shape {index.shape} must have the rank of the input shape {x.shape}")
    d = norm_axis(dim, x.ndim, x.shape)
    for i, (a, b) in enumerate(zip(index.shape, x.shape, strict=True)):
        if i != d and a > b:
            raise ValueError(f"gather index shape {index.shape} exceeds input shape {x.shape} at dim {i}")
    n = x.shape[d]
    xs = x.shrink(tuple(None if i == d else (0, s) for i, s in enumerate(index.shape)))
    xe = xs.unsqueeze(-1).transpose(d, -1).expand(index.shape + (n,))
    index = index if index.dtype.itemsize >= 4 and not index.dtype.is_unsigned else index.cast(dtypes.int64)
    idx = (index < 0).where(index + n, index)
    mask = idx.unsqueeze(-1) == type(x).arange(n, device=x.device)
    return pick(xe, mask, (xe.ndim - 1,))


def batchnorm(x: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
              axis: int | tuple[int, ...]) -> Tensor:
    axes = tuple(norm_axis(a, x.ndim, x.shape) for a in ((axis,) if isinstance(axis, int) else axis))
    shape = tuple(s if i in axes else 1 for i, s in enumerate(x.shape))
    y = x - mean.reshape(shape)
    if weight is not None:
        y = y * weight.reshape(shape)
    y = y * (invstd.reshape(shape) if invstd.ndim == 1 else invstd)
    return y + bias.reshape(shape) if bias is not None else y


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float,
                                 is_causal: bool) -> Tensor:
    """softmax(q k^T / sqrt(d) [masked]) v. A bool mask keeps True entries; a float mask is added. dropout_p only
    applies while Tensor.training (as tinygrad)."""
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"attention needs (..., L, E) operands, got shapes {q.shape}, {k.shape}, {v.shape}")
    if is_causal and attn_mask is not None:
        raise ValueError("give either attn_mask or is_causal, not both")
    qk = q.matmul(k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if is_causal:
        attn_mask = type(q).ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=q.device).tril()
    if attn_mask is not None:
        qk = attn_mask.where(qk, float("-inf")) if attn_mask.dtype.is_bool else qk + attn_mask
    return qk.softmax(-1).dropout(dropout_p).matmul(v)


def reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(x: Tensor, y: Tensor, reduction: str, label_smoothing: float) -> Tensor:
    """Classes on axis 1 (axis 0 for 1-d logits); y holds class indices (one dim fewer) or probabilities."""
    ax = 1 if x.ndim >= 2 else 0
    c = x.shape[ax]
    y_shape = y.shape
    if y.dtype.is_int and y.ndim == x.ndim - 1 and y.shape == x.shape[:ax] + x.shape[ax + 1:]:
        y = y.one_hot(c)
        y = y.permute(tuple(range(ax)) + (y.ndim - 1,) + tuple(range(ax, y.ndim - 1)))
    if y.shape != x.shape:
        raise ValueError(f"cross_entropy target shape {y_shape} does not fit logits shape {x.shape}")
    y = y.cast(P.float_of(y.dtype)) * (1 - label_smoothing) + label_smoothing / c
    return reduce_loss(-(x.log_softmax(ax) * y).sum(ax), reduction)


def sparse_categorical_crossentropy(x: Tensor, y: Tensor, ignore_index: int, label_smoothing: float,
                                    reduction: str) -> Tensor:
    """Classes on the last axis, y integer labels; entries equal to ignore_index count for nothing (tinygrad)."""
    if y.shape != x.shape[:-1]:
        raise ValueError(f"labels shape {y.shape} must be logits shape {x.shape} without its last dim")
    logp = x.log_softmax(-1)
    keep = y != ignore_index
    nll = -(logp * y.one_hot(x.shape[-1])).sum(-1)
    loss = keep.where((1 - label_smoothing) * nll - label_smoothing * logp.mean(-1), 0.0)
    if reduction == "mean":
        return loss.sum() / keep.sum().maximum(1).cast(loss.dtype)
    return reduce_loss(loss, reduction)
