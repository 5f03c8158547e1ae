"""interpolate, conv_transpose2d, pools with ceil_mode / return_indices, max_unpool2d, nll_loss, normalize, gelu,
attention with enable_gqa, binary_crossentropy_logits with pos_weight and the init functions, against numpy
references written out as loops (torch's definitions) where numpy has no function."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from tensor_testing import check, rnd

from uopir import Tensor, dtypes


# ---- interpolate -----------------------------------------------------------------------------------------------------
def _src_linear(i, o, align):
    """torch's source index, low/high neighbours and weight of each output position of one dim (float64)."""
    d = np.arange(o, dtype=np.float64)
    if align:
        src = d * ((i - 1) / (o - 1) if o > 1 else 0.0)
    else:
        src = np.maximum((d + 0.5) * (i / o) - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(int), i - 1)
    return lo, np.minimum(lo + 1, i - 1), np.clip(src - lo, 0, 1)


def interp_ref(a, size, mode, align=False):
    out = a.astype(np.float64)
    for k, o in enumerate(size):
        ax = a.ndim - len(size) + k
        i = a.shape[ax]
        if mode in ("nearest", "nearest-exact"):
            off = 0.5 if mode == "nearest-exact" else 0.0
            idx = np.minimum(np.floor((np.arange(o) + off) * (i / o)).astype(int), i - 1)
            out = np.take(out, idx, axis=ax)
        else:
            lo, hi, w = _src_linear(i, o, align)
            shp = [1] * a.ndim
            shp[ax] = o
            w = w.reshape(shp)
            out = np.take(out, lo, axis=ax) * (1 - w) + np.take(out, hi, axis=ax) * w
    return out


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("shape, size", [((2, 3, 13), (9,)), ((1, 2, 9), (13,)), ((1, 2, 13, 10), (9, 11)),
                                         ((1, 1, 9, 11), (10, 13)), ((1, 1, 5, 2, 8), (3, 6, 4)), ((4, 6), (3, 12)),
                                         ((1, 2, 8), (4,)), ((1, 3), (1,))])
def test_interpolate_nearest(mode, shape, size):
    a = rnd(shape, "float32")
    check(Tensor(a).interpolate(size, mode=mode), interp_ref(a, size, mode).astype(np.float32))


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("shape, size, mode", [((2, 3, 12), (7,), "linear"), ((1, 2, 7), (12,), "linear"),
                                               ((1, 2, 6, 5), (4, 9), "bilinear"), ((1, 1, 4, 7), (9, 3), "linear"),
                                               ((1, 1, 3, 2, 5), (2, 4, 3), "trilinear"), ((1, 1, 5), (1,), "linear"),
                                               ((1, 1, 1), (4,), "linear"), ((2, 3), (3, 3), "linear")])
def test_interpolate_linear(shape, size, mode, align):
    a = rnd(shape, "float32")
    check(Tensor(a).interpolate(size, mode=mode, align_corners=align), interp_ref(a, size, mode, align),
          rtol=1e-5, atol=1e-5)


def test_interpolate_dtypes_and_empty():
    a = rnd((1, 2, 6, 6), "float64")
    check(Tensor(a).interpolate((4, 5), mode="bilinear"), interp_ref(a, (4, 5), "linear"), dtype="float64")
    u = rnd((1, 1, 8, 8), "uint8", hi=20)
    got = check(Tensor(u).interpolate((3, 5), mode="nearest"), interp_ref(u, (3, 5), "nearest").astype(np.uint8))
    assert got.dtype == np.uint8
    # uint8 linear rounds to nearest per dim (torch's fixed-point blend), so it stays within one of the float result
    lin = Tensor(u).interpolate((5, 3), mode="bilinear")
    assert lin.dtype is dtypes.uint8
    assert np.abs(lin.numpy().astype(np.float64) - interp_ref(u, (5, 3), "linear")).max() <= 1.0 + 1e-9  # + f64 noise
    i = rnd((2, 7), "int32")
    check(Tensor(i).interpolate((4,), mode="linear"), np.trunc(interp_ref(i, (4,), "linear")).astype(np.int32))
    check(Tensor(rnd((2, 3), "float32")).interpolate((0,)), np.zeros((2, 0), np.float32))


@pytest.mark.parametrize("kw, msg", [(dict(size=(2,), mode="cubic"), "mode must be"),
                                     (dict(size=(2,), mode="nearest", align_corners=True), "align_corners"),
                                     (dict(size=(2, 2, 2, 2)), "does not fit"), (dict(size=(2,), mode="bilinear"),
                                                                                  "does not fit"),
                                     (dict(size=3), "tuple")])
def test_interpolate_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Tensor.ones(1, 2, 3).interpolate(**kw)


# ---- conv_transpose2d ------------------------------------------------------------------------------------------------
def conv_t_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1), groups=1):
    """Scatter each input element times the kernel into the output (torch's definition)."""
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    oh = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    ow = (wd - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    full = np.zeros((n, og * groups, oh + 2 * padding[0] + kh * dilation[0], ow + 2 * padding[1] + kw * dilation[1]))
    cg = cin // groups
    for c, i, j, p, q in itertools.product(range(cin), range(h), range(wd), range(kh), range(kw)):
        g = c // cg
        full[:, g * og:(g + 1) * og, i * stride[0] + p * dilation[0], j * stride[1] + q * dilation[1]] += \
            x[:, c, i, j, None] * w[c, :, p, q][None]
    out = full[:, :, padding[0]:padding[0] + oh, padding[1]:padding[1] + ow]
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)


@pytest.mark.parametrize("cfg", [dict(), dict(stride=(2, 3)), dict(padding=(2, 1)), dict(dilation=(2, 1)),
                                 dict(groups=2), dict(stride=(2, 3), output_padding=(1, 2)),
                                 dict(stride=2, padding=1, output_padding=1, dilation=2, groups=2)])
def test_conv_transpose2d(cfg):
    groups = cfg.get("groups", 1)
    x, w, b = rnd((2, 4, 4, 3)), rnd((4, 6 // groups, 3, 2)), rnd((6 // groups * groups,))
    pair = {k: (v, v) if isinstance(v, int) else v for k, v in cfg.items() if k != "groups"}
    check(Tensor(x).conv_transpose2d(Tensor(w), Tensor(b), **cfg), conv_t_ref(x, w, b, groups=groups, **pair),
          rtol=1e-5, atol=1e-5)


def test_conv_transpose_1d_3d_and_errors():
    x, w = rnd((1, 2, 5)), rnd((2, 3, 3))
    ref = conv_t_ref(x[..., None], w[..., None], stride=(2, 1))[..., 0]
    check(Tensor(x).conv_transpose2d(Tensor(w), stride=2), ref, rtol=1e-5, atol=1e-5)
    x3, w3 = rnd((1, 1, 2, 2, 2)), rnd((1, 1, 2, 2, 2))
    got = Tensor(x3).conv_transpose2d(Tensor(w3)).numpy()
    want = np.zeros((1, 1, 3, 3, 3))
    for i, j, k in itertools.product(range(2), repeat=3):
        want[0, 0, i:i + 2, j:j + 2, k:k + 2] += x3[0, 0, i, j, k] * w3[0, 0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="padding"):
        Tensor.ones(2, 16, 2, 2).conv_transpose2d(Tensor.ones(16, 32, 3, 3), padding=(1, 1, 1))
    with pytest.raises(ValueError, match="output_padding"):
        Tensor.ones(1, 1, 2, 2).conv_transpose2d(Tensor.ones(1, 1, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="channels"):
        Tensor.ones(1, 3, 2, 2).conv_transpose2d(Tensor.ones(2, 1, 3, 3))


# ---- pools -----------------------------------------------------------------------------------------------------------
def pool_ref(a, k, s, p, d=(1, 1), ceil=False, kind="max", include_pad=True):
    """torch's max_pool2d / avg_pool2d (symmetric padding p per dim) as loops; max also gives the flat indices."""
    n, c, h, w = a.shape
    outs = []
    for i, kk, ss, pp, dd in zip((h, w), k, s, p, d, strict=True):
        span = dd * (kk - 1) + 1
        num = i + 2 * pp - span
        o = (-(-num // ss) if ceil else num // ss) + 1
        if ceil and (o - 1) * ss >= i + pp:
            o -= 1
        outs.append(o)
    out = np.zeros((n, c, *outs))
    idx = np.zeros((n, c, *outs), np.int64)
    for oi, oj in itertools.product(range(outs[0]), range(outs[1])):
        h0, w0 = oi * s[0] - p[0], oj * s[1] - p[1]
        if kind == "max":
            rows = [h0 + t * d[0] for t in range(k[0]) if 0 <= h0 + t * d[0] < h]
            cols = [w0 + t * d[1] for t in range(k[1]) if 0 <= w0 + t * d[1] < w]
            win = a[:, :, rows][:, :, :, cols].reshape(n, c, -1)
            flat = (np.array(rows)[:, None] * w + np.array(cols)[None]).reshape(-1)
            out[:, :, oi, oj] = win.max(-1)
            idx[:, :, oi, oj] = flat[win.argmax(-1)]
        else:
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            size = (h1 - h0) * (w1 - w0)
            hs, ws, he, we = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            tot = a[:, :, hs:he, ws:we].astype(np.float64).sum((2, 3))
            out[:, :, oi, oj] = tot / (size if include_pad else (he - hs) * (we - ws))
    return out, idx


@pytest.mark.parametrize("shape, k, s, p, d", [((1, 1, 6, 6), (3, 3), (3, 3), (1, 1), (1, 1)),
                                               ((1, 1, 6, 6), (3, 2), (3, 3), (1, 1), (1, 1)),
                                               ((1, 1, 6, 6), (4, 4), (3, 3), (1, 1), (1, 1)),
                                               ((1, 1, 5, 5), (3, 3), (3, 3), (1, 1), (1, 1)),
                                               ((2, 2, 7, 7), (2, 2), (2, 2), (0, 0), (1, 1)),
                                               ((1, 2, 7, 8), (3, 2), (2, 3), (1, 0), (1, 1)),
                                               ((1, 1, 9, 9), (3, 2), (2, 2), (0, 1), (2, 3))])
def test_max_pool2d_ceil_mode_and_indices(shape, k, s, p, d):
    """ceil_mode with return_indices (and the floor mode's values) against torch's loop."""
    a = rnd(shape, "float32")
    want, widx = pool_ref(a, k, s, p, d, ceil=True)
    vals, idx = Tensor(a).max_pool2d(k, stride=s, padding=p, dilation=d, ceil_mode=True, return_indices=True)
    check(vals, want.astype(np.float32))
    check(idx, widx.astype(np.int32), dtype="int32")
    floor = Tensor(a).max_pool2d(k, stride=s, padding=p, dilation=d)
    check(floor, pool_ref(a, k, s, p, d)[0].astype(np.float32))


def test_max_pool2d_indices_ties_nan_and_ints():
    ones = np.ones((1, 1, 6, 6), np.float32)
    _, idx = Tensor(ones).max_pool2d((3, 3), stride=1, return_indices=True)
    check(idx, pool_ref(ones, (3, 3), (1, 1), (0, 0))[1].astype(np.int32))
    data = np.array([[[[math.inf, -math.inf, math.nan, 0.0], [1.0, 2.0, 3.0, math.nan]]]], np.float32)
    vals, idx = Tensor(data).max_pool2d((2, 2), return_indices=True)
    check(vals, np.array([[[[math.inf, math.nan]]]], np.float32))
    check(idx, np.array([[[[0, 7]]]], np.int32))  # a window with NaNs points at its last NaN (torch)
    a = rnd((1, 2, 5, 5), "int8")
    vals, idx = Tensor(a).max_pool2d(2, padding=1, return_indices=True)
    want, widx = pool_ref(a, (2, 2), (2, 2), (1, 1))
    check(vals, want.astype(np.int8), dtype="int8")
    check(idx, widx.astype(np.int32))


AVG_CASES = [((1, 1, 6, 6), (3, 3), (3, 3), (1, 1)), ((1, 1, 6, 6), (3, 2), (3, 3), (1, 1)),
             ((1, 1, 6, 6), (4, 4), (3, 3), (1, 1)), ((1, 1, 5, 5), (3, 3), (3, 3), (1, 1)),
             ((2, 1, 7, 5), (2, 2), (2, 2), (0, 0)), ((1, 2, 8, 7), (3, 2), (2, 3), (1, 1))]


@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("shape, k, s, p", AVG_CASES)
def test_avg_pool2d_ceil_mode(shape, k, s, p, include):
    a = rnd(shape, "float32")
    want = [pool_ref(a, k, s, p, ceil=c, kind="avg", include_pad=include)[0] for c in (False, True)]
    got = [Tensor(a).avg_pool2d(k, stride=s, padding=p, ceil_mode=c, count_include_pad=include) for c in (False, True)]
    flat = got[0].flatten().cat(got[1].flatten())  # one realize for both
    check(flat, np.concatenate([w.reshape(-1) for w in want]).astype(np.float32), rtol=1e-5, atol=1e-6)


# ---- max_unpool2d ----------------------------------------------------------------------------------------------------
def unpool_ref(vals, idx, out_hw):
    n, c = vals.shape[:2]
    out = np.zeros((n, c, out_hw[0] * out_hw[1]), vals.dtype)
    for b, ch in itertools.product(range(n), range(c)):
        out[b, ch, idx[b, ch].reshape(-1)] = vals[b, ch].reshape(-1)
    return out.reshape(n, c, *out_hw)


@pytest.mark.parametrize("shape, kw, out_hw", [((2, 3, 11, 9), dict(kernel_size=(3, 3), stride=(4, 3)), None),
                                               ((1, 2, 9, 9), dict(kernel_size=(3, 3), stride=(3, 4), padding=1),
                                                (9, 9)),
                                               ((1, 3, 7, 6), dict(kernel_size=(2, 2)), (99, 99, 7, 6)),
                                               ((1, 1, 5, 5), dict(kernel_size=(3, 3), stride=(1, 1)), None)])
def test_max_unpool2d(shape, kw, out_hw):
    a = rnd(shape, "float32")
    vals, idx = Tensor(a).max_pool2d(return_indices=True, **kw)
    got = vals.max_unpool2d(idx, output_size=out_hw, **kw)
    k, s = kw["kernel_size"], kw.get("stride", kw["kernel_size"])
    p = kw.get("padding", 0)
    hw = tuple(out_hw[-2:]) if out_hw else tuple((i - 1) * ss - 2 * p + kk for i, kk, ss in
                                                 zip(vals.shape[2:], k, s, strict=True))
    check(got, unpool_ref(vals.numpy(), idx.numpy(), hw))


def test_max_unpool2d_inf_and_errors():
    data = np.array([[[[math.inf, -math.inf, math.nan], [1.0, 2.0, 3.0]]]], np.float32)
    vals, idx = Tensor(data).max_pool2d((2, 2), return_indices=True)
    check(vals.max_unpool2d(idx, kernel_size=(2, 2)), np.array([[[[math.inf, 0], [0, 0]]]], np.float32))
    with pytest.raises(ValueError, match="indices shape"):
        Tensor.ones(1, 1, 2, 2).max_unpool2d(Tensor.ones(1, 1, 2, 3, dtype=dtypes.int32))


# ---- losses, normalize, gelu, attention ------------------------------------------------------------------------------
def nll_ref(logp, y, weight=None, ignore=None, reduction="mean"):
    c = logp.shape[1]
    wv = np.ones(c) if weight is None else weight.astype(np.float64)
    moved = np.moveaxis(logp, 1, -1).reshape(-1, c)
    yf = y.reshape(-1)
    keep = np.ones(len(yf), bool) if ignore is None else yf != ignore
    ysafe = np.where(keep, yf, 0)
    w = wv[ysafe] * keep
    loss = -moved[np.arange(len(yf)), ysafe] * w
    if reduction == "none":
        return loss.reshape(y.shape)
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 2, 3)])
def test_nll_loss(shape, reduction):
    x = rnd(shape, "float32")
    y = np.random.default_rng(0).integers(0, shape[1], (shape[0],) + shape[2:]).astype(np.int32)
    wt = rnd((shape[1],), "float32", 0.1, 2)
    logp = Tensor(x).log_softmax(1)
    lp = logp.numpy()
    got = Tensor.stack(logp.nll_loss(Tensor(y), reduction=reduction),
                       logp.nll_loss(Tensor(y), Tensor(wt), reduction=reduction),
                       logp.nll_loss(Tensor(y), Tensor(wt), ignore_index=1, reduction=reduction))
    want = np.stack([nll_ref(lp, y, reduction=reduction), nll_ref(lp, y, wt, reduction=reduction),
                     nll_ref(lp, y, wt, 1, reduction=reduction)])
    check(got, want, rtol=1e-5, atol=1e-5)


def test_nll_loss_1d_ignore_and_errors():
    logits = np.array([[2.0, 0.5, -1.0], [1.5, 2.5, -0.5], [0.0, -2.0, 1.0]], np.float32)
    y = np.array([0, 1, 2], np.int32)
    got = Tensor(logits).nll_loss(Tensor(y), ignore_index=1)
    check(got, -(logits[0, 0] + logits[2, 2]) / 2)
    check(Tensor([0.1, -0.3, 0.5]).nll_loss(Tensor(2)), np.float32(-0.5))
    y100 = Tensor([0, -100, 2])
    check(Tensor(logits).nll_loss(y100, ignore_index=-100, reduction="sum"), -(logits[0, 0] + logits[2, 2]))
    with pytest.raises(ValueError, match="reduction"):
        Tensor(logits).nll_loss(Tensor(y), reduction="typo")
    with pytest.raises(ValueError, match="target shape"):
        Tensor(logits).nll_loss(Tensor([0, 1]))


@pytest.mark.parametrize("p, dim", [(2.0, 1), (2.0, 0), (1, 1), (3, 0), (0, 1), (-1, 1), (2.0, -1)])
def test_normalize(p, dim):
    a = rnd((4, 5), "float32")
    a[0, 1] = 0.0
    a[a == 0] = 0.5 if p < 0 else a[a == 0]  # a negative p needs nonzero entries
    if p == 0:
        den = (a != 0).sum(dim, keepdims=True).astype(np.float64)
    else:
        den = (np.abs(a.astype(np.float64)) ** p).sum(dim, keepdims=True) ** (1 / p)
    check(Tensor(a).normalize(p=p, dim=dim), a / np.maximum(den, 1e-12), rtol=1e-5, atol=1e-6)
    check(Tensor(np.zeros((2, 3), np.float32)).normalize(), np.zeros((2, 3), np.float32))
    check(Tensor([[3, 4]]).normalize(), np.array([[0.6, 0.8]], np.float32), dtype="float32")


def test_gelu_modes():
    a = rnd((40,), "float32", -5, 5)
    erf = np.vectorize(math.erf)
    check(Tensor(a).gelu(approximate="none"), 0.5 * a * (1 + erf(a / math.sqrt(2))), atol=2e-6)
    tanh = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    check(Tensor(a).gelu(), tanh, atol=2e-6)
    check(Tensor(a).gelu(approximate="tanh"), tanh, atol=2e-6)
    big = np.array([-400.0, -300.0, 300.0, 400.0], np.float32)
    check(Tensor(big).gelu(approximate="tanh"), np.array([0.0, 0.0, 300.0, 400.0], np.float32))
    with pytest.raises(ValueError, match="approximate"):
        Tensor(a).gelu(approximate="erf")


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_attention_gqa_and_errors():
    q, k, v = rnd((2, 4, 3, 5)), rnd((2, 2, 6, 5)), rnd((2, 2, 6, 4))
    kr, vr = np.repeat(k, 2, 1), np.repeat(v, 2, 1)
    want = _softmax(q @ kr.swapaxes(-1, -2) / math.sqrt(5)) @ vr
    check(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), enable_gqa=True), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="multiple"):
        Tensor.ones(1, 3, 2, 4).scaled_dot_product_attention(Tensor.ones(1, 2, 2, 4), Tensor.ones(1, 2, 2, 4),
                                                             enable_gqa=True)
    with pytest.raises(RuntimeError, match="not both"):
        Tensor.ones(2, 2).scaled_dot_product_attention(Tensor.ones(2, 2), Tensor.ones(2, 2),
                                                       attn_mask=Tensor.ones(2, 2), is_causal=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_logits_pos_weight(reduction):
    x, y = rnd((6, 4), "float32", -30, 30), rnd((6, 4), "float32", 0, 1)
    pw = np.array([0.25, 1.0, 2.0, 7.0], np.float32)
    xd = x.astype(np.float64)
    ls, lsn = -np.logaddexp(0, -xd), -np.logaddexp(0, xd)  # log(sigmoid(x)), log(1 - sigmoid(x))
    for w in (None, pw):
        loss = -((1 if w is None else w) * y * ls + (1 - y) * lsn)
        want = loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()
        kw = {} if w is None else {"pos_weight": Tensor(w)}
        check(Tensor(x).binary_crossentropy_logits(Tensor(y), reduction=reduction, **kw), want, rtol=1e-5,
              atol=1e-5)


# ---- init functions --------------------------------------------------------------------------------------------------
def test_init_functions():
    Tensor.manual_seed(3)
    t = Tensor.kaiming_normal(400, 50, a=0.5)
    got = t.numpy()
    assert t.shape == (400, 50) and t.dtype is dtypes.float32
    std = math.sqrt(2 / (1 + 0.25) / 50)
    assert abs(got.std() / std - 1) < 0.05 and abs(got.mean()) < 0.05 * std
    assert Tensor.kaiming_normal((3, 4), dtype="float16").dtype is dtypes.float16
    for f, bound in ((Tensor.kaiming_uniform, math.sqrt(6 / (1 + 0.01 ** 2) / 50)),
                     (Tensor.glorot_uniform, math.sqrt(6 / (400 + 50))), (Tensor.scaled_uniform, (400 * 50) ** -0.5)):
        u = f(400, 50).numpy()
        assert np.abs(u).max() <= bound and np.abs(u).max() > 0.95 * bound
    n = Tensor.normal(1000, mean=2.0, std=0.5).numpy()
    assert abs(n.mean() - 2.0) < 0.1 and abs(n.std() - 0.5) < 0.05
    u = Tensor.uniform(1000, low=-2, high=3).numpy()
    assert u.min() >= -2 and u.max() < 3
    with pytest.raises(ValueError, match="std"):
        Tensor.normal(3, std=-1.0)
    with pytest.raises(ValueError, match="low < high"):
        Tensor.uniform(3, low=1.0, high=1.0)


def test_random_like_randperm_multinomial():
    Tensor.manual_seed(5)
    t = Tensor.ones(3, 4, dtype="float16")
    assert t.rand_like().shape == (3, 4) and t.rand_like().dtype is dtypes.float16
    assert Tensor.ones(2, dtype="int32").randn_like().dtype is dtypes.float32
    assert sorted(Tensor.randperm(7).numpy().tolist()) == list(range(7))
    assert Tensor.randperm(3).dtype is dtypes.int32
    s = Tensor([1.0, 0.0, 3.0, 0.0]).multinomial(4000, replacement=True).numpy()
    assert s.dtype == np.int32 and s.shape == (4000,)
    freq = np.bincount(s, minlength=4) / 4000
    np.testing.assert_allclose(freq, [0.25, 0.0, 0.75, 0.0], atol=0.03)
    rows = Tensor([[1.0, 2.0, 0.0, 4.0], [0.0, 0.0, 5.0, 1.0]]).multinomial(2).numpy()
    assert rows.shape == (2, 2) and set(rows[0]) <= {0, 1, 3} and sorted(rows[1]) == [2, 3]
    assert len(set(rows[0])) == 2
    with pytest.raises(ValueError, match="cannot draw"):
        Tensor([1.0, 2.0]).multinomial(3)


def test_shape_mismatches_raise_shape_error_a_runtime_error_as_tinygrad():
    x = Tensor(np.ones((1, 1, 2, 2), np.float32))
    with pytest.raises(RuntimeError, match="does not fit the"):
        x.conv2d(Tensor(np.ones((1, 1, 3, 3), np.float32)))
    with pytest.raises(RuntimeError, match="rank of the input"):
        Tensor([[1.0, 2.0]]).gather(1, Tensor([0]))
    with pytest.raises(RuntimeError, match="exceeds input shape"):
        Tensor([[1.0, 2.0]]).gather(1, Tensor([[0, 1, 0]] * 2))
    with pytest.raises(RuntimeError, match="target shape"):
        Tensor(np.zeros((4, 3), np.float32)).cross_entropy(Tensor(np.zeros((4, 1), np.int32)))
    with pytest.raises(ValueError):  # ShapeError is still a ValueError
        x.conv2d(Tensor(np.ones((1, 1, 3, 3), np.float32)))


def test_uint8_bilinear_interpolate_resizes_the_last_axis_first_as_torch():
    # uint8 rounds after each axis, so the order shows: torch goes W then H
    u = Tensor(np.random.default_rng(0).integers(0, 256, size=(1, 2, 16, 16)).astype(np.uint8))
    full = u.interpolate(size=(5, 7), mode="linear").numpy()
    np.testing.assert_array_equal(full, u.interpolate(size=(16, 7), mode="linear").interpolate(size=(5, 7),
                                                                                              mode="linear").numpy())
