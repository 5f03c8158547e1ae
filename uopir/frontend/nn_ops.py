"""Linear algebra and neural-network ops of the Tensor, as decompositions into movement, elementwise and reduce.

- matmul: broadcast the operands to (..., n, m, k), multiply, reduce over k (numpy's rules for 1-d operands and
  batch broadcasting; ints keep their dtype as in numpy; half floats multiply and accumulate in float32, rounded
  once at the end, as numpy and torch).
- conv / pool: the padded input under every kernel offset, as (N, C, *out, K) patches made by movement ops alone
  (shape_ops.patches), that a multiply-and-sum (conv) or a max/mean (pool) reduces.

Each op's body is its method in the mixin `NNOps` (Tensor inherits it). The module functions are what several ops
share (the accumulation rules `sum_keep_dtype` and `sum_of_products`, `reduce_loss`, the checks and padding rules of
the convolutions and pools, `ceil_window_end` which the ONNX importer uses too); they work through the public
methods of the tensors they are given and build new ones with `type(x)`. Tensor is imported only for type checking
(tensor.py imports this module, never the other way round).
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.dialects import tensor as T
from uopir.frontend import dtype_promotion as P
from uopir.frontend.conv_transpose import conv_transpose_phases
from uopir.frontend.indexing import pick
from uopir.frontend.shape_ops import TensorArgError, patches
from uopir.frontend.shapes import broadcast_shape, norm_axis
from uopir.ir.diagnostics import ShapeError
from uopir.ir.dtype import dtypes

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor

# a padded conv input is copied into a buffer of its own when the conv does at least this many multiply-adds per
# element of that copy (a depthwise 3x3/2 conv: 2.25, less the border: 1.96 on a 28x28 input's 30x30 copy): the conv
# kernel then reads it without a validity gate per tap (one vector load per run of outputs instead of a gated load
# per lane). An activation fused before the pad (a SiLU) is realized unpadded without the copy, once per element
PAD_COPY_MIN_REUSE = 1.5
# ... but a strided depthwise conv whose window spans at most this many inputs per dim reads its input in place:
# kernel-peel cuts its one-wide gated border off an ungated interior that kernel-optimize tiles as on a copy, and the
# copy costs more than the border (one process, calls alternated, p10 of 150, llvm / c, in place vs copied: 96 x
# 112x112 3x3/2 277 vs 370 / 285 vs 315 us, 16 x 112x112 53 vs 62 / 56 vs 57, 72 x 56x56 62 vs 66 / 70 vs 66) ...
IN_PLACE_WINDOW = 3
# ... when its output rows are longer than this: a short row leaves the border's columns, loops of scalar taps, a
# large share (240 x 28x28 3x3/2, rows of 14: 67 vs 59 / 108 vs 96 us). At stride 1 the copy always wins, also over
# long rows (32 x 112x112 234 vs 213 / 258 vs 217; 144 x 56x56 338 vs 261 / 341 vs 256; 88 x 28x28 65 vs 44 / 109 vs
# 43; 480 x 14x14 126 vs 63). A 5x5 window's two-wide border is never worth it (240 x 28x28 5x5/1: 248 vs 113 + 59
# us, two cores)
IN_PLACE_MIN_ROW = 16
PAD_COPY_MIN_WORK = 1 << 16  # ... and at least this many in all (a tiny conv is not worth a second kernel)
# a conv whose output rows are shorter than twice this (or no multiple of half of it, or with whole blocks none of
# it: a row of 56 is 3.5 vectors, whose row tile computes the half vector's lanes twice or packs two rows' halves into
# one vector by a shuffle per tap) or read their input with a stride gets its weights copied in blocks of this many
# output channels (half as many when they do not divide the channels), the block innermost ((cout/B, cin, *kernel,
# B)): the conv kernel then reads a block of weights as one vector and multiplies it by one broadcast input per
# output column (kernel-optimize's channel tile)
CHANNEL_BLOCK = 16
# a conv with blocked weights whose output channels are no whole number of blocks but at least this many blocks
# (1000 classes: blocks of 8 would be half a vector each) computes up to a block's worth more with zero weights,
# stores the whole result and is read through a slice: a vector of CHANNEL_BLOCK channels per broadcast input instead
# of half of one (SqueezeNet's 512 -> 1000 1x1 conv over 13x13, its concat's gate cut off by kernel-peel: 1.1 ->
# 0.5-0.9 ms). Not for a few blocks: the slice realizes the conv apart from its bias and activation, which move into
# the next kernel (MobileNetV3's 24 -> 88 1x1 over 28x28 padded to 96: 0.05 -> 0.065 ms, and a depthwise conv after
# it that applies them per tap)
CHANNEL_PAD_MIN_BLOCKS = 32
# a 1x1 conv at stride 1 over a plane of at least this many pixels, no multiple of half a block, keeps its row tile
# over the whole plane (whole vectors of pixels and a column tail: kernel/coltail.py; stores contiguous) rather than
# blocks of channels (16 channels times a broadcast pixel each, stored to 16 planes through a transpose). One core,
# llvm, us blocked -> row tile: SqueezeNet's 512 -> 1000 over 13x13 908 -> 778, 64 -> 256 over 13x13 44 -> 38,
# 16 -> 64 over 55x55 76 -> 60, 256 -> 32 over 27x27 85 -> 74, 256 -> 256 over 15x15 153 -> 137; EfficientNet's
# 80 -> 480 over 14x14 111 -> 98, 480 -> 112 116 -> 100; smaller planes lose (9x9 61 -> 68, 11x11 81 -> 101,
# 7x7 38 -> 43)
POINTWISE_ROW_TILE_MIN = 160


def _copy_padding(xp: Tensor, macs: Any, depthwise_window: Sequence[int] = (), stride: Sequence[int] = (),
                  row: int = 0) -> bool:
    """Whether a conv's padded input `xp` (a pad of a tensor, here or by the ONNX importer) is worth its own buffer:
    a constant-shaped pad whose conv reuses each element PAD_COPY_MIN_REUSE times (see there), unless the conv is
    depthwise with a window (its extent per dim, dilation included) of at most IN_PLACE_WINDOW, a stride, and output
    rows (`row` columns) longer than IN_PLACE_MIN_ROW."""
    if xp.uop.op is not T.PAD or not all(isinstance(v, int) for v in (*xp.shape, macs)):
        return False
    if depthwise_window and max(depthwise_window) <= IN_PLACE_WINDOW and max(stride, default=1) > 1 and \
            row > IN_PLACE_MIN_ROW:
        return False
    return macs >= PAD_COPY_MIN_WORK and macs >= PAD_COPY_MIN_REUSE * math.prod(xp.shape)


def _block(cout: int) -> int:
    """The channel block of `cout` output channels: CHANNEL_BLOCK, else half of it (1000 classes: blocks of 8)."""
    return CHANNEL_BLOCK if cout % CHANNEL_BLOCK == 0 else CHANNEL_BLOCK // 2


def _block_channels(w: Tensor, groups: int, out: tuple[Any, ...], stride: tuple[int, ...], macs: Any) -> bool:
    """Whether a conv's weights are worth copying in blocks of CHANNEL_BLOCK output channels (see there): one group,
    whole blocks, output rows shorter than two blocks or no multiple of half a block (55: no vector tile fits) or a
    strided read, or rows no multiple of a block (56) when the blocks are whole vectors and the conv has a window
    (blocks of 8, half a vector per broadcast input, measured no faster than the row tile: MobileNetV3's 16 -> 72
    1x1 over 56x56; a 1x1 conv's row tile reads whole unshifted rows and transposes nothing to store: EfficientNet's
    24 -> 144 over 56x56 took 125 us that way, 217 us in blocks), and enough work (PAD_COPY_MIN_WORK). The row of a
    1x1 conv at stride 1 is its whole plane (contiguous in its input and output): 28x28 is 49 vectors; a plane of
    POINTWISE_ROW_TILE_MIN pixels or more keeps the row tile too (see there)."""
    if groups != 1 or not all(isinstance(v, int) for v in (*w.shape, *out, macs)) or w.shape[0] % _block(w.shape[0]):
        return False
    row = out[-1]
    if math.prod(w.shape[2:]) == 1 and max(stride) == 1:
        row = math.prod(out)
        if row % (CHANNEL_BLOCK // 2) and row >= POINTWISE_ROW_TILE_MIN:
            return False
    return (row < 2 * CHANNEL_BLOCK or row % (CHANNEL_BLOCK // 2) or stride[-1] > 1
            or row % CHANNEL_BLOCK and _block(w.shape[0]) == CHANNEL_BLOCK and math.prod(w.shape[2:]) > 1) \
        and macs >= PAD_COPY_MIN_WORK


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


def take_host(x: Tensor, ax: int, idx: np.ndarray) -> Tensor:
    """x indexed along ax by the host indices idx (in range): a one-hot pick (folded into one load per element),
    exact for every dtype."""
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
    # the ids as a buffer against a lazy arange (not a host-built mask): kernel-simplify folds the pick into a load
    ids = type(x)(idx.astype(np.int32 if n <= 2**31 else np.int64).reshape(m, 1), device=x.device)
    hot = (ids == type(x).arange(n, device=x.device).reshape(1, n))
    hot = hot.reshape((1,) * ax + (m, n) + (1,) * (x.ndim - ax - 1))
    xe = x.unsqueeze(ax).expand(x.shape[:ax] + (m,) + x.shape[ax:])
    return pick(xe, hot, (ax + 1,))


def reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    """A loss's `reduction` argument applied: its mean, its sum, or the loss per element ("none")."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


class NNOps:
    """Tensor's linear algebra and neural-network ops."""

    __slots__ = ()

    def dot(self, w: Tensor) -> Tensor:
        return self.matmul(w)

    def matmul(self, w: Tensor, reverse: bool = False) -> Tensor:
        """self @ w (w @ self with reverse), numpy's rules (see the module docstring)."""
        if not isinstance(w, type(self)):
            w = type(self)(w, device=self.device)
        x, w = (w, self) if reverse else (self, w)
        if x.ndim == 0 or w.ndim == 0:
            raise ShapeError(f"matmul needs operands of at least 1 dim, got shapes {x.shape} and {w.shape}")
        k1, k2 = x.shape[-1], w.shape[-2] if w.ndim >= 2 else w.shape[0]
        if k1 != k2:
            raise ShapeError(f"matmul inner dimensions differ: {x.shape} @ {w.shape} ({k1} != {k2})")
        try:
            broadcast_shape(x.shape[:-2], w.shape[:-2])
        except ValueError:
            raise ShapeError(f"matmul batch dimensions of {x.shape} and {w.shape} cannot be broadcast "
                             "together") from None
        d = P.promote(x.dtype, w.dtype)
        x, w = x.cast(d), w.cast(d)
        nd = min(x.ndim - 1, w.ndim - 1, 1)
        wk = min(w.ndim, 2)
        xx = x.reshape(x.shape[:-1] + (1,) * nd + x.shape[-1:])
        ww = w.reshape(w.shape[:-2] + (1,) * nd + w.shape[-wk:]).transpose(-1, -wk)
        return sum_of_products(xx, ww, -1)

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
        """Grouped, strided, dilated, padded convolution over the last weight.ndim-2 dims (cross-correlation)."""
        nd = _spatial_dims("conv", "(out, in/groups, *kernel)", self, weight)
        n, cin = self.shape[:2]
        cout, cg = weight.shape[:2]
        if groups < 1 or cin != groups * cg:
            raise ValueError(f"conv input channels do not match: input shape {self.shape} has {cin} channels, weight "
                             f"shape {weight.shape} with groups={groups} expects {groups * cg}")
        if cout % groups:
            raise ValueError(f"conv weight shape {weight.shape}: {cout} output channels are not divisible by "
                             f"groups={groups}")
        if bias is not None and bias.shape != (cout,):
            raise ValueError(f"conv bias shape {bias.shape} must be ({cout},) for weight shape {weight.shape}")
        k = weight.shape[2:]
        st, dl = _positive(stride, nd, "conv stride"), _positive(dilation, nd, "conv dilation")
        d = P.promote(self.dtype, weight.dtype)
        xp = self.cast(d).pad([(0, 0), (0, 0)] + resolve_pads(padding, nd))
        pt = patches(xp, k, st, dl)  # (N, Cin, *out, K)
        out = pt.shape[2:-1]
        kk = math.prod(k)
        og = cout // groups
        span = tuple((kd - 1) * dd + 1 for kd, dd in zip(k, dl, strict=True)) if cg == 1 and og == 1 else ()
        if _copy_padding(xp, math.prod((n, cout, *out, cg, kk)), span, st, out[-1]):
            pt = patches(xp.contiguous(), k, st, dl)
        xr = pt.reshape((n, groups, 1, cg) + out + (kk,))
        wd = weight.cast(d)
        padc = 0  # zero output channels added to make whole blocks (see CHANNEL_PAD_MIN_BLOCKS)
        if _block_channels(wd, groups, out, st, math.prod((n, cout, *out, cg, kk))):
            b = _block(cout)
            if b < CHANNEL_BLOCK and cout >= CHANNEL_PAD_MIN_BLOCKS * CHANNEL_BLOCK:
                padc, b = CHANNEL_BLOCK - cout % CHANNEL_BLOCK, CHANNEL_BLOCK
                wd = wd.pad([(0, padc)] + [(0, 0)] * (wd.ndim - 1))
            cb = cout + padc
            wd = wd.reshape((cb // b, b, cg * kk)).permute(0, 2, 1).contiguous().permute(0, 2, 1).reshape(
                (cb,) + wd.shape[1:])
        wr = wd.reshape((1, groups, og + padc, cg) + (1,) * nd + (kk,))
        ret = sum_of_products(xr, wr, (3, xr.ndim - 1)).reshape((n, cout + padc) + out)
        if padc:  # stored whole, so that the conv kernel's channel range is blocks of whole vectors; read as a slice
            ret = ret.contiguous()[:, :cout]
        return ret + bias.reshape((1, cout) + (1,) * nd) if bias is not None else ret

    def max_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Max over each window (padding never wins). return_indices: the flat index into the input's spatial dims of
        the first maximum of each window (the last NaN where the window has one, as torch), int32 as tinygrad."""
        k, st, dl, pads = _pool_args(self, kernel_size, stride, dilation, padding)
        nd = len(k)
        sp = tuple(self.shape[-nd:])
        if ceil_mode:
            pads = _ceil_pads(sp, k, st, dl, pads)
        fill = float("-inf") if self.dtype.is_float else self.dtype.min
        full = [(0, 0)] * (self.ndim - nd) + pads
        pt = patches(self.pad(full, value=fill), k, st, dl)
        mx = pt.max(-1)
        if not return_indices:
            return mx
        n = math.prod(sp)
        flat = type(self).arange(n, device=self.device).reshape(sp).pad(pads, value=n)
        ip = patches(flat, k, st, dl)
        first = (pt == mx.unsqueeze(-1)).where(ip, n).min(-1)
        if self.dtype.is_float:
            last_nan = pt.isnan().where(ip, -1).max(-1)
            first = (last_nan >= 0).where(last_nan, first)
        return mx, first.cast(dtypes.int32)

    def avg_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
        """Mean over each window. The divisor counts the window's positions inside the input and, with
        count_include_pad, inside the padding; never those that ceil_mode adds past the padding (torch)."""
        k, st, dl, pads = _pool_args(self, kernel_size, stride, dilation, padding)
        nd = len(k)
        sp = tuple(self.shape[-nd:])
        cpads = _ceil_pads(sp, k, st, dl, pads) if ceil_mode else pads
        pt = patches(self.pad([(0, 0)] * (self.ndim - nd) + cpads), k, st, dl)
        padded = any(a or b for a, b in pads)
        if cpads == pads and (count_include_pad or not padded):
            return pt.mean(-1)
        ones = type(self).ones(*sp, dtype=dtypes.float32, device=self.device)
        if count_include_pad:
            ones = ones.pad(pads, value=1.0)
            extra = [(0, c[1] - p[1]) for c, p in zip(cpads, pads, strict=True)]
        else:
            extra = cpads
        count = patches(ones.pad(extra), k, st, dl).sum(-1)
        return pt.cast(P.float_of(pt.dtype)).sum(-1) / count

    def max_unpool2d(self, indices: Tensor, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1,
                     padding: Any = 0, output_size: Any = None) -> Tensor:
        """out[n, c, flat] = x[n, c, p] (x = self) where indices[n, c, p] == flat (0 elsewhere); several windows
        pointing at one input position carry its one value (torch assigns, it does not add)."""
        if self.ndim < 3:
            raise ValueError(f"max_unpool2d needs (N, C, *spatial) input, got shape {self.shape}")
        if indices.shape != self.shape:
            raise ValueError(f"max_unpool2d indices shape {indices.shape} must equal the input shape {self.shape}")
        if not indices.dtype.is_int:
            raise TypeError(f"max_unpool2d indices must be integers, got {indices.dtype!r}")
        bs, c, *sp = self.shape
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
        hit = indices.reshape(bs, c, 1, pos) == type(self).arange(m, device=self.device).reshape(1, 1, m, 1)
        vals = self.reshape(bs, c, 1, pos)
        low = float("-inf") if self.dtype.is_float else (False if self.dtype.is_bool else self.dtype.min)
        got = hit.where(vals, low).max(3)
        return hit.any(3).where(got, False if self.dtype.is_bool else 0).reshape((bs, c) + out)

    def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
                         dilation: Any = 1, padding: Any = 0, output_padding: Any = 0) -> Tensor:
        """The gradient of conv2d with respect to its input, as a conv2d: the input dilated by `stride` (zeros in
        between), the weight (in, out/groups, *k) turned into (out, in/groups, *k) and flipped, and the padding
        dilation * (k - 1) - padding on each side (+ output_padding at the end)."""
        nd = _spatial_dims("conv_transpose2d", "(in, out/groups, *kernel)", self, weight)
        cin, og = weight.shape[:2]
        if groups < 1 or self.shape[1] != cin or cin % groups:
            raise ValueError(f"conv_transpose2d: input shape {self.shape} has {self.shape[1]} channels, weight shape "
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
        if any(s > 1 for s in st) and all(d == 1 for d in dl):  # one conv over the phases, no zero-stuffing
            return conv_transpose_phases(self, weight, bias, groups, st, pads, op)
        n = self.shape[0]
        x = self
        if any(s > 1 for s in st):
            sp = tuple(self.shape[2:])
            y = self.reshape((n, cin) + tuple(v for i in sp for v in (i, 1)))
            y = y.pad([(0, 0), (0, 0)] + [p for s in st for p in ((0, 0), (0, s - 1))])
            y = y.reshape((n, cin) + tuple(i * s for i, s in zip(sp, st, strict=True)))
            x = y.shrink([None, None] + [(0, max(0, i * s - (s - 1))) for i, s in zip(sp, st, strict=True)])
        cg = cin // groups
        w = weight.reshape((groups, cg, og) + k).transpose(1, 2).flip(*range(3, nd + 3)).reshape((groups * og, cg) + k)
        conv_pads = [p for kk, d, (b, a), o in zip(k, dl, pads, op, strict=True)
                     for p in ((d * (kk - 1) - b), (d * (kk - 1) - a + o))]
        grouped = [(conv_pads[2 * i], conv_pads[2 * i + 1]) for i in range(nd)]
        return x.conv2d(w, bias, groups, 1, dl, [v for pr in reversed(grouped) for v in pr])

    def interpolate(self, size: Any, mode: str = "linear", align_corners: bool = False) -> Tensor:
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
        if not 0 < len(size) <= self.ndim or (modes[mode] and len(size) != modes[mode]):
            raise ValueError(f"interpolate size {tuple(size)} (mode {mode!r}) does not fit input shape {self.shape}")
        linear = mode in ("linear", "bilinear", "trilinear")
        if align_corners and not linear:
            raise ValueError(f"align_corners only applies to the linear modes, not {mode!r}")
        acc = np.float64 if self.dtype == dtypes.float64 else np.float32
        out = self
        # last axis first, as torch (matters for uint8 rounding)
        for ax in reversed(range(self.ndim - len(size), self.ndim)):
            i, o = int(self.shape[ax]), int(size[ax - self.ndim + len(size)])
            if i == 0 and o > 0:
                raise ValueError(f"interpolate cannot resize an empty dim {ax} of shape {self.shape} to {o}")
            dst = np.arange(o, dtype=acc)
            if not linear:
                scale = acc(i) / acc(o) if o else acc(0)
                src = np.floor((dst + acc(0.5)) * scale if mode == "nearest-exact" else dst * scale)
                out = take_host(out, ax, np.minimum(src.astype(np.int64), i - 1))
                continue
            if align_corners:
                src = dst * (acc(i - 1) / acc(o - 1) if o > 1 else acc(0))
            else:
                src = np.maximum((dst + acc(0.5)) * (acc(i) / acc(o) if o else acc(0)) - acc(0.5), acc(0))
            lo = np.minimum(np.floor(src).astype(np.int64), max(i - 1, 0))
            hi = np.minimum(lo + 1, max(i - 1, 0))
            lam = np.clip(src - lo, 0, 1).astype(acc)
            a, b = take_host(out, ax, lo), take_host(out, ax, hi)
            shape = [1] * self.ndim
            shape[ax] = o
            if out.dtype == dtypes.uint8:
                wi = type(self)(np.floor(lam * 128 + 0.5).astype(np.int32).reshape(shape), device=self.device)
                ai = a.cast(dtypes.int32)
                out = (ai + ((b.cast(dtypes.int32) - ai) * wi + 64) // 128).cast(dtypes.uint8)
            else:
                w = type(self)(lam.reshape(shape), device=self.device)
                if not out.dtype.is_float:
                    a, b = a.cast(dtypes.float32), b.cast(dtypes.float32)
                out = a * (1 - w) + b * w
        return out.cast(self.dtype)

    def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None,  # noqa: N803
                 reduction: str = "mean") -> Tensor:
        """-x[n, Y[n], ...] * weight[Y[n]] (x = self) with classes on dim 1 ((C,) input: a 0-d target); targets equal to
        ignore_index count for nothing; "mean" divides by the total weight of the counted targets (torch)."""
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        if not Y.dtype.is_int:
            raise TypeError(f"nll_loss targets must be integer class indices, got {Y.dtype!r}")
        ax = 1 if self.ndim >= 2 else 0
        if self.ndim == 0 or Y.shape != self.shape[:ax] + self.shape[ax + 1:]:
            raise ValueError(f"nll_loss target shape {Y.shape} does not fit input shape {self.shape} (classes on dim "
                             f"{ax})")
        c = self.shape[ax]
        if weight is not None and weight.shape != (c,):
            raise ValueError(f"nll_loss weight shape {weight.shape} must be ({c},)")
        classes = type(self).arange(c, device=self.device).reshape((c,) + (1,) * (self.ndim - ax - 1))
        hot = Y.unsqueeze(ax) == classes
        picked = pick(self, hot, (ax,))
        w = hot.cast(dtypes.float32).sum(ax) if weight is None else pick(
            weight.reshape((c,) + (1,) * (self.ndim - ax - 1)).expand(hot.shape), hot, (ax,))
        if ignore_index is not None:
            w = (Y != ignore_index).where(w, 0)
        w = w.cast(P.float_of(picked.dtype)) if not w.dtype.is_float else w
        loss = -picked * w
        if reduction == "mean":
            return loss.sum() / w.sum()
        return reduce_loss(loss, reduction)

    def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
        """x / max(||x||_p along dim, eps); p = 0 counts the nonzero entries. Integer input is normalized as floats."""
        x = self if self.dtype.is_float else self.cast(P.float_of(self.dtype))
        if p == 0:
            den = (x != 0).sum(dim, keepdim=True).cast(P.float_of(x.dtype))
        elif p == 1:
            den = x.abs().sum(dim, keepdim=True)
        elif p == 2:
            den = (x * x).sum(dim, keepdim=True).sqrt()
        else:
            den = x.abs().pow(p).sum(dim, keepdim=True).pow(1 / p)
        return x / den.maximum(eps)

    def layernorm(self, axis: Any = -1, eps: float = 1e-5) -> Tensor:
        """(x - mean) / sqrt(var + eps) over axis (biased variance), no affine part (tinygrad)."""
        x = self._float()
        y = x - x.mean(axis, keepdim=True)
        return y * ((y * y).mean(axis, keepdim=True) + eps).rsqrt()

    def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                  axis: int | tuple[int, ...] = 1) -> Tensor:
        """Inference batchnorm: (x - mean) * weight * invstd + bias, the parameters laid along `axis` (one dimension
        per axis, as tinygrad); an invstd of another rank broadcasts as it is."""
        axes = tuple(norm_axis(a, self.ndim, self.shape) for a in ((axis,) if isinstance(axis, int) else axis))
        shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
        y = self - mean.reshape(shape)
        if weight is not None:
            y = y * weight.reshape(shape)
        y = y * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
        return y + bias.reshape(shape) if bias is not None else y

    def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                     dropout_p: float = 0.0, is_causal: bool = False,
                                     enable_gqa: bool = False) -> Tensor:
        """softmax(q k^T / sqrt(d) [masked]) v for q = self, k = key, v = value. A bool mask keeps True entries; a float
        mask is added. dropout_p only applies while Tensor.training (as tinygrad). enable_gqa: key and value heads
        (dim -3) are repeated (repeat_interleave) to the query's head count, which they must divide."""
        if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
            raise ValueError(f"attention needs (..., L, E) operands, got shapes {self.shape}, {key.shape}, "
                             f"{value.shape}")
        if is_causal and attn_mask is not None:
            raise TensorArgError("give either attn_mask or is_causal, not both")
        if enable_gqa:
            if self.ndim < 3 or key.ndim < 3 or value.ndim < 3:
                raise ValueError(f"enable_gqa needs (..., H, L, E) operands, got shapes {self.shape}, {key.shape}, "
                                 f"{value.shape}")
            h = self.shape[-3]
            for t in (key, value):
                if t.shape[-3] == 0 or h % t.shape[-3]:
                    raise TensorArgError(f"enable_gqa: query heads {h} (shape {self.shape}) must be a multiple of the "
                                         f"key/value heads {t.shape[-3]} (shape {t.shape})")
            key, value = (key.repeat_interleave(h // key.shape[-3], -3),
                          value.repeat_interleave(h // value.shape[-3], -3))
        qk = self.matmul(key.transpose(-2, -1)) * (1.0 / math.sqrt(self.shape[-1]))
        if is_causal:
            attn_mask = type(self).ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=self.device).tril()
        if attn_mask is not None:
            qk = attn_mask.where(qk, float("-inf")) if attn_mask.dtype.is_bool else qk + attn_mask
        return qk.softmax(-1).dropout(dropout_p).matmul(value)

    def cross_entropy(self, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:  # noqa: N803
        """Classes on axis 1 (axis 0 for 1-d logits); Y holds class indices (one dim fewer) or probabilities."""
        ax = 1 if self.ndim >= 2 else 0
        c = self.shape[ax]
        y_shape = Y.shape
        if Y.dtype.is_int and Y.ndim == self.ndim - 1 and Y.shape == self.shape[:ax] + self.shape[ax + 1:]:
            Y = Y.one_hot(c)
            Y = Y.permute(tuple(range(ax)) + (Y.ndim - 1,) + tuple(range(ax, Y.ndim - 1)))
        if Y.shape != self.shape:
            raise ShapeError(f"cross_entropy target shape {y_shape} does not fit logits shape {self.shape}")
        Y = Y.cast(P.float_of(Y.dtype)) * (1 - label_smoothing) + label_smoothing / c
        return reduce_loss(-(self.log_softmax(ax) * Y).sum(ax), reduction)

    def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1,  # noqa: N803
                                        label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
        """Classes on the last axis, Y integer labels; entries equal to ignore_index count for nothing (tinygrad)."""
        if Y.shape != self.shape[:-1]:
            raise ValueError(f"labels shape {Y.shape} must be logits shape {self.shape} without its last dim")
        logp = self.log_softmax(-1)
        keep = Y != ignore_index
        nll = -(logp * Y.one_hot(self.shape[-1])).sum(-1)
        loss = keep.where((1 - label_smoothing) * nll - label_smoothing * logp.mean(-1), 0.0)
        if reduction == "mean":
            return loss.sum() / keep.sum().maximum(1).cast(loss.dtype)
        return reduce_loss(loss, reduction)

    def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:  # noqa: N803
        return reduce_loss(-(Y * self.log() + (1 - Y) * (1 - self).log()), reduction)

    def binary_crossentropy_logits(self, Y: Tensor, reduction: str = "mean",  # noqa: N803
                                   pos_weight: Tensor | None = None) -> Tensor:
        """-(pos_weight * Y * log(sigmoid(x)) + (1 - Y) * log(1 - sigmoid(x))) for x = self, each log(sigmoid(z)) as the
        overflow-free -softplus(-z) = -(relu(-z) + log(1 + exp(-|z|)))."""
        soft = (1 + (-self.abs()).exp()).log()
        pos, neg = (-self).relu() + soft, self.relu() + soft  # -log(sigmoid(x)), -log(1 - sigmoid(x))
        loss = (Y * pos if pos_weight is None else pos_weight * Y * pos) + (1 - Y) * neg
        return reduce_loss(loss, reduction)

    def dropout(self, p: float = 0.5) -> Tensor:
        """Identity unless Tensor.training (then a host-drawn keep mask, scaled by 1/(1-p))."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
        if not type(self).training or p == 0:
            return self
        keep = type(self).rand(*self.shape, device=self.device) >= p  # a random buffer: a TinyJit replay draws it again
        return keep.where(self, 0) * (1 / (1 - p))
