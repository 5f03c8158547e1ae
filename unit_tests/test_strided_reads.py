"""Stride-2 reads as vectors (kernel-expand's span and strided loads, kernel-optimize's whole strided row): pools
and strided slices over rows of odd and even widths give numpy's values on the compiled backends."""
from __future__ import annotations

import numpy as np
import pytest

from uopir.backends.registry import available
from uopir.frontend.tensor import Tensor

DEVICES = [d for d in ("c", "llvm") if d in available()]


def _max_pool(a: np.ndarray, k: int, s: int) -> np.ndarray:
    w = np.lib.stride_tricks.sliding_window_view(a, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return w.max((-1, -2))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [111, 57, 34, 19])
def test_stride_2_max_pools_match_numpy(device: str, size: int) -> None:
    a = np.random.default_rng(size).standard_normal((1, 5, size, size)).astype(np.float32)
    a[0, 0, 3, 3] = np.nan  # a NaN wins its windows, as in numpy
    np.testing.assert_array_equal(Tensor(a, device=device).max_pool2d(3, 2).numpy(), _max_pool(a, 3, 2))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [64, 50, 35])
def test_stride_2_reads_match_numpy(device: str, size: int) -> None:
    a = np.random.default_rng(size).standard_normal((3, size, size)).astype(np.float32)
    t = Tensor(a, device=device)
    np.testing.assert_array_equal(t[:, :, ::2].numpy(), a[:, :, ::2])
    n = size // 2
    got = t[None, :, :2 * n, :2 * n].avg_pool2d(2, 2).numpy()[0]
    np.testing.assert_allclose(got, a[:, :2 * n, :2 * n].reshape(3, n, 2, n, 2).mean((2, 4)), rtol=1e-5, atol=1e-6)
