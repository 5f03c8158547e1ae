"""uopir.nn.optim against numpy reference formulas (torch's definitions), with gradients set by hand.

Gradients are given as data (autograd is not needed to test an optimizer): each step sets `p.grad` and calls step(),
and the parameters must follow the reference update in float64 within float32 rounding.
"""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.realize import STATS
from uopir.nn import optim


@pytest.fixture(autouse=True)
def training():
    old = Tensor.training
    Tensor.training = True
    yield
    Tensor.training = old


SHAPES = [(3, 4), (5,)]


def _data(seed: int, steps: int = 3) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    rng = np.random.default_rng(seed)
    w0 = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    return w0, grads


def _run(make, w0: list[np.ndarray], grads: list[list[np.ndarray]]) -> tuple[list[np.ndarray], list[Tensor]]:
    ps = [Tensor(w.copy()) for w in w0]
    bufs = [p.uop for p in ps]
    opt = make(ps)
    for gs in grads:
        for p, g in zip(ps, gs, strict=True):
            p.grad = Tensor(g)
        opt.step()
    assert all(p.uop is b for p, b in zip(ps, bufs, strict=True)), "step() must write the parameters in place"
    return [p.numpy() for p in ps], ps


def _sgd_ref(w0, grads, lr, momentum=0.0, wd=0.0, nesterov=False):
    ws = [w.astype(np.float64) for w in w0]
    bufs = [None] * len(ws)
    for gs in grads:
        for i, g in enumerate(gs):
            g = g + wd * ws[i]
            if momentum:
                bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + g  # torch: buf_1 = g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            ws[i] = ws[i] - lr * g
    return ws


def _adam_ref(w0, grads, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False):
    ws = [w.astype(np.float64) for w in w0]
    ms = [np.zeros_like(w) for w in ws]
    vs = [np.zeros_like(w) for w in ws]
    for t, gs in enumerate(grads, 1):
        for i, g in enumerate(gs):
            if wd and not decoupled:
                g = g + wd * ws[i]
            ms[i] = b1 * ms[i] + (1 - b1) * g
            vs[i] = b2 * vs[i] + (1 - b2) * g * g
            up = (ms[i] / (1 - b1**t)) / (np.sqrt(vs[i] / (1 - b2**t)) + eps)
            ws[i] = ws[i] - lr * (up + (wd * ws[i] if decoupled else 0))
    return ws


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.8, "nesterov": True},
                                {"momentum": 0.5, "weight_decay": 0.1}, {"weight_decay": 0.3}])
def test_sgd_matches_torch_formula(kw: dict) -> None:
    w0, grads = _data(1)
    got, _ = _run(lambda ps: optim.SGD(ps, lr=0.1, **kw), w0, grads)
    ref = _sgd_ref(w0, grads, 0.1, kw.get("momentum", 0.0), kw.get("weight_decay", 0.0), kw.get("nesterov", False))
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,wd", [("Adam", 0.0), ("Adam", 0.1), ("AdamW", 0.01), ("AdamW", 0.5)])
def test_adam_and_adamw_match_torch_formulas(cls: str, wd: float) -> None:
    w0, grads = _data(2, steps=4)
    got, _ = _run(lambda ps: getattr(optim, cls)(ps, lr=0.05, weight_decay=wd), w0, grads)
    ref = _adam_ref(w0, grads, 0.05, wd=wd, decoupled=cls == "AdamW")
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)


def test_adamw_defaults_are_tinygrads() -> None:
    opt = optim.AdamW([Tensor(np.zeros(2, np.float32))])
    assert (opt.b1, opt.b2, opt.eps, opt.wd) == (0.9, 0.999, 1e-8, 0.01) and opt.lr.numpy().item() == np.float32(1e-3)
    assert optim.Adam([Tensor(np.zeros(2, np.float32))]).wd == 0.0


def test_learning_rate_schedule_changes_a_tensor_not_the_program() -> None:
    w0, grads = _data(3, steps=3)
    p = Tensor(w0[0].copy())
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = Tensor(grads[0][0])
    opt.step()
    lowerings = STATS.lowerings
    for lr, gs in zip((0.05, 0.01), grads[1:], strict=True):
        opt.set_lr(lr)
        p.grad = Tensor(gs[0])
        opt.step()
    # set_lr is one small program (built once), the steps reuse the first step's: no other lowering
    assert STATS.lowerings - lowerings <= 1
    w, b = w0[0].astype(np.float64), np.zeros_like(w0[0], np.float64)
    for lr, gs in zip((0.1, 0.05, 0.01), grads, strict=True):
        b = 0.9 * b + gs[0]
        w = w - lr * b
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6)


def test_zero_grad_and_requires_grad_rules() -> None:
    a, b, c = Tensor([1.0, 2.0]), Tensor([3.0], requires_grad=False), Tensor([4.0], requires_grad=True)
    opt = optim.SGD([a, b, c, a], lr=1.0)
    assert opt.params == [a, c] and opt.buffers == [b] and a.requires_grad is True
    a.grad, c.grad = Tensor([1.0, 1.0]), Tensor([0.5])
    opt.step()
    assert a.numpy().tolist() == [0.0, 1.0] and c.numpy().tolist() == [3.5] and b.numpy().tolist() == [3.0]
    opt.zero_grad()
    assert a.grad is None and c.grad is None
    with pytest.raises(RuntimeError, match=r"parameter 0 \(shape \(2,\)\) has no gradient"):
        opt.step()
    with pytest.raises(ValueError, match="all 1 given have requires_grad=False"):
        optim.Adam([Tensor([1.0], requires_grad=False)])
    with pytest.raises(ValueError, match="at least one parameter"):
        optim.SGD([])
    with pytest.raises(TypeError, match="only floating point"):
        optim.SGD([Tensor([1, 2])])
    a.grad = Tensor([1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\) for a parameter of shape \(2,\)"):
        opt.step()


def test_step_needs_training_mode() -> None:
    p = Tensor([1.0])
    opt = optim.SGD([p])
    p.grad = Tensor([1.0])
    Tensor.training = False
    with pytest.raises(RuntimeError, match="Tensor.training"):
        opt.step()


def test_float16_parameters_keep_their_dtype() -> None:
    p = Tensor(np.array([1.0, -2.0], np.float16))
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.0)
    p.grad = Tensor(np.array([1.0, -1.0], np.float16))
    opt.step()
    assert p.dtype == Tensor([1.0], dtype="float16").dtype
    np.testing.assert_allclose(p.numpy(), [0.9, -1.9], rtol=1e-3)
