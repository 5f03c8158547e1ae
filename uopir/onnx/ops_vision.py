"""ONNX spatial sampling and detection operators on the Tensor API: AffineGrid and GridSample (taps as a one-hot
weight matrix applied by a matmul), RoiAlign (host-built weights per region) and NonMaxSuppression (computed on the
host from its realized inputs, as NonZero: its output shape depends on the values).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.onnx.ops_nn import float_t
from uopir.onnx.ops_shape import const_tensor, host, opt, req, scalar, take
from uopir.onnx.registry import Node, const_ints, onnx_op


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
    g = float_t(grid).reshape(n, p, nd)
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
    xf = float_t(x).reshape(n, c, hw)
    out = xf @ weights.cast(xf.dtype).transpose(1, 2)  # type: ignore[union-attr]
    return out.reshape((n, c) + out_sp).cast(x.dtype)


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
    xs = take(float_t(x), 0, bidx).reshape(r, c, h * w)
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
