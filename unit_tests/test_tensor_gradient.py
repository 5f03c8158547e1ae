"""Autograd: analytic gradients (exact values), second order, and the API (requires_grad, backward, gradient,
detach, no_grad, train); the finite-difference checks of every op are in test_gradient.py."""
from __future__ import annotations

import numpy as np
import pytest

import uopir
from uopir import Tensor, Variable, dtypes
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.verify import verify


def away(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(3).permutation(np.linspace(0.3, 2.0, int(np.prod(shape)))).reshape(shape)


# ---- analytic cases --------------------------------------------------------------------------------------------------
def test_sum_of_squares_is_exactly_2x():
    x = away((5,))
    t = Tensor(x, requires_grad=True)
    (t * t).sum().backward()
    assert t.grad is not None
    np.testing.assert_array_equal(t.grad.numpy(), 2 * x)


def test_max_ties_split_the_gradient():
    x = Tensor([1.0, 3.0, 3.0, 2.0, 3.0])
    (g,) = x.max().gradient(x)
    np.testing.assert_allclose(g.numpy(), [0, 1 / 3, 1 / 3, 0, 1 / 3], rtol=1e-6)
    a, b = Tensor([1.0, 2.0, 5.0]), Tensor([1.0, 3.0, 4.0])
    ga, gb = a.maximum(b).sum().gradient(a, b)
    assert ga.tolist() == [0.5, 0.0, 1.0] and gb.tolist() == [0.5, 1.0, 0.0]


def test_comparisons_and_rounding_give_zero_gradient():
    x = Tensor([0.4, 1.6, -2.2])
    (g,) = ((x > 0).float() + x.floor() + x.sign()).sum().gradient(x)
    assert g.tolist() == [0.0, 0.0, 0.0]


def test_pow_has_its_own_gradient_with_torchs_special_points():
    inf = float("inf")

    def grad(xs: list[float], e: float, reverse: bool = False) -> list[float]:
        x = Tensor(xs, requires_grad=True)
        return ((e ** x) if reverse else (x ** e)).sum().gradient(x)[0].tolist()

    assert grad([0.0, 1.0, 2.0], 0) == [0.0, 0.0, 0.0]  # x**0 keeps x in the graph, with zero gradient
    assert grad([1.0], -1.0) == [-1.0] and grad([1.0], 0.5) == [0.5]
    assert grad([0.0], 0.5) == [inf] and grad([-1.0, 0.0, 1.0], -1.0) == [-1.0, -inf, -1.0]
    assert np.isnan(grad([-30.0], 0.2)).all() and np.isnan(grad([1.0], -2.0, True)).all()  # ln of a negative base
    assert grad([-1.0, 0.0, 2.0], 0.0, True) == [-inf, 0.0, 0.0]  # d/dy 0**y
    np.testing.assert_allclose(grad([0.0], 0.7, True), [np.log(0.7)], rtol=1e-6)
    assert grad([-inf], 0.5) == [0.0] and grad([-inf], 3.5) == [inf]
    a, b = Tensor([2.0, 0.0, 3.0]), Tensor([3.0, 0.0, 2.5])
    ga, gb = (a ** b).sum().gradient(a, b)
    np.testing.assert_allclose(ga.numpy(), [12.0, 0.0, 2.5 * 3 ** 1.5], rtol=1e-6)
    np.testing.assert_allclose(gb.numpy(), [8 * np.log(2), 0.0, 3 ** 2.5 * np.log(3)], rtol=1e-6)


def test_sigmoid_family_gradient_is_finite_at_extremes():
    x = Tensor([-300.0, 0.0, 300.0, 2.0])
    s2 = 1 / (1 + np.exp(-2.0))
    np.testing.assert_allclose(x.sigmoid().sum().gradient(x)[0].numpy(), [0, 0.25, 0, s2 * (1 - s2)], rtol=1e-6)
    np.testing.assert_allclose(x.tanh().sum().gradient(x)[0].numpy(), [0, 1, 0, 1 - np.tanh(2.0) ** 2], rtol=1e-5,
                               atol=1e-7)
    for f in ("gelu", "quick_gelu", "silu"):
        assert getattr(x, f)().sum().gradient(x)[0].tolist()[:3] == [0.0, 0.5, 1.0], f


def test_hand_written_sigmoid_gradient_is_finite_and_precise_everywhere():
    """exp(x) / (c + exp(x)) is differentiated as one function (tinygrad's test_sigmoid_alt_extreme): the op-by-op
    chain gives 0 * inf = nan once float32 exp(x) overflows (x = 300; torch's chain is nan there too) and loses
    1 - s to rounding far out on the flat side (x = 20, 88). Elsewhere the quotient's own gradient is formed
    through a/b, since -a/b**2 overflows (b**2 = inf) where a/b is finite."""
    def grad(v: list[float], dtype, c: float = 1.0, k: float = 1.0) -> np.ndarray:
        x = Tensor(v, dtype=dtype)
        e = (x * k).exp()
        return (e / (c + e)).sum().gradient(x)[0].numpy()

    def ref(v: list[float], c: float = 1.0, k: float = 1.0) -> np.ndarray:  # k c e / (c + e)**2, without cancelling
        z = k * np.array(v, np.float64) - np.log(c)
        return k * np.exp(-np.abs(z)) / (1 + np.exp(-np.abs(z))) ** 2
    v32 = [300.0, -300.0, 88.0, -88.0, 80.0, 20.0, -20.0, 3.0, 0.0]
    got = grad(v32, dtypes.float32)
    assert got[:2].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(got, ref(v32), rtol=1e-5, atol=1e-44)
    v64 = [300.0, -300.0, 600.0, 2.0, 40.0]
    np.testing.assert_allclose(grad(v64, dtypes.float64), ref(v64), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(grad([1.0, 2.0, -1.5], dtypes.float32, c=3.0, k=2.0), ref([1.0, 2.0, -1.5], 3.0, 2.0),
                               rtol=1e-5)
    x = Tensor([1.0, -2.0], requires_grad=True)  # the quotient used twice; exp's other use keeps its own gradient
    e = x.exp()
    ((e / (1 + e)) * e).sum().backward()
    xv = np.array([1.0, -2.0])
    s = 1 / (1 + np.exp(-xv))
    np.testing.assert_allclose(x.grad.numpy(), s * (1 - s) * np.exp(xv) + s * np.exp(xv), rtol=1e-5)


def test_relu_and_clip_gradient_is_zero_at_the_boundary_as_torch():
    x = Tensor([-3.0, -2.5, 0.0, 1.5, 2.0])
    assert x.clip(-2.5, 1.5).sum().gradient(x)[0].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert x.relu().sum().gradient(x)[0].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert np.isnan(Tensor([float("nan")]).relu().numpy()).all() and x.clip(3, 0).tolist() == [0.0] * 5


def test_softmax_gradient_does_not_go_through_the_shifting_max():
    # sum(softmax) is 1 whatever x is: its gradient is 0 up to rounding; through the max it was ~4e-7 (torch ~1e-8)
    x = Tensor(np.random.default_rng(0).uniform(-2, 2, size=(45, 65)).astype(np.float32))
    for f in ("softmax", "softmin"):
        assert np.abs(getattr(x, f)(1).sum().gradient(x)[0].numpy()).max() < 1e-7, f


def test_prod_gradient_with_zeros_counts_them():
    for v, want in (([0.0, 2.0, 3.0], [6.0, 0.0, 0.0]), ([0.0, 0.0, 3.0], [0.0, 0.0, 0.0]), ([1.0, 2.0, 3.0],
                                                                                            [6.0, 3.0, 2.0])):
        x = Tensor(v)
        assert x.prod().gradient(x)[0].tolist() == want
    x = Tensor([[0.0, 2.0], [3.0, 4.0]])
    assert x.prod(0).sum().gradient(x)[0].tolist() == [[3.0, 4.0], [0.0, 2.0]]


def test_acosh_gradient_below_one_is_torchs_formula():
    x = Tensor([-1.716, -0.5, 2.0])
    g = x.acosh().sum().gradient(x)[0].numpy()
    assert np.isnan(x.acosh().numpy()[:2]).all() and np.isnan(g[1])
    np.testing.assert_allclose(g[[0, 2]], 1 / np.sqrt(np.array([-1.716, 2.0]) ** 2 - 1), rtol=1e-5)


def test_cast_between_floats_passes_the_gradient_back_in_the_source_dtype():
    x = Tensor([1.5, -0.25], dtype=dtypes.float32)
    (g,) = (x.double() * Tensor([2.0, 3.0], dtype=dtypes.float64)).half().sum().gradient(x)
    assert g.dtype is dtypes.float32 and g.tolist() == [2.0, 3.0]


def test_second_order_of_cube_is_6x():
    x = Tensor([1.5, -2.0], dtype=dtypes.float64)
    (g,) = (x ** 3).sum().gradient(x)
    (gg,) = g.sum().gradient(x)
    np.testing.assert_allclose(g.numpy(), [3 * 1.5 ** 2, 12.0])
    np.testing.assert_allclose(gg.numpy(), [9.0, -12.0])


# ---- the API ---------------------------------------------------------------------------------------------------------
def test_backward_fills_grad_of_every_parameter_and_accumulates():
    w = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = Tensor.zeros(2, requires_grad=True)
    x = Tensor([[1.0, -1.0]])
    assert w.requires_grad and b.requires_grad and x.requires_grad is None and w.grad is None
    (x @ w + b).sum().backward()
    assert w.grad is not None and b.grad is not None and x.grad.tolist() == [[3.0, 7.0]]  # None: as tinygrad
    assert w.grad.tolist() == [[1.0, 1.0], [-1.0, -1.0]] and b.grad.tolist() == [1.0, 1.0]
    (b * 3).sum().backward()  # a second backward adds (reset with t.grad = None)
    assert b.grad.tolist() == [4.0, 4.0] and w.grad.tolist() == [[1.0, 1.0], [-1.0, -1.0]]


def test_backward_fills_grad_of_tensors_with_requires_grad_none_but_not_false():
    tt, off = Tensor([-1.0, 2.0, -3.0]), Tensor([1.0, 1.0, 1.0], requires_grad=False)
    assert tt.requires_grad is None
    loss = (tt * (tt < 0) * off).sum()
    loss.backward()
    assert tt.grad is not None and tt.grad.tolist() == [1.0, 0.0, 1.0]
    assert off.grad is None and loss.grad is None


def test_equal_splats_requiring_grad_are_distinct_parameters():
    """Tensor.ones(2) is one hash-consed const: two parameters made of it must still get their own gradients."""
    a, b = Tensor.ones(2, requires_grad=True), Tensor.ones(2, requires_grad=True)
    assert a.uop is not b.uop
    (a * b * Tensor([2.0, 3.0]) + a).sum().backward()
    assert a.grad.tolist() == [3.0, 4.0] and b.grad.tolist() == [2.0, 3.0]


def test_detach_and_no_grad_stop_the_gradient():
    x = Tensor([2.0, 3.0])
    (g,) = (x * x.detach()).sum().gradient(x)
    assert g.tolist() == [2.0, 3.0]
    with Tensor.test():
        y = x * x
    assert not Tensor.no_grad
    with uopir.no_grad():
        z = x * 4
    (g,) = (y + z + x).sum().gradient(x)
    assert g.tolist() == [1.0, 1.0] and z.tolist() == [8.0, 12.0]  # detached values realize as usual


def test_train_context_sets_training():
    assert not Tensor.training
    with Tensor.train():
        assert Tensor.training
        with Tensor.train(False):
            assert not Tensor.training
        assert Tensor.training
    assert not Tensor.training


def test_backward_graph_is_ordinary_ir():
    """The gradient prints, parses back to the same graph and verifies."""
    x = Tensor(away((2, 3)), dtype=dtypes.float32)
    (g,) = (x.relu() @ Tensor.ones(3, 2)).softmax().max().gradient(x)
    verify(g.uop)
    assert parse_ir(print_ir(g.uop)) is g.uop


def test_deep_chain_has_no_recursion():
    x = Tensor([1.0])
    y = x
    for _ in range(3000):
        y = y * 1.0 + 0.0
    (g,) = y.sum().gradient(x)
    assert g.uop.shape == (1,)  # built without recursion; realizing is the scheduler's business


def test_bad_uses_are_clear_errors():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="must be a scalar"):
        (x * 2).backward()
    with pytest.raises(ValueError, match="not in the graph"):
        Tensor([1.0]).sum().gradient(x)
    assert Tensor([1.0]).sum().gradient(x, materialize_grads=True)[0].tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="only float tensors"):
        Tensor([1, 2], requires_grad=True)
    with pytest.raises(ValueError, match="no tensor with requires_grad"):
        Tensor([1.0]).sum().backward()
    loss = (x * x).sum()
    loss.realize()  # its graph is kept for backward (x requires a gradient): see test_backward_after_the_loss_is_read
    x.grad = None
    loss.backward()
    assert x.grad.tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match="shape"):
        (x * 2).backward(Tensor([1.0]))
    x.grad = None
    (x * 2).backward(Tensor([1.0, 0.5]))
    assert x.grad.tolist() == [2.0, 1.0]


def test_gradient_through_a_symbolic_shrink():
    cache = Tensor(away((6, 2)))
    n = Variable("n", 1, 6).bind(4)
    (g,) = (cache[:n] * cache[:n]).sum().gradient(cache)
    want = 2 * cache.numpy() * (np.arange(6) < 4)[:, None]
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)


def test_backward_after_the_loss_is_read_as_torch_and_tinygrad():
    """Reading a loss (`.numpy()`, `.item()`, `.realize()`) before `backward()` keeps its graph while a tensor with
    requires_grad=True is alive, so the gradient is the same as without the read."""
    w = Tensor([1.0, -2.0, 3.0], requires_grad=True)
    x = Tensor([0.5, 4.0, -1.0])
    loss = (w * w * x).sum()
    assert loss.item() == 0.5 + 16.0 - 9.0
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.array([1.0, -2.0, 3.0]) * np.array([0.5, 4.0, -1.0]))
    y = (w.exp()).sum().realize()
    np.testing.assert_allclose(y.gradient(w)[0].numpy(), np.exp([1.0, -2.0, 3.0]), rtol=1e-6)
    with Tensor.test():  # no_grad: nothing is kept
        z = (w * 2).sum().realize()
    with pytest.raises(ValueError, match="it is realized, so its graph is gone"):
        z.backward()


def test_an_inference_result_does_not_keep_its_graph():
    """Without a tensor that requires a gradient nothing is kept: a realized result holds no reference to the
    graph (and so to the input buffers) it was computed from."""
    import gc
    import weakref
    gc.collect()
    x = Tensor(np.ones((4, 4), np.float32)).realize()
    y = (x + 1).sum().realize()
    ref = weakref.ref(x.uop)
    del x
    gc.collect()
    assert ref() is None and y.item() == 32.0
