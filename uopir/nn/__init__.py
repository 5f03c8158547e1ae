"""uopir.nn: the layers a tinygrad user expects, as plain classes holding parameter Tensors; optimizers in
uopir.nn.optim, schedules in uopir.nn.lr_scheduler and weights (state dicts, safetensors files) in uopir.nn.state,
as tinygrad's `tinygrad.nn`.

A layer is a callable object whose Tensor attributes are its parameters (nn.state.get_parameters finds them by
walking the object). Constructor signatures, defaults and state-dict names follow tinygrad's; the default
initialisations are torch's: Linear and the convolutions draw their weight from kaiming_uniform(a=sqrt(5)) and their
bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), norms start at weight 1 and bias 0, Embedding from glorot_uniform,
LSTMCell's weights from U(-1/sqrt(hidden), 1/sqrt(hidden)) with zero biases. Every parameter and running statistic
is a realized buffer from the start, so an optimizer or a statistic update can assign to it in place.

The layers live by family: nn.basic (Linear, Embedding, Dropout), nn.conv, nn.norm, nn.recurrent; all are
re-exported here."""
from __future__ import annotations

from uopir.nn import lr_scheduler, optim, state
from uopir.nn.basic import Dropout, Embedding, Linear
from uopir.nn.conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from uopir.nn.norm import BatchNorm, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm, LayerNorm, LayerNorm2d, RMSNorm
from uopir.nn.recurrent import LSTMCell

__all__ = ["Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm", "BatchNorm2d",
           "BatchNorm3d", "LayerNorm", "LayerNorm2d", "GroupNorm", "InstanceNorm", "RMSNorm", "Embedding", "Dropout",
           "LSTMCell", "optim", "lr_scheduler", "state"]
