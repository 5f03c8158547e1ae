"""The plain layers (Linear, Embedding, Dropout) and the parameter helpers every layer family shares."""
from __future__ import annotations

import math

import numpy as np

from uopir.frontend.indexing import pick
from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import DType, dtypes

__all__ = ["Linear", "Embedding", "Dropout"]


def _buffer(value: float, *shape: int, dtype: DType = dtypes.float32) -> Tensor:
    """A realized buffer filled with `value` (a const would not be assignable in place)."""
    return Tensor(np.full(shape, value), dtype=dtype).realize()


def _statistic(value: float, *shape: int, dtype: DType = dtypes.float32) -> Tensor:
    """A realized buffer that is state, not a parameter: an optimizer keeps it as a buffer and does not train it."""
    t = _buffer(value, *shape, dtype=dtype)
    t.requires_grad = False
    return t


def _bias(n: int, fan_in: int) -> Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), torch's and tinygrad's bias initialisation."""
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return Tensor.uniform(n, low=-bound, high=bound)


class Linear:
    """y = x @ weight.T + bias; weight (out_features, in_features) as torch/tinygrad."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        self.weight = Tensor.kaiming_uniform(out_features, in_features, a=math.sqrt(5))
        self.bias = _bias(out_features, in_features) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.transpose(), self.bias)


class Embedding:
    """Rows of weight (vocab_size, embed_size) picked by integer indices, as a one-hot pick (differentiable; the
    compiler reads one row per index, bit for bit); an index outside [0, vocab_size) picks a row of zeros."""

    def __init__(self, vocab_size: int, embed_size: int) -> None:
        self.vocab_sz, self.embed_sz = vocab_size, embed_size
        self.weight = Tensor.glorot_uniform(vocab_size, embed_size)

    def __call__(self, idx: Tensor) -> Tensor:
        if not isinstance(idx, Tensor):
            idx = Tensor(idx)
        if not idx.dtype.is_int:
            raise TypeError(f"Embedding needs integer indices, got {idx.dtype!r}")
        hot = idx.unsqueeze(-1) == Tensor.arange(self.vocab_sz, device=idx.device)
        n, d = self.vocab_sz, self.embed_sz
        rows = self.weight.reshape((1,) * idx.ndim + (n, d)).expand(idx.shape + (n, d))
        return pick(rows, hot.unsqueeze(-1), (idx.ndim,))


class Dropout:
    """Zero each element with probability p and scale the rest by 1/(1-p) while Tensor.training; identity else."""

    def __init__(self, p: float = 0.5) -> None:
        if not 0 <= p < 1:
            raise ValueError(f"Dropout probability must be in [0, 1), got {p}")
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)
