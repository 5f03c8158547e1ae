"""sort / argsort / topk, cummax / cummin / logcumsumexp, masked_select / nonzero against numpy (torch's rules where
numpy has none: stable ties in both directions, NaN as the largest value, int32 indices, the last index of a running
extreme)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from tensor_testing import check, rnd

from uopir import Tensor


def _np_sort(a: np.ndarray, axis: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    """numpy's stable sort (NaN last); descending = stable ascending of the negated key, NaN first."""
    if not descending:
        idx = np.argsort(a, axis=axis, kind="stable")
    elif a.dtype.kind == "f":
        nan = np.isnan(a)
        idx = np.lexsort((np.where(nan, 0, -a.astype(np.float64)), ~nan), axis=axis)  # lexsort is stable
    else:
        idx = np.argsort(-a.astype(np.int64), axis=axis, kind="stable")
    return np.take_along_axis(a, idx, axis), idx.astype(np.int32)


@pytest.mark.parametrize("dt", ["float32", "int32", "uint8", "bool", "float16"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_against_numpy_stable(dt, descending):
    a = rnd((3, 4, 6), dt, lo=-2, hi=2)  # few distinct values: many ties
    for dim in ((-1, 0, 1) if dt == "float32" else (-1, 1)):
        v, i = Tensor(a).sort(dim, descending)
        wv, wi = _np_sort(a, dim, descending)
        check(v, wv, dtype=dt)
        check(i, wi, dtype="int32")


def test_sort_nan_inf_and_signed_zero():
    a = np.array([3.0, math.nan, -math.inf, 0.0, -0.0, math.inf, math.nan, 1.0, -1.0], np.float32)
    v, i = Tensor(a).sort()
    check(i, np.array([2, 8, 3, 4, 7, 0, 5, 1, 6], np.int32))
    got = check(v, a[[2, 8, 3, 4, 7, 0, 5, 1, 6]])
    assert not np.signbit(got[2]) and np.signbit(got[3])  # values move bit for bit
    _, i = Tensor(a).sort(descending=True)
    check(i, np.array([1, 6, 5, 0, 7, 3, 4, 8, 2], np.int32))
    check(Tensor(a).argsort(descending=True), np.array([1, 6, 5, 0, 7, 3, 4, 8, 2], np.int32))


def test_sort_ties_repeated_values():
    a = [0, 1] * 9
    check(Tensor(a).sort()[1], np.argsort(a, kind="stable").astype(np.int32))
    check(Tensor(a).sort(descending=True)[1], np.array(list(range(1, 18, 2)) + list(range(0, 18, 2)), np.int32))


@pytest.mark.parametrize("shape,dim", [((0,), 0), ((0, 5), 0), ((1,), 0), ((1, 5), 0), ((2, 0), 1), ((), 0), ((), -1)])
def test_sort_degenerate_shapes(shape, dim):
    a = rnd(shape)
    v, i = Tensor(a).sort(dim)
    check(v, a)
    check(i, np.zeros(shape, np.int32), dtype="int32")


def test_topk():
    a = rnd((5, 5, 4))
    for dim, largest in ((0, True), (1, False), (-1, True)):
        v, i = Tensor(a).topk(3, dim, largest)
        wv, wi = _np_sort(a, dim, largest)
        check(v, np.take(wv, range(3), axis=dim))
        check(i, np.take(wi, range(3), axis=dim), dtype="int32")
    t = Tensor([1, 1, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0])
    check(t.topk(3)[1], np.array([0, 1, 3], np.int32))
    check(t.topk(3, largest=False)[1], np.array([2, 4, 6], np.int32))
    check(t.topk(3, sorted_=False)[0], np.array([1, 1, 1], np.int32))
    v, i = Tensor(np.array([2.0, math.nan, 5.0], np.float32)).topk(2)
    check(v, np.array([math.nan, 5.0], np.float32))
    check(Tensor(4.0).topk(1)[0], np.float32(4.0))
    check(Tensor(a).topk(0)[0], np.zeros((5, 5, 0), np.float32))


def test_topk_bad_k():
    with pytest.raises(ValueError, match="topk"):
        Tensor([1, 2, 3, 4]).topk(5)
    with pytest.raises(ValueError, match="topk"):
        Tensor([1, 2]).topk(-1)


def _np_cumextreme(a: np.ndarray, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch's cummax/cummin along the last axis, written out: update on >= (<=) or a NaN, keep a NaN."""
    vals, idx = np.empty_like(a), np.zeros(a.shape, np.int32)
    for row in np.ndindex(a.shape[:-1]):
        best, at = a[row][0], 0
        for j, x in enumerate(a[row]):
            if np.isnan(x) or (not np.isnan(best) and (x >= best if largest else x <= best)):
                best, at = x, j
            vals[row + (j,)], idx[row + (j,)] = best, at
    return vals, idx


@pytest.mark.parametrize("dt", ["float32", "int32", "bool"])
def test_cummax_cummin(dt):
    a = rnd((3, 7), dt, lo=-2, hi=2)
    if dt == "float32":
        a[1, 3] = math.nan
        a[2, 1:3] = a[2, 0]  # ties: the last index wins
    for largest, fn in ((True, Tensor.cummax), (False, Tensor.cummin)):
        wv, wi = _np_cumextreme(a, largest)
        v, i = fn(Tensor(a), axis=1)
        check(v, wv, dtype=dt)
        check(i, wi, dtype="int32")
        if dt == "float32":  # along the first axis too
            v, i = fn(Tensor(a.T.copy()), 0)
            check(v, wv.T)
            check(i, wi.T)


def test_cummax_signed_zero_and_degenerate():
    v, i = Tensor(np.array([0.0, -0.0], np.float32)).cummax()
    check(i, np.array([0, 1], np.int32))
    assert np.signbit(v.numpy()[1])  # torch takes the later equal element
    v, i = Tensor(2.5).cummin(0)
    check(v, np.float32(2.5))
    check(i, np.int32(0))
    v, i = Tensor(np.zeros((2, 0, 4), np.float32)).cummax(1)
    check(v, np.zeros((2, 0, 4), np.float32))
    check(i, np.zeros((2, 0, 4), np.int32))
    with pytest.raises((ValueError, IndexError)):
        Tensor([1.0, 2.0]).cummax(1)


def test_logcumsumexp():
    a = rnd((4, 5), lo=-5, hi=5)
    for axis in (0, 1, -1):
        check(Tensor(a).logcumsumexp(axis), np.logaddexp.accumulate(a.astype(np.float64), axis=axis).astype(np.float32),
              rtol=1e-5, atol=1e-6)
    b = np.array([0.0, 100.0, -1000.0, -math.inf, math.inf, 1.0], np.float32)
    check(Tensor(b).logcumsumexp(), np.array([0.0, 100.0, 100.0, 100.0, math.inf, math.inf], np.float32))
    check(Tensor(np.array([-math.inf, -math.inf, 0.0], np.float32)).logcumsumexp(),
          np.array([-math.inf, -math.inf, 0.0], np.float32))
    check(Tensor(np.array([-1000.0, -1000.0], np.float32)).logcumsumexp(),
          np.array([-1000.0, -1000.0 + math.log(2)], np.float32))
    check(Tensor(1.5).logcumsumexp(), np.float32(1.5))
    check(Tensor(np.array([1, 2], np.int32)).logcumsumexp(), np.logaddexp.accumulate([1.0, 2.0]).astype(np.float32),
          dtype="float32")


def test_masked_select():
    a = rnd((4, 5))
    m = a > 0.5
    check(Tensor(a).masked_select(Tensor(m)), a[m])
    check(Tensor(a).masked_select(Tensor(True)), a.ravel())
    check(Tensor(a).masked_select(Tensor(np.zeros((4, 5), bool))), np.zeros((0,), np.float32))
    check(Tensor(a).masked_select(Tensor(m[0])), a[np.broadcast_to(m[0], a.shape)])  # the mask broadcasts
    t = Tensor([0, 1, 2, 3, 4, 5, 6, 7, 8])
    mask = Tensor([True, False, True, False, True, False, False, False, True])
    check(t.masked_select(mask, size=4), np.array([0, 2, 4, 8], np.int32))
    check(t.masked_select(mask, size=6, fill_value=-1), np.array([0, 2, 4, 8, -1, -1], np.int32))
    check(t.masked_select(mask, size=2), np.array([0, 2], np.int32))
    check(Tensor(np.zeros(0, np.int32)).masked_select(Tensor(np.zeros(0, bool)), size=2, fill_value=-1),
          np.array([-1, -1], np.int32))
    assert Tensor([1.0, 2.0]).masked_select(Tensor([True, False]), size=3, fill_value=-1).dtype.name == "f32"
    with pytest.raises(RuntimeError, match="bool mask"):
        Tensor([1, 2]).masked_select(Tensor([1, 0]))


def test_nonzero():
    a = rnd((3, 4, 2)) > 0.5
    check(Tensor(a).nonzero(), np.argwhere(a).astype(np.int32), dtype="int32")
    f = np.array([1.5, 0.0, -0.0, math.nan, 2.0], np.float32)
    check(Tensor(f).nonzero(), np.argwhere(f).astype(np.int32))
    check(Tensor([1, 0, 2, 0, 3]).nonzero(size=3), np.array([[0], [2], [4]], np.int32))
    check(Tensor([1, 0, 2, 0, 3]).nonzero(size=5, fill_value=-1), np.array([[0], [2], [4], [-1], [-1]], np.int32))
    check(Tensor([[1, 0], [0, 2]]).nonzero(size=2), np.array([[0, 0], [1, 1]], np.int32))
    assert Tensor(5).nonzero(size=4).shape == (4, 0)
    assert Tensor(5).nonzero().shape == (1, 0) and Tensor(0).nonzero().shape == (0, 0)
    check(Tensor(np.zeros(0, np.int32)).nonzero(size=3, fill_value=-1), np.array([[-1], [-1], [-1]], np.int32))
    check(Tensor([1, 0]).nonzero(size=3, fill_value=-1.5), np.array([[0], [-1], [-1]], np.int32), dtype="int32")
    check(Tensor(np.zeros((2, 3), np.float32)).nonzero(), np.zeros((0, 2), np.int32))


def test_two_ellipses_say_single_ellipsis():
    with pytest.raises(IndexError, match="single ellipsis"):  # tinygrad's test matches these words
        Tensor(np.zeros((2, 3), np.float32))[..., ...]
