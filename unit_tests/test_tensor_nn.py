"""Linear algebra and nn ops against numpy references."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from tensor_testing import check, rnd

from uopir import Tensor, dtypes


# ---- matmul ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa, sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                    ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (4, 3, 2)),
                                    ((0, 3), (3, 2)), ((2, 0), (0, 3))])
def test_matmul_shapes(sa, sb):
    a, b = rnd(sa), rnd(sb)
    check(Tensor(a) @ Tensor(b), a @ b, rtol=1e-5, atol=1e-5)
    check(Tensor(a).dot(Tensor(b)), np.matmul(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", ["int8", "int32", "uint8", "float16", "float64", "bool"])
def test_matmul_dtypes(dt):
    a, b = rnd((3, 4), dt), rnd((4, 2), dt)
    want = a @ b
    got = Tensor(a) @ Tensor(b)
    assert got.dtype is dtypes.from_numpy(want.dtype)
    check(got, want, rtol=1e-2 if dt == "float16" else None, atol=1e-2 if dt == "float16" else None)


def _within_half_ulp_of_exact(got: Tensor, exact: np.ndarray, mag: np.ndarray) -> None:
    """got is the float64 `exact` rounded once to float16: within one float16 spacing, plus what a float32 sum of
    `mag` (the sum of |products|) may add. One rounding per product (the defect) is off by several spacings."""
    assert got.dtype is dtypes.float16
    g = got.numpy().astype(np.float64)
    tol = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64) + mag * 2.0 ** -17
    bad = np.abs(g - exact) > tol
    assert not bad.any(), f"{bad.sum()} values off: got {g[bad][:4]}, exact {exact[bad][:4]}"


def test_half_products_round_once():
    """matmul, conv2d and einsum on float16 multiply in float32 (a product of halves is exact there) and round once,
    as numpy and torch: rounding every product to half first was off by up to 0.03 at 64 terms (tinygrad's
    test_gemm_fp16 failed on some input draws)."""
    g = np.random.default_rng(7)
    a, b = g.uniform(-2, 2, (8, 64)).astype(np.float16), g.uniform(-2, 2, (64, 8)).astype(np.float16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    _within_half_ulp_of_exact(Tensor(a) @ Tensor(b), a64 @ b64, np.abs(a64) @ np.abs(b64))
    _within_half_ulp_of_exact(Tensor.einsum("ij,jk->ik", Tensor(a), Tensor(b)), a64 @ b64, np.abs(a64) @ np.abs(b64))
    x, w = g.uniform(-2, 2, (1, 8, 5, 5)).astype(np.float16), g.uniform(-2, 2, (2, 8, 3, 3)).astype(np.float16)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    _within_half_ulp_of_exact(Tensor(x).conv2d(Tensor(w)), conv_ref(x64, w64), conv_ref(np.abs(x64), np.abs(w64)))


def test_matmul_mixed_and_reflected():
    a, b = rnd((2, 3), "int32"), rnd((3, 2), "float32")
    want = a.astype(np.float32) @ b
    check(Tensor(a) @ Tensor(b), want, dtype="float32", rtol=1e-6, atol=1e-5)  # tinygrad: int32 ⊕ float32 -> float32
    check(a.tolist() @ Tensor(b), a.astype(np.float32) @ b, rtol=1e-6, atol=1e-5)  # f32 cancellation


def test_matmul_errors_name_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) @ \(4, 5\)"):
        Tensor.ones(2, 3) @ Tensor.ones(4, 5)
    with pytest.raises(ValueError, match=r"\(2, 2, 3\).*\(3, 3, 4\)"):
        Tensor.ones(2, 2, 3) @ Tensor.ones(3, 3, 4)
    with pytest.raises(ValueError, match="at least 1 dim"):
        Tensor(1.0) @ Tensor.ones(3)


def test_linear():
    x, w, b = rnd((4, 3)), rnd((3, 5)), rnd((5,))
    check(Tensor(x).linear(Tensor(w), Tensor(b)), x @ w + b, rtol=1e-5)
    check(Tensor(x).linear(Tensor(w)), x @ w, rtol=1e-5)
    check(Tensor(x).linear(Tensor(rnd((3,)) * 0 + 2)), x * 2)


# ---- conv / pool -----------------------------------------------------------------------------------------------------
def conv_ref(x, w, b=None, stride=(1, 1), dilation=(1, 1), padding=((0, 0), (0, 0)), groups=1):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(padding))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc, i, j in itertools.product(range(o), range(oh), range(ow)):
        g = oc // og
        patch = x[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                  j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
        out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)


@pytest.mark.parametrize("cfg", [
    dict(), dict(stride=2), dict(padding=1), dict(dilation=2), dict(groups=2), dict(stride=(2, 1), padding=(1, 0)),
    dict(padding=(1, 0, 2, 1)), dict(groups=4, padding=1, stride=2, dilation=1),
])
def test_conv2d(cfg):
    groups = cfg.get("groups", 1)
    x, w, b = rnd((2, 4, 6, 5)), rnd((4, 4 // groups, 3, 2)), rnd((4,))
    got = Tensor(x).conv2d(Tensor(w), Tensor(b), **cfg)
    stride = cfg.get("stride", 1)
    stride = (stride, stride) if isinstance(stride, int) else stride
    dil = cfg.get("dilation", 1)
    p = cfg.get("padding", 0)
    pads = ((p, p), (p, p)) if isinstance(p, int) else ((p[0], p[0]), (p[1], p[1])) if len(p) == 2 else \
        ((p[2], p[3]), (p[0], p[1]))
    check(got, conv_ref(x, w, b, stride, (dil, dil), pads, groups), rtol=1e-4, atol=1e-4)


def test_conv1d_via_conv2d_and_int_conv():
    x, w = rnd((1, 2, 7)), rnd((3, 2, 3))
    ref = conv_ref(x[..., None, :], w[..., None, :])[:, :, 0]
    check(Tensor(x).conv2d(Tensor(w)), ref, rtol=1e-5, atol=1e-5)
    xi, wi = rnd((1, 1, 4, 4), "int32"), rnd((2, 1, 2, 2), "int32")
    check(Tensor(xi).conv2d(Tensor(wi)), conv_ref(xi, wi).astype(np.int32), dtype="int32")


def test_conv_errors_name_shapes():
    with pytest.raises(ValueError, match=r"\(1, 3, 5, 5\).*\(2, 4, 3, 3\)"):
        Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 4, 3, 3))
    with pytest.raises(ValueError, match=r"\(1, 4, 5, 5\).*groups=3"):
        Tensor.ones(1, 4, 5, 5).conv2d(Tensor.ones(2, 2, 3, 3), groups=3)
    with pytest.raises(ValueError, match="does not fit"):
        Tensor.ones(1, 1, 2, 2).conv2d(Tensor.ones(1, 1, 3, 3))
    with pytest.raises(ValueError, match=r"\(1, 5, 5\)"):
        Tensor.ones(1, 5, 5).conv2d(Tensor.ones(1, 1, 3, 3))


def pool_ref(x, k, s, fn, pad=0, fill=0.0):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i, j in itertools.product(range(oh), range(ow)):
        out[:, :, i, j] = fn(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return out


def test_pools():
    x = rnd((2, 3, 6, 7))
    check(Tensor(x).max_pool2d(), pool_ref(x, 2, 2, np.max))
    check(Tensor(x).max_pool2d(3, stride=1), pool_ref(x, 3, 1, np.max))
    check(Tensor(x).max_pool2d(3, stride=2, padding=1), pool_ref(x, 3, 2, np.max, 1, -np.inf))
    check(Tensor(x).avg_pool2d(), pool_ref(x, 2, 2, np.mean), rtol=1e-5)
    check(Tensor(x).avg_pool2d(3, stride=2, padding=1), pool_ref(x, 3, 2, np.mean, 1), rtol=1e-5)
    ones = pool_ref(np.ones_like(x), 3, 2, np.sum, 1)
    check(Tensor(x).avg_pool2d(3, stride=2, padding=1, count_include_pad=False),
          pool_ref(x, 3, 2, np.sum, 1) / ones, rtol=1e-5)
    xi = rnd((1, 1, 4, 4), "int16")
    check(Tensor(xi).max_pool2d(padding=1), pool_ref(xi, 2, 2, np.max, 1, np.iinfo(np.int16).min), dtype="int16")


# ---- gather / one_hot ------------------------------------------------------------------------------------------------
def test_gather():
    x = rnd((3, 4))
    idx = np.array([[0, 3], [2, 2], [1, 0]])
    check(Tensor(x).gather(1, Tensor(idx)), np.take_along_axis(x, idx, 1))
    idx0 = np.array([[2, 0, 1, 1]])
    check(Tensor(x).gather(0, Tensor(idx0)), np.take_along_axis(x, idx0, 0))
    check(Tensor(x).gather(-1, Tensor(idx[:2, :1])), np.take_along_axis(x[:2], idx[:2, :1], 1))
    xi = rnd((2, 3), "int8")
    check(Tensor(xi).gather(1, Tensor([[2, 0], [1, 1]])), np.take_along_axis(xi, np.array([[2, 0], [1, 1]]), 1),
          dtype="int8")
    with pytest.raises(ValueError, match=r"\(2,\).*\(3, 4\)"):
        Tensor(x).gather(1, Tensor([1, 2]))
    with pytest.raises(TypeError):
        Tensor(x).gather(1, Tensor([[1.0]]))


def test_one_hot():
    y = np.array([0, 2, 1, 2])
    check(Tensor(y).one_hot(3), np.eye(3, dtype=np.int32)[y], dtype="int32")
    with pytest.raises(ValueError, match="num_classes"):  # tinygrad: the count is not read from the data
        Tensor(y).one_hot(-1)
    check(Tensor(y.reshape(2, 2)).one_hot(4), np.eye(4, dtype=np.int32)[y.reshape(2, 2)])


# ---- normalization / attention / losses ------------------------------------------------------------------------------
def test_layernorm_batchnorm():
    x = rnd((2, 3, 4))
    m = x.mean(-1, keepdims=True)
    v = x.var(-1, keepdims=True)
    check(Tensor(x).layernorm(), (x - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
    m2, v2 = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    check(Tensor(x).layernorm((1, 2), eps=1e-3), (x - m2) / np.sqrt(v2 + 1e-3), rtol=1e-4, atol=1e-5)
    w, b, mean, invstd = rnd((3,)), rnd((3,)), rnd((3,)), rnd((3,), lo=0.5, hi=2)
    ref = (x - mean[None, :, None]) * w[None, :, None] * invstd[None, :, None] + b[None, :, None]
    check(Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(mean), Tensor(invstd)), ref, rtol=1e-5, atol=1e-6)
    check(Tensor(x).batchnorm(None, None, Tensor(mean), Tensor(invstd)),
          (x - mean[None, :, None]) * invstd[None, :, None], rtol=1e-5, atol=1e-6)


def test_batchnorm_over_two_axes_takes_2d_parameters():
    """axis=(0, 2): every parameter is (x.shape[0], x.shape[2]), invstd included (tinygrad's rule: an invstd with one
    dimension per axis is laid along them; it used to be broadcast as is, a shape error)."""
    x = rnd((2, 4, 3, 2))
    w, b, mean, invstd = rnd((2, 3)), rnd((2, 3)), rnd((2, 3)), rnd((2, 3), lo=0.5, hi=2)
    ref = (x - mean[:, None, :, None]) * w[:, None, :, None] * invstd[:, None, :, None] + b[:, None, :, None]
    check(Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(mean), Tensor(invstd), axis=(0, 2)), ref,
          rtol=1e-5, atol=1e-6)


def _sdpa_ref(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def test_scaled_dot_product_attention():
    q, k, v = rnd((2, 3, 4, 8)), rnd((2, 3, 5, 8)), rnd((2, 3, 5, 6))
    check(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v)), _sdpa_ref(q, k, v), rtol=1e-4, atol=1e-5)
    bm = rnd((4, 5), "bool")
    bm[:, 0] = True
    check(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), Tensor(bm)), _sdpa_ref(q, k, v, bm),
          rtol=1e-4, atol=1e-5)
    fm = rnd((4, 5))
    check(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), Tensor(fm)), _sdpa_ref(q, k, v, fm),
          rtol=1e-4, atol=1e-5)
    kk, vv = rnd((2, 3, 4, 8)), rnd((2, 3, 4, 6))
    causal = np.tril(np.ones((4, 4), bool))
    check(Tensor(q).scaled_dot_product_attention(Tensor(kk), Tensor(vv), is_causal=True),
          _sdpa_ref(q, kk, vv, causal), rtol=1e-4, atol=1e-5)


def _log_softmax(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def test_cross_entropy():
    logits, y = rnd((5, 4)), np.array([0, 3, 1, 1, 2])
    nll = -_log_softmax(logits, 1)[np.arange(5), y]
    check(Tensor(logits).cross_entropy(Tensor(y)), nll.mean(), rtol=1e-5)
    check(Tensor(logits).cross_entropy(Tensor(y), reduction="sum"), nll.sum(), rtol=1e-5)
    check(Tensor(logits).cross_entropy(Tensor(y), reduction="none"), nll, rtol=1e-5)
    probs = np.eye(4, dtype=np.float32)[y] * 0.9 + 0.1 / 4
    ref = -(_log_softmax(logits, 1) * probs).sum(1).mean()
    check(Tensor(logits).cross_entropy(Tensor(y), label_smoothing=0.1), ref, rtol=1e-5)
    img, yi = rnd((2, 3, 2, 2)), rnd((2, 2, 2), "int64", lo=0, hi=2)
    ref4 = -np.take_along_axis(_log_softmax(img, 1), yi[:, None], 1)[:, 0]
    check(Tensor(img).cross_entropy(Tensor(yi), reduction="none"), ref4, rtol=1e-5)
    with pytest.raises(ValueError, match="reduction"):
        Tensor(logits).cross_entropy(Tensor(y), reduction="avg")
    with pytest.raises(ValueError, match=r"\(3,\).*\(5, 4\)"):
        Tensor(logits).cross_entropy(Tensor([0, 1, 2]))


def test_sparse_categorical_crossentropy_and_bce():
    logits, y = rnd((4, 3)), np.array([0, 2, -1, 1])
    ls = _log_softmax(logits, 1)
    keep = y != -1
    nll = -ls[np.arange(4), np.where(keep, y, 0)]
    check(Tensor(logits).sparse_categorical_crossentropy(Tensor(y)), nll[keep].mean(), rtol=1e-5)
    p, t = rnd((6,), lo=0.1, hi=0.9), rnd((6,), lo=0, hi=1).round()
    bce = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    check(Tensor(p).binary_crossentropy(Tensor(t)), bce.mean(), rtol=1e-5)
    z = rnd((6,))
    sig = 1 / (1 + np.exp(-z.astype(np.float64)))
    check(Tensor(z).binary_crossentropy_logits(Tensor(t)),
          (-(t * np.log(sig) + (1 - t) * np.log(1 - sig))).mean(), rtol=1e-5)


def test_mlp_forward_end_to_end():
    Tensor.manual_seed(0)
    x = Tensor.randn(4, 8)
    w1, b1 = Tensor.kaiming_uniform(8, 16), Tensor.zeros(16)
    w2, b2 = Tensor.kaiming_uniform(16, 3), Tensor.zeros(3)
    out = x.linear(w1, b1).relu().linear(w2, b2).softmax()
    xn, w1n, w2n = x.numpy(), w1.numpy(), w2.numpy()
    h = np.maximum(xn @ w1n, 0) @ w2n
    check(out, np.exp(h) / np.exp(h).sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    check(out.sum(-1), np.ones(4, np.float32), rtol=1e-5)
