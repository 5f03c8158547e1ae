"""uopir.nn.optim: SGD, Adam, AdamW (see uopir.frontend.nn.optim)."""
from __future__ import annotations

from uopir.frontend.nn.optim import SGD, Adam, AdamW, Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
