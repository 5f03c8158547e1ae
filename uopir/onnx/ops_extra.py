"""Less common ONNX operators on the Tensor API: CenterCropPad, Col2Im, GridSample, AffineGrid, TensorScatter,
SwiGLU, QLinearMatMul, QLinearConv, Det, DeformConv, RoiAlign, MelWeightMatrix, CausalConvWithState,
LinearAttention, DFT, STFT, the training-domain optimizers (Adagrad, Adam, Momentum), FlexAttention
(ai.onnx.preview; its score_mod / prob_mod subgraphs run in place), Binarizer, ArrayFeatureExtractor and
TreeEnsemble (ai.onnx.ml), and the data-dependent Unique and NonMaxSuppression (computed on the host from their realized
inputs, as NonZero: their output shapes depend on the values).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.onnx.importer import onnx_dtype
from uopir.onnx.ops_nn import conv_integer
from uopir.onnx.ops_shape import axis_of, const_tensor, host, opt, req, scalar, take, take_t
from uopir.onnx.registry import Node, const_ints, onnx_op


@onnx_op("CenterCropPad", since=18)
def center_crop_pad(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    shape = const_ints(node, req(node, inputs, 1, "shape"), "shape")
    axes = [axis_of(node, a, x.ndim) for a in node.attr("axes", list(range(x.ndim)))]
    if len(axes) != len(shape):
        raise node.error(f"shape {shape} needs one entry per axis {axes}")
    pairs = [(0, 0)] * x.ndim
    for a, t in zip(axes, shape, strict=True):
        d = x.shape[a] - t
        pairs[a] = (-(d // 2), -(d - d // 2)) if d >= 0 else ((-d) // 2, -d - (-d) // 2)
    return x.pad(pairs)


@onnx_op("SwiGLU", since=28)
def swiglu(node: Node, inputs: list) -> Tensor:
    a, b = req(node, inputs, 0), req(node, inputs, 1, "B")
    return a * (a * node.attr("alpha", 1.0)).sigmoid() * b


@onnx_op("TensorScatter", since=24)
def tensor_scatter(node: Node, inputs: list) -> Tensor:
    past, upd, wi = req(node, inputs, 0), req(node, inputs, 1, "update"), opt(inputs, 2)
    axis = axis_of(node, node.attr("axis", -2), past.ndim)
    if axis == 0:
        raise node.error("axis 0 is the batch axis")
    m, s = past.shape[axis], upd.shape[axis]
    shp = [1] * past.ndim
    shp[axis] = s
    seq = Tensor.arange(s, dtype=dtypes.int64, device=past.device).reshape(tuple(shp))
    start = (wi.cast(dtypes.int64).reshape((-1,) + (1,) * (past.ndim - 1)) if wi is not None else 0)
    idx = seq + start
    if node.attr("mode", "linear") == "circular":
        idx = idx % m
    idx = idx.expand(tuple(upd.shape)) if isinstance(idx, Tensor) else idx
    return past.scatter(axis, idx, upd)


# ---- quantized linear algebra ----------------------------------------------------------------------------------------
def _requant(node: Node, acc: Tensor, scale: Tensor, zp: Tensor | None, like: Tensor | None) -> Tensor:
    """round-half-even(acc * scale) + zero point, saturated to the output's int type (the zero point's dtype)."""
    d = zp.dtype if zp is not None else (like.dtype if like is not None else dtypes.uint8)
    y = (acc.cast(dtypes.float32) * scale.cast(dtypes.float32))
    r = y.round()  # Tensor.round rounds half to even (torch)
    if zp is not None:
        r = r + zp.cast(dtypes.float32)
    return r.clip(d.min, d.max).cast(d)


def _per(t: Tensor | None, nd: int, row: bool) -> Tensor | int:
    """A zero point / scale per tensor, per row (a) or per column (b), shaped to broadcast."""
    if t is None:
        return 0
    if t.numel() == 1:
        return t.reshape(())
    if t.ndim == 1:
        return t.reshape(-1, 1) if row else t
    return t


@onnx_op("QLinearMatMul", since=10)
def qlinear_matmul(node: Node, inputs: list) -> Tensor:
    a, sa, za = req(node, inputs, 0), req(node, inputs, 1, "a_scale"), opt(inputs, 2)
    b, sb, zb = req(node, inputs, 3, "b"), req(node, inputs, 4, "b_scale"), opt(inputs, 5)
    sy, zy = req(node, inputs, 6, "y_scale"), opt(inputs, 7)
    ai = a.cast(dtypes.int32) - _per(za, a.ndim, True)
    bi = b.cast(dtypes.int32) - _per(zb, b.ndim, False)
    acc = ai.cast(dtypes.float32) @ bi.cast(dtypes.float32)  # exact below 2^24, as the float reference
    scale = _per(sa, a.ndim, True) * _per(sb, b.ndim, False) / sy.reshape(())
    return _requant(node, acc, scale if isinstance(scale, Tensor) else Tensor(scale, device=a.device), zy, a)


@onnx_op("QLinearConv", since=10)
def qlinear_conv(node: Node, inputs: list) -> Tensor:
    x, sx, zx = req(node, inputs, 0), req(node, inputs, 1, "x_scale"), req(node, inputs, 2, "x_zero_point")
    w, sw, zw = req(node, inputs, 3, "w"), req(node, inputs, 4, "w_scale"), req(node, inputs, 5, "w_zero_point")
    sy, zy, b = req(node, inputs, 6, "y_scale"), req(node, inputs, 7, "y_zero_point"), opt(inputs, 8)
    acc = conv_integer(node, [x, w, zx, zw])
    if b is not None:
        acc = acc + b.cast(dtypes.int32).reshape((1, -1) + (1,) * (x.ndim - 2))
    swc = sw.reshape((1, -1) + (1,) * (x.ndim - 2)) if sw.numel() > 1 else sw.reshape(())
    scale = sx.reshape(()).cast(dtypes.float32) * swc.cast(dtypes.float32) / sy.reshape(()).cast(dtypes.float32)
    return _requant(node, acc, scale, zy, x)


# ---- grids -----------------------------------------------------------------------------------------------------------
def _base_coords(n: int, align: bool) -> np.ndarray:
    if align:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (np.arange(n) * 2.0 + 1.0) / n - 1.0


@onnx_op("AffineGrid", since=20)
def affine_grid(node: Node, inputs: list) -> Tensor:
    theta, size = req(node, inputs, 0), req(node, inputs, 1, "size")
    sz = const_ints(node, size, "size")
    align = bool(node.attr("align_corners", 0))
    sp = sz[2:]
    nd = len(sp)
    if nd not in (2, 3) or tuple(theta.shape[1:]) != (nd, nd + 1):
        raise node.error(f"theta shape {theta.shape} does not fit size {sz}")
    axes = [_base_coords(s, align) for s in sp]  # (D,) H, W
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)]  # x (W) first, then y, z
    base = np.stack(coords + [np.ones_like(coords[0])], axis=-1).astype(np.float32)  # (P, nd+1)
    bt = Tensor(base, device=theta.device).cast(theta.dtype)
    grid = bt @ theta.transpose(1, 2)  # (N, P, nd)
    return grid.reshape((sz[0],) + tuple(sp) + (nd,))


def _reflect(c: Tensor, lo: float, hi: float) -> Tensor:
    """c reflected into [lo, hi] (any number of bounces)."""
    rng = hi - lo
    if rng <= 0:
        return c * 0 + lo
    d = (c - lo).abs()
    flips = (d / rng).floor()
    extra = d - flips * rng
    return ((flips % 2) == 0).where(lo + extra, hi - extra)


def _cubic_w(t: Tensor, a: float = -0.75) -> list[Tensor]:
    def w(d: Tensor) -> Tensor:
        d = d.abs()
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return (d <= 1).where(near, (d < 2).where(far, 0.0))
    return [w(t + 1), w(t), w(1 - t), w(2 - t)]


@onnx_op("GridSample", since=16)
def grid_sample(node: Node, inputs: list) -> Tensor:
    """The reference's steps: grid -> pixel coordinates (nearest: rounded half to even), coordinates outside the
    border clamped (border) or reflected (reflection), then each tap read with the padding rule applied to its
    index (zeros: 0 outside; border: clamped; reflection: reflected and truncated). The taps' weights form a
    (N, P, H*W) matrix that a batched matmul applies to x."""
    x, grid = req(node, inputs, 0), req(node, inputs, 1, "grid")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(node.attr("mode", "bilinear"), node.attr("mode", "bilinear"))
    pad_mode = node.attr("padding_mode", "zeros")
    align = bool(node.attr("align_corners", 0))
    n, c = x.shape[:2]
    sp = tuple(x.shape[2:])
    nd = len(sp)
    out_sp = tuple(grid.shape[1:-1])
    p = math.prod(out_sp)
    g = _float_t(grid).reshape(n, p, nd)
    hw = math.prod(sp)
    borders = [(0.0, s - 1.0) if align else (-0.5, s - 0.5) for s in sp]
    coords = []  # per spatial dim (in x's order), pixel coordinates (N, P)
    for d in range(nd):
        size, (lo, hi) = sp[d], borders[d]
        gc = g[:, :, nd - 1 - d]  # the grid's last entry is x (the last spatial dim)
        pix = (gc + 1) / 2 * (size - 1) if align else ((gc + 1) * size - 1) / 2
        if mode == "nearest":
            pix = pix.round()
        out = (pix < lo) | (pix > hi)
        if pad_mode == "border":
            pix = out.where(pix.clip(0, size - 1), pix)
        elif pad_mode == "reflection":
            pix = out.where(_reflect(pix, lo, hi), pix)
        coords.append(pix)
    flat_ar = Tensor.arange(hw, dtype=dtypes.int64, device=x.device).reshape(1, 1, hw)
    weights: Tensor | None = None

    def add_tap(taps: list[tuple[Tensor, Tensor | float]]) -> None:
        nonlocal weights
        idx: Tensor | int = 0
        wgt: Tensor | float = 1.0
        inside: Tensor | None = None
        for d, (pos, wd) in enumerate(taps):
            size, (lo, hi) = sp[d], borders[d]
            if pad_mode == "zeros":
                ok = (pos >= 0) & (pos <= size - 1)
                inside = ok if inside is None else inside & ok
            elif pad_mode == "border":
                pos = pos.clip(0, size - 1)
            else:
                pos = ((pos < 0) | (pos > size - 1)).where(_reflect(pos, lo, hi), pos).trunc()
            idx = idx * size + pos.cast(dtypes.int64)
            wgt = wgt * wd
        w = wgt if inside is None else inside.where(wgt, 0.0)
        hot = (idx.unsqueeze(-1) == flat_ar).where(w.unsqueeze(-1) if isinstance(w, Tensor) else w, 0.0)
        weights = hot if weights is None else weights + hot

    if mode == "nearest":
        add_tap([(cd.trunc(), 1.0) for cd in coords])
    elif mode in ("linear", "cubic"):
        per_dim = []
        for cd in coords:
            lo = cd.floor()
            t = cd - lo
            if mode == "linear":
                per_dim.append([(lo, 1 - t), (lo + 1, t)])
            else:
                per_dim.append([(lo + off, wk) for off, wk in zip((-1, 0, 1, 2), _cubic_w(t), strict=True)])
        for combo in itertools.product(*per_dim):
            add_tap(list(combo))
    else:
        raise node.error(f"unsupported mode {mode!r}")
    xf = _float_t(x).reshape(n, c, hw)
    out = xf @ weights.cast(xf.dtype).transpose(1, 2)  # type: ignore[union-attr]
    return out.reshape((n, c) + out_sp).cast(x.dtype)


def _float_t(t: Tensor) -> Tensor:
    return t if t.dtype in (dtypes.float32, dtypes.float64) else t.cast(dtypes.float32)


# ---- col2im ----------------------------------------------------------------------------------------------------------
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
    y = _float_t(x).reshape(n, c, k * L) @ mt
    return y.reshape((n, c) + tuple(image)).cast(x.dtype)


# ---- linear algebra --------------------------------------------------------------------------------------------------
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


# ---- data-dependent --------------------------------------------------------------------------------------------------
@onnx_op("Unique", since=11)
def unique(node: Node, inputs: list) -> list[Tensor]:
    x = req(node, inputs, 0)
    arr = host(x)
    axis = node.attr("axis", None)
    srt = bool(node.attr("sorted", 1))
    if axis is not None:
        axis = axis_of(node, axis, arr.ndim)
    y, idx, inv, cnt = np.unique(arr, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inv = inv.reshape(-1)
    if not srt:
        order = np.argsort(idx, kind="stable")
        y = np.take(y, order, axis=axis if axis is not None else 0)
        idx, cnt = idx[order], cnt[order]
        remap = np.empty_like(order)
        remap[order] = np.arange(len(order))
        inv = remap[inv]
    dev = x.device
    return [Tensor(np.array(y, order="C"), dtype=x.dtype, device=dev), const_tensor(idx.astype(np.int64), dev),
            const_tensor(inv.astype(np.int64), dev), const_tensor(cnt.astype(np.int64), dev)]


def _iou(a: np.ndarray, b: np.ndarray, center: bool) -> float:
    if center:
        a = np.array([a[1] - a[3] / 2, a[0] - a[2] / 2, a[1] + a[3] / 2, a[0] + a[2] / 2])
        b = np.array([b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2])
    y1a, x1a, y2a, x2a = min(a[0], a[2]), min(a[1], a[3]), max(a[0], a[2]), max(a[1], a[3])
    y1b, x1b, y2b, x2b = min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])
    ih = max(0.0, min(y2a, y2b) - max(y1a, y1b))
    iw = max(0.0, min(x2a, x2b) - max(x1a, x1b))
    inter = ih * iw
    union = (y2a - y1a) * (x2a - x1a) + (y2b - y1b) * (x2b - x1b) - inter
    return inter / union if union > 0 else 0.0


@onnx_op("NonMaxSuppression", since=10)
def non_max_suppression(node: Node, inputs: list) -> Tensor:
    boxes, scores = host(req(node, inputs, 0)), host(req(node, inputs, 1, "scores"))
    max_out = int(scalar(node, opt(inputs, 2), "max_output_boxes_per_class", 0))
    iou_t = float(scalar(node, opt(inputs, 3), "iou_threshold", 0.0))
    score_t = opt(inputs, 4)
    st = float(scalar(node, score_t, "score_threshold")) if score_t is not None else None
    center = bool(node.attr("center_point_box", 0))
    out = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [i for i in np.argsort(-s, kind="stable") if st is None or s[i] > st]
            keep: list[int] = []
            for i in order:
                if len(keep) >= max_out:
                    break
                if all(_iou(boxes[b, i], boxes[b, j], center) <= iou_t for j in keep):
                    keep.append(int(i))
            out += [[b, c, i] for i in keep]
    return const_tensor(np.array(out, np.int64).reshape(-1, 3), req(node, inputs, 0).device)


# ---- recurrent-model ops (opset 27) ----------------------------------------------------------------------------------
@onnx_op("CausalConvWithState", since=27)
def causal_conv_with_state(node: Node, inputs: list) -> list[Tensor]:
    x, w, b, past = req(node, inputs, 0), req(node, inputs, 1, "weight"), opt(inputs, 2), opt(inputs, 3)
    act = node.attr("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise node.error(f"unsupported activation {act!r}")
    if x.ndim != 3 or w.ndim != 3:
        raise node.error(f"input {x.shape} and weight {w.shape} must be rank 3")
    n, c, _ = x.shape
    k = w.shape[2]
    pad = past if past is not None else Tensor.zeros(n, c, k - 1, dtype=x.dtype, device=x.device)
    full = pad.cat(x, dim=2) if k > 1 else x
    y = full.conv2d(w, b, c, 1, 1, 0).cast(x.dtype)
    if act != "none":
        yf = y.cast(dtypes.float32)
        y = (yf * yf.sigmoid()).cast(x.dtype)
    return [y, full[:, :, full.shape[2] - (k - 1):]]


@onnx_op("LinearAttention", since=27)
def linear_attention(node: Node, inputs: list) -> list[Tensor]:
    """The reference's recurrence, one step per position (unrolled: T is the sequence length of the call)."""
    q, k, v = req(node, inputs, 0), req(node, inputs, 1, "key"), req(node, inputs, 2, "value")
    past, decay, beta = opt(inputs, 3), opt(inputs, 4), opt(inputs, 5)
    rule = node.attr("update_rule", "gated_delta")
    hq, hk = node.attr("q_num_heads"), node.attr("kv_num_heads")
    if rule not in ("linear", "gated", "delta", "gated_delta") or hq % hk:
        raise node.error(f"update_rule {rule!r} with q_num_heads {hq}, kv_num_heads {hk} is not supported")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise node.error(f"update_rule {rule!r} needs {'decay ' if gating else ''}{'beta' if delta else ''} inputs "
                         "(and no others)")
    b, t, _ = q.shape
    dk, dv = q.shape[-1] // hq, v.shape[-1] // hk
    f32 = dtypes.float32

    def heads(x: Tensor, h: int) -> Tensor:
        return x.reshape(b, t, h, -1).transpose(1, 2).cast(f32)

    q4, k4, v4 = heads(q, hq), heads(k, hk), heads(v, hk)
    d4 = (decay.reshape(b, t, hk, 1).transpose(1, 2) if decay.shape[-1] == hk else heads(decay, hk)).cast(f32) \
        if decay is not None else None
    b4 = beta.reshape(b, t, beta.shape[-1], 1).transpose(1, 2).cast(f32) if beta is not None else None
    state = past.cast(f32) if past is not None else Tensor.zeros(b, hk, dk, dv, dtype=f32, device=q.device)
    scale = node.attr("scale", 0.0) or 1 / math.sqrt(dk)
    outs = []
    for i in range(t):
        qt, kt, vt = q4[:, :, i, :], k4[:, :, i, :], v4[:, :, i, :]
        if d4 is not None:
            state = state * d4[:, :, i, :].exp().unsqueeze(-1)
        if b4 is not None:
            retrieved = (state * kt.unsqueeze(-1)).sum(2)
            vt = b4[:, :, i, :] * (vt - retrieved)
        state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        read = state.repeat_interleave(hq // hk, 1) if hq != hk else state
        outs.append((qt.unsqueeze(-1) * read).sum(2) * scale)
    out = Tensor.stack(*outs, dim=2) if len(outs) > 1 else outs[0].unsqueeze(2)
    y = out.transpose(1, 2).reshape(b, t, hq * dv).cast(q.dtype)
    return [y, state.cast(past.dtype if past is not None else q.dtype)]


# ---- training optimizers (ai.onnx.preview.training) ------------------------------------------------------------------
_TRAINING = "ai.onnx.preview.training"


def _groups(node: Node, inputs: list, per: int) -> tuple[float, int, list[list[Tensor]]]:
    """(learning rate, step count, [[x, g, ...] per optimized tensor]) of an optimizer node."""
    r, t = scalar(node, req(node, inputs, 0, "R"), "R"), int(scalar(node, req(node, inputs, 1, "T"), "T"))
    rest = inputs[2:]
    if len(rest) % per:
        raise node.error(f"{len(rest)} tensor inputs do not split into groups of {per}")
    n = len(rest) // per
    return float(r), t, [[rest[j * n + i] for j in range(per)] for i in range(n)]


@onnx_op("Adagrad", domain=_TRAINING)
def adagrad(node: Node, inputs: list) -> list[Tensor]:
    r, t, groups = _groups(node, inputs, 3)
    decay, eps, norm = node.attr("decay_factor", 0.0), node.attr("epsilon", 1e-6), node.attr("norm_coefficient", 0.0)
    rr = r / (1 + t * decay)
    xs, hs = [], []
    for x, g, h in groups:
        gr = x * norm + g
        hn = h + gr * gr
        xs.append((x - rr * gr / (hn.sqrt() + eps)).cast(x.dtype))
        hs.append(hn.cast(h.dtype))
    return xs + hs


@onnx_op("Adam", domain=_TRAINING)
def adam(node: Node, inputs: list) -> list[Tensor]:
    r, t, groups = _groups(node, inputs, 4)
    alpha, beta = node.attr("alpha", 0.9), node.attr("beta", 0.999)
    eps, norm, post = node.attr("epsilon", 1e-6), node.attr("norm_coefficient", 0.0), \
        node.attr("norm_coefficient_post", 0.0)
    ra = r * math.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    xs, vs, hs = [], [], []
    for x, g, v, h in groups:
        gr = x * norm + g
        vn = v * alpha + gr * (1 - alpha)
        hn = h * beta + gr * gr * (1 - beta)
        xs.append(((x - ra * (vn / (hn.sqrt() + eps))) * (1 - post)).cast(x.dtype))
        vs.append(vn.cast(v.dtype))
        hs.append(hn.cast(h.dtype))
    return xs + vs + hs


@onnx_op("Momentum", domain=_TRAINING)
def momentum(node: Node, inputs: list) -> list[Tensor]:
    r, t, groups = _groups(node, inputs, 3)
    alpha, beta, norm = node.attr("alpha"), node.attr("beta"), node.attr("norm_coefficient")
    mode = node.attr("mode")
    if mode not in ("standard", "nesterov"):
        raise node.error(f"unknown mode {mode!r}")
    b = beta if t > 0 else 1.0
    xs, vs = [], []
    for x, g, v in groups:
        gr = x * norm + g
        vn = v * alpha + gr * b
        xs.append((x - r * vn if mode == "standard" else x - r * (gr + vn * alpha)).cast(x.dtype))
        vs.append(vn.cast(v.dtype))
    return xs + vs


# ---- DFT -------------------------------------------------------------------------------------------------------------
def _dft(node: Node, x: Tensor, axis: int, n: int | None, inverse: bool, onesided: bool) -> Tensor:
    """A DFT along `axis` of the (..., 1 | 2) real/complex signal x as matmuls with host cos/sin matrices (float64)."""
    if x.shape[-1] not in (1, 2):
        raise node.error(f"the last dim of the input must be 1 (real) or 2 (complex), got shape {x.shape}")
    a = axis_of(node, axis, x.ndim - 1)
    xf = x.cast(dtypes.float64)
    re = xf[..., 0]
    im = xf[..., 1] if x.shape[-1] == 2 else None
    length = re.shape[a]
    if n is None:
        n = 2 * (length - 1) if inverse and onesided else length
    m = n // 2 + 1 if inverse and onesided else n  # the input length the transform reads

    def fit(t: Tensor) -> Tensor:
        t = t.transpose(a, -1) if a != t.ndim - 1 else t
        k = t.shape[-1]
        return t.pad([(0, 0)] * (t.ndim - 1) + [(0, m - k)]) if k < m else t[..., :m]

    re = fit(re)
    im = fit(im) if im is not None else None
    nout = n // 2 + 1 if onesided and not inverse else n
    j = np.arange(m).reshape(-1, 1)
    k = np.arange(nout).reshape(1, -1)
    ang = 2 * np.pi * ((j * k) % n) / n
    if inverse and onesided:
        w = np.full(m, 2.0)
        w[0] = 1.0
        if n % 2 == 0:
            w[-1] = 1.0
        ang = 2 * np.pi * ((np.arange(m).reshape(-1, 1) * np.arange(n).reshape(1, -1)) % n) / n
        cmat = Tensor(np.cos(ang) * w.reshape(-1, 1) / n, device=x.device)
        smat = Tensor(np.sin(ang) * w.reshape(-1, 1) / n, device=x.device)
        out = re @ cmat - (im @ smat if im is not None else 0)
        out = out.unsqueeze(-1)
    else:
        sign = 1.0 if inverse else -1.0
        scale = 1.0 / n if inverse else 1.0
        cmat = Tensor(np.cos(ang) * scale, device=x.device)
        smat = Tensor(np.sin(ang) * sign * scale, device=x.device)  # e^{sign i ang} = cos + sign i sin
        ore = re @ cmat - (im @ smat if im is not None else 0)
        oim = re @ smat + (im @ cmat if im is not None else 0)
        out = Tensor.stack(ore, oim, dim=-1)
    if a != out.ndim - 2:
        out = out.transpose(a, -2)
    return out.cast(x.dtype)


@onnx_op("DFT", since=17)
def dft(node: Node, inputs: list) -> Tensor:
    """axis: an attribute before opset 20, an input (default -2) after."""
    x, ln = req(node, inputs, 0), opt(inputs, 1)
    n = int(scalar(node, ln, "dft_length")) if ln is not None else None
    axis = node.attr("axis", 1) if node.opset < 20 else int(scalar(node, opt(inputs, 2), "axis", -2))
    if node.opset >= 20 and axis < 0:
        axis += x.ndim  # counted on the input's rank, which includes the last (1 | 2) dim
    return _dft(node, x, axis, n, bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0)))



@onnx_op("STFT", since=17)
def stft(node: Node, inputs: list) -> Tensor:
    x, step_t, window, fl = req(node, inputs, 0), req(node, inputs, 1, "frame_step"), opt(inputs, 2), opt(inputs, 3)
    step = int(scalar(node, step_t, "frame_step"))
    length = int(scalar(node, fl, "frame_length")) if fl is not None else \
        (window.shape[0] if window is not None else x.shape[-2])
    frames = 1 + (x.shape[-2] - length) // step
    idx = np.arange(frames).reshape(-1, 1) * step + np.arange(length).reshape(1, -1)  # (frames, length)
    fr = take(x, x.ndim - 2, idx)  # (batch, frames, length, 1 | 2)
    if window is not None:
        fr = fr * window.reshape(1, 1, length, 1)
    return _dft(node, fr, 2, length, False, bool(node.attr("onesided", 1)))


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
    offs = _float_t(off).reshape(n, og, k, 2, p)
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
        wts = wts * _float_t(mask).reshape(n, og, k, p, 1)  # type: ignore[operator]
    xs = _float_t(x).reshape(n, og, 1, ic // og, hw)  # (N, og, 1, C/og, HW)
    samp = xs @ wts.reshape(n, og, k, p, hw).transpose(-1, -2)  # type: ignore[union-attr]  # (N, og, K, C/og, P)
    samp = samp.permute(0, 1, 3, 2, 4).reshape(n, group, ic // group, k, p)
    wr = _float_t(w).reshape(1, group, oc // group, ic // group, k, 1)
    y = (samp.unsqueeze(2) * wr).sum((3, 4)).reshape(n, oc, oh, ow)
    if b is not None:
        y = y + _float_t(b).reshape(1, oc, 1, 1)
    return y.cast(x.dtype)


@onnx_op("MelWeightMatrix", since=17)
def mel_weight_matrix(node: Node, inputs: list) -> Tensor:
    """(dft_length // 2 + 1, num_mel_bins) triangular filters between mel-spaced edges (the spec's formula: mel =
    2595 log10(1 + hz / 700), edges rounded down to spectrogram bins), computed on the host."""
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    mels, dft_len, rate, lo, hi = (scalar(node, req(node, inputs, i, nm), nm) for i, nm in enumerate(names))
    mels, dft_len, rate = int(mels), int(dft_len), int(rate)
    to_mel = lambda hz: 2595 * np.log10(1 + hz / 700)  # noqa: E731
    step = (to_mel(hi) - to_mel(lo)) / (mels + 2)
    edges_mel = np.arange(mels + 2) * step + to_mel(lo)
    edges_hz = 700 * (10 ** (edges_mel / 2595) - 1)
    edges = (((dft_len + 1) * edges_hz) // rate).astype(np.int64)
    out = np.zeros((dft_len // 2 + 1, mels))
    for i in range(mels):
        a, c, b = edges[i], edges[i + 1], edges[i + 2]
        if c == a:
            out[c, i] = 1.0
        else:
            out[a:c + 1, i] = (np.arange(a, c + 1) - a) / (c - a)
        if b > c:
            out[c:b, i] = (b - np.arange(c, b)) / (b - c)
    d = onnx_dtype(node.attr("output_datatype", 1))
    return Tensor(out, device=node.device).cast(d)


def _roi_taps(h: int, w: int, ph: int, pw: int, box: np.ndarray, scale: float, ratio: int,
              half_pixel: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """(positions (P, S, 4), weights (P, S, 4), S) of one region's bilinear samples: S = grid_h * grid_w samples
    per output cell (ratio, or ceil(bin size) when 0); a sample beyond -1 / the size reads nothing, else its
    coordinates are clamped at 0 and at the last row/column (RoiAlign's convention)."""
    off = 0.5 if half_pixel else 0.0
    x0, y0, x1, y1 = (float(v) * scale - off for v in box[:4])
    rw, rh = x1 - x0, y1 - y0
    if not half_pixel:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / ph, rw / pw
    gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
    gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
    s = max(gh * gw, 0)
    pos = np.zeros((ph * pw, max(s, 1), 4), np.int64)
    wts = np.zeros((ph * pw, max(s, 1), 4))
    for i in range(ph):
        for j in range(pw):
            for a in range(gh):
                y = y0 + i * bh + (a + 0.5) * bh / gh
                for b in range(gw):
                    x = x0 + j * bw + (b + 0.5) * bw / gw
                    if y < -1.0 or y > h or x < -1.0 or x > w:
                        continue
                    y, x = max(y, 0.0), max(x, 0.0)
                    yl, xl = int(y), int(x)
                    if yl >= h - 1:
                        yl = yh = h - 1
                        y = float(yl)
                    else:
                        yh = yl + 1
                    if xl >= w - 1:
                        xl = xh = w - 1
                        x = float(xl)
                    else:
                        xh = xl + 1
                    ly, lx = y - yl, x - xl
                    k = i * pw + j
                    pos[k, a * gw + b] = [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh]
                    wts[k, a * gw + b] = [(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx]
    return pos, wts, max(s, 1)


@onnx_op("RoiAlign", since=10)
def roi_align(node: Node, inputs: list) -> Tensor:
    """The regions are read on the host (the sampling grid depends on their sizes); each region's samples become a
    host weight matrix over the H*W pixels, applied by a batched matmul (avg: summed and divided by the count; max:
    the largest weighted tap of every sample, then the largest sample)."""
    x, rois_t, bidx_t = req(node, inputs, 0), req(node, inputs, 1, "rois"), req(node, inputs, 2, "batch_indices")
    rois, bidx = host(rois_t), host(bidx_t).astype(np.int64).reshape(-1)
    ph, pw = node.attr("output_height", 1), node.attr("output_width", 1)
    ratio, scale = int(node.attr("sampling_ratio", 0)), float(node.attr("spatial_scale", 1.0))
    mode = node.attr("mode", "avg").lower()
    half = node.attr("coordinate_transformation_mode", "half_pixel" if node.opset >= 16 else "output_half_pixel") \
        == "half_pixel"
    n, c, h, w = x.shape
    r = len(bidx)
    if r == 0:
        return Tensor.zeros(0, c, ph, pw, dtype=x.dtype, device=x.device)
    taps = [_roi_taps(h, w, ph, pw, rois[i], scale, ratio, half) for i in range(r)]
    xs = take(_float_t(x), 0, bidx).reshape(r, c, h * w)
    hw = np.arange(h * w)
    if mode == "avg":
        m = np.zeros((r, ph * pw, h * w))
        for i, (pos, wts, s) in enumerate(taps):
            m[i] = ((pos[..., None] == hw) * wts[..., None]).sum((1, 2)) / s
        y = xs @ Tensor(m.astype(np.float32), device=x.device).transpose(1, 2)
    else:
        smax = max(s for _, _, s in taps)
        m = np.zeros((r, ph * pw, smax, 4, h * w))
        valid = np.zeros((r, 1, ph * pw, smax), bool)
        for i, (pos, wts, s) in enumerate(taps):
            m[i, :, :s] = (pos[..., None] == hw) * wts[..., None]
            valid[i, 0, :, :s] = True
        mt = Tensor(m.reshape(r, -1, h * w).astype(np.float32), device=x.device)
        v = (xs @ mt.transpose(1, 2)).reshape(r, c, ph * pw, smax, 4).max(-1)
        y = Tensor(valid, device=x.device).where(v, float("-inf")).max(-1)
    return y.reshape(r, c, ph, pw).cast(x.dtype)


# ---- FlexAttention (ai.onnx.preview) ---------------------------------------------------------------------------------
@onnx_op("FlexAttention", domain="ai.onnx.preview")
def flex_attention(node: Node, inputs: list) -> Tensor:
    """scores = Q K^T * scale (in softmax_precision: float32, or float64 for float64 inputs), the score_mod subgraph,
    softmax, the prob_mod subgraph, then @ V; K/V heads shared by contiguous groups of query heads."""
    q, k, v = req(node, inputs, 0), req(node, inputs, 1, "K"), req(node, inputs, 2, "V")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise node.error(f"Q, K, V must be rank 4, got {q.shape}, {k.shape}, {v.shape}")
    hq, hk = q.shape[1], k.shape[1]
    if hq % hk:
        raise node.error(f"{hq} query heads are not a multiple of {hk} key/value heads")
    if hq != hk:
        k, v = k.repeat_interleave(hq // hk, 1), v.repeat_interleave(hq // hk, 1)
    prec = node.attr("softmax_precision", None)
    cd = onnx_dtype(prec) if prec is not None else (dtypes.float64 if q.dtype == dtypes.float64 else dtypes.float32)
    scale = node.attr("scale", None)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.cast(cd) @ k.cast(cd).transpose(-1, -2)) * scale
    if node.has("score_mod"):
        s = node.run_subgraph("score_mod", [s])[0]
    p = s.softmax(-1)
    if node.has("prob_mod"):
        p = node.run_subgraph("prob_mod", [p])[0]
    return (p @ v.cast(cd)).cast(q.dtype)


@onnx_op("Binarizer", domain="ai.onnx.ml")
def binarizer(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    return (x > node.attr("threshold", 0.0)).cast(x.dtype)


@onnx_op("ArrayFeatureExtractor", domain="ai.onnx.ml")
def array_feature_extractor(node: Node, inputs: list) -> Tensor:
    """x[..., indices] along the last axis (a 1-D input gives (1, len(indices)), as the ml operator's reference)."""
    x, idx = req(node, inputs, 0), req(node, inputs, 1, "Y")
    out = take_t(x, x.ndim - 1, idx.reshape(-1))
    return out.reshape(1, -1) if x.ndim == 1 else out


@onnx_op("TreeEnsemble", since=5, domain="ai.onnx.ml")
def tree_ensemble(node: Node, inputs: list) -> Tensor:
    """The trees are attributes, so every leaf's path is known when the graph is built: a leaf is selected where all
    the comparisons on its path went its way (a product of boolean columns), and each tree's value is the sum of its
    leaves' weights times their indicators. No data is read while building."""
    x = req(node, inputs, 0)
    if node.attr("post_transform", 0) != 0:
        raise node.error("post_transform other than NONE is unsupported")
    agg = node.attr("aggregate_function", 1)
    splits = np.asarray(node.attr("nodes_splits")).reshape(-1)
    feats, modes = node.attr("nodes_featureids"), np.asarray(node.attr("nodes_modes")).reshape(-1)
    tnode, fnode = node.attr("nodes_truenodeids"), node.attr("nodes_falsenodeids")
    tleaf, fleaf = node.attr("nodes_trueleafs"), node.attr("nodes_falseleafs")
    lw, lt = np.asarray(node.attr("leaf_weights")).reshape(-1), node.attr("leaf_targetids")
    roots, nt = node.attr("tree_roots"), node.attr("n_targets")
    missing = node.attr("nodes_missing_value_tracks_true", None)
    members = np.asarray(node.attr("membership_values", np.zeros(0))).reshape(-1)
    sets: dict[int, list[float]] = {}
    it = iter(members.tolist())
    for i, m in enumerate(modes):
        if m == 6:
            vals = []
            for v in it:
                if np.isnan(v):
                    break
                vals.append(v)
            sets[i] = vals
    xf = x.cast(dtypes.float64) if x.dtype != dtypes.float64 else x
    conds: dict[int, Tensor] = {}

    def cond(i: int) -> Tensor:
        if i not in conds:
            col, s = xf[:, feats[i]], float(splits[i])
            m = int(modes[i])
            c = {0: lambda: col <= s, 1: lambda: col < s, 2: lambda: col >= s, 3: lambda: col > s,
                 4: lambda: col == s, 5: lambda: col != s}.get(m)
            if m == 6:
                r = Tensor.full(tuple(col.shape), False, dtype=dtypes.bool, device=x.device)
                for v in sets.get(i, []):
                    r = r | (col == v)
                res = r
            elif c is None:
                raise node.error(f"unknown node mode {m}")
            else:
                res = c()
            if missing is not None and missing[i]:
                res = res | col.isnan()
            conds[i] = res
        return conds[i]

    n = x.shape[0]
    vals, tids = [], []
    for root in roots:
        if tleaf[root] and fleaf[root] and tnode[root] == fnode[root]:
            paths = [(root, [])]
        else:
            paths, stack = [], [(root, [])]
            while stack:  # iterate (no recursion): (interior node, path of (node, went_true))
                i, path = stack.pop()
                for went, child, is_leaf in ((True, tnode[i], tleaf[i]), (False, fnode[i], fleaf[i])):
                    p = path + [(i, went)]
                    (paths if is_leaf else stack).append((child, p))
        val: Tensor | float = 0.0
        tid: Tensor | float = 0.0
        for leaf, path in paths:
            ind: Tensor | None = None
            for i, went in path:
                c = cond(i) if went else cond(i).logical_not()
                ind = c if ind is None else ind & c
            sel = ind.cast(dtypes.float64) if ind is not None else 1.0
            val = val + sel * float(lw[leaf])
            tid = tid + sel * float(lt[leaf])
        vals.append(val if isinstance(val, Tensor) else Tensor.full((n,), val, dtype=dtypes.float64, device=x.device))
        tids.append(tid if isinstance(tid, Tensor) else Tensor.full((n,), tid, dtype=dtypes.float64, device=x.device))
    targets = Tensor.arange(nt, dtype=dtypes.float64, device=x.device).reshape(1, nt)
    big = float(np.finfo(np.float64).max)
    out: Tensor | None = None
    for v, t in zip(vals, tids, strict=True):
        hit = t.reshape(n, 1) == targets
        vv = v.reshape(n, 1)
        if agg in (0, 1):
            contrib = hit.where(vv / (len(roots) if agg == 0 else 1), 0.0)
            out = contrib if out is None else out + contrib
        elif agg in (2, 3):
            init = Tensor.full((n, nt), big if agg == 2 else -big, dtype=dtypes.float64, device=x.device)
            cur = init if out is None else out
            out = hit.where(cur.minimum(vv) if agg == 2 else cur.maximum(vv), cur)
        else:
            raise node.error(f"unknown aggregate_function {agg}")
    if out is None:
        out = Tensor.zeros(n, nt, dtype=dtypes.float64, device=x.device)
    if agg in (2, 3):  # targets no tree reached keep the dtype's extreme (the reference starts from it)
        fin = np.finfo(np.float32 if x.dtype != dtypes.float64 else np.float64)
        out = (out == (big if agg == 2 else -big)).where(float(fin.max if agg == 2 else fin.min), out)
    return out.cast(x.dtype)
