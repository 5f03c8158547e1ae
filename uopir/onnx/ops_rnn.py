"""ONNX RNN, GRU and LSTM (opset 7+), unrolled over the sequence while the graph is built: one set of gate matmuls
per time step and direction (forward, reverse, bidirectional), layout 0 (seq, batch, .) or 1 (batch, seq, .),
optional bias, initial states, LSTM peepholes, clip and the activations Sigmoid/Tanh/Relu/HardSigmoid/Affine/
LeakyRelu/ThresholdedRelu/ScaledTanh/Elu/Softsign/Softplus. sequence_lens shorter than the sequence are honoured
forward (a finished batch row keeps its state and outputs zeros); in reverse they must equal the sequence length."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from uopir.onnx.ops_elementwise import _req
from uopir.onnx.registry import Node, const_ints, onnx_op

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor

Act = Callable[["Tensor"], "Tensor"]


def _activation(node: Node, name: str, alpha: float | None, beta: float | None) -> Act:
    n = name.lower()
    if n == "sigmoid":
        return lambda x: x.sigmoid()
    if n == "tanh":
        return lambda x: x.tanh()
    if n == "relu":
        return lambda x: x.relu()
    if n == "hardsigmoid":
        a, b = alpha if alpha is not None else 0.2, beta if beta is not None else 0.5
        return lambda x: (x * a + b).clip(0, 1)
    if n == "affine":
        a, b = alpha if alpha is not None else 1.0, beta if beta is not None else 0.0
        return lambda x: x * a + b
    if n == "leakyrelu":
        a = alpha if alpha is not None else 0.01
        return lambda x: x.leaky_relu(a)
    if n == "thresholdedrelu":
        a = alpha if alpha is not None else 1.0
        return lambda x: (x > a).where(x, 0)
    if n == "scaledtanh":
        a, b = alpha if alpha is not None else 1.0, beta if beta is not None else 1.0
        return lambda x: (x * b).tanh() * a
    if n == "elu":
        a = alpha if alpha is not None else 1.0
        return lambda x: x.elu(a)
    if n == "softsign":
        return lambda x: x / (1 + x.abs())
    if n == "softplus":
        return lambda x: x.softplus()
    raise node.error(f"unsupported activation '{name}'")


def _acts(node: Node, defaults: list[str], n_dir: int) -> list[list[Act]]:
    names = node.attr("activations", None) or defaults * n_dir
    if len(names) == len(defaults) and n_dir == 2:
        names = names * 2
    if len(names) != len(defaults) * n_dir:
        raise node.error(f"expected {len(defaults) * n_dir} activations, got {len(names)}")
    alphas = node.attr("activation_alpha", [])
    betas = node.attr("activation_beta", [])
    fs = [_activation(node, nm, alphas[i] if i < len(alphas) else None, betas[i] if i < len(betas) else None)
          for i, nm in enumerate(names)]
    k = len(defaults)
    return [fs[d * k:(d + 1) * k] for d in range(n_dir)]


def _run(node: Node, inputs: list, gates: int, defaults: list[str], cell: Callable, has_c: bool) -> list:
    from uopir.frontend.tensor import Tensor
    x, w, r = _req(node, inputs, 0), _req(node, inputs, 1), _req(node, inputs, 2)
    b = inputs[3] if len(inputs) > 3 else None
    lens_t = inputs[4] if len(inputs) > 4 else None
    h0 = inputs[5] if len(inputs) > 5 else None
    c0 = inputs[6] if len(inputs) > 6 and has_c else None
    p = inputs[7] if len(inputs) > 7 and has_c else None
    layout = node.attr("layout", 0)
    if layout:
        x = x.permute(1, 0, 2)
        h0 = None if h0 is None else h0.permute(1, 0, 2)
        c0 = None if c0 is None else c0.permute(1, 0, 2)
    direction = node.attr("direction", "forward")
    dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(direction)
    if dirs is None:
        raise node.error(f"unknown direction '{direction}'")
    hs = node.attr("hidden_size", None) or r.shape[-1]
    seq, batch = x.shape[0], x.shape[1]
    clip = node.attr("clip", None)
    acts = _acts(node, defaults, len(dirs))
    lens = const_ints(node, lens_t, "sequence_lens") if lens_t is not None else [seq] * batch
    ragged = any(n != seq for n in lens)
    if ragged and any(dirs):
        raise node.error("sequence_lens shorter than the sequence with a reverse direction is unsupported")
    lens_col = Tensor(lens, device=x.device).reshape(batch, 1) if ragged else None
    ys, hs_out, cs_out = [], [], []
    for d, rev in enumerate(dirs):
        wd, rd = w[d], r[d]  # (gates*hs, in), (gates*hs, hs)
        bias = None if b is None else b[d][:gates * hs] + b[d][gates * hs:]
        bias_w = None if b is None else b[d][:gates * hs]
        bias_r = None if b is None else b[d][gates * hs:]
        h = h0[d] if h0 is not None else Tensor.zeros(batch, hs, dtype=x.dtype, device=x.device)
        c = (c0[d] if c0 is not None else Tensor.zeros(batch, hs, dtype=x.dtype, device=x.device)) if has_c else None
        pd = p[d] if p is not None else None
        outs: list[Tensor | None] = [None] * seq
        for step in range(seq):
            t = seq - 1 - step if rev else step
            xw = x[t] @ wd.T
            hr = h @ rd.T
            h_new, c_new = cell(xw, hr, bias, bias_w, bias_r, h, c, pd, hs, acts[d], clip, node, rd)
            if ragged:
                live = t < lens_col
                h_new = live.where(h_new, h)
                c_new = None if c_new is None else live.where(c_new, c)
                outs[t] = live.where(h_new, 0.0).cast(x.dtype)
            else:
                outs[t] = h_new
            h, c = h_new, c_new
        ys.append(Tensor.stack(*outs))  # (seq, batch, hs)
        hs_out.append(h)
        cs_out.append(c)
    y = Tensor.stack(*ys, dim=1)  # (seq, dirs, batch, hs)
    yh = Tensor.stack(*hs_out)
    yc = Tensor.stack(*cs_out) if has_c else None
    if layout:
        y = y.permute(2, 0, 1, 3)
        yh = yh.permute(1, 0, 2)
        yc = None if yc is None else yc.permute(1, 0, 2)
    return [y, yh, yc] if has_c else [y, yh]


def _clip(t: Tensor, clip: float | None) -> Tensor:
    return t if clip is None else t.clip(-clip, clip)


def _rnn_cell(xw, hr, bias, bw, br, h, c, p, hs, acts, clip, node, rd):  # noqa: ANN001, ANN202
    z = xw + hr + (0 if bias is None else bias)
    return acts[0](_clip(z, clip)), None


def _gru_cell(xw, hr, bias, bw, br, h, c, p, hs, acts, clip, node, rd):  # noqa: ANN001, ANN202
    f, g = acts
    lbr = node.attr("linear_before_reset", 0)
    wz, wr, wh = xw[:, :hs], xw[:, hs:2 * hs], xw[:, 2 * hs:]
    if bw is not None:
        wz, wr, wh = wz + bw[:hs], wr + bw[hs:2 * hs], wh + bw[2 * hs:]
    rz, rr = hr[:, :hs], hr[:, hs:2 * hs]
    if br is not None:
        rz, rr = rz + br[:hs], rr + br[hs:2 * hs]
    z = f(_clip(wz + rz, clip))
    r = f(_clip(wr + rr, clip))
    rd_h = hr[:, 2 * hs:] + (0 if br is None else br[2 * hs:])
    if lbr:
        hh = g(_clip(wh + r * rd_h, clip))
    else:
        # the reset applies before the recurrent matmul: (r * h) @ Rh^T
        hh = g(_clip(wh + (r * h) @ rd[2 * hs:].T + (0 if br is None else br[2 * hs:]), clip))
    return (1 - z) * hh + z * h, None


def _lstm_cell(xw, hr, bias, bw, br, h, c, p, hs, acts, clip, node, rd):  # noqa: ANN001, ANN202
    f, g, hf = acts
    z = xw + hr + (0 if bias is None else bias)
    zi, zo, zf, zc = z[:, :hs], z[:, hs:2 * hs], z[:, 2 * hs:3 * hs], z[:, 3 * hs:]
    if p is not None:
        zi, zf = zi + p[:hs] * c, zf + p[2 * hs:] * c
    if node.attr("input_forget", 0):
        i = f(_clip(zi, clip))
        fg = 1 - i
    else:
        i, fg = f(_clip(zi, clip)), f(_clip(zf, clip))
    ct = g(_clip(zc, clip))
    c_new = fg * c + i * ct
    if p is not None:
        zo = zo + p[hs:2 * hs] * c_new
    o = f(_clip(zo, clip))
    return o * hf(c_new), c_new


@onnx_op("RNN", since=7)
def rnn(node: Node, inputs: list) -> list:
    return _run(node, inputs, 1, ["Tanh"], _rnn_cell, False)


@onnx_op("GRU", since=7)
def gru(node: Node, inputs: list) -> list:
    return _run(node, inputs, 3, ["Sigmoid", "Tanh"], _gru_cell, False)


@onnx_op("LSTM", since=7)
def lstm(node: Node, inputs: list) -> list:
    return _run(node, inputs, 4, ["Sigmoid", "Tanh", "Tanh"], _lstm_cell, True)
