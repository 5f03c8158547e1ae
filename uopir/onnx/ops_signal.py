"""ONNX signal-processing operators: DFT and STFT (float64 matmuls with host cos/sin matrices), MelWeightMatrix and
the Hann/Hamming/Blackman windows (host-computed values)."""
from __future__ import annotations

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.onnx.importer import to_tensor
from uopir.onnx.ops_shape import axis_of, opt, req, scalar, take
from uopir.onnx.registry import Node, onnx_op
from uopir.onnx.types import onnx_dtype


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


def _window(name: str, f) -> None:  # noqa: ANN001
    """Hann/Hamming/Blackman windows: the size is a scalar input read at import; the values are computed on the host
    in float64 as onnx's reference does and cast to output_datatype."""
    @onnx_op(name, since=17)
    def op(node: Node, inputs: list) -> Tensor:
        from uopir.frontend.dtype_promotion import to_np
        from uopir.onnx.registry import const_ints
        size = const_ints(node, inputs[0] if inputs else None, "size")[0]
        n_1 = size if node.attr("periodic", 1) else size - 1
        d = onnx_dtype(int(node.attr("output_datatype", 1)))
        ni = np.arange(size, dtype=to_np(d) if d != dtypes.bfloat16 else np.float32)
        return to_tensor(np.asarray(f(ni, n_1)), d, node.device)


_window("HannWindow", lambda n, N: np.sin(n * np.pi / N) ** 2)
_window("HammingWindow", lambda n, N: 25.0 / 46.0 - np.cos(n * np.pi * 2 / N) * (1 - 25.0 / 46.0))
_window("BlackmanWindow", lambda n, N: np.cos((n * (np.pi * 2)) / N) * -0.5 + np.cos((n * (np.pi * 4)) / N) * 0.08
        + 0.42)
