"""Issue 8 item 4: no graph depth limit in the frontend, the passes or the interpreter.

Regression: after about 500 chained Tensor ops with a Python scalar (`x = x + 1` in a loop) `.shape` and `.numpy()`
raised RecursionError (shapes were computed lazily and recursively), and `tensor-canonicalize` hit the recursion
limit on the 16,000-node graph of an avg_pool2d with an 8x8x8 kernel.
"""
from __future__ import annotations

import numpy as np

from uopir import Tensor

N = 5000


def test_chain_of_scalar_adds():
    x = Tensor([1.0, 2.0])
    for _ in range(N):
        x = x + 1
    assert x.shape == (2,)
    np.testing.assert_array_equal(x.numpy(), np.array([1.0, 2.0], np.float32) + N)


def test_chain_of_mixed_ops_matches_numpy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x, ref = Tensor(a), a
    for i in range(N):
        if i % 3 == 0:
            x, ref = x * 0.5, ref * np.float32(0.5)
        elif i % 3 == 1:
            x, ref = x + 1.0, ref + np.float32(1.0)
        else:
            x, ref = x.T, ref.T
    assert x.shape == ref.shape
    np.testing.assert_array_equal(x.numpy(), ref)


def test_chain_of_int_ops_matches_numpy():
    x, ref = Tensor([3, -7, 11], dtype="int64"), np.array([3, -7, 11], np.int64)
    for i in range(N):
        x, ref = (x * 3 + i, ref * 3 + i) if i % 2 else (x - 5, ref - 5)
    assert x.shape == (3,)
    np.testing.assert_array_equal(x.numpy(), ref)


def test_avg_pool_with_a_large_kernel():
    """The 8x8x8 kernel stacks 512 slices: a graph of about 16,000 nodes through the realize pipeline."""
    a = np.arange(2 * 10 * 10 * 10, dtype=np.float32).reshape(1, 2, 10, 10, 10) / 100
    out = Tensor(a).avg_pool2d(kernel_size=(8, 8, 8), stride=1)
    ref = np.lib.stride_tricks.sliding_window_view(a, (8, 8, 8), axis=(2, 3, 4)).mean(axis=(-3, -2, -1))
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)
