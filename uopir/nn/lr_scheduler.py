"""uopir.nn.lr_scheduler: learning-rate schedules with the names and semantics of tinygrad's extra/lr_scheduler.py.

A schedule owns an `epoch_counter` (an int32 buffer of shape (1,) as tinygrad's, 0 at construction) and writes the
optimizer's `lr` buffer (shape (1,)) in place. `step()` adds 1 to the counter and sets lr = get_lr() at the new count,
both as tensor IR realized as one program (`schedule_step()` returns them, to realize with a training step); nothing
reads back to the host, so a schedule stepped inside a TinyJit function advances on every replay, and the optimizer's
compiled step is reused (it reads the lr buffer).

With c the counter after the step and lr0 the optimizer's lr when the schedule was made:
- MultiStepLR: lr is multiplied by gamma when c reaches a milestone (gamma^k for a milestone listed k times, torch).
- CosineAnnealingLR: lr = eta_min + (lr0 - eta_min) * (1 + cos(pi * c / T_max)) / 2 (periodic past T_max, as the
  formula).
- OneCycleLR: lr rises from max_lr / div_factor to max_lr over the first pct_start * total_steps steps, then falls to
  max_lr / div_factor / final_div_factor at total_steps, linearly (tinygrad) or along a half cosine
  (anneal_strategy="cos", torch's default); it sets lr to its start value at construction, and stays at the final
  value past total_steps (tinygrad's formula would go on falling, below zero).
- ReduceLROnPlateau: `step(metric)` (a float, or a one-element Tensor read back): a metric better than the best so
  far by more than the threshold (relative or absolute) resets the count of bad epochs, otherwise it grows, and when
  it exceeds `patience` lr is multiplied by `factor` and the count restarts. Host-side by nature (it branches on the
  metric's value).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.nn.optim import Optimizer, OptimizerGroup

__all__ = ["LR_Scheduler", "LRSchedulerGroup", "MultiStepLR", "ReduceLROnPlateau", "CosineAnnealingLR", "OneCycleLR"]


def _number(name: str, value: float, low: float = 0.0, high: float = math.inf, low_open: bool = False,
            high_open: bool = True) -> float:
    """A finite number in [low, high) (ends as given): a bad hyperparameter fails here, not as a NaN learning rate."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)) \
        and math.isfinite(value) and (value > low if low_open else value >= low) \
        and (value < high if high_open else value <= high)
    if not ok:
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must be a finite number in {lo}{low}, {high}{hi}, got {value!r}")
    return float(value)


def _count(name: str, value: int, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class LR_Scheduler:  # noqa: N801 -- tinygrad's name
    """The counter and the in-place write of the optimizer's lr; subclasses give `get_lr`."""

    def __init__(self, optimizer: Optimizer) -> None:
        if isinstance(optimizer, OptimizerGroup):
            raise TypeError(f"{type(self).__name__} schedules one optimizer's lr, got an OptimizerGroup: make one "
                            f"schedule per member (group[i]) and step them together with LRSchedulerGroup")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__} needs a uopir.nn.optim Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self.epoch_counter = Tensor(np.zeros((1,), np.int32), device=optimizer.device).realize()

    def get_lr(self) -> Tensor:
        """The learning rate at the current `epoch_counter`, as a tensor expression of one element."""
        raise NotImplementedError

    def _epoch(self) -> Tensor:
        return self.epoch_counter.cast(dtypes.float32)

    def schedule_step(self) -> list[Tensor]:
        """Assign the new counter and lr (lazily) and return them, to realize with other work."""
        self.epoch_counter.assign(self.epoch_counter + 1)
        self.optimizer.lr.assign(self.get_lr().cast(dtypes.float32).reshape((1,)))
        return [self.epoch_counter, self.optimizer.lr]

    def step(self) -> None:
        Tensor.realize_all(*self.schedule_step())


class LRSchedulerGroup:
    """Several schedules stepped as one (e.g. one per member of an OptimizerGroup)."""

    def __init__(self, *schedulers: LR_Scheduler) -> None:
        for i, s in enumerate(schedulers):
            if not isinstance(s, LR_Scheduler) or isinstance(s, ReduceLROnPlateau):
                raise TypeError(f"LRSchedulerGroup: argument {i} is a {type(s).__name__}, not a schedule stepped "
                                f"without a metric")
        self.schedulers = schedulers

    def schedule_step(self) -> list[Tensor]:
        return [t for s in self.schedulers for t in s.schedule_step()]

    def step(self) -> None:
        Tensor.realize_all(*self.schedule_step())


class MultiStepLR(LR_Scheduler):
    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1) -> None:
        super().__init__(optimizer)
        if isinstance(milestones, (str, bytes)) or not isinstance(milestones, Sequence):
            raise ValueError(f"MultiStepLR: milestones must be a list of step counts, got {milestones!r}")
        self.milestones = [_count("MultiStepLR: milestone", m) for m in milestones]
        self.gamma = _number("MultiStepLR: gamma", gamma)

    def get_lr(self) -> Tensor:
        factor: Tensor | float = 1.0
        for m, k in Counter(self.milestones).items():
            factor = (self.epoch_counter == m).where(self.gamma ** k, factor)
        return self.optimizer.lr * factor


class CosineAnnealingLR(LR_Scheduler):
    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803 -- torch's name
        super().__init__(optimizer)
        self.T_max = _count("CosineAnnealingLR: T_max", T_max)
        self.eta_min = _number("CosineAnnealingLR: eta_min", eta_min)
        self.eta_max = float(optimizer.lr.item())

    def get_lr(self) -> Tensor:
        cos = (self._epoch() * (math.pi / self.T_max)).cos()
        return self.eta_min + 0.5 * (self.eta_max - self.eta_min) * (1 + cos)


class OneCycleLR(LR_Scheduler):
    def __init__(self, optimizer: Optimizer, max_lr: float, div_factor: float, final_div_factor: float,
                 total_steps: int, pct_start: float, anneal_strategy: str = "linear",
                 cycle_momentum: bool = False) -> None:
        super().__init__(optimizer)
        self.max_lr = _number("OneCycleLR: max_lr", max_lr)
        div_factor = _number("OneCycleLR: div_factor", div_factor, low_open=True)
        final_div_factor = _number("OneCycleLR: final_div_factor", final_div_factor, low_open=True)
        self.total_steps = _count("OneCycleLR: total_steps", total_steps)
        self.pct_start = _number("OneCycleLR: pct_start", pct_start, 0.0, 1.0, low_open=True)
        if anneal_strategy not in ("linear", "cos"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'linear' or 'cos', got {anneal_strategy!r}")
        if cycle_momentum:
            raise ValueError("OneCycleLR: cycle_momentum is not supported (as in tinygrad): pass cycle_momentum=False")
        self.anneal_strategy = anneal_strategy
        self.initial_lr = self.max_lr / div_factor
        self.min_lr = self.initial_lr / final_div_factor
        self.optimizer.lr.assign(self.get_lr().cast(dtypes.float32).reshape((1,))).realize()

    def _anneal(self, start: float, end: float, pct: Tensor) -> Tensor:
        if self.anneal_strategy == "cos":
            return end + (start - end) * 0.5 * ((pct * math.pi).cos() + 1)
        return start + (end - start) * pct

    def get_lr(self) -> Tensor:
        c, up_steps = self._epoch(), self.total_steps * self.pct_start
        rise = self._anneal(self.initial_lr, self.max_lr, c / up_steps)
        fall = self._anneal(self.max_lr, self.min_lr, ((c - up_steps) / (self.total_steps - up_steps)).minimum(1.0))
        return (c < up_steps).where(rise, fall)


class ReduceLROnPlateau(LR_Scheduler):
    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel") -> None:
        super().__init__(optimizer)
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.mode, self.threshold_mode = mode, threshold_mode
        self.factor = _number("ReduceLROnPlateau: factor", factor, 0.0, 1.0)
        self.patience = _count("ReduceLROnPlateau: patience", patience, 0)
        self.threshold = _number("ReduceLROnPlateau: threshold", threshold)
        self.best = math.inf if mode == "min" else -math.inf
        self.bad_epoch = 0

    def is_better(self, current: float) -> bool:
        delta = -self.threshold if self.mode == "min" else self.threshold
        bar = self.best * (1 + delta) if self.threshold_mode == "rel" else self.best + delta
        return current < bar if self.mode == "min" else current > bar

    def schedule_step(self) -> list[Tensor]:
        raise TypeError("ReduceLROnPlateau is stepped with a metric on the host: call step(metric)")

    def step(self, current: float | Tensor) -> None:  # type: ignore[override]
        """Count one epoch with this metric; multiply lr by `factor` after more than `patience` bad epochs."""
        if isinstance(current, Tensor):
            if current.numel() != 1:
                raise ValueError(f"ReduceLROnPlateau.step: the metric must be one number, got a tensor of shape "
                                 f"{current.shape}")
            current = current.item()
        if isinstance(current, bool) or not isinstance(current, (int, float, np.integer, np.floating)):
            raise TypeError(f"ReduceLROnPlateau.step: the metric must be a number, got {type(current).__name__}")
        current = float(current)
        self.epoch_counter.assign(self.epoch_counter + 1).realize()
        if self.is_better(current):
            self.best, self.bad_epoch = current, 0
        else:
            self.bad_epoch += 1
        if self.bad_epoch > self.patience:
            self.optimizer.lr.assign(self.optimizer.lr * self.factor).realize()
            self.bad_epoch = 0
