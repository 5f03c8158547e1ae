"""Linear algebra and neural-network ops of the Tensor, as decompositions into movement, elementwise and reduce.

- matmul: broadcast the operands to (..., n, m, k), multiply, reduce over k (numpy's rules for 1-d operands and
  batch broadcasting; ints keep their dtype as in numpy; half floats multiply and accumulate in float32, rounded
  once at the end, as numpy and torch).
- conv / pool: each kernel offset reads a (strided, dilated) slice of the padded input; the K slices are stacked on
  a last axis, giving (N, C, *out, K) patches that a multiply-and-sum (conv) or a max/mean (pool) reduces.

This module imports no Tensor: its functions work through the public methods of the tensors they are given and
build new ones with `type(x)` (tensor.py imports this module, never the other way round). The Tensor methods
convert their arguments to tensors before they call in here.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.frontend import dtype_promotion as P
from uopir.frontend.indexing import pick
from uopir.frontend.shape_ops import TensorArgError, patches
from uopir.frontend.shapes import broadcast_shape, norm_axis
from uopir.ir.diagnostics import ShapeError
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


def sum_of_products(a: Tensor, b: Tensor, axis: Any) -> Tensor:
    """(a * b) summed over axis in their (common) dtype. Half floats multiply in float32 too: a product of two
    halves is exact there, so the result is rounded once (numpy's and torch's matmul), not once per product."""
    if a.dtype in (dtypes.float16, dtypes.bfloat16):
        return (a.float() * b.float()).sum(axis, dtype=dtypes.float32).cast(a.dtype)
    return sum_keep_dtype(a * b, axis)


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
    return sum_of_products(xx, ww, -1)


def _tuple(v: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    if len(v) != n:
        raise ValueError(f"{what} {tuple(v)} needs {n} entries")
    return tuple(v)


def _positive(v: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    """`_tuple` for a stride, dilation or kernel size: every entry an int >= 1 (a stride of 0 would divide by 0)."""
    try:
        t = tuple(operator.index(e) for e in ((v,) * n if not isinstance(v, Sequence) else v))
    except TypeError:
        raise ValueError(f"{what} {v!r} must be an int >= 1 or {n} of them") from None
    if len(t) != n:
        raise ValueError(f"{what} {t} needs {n} entries")
    if any(e < 1 or isinstance(e, bool) for e in t):
        raise ValueError(f"{what} {t} must be ints >= 1")
    return t


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


def _spatial_dims(name: str, layout: str, x: Tensor, weight: Tensor) -> int:
    """The number of spatial dims of a convolution, after checking that weight has them and x matches it."""
    nd = weight.ndim - 2
    if nd < 1:
        raise ValueError(f"{name} weight must be {layout}, got shape {weight.shape}")
    if x.ndim != nd + 2:
        raise ValueError(f"{name} input of shape {x.shape} needs {nd + 2} dims to match weight of shape "
                         f"{weight.shape}")
    return nd


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride: Any, dilation: Any,
           padding: Any) -> Tensor:
    """Grouped, strided, dilated, padded convolution over the last weight.ndim-2 dims (cross-correlation)."""
    nd = _spatial_dims("conv", "(out, in/groups, *kernel)", x, weight)
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
    st, dl = _positive(stride, nd, "conv stride"), _positive(dilation, nd, "conv dilation")
    d = P.promote(x.dtype, weight.dtype)
    xp = x.cast(d).pad([(0, 0), (0, 0)] + resolve_pads(padding, nd))
    pt = patches(xp, k, st, dl)  # (N, Cin, *out, K)
    out = pt.shape[2:-1]
    kk = math.prod(k)
    og = cout // groups
    xr = pt.reshape((n, groups, 1, cg) + out + (kk,))
    wr = weight.cast(d).reshape((1, groups, og, cg) + (1,) * nd + (kk,))
    ret = sum_of_products(xr, wr, (3, xr.ndim - 1)).reshape((n, cout) + out)
    return ret + bias.reshape((1, cout) + (1,) * nd) if bias is not None else ret


def _pool_args(x: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any
               ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], list[tuple[int, int]]]:
    k = _tuple(kernel_size, 2, "kernel_size") if isinstance(kernel_size, int) else tuple(kernel_size)
    nd = len(k)
    k = _positive(k, nd, "pooling kernel_size")
    if x.ndim < nd:
        raise ValueError(f"pooling with kernel {k} needs at least {nd} dims, got shape {x.shape}")
    st = k if stride is None else _positive(stride, nd, "pooling stride")
    return k, st, _positive(dilation, nd, "pooling dilation"), resolve_pads(padding, nd)


def ceil_window_end(i: int, kk: int, s: int, d: int, b: int, a: int) -> int:
    """Ceil mode on one axis (size i, kernel kk, stride s, dilation d, pads b before and a after): the output count
    rounded up, minus a last window that would start in the padding after the input; returns how far past the input
    and its begin padding the last window reaches (the end padding that makes the floor count that count)."""
    span = d * (kk - 1) + 1
    o = -(-(i + b + a - span) // s) + 1
    if o > 1 and (o - 1) * s >= i + b:
        o -= 1
    return (o - 1) * s + span - (i + b)


def _ceil_pads(sp: Sequence[int], k: tuple[int, ...], st: tuple[int, ...], dl: tuple[int, ...],
               pads: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """torch's ceil_mode: the pads grow (or shrink) at the end so that the floor count of the padded input is the
    ceil count (ceil_window_end)."""
    return [(b, ceil_window_end(i, kk, s, d, b, a))
            for i, kk, s, d, (b, a) in zip(sp, k, st, dl, pads, strict=True)]


def max_pool(x: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any, ceil_mode: bool = False,
             return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Max over each window (padding never wins). return_indices: the flat index into the input's spatial dims of
    the first maximum of each window (the last NaN where the window has one, as torch), int32 as tinygrad."""
    k, st, dl, pads = _pool_args(x, kernel_size, stride, dilation, padding)
    nd = len(k)
    sp = tuple(x.shape[-nd:])
    if ceil_mode:
        pads = _ceil_pads(sp, k, st, dl, pads)
    fill = float("-inf") if x.dtype.is_float else x.dtype.min
    full = [(0, 0)] * (x.ndim - nd) + pads
    pt = patches(x.pad(full, value=fill), k, st, dl)
    mx = pt.max(-1)
    if not return_indices:
        return mx
    n = math.prod(sp)
    flat = type(x).arange(n, device=x.device).reshape(sp).pad(pads, value=n)
    ip = patches(flat, k, st, dl)
    first = (pt == mx.unsqueeze(-1)).where(ip, n).min(-1)
    if x.dtype.is_float:
        last_nan = pt.isnan().where(ip, -1).max(-1)
        first = (last_nan >= 0).where(last_nan, first)
    return mx, first.cast(dtypes.int32)


def avg_pool(x: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any,
             count_include_pad: bool, ceil_mode: bool = False) -> Tensor:
    """Mean over each window. The divisor counts the window's positions inside the input and, with
    count_include_pad, inside the padding; never those that ceil_mode adds past the padding (torch)."""
    k, st, dl, pads = _pool_args(x, kernel_size, stride, dilation, padding)
    nd = len(k)
    sp = tuple(x.shape[-nd:])
    cpads = _ceil_pads(sp, k, st, dl, pads) if ceil_mode else pads
    pt = patches(x.pad([(0, 0)] * (x.ndim - nd) + cpads), k, st, dl)
    padded = any(a or b for a, b in pads)
    if cpads == pads and (count_include_pad or not padded):
        return pt.mean(-1)
    ones = type(x).ones(*sp, dtype=dtypes.float32, device=x.device)
    if count_include_pad:
        ones = ones.pad(pads, value=1.0)
        extra = [(0, c[1] - p[1]) for c, p in zip(cpads, pads, strict=True)]
    else:
        extra = cpads
    count = patches(ones.pad(extra), k, st, dl).sum(-1)
    return pt.cast(P.float_of(pt.dtype)).sum(-1) / count


def max_unpool(x: Tensor, indices: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any,
               output_size: Any) -> Tensor:
    """out[n, c, flat] = x[n, c, p] where indices[n, c, p] == flat (0 elsewhere); several windows pointing at one
    input position carry its one value (torch assigns, it does not add)."""
    if x.ndim < 3:
        raise ValueError(f"max_unpool2d needs (N, C, *spatial) input, got shape {x.shape}")
    if indices.shape != x.shape:
        raise ValueError(f"max_unpool2d indices shape {indices.shape} must equal the input shape {x.shape}")
    if not indices.dtype.is_int:
        raise TypeError(f"max_unpool2d indices must be integers, got {indices.dtype!r}")
    bs, c, *sp = x.shape
    nd = len(sp)
    if output_size is None:
        k = _positive(kernel_size, nd, "max_unpool2d kernel_size")
        st = k if stride is None else _positive(stride, nd, "max_unpool2d stride")
        dl = _positive(dilation, nd, "max_unpool2d dilation")
        pads = resolve_pads(padding, nd)
        out = tuple((i - 1) * s - (b + a) + d * (kk - 1) + 1
                    for i, kk, s, d, (b, a) in zip(sp, k, st, dl, pads, strict=True))
    else:
        out = tuple(output_size)[-nd:]
        if len(out) != nd:
            raise ValueError(f"max_unpool2d output_size {tuple(output_size)} needs {nd} spatial sizes")
    m = math.prod(out)
    pos = math.prod(sp)
    hit = indices.reshape(bs, c, 1, pos) == type(x).arange(m, device=x.device).reshape(1, 1, m, 1)
    vals = x.reshape(bs, c, 1, pos)
    low = float("-inf") if x.dtype.is_float else (False if x.dtype.is_bool else x.dtype.min)
    got = hit.where(vals, low).max(3)
    return hit.any(3).where(got, False if x.dtype.is_bool else 0).reshape((bs, c) + out)


def conv_transpose(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride: Any, dilation: Any,
                   padding: Any, output_padding: Any) -> Tensor:
    """The gradient of conv2d with respect to its input, as a conv2d: the input dilated by `stride` (zeros in
    between), the weight (in, out/groups, *k) turned into (out, in/groups, *k) and flipped, and the padding
    dilation * (k - 1) - padding on each side (+ output_padding at the end)."""
    nd = _spatial_dims("conv_transpose2d", "(in, out/groups, *kernel)", x, weight)
    cin, og = weight.shape[:2]
    if groups < 1 or x.shape[1] != cin or cin % groups:
        raise ValueError(f"conv_transpose2d: input shape {x.shape} has {x.shape[1]} channels, weight shape "
                         f"{weight.shape} with groups={groups} expects {cin} (divisible by groups)")
    k = tuple(weight.shape[2:])
    st, dl = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    op = _tuple(output_padding, nd, "output_padding")
    pads = resolve_pads(padding, nd)
    if any(s < 1 for s in st) or any(d < 1 for d in dl):
        raise ValueError(f"conv_transpose2d stride {st} and dilation {dl} must be positive")
    if any(o < 0 or (o >= s and o >= d) for o, s, d in zip(op, st, dl, strict=True)):
        raise TensorArgError(f"conv_transpose2d output_padding {op} must be smaller than stride {st} or dilation "
                             f"{dl}")
    n = x.shape[0]
    if any(s > 1 for s in st):
        sp = tuple(x.shape[2:])
        y = x.reshape((n, cin) + tuple(v for i in sp for v in (i, 1)))
        y = y.pad([(0, 0), (0, 0)] + [p for s in st for p in ((0, 0), (0, s - 1))])
        y = y.reshape((n, cin) + tuple(i * s for i, s in zip(sp, st, strict=True)))
        x = y.shrink([None, None] + [(0, max(0, i * s - (s - 1))) for i, s in zip(sp, st, strict=True)])
    cg = cin // groups
    w = weight.reshape((groups, cg, og) + k).transpose(1, 2).flip(*range(3, nd + 3)).reshape((groups * og, cg) + k)
    conv_pads = [p for kk, d, (b, a), o in zip(k, dl, pads, op, strict=True)
                 for p in ((d * (kk - 1) - b), (d * (kk - 1) - a + o))]
    grouped = [(conv_pads[2 * i], conv_pads[2 * i + 1]) for i in range(nd)]
    return conv2d(x, w, bias, groups, 1, dl, [v for pr in reversed(grouped) for v in pr])


def interpolate(x: Tensor, size: Any, mode: str, align_corners: bool) -> Tensor:
    """Resize the last len(size) dims (torch's F.interpolate without scale factors; tinygrad's signature).
    nearest: src = floor(dst * in/out); nearest-exact: floor((dst + 0.5) * in/out); linear (bilinear, trilinear
    per dim): src = (dst + 0.5) * in/out - 0.5 clamped at 0, or dst * (in-1)/(out-1) with align_corners, blending
    the two neighbours. The source indices and weights are computed on the host in float32 (float64 for float64
    input), as torch does; the result keeps the input dtype (uint8 blends with torch's 7-bit fixed-point weights,
    other ints truncate)."""
    modes = {"nearest": 0, "nearest-exact": 0, "linear": 0, "bilinear": 2, "trilinear": 3}
    if mode not in modes:
        raise ValueError(f"interpolate mode must be one of {', '.join(modes)}, got {mode!r}")
    if not isinstance(size, (tuple, list)) or not all(isinstance(v, int | np.integer) and v >= 0 for v in size):
        raise ValueError(f"interpolate size must be a tuple of non-negative ints, got {size!r}")
    size = tuple(int(v) for v in size)
    if not 0 < len(size) <= x.ndim or (modes[mode] and len(size) != modes[mode]):
        raise ValueError(f"interpolate size {tuple(size)} (mode {mode!r}) does not fit input shape {x.shape}")
    linear = mode in ("linear", "bilinear", "trilinear")
    if align_corners and not linear:
        raise ValueError(f"align_corners only applies to the linear modes, not {mode!r}")
    acc = np.float64 if x.dtype == dtypes.float64 else np.float32
    out = x
    for ax in reversed(range(x.ndim - len(size), x.ndim)):  # last axis first, as torch (matters for uint8 rounding)
        i, o = int(x.shape[ax]), int(size[ax - x.ndim + len(size)])
        if i == 0 and o > 0:
            raise ValueError(f"interpolate cannot resize an empty dim {ax} of shape {x.shape} to {o}")
        dst = np.arange(o, dtype=acc)
        if not linear:
            scale = acc(i) / acc(o) if o else acc(0)
            src = np.floor((dst + acc(0.5)) * scale if mode == "nearest-exact" else dst * scale)
            out = _take(out, ax, np.minimum(src.astype(np.int64), i - 1))
            continue
        if align_corners:
            src = dst * (acc(i - 1) / acc(o - 1) if o > 1 else acc(0))
        else:
            src = np.maximum((dst + acc(0.5)) * (acc(i) / acc(o) if o else acc(0)) - acc(0.5), acc(0))
        lo = np.minimum(np.floor(src).astype(np.int64), max(i - 1, 0))
        hi = np.minimum(lo + 1, max(i - 1, 0))
        lam = np.clip(src - lo, 0, 1).astype(acc)
        a, b = _take(out, ax, lo), _take(out, ax, hi)
        shape = [1] * x.ndim
        shape[ax] = o
        if out.dtype == dtypes.uint8:
            wi = type(x)(np.floor(lam * 128 + 0.5).astype(np.int32).reshape(shape), device=x.device)
            ai = a.cast(dtypes.int32)
            out = (ai + ((b.cast(dtypes.int32) - ai) * wi + 64) // 128).cast(dtypes.uint8)
        else:
            w = type(x)(lam.reshape(shape), device=x.device)
            if not out.dtype.is_float:
                a, b = a.cast(dtypes.float32), b.cast(dtypes.float32)
            out = a * (1 - w) + b * w
    return out.cast(x.dtype)


def _take(x: Tensor, ax: int, idx: np.ndarray) -> Tensor:
    """x indexed along ax by the host indices idx (in range): a one-hot pick, exact for every dtype."""
    n, m = int(x.shape[ax]), len(idx)
    if m == 0 or n == 0 or any(s == 0 for s in x.shape):
        shp = list(x.shape)
        shp[ax] = m
        return type(x).zeros(*shp, dtype=x.dtype, device=x.device)
    if m == n and bool((idx == np.arange(n)).all()):
        return x
    if m % n == 0 and bool((idx == np.repeat(np.arange(n), m // n)).all()):  # an integer upscale: movement only
        return x.repeat_interleave(m // n, ax)
    step = int(idx[1] - idx[0]) if m > 1 else 1
    if step > 0 and bool((idx == idx[0] + step * np.arange(m)).all()):  # an integer downscale: a strided slice
        return x[(slice(None),) * ax + (slice(int(idx[0]), int(idx[0]) + step * (m - 1) + 1, step),)]
    hot = (idx.reshape(m, 1) == np.arange(n).reshape(1, n)).reshape((1,) * ax + (m, n) + (1,) * (x.ndim - ax - 1))
    xe = x.unsqueeze(ax).expand(x.shape[:ax] + (m,) + x.shape[ax:])
    return pick(xe, type(x)(hot, device=x.device), (ax + 1,))


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
                                 is_causal: bool, enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T / sqrt(d) [masked]) v. A bool mask keeps True entries; a float mask is added. dropout_p only
    applies while Tensor.training (as tinygrad). enable_gqa: key and value heads (dim -3) are repeated
    (repeat_interleave) to the query's head count, which they must divide."""
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"attention needs (..., L, E) operands, got shapes {q.shape}, {k.shape}, {v.shape}")
    if is_causal and attn_mask is not None:
        raise TensorArgError("give either attn_mask or is_causal, not both")
    if enable_gqa:
        if q.ndim < 3 or k.ndim < 3 or v.ndim < 3:
            raise ValueError(f"enable_gqa needs (..., H, L, E) operands, got shapes {q.shape}, {k.shape}, {v.shape}")
        h = q.shape[-3]
        for t in (k, v):
            if t.shape[-3] == 0 or h % t.shape[-3]:
                raise TensorArgError(f"enable_gqa: query heads {h} (shape {q.shape}) must be a multiple of the "
                                     f"key/value heads {t.shape[-3]} (shape {t.shape})")
        k, v = k.repeat_interleave(h // k.shape[-3], -3), v.repeat_interleave(h // v.shape[-3], -3)
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
        raise ShapeError(f"cross_entropy target shape {y_shape} does not fit logits shape {x.shape}")
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


def binary_crossentropy_logits(x: Tensor, y: Tensor, reduction: str, pos_weight: Tensor | None) -> Tensor:
    """-(pos_weight * y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x))), each log(sigmoid(z)) as the overflow-free
    -softplus(-z) = -(relu(-z) + log(1 + exp(-|z|)))."""
    soft = (1 + (-x.abs()).exp()).log()
    pos, neg = (-x).relu() + soft, x.relu() + soft  # -log(sigmoid(x)), -log(1 - sigmoid(x))
    loss = (y * pos if pos_weight is None else pos_weight * y * pos) + (1 - y) * neg
    return reduce_loss(loss, reduction)


def nll_loss(x: Tensor, y: Tensor, weight: Tensor | None, ignore_index: int | None, reduction: str) -> Tensor:
    """-x[n, y[n], ...] * weight[y[n]] with classes on dim 1 ((C,) input: a 0-d target); targets equal to
    ignore_index count for nothing; "mean" divides by the total weight of the counted targets (torch)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not y.dtype.is_int:
        raise TypeError(f"nll_loss targets must be integer class indices, got {y.dtype!r}")
    ax = 1 if x.ndim >= 2 else 0
    if x.ndim == 0 or y.shape != x.shape[:ax] + x.shape[ax + 1:]:
        raise ValueError(f"nll_loss target shape {y.shape} does not fit input shape {x.shape} (classes on dim {ax})")
    c = x.shape[ax]
    if weight is not None and weight.shape != (c,):
        raise ValueError(f"nll_loss weight shape {weight.shape} must be ({c},)")
    classes = type(x).arange(c, device=x.device).reshape((c,) + (1,) * (x.ndim - ax - 1))
    hot = y.unsqueeze(ax) == classes
    picked = pick(x, hot, (ax,))
    w = hot.cast(dtypes.float32).sum(ax) if weight is None else pick(
        weight.reshape((c,) + (1,) * (x.ndim - ax - 1)).expand(hot.shape), hot, (ax,))
    if ignore_index is not None:
        w = (y != ignore_index).where(w, 0)
    w = w.cast(P.float_of(picked.dtype)) if not w.dtype.is_float else w
    loss = -picked * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return reduce_loss(loss, reduction)


def normalize(x: Tensor, p: float, d: int, eps: float) -> Tensor:
    """x / max(||x||_p along d, eps); p = 0 counts the nonzero entries. Integer input is normalized as floats."""
    x = x if x.dtype.is_float else x.cast(P.float_of(x.dtype))
    if p == 0:
        den = (x != 0).sum(d, keepdim=True).cast(P.float_of(x.dtype))
    elif p == 1:
        den = x.abs().sum(d, keepdim=True)
    elif p == 2:
        den = (x * x).sum(d, keepdim=True).sqrt()
    else:
        den = x.abs().pow(p).sum(d, keepdim=True).pow(1 / p)
    return x / den.maximum(eps)


class NNOps:
    """Tensor's linear algebra and neural-network ops."""

    __slots__ = ()

    def dot(self, w: Tensor) -> Tensor:
        return self.matmul(w)

    def matmul(self, w: Tensor, reverse: bool = False) -> Tensor:
        if not isinstance(w, type(self)):
            w = type(self)(w, device=self.device)
        return matmul(w, self) if reverse else matmul(self, w)

    def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """x @ weight + bias, weight of shape (in, out) as tinygrad (a 1-d weight scales elementwise)."""
        x = self * weight if weight.ndim == 1 else self.dot(weight)
        return x + bias if bias is not None else x

    def sequential(self, layers: Sequence[Any]) -> Tensor:
        x = self
        for f in layers:
            x = f(x)
        return x

    def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
               dilation: Any = 1, padding: Any = 0) -> Tensor:
        return conv2d(self, weight, bias, groups, stride, dilation, padding)

    def max_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        return max_pool(self, kernel_size, stride, dilation, padding, ceil_mode, return_indices)

    def avg_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
        return avg_pool(self, kernel_size, stride, dilation, padding, count_include_pad, ceil_mode)

    def max_unpool2d(self, indices: Tensor, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1,
                     padding: Any = 0, output_size: Any = None) -> Tensor:
        return max_unpool(self, indices, kernel_size, stride, dilation, padding, output_size)

    def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
                         dilation: Any = 1, padding: Any = 0, output_padding: Any = 0) -> Tensor:
        return conv_transpose(self, weight, bias, groups, stride, dilation, padding, output_padding)

    def interpolate(self, size: Any, mode: str = "linear", align_corners: bool = False) -> Tensor:
        return interpolate(self, size, mode, align_corners)

    def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None,  # noqa: N803
                 reduction: str = "mean") -> Tensor:
        return nll_loss(self, Y, weight, ignore_index, reduction)

    def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
        return normalize(self, p, dim, eps)

    def layernorm(self, axis: Any = -1, eps: float = 1e-5) -> Tensor:
        """(x - mean) / sqrt(var + eps) over axis (biased variance), no affine part (tinygrad)."""
        x = self._float()
        y = x - x.mean(axis, keepdim=True)
        return y * ((y * y).mean(axis, keepdim=True) + eps).rsqrt()

    def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                  axis: int | tuple[int, ...] = 1) -> Tensor:
        """Inference batchnorm: (x - mean) * weight * invstd + bias, the 1-d parameters along `axis`."""
        return batchnorm(self, weight, bias, mean, invstd, axis)

    def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                     dropout_p: float = 0.0, is_causal: bool = False,
                                     enable_gqa: bool = False) -> Tensor:
        return scaled_dot_product_attention(self, key, value, attn_mask, dropout_p, is_causal, enable_gqa)

    def cross_entropy(self, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:  # noqa: N803
        return cross_entropy(self, Y, reduction, label_smoothing)

    def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1,  # noqa: N803
                                        label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
        return sparse_categorical_crossentropy(self, Y, ignore_index, label_smoothing, reduction)

    def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:  # noqa: N803
        return reduce_loss(-(Y * self.log() + (1 - Y) * (1 - self).log()), reduction)

    def binary_crossentropy_logits(self, Y: Tensor, reduction: str = "mean",  # noqa: N803
                                   pos_weight: Tensor | None = None) -> Tensor:
        return binary_crossentropy_logits(self, Y, reduction, pos_weight)

    def dropout(self, p: float = 0.5) -> Tensor:
        """Identity unless Tensor.training (then a host-drawn keep mask, scaled by 1/(1-p))."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
        if not type(self).training or p == 0:
            return self
        keep = type(self).rand(*self.shape, device=self.device) >= p  # a random buffer: a TinyJit replay draws it again
        return keep.where(self, 0) * (1 / (1 - p))
