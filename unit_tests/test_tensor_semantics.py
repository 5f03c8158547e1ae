"""The rules where uopir's Tensor follows tinygrad and torch rather than numpy (docs/frontend.md, "Semantics
choices"): promotion, default dtypes, dtype names, argument forms of cat/stack, and the error classes raised.
Expected values are numpy's or worked out by hand from torch's documented behaviour (torch is not installed)."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from tensor_testing import check

from uopir import Tensor, dtypes
from uopir.ir.diagnostics import ArgumentError, AxisError, DTypeError, ShapeError


@pytest.fixture
def restore_defaults() -> Iterator[None]:
    f, i = dtypes.default_float, dtypes.default_int
    yield
    dtypes.default_float, dtypes.default_int = f, i


# ---- promotion -------------------------------------------------------------------------------------------------------
def test_int_with_float_is_the_float():
    i, f = np.array([1, -2, 3], np.int32), np.array([0.5, 0.25, -1.5], np.float32)
    check(Tensor(i) + Tensor(f), np.array([1.5, -1.75, 1.5], np.float32), dtype="float32")  # numpy: float64
    check(Tensor(f) * Tensor(i.astype(np.int64)), np.array([0.5, -0.5, -4.5], np.float32), dtype="float32")
    check(Tensor(i.astype(np.int16)) - Tensor(f.astype(np.float16)), np.array([0.5, -2.25, 4.5], np.float16),
          dtype="float16")
    check(Tensor(np.array([], np.int32)) + Tensor(np.array([], np.float32)), np.zeros((0,), np.float32),
          dtype="float32")
    check(Tensor(np.int32(7)) * Tensor(np.float32(0.5)), np.float32(3.5), dtype="float32")  # 0-d


def test_sparse_categorical_crossentropy_keeps_float32():
    logits = Tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    loss = logits.sparse_categorical_crossentropy(Tensor([0, 2]))
    # hand: -log softmax: row 0 = log(e^2 + 2) - 2, row 1 = log 3
    want = np.float32((np.log(np.exp(2.0) + 2) - 2 + np.log(3.0)) / 2)
    check(loss, want, dtype="float32")


def test_scalar_promotion_follows_the_defaults(restore_defaults: None):
    x = Tensor([1, 2], dtype=dtypes.int64)
    assert (x * 1.5).dtype is dtypes.float32 and (Tensor([True]) + 1).dtype is dtypes.int32
    dtypes.default_float = dtypes.float16
    check(x * 1.5, np.array([1.5, 3.0], np.float16), dtype="float16")
    check(x / 4, np.array([0.25, 0.5], np.float16), dtype="float16")
    assert (Tensor([1.0], dtype=dtypes.float64) * 1.5).dtype is dtypes.float64  # a float tensor keeps its dtype


# ---- defaults and dtype names ----------------------------------------------------------------------------------------
def test_defaults_are_settable_and_used(restore_defaults: None):
    assert dtypes.default_float is dtypes.float32 and dtypes.default_int is dtypes.int32
    dtypes.default_float, dtypes.default_int = dtypes.float16, dtypes.int64
    check(Tensor([1.5, 2.0]), np.array([1.5, 2.0], np.float16), dtype="float16")
    check(Tensor([1, 2]), np.array([1, 2], np.int64), dtype="int64")
    check(Tensor.arange(3), np.arange(3), dtype="int64")
    check(Tensor.arange(0.5, 2), np.array([0.5, 1.5], np.float16), dtype="float16")
    check(Tensor.linspace(0, 1, 3), np.array([0, 0.5, 1], np.float16), dtype="float16")
    check(Tensor.eye(2), np.eye(2, dtype=np.float16), dtype="float16")
    check(Tensor([3, 1, 2]).argmax(), np.int64(0), dtype="int64")
    assert Tensor.rand(2).dtype is dtypes.float16 and Tensor([]).dtype is dtypes.float16
    with pytest.raises(TypeError, match="default_float"):
        dtypes.default_float = dtypes.int8
    with pytest.raises(TypeError, match="default_int"):
        dtypes.default_int = dtypes.float32


def test_dtype_predicates():
    assert dtypes.is_float(dtypes.bfloat16) and not dtypes.is_float(dtypes.int32)
    assert dtypes.is_int(dtypes.uint8) and dtypes.is_int(dtypes.int64) and not dtypes.is_int(dtypes.bool)
    assert dtypes.is_unsigned(dtypes.uint16) and not dtypes.is_unsigned(dtypes.int16)
    assert dtypes.is_bool(dtypes.bool) and not dtypes.is_bool(dtypes.uint8)
    assert set(dtypes.ints) == set(dtypes.uints) | set(dtypes.sints) and dtypes.float32 in dtypes.floats
    assert dtypes.from_py(True) is dtypes.bool and dtypes.from_py(3) is dtypes.int32
    assert dtypes.from_py(2**40) is dtypes.int64 and dtypes.from_py([1, 2.5]) is dtypes.float32
    assert dtypes.from_py([1, [2, 3]]) is dtypes.int32 and dtypes.from_py([]) is dtypes.float32


def test_dtype_names_and_python_ints():
    for name, d in (("int", dtypes.int32), ("half", dtypes.float16), ("long", dtypes.int64), ("uint", dtypes.uint32),
                    ("float", dtypes.float32), ("double", dtypes.float64), ("int32", dtypes.int32)):
        assert Tensor([1, 2], dtype=name).dtype is d, name
    assert Tensor([1], dtype=int).dtype is dtypes.int32 and Tensor([1], dtype=float).dtype is dtypes.float32
    assert dtypes.int is dtypes.int32 and dtypes.uint is dtypes.uint32 and dtypes.ulong is dtypes.uint64
    check(Tensor.arange(2**31, 2**31 + 3), np.arange(2**31, 2**31 + 3, dtype=np.int64), dtype="int64")
    check(Tensor([2**40]), np.array([2**40], np.int64), dtype="int64")
    check(Tensor(2**40), np.int64(2**40), dtype="int64")
    check(Tensor([1.5]), np.array([1.5], np.float32), dtype="float32")
    with pytest.raises(AttributeError):  # tinygrad looks the name up on dtypes
        Tensor([1.0, 2.0]).sum(dtype="")
    with pytest.raises(TypeError):
        Tensor([1.0]).cast("nonsense")


# ---- argument forms --------------------------------------------------------------------------------------------------
def test_stack_and_cat_forms():
    a, b, c = Tensor([1, 2]), Tensor([3, 4]), Tensor([5, 6])
    want = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    check(Tensor.stack((a, b, c)), want)
    check(Tensor.stack([a, b, c], dim=1), want.T)
    check(Tensor.stack(a, b, c, dim=-1), want.T)
    check(a.stack(b, c), want)
    check(Tensor.cat((a, b, c)), want.reshape(-1))
    check(Tensor.stack(Tensor(3.5), Tensor(1.5)), np.array([3.5, 1.5], np.float32))  # 0-d pieces
    check(Tensor.stack((Tensor.ones(0, 2), Tensor.ones(0, 2))), np.ones((2, 0, 2), np.float32))
    with pytest.raises(ValueError):
        Tensor.stack((a, b), c)
    with pytest.raises(IndexError):
        Tensor.stack(a, b, dim=3)
    with pytest.raises(IndexError):
        Tensor(3.0).cat(Tensor(1.0))


# ---- errors ----------------------------------------------------------------------------------------------------------
def test_shape_errors_are_runtime_errors():
    x = Tensor.ones(3, 4)
    cases = [lambda: x + Tensor.ones(5), lambda: x.reshape(5), lambda: x.reshape(-1, -1, 2),
             lambda: x @ Tensor.ones(3, 4), lambda: Tensor.ones(4).dot(Tensor.ones(1, 2)),
             lambda: Tensor(3.0) @ Tensor(3.0), lambda: x.permute(0, 0), lambda: x.permute(1, 0, 0),
             lambda: x.flip(1, -1), lambda: x.expand(3, 5), lambda: x.cat(Tensor.ones(3, 5)),
             lambda: x.stack(Tensor.ones(4, 3))]
    for make in cases:
        with pytest.raises(RuntimeError) as e:
            make()
        assert isinstance(e.value, ShapeError) and isinstance(e.value, ValueError)
    with pytest.raises(IndexError):  # broadcasting also raises IndexError, as tinygrad's newer releases
        x * Tensor.ones(2, 1, 5)


def test_axis_errors_are_index_errors():
    for make in (lambda: Tensor.ones(3, 4).sum(5), lambda: Tensor(1.0).sum(1), lambda: Tensor(1.0).squeeze(-2),
                 lambda: Tensor.ones(3, 4).squeeze(50), lambda: Tensor.ones(5).cumsum(1),
                 lambda: Tensor.ones(5).max(-2), lambda: Tensor.ones(2).unsqueeze(3)):
        with pytest.raises(IndexError) as e:
            make()
        assert isinstance(e.value, AxisError) and isinstance(e.value, ValueError)
    check(Tensor(2.0).squeeze(0), np.float32(2.0))


def test_index_errors():
    a = Tensor.ones(4, 3)
    with pytest.raises(IndexError, match="out of bounds"):
        a[1, 3]
    with pytest.raises(IndexError, match="out of bounds"):
        a[-5]
    with pytest.raises(IndexError, match="too many"):
        a[1, 1, 1]
    with pytest.raises(IndexError):
        Tensor(2.0)[:]
    with pytest.raises(ValueError):
        a[::0, 1]
    with pytest.raises(TypeError):
        a[:Tensor([3]), 1]
    with pytest.raises(IndexError):
        a[Tensor([1.5])]


def test_argument_errors():
    with pytest.raises(RuntimeError) as e:
        Tensor([1, 0, 2]) ** -2  # an int tensor to a negative int power
    assert isinstance(e.value, DTypeError)
    with pytest.raises(RuntimeError):
        Tensor([True]) ** -1
    check(Tensor([1, 2]) ** -2.0, np.array([1.0, 0.25], np.float32), dtype="float32")  # a float power is fine
    check(Tensor([2.0, 4.0]) ** -1, np.array([0.5, 0.25], np.float32))
    check(2 ** Tensor([1, 3]), np.array([2, 8], np.int32), dtype="int32")
    for make in (lambda: Tensor.linspace(1, 2, -1), lambda: Tensor.linspace(5, 10, 3, dtype="bool"),
                 lambda: Tensor([0, 2]).one_hot(-1), lambda: Tensor([1.0]).clip(None, None),
                 lambda: Tensor([5.0]).div(Tensor([1.0]), rounding_mode="typo")):
        with pytest.raises(RuntimeError) as e:
            make()
        assert isinstance(e.value, ArgumentError) and isinstance(e.value, ValueError)
    for make in (lambda: Tensor([1.0]) << 2, lambda: Tensor([4.0]) >> 1,
                 lambda: Tensor([1], dtype=dtypes.uint32) << Tensor([1.0])):
        with pytest.raises(RuntimeError):
            make()
    check(Tensor.linspace(5, 10, 0), np.zeros((0,), np.float32))
    check(Tensor.linspace(5, -5, 5, dtype="int32"), np.array([5, 2, 0, -2, -5], np.int32))  # truncated, as torch
