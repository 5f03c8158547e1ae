"""Activation functions of the Tensor (relu, sigmoid, tanh, gelu, silu, softplus, elu, ...), each a decomposition
into elementwise ops. Ints compute in the default float where the function needs a float.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class Activations:
    """Tensor's activation functions."""

    __slots__ = ()

    def relu(self) -> Tensor:
        """max(x, 0); on floats a select, so the gradient at 0 is 0 (torch, tinygrad) and NaN stays NaN."""
        return (self <= 0).where(0, self) if self.dtype.is_float else self.maximum(0)

    def relu6(self) -> Tensor:
        return self.relu().minimum(6)

    def leaky_relu(self, neg_slope: float = 0.01) -> Tensor:
        return (self < 0).where(self * neg_slope, self)

    def sigmoid(self) -> Tensor:
        return (1 + (-self._float()).exp()).reciprocal()

    def tanh(self) -> Tensor:
        return 2.0 * (2.0 * self._float()).sigmoid() - 1.0

    def gelu(self, approximate: str = "tanh") -> Tensor:
        """approximate="tanh" (tinygrad's default) or "none": x * Phi(x) with erf."""
        x = self._float()
        if approximate == "none":
            return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
        if approximate != "tanh":
            raise ValueError(f"gelu approximate must be 'tanh' or 'none', got {approximate!r}")
        return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())

    def quick_gelu(self) -> Tensor:
        return self * (self * 1.702).sigmoid()

    def silu(self) -> Tensor:
        return self * self.sigmoid()

    swish = silu

    def softplus(self, beta: float = 1.0) -> Tensor:
        """log(1 + exp(beta x)) / beta, in the overflow-free form max(z, 0) + log(1 + exp(-|z|))."""
        z = self._float() * beta
        return (z.relu() + (1 + (-z.abs()).exp()).log()) * (1.0 / beta)

    def mish(self) -> Tensor:
        return self * self.softplus().tanh()

    def elu(self, alpha: float = 1.0) -> Tensor:
        x = self._float()
        return (x > 0).where(x, alpha * (x.exp() - 1))

    def celu(self, alpha: float = 1.0) -> Tensor:
        x = self._float()
        return x.maximum(0) + (alpha * ((x / alpha).exp() - 1)).minimum(0)

    def hardswish(self) -> Tensor:
        return self * (self + 3).relu6() * (1 / 6)

    def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
        return (alpha * self + beta).relu().minimum(1)

    def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
        return self.clip(min_val, max_val)

    def softsign(self) -> Tensor:
        x = self if self.dtype.is_float else self.float()
        return x / (1 + x.abs())

    def logsigmoid(self) -> Tensor:
        return -(-(self if self.dtype.is_float else self.float())).softplus()

    def selu(self, alpha: float = SELU_ALPHA, gamma: float = SELU_SCALE) -> Tensor:
        """Scaled ELU with torch's constants (tinygrad rounds them to 1.67326 and 1.0507)."""
        x = self if self.dtype.is_float else self.float()
        return gamma * (x > 0).where(x, alpha * (x.exp() - 1))
