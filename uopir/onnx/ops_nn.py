"""ONNX neural-network operators on the Tensor API: convolutions, pools, normalizations, Gemm/MatMul/Einsum,
Dropout and losses (Attention is in ops_attention.py).

Conv and pool padding: ONNX gives pads as (begin..., end...) per spatial dim, or auto_pad (SAME_UPPER puts the odd
pixel at the end, SAME_LOWER at the start); the input is padded explicitly (zeros for conv, -inf for MaxPool) and
the Tensor op runs unpadded, except AveragePool whose divisor needs to know the padding.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from uopir.dialects import core
from uopir.dialects import tensor as T
from uopir.frontend.nn_ops import ceil_window_end
from uopir.frontend.shape_ops import patches
from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.onnx.ops_shape import axis_of, opt, req, scalar
from uopir.onnx.registry import Node, const_ints, onnx_op


def _float(x: Tensor) -> Tensor:
    return x if x.dtype.is_float else x.cast(dtypes.float32)


def _compute(x: Tensor) -> Tensor:
    """x in the dtype normalizations compute in (half floats in float32)."""
    return x.cast(dtypes.float32) if x.dtype in (dtypes.float16, dtypes.bfloat16) else _float(x)


def float_t(t: Tensor) -> Tensor:
    """t as float32 unless it is float32 or float64 (the dtype GridSample, Col2Im, DeformConv and RoiAlign
    compute in)."""
    return t if t.dtype in (dtypes.float32, dtypes.float64) else t.cast(dtypes.float32)


# ---- windows ---------------------------------------------------------------------------------------------------------
def _window(node: Node, x: Tensor, kernel: Sequence[int]) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """(strides, dilations, per-dim (begin, end) pads) of a conv/pool node over x's spatial dims."""
    nd = len(kernel)
    sp = x.shape[2:]
    if len(sp) != nd:
        raise node.error(f"input shape {x.shape} needs {nd} spatial dims for kernel {tuple(kernel)}")
    st = list(node.attr("strides", [1] * nd))
    dl = list(node.attr("dilations", [1] * nd))
    if len(st) != nd or len(dl) != nd:
        raise node.error(f"strides {st} and dilations {dl} need {nd} entries")
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for i, k, s, d in zip(sp, kernel, st, dl, strict=True):
            out = -(-i // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
            small = total // 2
            pads.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        return st, dl, pads
    if auto == "VALID":
        return st, dl, [(0, 0)] * nd
    if auto != "NOTSET":
        raise node.error(f"unknown auto_pad {auto!r}")
    p = list(node.attr("pads", [0] * (2 * nd)))
    if len(p) != 2 * nd:
        raise node.error(f"pads {p} need {2 * nd} entries")
    return st, dl, [(p[i], p[i + nd]) for i in range(nd)]


def _flat(pairs: Sequence[tuple[int, int]]) -> list[int]:
    """Per-dim (begin, end) pairs as torch's flat padding, last dim first."""
    return [v for b, a in reversed(pairs) for v in (b, a)]


def _ceil_extra(sp: Sequence[int], k: Sequence[int], st: Sequence[int], dl: Sequence[int],
                pads: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Pads grown at the end so that the floor window count is the ceil count (a last window starting past the
    input and its begin padding dropped, as the spec says since opset 19 and onnxruntime does)."""
    return [(b, max(a, ceil_window_end(i, kk, s, d, b, a)))
            for i, kk, s, d, (b, a) in zip(sp, k, st, dl, pads, strict=True)]


# ---- convolution -----------------------------------------------------------------------------------------------------
@onnx_op("Conv")
def conv(node: Node, inputs: list) -> Tensor:
    x, w, b = req(node, inputs, 0), req(node, inputs, 1, "W"), opt(inputs, 2)
    k = list(node.attr("kernel_shape", w.shape[2:]))
    st, dl, pads = _window(node, x, k)
    xp = x.pad([(0, 0), (0, 0)] + pads) if any(p != (0, 0) for p in pads) else x
    return xp.conv2d(w, b, node.attr("group", 1), st, dl, 0)


@onnx_op("ConvInteger", since=10)
def conv_integer(node: Node, inputs: list) -> Tensor:
    x, w = req(node, inputs, 0), req(node, inputs, 1, "w")
    xz, wz = opt(inputs, 2), opt(inputs, 3)
    xi = x.cast(dtypes.int32) - (xz.cast(dtypes.int32) if xz is not None else 0)
    wi = w.cast(dtypes.int32)
    if wz is not None:
        wi = wi - wz.cast(dtypes.int32).reshape((-1,) + (1,) * (w.ndim - 1) if wz.numel() > 1 else ())
    k = list(node.attr("kernel_shape", w.shape[2:]))
    st, dl, pads = _window(node, x, k)
    xp = xi.pad([(0, 0), (0, 0)] + pads) if any(p != (0, 0) for p in pads) else xi
    return xp.conv2d(wi, None, node.attr("group", 1), st, dl, 0)


@onnx_op("ConvTranspose")
def conv_transpose(node: Node, inputs: list) -> Tensor:
    x, w, b = req(node, inputs, 0), req(node, inputs, 1, "W"), opt(inputs, 2)
    k = list(node.attr("kernel_shape", w.shape[2:]))
    nd = len(k)
    sp = x.shape[2:]
    st = list(node.attr("strides", [1] * nd))
    dl = list(node.attr("dilations", [1] * nd))
    op = list(node.attr("output_padding", [0] * nd))
    auto = node.attr("auto_pad", "NOTSET")
    full = [s * (i - 1) + o + (kk - 1) * d + 1 for i, s, o, kk, d in zip(sp, st, op, k, dl, strict=True)]
    if node.has("output_shape"):
        want = list(node.attr("output_shape"))[-nd:]
        pads = []
        for f, o in zip(full, want, strict=True):
            total = f - o
            pads.append((total // 2, total - total // 2) if auto == "SAME_UPPER" else (total - total // 2, total // 2))
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for i, s, f in zip(sp, st, full, strict=True):
            total = max(0, f - i * s)
            pads.append((total // 2, total - total // 2) if auto == "SAME_UPPER" else (total - total // 2, total // 2))
    elif auto == "VALID" or not node.has("pads"):
        pads = [(0, 0)] * nd
    else:
        p = list(node.attr("pads"))
        pads = [(p[i], p[i + nd]) for i in range(nd)]
    # the unpadded transposed conv (output_padding 0), then crop `pads` and add output_padding zeros at the end
    y = x.conv_transpose2d(w, None, node.attr("group", 1), st, dl, 0, 0)
    cut = [(0, 0), (0, 0)] + [(-pb, o - pe) for (pb, pe), o in zip(pads, op, strict=True)]
    if any(c != (0, 0) for c in cut):
        y = y.pad(cut)
    return y + b.reshape((1, -1) + (1,) * nd) if b is not None else y


@onnx_op("Col2Im", since=18)
def col2im(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    image = const_ints(node, req(node, inputs, 1, "image_shape"), "image_shape")
    block = const_ints(node, req(node, inputs, 2, "block_shape"), "block_shape")
    nd = len(image)
    dl = list(node.attr("dilations", [1] * nd))
    st = list(node.attr("strides", [1] * nd))
    pads = list(node.attr("pads", [0] * (2 * nd)))
    n, ck, L = x.shape
    k = math.prod(block)
    if ck % k:
        raise node.error(f"input dim 1 ({ck}) is not a multiple of the block size {k}")
    c = ck // k
    counts = [(image[i] + pads[i] + pads[i + nd] - dl[i] * (block[i] - 1) - 1) // st[i] + 1 for i in range(nd)]
    if math.prod(counts) != L:
        raise node.error(f"input has {L} blocks, the image shape and attributes give {math.prod(counts)}")
    m = np.zeros((k, L, math.prod(image)), np.float32)
    for bi, boff in enumerate(itertools.product(*(range(b) for b in block))):
        for li, lpos in enumerate(itertools.product(*(range(cn) for cn in counts))):
            pos = [lpos[i] * st[i] + boff[i] * dl[i] - pads[i] for i in range(nd)]
            if all(0 <= pos[i] < image[i] for i in range(nd)):
                m[bi, li, int(np.ravel_multi_index(pos, image))] = 1.0
    mt = Tensor(m.reshape(k * L, -1), device=x.device)
    y = float_t(x).reshape(n, c, k * L) @ mt
    return y.reshape((n, c) + tuple(image)).cast(x.dtype)


@onnx_op("DeformConv", since=19)
def deform_conv(node: Node, inputs: list) -> Tensor:
    """Each kernel tap reads x at its offset position by bilinear interpolation (0 outside), scaled by the mask;
    the taps' weights form a (positions, H*W) matrix per (batch, offset group, tap) applied by a matmul."""
    x, w, off = req(node, inputs, 0), req(node, inputs, 1, "W"), req(node, inputs, 2, "offset")
    b, mask = opt(inputs, 3), opt(inputs, 4)
    if x.ndim != 4:
        raise node.error(f"only 2-D DeformConv is supported, got input shape {x.shape}")
    n, ic, ih, iw = x.shape
    oc = w.shape[0]
    kh, kw = node.attr("kernel_shape", list(w.shape[2:]))
    sth, stw = node.attr("strides", [1, 1])
    dh, dw = node.attr("dilations", [1, 1])
    pads = node.attr("pads", [0, 0, 0, 0])
    group, og = node.attr("group", 1), node.attr("offset_group", 1)
    oh, ow = off.shape[2:]
    k, p, hw = kh * kw, oh * ow, ih * iw
    offs = float_t(off).reshape(n, og, k, 2, p)
    base_h = (np.arange(kh) * dh).repeat(kw).reshape(1, 1, k, 1) + (np.arange(oh) * sth - pads[0]).repeat(ow).reshape(
        1, 1, 1, p)
    base_w = np.tile(np.arange(kw) * dw, kh).reshape(1, 1, k, 1) + np.tile(np.arange(ow) * stw - pads[1], oh).reshape(
        1, 1, 1, p)
    ph = offs[:, :, :, 0, :] + Tensor(base_h.astype(np.float32), device=x.device)  # (N, og, K, P)
    pw = offs[:, :, :, 1, :] + Tensor(base_w.astype(np.float32), device=x.device)
    h0, w0 = ph.floor(), pw.floor()
    th, tw = ph - h0, pw - w0
    flat = Tensor.arange(hw, dtype=dtypes.int64, device=x.device).reshape(1, 1, 1, 1, hw)
    wts: Tensor | None = None
    for hh, wh in ((h0, 1 - th), (h0 + 1, th)):
        for ww, wwt in ((w0, 1 - tw), (w0 + 1, tw)):
            ok = (hh >= 0) & (hh <= ih - 1) & (ww >= 0) & (ww <= iw - 1)
            idx = hh.cast(dtypes.int64) * iw + ww.cast(dtypes.int64)
            tap = (idx.unsqueeze(-1) == flat).where(ok.where(wh * wwt, 0.0).unsqueeze(-1), 0.0)
            wts = tap if wts is None else wts + tap
    if mask is not None:
        wts = wts * float_t(mask).reshape(n, og, k, p, 1)  # type: ignore[operator]
    xs = float_t(x).reshape(n, og, 1, ic // og, hw)  # (N, og, 1, C/og, HW)
    samp = xs @ wts.reshape(n, og, k, p, hw).transpose(-1, -2)  # type: ignore[union-attr]  # (N, og, K, C/og, P)
    samp = samp.permute(0, 1, 3, 2, 4).reshape(n, group, ic // group, k, p)
    wr = float_t(w).reshape(1, group, oc // group, ic // group, k, 1)
    y = (samp.unsqueeze(2) * wr).sum((3, 4)).reshape(n, oc, oh, ow)
    if b is not None:
        y = y + float_t(b).reshape(1, oc, 1, 1)
    return y.cast(x.dtype)


# ---- pools -----------------------------------------------------------------------------------------------------------
def _pool_setup(node: Node, x: Tensor) -> tuple[list[int], list[int], list[int], list[tuple[int, int]]]:
    k = list(node.attr("kernel_shape"))
    st, dl, pads = _window(node, x, k)
    if node.attr("ceil_mode", 0):
        pads = _ceil_extra(x.shape[2:], k, st, dl, pads)
    return k, st, dl, pads


@onnx_op("MaxPool")
def max_pool(node: Node, inputs: list) -> list[Tensor]:
    x = req(node, inputs, 0)
    k, st, dl, pads = _pool_setup(node, x)
    want_idx = node.n_outputs > 1
    r = x.max_pool2d(k, st, dl, _flat(pads), False, want_idx)
    if not want_idx:
        return [r]
    y, idx = r
    sp = x.shape[2:]
    m = math.prod(sp)
    idx = idx.cast(dtypes.int64)
    if node.attr("storage_order", 0):
        coords, rem = [], idx
        for s in reversed(sp):
            coords.append(rem % s)
            rem = rem // s
        coords.reverse()
        col, mul = 0, 1
        for c, s in zip(coords, sp, strict=True):
            col, mul = col + c * mul, mul * s
        idx = col
    n, c = x.shape[:2]
    base = (Tensor.arange(n * c, dtype=dtypes.int64, device=x.device) * m).reshape((n, c) + (1,) * len(sp))
    return [y, idx + base]


@onnx_op("AveragePool")
def average_pool(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    k = list(node.attr("kernel_shape"))
    st, dl, pads = _window(node, x, k)
    include = bool(node.attr("count_include_pad", 0)) if node.opset >= 7 else False
    ceil = bool(node.attr("ceil_mode", 0))
    if all(b == a for b, a in pads):
        return x.avg_pool2d(k, st, dl, [b for b, _ in pads], ceil, include)
    # asymmetric pads (auto_pad SAME): padded window sums over the counted positions
    sp = x.shape[2:]
    cp = _ceil_extra(sp, k, st, dl, pads) if ceil else pads
    xs = patches(_float(x).pad([(0, 0), (0, 0)] + cp), tuple(k), tuple(st), tuple(dl)).sum(-1)
    ones = Tensor.ones(*sp, dtype=dtypes.float32, device=x.device)
    ones = ones.pad(pads, value=1.0) if include else ones.pad(pads)
    ones = ones.pad([(0, c[1] - p[1]) for c, p in zip(cp, pads, strict=True)])
    cnt = patches(ones, tuple(k), tuple(st), tuple(dl)).sum(-1)
    return (xs / cnt).cast(x.dtype)


@onnx_op("LpPool")
def lp_pool(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    k, st, dl, pads = _pool_setup(node, x)
    p = float(node.attr("p", 2))
    xp = _float(x).abs().pad([(0, 0), (0, 0)] + pads)
    s = patches(xp ** p if p != 2 else xp * xp, tuple(k), tuple(st), tuple(dl)).sum(-1)
    return (s ** (1 / p) if p != 2 else s.sqrt()).cast(x.dtype)


def _spatial(x: Tensor) -> tuple[int, ...]:
    return tuple(range(2, x.ndim))


@onnx_op("GlobalAveragePool")
def global_average_pool(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    return x.mean(_spatial(x), keepdim=True).cast(x.dtype)


@onnx_op("GlobalMaxPool")
def global_max_pool(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    return x.max(_spatial(x), keepdim=True)


@onnx_op("GlobalLpPool")
def global_lp_pool(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    p = float(node.attr("p", 2))
    return (_float(x).abs() ** p).sum(_spatial(x), keepdim=True).pow(1 / p).cast(x.dtype)


@onnx_op("MaxUnpool", since=9)
def max_unpool(node: Node, inputs: list) -> Tensor:
    x, idx = req(node, inputs, 0), req(node, inputs, 1, "I")
    k = list(node.attr("kernel_shape"))
    nd = len(k)
    st = list(node.attr("strides", [1] * nd))
    p = list(node.attr("pads", [0] * (2 * nd)))
    sp = x.shape[2:]
    default = [(i - 1) * s + kk - p[j] - p[j + nd] for j, (i, s, kk) in enumerate(zip(sp, st, k, strict=True))]
    n, c = x.shape[:2]
    base = Tensor.arange(n * c, dtype=dtypes.int64, device=x.device).reshape((n, c) + (1,) * nd)
    local = idx.cast(dtypes.int64) - base * math.prod(default)
    shp = opt(inputs, 2)
    out = default
    if shp is not None:  # the indices address the default output; their coordinates are kept in the larger one
        out = const_ints(node, shp, "output_shape")[-nd:]
        if out != default:
            coords, rem = [], local
            for d in reversed(default):
                coords.append(rem % d)
                rem = rem // d
            local = 0
            for cc, d in zip(reversed(coords), out, strict=True):
                local = local * d + cc
    return x.max_unpool2d(local, k, st, 1, 0, tuple(out))


# ---- normalization ---------------------------------------------------------------------------------------------------
def _chan(t: Tensor, nd: int) -> Tensor:
    """A (C,) parameter shaped to broadcast along axis 1 of an nd-dim tensor."""
    return t.reshape((1, -1) + (1,) * (nd - 2)) if nd >= 2 else t


@onnx_op("BatchNormalization")
def batch_norm(node: Node, inputs: list) -> list[Tensor | None]:
    x = req(node, inputs, 0)
    scale, b = req(node, inputs, 1, "scale"), req(node, inputs, 2, "B")
    mean, var = req(node, inputs, 3, "mean"), req(node, inputs, 4, "var")
    eps = node.attr("epsilon", 1e-5)
    nd = x.ndim
    xc = _compute(x)
    training = node.opset >= 14 and bool(node.attr("training_mode", 0))
    if training:
        axes = (0,) + tuple(range(2, nd))
        bm = xc.mean(axes)
        bv = ((xc - _chan(bm, nd)) ** 2).mean(axes)
        mom = node.attr("momentum", 0.9)
        y = (xc - _chan(bm, nd)) * (_chan(bv, nd) + eps).rsqrt() * _chan(_compute(scale), nd) + _chan(_compute(b), nd)
        rm = _compute(mean) * mom + bm * (1 - mom)
        rv = _compute(var) * mom + bv * (1 - mom)
        return [y.cast(x.dtype), rm.cast(mean.dtype), rv.cast(var.dtype)]
    inv = (_compute(var) + eps).rsqrt()
    y = (xc - _chan(_compute(mean), nd)) * _chan(inv * _compute(scale), nd) + _chan(_compute(b), nd)
    return [y.cast(x.dtype)] + [None] * (node.n_outputs - 1)


@onnx_op("InstanceNormalization", since=6)
def instance_norm(node: Node, inputs: list) -> Tensor:
    x, scale, b = req(node, inputs, 0), req(node, inputs, 1, "scale"), req(node, inputs, 2, "B")
    eps = node.attr("epsilon", 1e-5)
    xc = _compute(x)
    ax = _spatial(x)
    y = xc - xc.mean(ax, keepdim=True)
    y = y * ((y * y).mean(ax, keepdim=True) + eps).rsqrt()
    return (y * _chan(_compute(scale), x.ndim) + _chan(_compute(b), x.ndim)).cast(x.dtype)


@onnx_op("LayerNormalization", since=17)
def layer_norm(node: Node, inputs: list) -> list[Tensor]:
    x, scale, b = req(node, inputs, 0), req(node, inputs, 1, "Scale"), opt(inputs, 2)
    a = axis_of(node, node.attr("axis", -1), x.ndim)
    eps = node.attr("epsilon", 1e-5)
    ax = tuple(range(a, x.ndim))
    xc = _compute(x)
    mu = xc.mean(ax, keepdim=True)
    d = xc - mu
    inv = ((d * d).mean(ax, keepdim=True) + eps).rsqrt()
    y = d * inv * _compute(scale)
    if b is not None:
        y = y + _compute(b)
    return [y.cast(x.dtype), mu, inv]


@onnx_op("RMSNormalization", since=23)
def rms_norm(node: Node, inputs: list) -> Tensor:
    x, scale = req(node, inputs, 0), req(node, inputs, 1, "scale")
    a = axis_of(node, node.attr("axis", -1), x.ndim)
    eps = node.attr("epsilon", 1e-5)
    xc = _compute(x)
    y = xc * ((xc * xc).mean(tuple(range(a, x.ndim)), keepdim=True) + eps).rsqrt()
    return (y * _compute(scale)).cast(x.dtype)


@onnx_op("GroupNormalization", since=18)
def group_norm(node: Node, inputs: list) -> Tensor:
    x, scale, b = req(node, inputs, 0), req(node, inputs, 1, "scale"), req(node, inputs, 2, "bias")
    g = node.attr("num_groups")
    eps = node.attr("epsilon", 1e-5)
    n, c = x.shape[:2]
    if c % g:
        raise node.error(f"channels {c} are not divisible by num_groups {g}")
    xc = _compute(x).reshape(n, g, -1)
    y = xc - xc.mean(-1, keepdim=True)
    y = (y * ((y * y).mean(-1, keepdim=True) + eps).rsqrt()).reshape(x.shape)
    sc, bb = _compute(scale), _compute(b)
    if node.opset < 21 and scale.numel() == g and g != c:
        sc, bb = sc.repeat_interleave(c // g), bb.repeat_interleave(c // g)
    return (y * _chan(sc, x.ndim) + _chan(bb, x.ndim)).cast(x.dtype)


@onnx_op("LRN")
def lrn(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    xc = _compute(x)
    sq = xc * xc
    before, after = (size - 1) // 2, -(-(size - 1) // 2)
    c = x.shape[1]
    p = sq.pad([(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    acc = None
    for i in range(size):
        s = p.shrink([None, (i, i + c)] + [None] * (x.ndim - 2))
        acc = s if acc is None else acc + s
    return (xc / (bias + alpha / size * acc) ** beta).cast(x.dtype)


@onnx_op("MeanVarianceNormalization", since=9)
def mvn(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    ax = tuple(axis_of(node, a, x.ndim) for a in node.attr("axes", [0, 2, 3]))
    xc = _compute(x)
    mu = xc.mean(ax, keepdim=True)
    var = (xc * xc).mean(ax, keepdim=True) - mu * mu
    return ((xc - mu) / (var.sqrt() + 1e-9)).cast(x.dtype)


# ---- linear algebra --------------------------------------------------------------------------------------------------
@onnx_op("MatMul")
def matmul(node: Node, inputs: list) -> Tensor:
    a, b = req(node, inputs, 0), req(node, inputs, 1, "B")
    if _transposed_rows(a, b):
        b = b.contiguous()
    return a @ b


def _transposed_rows(a: Tensor, b: Tensor) -> bool:
    """B is a Transpose whose last axis (N) is not its source's last (attention's q @ k^T: B = k permuted (.., d, t)),
    A has at least GEMM_COPY_MIN_ROWS rows and N fills whole vectors (GEMM_COPY_COLUMNS) or is long
    (GEMM_COPY_RAGGED_MIN): B is then read from a (K, N) copy, as Gemm's transB (a pass over B for a tile of rows x
    column vectors: 12 heads of 128 x 64 @ 64 x 128, 213 -> ~120 us). Over a ragged N of at least two vectors the
    tile takes whole vectors of columns and one short vector of the rest (kernel-optimize's column tail); one core,
    llvm, copy + tile against the dot-product tile over k's rows: ViT's 6 heads of 197 tokens 12 + 135 us against
    ~300; 12 heads of 101, 11 + 82 against 12 + 84 (both copied); of 77, 9 + 74-86 against 104-106; of 50, 7 + 37
    against 46-48 (load ~12). Under two vectors (24 tokens) the copy's tile would be scalar columns."""
    n = b.shape[-1] if b.ndim >= 2 else 0
    return a.ndim >= 2 and b.ndim >= 2 and a.shape[-2] >= GEMM_COPY_MIN_ROWS and \
        (n % GEMM_COPY_COLUMNS == 0 or n >= GEMM_COPY_RAGGED_MIN) and _columns_permuted(b.uop, b.ndim)


def _columns_permuted(u: UOp, nd: int) -> bool:
    """u is a permute that moves its source's last axis away, or such a permute times broadcast factors (torch's
    scaled_dot_product_attention export scales k^T by sqrt(1/sqrt(d)): TransformerEncoder 2.5 -> 1.9 ms, BERT-tiny
    0.75 -> 0.67)."""
    if u.op is T.PERMUTE:
        return u.arg[-1] != nd - 1
    return u.op is core.MUL and any(_columns_permuted(s, nd) for s in u.src) and \
        all(s.op is T.EXPAND or _columns_permuted(s, nd) for s in u.src)


@onnx_op("MatMulInteger", since=10)
def matmul_integer(node: Node, inputs: list) -> Tensor:
    a, b = req(node, inputs, 0), req(node, inputs, 1, "B")
    az, bz = opt(inputs, 2), opt(inputs, 3)
    ai, bi = a.cast(dtypes.int32), b.cast(dtypes.int32)
    if az is not None:
        ai = ai - (az.cast(dtypes.int32).reshape(-1, 1) if az.numel() > 1 else az.cast(dtypes.int32).reshape(()))
    if bz is not None:
        bi = bi - (bz.cast(dtypes.int32) if bz.numel() > 1 else bz.cast(dtypes.int32).reshape(()))
    return ai @ bi


# a Gemm(transB=1) with at least this many rows of A reads B from a (K, N) copy: kernel-optimize's register tile
# then takes rows x column vectors (a ViT's 197-token projections: 63 -> ~190 GFLOP/s); with fewer (a batch-1
# classifier head) its dot-product tile reads the (N, K) rows directly, and a copy would cost more than it saves
GEMM_COPY_MIN_ROWS = 16
GEMM_COPY_COLUMNS = 16  # ... and, for an attention k^T, N a multiple of this (a vector of f32 on AVX-512)
GEMM_COPY_RAGGED_MIN = 32  # ... or at least this long (two vectors: kernel-optimize's column tail takes it)


@onnx_op("Gemm")
def gemm(node: Node, inputs: list) -> Tensor:
    a, b, c = req(node, inputs, 0), req(node, inputs, 1, "B"), opt(inputs, 2)
    if node.attr("transA", 0):
        a = a.transpose(0, 1)
    if node.attr("transB", 0):
        b = b.transpose(0, 1)
        if a.ndim == 2 and b.ndim == 2 and a.shape[0] >= GEMM_COPY_MIN_ROWS:
            b = b.contiguous()  # (K, N): rows share each vector of B's columns (a weight: copied once per plan)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    y = a @ b
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return y.cast(a.dtype) if y.dtype != a.dtype else y


@onnx_op("Einsum", since=12)
def einsum(node: Node, inputs: list) -> Tensor:
    eq = node.attr("equation").replace(" ", "")
    if "->" not in eq:  # the implicit output: '...' then the letters used once in the whole equation, sorted
        # (written out here: the frontend's einsum keeps a letter repeated inside one operand, 'ii' -> diagonal)
        letters = eq.replace("...", "").replace(",", "")
        eq += "->" + ("..." if "..." in eq else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ts = [t for t in inputs if t is not None]
    if len(ts) == 2 and _rows_by_rows(eq, ts[0], ts[1]):  # q @ k^T written as an einsum: MatMul's (K, N) copy of B
        b = ts[1].transpose(-1, -2)
        return ts[0] @ (b.contiguous() if _transposed_rows(ts[0], b) else b)
    return Tensor.einsum(eq, *ts)


def _rows_by_rows(eq: str, a: Tensor, b: Tensor) -> bool:
    """`eq` is 'Pik,Pjk->Pij' (P the same batch letters, each dim of a and b the same size): rows of a times rows of
    b, attention's scores (BERT-style 'bhqd,bhkd->bhqk'), which MatMul runs from a copy of B (214 -> ~125 us)."""
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if "." in eq or len(terms) != 2 or len(set(lhs.replace(",", ""))) != len(terms[0]) + 1:
        return False
    x, y = terms
    n = len(x)
    return (n >= 2 and len(y) == n == a.ndim == b.ndim and x[:-2] == y[:-2] == out[:-2] and x[-1] == y[-1]
            and out[-2:] == x[-2] + y[-2] and a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-1])


@onnx_op("Det", since=11)
def det(node: Node, inputs: list) -> Tensor:
    """Gaussian elimination with partial pivoting, in float64 (pivot rows chosen by one-hot masks, no data read)."""
    x = req(node, inputs, 0)
    n = x.shape[-1]
    if x.ndim < 2 or x.shape[-2] != n:
        raise node.error(f"input must be (..., n, n), got shape {x.shape}")
    a = x.cast(dtypes.float64)
    batch = tuple(x.shape[:-2])
    d = Tensor.ones(*batch, dtype=dtypes.float64, device=x.device) if batch else Tensor(1.0, dtype=dtypes.float64,
                                                                                         device=x.device)
    rows = Tensor.arange(n, dtype=dtypes.int64, device=x.device)
    for k in range(n):
        col = a[..., :, k].abs()
        col = (rows >= k).where(col, -1.0)
        p = col.argmax(-1)  # (batch,)
        hot_p = (rows == p.unsqueeze(-1)).unsqueeze(-1)  # (..., n, 1)
        hot_k = (rows == k).reshape(n, 1)
        row_p = hot_p.where(a, 0.0).sum(-2, keepdim=True)
        row_k = a[..., k:k + 1, :]
        swapped = p != k
        a = hot_k.where(row_p, hot_p.where(row_k, a))
        d = swapped.where(-d, d)
        piv = a[..., k, k]
        d = d * piv
        safe = (piv == 0).where(1.0, piv)
        f = (rows > k).reshape(n, 1).where(a[..., :, k:k + 1] / safe.reshape(batch + (1, 1)), 0.0)
        a = a - f * a[..., k:k + 1, :]
    return d.cast(x.dtype)


# ---- dropout ---------------------------------------------------------------------------------------------------------
@onnx_op("Dropout")
def dropout(node: Node, inputs: list) -> list[Tensor]:
    x = req(node, inputs, 0)
    if node.opset >= 12:
        ratio = scalar(node, opt(inputs, 1), "ratio", 0.5)
        training = bool(scalar(node, opt(inputs, 2), "training_mode", False))
    else:
        ratio = node.attr("ratio", 0.5)
        training = node.opset < 7 and not node.attr("is_test", 0)
    mask_dtype = dtypes.bool if node.opset >= 10 else x.dtype
    if training and ratio > 0:  # a random mask (ops_random): seeded as onnx's reference
        from uopir.onnx.ops_random import dropout_mask
        if ratio >= 1:
            raise node.error(f"ratio {ratio} must be below 1 in training mode")
        mask = dropout_mask(node, x, float(ratio))
        return [mask.where(x * (1.0 / (1.0 - float(ratio))), 0).cast(x.dtype), mask.cast(mask_dtype)]
    return [x, Tensor.full(tuple(x.shape), True if mask_dtype == dtypes.bool else 1, dtype=mask_dtype,
                           device=x.device)]


# ---- losses ----------------------------------------------------------------------------------------------------------
def _nll(node: Node, logp: Tensor, target: Tensor, weight: Tensor | None) -> Tensor:
    red = node.attr("reduction", "mean")
    if red not in ("none", "sum", "mean"):
        raise node.error(f"unknown reduction {red!r}")
    ii = node.attr("ignore_index", None)
    c = logp.shape[1]
    t = target.cast(dtypes.int64)
    cls = Tensor.arange(c, dtype=dtypes.int64, device=logp.device).reshape((1, c) + (1,) * (logp.ndim - 2))
    hot = t.unsqueeze(1) == cls
    picked = hot.where(logp, 0).sum(1)
    w = (hot.where(_chan(weight, logp.ndim).cast(logp.dtype), 0).sum(1) if weight is not None
         else Tensor.ones(*t.shape, dtype=logp.dtype, device=logp.device))
    if ii is not None:
        w = (t == ii).where(0, w)
    loss = -picked * w
    if red == "none":
        return loss
    if red == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


@onnx_op("NegativeLogLikelihoodLoss", since=12)
def nll_loss(node: Node, inputs: list) -> Tensor:
    x, t = req(node, inputs, 0), req(node, inputs, 1, "target")
    return _nll(node, x, t, opt(inputs, 2)).cast(x.dtype)


@onnx_op("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy(node: Node, inputs: list) -> list[Tensor]:
    x, t = req(node, inputs, 0), req(node, inputs, 1, "labels")
    logp = _compute(x).log_softmax(1)
    return [_nll(node, logp, t, opt(inputs, 2)).cast(x.dtype), logp.cast(x.dtype)]
