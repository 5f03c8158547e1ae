"""uopir.nn.optim: SGD, Adam, AdamW, in tinygrad's shape (an Optimizer holds its params, zero_grad, step).

`step()` reads each parameter's `.grad`, builds the update as tensor IR and realizes every parameter, optimizer state
(momentum buffers, moments, bias-correction powers) and non-trainable buffer in ONE program, writing them in place
(Tensor.assign): the parameters' buffers stay the same, so a TinyJit replay of a training step updates them again.

The learning rate is `opt.lr`, a 0-d float32 buffer, not a constant baked into the graph: a schedule changes it with
`opt.lr.assign(new).realize()` (or `opt.set_lr(x)`) and the compiled step is reused as it is.

Formulas (g the gradient, wd the weight decay, t the step number starting at 1):
- SGD as torch (dampening 0): g += wd * p; with momentum b = momentum * b + g (b starts at 0, so b_1 = g), then
  g = g + momentum * b (nesterov) or g = b; p -= lr * g.
- Adam as torch: g += wd * p (L2, coupled); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
- AdamW as torch and tinygrad: Adam without the L2 term, then p -= lr * wd * p (decoupled, applied with the update).

Parameters: requires_grad None becomes True (tinygrad); those with requires_grad False are kept as buffers that
step() realizes but does not update; an optimizer with no trainable parameter is an error. step() needs
Tensor.training (tinygrad's rule) and a gradient on every trainable parameter.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from uopir.frontend.tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


def _zeros_like(t: Tensor) -> Tensor:
    return Tensor(np.zeros(t.shape, np.float32), dtype=t.dtype, device=t.device).realize()


class Optimizer:
    """The parameters, the learning rate tensor, zero_grad and step; subclasses give `_updates`."""

    def __init__(self, params: Sequence[Tensor], lr: float) -> None:
        uniq: list[Tensor] = []
        seen: set[int] = set()
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer params must be Tensors, got {type(p).__name__}")
            if id(p) not in seen:
                seen.add(id(p))
                uniq.append(p)
        for p in uniq:
            if p.requires_grad is not False and not p.dtype.is_float:
                raise TypeError(f"optimizer parameter of shape {p.shape} has dtype {p.dtype!r}; only floating point "
                                f"parameters can be trained (set requires_grad=False to keep it as a buffer)")
        for p in uniq:
            if p.requires_grad is None:
                p.requires_grad = True
        self.params = [p for p in uniq if p.requires_grad]
        self.buffers = [p for p in uniq if not p.requires_grad]
        if not self.params:
            raise ValueError("optimizer needs at least one parameter that requires a gradient (all "
                             f"{len(uniq)} given have requires_grad=False)" if uniq else
                             "optimizer needs at least one parameter, got none")
        device = self.params[0].device
        self.device = device
        self.lr = Tensor(np.array(lr, np.float32), device=device).realize()

    def set_lr(self, lr: float) -> None:
        """Change the learning rate in place (the compiled step reads the buffer, so nothing recompiles)."""
        self.lr.assign(Tensor(np.array(lr, np.float32), device=self.device)).realize()

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _grads(self) -> list[Tensor]:
        if not Tensor.training:
            raise RuntimeError("optimizer step() needs Tensor.training = True (tinygrad's rule: set it, or use the "
                               "training context, while training)")
        out = []
        for i, p in enumerate(self.params):
            if p.grad is None:
                raise RuntimeError(f"optimizer parameter {i} (shape {p.shape}) has no gradient: call backward() on a "
                                   f"loss that depends on it before step(), or leave it out of the optimizer")
            if p.grad.shape != p.shape:
                raise ValueError(f"optimizer parameter {i}: gradient of shape {p.grad.shape} for a parameter of "
                                 f"shape {p.shape}")
            out.append(p.grad.detach())
        return out

    def _updates(self, grads: list[Tensor]) -> list[Tensor]:
        """Assign the new values to the params and the state; return the state tensors assigned."""
        raise NotImplementedError

    def schedule_step(self) -> list[Tensor]:
        """Assign the updates (lazily) and return every tensor that step() realizes."""
        state = self._updates(self._grads())
        return [*self.params, *state, *self.buffers]

    def step(self) -> None:
        Tensor.realize_all(*self.schedule_step())

    def _lr(self, p: Tensor) -> Tensor:
        return self.lr if self.lr.dtype is p.dtype else self.lr.cast(p.dtype)


class SGD(Optimizer):
    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, lr)
        if nesterov and momentum <= 0:
            raise ValueError("SGD: nesterov needs a momentum > 0")
        self.momentum, self.wd, self.nesterov = momentum, weight_decay, nesterov
        self.b = [_zeros_like(p) for p in self.params] if momentum else []

    def _updates(self, grads: list[Tensor]) -> list[Tensor]:
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            g = g.cast(p.dtype)
            if self.wd:
                g = g + self.wd * p.detach()
            if self.momentum:
                b = self.momentum * self.b[i] + g
                self.b[i].assign(b)
                g = g + self.momentum * b if self.nesterov else b
            p.assign((p.detach() - self._lr(p) * g).cast(p.dtype))
        return list(self.b)


class _AdamBase(Optimizer):
    decoupled = False

    def __init__(self, params: Sequence[Tensor], lr: float, b1: float, b2: float, eps: float,
                 weight_decay: float) -> None:
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.wd = b1, b2, eps, weight_decay
        self.b1_t = Tensor(np.ones((), np.float32), device=self.device).realize()  # b1^t, b2^t after step t
        self.b2_t = Tensor(np.ones((), np.float32), device=self.device).realize()
        self.m = [_zeros_like(p) for p in self.params]
        self.v = [_zeros_like(p) for p in self.params]

    def _updates(self, grads: list[Tensor]) -> list[Tensor]:
        b1_t, b2_t = self.b1_t * self.b1, self.b2_t * self.b2
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            g = g.cast(p.dtype)
            w = p.detach()
            if self.wd and not self.decoupled:
                g = g + self.wd * w
            m = self.b1 * self.m[i] + (1 - self.b1) * g
            v = self.b2 * self.v[i] + (1 - self.b2) * (g * g)
            self.m[i].assign(m)
            self.v[i].assign(v)
            mhat = m / (1 - b1_t).cast(p.dtype)
            vhat = v / (1 - b2_t).cast(p.dtype)
            up = mhat / (vhat.sqrt() + self.eps)
            if self.wd and self.decoupled:
                up = up + self.wd * w
            p.assign((w - self._lr(p) * up).cast(p.dtype))
        self.b1_t.assign(b1_t)
        self.b2_t.assign(b2_t)
        return [*self.m, *self.v, self.b1_t, self.b2_t]


class Adam(_AdamBase):
    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr, b1, b2, eps, weight_decay)


class AdamW(_AdamBase):
    decoupled = True

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:
        super().__init__(params, lr, b1, b2, eps, weight_decay)


