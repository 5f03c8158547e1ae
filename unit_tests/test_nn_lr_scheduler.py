"""uopir.nn.lr_scheduler: each schedule's lr sequence against values computed by hand from its formula (the module
docstring), and the schedules' in-place, jittable stepping."""
from __future__ import annotations

import math

import numpy as np
import pytest

from uopir import Tensor, TinyJit
from uopir.nn import optim
from uopir.nn.lr_scheduler import CosineAnnealingLR, LRSchedulerGroup, MultiStepLR, OneCycleLR, ReduceLROnPlateau


def _opt(lr: float = 0.1) -> optim.SGD:
    return optim.SGD([Tensor([1.0])], lr=lr)


def _lrs(sched, opt, n: int) -> list[float]:
    out = []
    for _ in range(n):
        sched.step()
        out.append(opt.lr.item())
    return out


def test_multistep_multiplies_at_each_milestone() -> None:
    opt = _opt(0.1)
    lrs = _lrs(MultiStepLR(opt, [2, 4, 4], gamma=0.5), opt, 6)
    # after step 2: 0.1 * 0.5; step 4 is listed twice: * 0.5^2 (torch)
    np.testing.assert_allclose(lrs, [0.1, 0.05, 0.05, 0.0125, 0.0125, 0.0125], rtol=1e-6)


def test_cosine_annealing_follows_the_closed_form() -> None:
    opt = _opt(0.1)
    sched = CosineAnnealingLR(opt, T_max=4, eta_min=0.01)
    want = [0.01 + 0.045 * (1 + math.cos(math.pi * c / 4)) for c in range(1, 7)]
    # 0.0868, 0.055, 0.0232, 0.01 (eta_min at T_max), then back up (the formula's period)
    np.testing.assert_allclose(_lrs(sched, opt, 6), want, rtol=1e-6, atol=1e-8)
    assert sched.epoch_counter.item() == 6


def test_lr_and_counter_have_tinygrads_shape_one() -> None:
    """tinygrad's opt.lr and epoch_counter are 1-element vectors: scripts read them as `t.numpy()[0]`."""
    opt = _opt(0.1)
    sched = MultiStepLR(opt, [1], gamma=0.5)
    assert opt.lr.shape == (1,) and sched.epoch_counter.shape == (1,)
    sched.step()
    assert sched.epoch_counter.numpy()[0] == 1 and opt.lr.numpy()[0] == np.float32(0.05)


@pytest.mark.parametrize("strategy", ["linear", "cos"])
def test_one_cycle_rises_then_falls(strategy: str) -> None:
    opt = _opt(0.5)
    sched = OneCycleLR(opt, max_lr=1.0, div_factor=10, final_div_factor=100, total_steps=10, pct_start=0.4,
                       anneal_strategy=strategy)
    assert opt.lr.item() == pytest.approx(0.1)  # max_lr / div_factor from construction
    lo, hi, end = 0.1, 1.0, 0.001

    def anneal(a: float, b: float, pct: float) -> float:
        return a + (b - a) * pct if strategy == "linear" else b + (a - b) * (math.cos(math.pi * pct) + 1) / 2
    want = [anneal(lo, hi, c / 4) if c < 4 else anneal(hi, end, min((c - 4) / 6, 1.0)) for c in range(1, 13)]
    # rise over steps 1..4 (pct_start * total_steps), fall to max_lr / 10 / 100 at step 10, stay there after
    np.testing.assert_allclose(_lrs(sched, opt, 12), want, rtol=1e-5, atol=1e-7)


def test_reduce_on_plateau_counts_bad_epochs() -> None:
    opt = _opt(0.1)
    sched = ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1, threshold=0.1)
    lrs = []
    # best 10; 9.0 is not better than 10 * 0.9 (strictly, rel): bad 1; 9.5 bad 2 > patience: lr halves, restart;
    # 8 is better than 10 * 0.9: best 8; 7.5 bad 1; 7.1 is better than 7.2 (8 * 0.9); a one-element Tensor works
    for metric in [10.0, 9.0, 9.5, 8.0, 7.5, 7.1, Tensor([7.0])]:
        sched.step(metric)
        lrs.append(opt.lr.item())
    np.testing.assert_allclose(lrs, [0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05], rtol=1e-6)
    assert sched.best == pytest.approx(7.1) and sched.bad_epoch == 1 and sched.epoch_counter.item() == 7
    up = ReduceLROnPlateau(opt2 := _opt(0.1), mode="max", factor=0.1, patience=0, threshold=1.0, threshold_mode="abs")
    for metric in [1.0, 2.0, 2.5]:  # max mode, absolute threshold 1: 2.0 is bad (lr * 0.1), 2.5 is better than 2
        up.step(metric)
    assert opt2.lr.item() == pytest.approx(0.01) and up.best == 2.5


def test_schedule_and_step_replay_under_tinyjit() -> None:
    """The counter and lr are device buffers written in place: a replayed step advances the schedule."""
    old, Tensor.training = Tensor.training, True
    try:
        p = Tensor([1.0])
        opt = optim.SGD([p], lr=0.1)
        sched = CosineAnnealingLR(opt, T_max=4)

        @TinyJit
        def train_step(g: Tensor) -> None:
            p.grad = g
            Tensor.realize_all(*opt.schedule_step(), *sched.schedule_step())
        w, lrs = 1.0, [0.1]
        for c in range(1, 5):
            train_step(Tensor([1.0]))
            w -= lrs[-1]  # the step uses the lr before this step's schedule update
            lrs.append(0.05 * (1 + math.cos(math.pi * c / 4)))
            assert opt.lr.item() == pytest.approx(lrs[-1], abs=1e-7) and p.item() == pytest.approx(w, abs=1e-6)
        assert train_step.captured
    finally:
        Tensor.training = old


def test_group_steps_every_schedule() -> None:
    a, b = _opt(0.1), _opt(1.0)
    group = LRSchedulerGroup(MultiStepLR(a, [1]), CosineAnnealingLR(b, T_max=2))
    group.step()
    assert a.lr.item() == pytest.approx(0.01) and b.lr.item() == pytest.approx(0.5)


@pytest.mark.parametrize("make,exc,msg", [
    (lambda o: CosineAnnealingLR(o, T_max=0), ValueError, r"T_max must be an integer >= 1, got 0"),
    (lambda o: MultiStepLR(o, [2, 1.5]), ValueError, r"milestone must be an integer >= 1, got 1.5"),
    (lambda o: OneCycleLR(o, 1.0, 25, 1e4, 10, 1.0), ValueError, r"pct_start must be a finite number in \(0.0, 1.0\)"),
    (lambda o: OneCycleLR(o, 1.0, 25, 1e4, 10, 0.3, "exp"), ValueError, r"anneal_strategy must be 'linear' or 'cos'"),
    (lambda o: OneCycleLR(o, 1.0, 25, 1e4, 10, 0.3, cycle_momentum=True), ValueError, r"cycle_momentum is not sup"),
    (lambda o: ReduceLROnPlateau(o, mode="lowest"), ValueError, r"mode must be 'min' or 'max', got 'lowest'"),
    (lambda o: ReduceLROnPlateau(o, factor=1.0), ValueError, r"factor must be a finite number in \[0.0, 1.0\)"),
    (lambda o: ReduceLROnPlateau(o).step(Tensor([1.0, 2.0])), ValueError, r"one number, got a tensor of shape \(2,"),
    (lambda o: ReduceLROnPlateau(o).schedule_step(), TypeError, r"call step\(metric\)"),
    (lambda o: CosineAnnealingLR(optim.OptimizerGroup(o), 4), TypeError, r"one schedule per member"),
    (lambda o: LRSchedulerGroup(ReduceLROnPlateau(o)), TypeError, r"not a schedule stepped without a metric"),
])
def test_bad_arguments_are_located_errors(make, exc: type, msg: str) -> None:
    with pytest.raises(exc, match=msg):
        make(_opt())
