"""uopir.nn: the layers a tinygrad user expects, as plain classes holding parameter Tensors; optimizers in
uopir.nn.optim and weights (state dicts, safetensors files) in uopir.nn.state, as tinygrad's `tinygrad.nn`.

A layer is a callable object whose Tensor attributes are its parameters (nn.state.get_parameters finds them by
walking the object). Constructor signatures and default initialisations follow tinygrad's: Linear and Conv2d draw
their weight from kaiming_uniform(a=sqrt(5)) and their bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), norms start at
weight 1 and bias 0, Embedding from glorot_uniform. Every parameter and running statistic is a realized buffer from
the start, so an optimizer or a statistic update can assign to it in place.

BatchNorm in training (Tensor.training) normalizes with the batch statistics (biased variance) and, when it tracks
running statistics, updates them as torch and tinygrad do: running = (1 - momentum) * running + momentum * batch, the
variance unbiased (n / (n - 1)); the update is realized at the call (a small program of its own that computes the
batch statistics; the layer's output stays lazy, so gradients flow through it). In eval it uses the running
statistics (or, without them, the batch's).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import DType, dtypes
from uopir.nn import optim, state

__all__ = ["Linear", "Conv2d", "BatchNorm", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding", "Dropout", "optim",
           "state"]


def _buffer(value: float, *shape: int, dtype: DType = dtypes.float32) -> Tensor:
    """A realized buffer filled with `value` (a const would not be assignable in place)."""
    return Tensor(np.full(shape, value), dtype=dtype).realize()


def _bias(n: int, fan_in: int) -> Tensor:
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return Tensor.uniform(n, low=-bound, high=bound)


class Linear:
    """y = x @ weight.T + bias; weight (out_features, in_features) as torch/tinygrad."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        self.weight = Tensor.kaiming_uniform(out_features, in_features, a=math.sqrt(5))
        self.bias = _bias(out_features, in_features) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.transpose(), self.bias)


class Conv2d:
    """A 2-d convolution; weight (out_channels, in_channels // groups, kh, kw)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], stride: int = 1,
                 padding: int | Sequence[int] = 0, dilation: int = 1, groups: int = 1, bias: bool = True) -> None:
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        self.kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = Tensor.kaiming_uniform(out_channels, in_channels // groups, *self.kernel_size, a=math.sqrt(5))
        self.bias = _bias(out_channels, in_channels // groups * math.prod(self.kernel_size)) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                        padding=self.padding)


class BatchNorm:
    """Batch normalization over every axis but 1 (BatchNorm1d/2d/3d alike)."""

    def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
                 momentum: float = 0.1) -> None:
        self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
        self.weight: Tensor | None = _buffer(1.0, sz) if affine else None
        self.bias: Tensor | None = _buffer(0.0, sz) if affine else None
        self.num_batches_tracked = _buffer(0, 1, dtype=dtypes.int32)
        self.num_batches_tracked.requires_grad = False  # statistics, not parameters: an optimizer keeps them as buffers
        if track_running_stats:
            self.running_mean, self.running_var = _buffer(0.0, sz), _buffer(1.0, sz)
            self.running_mean.requires_grad = self.running_var.requires_grad = False

    def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, 1/sqrt(var + eps)) over the batch axes (biased variance), each of shape (sz,)."""
        axes = tuple(i for i in range(x.ndim) if i != 1)
        mean = x.mean(axis=axes)
        y = x - mean.reshape((1, -1) + (1,) * (x.ndim - 2))
        var = (y * y).mean(axis=axes)
        return mean, var

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2:
            raise ValueError(f"BatchNorm needs an input of at least 2 dims (batch, channels, ...), got {x.shape}")
        sz = (self.weight if self.weight is not None else getattr(self, "running_mean", None))
        if sz is not None and x.shape[1] != sz.shape[0]:
            raise ValueError(f"BatchNorm of {sz.shape[0]} channels got an input with {x.shape[1]} on axis 1")
        if Tensor.training or not self.track_running_stats:
            mean, var = self.calc_stats(x)
            if Tensor.training and self.track_running_stats:
                n = math.prod(x.shape) // x.shape[1]
                bm, bv = mean.detach(), var.detach()
                m = self.momentum
                self.running_mean.assign((1 - m) * self.running_mean + m * bm.cast(self.running_mean.dtype))
                unbiased = bv * (n / (n - 1)) if n > 1 else bv
                self.running_var.assign((1 - m) * self.running_var + m * unbiased.cast(self.running_var.dtype))
                self.num_batches_tracked.assign(self.num_batches_tracked + 1)
                Tensor.realize_all(self.running_mean, self.running_var, self.num_batches_tracked)
        else:
            mean, var = self.running_mean, self.running_var
        return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())


BatchNorm2d = BatchNorm


class LayerNorm:
    """Normalize over the last len(normalized_shape) axes, then weight * x + bias (elementwise_affine)."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True) -> None:
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.axis = tuple(-1 - i for i in range(len(self.normalized_shape)))
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = _buffer(1.0, *self.normalized_shape) if elementwise_affine else None
        self.bias = _buffer(0.0, *self.normalized_shape) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        n = len(self.normalized_shape)
        if tuple(x.shape[-n:]) != self.normalized_shape:
            raise ValueError(f"LayerNorm over {self.normalized_shape} got an input of shape {x.shape}")
        x = x.layernorm(eps=self.eps, axis=self.axis)
        if not self.elementwise_affine:
            return x
        return x * self.weight + self.bias


class GroupNorm:
    """Normalize each of num_groups groups of channels (axis 1) over the group and the spatial axes."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True) -> None:
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = _buffer(1.0, num_channels) if affine else None
        self.bias = _buffer(0.0, num_channels) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm of {self.num_channels} channels got an input of shape {x.shape}")
        x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        if self.weight is None or self.bias is None:
            return x
        bshape = (1, -1) + (1,) * (x.ndim - 2)
        return x * self.weight.reshape(bshape) + self.bias.reshape(bshape)


class Embedding:
    """Rows of weight (vocab_size, embed_size) picked by integer indices, as a one-hot matmul (differentiable)."""

    def __init__(self, vocab_size: int, embed_size: int) -> None:
        self.vocab_sz, self.embed_sz = vocab_size, embed_size
        self.weight = Tensor.glorot_uniform(vocab_size, embed_size)

    def __call__(self, idx: Tensor) -> Tensor:
        if not isinstance(idx, Tensor):
            idx = Tensor(idx)
        if not idx.dtype.is_int:
            raise TypeError(f"Embedding needs integer indices, got {idx.dtype!r}")
        hot = (idx.unsqueeze(-1) == Tensor.arange(self.vocab_sz, device=idx.device)).cast(self.weight.dtype)
        return hot @ self.weight


class Dropout:
    """Zero each element with probability p and scale the rest by 1/(1-p) while Tensor.training; identity else."""

    def __init__(self, p: float = 0.5) -> None:
        if not 0 <= p < 1:
            raise ValueError(f"Dropout probability must be in [0, 1), got {p}")
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)
