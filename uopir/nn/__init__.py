"""uopir.nn: layers, optimizers (uopir.nn.optim) and weights (uopir.nn.state), as tinygrad's `tinygrad.nn`.

The code lives in the frontend layer (uopir.frontend.nn); this package is the public name, re-exporting it.
"""
from __future__ import annotations

from uopir.frontend.nn import BatchNorm, BatchNorm2d, Conv2d, Dropout, Embedding, GroupNorm, LayerNorm, Linear
from uopir.nn import optim as optim
from uopir.nn import state as state

__all__ = ["Linear", "Conv2d", "BatchNorm", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding", "Dropout", "optim",
           "state"]
