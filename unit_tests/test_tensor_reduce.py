"""Tensor reductions against numpy: axes (int, tuple, negative, None), keepdim, accumulation dtypes."""
from __future__ import annotations

import numpy as np
import pytest
from tensor_testing import ALL, FLOATS, SINTS, UINTS, check, rnd

from uopir import Tensor, dtypes

AXES = [None, 0, 1, -1, (0, 2), (-1, -3), ()]


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_max_min_prod(axis, keepdim):
    a = rnd((2, 3, 4), lo=-2, hi=2)
    x = Tensor(a)
    check(x.sum(axis, keepdim), np.sum(a, axis=axis, keepdims=keepdim), rtol=1e-5)
    check(x.mean(axis, keepdim), np.mean(a, axis=axis, keepdims=keepdim), rtol=1e-5)
    check(x.max(axis, keepdim), np.max(a, axis=axis, keepdims=keepdim))
    check(x.min(axis, keepdim), np.min(a, axis=axis, keepdims=keepdim))
    check(x.prod(axis, keepdim), np.prod(a, axis=axis, keepdims=keepdim), rtol=1e-5)


@pytest.mark.parametrize("dt", ALL)
def test_sum_accumulation_dtypes(dt):
    a = rnd((3, 5), dt) if dt in FLOATS else rnd((3, 5), dt, lo=-100, hi=100)
    x = Tensor(a)
    want = np.sum(a, axis=1)
    if dt == "float16":
        check(x.sum(1), want, dtype="float16", rtol=1e-2, atol=1e-1)
    else:
        check(x.sum(1), want, dtype=dtypes.from_numpy(want.dtype), rtol=1e-5)
    check(x.prod(0), np.prod(a, axis=0), rtol=2e-2 if dt == "float16" else 1e-5)
    check(x.max(), np.max(a))
    check(x.min(axis=-1), np.min(a, axis=-1))


def test_sum_int8_does_not_overflow_and_explicit_dtype():
    a = np.full((300,), 100, np.int8)
    check(Tensor(a).sum(), np.int64(30000), dtype="int64")
    check(Tensor(a).sum(dtype=dtypes.int16), np.int16(30000), dtype="int16")
    check(Tensor([True, True, False]).sum(), np.int64(2), dtype="int64")


@pytest.mark.parametrize("dt", ["bool", "int32", "float32"])
def test_any_all(dt):
    a = rnd((3, 4), dt, lo=0, hi=1) if dt != "float32" else (rnd((3, 4)) > 1).astype(np.float32)
    for axis in (None, 0, -1):
        check(Tensor(a).any(axis), np.any(a, axis=axis), dtype="bool")
        check(Tensor(a).all(axis, keepdim=True), np.all(a, axis=axis, keepdims=True), dtype="bool")
    check(Tensor(np.array([np.nan, 0.0], np.float32)).any(), np.True_)


@pytest.mark.parametrize("dt", FLOATS + SINTS + UINTS + ("bool",))
def test_argmax_argmin_first_occurrence(dt):
    a = rnd((4, 5), dt, lo=-2, hi=2)  # few values: many ties
    x = Tensor(a)
    for axis in (None, 0, 1, -1):
        check(x.argmax(axis), np.argmax(a, axis=axis).astype(np.int32), dtype="int32")
        check(x.argmin(axis), np.argmin(a, axis=axis).astype(np.int32), dtype="int32")
    check(x.argmax(1, keepdim=True), np.argmax(a, axis=1, keepdims=True).astype(np.int32))
    check(x.argmax(keepdim=True), np.argmax(a, keepdims=True).astype(np.int32))


def test_argmax_nan_is_numpy_like():
    a = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    check(Tensor(a).argmax(), np.int32(np.argmax(a)))
    check(Tensor(a).argmin(), np.int32(np.argmin(a)))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
@pytest.mark.parametrize("correction", [0, 1])
def test_var_std(axis, correction):
    a = rnd((3, 4))
    check(Tensor(a).var(axis, correction=correction), np.var(a, axis=axis, ddof=correction), rtol=1e-5)
    check(Tensor(a).std(axis, keepdim=True, correction=correction),
          np.std(a, axis=axis, ddof=correction, keepdims=True), rtol=1e-5)
    v, m = Tensor(a).var_mean(axis)
    check(v, np.var(a, axis=axis, ddof=1), rtol=1e-5)
    check(m, np.mean(a, axis=axis), rtol=1e-5)


def test_var_defaults_to_bessel_and_int_mean():
    a = rnd((6,), "int32")
    check(Tensor(a).var(), np.var(a.astype(np.float64), ddof=1).astype(np.float32), dtype="float32", rtol=1e-5)
    check(Tensor(a).mean(), np.float32(np.mean(a)), dtype="float32", rtol=1e-6)
    check(Tensor(rnd((4,), "float16")).mean(), np.float16(0), dtype="float16", atol=3)


def _softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family(axis):
    a = rnd((3, 5), lo=-20, hi=20)
    check(Tensor(a).softmax(axis), _softmax(a, axis), rtol=1e-5, atol=1e-7)
    check(Tensor(a).log_softmax(axis), np.log(_softmax(a.astype(np.float64), axis)), rtol=1e-5, atol=1e-5)
    lse = np.log(np.sum(np.exp(a.astype(np.float64)), axis=axis))
    check(Tensor(a).logsumexp(axis), lse, rtol=1e-5)
    check(Tensor(a).logsumexp(axis, keepdim=True), np.expand_dims(lse, axis), rtol=1e-5)


def test_logsumexp_of_all_minus_inf_and_none_axis():
    a = np.full((2, 3), -np.inf, np.float32)
    check(Tensor(a).logsumexp(1), np.full(2, -np.inf, np.float32))
    b = rnd((2, 3))
    check(Tensor(b).logsumexp(), np.log(np.exp(b.astype(np.float64)).sum()), rtol=1e-5)


@pytest.mark.parametrize("dt", ["float32", "int8", "int32", "bool", "uint16"])
def test_cumsum_cumprod(dt):
    a = rnd((3, 4), dt, lo=-3, hi=3)
    for axis in (0, 1, -1):
        check(Tensor(a).cumsum(axis), np.cumsum(a, axis=axis), rtol=1e-5)
    if dt != "bool":
        check(Tensor(a).cumprod(1), np.cumprod(a, axis=1), rtol=1e-5)
    check(Tensor(np.zeros((0,), np.float32)).cumsum(), np.zeros((0,), np.float32))


def test_zero_d_and_empty_reductions():
    check(Tensor(3.0).sum(), np.float32(3))
    check(Tensor(3.0).max(), np.float32(3))
    e = np.zeros((0, 3), np.float32)
    check(Tensor(e).sum(0), np.zeros(3, np.float32))
    check(Tensor(e).sum(1), np.zeros(0, np.float32))
    check(Tensor(e).prod(0), np.ones(3, np.float32))
    check(Tensor(e).any(0), np.zeros(3, bool))
    check(Tensor(e).all(), np.True_)
    with np.errstate(all="ignore"):
        check(Tensor(e).mean(0), np.full(3, np.nan, np.float32))
    with pytest.raises(ValueError, match=r"\(0, 3\)"):
        Tensor(e).max(0)
    with pytest.raises(ValueError, match=r"\(0, 3\)"):
        Tensor(e).argmax(0)


def test_axis_errors_name_the_shape():
    x = Tensor.ones(2, 3)
    with pytest.raises(ValueError, match=r"axis 2 .*\(2, 3\)"):
        x.sum(2)
    with pytest.raises(ValueError, match=r"axis -3"):
        x.max(-3)
    with pytest.raises(ValueError, match="repeats"):
        x.sum((0, -2))
    with pytest.raises(TypeError):
        x.sum(1.5)


def test_reductions_of_0d_and_empty_axes():
    """Regressions: argmax/argmin of a 0-d tensor with axis=0 crashed; cumsum of a 0-d int tensor kept int32 (sum
    gives int64); logsumexp/softmax/log_softmax over an empty axis raised instead of -inf / an empty result."""
    s = np.float32(3.5)
    check(Tensor(s).argmax(0), np.argmax(s, axis=0), dtype="int32")
    check(Tensor(s).argmin(-1), np.argmin(s, axis=-1))
    check(Tensor(s).argmax(0, keepdim=True), np.int32(0))
    check(Tensor(np.int32(4)).cumsum(0), np.int64(4), dtype="int64")
    check(Tensor(np.uint8(4)).cumprod(0), np.uint64(4), dtype="uint64")
    e = np.zeros((2, 0), np.float32)
    check(Tensor(e).logsumexp(-1), np.full((2,), -np.inf, np.float32))
    check(Tensor(e).logsumexp(), np.float32(-np.inf))
    check(Tensor(e).logsumexp(0, keepdim=True), np.zeros((1, 0), np.float32))
    check(Tensor(e).softmax(-1), e)
    check(Tensor(e).log_softmax(-1), e)


def test_log_softmax_half_keeps_precision():
    """Regression: log_softmax was x - logsumexp(x), so float16 rounded 1000.69 to 1000.5 and gave -0.5 for -ln 2."""
    x = np.array([1000.0, 1000.0, -1000.0], np.float16)
    want = np.array([-np.log(2), -np.log(2), -2000 - np.log(2)])
    check(Tensor(x).log_softmax(), want.astype(np.float16), dtype="float16")
