"""TinyJit: replays give the right values on new inputs, run no lowering or compile (the realize counters), return
fresh buffers, replay in-place updates (an optimizer step), and refuse inputs of other shapes or dtypes."""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor, TinyJit
from uopir.backends import available
from uopir.backends.realize import STATS
from uopir.frontend.jit import JitError
from uopir.nn import optim

DEVICES = ["python"] + (["c"] if "c" in available() else [])


def _counters() -> tuple[int, int, int]:
    return STATS.lowerings, STATS.cache_hits, STATS.compiles


@pytest.mark.parametrize("device", DEVICES)
def test_replay_computes_new_inputs_without_scheduling_or_compiling(device: str) -> None:
    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((3, 4)).astype(np.float32)
    w = Tensor(w_np, device=device)

    @TinyJit
    def f(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        h = ((x @ w) + y).relu()
        return h * 2, h.sum()

    results = []
    for i in range(5):
        x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
        xt, yt = Tensor(x, device=device), Tensor(y, device=device)
        before, kernels = _counters(), STATS.kernels
        a, s = f(xt, yt)
        if i >= 2:  # replays: no schedule built or taken from the cache, nothing compiled, the kernels ran
            assert _counters() == before and STATS.kernels > kernels
        assert f.captured == (i >= 1) and a.device == device
        ref = np.maximum(x @ w_np + y, 0)
        np.testing.assert_allclose(a.numpy(), ref * 2, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.numpy(), ref.sum(), rtol=1e-5, atol=1e-5)
        results.append((a, ref))
    for a, ref in results:  # every call returned its own buffer: later replays did not overwrite earlier results
        np.testing.assert_allclose(a.numpy(), ref * 2, rtol=1e-5, atol=1e-5)


def test_changed_shapes_dtypes_and_arguments_are_refused() -> None:
    @TinyJit
    def f(x: Tensor, scale: float) -> Tensor:
        return x * scale + 1

    for _ in range(3):
        assert f(Tensor([1.0, 2.0]), 3.0).numpy().tolist() == [4.0, 7.0]
    with pytest.raises(JitError, match=r"argument 0 has shape \(3,\) .* captured with shape \(2,\)"):
        f(Tensor([1.0, 2.0, 3.0]), 3.0)
    with pytest.raises(JitError, match=r"argument 0 has shape \(2,\) dtype dtypes.int32"):
        f(Tensor([1, 2]), 3.0)
    with pytest.raises(JitError, match="non-Tensor argument differs"):
        f(Tensor([1.0, 2.0]), 4.0)
    with pytest.raises(JitError, match="called with 0 Tensor arguments, captured with 1"):
        f([1.0, 2.0], 3.0)
    f.reset()
    for _ in range(3):  # captured again at the new shape
        assert f(Tensor([1.0, 2.0, 3.0]), 4.0).numpy().tolist() == [5.0, 9.0, 13.0]

    g = TinyJit(lambda a, b: a + b)
    t = Tensor([1.0])
    g(t, t)
    with pytest.raises(JitError, match="share one buffer"):
        g(t, t)


def test_jitted_training_step_updates_parameters_in_place() -> None:
    """Least squares with the gradient written out (2/n X^T (Xw - y)) and SGD with momentum: the replayed kernels
    update the same parameter and momentum buffers as the Python steps would."""
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((4, 1)).astype(np.float32)
    batches = [(rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((8, 1)).astype(np.float32))
               for _ in range(6)]
    old = Tensor.training
    Tensor.training = True
    try:
        w = Tensor(w0.copy())
        opt = optim.SGD([w], lr=0.05, momentum=0.9)

        @TinyJit
        def step(x: Tensor, y: Tensor) -> Tensor:
            err = x @ w - y
            w.grad = x.transpose() @ err * (2 / x.shape[0])
            loss = (err * err).mean()
            Tensor.realize_all(loss, *opt.schedule_step())  # one program: the loss reads w before the update
            return loss

        losses = []
        for i, (x, y) in enumerate(batches):
            before = _counters()
            losses.append(step(Tensor(x), Tensor(y)).item())
            if i >= 2:
                assert _counters() == before
    finally:
        Tensor.training = old
    ref_w, buf = w0.astype(np.float64), np.zeros((4, 1))
    for (x, y), loss in zip(batches, losses, strict=True):
        err = x @ ref_w - y
        assert loss == pytest.approx(float((err * err).mean()), rel=1e-4)
        buf = 0.9 * buf + x.T @ err * (2 / 8)
        ref_w = ref_w - 0.05 * buf
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-4, atol=1e-5)


def test_random_tensors_are_drawn_again_on_replay() -> None:
    """Dropout masks (host-drawn random buffers) are new on every replay, and the same a plain run draws."""
    x = Tensor(np.ones((4, 8), np.float32))

    def f(x: Tensor) -> Tensor:
        return x.dropout(0.5) + Tensor.rand(4, 8)

    old = Tensor.training
    Tensor.training = True
    try:
        Tensor.manual_seed(3)
        plain = [f(x).numpy() for _ in range(5)]
        Tensor.manual_seed(3)
        jf = TinyJit(f)
        jitted = [jf(x).numpy() for _ in range(5)]
    finally:
        Tensor.training = old
    assert jf.captured
    for a, b in zip(plain, jitted, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.array_equal(jitted[3], jitted[4]) and not np.array_equal(jitted[2], jitted[3])


def test_jitted_method_binds_its_instance() -> None:
    class Model:
        def __init__(self) -> None:
            self.w = Tensor(np.array([2.0, 3.0], np.float32))

        @TinyJit
        def __call__(self, x: Tensor) -> Tensor:
            return x * self.w

    m = Model()
    outs = [m(Tensor(np.array([i, i + 1], np.float32))).numpy().tolist() for i in range(4)]
    assert outs == [[0, 3], [2, 6], [4, 9], [6, 12]] and Model.__call__.captured


def test_random_tensor_returned_as_drawn_is_drawn_again() -> None:
    """A random tensor the function returns untouched (no kernel reads it) is still new on every replay."""
    jf = TinyJit(lambda: Tensor.rand(16).realize())
    draws = [jf().numpy() for _ in range(4)]
    assert jf.captured
    assert all(not np.array_equal(a, b) for a, b in zip(draws, draws[1:], strict=False))
