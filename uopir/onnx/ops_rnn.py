"""ONNX recurrent layers (RNN, GRU, LSTM) on the Tensor API, one realize per time step (the sequence length is static
here). The input projection of every step is one matmul, realized first; a step reads its row through a bound
variable and realizes its state, so every step is the same program on other buffers: lowered and compiled once, not
one distinct kernel per step of a graph unrolled whole (which took ~40 s to compile for a 2-layer, 20-step LSTM).
An LSTM step is two kernels (the cell state, written in place, with its three gate matmuls fused; then h with the
output gate's), a GRU step one (linear_before_reset) or two, an RNN step one. A captured JIT (`from_onnx(jit=True)`)
replays every step's kernels in its one native launch-graph call, at ~10 ns a graph entry: the steps need no loop
construct of their own; the step kernels' own time is what counts, so W and R are read transposed (see `_run`).

Layout 0: X (seq, batch, input), Y (seq, num_directions, batch, hidden), states (num_directions, batch, hidden);
layout 1: X (batch, seq, input), Y (batch, seq, num_directions, hidden), states (batch, num_directions, hidden).
Gate order in W/R/B: GRU z, r, h; LSTM i, o, f, c. `sequence_lens`: a batch entry's state stops changing after its
length and its Y rows there are 0 (the reverse direction starts at its last valid step).
"""
from __future__ import annotations

from collections.abc import Callable

from uopir.frontend.tensor import Tensor
from uopir.frontend.variable import Variable
from uopir.ir.dtype import dtypes
from uopir.onnx.ops_shape import opt, req
from uopir.onnx.registry import Node, onnx_op

Act = Callable[[Tensor], Tensor]
Commit = Callable[[Tensor], Tensor]  # LSTM: writes the new cell state into its buffer, gives the tensor to read it


def _activation(node: Node, name: str, alpha: float | None, beta: float | None) -> Act:
    n = name.lower()
    if n == "tanh":
        return lambda x: x.tanh()
    if n == "sigmoid":
        return lambda x: x.sigmoid()
    if n == "relu":
        return lambda x: x.relu()
    if n == "affine":
        return lambda x: x * (1.0 if alpha is None else alpha) + (0.0 if beta is None else beta)
    if n == "leakyrelu":
        return lambda x: x.leaky_relu(0.01 if alpha is None else alpha)
    if n == "thresholdedrelu":
        a = 1.0 if alpha is None else alpha
        return lambda x: (x > a).where(x, 0.0)
    if n == "scaledtanh":
        return lambda x: (x * (1.0 if beta is None else beta)).tanh() * (1.0 if alpha is None else alpha)
    if n == "hardsigmoid":
        return lambda x: (x * (0.2 if alpha is None else alpha) + (0.5 if beta is None else beta)).clip(0, 1)
    if n == "elu":
        return lambda x: x.elu(1.0 if alpha is None else alpha)
    if n == "softsign":
        return lambda x: x / (1 + x.abs())
    if n == "softplus":
        return lambda x: x.softplus()
    raise node.error(f"unsupported activation {name!r}")


def _acts(node: Node, defaults: list[str], ndir: int) -> list[list[Act]]:
    names = node.attr("activations", defaults * ndir)
    if len(names) == len(defaults):
        names = names * ndir
    if len(names) != len(defaults) * ndir:
        raise node.error(f"activations {names} needs {len(defaults)} per direction")
    alphas, betas = node.attr("activation_alpha", []), node.attr("activation_beta", [])
    fns = [_activation(node, nm, alphas[i] if i < len(alphas) else None, betas[i] if i < len(betas) else None)
           for i, nm in enumerate(names)]
    k = len(defaults)
    return [fns[d * k:(d + 1) * k] for d in range(ndir)]


def _run(node: Node, inputs: list, gates: int, defaults: list[str],
         cell: Callable[..., tuple[Tensor, Tensor | None]]) -> list[Tensor]:
    x, w, r = req(node, inputs, 0), req(node, inputs, 1, "W"), req(node, inputs, 2, "R")
    b, lens, h0 = opt(inputs, 3), opt(inputs, 4), opt(inputs, 5)
    c0 = opt(inputs, 6) if node.op_type == "LSTM" else None
    p = opt(inputs, 7) if node.op_type == "LSTM" else None
    layout = node.attr("layout", 0)
    direction = node.attr("direction", "forward")
    ndir = 2 if direction == "bidirectional" else 1
    hs = node.attr("hidden_size", r.shape[-1])
    if layout:
        x = x.transpose(0, 1)
        h0 = h0.transpose(0, 1) if h0 is not None else None
        c0 = c0.transpose(0, 1) if c0 is not None else None
    seq, batch, _ = x.shape
    clip = node.attr("clip", None)
    acts = _acts(node, defaults, ndir)
    dt = x.dtype
    mask = None
    if lens is not None:
        steps = Tensor.arange(seq, dtype=dtypes.int64, device=x.device).reshape(seq, 1, 1)
        mask = steps < lens.cast(dtypes.int64).reshape(1, batch, 1)  # (seq, batch, 1)
    ys, hs_out, cs_out = [], [], []
    lstm = node.op_type == "LSTM"
    for d in range(ndir):
        wd, rd = w[d], r[d]
        bd = b[d] if b is not None else Tensor.zeros(2 * gates * hs, dtype=dt, device=x.device)
        wb, rb = bd[:gates * hs], bd[gates * hs:]
        h = h0[d] if h0 is not None else Tensor.zeros(batch, hs, dtype=dt, device=x.device)
        c = c0[d] if c0 is not None else Tensor.zeros(batch, hs, dtype=dt, device=x.device)
        pd = p[d] if p is not None else None
        # the weights transposed into their own buffers, (in, gates*hs) and (hs, gates*hs): a kernel's vector of
        # outputs then reads a contiguous row of them per reduction index (one vector load and a broadcast-FMA)
        # instead of gathering a strided column of W or R lane by lane (the LSTM step kernel took ~2 us that way)
        wt, rt = wd.transpose(0, 1).contiguous(), rd.transpose(0, 1).contiguous()
        Tensor.realize_all(wt, rt)
        # every step's input projection as one matmul, realized so a step reads it through the bound step variable
        xw = (x @ wt + wb).realize()  # (seq, batch, gates*hs)
        # the state is realized before the first step and after each one: every step is then the same program on
        # other buffers and another value of `step`, lowered and compiled once. c (a view of c0, or zeros) gets a
        # fresh buffer here, so the steps' in-place writes never touch an input
        Tensor.realize_all(h, *([c] if lstm else []))
        reverse = direction == "reverse" or d == 1
        outs: list[Tensor | None] = [None] * seq
        step = Variable("onnx_rnn_step", 0, max(seq - 1, 0))
        for t in (reversed(range(seq)) if reverse else range(seq)):
            v = step.bind(t)
            xt = xw.shrink(((v, v + 1), None, None)).reshape(batch, gates * hs)
            m = None if mask is None else mask.shrink(((v, v + 1), None, None)).reshape(batch, 1)

            def commit(cn: Tensor, c: Tensor = c, m: Tensor | None = m) -> Tensor:
                return c.assign(cn if m is None else m.where(cn, c))  # in place: each element reads only itself

            hn, _ = cell(xt, h, c, rt, rb, pd, hs, acts[d], clip, commit)
            out = hn
            if m is not None:
                out = m.where(hn, 0.0).cast(dt)
                hn = m.where(hn, h)
            h = hn
            Tensor.realize_all(h, *([c] if lstm else []), *([out] if m is not None else []))
            outs[t] = out
        ys.append(Tensor.stack(*outs, dim=0))  # type: ignore[arg-type]
        hs_out.append(h)
        cs_out.append(c)
    y = Tensor.stack(*ys, dim=1)  # (seq, ndir, batch, hs)
    yh, yc = Tensor.stack(*hs_out, dim=0), Tensor.stack(*cs_out, dim=0)
    if layout:
        y, yh, yc = y.permute(2, 0, 1, 3), yh.transpose(0, 1), yc.transpose(0, 1)
    return [y, yh, yc] if node.op_type == "LSTM" else [y, yh]


def _clip(v: Tensor, clip: float | None) -> Tensor:
    return v if clip is None else v.clip(-clip, clip)


def _gate(xw: Tensor, h: Tensor, rt: Tensor, rb: Tensor, k: int, hs: int) -> Tensor:
    """Gate k's pre-activation: a matmul of its own (not a slice of one (batch, gates*hs) product), so the scheduler
    fuses its reduction into the step's elementwise kernel instead of realizing the product first. `rt` is R
    transposed, (hs, gates*hs)."""
    lo, hi = k * hs, (k + 1) * hs
    return xw[:, lo:hi] + h @ rt[:, lo:hi] + rb[lo:hi]


def _rnn_cell(xw: Tensor, h: Tensor, c: Tensor, rt: Tensor, rb: Tensor, p: Tensor | None, hs: int,
              acts: list[Act], clip: float | None, commit: Commit) -> tuple[Tensor, None]:
    return acts[0](_clip(xw + h @ rt + rb, clip)), None


def _gru_cell(lbr: bool) -> Callable[..., tuple[Tensor, None]]:
    def cell(xw: Tensor, h: Tensor, c: Tensor, rt: Tensor, rb: Tensor, p: Tensor | None, hs: int,
             acts: list[Act], clip: float | None, commit: Commit) -> tuple[Tensor, None]:
        f, g = acts
        rz, rr, rh = rt[:, :hs], rt[:, hs:2 * hs], rt[:, 2 * hs:]
        bz, br, bh = rb[:hs], rb[hs:2 * hs], rb[2 * hs:]
        z = f(_clip(xw[:, :hs] + h @ rz + bz, clip))
        rg = f(_clip(xw[:, hs:2 * hs] + h @ rr + br, clip))
        if lbr:
            hh = g(_clip(xw[:, 2 * hs:] + rg * (h @ rh + bh), clip))
        else:
            hh = g(_clip(xw[:, 2 * hs:] + (rg * h) @ rh + bh, clip))
        return (1 - z) * hh + z * h, None
    return cell


def _lstm_cell(input_forget: bool) -> Callable[..., tuple[Tensor, Tensor]]:
    def cell(xw: Tensor, h: Tensor, c: Tensor, rt: Tensor, rb: Tensor, p: Tensor | None, hs: int,
             acts: list[Act], clip: float | None, commit: Commit) -> tuple[Tensor, Tensor]:
        f, g, hact = acts
        pi_, po_, pf_, pc_ = (_gate(xw, h, rt, rb, k, hs) for k in range(4))  # gates i, o, f, c
        pi, po, pf = (p[:hs], p[hs:2 * hs], p[2 * hs:]) if p is not None else (None, None, None)
        i_in = pi_ + (pi * c if pi is not None else 0)
        f_in = pf_ + (pf * c if pf is not None else 0)
        it = f(_clip(i_in, clip))
        ft = 1 - it if input_forget else f(_clip(f_in, clip))
        ct = g(_clip(pc_, clip))
        cn = commit(ft * c + it * ct)  # the state buffer, which h reads back
        ot = f(_clip(po_ + (po * cn if po is not None else 0), clip))
        return ot * hact(cn), cn
    return cell


@onnx_op("RNN", since=7)
def rnn(node: Node, inputs: list) -> list[Tensor]:
    return _run(node, inputs, 1, ["Tanh"], _rnn_cell)


@onnx_op("GRU", since=7)
def gru(node: Node, inputs: list) -> list[Tensor]:
    return _run(node, inputs, 3, ["Sigmoid", "Tanh"], _gru_cell(bool(node.attr("linear_before_reset", 0))))


@onnx_op("LSTM", since=7)
def lstm(node: Node, inputs: list) -> list[Tensor]:
    return _run(node, inputs, 4, ["Sigmoid", "Tanh", "Tanh"], _lstm_cell(bool(node.attr("input_forget", 0))))


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
