"""uopir.nn layers against numpy formulas: outputs, default initialisations, BatchNorm's running statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from uopir import Tensor, nn
from uopir.nn.state import get_state_dict


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_linear_output_and_init_bounds() -> None:
    Tensor.manual_seed(1)
    lin = nn.Linear(50, 7)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert w.shape == (7, 50) and b.shape == (7,)
    # kaiming_uniform(a=sqrt(5)) of fan_in 50 and the bias bound are both 1/sqrt(50)
    bound = 1 / math.sqrt(50)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound and np.abs(b).max() <= bound
    x = _rng().standard_normal((3, 50)).astype(np.float32)
    np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ w.T + b, rtol=1e-5, atol=1e-5)
    assert nn.Linear(4, 2, bias=False).bias is None


def test_conv2d_matches_a_direct_convolution() -> None:
    Tensor.manual_seed(2)
    conv = nn.Conv2d(2, 3, 3, stride=1, padding=1)
    assert conv.weight.shape == (3, 2, 3, 3) and conv.bias.shape == (3,)
    bound = 1 / math.sqrt(2 * 9)
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.bias.numpy()).max() <= bound
    x = _rng(1).standard_normal((1, 2, 4, 5)).astype(np.float32)
    w, b = conv.weight.numpy(), conv.bias.numpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 3, 4, 5), np.float32)
    for i in range(4):
        for j in range(5):
            ref[0, :, i, j] = np.einsum("chw,ochw->o", xp[0, :, i:i + 3, j:j + 3], w) + b
    np.testing.assert_allclose(conv(Tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_batchnorm_training_updates_running_stats(training: None) -> None:
    bn = nn.BatchNorm2d(3, momentum=0.2)
    bn.weight.assign(Tensor(np.array([1.0, 2.0, 0.5], np.float32))).realize()
    bn.bias.assign(Tensor(np.array([0.0, -1.0, 3.0], np.float32))).realize()
    x = (_rng(2).standard_normal((4, 3, 2, 2)) * 3 + 1).astype(np.float32)
    y = bn(Tensor(x)).numpy()
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    ref = (x - mean[None, :, None, None]) / np.sqrt(var + 1e-5)[None, :, None, None]
    ref = ref * np.array([1, 2, 0.5])[None, :, None, None] + np.array([0, -1, 3])[None, :, None, None]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    n = 4 * 2 * 2
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.8 * 0 + 0.2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.8 * 1 + 0.2 * var * n / (n - 1), rtol=1e-5)
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.numpy().tolist() == 1


def test_batchnorm_eval_uses_running_stats_and_no_tracking_uses_batch() -> None:
    bn = nn.BatchNorm(2, affine=False)
    assert bn.weight is None and bn.bias is None
    bn.running_mean.assign(Tensor(np.array([1.0, -2.0], np.float32))).realize()
    bn.running_var.assign(Tensor(np.array([4.0, 0.25], np.float32))).realize()
    x = _rng(3).standard_normal((5, 2)).astype(np.float32)
    ref = (x - np.array([1.0, -2.0])) / np.sqrt(np.array([4.0, 0.25]) + 1e-5)
    np.testing.assert_allclose(bn(Tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-5)
    assert bn.running_mean.numpy().tolist() == [1.0, -2.0]  # eval leaves the statistics alone
    free = nn.BatchNorm(2, track_running_stats=False)
    assert not hasattr(free, "running_mean")
    np.testing.assert_allclose(free(Tensor(x)).numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), atol=1e-5)
    with pytest.raises(ValueError, match="2 channels got an input with 3"):
        nn.BatchNorm(2)(Tensor.zeros(4, 3))


def test_layernorm_and_groupnorm() -> None:
    x = _rng(4).standard_normal((2, 4, 3, 2)).astype(np.float32)
    ln = nn.LayerNorm((3, 2))
    ln.weight.assign(Tensor(np.full((3, 2), 2.0, np.float32))).realize()
    m, v = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    np.testing.assert_allclose(ln(Tensor(x)).numpy(), 2 * (x - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
    assert nn.LayerNorm(2, elementwise_affine=False).weight is None
    gn = nn.GroupNorm(2, 4)
    gn.bias.assign(Tensor(np.array([0.0, 1.0, 2.0, 3.0], np.float32))).realize()
    g = x.reshape(2, 2, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(gn(Tensor(x)).numpy(), ref + np.arange(4)[None, :, None, None], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)


def test_embedding_picks_rows() -> None:
    emb = nn.Embedding(5, 3)
    w = emb.weight.numpy()
    assert np.abs(w).max() <= math.sqrt(6 / (5 + 3))
    idx = np.array([[4, 0], [2, 2]], np.int32)
    assert np.array_equal(emb(Tensor(idx)).numpy(), w[idx])
    with pytest.raises(TypeError, match="integer indices"):
        emb(Tensor([1.0]))


def test_dropout_only_in_training(training: None) -> None:
    x = Tensor(np.ones((40, 50), np.float32))
    y = nn.Dropout(0.25)(x).numpy()
    kept = y != 0
    assert np.allclose(np.unique(y), [0.0, 1 / 0.75]) and 0.6 < kept.mean() < 0.9
    Tensor.training = False
    assert np.array_equal(nn.Dropout(0.25)(x).numpy(), np.ones((40, 50), np.float32))
    with pytest.raises(ValueError, match="Dropout probability"):
        nn.Dropout(1.0)


def test_state_dict_names_of_a_model() -> None:
    class Net:
        def __init__(self) -> None:
            self.l1 = nn.Linear(3, 4)
            self.bn = nn.BatchNorm(4)
            self.layers = [nn.Linear(4, 4, bias=False), nn.LayerNorm(4)]

    net = Net()
    sd = get_state_dict(net)
    assert list(sd) == ["l1.weight", "l1.bias", "bn.weight", "bn.bias", "bn.num_batches_tracked", "bn.running_mean",
                        "bn.running_var", "layers.0.weight", "layers.1.weight", "layers.1.bias"]
    opt = nn.optim.SGD(list(sd.values()))  # the running statistics are buffers of the optimizer, not parameters
    assert opt.buffers == [net.bn.num_batches_tracked, net.bn.running_mean, net.bn.running_var]
    assert len(opt.params) == 7
