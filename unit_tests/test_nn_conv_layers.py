"""uopir.nn's convolution layers (Conv1d, Conv2d's string paddings, ConvTranspose1d/2d) against direct numpy loops."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from uopir import Tensor, nn
from uopir.nn.state import get_state_dict


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _conv_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple, pads: list, dil: tuple,
              groups: int) -> np.ndarray:
    """Cross-correlation by its definition, in float64; pads per spatial dim (before, after)."""
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + pads)
    n, cin = x.shape[:2]
    cout, cg, *k = w.shape
    og = cout // groups
    out = [(x.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(len(k))]
    y = np.zeros((n, cout, *out))
    for o in range(cout):
        g = o // og
        for pos in itertools.product(*map(range, out)):
            win = tuple(slice(p * s, p * s + d * (kk - 1) + 1, d)
                        for p, s, d, kk in zip(pos, stride, dil, k, strict=True))
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + win]
            y[(slice(None), o) + pos] = (patch * w[o]).reshape(n, -1).sum(1)
    return y if b is None else y + b.reshape((1, -1) + (1,) * len(k))


def _conv_transpose_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple, pad: tuple, opad: tuple,
                        dil: tuple, groups: int) -> np.ndarray:
    """Each input element scatters w[c] * x into the output at i * stride + k * dilation, then `pad` is cropped off
    each side (output_padding adds zeros at the end before the crop)."""
    n, cin, *size = x.shape
    _, og, *k = w.shape
    cg = cin // groups
    full = [(i - 1) * s + d * (kk - 1) + 1 + op for i, s, d, kk, op in zip(size, stride, dil, k, opad, strict=True)]
    y = np.zeros((n, og * groups, *full))
    for c in range(cin):
        g = c // cg
        for pos in itertools.product(*map(range, size)):
            for kp in itertools.product(*map(range, k)):
                at = tuple(p * s + q * d for p, s, q, d in zip(pos, stride, kp, dil, strict=True))
                contrib = x[(slice(None), c) + pos][:, None] * w[(c, slice(None)) + kp]
                y[(slice(None), slice(g * og, (g + 1) * og)) + at] += contrib
    y = y[(slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(pad, full, strict=True))]
    return y if b is None else y + b.reshape((1, -1) + (1,) * len(k))


def test_conv2d_same_and_valid_padding_follow_torch() -> None:
    Tensor.manual_seed(3)
    # kernel (2, 3) with dilation (1, 2): 'same' pads dim 0 by (0, 1) (the odd one at the end) and dim 1 by (2, 2)
    conv = nn.Conv2d(2, 3, (2, 3), padding="same", dilation=(1, 2))
    assert conv.padding == (2, 2, 0, 1)  # torch's flat order, the last dim first
    x = _rng(0).standard_normal((1, 2, 4, 6)).astype(np.float32)
    w, b = conv.weight.numpy(), conv.bias.numpy()
    y = conv(Tensor(x)).numpy()
    assert y.shape == (1, 3, 4, 6)
    np.testing.assert_allclose(y, _conv_ref(x, w, b, (1, 1), [(0, 1), (2, 2)], (1, 2), 1), rtol=1e-5, atol=1e-5)
    valid = nn.Conv2d(2, 3, 3, padding="valid", bias=False)
    np.testing.assert_allclose(valid(Tensor(x)).numpy(), _conv_ref(x, valid.weight.numpy(), None, (1, 1),
                                                                   [(0, 0)] * 2, (1, 1), 1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="not supported for strided"):
        nn.Conv2d(2, 3, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="invalid padding string 'full'"):
        nn.Conv2d(2, 3, 3, padding="full")


def test_conv1d_strided_grouped() -> None:
    Tensor.manual_seed(4)
    conv = nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)
    assert isinstance(conv, nn.Conv2d) and conv.weight.shape == (6, 2, 3) and conv.bias.shape == (6,)
    assert np.abs(conv.weight.numpy()).max() <= 1 / math.sqrt(2 * 3)
    x = _rng(1).standard_normal((2, 4, 7)).astype(np.float32)
    ref = _conv_ref(x, conv.weight.numpy(), conv.bias.numpy(), (2,), [(1, 1)], (1,), 2)
    np.testing.assert_allclose(conv(Tensor(x)).numpy(), ref, rtol=1e-5, atol=1e-5)
    same = nn.Conv1d(4, 2, 4, padding="same", dilation=2)
    assert same(Tensor(x)).shape == (2, 2, 7)


def test_conv_transpose2d_every_argument() -> None:
    Tensor.manual_seed(5)
    conv = nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0), dilation=(1, 2),
                              groups=2)
    assert conv.weight.shape == (4, 3, 3, 2) and conv.bias.shape == (6,)
    bound = 1 / math.sqrt(3 * 3 * 2)  # torch's: fan_in of the (in, out/groups, *k) weight is out/groups * prod(k)
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.bias.numpy()).max() <= bound
    assert list(get_state_dict(conv)) == ["weight", "bias"]
    x = _rng(2).standard_normal((1, 4, 3, 4)).astype(np.float32)
    y = conv(Tensor(x)).numpy()
    assert y.shape == (1, 6, (3 - 1) * 2 - 2 + 2 + 1 + 1, 4 - 1 + 2 + 1)
    ref = _conv_transpose_ref(x, conv.weight.numpy(), conv.bias.numpy(), (2, 1), (1, 0), (1, 0), (1, 2), 2)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="no string padding"):
        nn.ConvTranspose2d(2, 2, 3, padding="same")


def test_conv_transpose1d_forward_and_gradients() -> None:
    """The gradients of sum(y * r) are linear in r: the numpy reference's central differences are exact."""
    Tensor.manual_seed(6)
    conv = nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1)
    assert isinstance(conv, nn.ConvTranspose2d) and conv.weight.shape == (2, 3, 3)
    x = _rng(3).standard_normal((2, 2, 4))
    w, b = conv.weight.numpy().astype(np.float64), conv.bias.numpy().astype(np.float64)
    y = _conv_transpose_ref(x, w, b, (2,), (1,), (1,), (1,), 1)
    r = _rng(4).standard_normal(y.shape)
    xt = Tensor(x.astype(np.float32), requires_grad=True)
    out = conv(xt)
    (out * Tensor(r.astype(np.float32))).sum().backward()  # before realizing `out`: a realized tensor is a leaf
    np.testing.assert_allclose(out.numpy(), y, rtol=1e-5, atol=1e-5)

    def fd(arr: np.ndarray, f) -> np.ndarray:
        g = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            d = np.zeros_like(arr)
            d[i] = 1e-3
            g[i] = ((f(arr + d) * r).sum() - (f(arr - d) * r).sum()) / 2e-3
        return g
    gx = fd(x, lambda v: _conv_transpose_ref(v, w, b, (2,), (1,), (1,), (1,), 1))
    gw = fd(w, lambda v: _conv_transpose_ref(x, v, b, (2,), (1,), (1,), (1,), 1))
    np.testing.assert_allclose(xt.grad.numpy(), gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(conv.weight.grad.numpy(), gw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(conv.bias.grad.numpy(), r.sum((0, 2)), rtol=1e-4, atol=1e-4)
