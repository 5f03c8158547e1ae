"""Convolution layers: Conv2d (any number of spatial dims, its kernel_size's length), Conv1d, ConvTranspose2d and
ConvTranspose1d, with tinygrad's names, arguments and defaults. Conv1d and ConvTranspose1d are functions that return
the 2-d class with a 1-d kernel, as in tinygrad, so their state-dict names are the same (weight, bias)."""
from __future__ import annotations

import math
from collections.abc import Sequence

from uopir.frontend.tensor import Tensor
from uopir.nn.basic import _bias

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]

Size = int | Sequence[int]


def _per_dim(v: Size, nd: int, what: str) -> tuple[int, ...]:
    t = (v,) * nd if isinstance(v, int) else tuple(v)
    if len(t) != nd or not all(isinstance(i, int) for i in t):
        raise ValueError(f"Conv: {what} {v!r} must be an int or {nd} ints (one per spatial dim)")
    return t


def _string_padding(padding: str, kernel_size: tuple[int, ...], stride: Size, dilation: Size) -> Size:
    """torch's string paddings: 'valid' is none; 'same' keeps the spatial size at stride 1 by padding
    dilation * (k - 1) in all, the odd one at the end; returned in torch's flat order (last dim first)."""
    if padding == "valid":
        return 0
    if padding != "same":
        raise ValueError(f"Conv: invalid padding string {padding!r}, should be one of 'valid', 'same'")
    nd = len(kernel_size)
    if any(s != 1 for s in _per_dim(stride, nd, "stride")):
        raise ValueError(f"Conv: padding='same' is not supported for strided convolutions (stride {stride})")
    flat: list[int] = []
    for d, k in zip(reversed(_per_dim(dilation, nd, "dilation")), reversed(kernel_size), strict=True):
        total = d * (k - 1)
        flat += [total // 2, total - total // 2]
    return tuple(flat)


class Conv2d:
    """A convolution (cross-correlation) over len(kernel_size) spatial dims; weight (out_channels,
    in_channels // groups, *kernel_size). padding: an int, one per dim, torch's flat (left, right, top, bottom), or
    'same' / 'valid' (torch's rules: 'same' only at stride 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size, stride: Size = 1,
                 padding: Size | str = 0, dilation: Size = 1, groups: int = 1, bias: bool = True) -> None:
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        self.kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        if isinstance(padding, str):
            padding = _string_padding(padding, self.kernel_size, stride, dilation)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = Tensor.kaiming_uniform(out_channels, in_channels // groups, *self.kernel_size, a=math.sqrt(5))
        self.bias = _bias(out_channels, in_channels // groups * math.prod(self.kernel_size)) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                        padding=self.padding)


def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int | str = 0,  # noqa: N802
           dilation: int = 1, groups: int = 1, bias: bool = True) -> Conv2d:
    """A 1-d convolution over (N, C, L): a Conv2d with a 1-d kernel (tinygrad's)."""
    return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)


class ConvTranspose2d(Conv2d):
    """The transposed convolution (conv2d's gradient with respect to its input); weight (in_channels,
    out_channels // groups, *kernel_size) as torch's, initialised as torch does from that shape (bound
    1/sqrt(out_channels // groups * prod(kernel_size)) for weight and bias). Output size per dim:
    (i - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size, stride: Size = 1, padding: Size = 0,
                 output_padding: Size = 0, dilation: Size = 1, groups: int = 1, bias: bool = True) -> None:
        if isinstance(padding, str):
            raise ValueError(f"ConvTranspose2d: padding must be an int or ints, got {padding!r} (torch has no string "
                             "padding for transposed convolutions)")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
        self.output_padding = output_padding
        self.weight = Tensor.kaiming_uniform(in_channels, out_channels // groups, *self.kernel_size, a=math.sqrt(5))
        self.bias = _bias(out_channels, out_channels // groups * math.prod(self.kernel_size)) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride,
                                  dilation=self.dilation, padding=self.padding, output_padding=self.output_padding)


def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,  # noqa: N802
                    padding: int = 0, output_padding: int = 0, dilation: int = 1, groups: int = 1,
                    bias: bool = True) -> ConvTranspose2d:
    """A 1-d transposed convolution over (N, C, L): a ConvTranspose2d with a 1-d kernel (tinygrad's)."""
    return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation,
                           groups, bias)
