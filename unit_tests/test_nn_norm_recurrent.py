"""uopir.nn's norms (LayerNorm2d, InstanceNorm, RMSNorm, BatchNorm over a chosen axis and its state dict) and
LSTMCell against numpy formulas; gradients of RMSNorm and LSTMCell against central differences in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

from uopir import Tensor, dtypes, nn
from uopir.nn.state import get_state_dict, load_state_dict


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float = 1e-5) -> np.ndarray:
    return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)


def _fd(f, arr: np.ndarray, r: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d sum(f(arr) * r) / d arr by central differences."""
    g = np.zeros_like(arr)
    for i in np.ndindex(arr.shape):
        d = np.zeros_like(arr)
        d[i] = h
        g[i] = ((f(arr + d) * r).sum() - (f(arr - d) * r).sum()) / (2 * h)
    return g


def test_layernorm2d_and_instancenorm() -> None:
    x = (_rng(0).standard_normal((2, 3, 2, 4)) * 2 + 1).astype(np.float32)
    ln = nn.LayerNorm2d(3)
    ln.weight.assign(Tensor(np.array([1.0, 2.0, 3.0], np.float32))).realize()
    ref = _normalize(x, (1,)) * np.array([1, 2, 3])[None, :, None, None]
    np.testing.assert_allclose(ln(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="LayerNorm2d over"):
        ln(Tensor.zeros(2, 4, 2, 2))
    inorm = nn.InstanceNorm(3)
    assert list(get_state_dict(inorm)) == ["weight", "bias"] and nn.InstanceNorm(3, affine=False).weight is None
    inorm.bias.assign(Tensor(np.array([0.5, 0.0, -1.0], np.float32))).realize()
    ref = _normalize(x, (2, 3)) + np.array([0.5, 0, -1])[None, :, None, None]
    np.testing.assert_allclose(inorm(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="InstanceNorm of 3 channels"):
        inorm(Tensor.zeros(2, 4, 5))


def test_rmsnorm_forward_half_input_and_gradient() -> None:
    norm = nn.RMSNorm(4)
    assert norm.eps == 1e-6 and nn.RMSNorm(4, elementwise_affine=False).weight is None
    w = np.array([1.0, 0.5, 2.0, -1.0])
    norm.weight.assign(Tensor(w.astype(np.float32))).realize()

    def ref(v: np.ndarray) -> np.ndarray:
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * w
    x = _rng(1).standard_normal((3, 4))
    r = _rng(2).standard_normal((3, 4))
    xt = Tensor(x.astype(np.float32), requires_grad=True)
    y = norm(xt)
    (y * Tensor(r.astype(np.float32))).sum().backward()
    np.testing.assert_allclose(y.numpy(), ref(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xt.grad.numpy(), _fd(ref, x, r), rtol=1e-4, atol=1e-4)
    # a half input is normalized in float32 and cast back, then promoted by the float32 weight (tinygrad's)
    xh = x.astype(np.float16)
    bare = nn.RMSNorm(4, elementwise_affine=False)(Tensor(xh))
    assert bare.dtype is dtypes.float16 and norm(Tensor(xh)).dtype is dtypes.float32
    np.testing.assert_allclose(bare.numpy(), ref(xh.astype(np.float64)) / w, rtol=2e-3, atol=2e-3)


def test_batchnorm_over_a_chosen_axis(training: None) -> None:
    """(N, L, C) features on the last axis, as a transformer keeps them: statistics over N and L."""
    bn = nn.BatchNorm(3, momentum=0.5, axis=-1)
    bn.weight.assign(Tensor(np.array([1.0, 2.0, 0.5], np.float32))).realize()
    x = (_rng(3).standard_normal((4, 5, 3)) * 2 - 1).astype(np.float32)
    ref = _normalize(x, (0, 1)) * np.array([1.0, 2.0, 0.5])
    np.testing.assert_allclose(bn(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.5 * x.mean((0, 1)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.5 + 0.5 * x.var((0, 1), ddof=1), rtol=1e-5)
    Tensor.training = False
    ref = (x - bn.running_mean.numpy()) / np.sqrt(bn.running_var.numpy() + 1e-5) * np.array([1.0, 2.0, 0.5])
    np.testing.assert_allclose(bn(Tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="3 channels got an input with 5 on axis 1"):
        nn.BatchNorm(3, axis=1)(Tensor(x))
    with pytest.raises(ValueError, match="axis 3"):
        nn.BatchNorm(3, axis=3)(Tensor(x))


def test_batchnorm_state_dict_has_a_0d_num_batches_tracked() -> None:
    bn = nn.BatchNorm2d(2)
    sd = get_state_dict(bn)
    assert list(sd) == ["weight", "bias", "num_batches_tracked", "running_mean", "running_var"]
    assert sd["num_batches_tracked"].shape == () and sd["num_batches_tracked"].dtype is dtypes.int64
    assert nn.BatchNorm3d is nn.BatchNorm
    # a torch/tinygrad state dict: 0-d int64 count
    theirs = {"weight": np.array([2.0, 3.0], np.float32), "bias": np.zeros(2, np.float32),
              "num_batches_tracked": np.array(7, np.int64), "running_mean": np.array([1.0, -1.0], np.float32),
              "running_var": np.array([4.0, 9.0], np.float32)}
    load_state_dict(bn, {k: Tensor(v) for k, v in theirs.items()})
    assert bn.num_batches_tracked.numpy().tolist() == 7
    x = _rng(4).standard_normal((1, 2, 1, 3)).astype(np.float32)
    ref = (x - np.array([1.0, -1.0])[:, None, None]) / np.sqrt(np.array([4.0, 9.0]) + 1e-5)[:, None, None]
    np.testing.assert_allclose(bn(Tensor(x)).numpy(), ref * np.array([2.0, 3.0])[:, None, None], rtol=1e-5, atol=1e-5)


def test_num_batches_tracked_loads_from_a_1_element_vector() -> None:
    """Older checkpoints (and tinygrad's own test) store the counter as shape (1,): it loads into the 0-d one, as
    tinygrad's load_state_dict reshapes () <-> (1,); any other shape is still a mismatch."""
    bn = nn.BatchNorm(1, track_running_stats=False)
    load_state_dict(bn, {"weight": Tensor([2.0]), "bias": Tensor([1.0]),
                         "num_batches_tracked": Tensor(np.array([5], np.int64))})
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.numpy().tolist() == 5
    assert bn.weight.numpy().tolist() == [2.0]
    with pytest.raises(ValueError, match=r"`num_batches_tracked`: Expected shape \(\), but found \(2,\)"):
        load_state_dict(bn, {"weight": Tensor([2.0]), "bias": Tensor([1.0]),
                             "num_batches_tracked": Tensor(np.array([5, 6], np.int64))})


def _lstm_ref(x: np.ndarray, h: np.ndarray, c: np.ndarray, wih: np.ndarray, whh: np.ndarray, bih: np.ndarray,
              bhh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    def sig(v: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-v))
    i, f, g, o = np.split(x @ wih.T + bih + h @ whh.T + bhh, 4, axis=1)
    c2 = sig(f) * c + sig(i) * np.tanh(g)
    return sig(o) * np.tanh(c2), c2


def test_lstmcell_with_and_without_bias_and_its_gradient() -> None:
    Tensor.manual_seed(7)
    cell = nn.LSTMCell(3, 2)
    assert list(get_state_dict(cell)) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert cell.weight_ih.shape == (8, 3) and cell.weight_hh.shape == (8, 2)
    assert np.abs(cell.weight_ih.numpy()).max() <= 1 / math.sqrt(2) and not cell.bias_ih.numpy().any()
    wih, whh = cell.weight_ih.numpy().astype(np.float64), cell.weight_hh.numpy().astype(np.float64)
    bih, bhh = _rng(5).standard_normal(8), _rng(6).standard_normal(8)
    cell.bias_ih.assign(Tensor(bih.astype(np.float32))).realize()
    cell.bias_hh.assign(Tensor(bhh.astype(np.float32))).realize()
    x, h, c = _rng(7).standard_normal((2, 3)), _rng(8).standard_normal((2, 2)), _rng(9).standard_normal((2, 2))
    rh, rc = _rng(10).standard_normal((2, 2)), _rng(11).standard_normal((2, 2))
    xt = Tensor(x.astype(np.float32), requires_grad=True)
    h2, c2 = cell(xt, (Tensor(h.astype(np.float32)), Tensor(c.astype(np.float32))))
    ((h2 * Tensor(rh.astype(np.float32))).sum() + (c2 * Tensor(rc.astype(np.float32))).sum()).backward()
    rh2, rc2 = _lstm_ref(x, h, c, wih, whh, bih, bhh)
    np.testing.assert_allclose(h2.numpy(), rh2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c2.numpy(), rc2, rtol=1e-5, atol=1e-5)

    def loss_of(f):
        return lambda v: np.concatenate([a * r for a, r in zip(f(v), (rh, rc), strict=True)], 1)
    ones = np.ones((2, 4))
    gx = _fd(loss_of(lambda v: _lstm_ref(v, h, c, wih, whh, bih, bhh)), x, ones)
    gb = _fd(loss_of(lambda v: _lstm_ref(x, h, c, wih, whh, v, bhh)), bih, ones)
    np.testing.assert_allclose(xt.grad.numpy(), gx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cell.bias_ih.grad.numpy(), gb, rtol=1e-4, atol=1e-5)
    # no bias, no state: zeros for (h, c)
    plain = nn.LSTMCell(3, 2, bias=False)
    assert plain.bias_ih is None and list(get_state_dict(plain)) == ["weight_ih", "weight_hh"]
    ph, pc = plain(Tensor(x.astype(np.float32)))
    z = np.zeros((2, 2))
    rh2, rc2 = _lstm_ref(x, z, z, plain.weight_ih.numpy(), plain.weight_hh.numpy(), np.zeros(8), np.zeros(8))
    np.testing.assert_allclose(ph.numpy(), rh2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pc.numpy(), rc2, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="input_size 3"):
        plain(Tensor.zeros(2, 4))
