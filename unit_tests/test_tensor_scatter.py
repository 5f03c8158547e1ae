"""scatter / scatter_reduce against a reference written out in numpy loops (torch's semantics: the last write wins,
include_self, integer mean rounding down), plus the argument errors tinygrad raises."""
from __future__ import annotations

import math

import numpy as np
import pytest
from tensor_testing import check, rnd

from uopir import Tensor, dtypes

_OPS = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}  # NaN propagates (torch)


def _np_scatter(x: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray, reduce: str | None = None,
                include_self: bool = True) -> np.ndarray:
    out = x.copy()
    dim %= x.ndim
    groups: dict[tuple, list] = {}
    for p in np.ndindex(index.shape):
        q = p[:dim] + (int(index[p]),) + p[dim + 1:]
        groups.setdefault(q, []).append(src[p])
    for q, vals in groups.items():
        if reduce is None:
            out[q] = vals[-1]
            continue
        vals = ([x[q]] if include_self else []) + vals
        if reduce == "mean":
            total = np.sum(np.array(vals, x.dtype), dtype=x.dtype)
            out[q] = total / len(vals) if x.dtype.kind == "f" else total // len(vals)
        else:
            acc = vals[0]
            for v in vals[1:]:
                acc = _OPS[reduce](acc, v)
            out[q] = acc
    return out


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_scatter_last_write_wins(dim):
    idx = np.random.default_rng(3).integers(0, 3, (3, 4, 5)).astype(np.int32)
    x, src = rnd((4, 5, 6)), rnd((4, 5, 6))
    check(Tensor(x).scatter(dim, Tensor(idx), Tensor(src)), _np_scatter(x, dim, idx, src))


def test_scatter_shapes_scalars_and_duplicates():
    idx = np.random.default_rng(4).integers(0, 3, (3, 4, 5)).astype(np.int32)
    x, src = rnd((10, 3, 10)), rnd((10, 10, 10))
    check(Tensor(x).scatter(1, Tensor(idx), Tensor(src)), _np_scatter(x, 1, idx, src))
    x2 = rnd((4, 5, 6))
    check(Tensor(x2).scatter(1, Tensor(idx), 3.0), _np_scatter(x2, 1, idx, np.full(idx.shape, 3.0, np.float32)))
    check(Tensor(x2).scatter(dim=1, index=Tensor(idx), src=math.inf, reduce="add"),
          _np_scatter(x2, 1, idx, np.full(idx.shape, math.inf, np.float32), "sum"))
    check(Tensor(x2).scatter(1, Tensor(idx), math.nan, reduce="multiply"),
          _np_scatter(x2, 1, idx, np.full(idx.shape, math.nan, np.float32), "prod"))
    check(Tensor([1.0, 2.0, 3.0, 4.0]).scatter(0, Tensor([0, 0]), Tensor([1.0, 0.0])),
          np.array([0.0, 2.0, 3.0, 4.0], np.float32))
    check(Tensor.zeros(3, 5).scatter(0, Tensor([[0, 1, 2, 0]]), Tensor.arange(1, 11).reshape(2, 5).float()),
          np.array([[1, 0, 0, 4, 0], [0, 2, 0, 0, 0], [0, 0, 3, 0, 0]], np.float32))
    check(Tensor([[1, 2], [3, 4]]).scatter(1, Tensor([[1], [0]]), 9), np.array([[1, 9], [9, 4]], np.int32))
    b = np.array([True, False, False])
    check(Tensor(b).scatter(0, Tensor([1]), True), np.array([True, True, False]))
    check(Tensor(x2).scatter(0, Tensor(np.zeros((0, 5, 6), np.int32)), Tensor(x2)), x2)
    check(Tensor(3.0).scatter(0, Tensor(0), Tensor(5.0)), np.float32(5.0))  # 0-d, as torch
    check(Tensor(3.0).scatter_reduce(-1, Tensor(0), Tensor(5.0), "sum"), np.float32(8.0))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_float(reduce, include_self):
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 3, (3, 4, 5)).astype(np.int32)
    x, src = rnd((3, 4, 5)), rnd((3, 4, 5))
    src[0, 0, 0] = math.nan
    for dim in (-1, 1):
        want = _np_scatter(x, dim, idx, src, reduce, include_self)
        check(Tensor(x).scatter_reduce(dim, Tensor(idx), Tensor(src), reduce, include_self=include_self), want,
              rtol=1e-5)


@pytest.mark.parametrize("dt", ["int32", "int8", "float16"])
def test_scatter_reduce_dtypes(dt):
    idx = np.array([[0, 1, 0, 1], [2, 2, 2, 0]], np.int32)
    x, src = rnd((3, 4), dt, lo=-5, hi=5), rnd((2, 4), dt, lo=-5, hi=5)
    for reduce in ("sum", "mean", "amax", "amin", "prod"):
        for include_self in (True, False):
            want = _np_scatter(x, 0, idx, src, reduce, include_self)
            got = Tensor(x).scatter_reduce(0, Tensor(idx), Tensor(src), reduce, include_self=include_self)
            check(got, want, dtype=dt, rtol=1e-2 if dt == "float16" else None)


def test_scatter_reduce_prod_with_zeros():
    idx = np.random.default_rng(6).integers(0, 3, (3, 4, 5)).astype(np.int32)
    src = rnd((4, 5, 6))
    x = np.zeros((4, 5, 6), np.float32)
    check(Tensor(x).scatter_reduce(1, Tensor(idx), Tensor(src), "prod"), _np_scatter(x, 1, idx, src, "prod"))


def test_scatter_errors():
    x, idx = Tensor.ones(3, 4, 5), Tensor(np.zeros((3, 4, 5), np.int32))
    with pytest.raises(TypeError):
        x.scatter(1, idx, Tensor.ones(3, 4, 5), mode="typo")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        x.scatter(1, idx, 2.0, reduce="max")
    with pytest.raises(TypeError, match="scatter_reduce"):
        Tensor.ones(4).scatter(0, Tensor([0]), Tensor.ones(4), reduce="add")
    with pytest.raises(RuntimeError, match="dtype"):
        x.half().scatter(1, idx, x)
    with pytest.raises(RuntimeError, match="dtype"):
        x.cast(dtypes.float16).scatter_reduce(0, idx, x, "sum")
    with pytest.raises(RuntimeError, match="must be one of"):
        x.scatter_reduce(0, idx, x, "INVALID")
    with pytest.raises(RuntimeError, match="must not exceed"):
        Tensor.ones(2, 3, 10).scatter(1, idx, Tensor.ones(10, 10, 10))
    with pytest.raises(RuntimeError, match="must not exceed"):
        Tensor.ones(10, 3, 10).scatter(1, idx, Tensor.ones(10, 3, 10))
    with pytest.raises(RuntimeError, match="one rank"):
        x.scatter(0, Tensor([0]), x)
    with pytest.raises(RuntimeError, match="integer"):
        x.scatter(0, idx.float(), x)
