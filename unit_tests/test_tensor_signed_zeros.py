"""Issue 8 item 10: values that only their bits tell apart (-0.0, infinities, NaN payloads) come out as numpy's.

Regression: `Tensor([-0.0]).abs()` gave -0.0 (numpy: +0.0); cat, stack, integer-tensor indexing and gather built
their result from padded or masked pieces added together, and -0.0 + 0.0 is +0.0. Siblings fixed with them:
`pad(value=-0.0)` padded with +0.0 (-0.0 == 0 took the zero-pad path), `sign(-0.0)` gave -0.0, `ceil(-0.3)` gave
+0.0, and cumsum lost the sign of a leading run of -0.0.
"""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor

UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _special(npdt: str) -> np.ndarray:
    """-0.0, +0.0, ordinary values, both infinities, and NaNs of both signs with a non-default payload."""
    dt = np.dtype(npdt)
    vals = np.array([-0.0, 0.0, -1.5, 2.25, np.inf, -np.inf, np.nan, -np.nan], dt)
    bits = vals.view(UINT[dt.itemsize])
    one = UINT[dt.itemsize](1)
    bits[6] |= one  # quiet NaN with payload 1, positive
    bits[7] |= one << UINT[dt.itemsize](1)  # payload 2, negative
    return bits.view(dt)


def _same_bits(got: np.ndarray, exp: np.ndarray) -> None:
    assert got.dtype == exp.dtype and got.shape == exp.shape, (got.dtype, got.shape, exp.dtype, exp.shape)
    u = UINT[exp.dtype.itemsize]
    np.testing.assert_array_equal(got.view(u), exp.view(u), err_msg=f"\ngot {got}\nexpected {exp}")


FLOATS = ["float16", "float32", "float64"]


@pytest.mark.parametrize("npdt", FLOATS)
def test_abs_clears_the_sign_bit(npdt):
    a = _special(npdt)
    _same_bits(Tensor(a).abs().numpy(), np.abs(a))
    assert not np.signbit(Tensor([-0.0]).abs().numpy()).any()


@pytest.mark.parametrize("npdt", FLOATS)
def test_cat_and_stack_keep_every_bit(npdt):
    a = _special(npdt)
    b = a[::-1].copy()
    _same_bits(Tensor(a).cat(Tensor(b)).numpy(), np.concatenate([a, b]))
    _same_bits(Tensor(a[:3]).cat(Tensor(b), Tensor(a[3:]), dim=0).numpy(), np.concatenate([a[:3], b, a[3:]]))
    _same_bits(Tensor(a).stack(Tensor(b), dim=1).numpy(), np.stack([a, b], axis=1))
    m = a.reshape(2, 4)
    _same_bits(Tensor(m).cat(Tensor(m[:, :1]), dim=1).numpy(), np.concatenate([m, m[:, :1]], axis=1))


def test_cat_of_ints_and_bools_is_unchanged():
    np.testing.assert_array_equal(Tensor([1, -2]).cat(Tensor([3])).numpy(), np.array([1, -2, 3], np.int32))
    np.testing.assert_array_equal(Tensor([True]).cat(Tensor([False, True])).numpy(), np.array([True, False, True]))


@pytest.mark.parametrize("npdt", FLOATS)
def test_integer_tensor_indexing_keeps_every_bit(npdt):
    a = _special(npdt)
    idx = np.array([0, 0, 1, 7, 6, 5, 4, -8, -1])
    _same_bits(Tensor(a)[Tensor(idx)].numpy(), a[idx])
    _same_bits(Tensor(a)[idx.tolist()].numpy(), a[idx])
    m = a.reshape(2, 4)
    _same_bits(Tensor(m)[Tensor([1, 0]), Tensor([0, 3])].numpy(), m[[1, 0], [0, 3]])
    _same_bits(Tensor(m)[:, Tensor([[0], [2]])].numpy(), m[:, [[0], [2]]])


@pytest.mark.parametrize("npdt", FLOATS)
def test_gather_keeps_every_bit(npdt):
    m = _special(npdt).reshape(2, 4)
    idx = np.array([[0, 3, 1], [2, 2, 0]])
    _same_bits(Tensor(m).gather(1, Tensor(idx)).numpy(), np.take_along_axis(m, idx, axis=1))


def test_indexing_and_gather_of_bfloat16_keep_negative_zero():
    x = Tensor([-0.0, 1.0, float("-inf")], dtype="bfloat16")
    got = x[Tensor([0, 2, 0])].numpy()
    assert np.signbit(got).tolist() == [True, True, True] and got[1] == -np.inf
    assert np.signbit(x.gather(0, Tensor([0, 1])).numpy()).tolist() == [True, False]
    assert np.signbit(x.abs().numpy()).tolist() == [False, False, False]


def test_out_of_range_tensor_index_still_reads_positive_zero():
    assert not np.signbit(Tensor([-0.0, -1.0])[Tensor([5])].numpy()).any()


@pytest.mark.parametrize("npdt", FLOATS)
def test_pad_with_negative_zero(npdt):
    a = _special(npdt)
    _same_bits(Tensor(a).pad(((2, 1),), value=-0.0).numpy(), np.pad(a, (2, 1), constant_values=-0.0))
    _same_bits(Tensor(a).pad(((1, 1),)).numpy(), np.pad(a, (1, 1)))


@pytest.mark.parametrize("npdt", FLOATS)
def test_sign_of_zeros_and_nan(npdt):
    a = _special(npdt)
    got, exp = Tensor(a).sign().numpy(), np.sign(a)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    ok = ~np.isnan(exp)
    _same_bits(got[ok], exp[ok])


@pytest.mark.parametrize("npdt", FLOATS)
@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round"])
def test_rounding_keeps_the_sign_of_zero(npdt, name):
    a = np.concatenate([_special(npdt), np.array([-0.3, 0.3, -0.5, 0.5, -0.7, 0.7, -1.0, 1.0], npdt)])
    _same_bits(getattr(Tensor(a), name)().numpy(), getattr(np, name)(a))


@pytest.mark.parametrize("npdt", FLOATS)
def test_cumsum_keeps_a_leading_run_of_negative_zeros(npdt):
    cases = [[-0.0, -0.0, 0.0, -0.0], [-0.0, 1.0, -1.0, -0.0], [0.0, -0.0], [-0.0], [-0.0, np.nan, -0.0],
             [-0.0, -np.inf, np.inf]]
    for c in cases:
        a = np.array(c, npdt)
        with np.errstate(invalid="ignore"):  # -inf + inf
            exp = np.cumsum(a)
        got = Tensor(a).cumsum().numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
        ok = ~np.isnan(exp)
        _same_bits(got[ok], exp[ok])
    m = np.array([[-0.0, 2.0], [-0.0, -0.0]], npdt)
    _same_bits(Tensor(m).cumsum(1).numpy(), np.cumsum(m, axis=1))
    _same_bits(Tensor(m).cumsum(0).numpy(), np.cumsum(m, axis=0))
