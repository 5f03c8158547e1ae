"""Recurrent cells: LSTMCell with tinygrad's (and torch's) parameter names and gate order (input, forget, cell,
output)."""
from __future__ import annotations

import math

from uopir.frontend.tensor import Tensor
from uopir.nn.basic import _buffer

__all__ = ["LSTMCell"]


class LSTMCell:
    """One LSTM step: (h, c) -> (o * tanh(c'), c') with c' = f * c + i * g. Weights U(-1/sqrt(hidden_size),
    1/sqrt(hidden_size)), biases zero (tinygrad's; torch draws its biases from the same uniform)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True) -> None:
        stdv = 1.0 / math.sqrt(hidden_size)
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = Tensor.uniform(hidden_size * 4, input_size, low=-stdv, high=stdv)
        self.weight_hh = Tensor.uniform(hidden_size * 4, hidden_size, low=-stdv, high=stdv)
        self.bias_ih: Tensor | None = _buffer(0.0, hidden_size * 4) if bias else None
        self.bias_hh: Tensor | None = _buffer(0.0, hidden_size * 4) if bias else None

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """x (batch, input_size); hc the (h, c) state, each (batch, hidden_size), zeros when None."""
        if x.ndim != 2 or x.shape[1] != self.input_size:
            raise ValueError(f"LSTMCell of input_size {self.input_size} needs a (batch, {self.input_size}) input, got "
                             f"shape {x.shape}")
        if hc is None:
            zeros = Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            hc = (zeros, zeros)
        want = (x.shape[0], self.hidden_size)
        if len(hc) != 2 or any(tuple(t.shape) != want for t in hc):
            raise ValueError(f"LSTMCell state must be (h, c), each of shape {want}, got "
                             f"{[tuple(t.shape) for t in hc]}")
        gates = x.linear(self.weight_ih.T, self.bias_ih) + hc[0].linear(self.weight_hh.T, self.bias_hh)
        i, f, g, o = gates.chunk(4, dim=1)
        c = f.sigmoid() * hc[1] + i.sigmoid() * g.tanh()
        return o.sigmoid() * c.tanh(), c
