"""Gradients of conv2d and max_pool2d against numpy formulas (the scatter of each window back onto the input), and
the size of a conv -> relu -> max_pool backward: its kernel count and the work its kernels do, which the frontend's
`windows` gradient rule (strided windows differentiate as k padded rows, not a sum over the repeats of an expand)
and the scheduler's materializing of reductions read at a repeating index brought down."""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.estimates import estimate
from uopir.backends.realize import compiled
from uopir.frontend.device import get_backend
from uopir.ir.uop import UOp


def _windows(xp: np.ndarray, k: tuple[int, int], s: tuple[int, int], d: tuple[int, int]
             ) -> tuple[tuple[int, int], list[tuple[int, int, tuple[slice, slice]]]]:
    """The output size and, per kernel offset (i, j), the slice of the padded input that offset reads."""
    out = tuple((xp.shape[-2 + a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in range(2))
    return out, [(i, j, (slice(i * d[0], i * d[0] + (out[0] - 1) * s[0] + 1, s[0]),
                         slice(j * d[1], j * d[1] + (out[1] - 1) * s[1] + 1, s[1])))
                 for i in range(k[0]) for j in range(k[1])]


def _conv_grads(x: np.ndarray, w: np.ndarray, dy: np.ndarray, stride: tuple[int, int], dil: tuple[int, int],
                pad: int, groups: int) -> tuple[np.ndarray, np.ndarray]:
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    cg, og = w.shape[1], w.shape[0] // groups
    _, offs = _windows(xp, w.shape[2:], stride, dil)
    for g in range(groups):
        xs, ws, dys = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og), dy[:, g * og:(g + 1) * og]
        for i, j, (sh, sw) in offs:
            dxp[:, xs, sh, sw] += np.einsum("nohw,oc->nchw", dys, w[ws, :, i, j])
            dw[ws, :, i, j] += np.einsum("nohw,nchw->oc", dys, xp[:, xs, sh, sw])
    return dxp[:, :, pad:pad + x.shape[2], pad:pad + x.shape[3]], dw


def _max_pool_grad(x: np.ndarray, dy: np.ndarray, k: tuple[int, int], s: tuple[int, int], pad: int) -> np.ndarray:
    """Each window's gradient split equally among the elements equal to its maximum."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    _, offs = _windows(xp, k, s, (1, 1))
    win = np.stack([xp[:, :, sh, sw] for _, _, (sh, sw) in offs])
    hit = win == win.max(0)
    share = dy / hit.sum(0)
    dxp = np.zeros_like(xp)
    for h, (_, _, (sh, sw)) in zip(hit, offs, strict=True):
        dxp[:, :, sh, sw] += np.where(h, share, 0)
    return dxp[:, :, pad:pad + x.shape[2], pad:pad + x.shape[3]]


@pytest.mark.parametrize("k, stride, dil, pad, groups", [
    ((3, 3), (1, 1), (1, 1), 1, 1),  # overlapping windows: three rows per spatial dim reach each input pixel
    ((2, 3), (2, 1), (2, 1), 2, 2),  # strided, dilated, grouped, non-square
    ((2, 2), (3, 2), (1, 1), 0, 1),  # stride >= kernel: windows that never overlap (a reshape view), a skipped pixel
])
def test_conv2d_gradients_match_the_numpy_scatter(k, stride, dil, pad, groups):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 7, 8))
    w = rng.standard_normal((4, 4 // groups) + k)
    X, W = Tensor(x.astype(np.float32), requires_grad=True), Tensor(w.astype(np.float32), requires_grad=True)
    y = X.conv2d(W, groups=groups, stride=stride, dilation=dil, padding=pad)
    dy = rng.standard_normal(y.shape)
    dx, dw = (y * Tensor(dy.astype(np.float32))).sum().gradient(X, W)
    Tensor.realize_all(dx, dw)
    ref_dx, ref_dw = _conv_grads(x, w, dy, stride, dil, pad, groups)
    np.testing.assert_allclose(dx.numpy(), ref_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw.numpy(), ref_dw, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k, stride, pad", [
    ((2, 2), (2, 2), 0),  # the usual pooling: windows that never overlap
    ((3, 3), (2, 2), 1),  # overlapping, padded
    ((2, 3), (1, 2), 0),  # one dim overlapping, the other not
])
def test_max_pool2d_gradient_splits_ties_like_the_numpy_formula(k, stride, pad):
    rng = np.random.default_rng(6)
    x = rng.integers(0, 4, (2, 3, 7, 8)).astype(np.float64)  # small integers: many ties
    X = Tensor(x.astype(np.float32), requires_grad=True)
    y = X.max_pool2d(k, stride, padding=pad)
    dy = rng.standard_normal(y.shape)
    (dx,) = (y * Tensor(dy.astype(np.float32))).sum().gradient(X)
    np.testing.assert_allclose(dx.numpy(), _max_pool_grad(x, dy, k, stride, pad), rtol=1e-5, atol=1e-6)


def test_conv_relu_max_pool_backward_stays_small():
    # regression: the conv input gradient summed over the four repeats of the windows' expand with a division and a
    # remainder per term, and the pooling gradient recomputed everything above it once per pixel of its window
    # (24x the forward's work in 4 kernels; now 3.1x in 9, two of them copies the forward makes and the gradients
    # read: the padded input (nn_ops.PAD_COPY_MIN_REUSE) and the weights in a block of channels (nn_ops.CHANNEL_BLOCK))
    rng = np.random.default_rng(7)
    x = Tensor(rng.standard_normal((4, 3, 12, 12)).astype(np.float32), device="python", requires_grad=True)
    w = Tensor(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), device="python", requires_grad=True)
    y = x.conv2d(w, padding=1).relu().max_pool2d(2)
    dx, dw = (y * Tensor(rng.standard_normal(y.shape).astype(np.float32), device="python")).sum().gradient(x, w)
    backend = get_backend("python")
    forward = sum(estimate(p.program).flops for p in compiled(backend, y.uop))
    backward = compiled(backend, UOp.sink(dx.uop, dw.uop))
    assert len(backward) <= 9, [p.name for p in backward]
    assert sum(estimate(p.program).flops for p in backward) <= 3.5 * forward
