"""Helpers shared by the test_tensor_* files: random inputs per dtype and a numpy comparison that also verifies
the IR the Tensor built."""
from __future__ import annotations

import numpy as np

from uopir import Tensor, dtypes
from uopir.ir.dtype import DType
from uopir.ir.verify import verify

RNG = np.random.default_rng(1234)

FLOATS = ("float16", "float32", "float64")
SINTS = ("int8", "int16", "int32", "int64")
UINTS = ("uint8", "uint16", "uint32", "uint64")
ALL = FLOATS + SINTS + UINTS + ("bool",)

_TOL = {"float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2), "float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12)}


def rnd(shape: tuple[int, ...], dtype: str = "float32", lo: float = -3, hi: float = 3) -> np.ndarray:
    """Small random values of a numpy dtype (ints in [lo, hi], unsigned from 0)."""
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if dtype.startswith("uint"):
        return RNG.integers(0, int(hi) + 1, shape).astype(dtype)
    if dtype.startswith("int"):
        return RNG.integers(int(lo), int(hi) + 1, shape).astype(dtype)
    return RNG.uniform(lo, hi, shape).astype(dtype)


def check(t: Tensor, expected: np.ndarray | float | int | bool, dtype: DType | str | None = None,
          rtol: float | None = None, atol: float | None = None) -> np.ndarray:
    """Verify t's IR, realize it, and compare shape and values with numpy (and the dtype when given)."""
    assert isinstance(t, Tensor), type(t)
    verify(t.uop)
    exp = np.asarray(expected)
    got = t.numpy()
    assert got.shape == exp.shape, f"shape {got.shape} != expected {exp.shape}"
    assert t.shape == exp.shape
    if dtype is not None:
        want = dtypes.from_name(dtype) if isinstance(dtype, str) else dtype
        assert t.dtype is want, f"dtype {t.dtype!r} != {want!r}"
    name = t.dtype.name
    pyname = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}.get(name)
    if pyname is not None:
        r, a = _TOL[pyname]
        np.testing.assert_allclose(got.astype(np.float64), exp.astype(np.float64), rtol=rtol if rtol is not None
                                   else r, atol=atol if atol is not None else a, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, exp)
    return got
