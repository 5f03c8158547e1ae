"""Normalization layers: BatchNorm (BatchNorm2d, BatchNorm3d), LayerNorm, LayerNorm2d, GroupNorm, InstanceNorm and
RMSNorm, with tinygrad's names, arguments, defaults and state-dict names.

BatchNorm in training (Tensor.training) normalizes with the batch statistics (biased variance) and, when it tracks
running statistics, updates them as torch and tinygrad do: running = (1 - momentum) * running + momentum * batch, the
variance unbiased (n / (n - 1)); the update is realized at the call (a small program of its own that computes the
batch statistics; the layer's output stays lazy, so gradients flow through it). In eval it uses the running
statistics (or, without them, the batch's)."""
from __future__ import annotations

import math
from collections.abc import Sequence

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.nn.basic import _buffer, _statistic

__all__ = ["BatchNorm", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "LayerNorm2d", "GroupNorm", "InstanceNorm",
           "RMSNorm"]


def _channel_affine(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """x * weight + bias with the 1-d parameters along axis 1 (the channels)."""
    if weight is None or bias is None:
        return x
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return x * weight.reshape(shape) + bias.reshape(shape)


class BatchNorm:
    """Batch normalization of the `sz` features along `axis` (1 by default: BatchNorm1d/2d/3d alike), the statistics
    over every other axis. num_batches_tracked is a 0-d int64 tensor, as torch's and tinygrad's."""

    def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
                 momentum: float = 0.1, *, axis: int = 1) -> None:
        self.eps, self.track_running_stats, self.momentum, self.axis = eps, track_running_stats, momentum, axis
        self.weight: Tensor | None = _buffer(1.0, sz) if affine else None
        self.bias: Tensor | None = _buffer(0.0, sz) if affine else None
        self.num_batches_tracked = _statistic(0, dtype=dtypes.int64)
        if track_running_stats:
            self.running_mean, self.running_var = _statistic(0.0, sz), _statistic(1.0, sz)

    def _axis(self, x: Tensor) -> int:
        if not -x.ndim <= self.axis < x.ndim or x.ndim < 2:
            raise ValueError(f"BatchNorm over axis {self.axis} needs an input of at least 2 dims with that axis, got "
                             f"shape {x.shape}")
        return self.axis % x.ndim

    def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, biased variance) over every axis but the feature axis, each of shape (sz,)."""
        ax = self._axis(x)
        axes = tuple(i for i in range(x.ndim) if i != ax)
        mean = x.mean(axis=axes)
        # the variance's derivative with respect to the mean is zero at the mean: detaching it drops a dead term
        y = x - mean.detach().reshape(tuple(s if i == ax else 1 for i, s in enumerate(x.shape)))
        return mean, (y * y).mean(axis=axes)

    def __call__(self, x: Tensor) -> Tensor:
        ax = self._axis(x)
        sz = self.weight if self.weight is not None else getattr(self, "running_mean", None)
        if sz is not None and x.shape[ax] != sz.shape[0]:
            raise ValueError(f"BatchNorm of {sz.shape[0]} channels got an input with {x.shape[ax]} on axis {ax}")
        if Tensor.training or not self.track_running_stats:
            mean, var = self.calc_stats(x)
            if Tensor.training and self.track_running_stats:
                n = math.prod(x.shape) // x.shape[ax]
                bm, bv = mean.detach(), var.detach()
                m = self.momentum
                self.running_mean.assign((1 - m) * self.running_mean + m * bm.cast(self.running_mean.dtype))
                unbiased = bv * (n / (n - 1)) if n > 1 else bv
                self.running_var.assign((1 - m) * self.running_var + m * unbiased.cast(self.running_var.dtype))
                self.num_batches_tracked.assign(self.num_batches_tracked + 1)
                Tensor.realize_all(self.running_mean, self.running_var, self.num_batches_tracked)
        else:
            mean, var = self.running_mean, self.running_var
        return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt(), axis=ax)


BatchNorm2d = BatchNorm3d = BatchNorm


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
            raise ValueError(f"{type(self).__name__} over {self.normalized_shape} got an input of shape {x.shape}")
        x = x.layernorm(eps=self.eps, axis=self.axis)
        if not self.elementwise_affine:
            return x
        return x * self.weight + self.bias


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channels (axis 1) of an (N, C, H, W) input, at each pixel (ConvNeXt's, tinygrad's)."""

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim != 4:
            raise ValueError(f"LayerNorm2d needs an (N, C, H, W) input, got shape {x.shape}")
        return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class GroupNorm:
    """Normalize each of num_groups groups of channels (axis 1) over the group and the spatial axes."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True) -> None:
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = _buffer(1.0, num_channels) if affine else None
        self.bias = _buffer(0.0, num_channels) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm of {self.num_channels} channels got an input of shape {x.shape}")
        x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        return _channel_affine(x, self.weight, self.bias)


class InstanceNorm:
    """Normalize each channel of each sample over its spatial axes; affine defaults to True (tinygrad's; torch's
    InstanceNorm2d defaults to False)."""

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True) -> None:
        self.num_features, self.eps = num_features, eps
        self.weight = _buffer(1.0, num_features) if affine else None
        self.bias = _buffer(0.0, num_features) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 3 or x.shape[1] != self.num_features:
            raise ValueError(f"InstanceNorm of {self.num_features} channels needs an (N, C, *spatial) input, got "
                             f"shape {x.shape}")
        x = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps).reshape(x.shape)
        return _channel_affine(x, self.weight, self.bias)


class RMSNorm:
    """x / sqrt(mean(x^2 over the last axis) + eps) * weight, computed in float32 and cast back (tinygrad's)."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True) -> None:
        self.dim, self.eps = dim, eps
        self.weight = _buffer(1.0, dim) if elementwise_affine else None

    def _norm(self, x: Tensor) -> Tensor:
        return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"RMSNorm over {self.dim} features got an input of shape {x.shape}")
        x = self._norm(x.float()).cast(x.dtype)
        return x if self.weight is None else x * self.weight
