"""uopir.nn.optim: SGD, Adam, AdamW, LAMB, LARS, Muon and OptimizerGroup, in tinygrad's shape (an Optimizer holds
its params, zero_grad, step).

`step()` reads each parameter's `.grad`, builds the update as tensor IR and realizes every parameter, optimizer state
(momentum buffers, moments, bias-correction powers) and non-trainable buffer in ONE program, writing them in place
(Tensor.assign): the parameters' buffers stay the same, so a TinyJit replay of a training step updates them again.

The learning rate is `opt.lr`, a float32 buffer of shape (1,) as tinygrad's (`opt.lr.numpy()[0]` reads it), not a
constant baked into the graph: a schedule changes it with `opt.lr.assign(new).realize()` (or `opt.set_lr(x)`) and the
compiled step is reused as it is. The update reads it as a scalar, so a 0-d parameter keeps its shape.

Formulas (g the gradient, wd the weight decay, t the step number starting at 1):
- SGD as torch (dampening 0): g += wd * p; with momentum b = momentum * b + g (b starts at 0, so b_1 = g), then
  g = g + momentum * b (nesterov) or g = b; p -= lr * g. classic=True (tinygrad's option) scales g by lr before the
  momentum (b accumulates steps) and then p -= g.
- Adam as torch: g += wd * p (L2, coupled); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
- AdamW as torch and tinygrad: Adam without the L2 term, then p -= lr * wd * p (decoupled, applied with the update).
- LAMB as tinygrad (defaults eps 1e-6, weight_decay 0): AdamW's update u = mhat / (sqrt(vhat) + eps) + wd * p scaled
  by the trust ratio r = ||p|| / ||u|| (1 where either norm is 0), p -= lr * r * u; adam=True drops r (AdamW).
- LARS as tinygrad: r = tcoef * ||p|| / (||g|| + wd * ||p||) (1 where either norm is 0), wd * p added to g before
  (pre_wd) or as lr * wd * p after the momentum; classic momentum scales g by r * lr before the momentum buffer,
  the popular one after it. tcoef 0 is r = 1.
- Muon as tinygrad: LARS without the trust ratio whose momentum output (nesterov by default) is orthogonalized by
  `ns_steps` Newton-Schulz iterations with `ns_coefficients` (a, b, c): X = g / (||g||_F + 1e-7) over g reshaped to
  (rows, -1) (transposed when it has more rows than columns), then X = a X + b (X X^T) X + c (X X^T)^2 X; then
  p -= lr * X + lr * wd * p.

Parameters: requires_grad None becomes True (tinygrad); those with requires_grad False are kept as buffers that
step() realizes but does not update; an optimizer with no trainable parameter is an error. step() needs
Tensor.training (tinygrad's rule) and a gradient on every trainable parameter. OptimizerGroup steps several optimizers
(e.g. Muon for the matrices, AdamW for the rest) as one program.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from uopir.frontend import device as D
from uopir.frontend.tensor import Tensor

__all__ = ["Optimizer", "OptimizerGroup", "SGD", "Adam", "AdamW", "LAMB", "LARS", "Muon", "newton_schulz"]


def _zeros_like(t: Tensor) -> Tensor:
    return Tensor(np.zeros(t.shape, np.float32), dtype=t.dtype, device=t.device).realize()


def _check(name: str, value: float, upper: float | None = None) -> None:
    """A hyperparameter must be a finite number >= 0 (and < upper): a bad one fails here, not as NaN weights."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not math.isfinite(value) or value < 0 or (upper is not None and value >= upper):
        bound = f" and < {upper}" if upper is not None else ""
        raise ValueError(f"{name} must be a finite number >= 0{bound}, got {value!r}")


def _norm(t: Tensor) -> Tensor:
    return t.square().sum().sqrt()


def _trust(r1: Tensor, r2: Tensor, ratio: Tensor) -> Tensor:
    """`ratio` where both norms are > 0, else 1 (a zero weight or update keeps the plain step)."""
    return ((r1 > 0) & (r2 > 0)).where(ratio, 1.0)


class Optimizer:
    """The parameters, the learning rate tensor, zero_grad and step; subclasses give `_updates`."""

    def __init__(self, params: Sequence[Tensor], lr: float, device: str | None = None, fused: bool = False) -> None:
        """device: where the state lives (tinygrad's argument; only the parameters' device is supported). fused:
        tinygrad's one-buffer layout of the step; accepted for its scripts, no effect here (the step is one program
        anyway)."""
        _check(f"{type(self).__name__}: lr", lr)
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
        if device is not None and D.canonical(device) != self.params[0].device:
            raise ValueError(f"{type(self).__name__}: device={device!r}: optimizer state on another device than the "
                             f"parameters ({self.params[0].device}) is not supported")
        device = self.params[0].device
        self.device = device
        self.lr = Tensor(np.array([lr], np.float32), device=device).realize()

    def set_lr(self, lr: float) -> None:
        """Change the learning rate in place (the compiled step reads the buffer, so nothing recompiles)."""
        self.lr.assign(Tensor(np.array([lr], np.float32), device=self.device)).realize()

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
        lr = self.lr.reshape(())
        return lr if lr.dtype is p.dtype else lr.cast(p.dtype)


class OptimizerGroup(Optimizer):
    """Several optimizers stepped, zeroed and realized as one (tinygrad's): e.g. Muon on the matrices, AdamW on the
    rest, in one program per step."""

    def __init__(self, *optimizers: Optimizer) -> None:  # no super().__init__: the members own params and lr
        if not optimizers:
            raise ValueError("OptimizerGroup needs at least one optimizer")
        for i, o in enumerate(optimizers):
            if not isinstance(o, Optimizer):
                raise TypeError(f"OptimizerGroup: argument {i} is a {type(o).__name__}, not an Optimizer")
        owner: dict[int, int] = {}
        for i, o in enumerate(optimizers):
            for p in o.params:
                if owner.setdefault(id(p), i) != i:
                    raise ValueError(f"OptimizerGroup: a parameter of shape {p.shape} is in optimizers {owner[id(p)]} "
                                     f"and {i}; each parameter may be updated by one optimizer only")
        self.optimizers = tuple(optimizers)
        self.params = [p for o in optimizers for p in o.params]
        self.buffers = [b for o in optimizers for b in o.buffers]
        self.device = optimizers[0].device

    def __getitem__(self, i: int) -> Optimizer:
        return self.optimizers[i]

    def __len__(self) -> int:
        return len(self.optimizers)

    def set_lr(self, lr: float) -> None:
        """Set every member's learning rate (a member's own is `group[i].set_lr`)."""
        for o in self.optimizers:
            o.set_lr(lr)

    def zero_grad(self) -> None:
        for o in self.optimizers:
            o.zero_grad()

    def schedule_step(self) -> list[Tensor]:
        return [t for o in self.optimizers for t in o.schedule_step()]


class SGD(Optimizer):
    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, classic: bool = False, device: str | None = None,
                 fused: bool = False) -> None:
        super().__init__(params, lr, device, fused)
        _check("SGD: momentum", momentum)
        _check("SGD: weight_decay", weight_decay)
        if nesterov and momentum <= 0:
            raise ValueError("SGD: nesterov needs a momentum > 0")
        self.momentum, self.wd, self.nesterov, self.classic = momentum, weight_decay, nesterov, classic
        self.b = [_zeros_like(p) for p in self.params] if momentum else []

    def _updates(self, grads: list[Tensor]) -> list[Tensor]:
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            g, lr = g.cast(p.dtype), self._lr(p)
            if self.wd:
                g = g + self.wd * p.detach()
            if self.classic:  # the momentum buffer accumulates lr-scaled steps
                g = lr * g
            if self.momentum:
                b = self.momentum * self.b[i] + g
                self.b[i].assign(b)
                g = g + self.momentum * b if self.nesterov else b
            p.assign((p.detach() - (g if self.classic else lr * g)).cast(p.dtype))
        return list(self.b)


def newton_schulz(x: Tensor, steps: int, params: Sequence[float], eps: float = 1e-7) -> Tensor:
    """`steps` Newton-Schulz iterations of the odd polynomial sum_i params[i] (X X^T)^i X over the last two axes,
    from X = x / (||x||_F + eps): they drive X's singular values towards 1 (Muon's orthogonalization). A matrix with
    more rows than columns is iterated transposed, so X X^T is the smaller Gram matrix."""
    if x.ndim < 2:
        raise ValueError(f"newton_schulz needs a tensor of 2 or more dimensions, got shape {x.shape}")
    if x.shape[-2] > x.shape[-1]:
        return newton_schulz(x.transpose(-2, -1), steps, params, eps).transpose(-2, -1)
    g = x / (x.square().sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
        gram = g @ g.transpose(-2, -1)
        power, acc = g, params[0] * g
        for c in params[1:]:
            power = gram @ power
            acc = acc + c * power
        g = acc
    return g


class LARS(Optimizer):
    """Layer-wise adaptive rate scaling (tinygrad's LARS, which is also the engine of its SGD and Muon)."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4,
                 ns_steps: int = 0, ns_coefficients: Sequence[float] | None = None, nesterov: bool = False,
                 classic: bool = True, pre_wd: bool = True, tcoef: float = 0.001, device: str | None = None,
                 fused: bool = False) -> None:
        super().__init__(params, lr, device, fused)
        name = type(self).__name__
        _check(f"{name}: momentum", momentum)
        _check(f"{name}: weight_decay", weight_decay)
        _check(f"{name}: tcoef", tcoef)
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 0:
            raise ValueError(f"{name}: ns_steps must be an integer >= 0, got {ns_steps!r}")
        if ns_coefficients is not None:
            if isinstance(ns_coefficients, (str, bytes)) or not isinstance(ns_coefficients, Sequence) \
                    or not ns_coefficients or not all(isinstance(c, (int, float)) and math.isfinite(c)
                                                      for c in ns_coefficients):
                raise ValueError(f"{name}: ns_coefficients must be a non-empty sequence of finite numbers, "
                                 f"got {ns_coefficients!r}")
            for p in self.params:
                if p.ndim == 0:
                    raise ValueError(f"{name}: Newton-Schulz needs parameters of 1 or more dimensions, got a 0-d one")
        self.momentum, self.wd, self.ns_steps = momentum, weight_decay, ns_steps
        self.ns_coefficients = tuple(ns_coefficients) if ns_coefficients else None
        self.nesterov, self.classic, self.pre_wd, self.tcoef = nesterov, classic, pre_wd, tcoef
        self.b = [_zeros_like(p) for p in self.params] if momentum else []

    def _updates(self, grads: list[Tensor]) -> list[Tensor]:
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            g, w, lr = g.cast(p.dtype), p.detach(), self._lr(p)
            if self.tcoef:
                r1, r2 = _norm(w.float()), _norm(g.float())
                scale = (_trust(r1, r2, self.tcoef * r1 / (r2 + self.wd * r1)).cast(p.dtype) * lr)
            else:
                scale = lr
            if self.pre_wd and self.wd:
                g = g + self.wd * w
            if self.classic:  # classic momentum accumulates lr-scaled steps
                g = g * scale
            if self.momentum:
                b = self.momentum * self.b[i] + g
                self.b[i].assign(b)
                g = g + self.momentum * b if self.nesterov else b
            if self.ns_coefficients and self.ns_steps:
                g = newton_schulz(g.reshape(g.shape[0], -1), self.ns_steps, self.ns_coefficients).reshape(p.shape)
            if not self.classic:
                g = g * scale
            if not self.pre_wd and self.wd:  # Muon's decay, after the momentum
                g = g + self.wd * lr * w
            p.assign((w - g).cast(p.dtype))
        return list(self.b)


class Muon(LARS):
    """SGD-momentum whose step is orthogonalized by Newton-Schulz, then decayed (tinygrad's defaults)."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1,
                 ns_steps: int = 5, ns_coefficients: Sequence[float] = (3.4445, -4.775, 2.0315),
                 nesterov: bool = True, device: str | None = None, fused: bool = False) -> None:
        super().__init__(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False,
                         pre_wd=False, tcoef=0.0, device=device, fused=fused)


class _AdamBase(Optimizer):
    decoupled = False
    trust_ratio = False

    def __init__(self, params: Sequence[Tensor], lr: float, b1: float, b2: float, eps: float,
                 weight_decay: float, device: str | None = None, fused: bool = False) -> None:
        super().__init__(params, lr, device, fused)
        name = type(self).__name__
        _check(f"{name}: b1", b1, 1.0)
        _check(f"{name}: b2", b2, 1.0)
        _check(f"{name}: eps", eps)
        _check(f"{name}: weight_decay", weight_decay)
        self.b1, self.b2, self.eps, self.wd = b1, b2, eps, weight_decay
        # b1^t, b2^t after step t, of shape (1,) as tinygrad's (an optimizer's state dict loads either way)
        self.b1_t = Tensor(np.ones((1,), np.float32), device=self.device).realize()
        self.b2_t = Tensor(np.ones((1,), np.float32), device=self.device).realize()
        self.m = [_zeros_like(p) for p in self.params]
        self.v = [_zeros_like(p) for p in self.params]

    def _updates(self, grads: list[Tensor]) -> list[Tensor]:
        b1_t, b2_t = self.b1_t * self.b1, self.b2_t * self.b2
        c1, c2 = (1 - b1_t).reshape(()), (1 - b2_t).reshape(())
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            g = g.cast(p.dtype)
            w = p.detach()
            if self.wd and not self.decoupled:
                g = g + self.wd * w
            m = self.b1 * self.m[i] + (1 - self.b1) * g
            v = self.b2 * self.v[i] + (1 - self.b2) * (g * g)
            self.m[i].assign(m)
            self.v[i].assign(v)
            mhat = m / c1.cast(p.dtype)
            vhat = v / c2.cast(p.dtype)
            up = mhat / (vhat.sqrt() + self.eps)
            if self.wd and self.decoupled:
                up = up + self.wd * w
            lr = self._lr(p)
            if self.trust_ratio:
                r1, r2 = _norm(w.float()), _norm(up.float())
                lr = lr * _trust(r1, r2, r1 / r2).cast(p.dtype)
            p.assign((w - lr * up).cast(p.dtype))
        self.b1_t.assign(b1_t)
        self.b2_t.assign(b2_t)
        return [*self.m, *self.v, self.b1_t, self.b2_t]


class Adam(_AdamBase):
    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.0, device: str | None = None, fused: bool = False) -> None:
        super().__init__(params, lr, b1, b2, eps, weight_decay, device, fused)


class AdamW(_AdamBase):
    decoupled = True

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.01, device: str | None = None, fused: bool = False) -> None:
        super().__init__(params, lr, b1, b2, eps, weight_decay, device, fused)


class LAMB(_AdamBase):
    """AdamW's step scaled per parameter by the trust ratio ||p|| / ||step|| (adam=True: plain AdamW)."""

    decoupled = True

    def __init__(self, params: Sequence[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-6, weight_decay: float = 0.0, adam: bool = False, device: str | None = None,
                 fused: bool = False) -> None:
        super().__init__(params, lr, b1, b2, eps, weight_decay, device, fused)
        self.adam = adam
        self.trust_ratio = not adam
