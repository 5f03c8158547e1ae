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

pytestmark = pytest.mark.usefixtures("training")  # every test steps optimizers in training mode


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


@pytest.mark.parametrize("nesterov", [False, True])
def test_classic_sgd_scales_by_lr_before_the_momentum(nesterov: bool) -> None:
    """tinygrad's SGD(classic=True): b = m b + lr g; p -= b (or lr g + m b). It differs from the popular rule only
    when lr changes, so the lr drops after the first step."""
    w0, grads = _data(5, steps=3)
    ps = [Tensor(w.copy()) for w in w0]
    opt = optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=nesterov, classic=True)
    ws, bs = [w.astype(np.float64) for w in w0], [np.zeros_like(w, np.float64) for w in w0]
    pop_w, pop_b = [w.astype(np.float64) for w in w0], [np.zeros_like(w, np.float64) for w in w0]
    for lr, gs in zip((0.1, 0.02, 0.02), grads, strict=True):
        opt.set_lr(lr)
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            p.grad = Tensor(g)
            step = lr * (g + 0.1 * ws[i])
            bs[i] = 0.9 * bs[i] + step
            ws[i] = ws[i] - (step + 0.9 * bs[i] if nesterov else bs[i])
            gp = g + 0.1 * pop_w[i]
            pop_b[i] = 0.9 * pop_b[i] + gp
            pop_w[i] = pop_w[i] - lr * (gp + 0.9 * pop_b[i] if nesterov else pop_b[i])
        opt.step()
    assert not np.allclose(ws[0], pop_w[0], rtol=1e-3)  # the case tells the two rules apart
    for p, w in zip(ps, ws, strict=True):
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6)


def test_tinygrads_device_and_fused_arguments() -> None:
    p = Tensor(np.ones(2, np.float32))
    opt = optim.LAMB([p], device=p.device, fused=True)
    assert opt.b1_t.shape == opt.b2_t.shape == (1,)
    other = "c" if p.device != "c" else "python"
    with pytest.raises(ValueError, match=rf"SGD: device='{other}': optimizer state on another device"):
        optim.SGD([p], device=other)


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


def test_a_0d_parameter_stays_0d_under_the_1_element_lr() -> None:
    """opt.lr has tinygrad's shape (1,); the update reads it as a scalar, so a 0-d parameter is not broadcast."""
    p = Tensor(np.float32(2.0))
    opt = optim.Adam([p], lr=0.1)
    assert opt.lr.shape == (1,)
    p.grad = Tensor(np.float32(0.5))
    opt.step()
    # the first Adam step moves by lr * g / (|g| + eps) = lr (to within eps)
    assert p.shape == () and p.numpy() == pytest.approx(1.9, abs=1e-6)


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


# LAMB, LARS, Muon and OptimizerGroup: tinygrad's update rules (uopir/nn/optim.py's docstring), in float64 numpy.

def _trust_np(r1: float, r2: float, ratio: float) -> float:
    return ratio if r1 > 0 and r2 > 0 else 1.0


def _lamb_ref(w0, grads, lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, adam=False):
    ws = [w.astype(np.float64) for w in w0]
    ms = [np.zeros_like(w) for w in ws]
    vs = [np.zeros_like(w) for w in ws]
    for t, gs in enumerate(grads, 1):
        for i, g in enumerate(gs):
            ms[i] = b1 * ms[i] + (1 - b1) * g
            vs[i] = b2 * vs[i] + (1 - b2) * g * g
            up = (ms[i] / (1 - b1**t)) / (np.sqrt(vs[i] / (1 - b2**t)) + eps) + wd * ws[i]
            r1, r2 = np.linalg.norm(ws[i]), np.linalg.norm(up)
            r = 1.0 if adam else _trust_np(r1, r2, r1 / r2 if r2 else 0.0)
            ws[i] = ws[i] - lr * r * up
    return ws


def _ns_ref(x: np.ndarray, steps: int, coefs, eps: float = 1e-7) -> np.ndarray:
    if x.shape[-2] > x.shape[-1]:
        return _ns_ref(np.swapaxes(x, -1, -2), steps, coefs, eps).swapaxes(-1, -2)
    g = x / (np.sqrt((x * x).sum(axis=(-2, -1), keepdims=True)) + eps)
    for _ in range(steps):
        a = g @ np.swapaxes(g, -1, -2)
        g = sum(c * np.linalg.matrix_power(a, k) @ g for k, c in enumerate(coefs))
    return g


def _lars_ref(w0, grads, lr, momentum=0.9, weight_decay=1e-4, ns_steps=0, ns_coefficients=None, nesterov=False,
              classic=True, pre_wd=True, tcoef=0.001):
    ws = [w.astype(np.float64) for w in w0]
    bs = [np.zeros_like(w) for w in ws]
    for gs in grads:
        for i, g in enumerate(gs):
            g = g.astype(np.float64)
            r1, r2 = np.linalg.norm(ws[i]), np.linalg.norm(g)
            wd = weight_decay
            r = _trust_np(r1, r2, tcoef * r1 / (r2 + wd * r1)) if tcoef else 1.0
            if pre_wd:
                g = g + wd * ws[i]
            if classic:
                g = g * r * lr
            if momentum:
                bs[i] = momentum * bs[i] + g
                g = g + momentum * bs[i] if nesterov else bs[i]
            if ns_coefficients:
                g = _ns_ref(g.reshape(g.shape[0], -1), ns_steps, ns_coefficients).reshape(g.shape)
            if not classic:
                g = g * r * lr
            if not pre_wd:
                g = g + wd * lr * ws[i]
            ws[i] = ws[i] - g
    return ws


def _close(got, ref, rtol=1e-5, atol=2e-6) -> None:
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1}, {"adam": True, "weight_decay": 0.1}])
def test_lamb_matches_tinygrads_rule(kw: dict) -> None:
    w0, grads = _data(4, steps=3)
    w0 = [3 * w0[0], np.zeros_like(w0[1])]  # ||p|| = 0 at the first step: the trust ratio falls back to 1
    got, _ = _run(lambda ps: optim.LAMB(ps, lr=0.05, **kw), w0, grads)
    ref = _lamb_ref(w0, grads, 0.05, wd=kw.get("weight_decay", 0.0), adam=kw.get("adam", False))
    _close(got, ref)
    # the trust ratio matters on the first parameter (||p|| / ||step|| ~ 3), and adam=True is AdamW's rule
    adamw = _adam_ref(w0, grads, 0.05, eps=1e-6, wd=kw.get("weight_decay", 0.0), decoupled=True)
    assert np.allclose(ref[0], adamw[0]) == kw.get("adam", False)


def test_lamb_defaults_are_tinygrads() -> None:
    opt = optim.LAMB([Tensor(np.zeros(2, np.float32))])
    assert (opt.b1, opt.b2, opt.eps, opt.wd, opt.adam) == (0.9, 0.999, 1e-6, 0.0, False)


@pytest.mark.parametrize("kw", [{}, {"classic": False, "nesterov": True, "weight_decay": 0.01},
                                {"pre_wd": False, "tcoef": 0.0, "momentum": 0.0, "weight_decay": 0.1}])
def test_lars_matches_tinygrads_rule(kw: dict) -> None:
    w0, grads = _data(5, steps=3)
    got, _ = _run(lambda ps: optim.LARS(ps, lr=0.5, **kw), w0, grads)
    _close(got, _lars_ref(w0, grads, 0.5, **kw))


MUON_SHAPES = [(3, 4), (6, 2), (2, 2, 3), (5,)]  # wide, tall (iterated transposed), 3-d (rows, -1), a vector


@pytest.mark.parametrize("kw", [{}, {"nesterov": False, "weight_decay": 0.0}, {"momentum": 0.0, "ns_steps": 2}])
def test_muon_matches_tinygrads_rule(kw: dict) -> None:
    rng = np.random.default_rng(6)
    w0 = [rng.standard_normal(s).astype(np.float32) for s in MUON_SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in MUON_SHAPES] for _ in range(3)]
    got, _ = _run(lambda ps: optim.Muon(ps, lr=0.1, **kw), w0, grads)
    full = {"momentum": 0.95, "weight_decay": 0.1, "ns_steps": 5, "ns_coefficients": (3.4445, -4.775, 2.0315),
            "nesterov": True, **kw}
    _close(got, _lars_ref(w0, grads, 0.1, classic=False, pre_wd=False, tcoef=0.0, **full), rtol=1e-4, atol=2e-5)


def test_newton_schulz_batched_against_numpy() -> None:
    x = np.random.default_rng(7).standard_normal((2, 3, 5)).astype(np.float32)
    got = optim.newton_schulz(Tensor(x), 5, (3.4445, -4.775, 2.0315)).numpy()
    np.testing.assert_allclose(got, _ns_ref(x.astype(np.float64), 5, (3.4445, -4.775, 2.0315)), rtol=1e-4, atol=2e-5)
    with pytest.raises(ValueError, match=r"2 or more dimensions, got shape \(5,\)"):
        optim.newton_schulz(Tensor(np.ones(5, np.float32)), 1, (1.0,))


def test_optimizer_group_steps_its_members_as_one() -> None:
    w0, grads = _data(8, steps=2)
    a, b = Tensor(w0[0].copy()), Tensor(w0[1].copy())
    group = optim.OptimizerGroup(optim.Muon([a], lr=0.1), optim.AdamW([b], lr=0.05))
    assert group.params == [a, b] and isinstance(group[0], optim.Muon) and len(group) == 2
    for gs in grads:
        a.grad, b.grad = Tensor(gs[0]), Tensor(gs[1])
        group.step()
    group.zero_grad()
    assert a.grad is None and b.grad is None
    muon = _lars_ref([w0[0]], [[g[0]] for g in grads], 0.1, momentum=0.95, weight_decay=0.1, ns_steps=5,
                     ns_coefficients=(3.4445, -4.775, 2.0315), nesterov=True, classic=False, pre_wd=False, tcoef=0.0)
    _close([a.numpy(), b.numpy()], [muon[0], _adam_ref([w0[1]], [[g[1]] for g in grads], 0.05, wd=0.01,
                                                       decoupled=True)[0]], rtol=1e-4, atol=2e-5)
    group.set_lr(0.2)
    assert group[0].lr.item() == group[1].lr.item() == np.float32(0.2)
    with pytest.raises(ValueError, match=r"in optimizers 0 and 1; each parameter may be updated by one optimizer"):
        optim.OptimizerGroup(optim.SGD([a]), optim.Adam([a]))
    with pytest.raises(TypeError, match="argument 1 is a list, not an Optimizer"):
        optim.OptimizerGroup(optim.SGD([a]), [b])


@pytest.mark.parametrize("make,msg", [
    (lambda ps: optim.SGD(ps, lr=-0.1), r"SGD: lr must be a finite number >= 0, got -0.1"),
    (lambda ps: optim.Adam(ps, b1=1.0), r"Adam: b1 must be a finite number >= 0 and < 1.0, got 1.0"),
    (lambda ps: optim.LAMB(ps, eps=float("nan")), r"LAMB: eps must be a finite number >= 0, got nan"),
    (lambda ps: optim.Muon(ps, ns_steps=-1), r"Muon: ns_steps must be an integer >= 0, got -1"),
    (lambda ps: optim.Muon(ps, ns_coefficients="abc"), r"Muon: ns_coefficients must be a non-empty sequence"),
    (lambda ps: optim.Muon([Tensor(np.float32(1.0))]), r"Muon: Newton-Schulz needs parameters of 1 or more dim"),
])
def test_bad_hyperparameters_are_located_errors(make, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        make([Tensor(np.ones((2, 2), np.float32))])
