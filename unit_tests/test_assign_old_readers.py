"""A lazy tensor built before an in-place write (Tensor.assign, an optimizer's step) keeps the value it had when it
was built: realizing the assign realizes, in the same program, the live unrealized tensors that read through the
assign or are scalars (a loss); larger readers of the old contents read a copy of them (no kernel). Dead tensors and
pure views of the buffer are left alone."""
from __future__ import annotations

import numpy as np

from uopir import Tensor, TinyJit, nn
from uopir.backends.realize import STATS


def test_a_lazy_read_keeps_the_value_from_before_the_assign() -> None:
    a = Tensor(np.arange(4, dtype=np.float32))
    b = a + 1  # old a + 1
    view = a.reshape(2, 2)  # a view aliases the buffer: it sees the new contents
    a.assign(a * 2).realize()
    assert a.numpy().tolist() == [0, 2, 4, 6]
    assert b.numpy().tolist() == [1, 2, 3, 4]
    assert view.numpy().tolist() == [[0, 2], [4, 6]]


def test_a_read_through_the_assign_is_not_applied_twice() -> None:
    p = Tensor(np.arange(4, dtype=np.float32))
    p.assign(p + 1)
    after = p * 3  # reads the assigned value
    p.realize()
    assert p.numpy().tolist() == [1, 2, 3, 4] and after.numpy().tolist() == [3, 6, 9, 12]


def test_chains_of_assigns() -> None:
    a = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    ref = np.array([1.0, 2.0, 3.0], np.float32)
    b = a * 10  # a0 * 10
    a.assign(a + 1).realize()
    c = a + b  # a1 + a0 * 10
    a.assign(a * a)
    d = a - 1  # reads through the pending assign: a2 - 1
    a.realize()
    e = a * 2  # a2 * 2
    a.assign(a - 5).realize()
    a1 = ref + 1
    a2 = a1 * a1
    np.testing.assert_allclose(a.numpy(), a2 - 5)
    np.testing.assert_allclose(b.numpy(), ref * 10)
    np.testing.assert_allclose(c.numpy(), a1 + ref * 10)
    np.testing.assert_allclose(d.numpy(), a2 - 1)
    np.testing.assert_allclose(e.numpy(), a2 * 2)


def test_a_view_assign_keeps_earlier_reads() -> None:
    p = Tensor(np.zeros((2, 3), np.float32))
    s = p.sum(axis=1)  # before the write: zeros
    p[1].assign(Tensor([7.0, 8.0, 9.0])).realize()
    t = p.sum(axis=1)
    assert p.numpy().tolist() == [[0, 0, 0], [7, 8, 9]]
    assert s.numpy().tolist() == [0, 0] and t.numpy().tolist() == [0, 24]


def test_a_dead_lazy_tensor_is_not_computed() -> None:
    a = Tensor(np.arange(6, dtype=np.float32))
    a.assign(a + 1).realize()  # warm: compiles the assign's kernels
    k = STATS.kernels
    a.assign(a + 1).realize()
    alone = STATS.kernels - k
    b = (a * 5).sum()
    del b  # dead: not realized with the next assign
    k = STATS.kernels
    a.assign(a + 1).realize()
    assert STATS.kernels - k == alone
    c = (a * 5).sum()  # alive scalar: computed with the assign, one more kernel
    k = STATS.kernels
    a.assign(a + 1).realize()
    assert STATS.kernels - k == alone + 1
    d = a * 5  # alive, larger: reads a copy of the old contents, no kernel now
    k = STATS.kernels
    a.assign(a + 1).realize()
    assert STATS.kernels - k == alone
    assert c.numpy().tolist() == 5 * (0 + 1 + 2 + 3 + 4 + 5 + 6 * 3)
    assert d.numpy().tolist() == [20, 25, 30, 35, 40, 45]
    assert a.numpy().tolist() == [5, 6, 7, 8, 9, 10]


def _mlp_numpy(w1: np.ndarray, w2: np.ndarray, x: np.ndarray) -> float:
    return float(np.tanh(np.maximum(x @ w1, 0) @ w2).sum())


def _train(opt_cls: type, **kw: float) -> None:
    rng = np.random.default_rng(0)
    w1n, w2n = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    x_np = rng.standard_normal((5, 3)).astype(np.float32)
    w1, w2 = Tensor(w1n.copy(), requires_grad=True), Tensor(w2n.copy(), requires_grad=True)
    opt = opt_cls([w1, w2], **kw)
    Tensor.training = True
    try:
        for _ in range(2):
            old1, old2 = w1.numpy(), w2.numpy()
            opt.zero_grad()
            loss = (Tensor(x_np) @ w1).relu().matmul(w2).tanh().sum()
            loss.backward()
            opt.step()
            assert not np.allclose(w1.numpy(), old1)  # the step did write the weights
            np.testing.assert_allclose(loss.numpy(), _mlp_numpy(old1, old2, x_np), rtol=1e-5)
            h = np.maximum(x_np @ old1, 0)  # the gradient too is the one at the old weights
            gy = 1 - np.tanh(h @ old2) ** 2
            np.testing.assert_allclose(w2.grad.numpy(), h.T @ gy, rtol=1e-4, atol=1e-5)
    finally:
        Tensor.training = False


def test_sgd_step_keeps_the_loss_of_the_old_weights() -> None:
    _train(nn.optim.SGD, lr=0.1, momentum=0.9)


def test_adam_step_keeps_the_loss_of_the_old_weights() -> None:
    _train(nn.optim.Adam, lr=0.05)


def test_jitted_step_returns_the_loss_of_the_old_weights() -> None:
    rng = np.random.default_rng(1)
    wn = rng.standard_normal((3, 2)).astype(np.float32)
    w = Tensor(wn.copy(), requires_grad=True)
    opt = nn.optim.SGD([w], lr=0.1)

    @TinyJit
    def step(x: Tensor) -> Tensor:
        opt.zero_grad()
        loss = (x @ w).square().sum()
        loss.backward()
        opt.step()  # the loss is realized with the step, not after it
        return loss

    Tensor.training = True
    try:
        for i in range(4):
            x_np = rng.standard_normal((4, 3)).astype(np.float32)
            old = w.numpy()
            loss = step(Tensor(x_np)).numpy()
            np.testing.assert_allclose(loss, float(((x_np @ old) ** 2).sum()), rtol=1e-5, err_msg=f"call {i}")
            np.testing.assert_allclose(w.numpy(), old - 0.1 * x_np.T @ (2 * x_np @ old), rtol=1e-4, atol=1e-5)
    finally:
        Tensor.training = False


def test_a_pending_assign_of_another_buffer_reads_the_old_value() -> None:
    p = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    q = Tensor(np.zeros(3, np.float32))
    s = Tensor(np.zeros((), np.float32))
    q.assign(p * 2)  # pending, large: keeps reading p's old contents
    s.assign(p.sum())  # pending, scalar: runs with p's assign
    p.assign(p + 10).realize()
    q.realize()
    assert p.numpy().tolist() == [11, 12, 13] and q.numpy().tolist() == [2, 4, 6] and s.numpy().tolist() == 6


def test_realizing_a_read_through_a_pending_assign_realizes_the_assign_once() -> None:
    p = Tensor(np.array([1.0, 2.0], np.float32))
    p.assign(p + 1)
    after = p * 3
    assert after.numpy().tolist() == [6, 9]  # runs the assign, and p with it
    assert repr(p).startswith("<Tensor realized")
    assert p.numpy().tolist() == [2, 3]  # not written a second time
