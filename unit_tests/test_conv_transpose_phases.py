"""A strided conv_transpose2d runs as one matmul over the unstuffed input plus an interleaving sum
(uopir.frontend.conv_transpose), not as a conv over the zero-stuffed input: its kernels do the transposed conv's own
multiply-adds (a 4x4/2 upsampling: a quarter of the stuffed conv's) and give the scatter definition's values."""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.estimates import estimate


def _scatter_ref(x: np.ndarray, w: np.ndarray, s: int, p: int, op: int, groups: int) -> np.ndarray:
    """Each input element times the kernel added into the output at s * i + tap, then `p` cropped on each side and
    `op` zero rows kept at the end (torch's definition)."""
    n, cin, h, wd = x.shape
    og, k = w.shape[1], w.shape[2]
    full = np.zeros((n, og * groups, (h - 1) * s + k + op, (wd - 1) * s + k + op))
    cg = cin // groups
    for c in range(cin):
        g = c // cg
        for i in range(h):
            for j in range(wd):
                full[:, g * og:(g + 1) * og, i * s:i * s + k, j * s:j * s + k] += \
                    x[:, c, i, j, None, None, None] * w[c][None]
    return full[:, :, p:full.shape[2] - p, p:full.shape[3] - p]


@pytest.mark.parametrize("k,s,p,op,groups", [(4, 2, 1, 0, 1), (2, 2, 0, 0, 1), (3, 2, 1, 1, 2)])
def test_values_match_the_scatter_definition(k: int, s: int, p: int, op: int, groups: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, k, k)).astype(np.float32)
    got = Tensor(x).conv_transpose2d(Tensor(w), None, groups, s, 1, p, op).numpy()
    np.testing.assert_allclose(got, _scatter_ref(x, w, s, p, op, groups), rtol=1e-5, atol=1e-5)


def test_4x4_stride_2_does_not_multiply_the_stuffed_zeros() -> None:
    """The flops of every kernel together: the matmul's 2 * cin * cout * k * k per input pixel, plus the interleave's
    adds (< one per product); the zero-stuffed conv would do (2h + 2)**2 / h**2 ~ 4.7x as many."""
    cin, cout, h, k = 8, 4, 6, 4
    x = Tensor(np.ones((1, cin, h, h), np.float32))
    w = Tensor(np.ones((cin, cout, k, k), np.float32))
    flops = sum(estimate(p.program).flops for p in x.conv_transpose2d(w, stride=2, padding=1).programs())
    products = 2 * cin * cout * k * k * h * h
    assert products <= flops < 1.2 * products
