"""Elementwise Tensor ops against numpy: arithmetic, promotion, broadcasting, comparisons, math, activations."""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples
from tensor_testing import ALL, FLOATS, SINTS, UINTS, check, rnd

from uopir import Tensor, dtypes, print_ir
from uopir.frontend.dtype_promotion import promote

# ---- promotion -------------------------------------------------------------------------------------------------------
# hand-written from tinygrad's promotion lattice (tinygrad/dtype.py promo_lattice), where it and numpy differ
TINYGRAD_PROMOTION = [
    ("int32", "float32", "float32"), ("int64", "float32", "float32"), ("uint32", "float32", "float32"),
    ("int16", "float16", "float16"), ("int64", "float16", "float16"), ("bool", "float16", "float16"),
    ("int64", "uint64", "float16"), ("int8", "uint64", "float16"), ("uint64", "float32", "float32"),
]


@pytest.mark.parametrize("a, b, want", TINYGRAD_PROMOTION)
def test_tensor_tensor_promotion_follows_tinygrad(a, b, want):
    x, y = Tensor(rnd((2,), a)), Tensor(rnd((2,), b))
    assert (x + y).dtype is dtypes.from_name(want) and (y + x).dtype is dtypes.from_name(want)


@pytest.mark.parametrize("a", ALL)
@pytest.mark.parametrize("b", ALL)
def test_tensor_tensor_promotion(a, b):
    """Where tinygrad's lattice and numpy agree (same kind, bool with anything, ints that share a wider int) the
    result is numpy's; an int with a float gives that float (numpy widens: int32 ⊕ float32 → float64)."""
    x, y = Tensor(rnd((2,), a)), Tensor(rnd((2,), b))
    got = (x + y).dtype
    da, db = dtypes.from_name(a), dtypes.from_name(b)
    if da.is_float != db.is_float and not (da.is_bool or db.is_bool):
        assert got is (da if da.is_float else db)
    elif {a, b} & {"uint64"} and {a, b} & set(SINTS):
        assert got is dtypes.float16  # no int holds both: the lattice's first float (numpy: float64)
    else:
        assert got is dtypes.from_numpy(np.result_type(np.dtype(a), np.dtype(b)))


def test_bfloat16_promotion():
    bf, f16, f32 = dtypes.bfloat16, dtypes.float16, dtypes.float32
    assert promote(bf, dtypes.int64) is bf and promote(bf, dtypes.bool) is bf
    assert promote(bf, f16) is f32 and promote(bf, f32) is f32 and promote(bf, dtypes.float64) is dtypes.float64
    x = Tensor([1.5, 2.0], dtype=bf)
    check(x * 2, np.array([3.0, 4.0], np.float32), dtype=bf)
    check(x + Tensor([1.0, 1.0], dtype=f16), np.array([2.5, 3.0], np.float32), dtype=f32)


@pytest.mark.parametrize("dt", ALL)
def test_weak_python_scalars(dt):
    x = Tensor(rnd((3,), dt))
    d = x.dtype
    assert (x + True).dtype is d
    assert (x * 2).dtype is (dtypes.int32 if dt == "bool" else d)
    assert (x * 2.5).dtype is (d if d.is_float else dtypes.float32)  # numpy would give float64 for ints
    assert (2.5 - x.float()).dtype is dtypes.float32


def test_int_scalar_keeps_narrow_int():
    a = np.array([100, -100, 5], np.int8)
    check(Tensor(a) + 1, a + np.int8(1), dtype="int8")
    check(Tensor(a) * 2, (a.astype(np.int16) * 2).astype(np.int8), dtype="int8")  # wraps like numpy int8
    check(3 - Tensor(a), np.int8(3) - a, dtype="int8")


def test_numpy_scalars_are_weak():
    """numpy scalars promote like Python ones (torch; numpy 2 makes them strong); numpy arrays are tensors."""
    x = Tensor([1.0, 2.0])
    check(x + np.float64(1), np.array([2.0, 3.0], np.float32), dtype="float32")
    check(Tensor([1, 2], dtype=dtypes.int8) * np.int64(3), np.array([3, 6], np.int8), dtype="int8")
    assert (x + np.array([1, 2], np.int64)).dtype is dtypes.float32  # int64 ⊕ float32 → float32
    assert (Tensor([1], dtype=dtypes.float16) + np.array([1.0])).dtype is dtypes.float64


# ---- arithmetic ------------------------------------------------------------------------------------------------------
ARITH = [operator.add, operator.sub, operator.mul]


@pytest.mark.parametrize("dt", FLOATS + SINTS + UINTS)
@pytest.mark.parametrize("op", ARITH, ids=lambda f: f.__name__)
def test_arith_same_dtype(dt, op):
    a, b = rnd((3, 4), dt), rnd((3, 4), dt)
    with np.errstate(all="ignore"):
        check(op(Tensor(a), Tensor(b)), op(a, b), dtype=dt)
        check(op(Tensor(a), 2), op(a, a.dtype.type(2)), dtype=dt)
        check(op(2, Tensor(a)), op(a.dtype.type(2), a), dtype=dt)


@pytest.mark.parametrize("sa, sb", [((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((), (2, 3)), ((2, 1, 3), (5, 1)),
                                    ((0, 3), (1, 3)), ((1,), ())])
@pytest.mark.parametrize("op", ARITH + [operator.truediv], ids=lambda f: f.__name__)
def test_broadcasting(sa, sb, op):
    a, b = rnd(sa), rnd(sb, lo=0.5, hi=2)
    check(op(Tensor(a), Tensor(b)), op(a, b))
    check(op(Tensor(b), Tensor(a) + 10), op(b, a + 10))


def test_broadcast_is_explicit_in_ir():
    y = Tensor(rnd((3, 1))) + Tensor(rnd((4,)))
    text = print_ir(y.uop)
    assert "tensor.expand" in text and "tensor.reshape" in text
    assert "core.const 2.0 : f32" in print_ir((Tensor(rnd((2,))) * 2.0).uop)  # shapeless scalar const


def test_broadcast_error_names_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        Tensor.ones(2, 3) + Tensor.ones(4)
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        Tensor.ones(3).where(Tensor.ones(2), 0)


def test_true_division():
    a = rnd((6,), "int32")
    b = np.array([1, 2, -3, 4, -5, 7], np.int32)
    check(Tensor(a) / Tensor(b), (a / b).astype(np.float32), dtype="float32")
    check(Tensor(a) / 2, (a / 2).astype(np.float32), dtype="float32")
    check(1 / Tensor(b), (1 / b).astype(np.float32))
    h = rnd((4,), "float16")
    check(Tensor(h) / 3, h / np.float16(3), dtype="float16")
    check(Tensor(a).div(Tensor(b), rounding_mode="trunc"), np.trunc(a / b).astype(np.int32), dtype="int32")
    check(Tensor(a).div(Tensor(b), rounding_mode="floor"), a // b, dtype="int32")


@pytest.mark.parametrize("dt", SINTS + UINTS)
def test_floordiv_mod_ints_python_semantics(dt):
    a = rnd((40,), dt, lo=-20, hi=20)
    b = rnd((40,), dt, lo=-6, hi=6)
    b[b == 0] = 3
    check(Tensor(a) // Tensor(b), a // b, dtype=dt)
    check(Tensor(a) % Tensor(b), a % b, dtype=dt)
    check(Tensor(a) // 3, a // a.dtype.type(3))
    check(Tensor(a) % 4, a % a.dtype.type(4))
    if dt in SINTS:
        check(Tensor(a) // -3, a // a.dtype.type(-3))
        check(Tensor(a) % -4, a % a.dtype.type(-4))
        check(17 // Tensor(b), a.dtype.type(17) // b)
        check(-17 % Tensor(b), a.dtype.type(-17) % b)


@pytest.mark.parametrize("dt", FLOATS)
def test_floordiv_mod_floats(dt):
    a = rnd((30,), dt, lo=-10, hi=10)
    b = rnd((30,), dt, lo=0.5, hi=3) * np.where(rnd((30,), "bool"), 1, -1).astype(dt)
    tol = 1e-2 if dt == "float16" else 1e-5
    check(Tensor(a) // Tensor(b), a // b, dtype=dt)
    check(Tensor(a) % Tensor(b), a % b, dtype=dt, atol=tol, rtol=tol)
    check(Tensor(a) % 2.5, a % a.dtype.type(2.5), atol=tol, rtol=tol)


@pytest.mark.parametrize("dt", FLOATS)
def test_float_floordiv_mod_match_numpy_bit_for_bit(dt):
    """Float // and % follow numpy exactly (from the exact fmod), including cases floor(a / b) gets wrong."""
    vals = [-4.0, -0.4, 7.8, -0.6, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 5.5, -2.5, 0.1, 0.3, 1e30, 3e-39]
    with np.errstate(all="ignore"):
        a = np.repeat(np.array(vals, dt), len(vals))
        b = np.tile(np.array(vals, dt), len(vals))
        want_q, want_r = np.floor_divide(a, b), np.remainder(a, b)
    for got, want in (((Tensor(a) // Tensor(b)).numpy(), want_q), ((Tensor(a) % Tensor(b)).numpy(), want_r)):
        same_bits = got.view(np.uint8).reshape(len(a), -1) == want.view(np.uint8).reshape(len(a), -1)
        ok = same_bits.all(axis=1) | (np.isnan(got) & np.isnan(want))
        assert ok.all(), list(zip(a[~ok], b[~ok], got[~ok], want[~ok], strict=True))[:5]
    assert (Tensor(np.array([-4.0], dt)) // -0.4).item() == 9.0  # floor(-4 / -0.4) would say 10


def test_pow():
    a = rnd((12,), "float32", lo=-3, hi=3)
    p = rnd((12,), "float32", lo=0.5, hi=2)
    check(Tensor(a) ** 2, a**2)
    check(Tensor(a) ** 3.0, a**3, rtol=1e-5)
    check(Tensor(a) ** 0, np.ones_like(a))
    check(Tensor(np.abs(a)) ** 0.5, np.abs(a) ** 0.5, rtol=1e-5)
    check(Tensor(np.abs(a)) ** Tensor(p), np.abs(a) ** p, rtol=1e-5)
    check(2 ** Tensor(p), 2**p, rtol=1e-5)
    neg = np.array([-2.0, -2.0, -8.0, 0.0, 0.0, 1.0, np.nan], np.float32)
    ex = np.array([3.0, 0.5, -1.0, 2.0, -1.0, np.nan, 0.0], np.float32)
    with np.errstate(all="ignore"):
        check(Tensor(neg) ** Tensor(ex), neg**ex, rtol=1e-5)
    i = rnd((10,), "int32", lo=-4, hi=4)
    check(Tensor(i) ** 3, i**3, dtype="int32")
    e = rnd((10,), "int32", lo=0, hi=5)
    check(Tensor(i) ** Tensor(e), i**e, dtype="int32")
    check(Tensor(np.array([1, 2, 3], np.int8)) ** 2, np.array([1, 4, 9], np.int8), dtype="int8")
    h = rnd((5,), "float16", lo=0.5, hi=2)
    check(Tensor(h) ** 2.5, h ** np.float16(2.5), rtol=1e-2)


def test_neg_abs_sign():
    for dt in FLOATS + SINTS:
        a = rnd((8,), dt)
        check(-Tensor(a), -a, dtype=dt)
        check(Tensor(a).abs(), np.abs(a))
        check(Tensor(a).sign(), np.sign(a))
    u = rnd((5,), "uint8")
    check(Tensor(u).abs(), u)
    check(Tensor(u).sign(), np.sign(u))
    check(-Tensor([True, False]), np.array([False, True]))  # tinygrad: logical not
    check(Tensor([np.nan, -0.0, 2.0]).sign(), np.sign(np.array([np.nan, -0.0, 2.0], np.float32)))


# ---- comparisons and logic -------------------------------------------------------------------------------------------
CMPS = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("op", CMPS, ids=lambda f: f.__name__)
def test_comparisons(dt, op):
    a, b = rnd((4, 3), dt), rnd((3,), dt)
    check(op(Tensor(a), Tensor(b)), op(a, b), dtype="bool")
    check(op(Tensor(a), 1), op(a, 1), dtype="bool")
    check(op(1, Tensor(a)), op(1, a), dtype="bool")


def test_comparisons_with_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, 2.0], np.float32)
    for op in CMPS:
        check(op(Tensor(a), Tensor(b)), op(a, b))


@pytest.mark.parametrize("dt", SINTS + UINTS + ("bool",))
def test_bitwise(dt):
    a, b = rnd((6,), dt, lo=-50, hi=50), rnd((6,), dt, lo=-50, hi=50)
    check(Tensor(a) & Tensor(b), a & b, dtype=dt)
    check(Tensor(a) | Tensor(b), a | b, dtype=dt)
    check(Tensor(a) ^ Tensor(b), a ^ b, dtype=dt)
    check(~Tensor(a), ~a, dtype=dt)
    if dt != "bool":
        check(Tensor(a) << 2, a << a.dtype.type(2))
        check(Tensor(a) >> 1, a >> a.dtype.type(1))
        check(Tensor(a) & 6, a & a.dtype.type(6))


def test_bitwise_type_errors():
    with pytest.raises(TypeError, match="float32"):
        Tensor([1.0]) & Tensor([2.0])
    with pytest.raises(TypeError):
        ~Tensor([1.0])
    with pytest.raises(TypeError):
        Tensor([1.0]) << 1
    with pytest.raises(TypeError, match="bool"):
        Tensor([True]) - Tensor([False])


def test_bool_arith():
    a, b = rnd((5,), "bool"), rnd((5,), "bool")
    check(Tensor(a) + Tensor(b), a + b, dtype="bool")
    check(Tensor(a) * Tensor(b), a * b, dtype="bool")
    check(Tensor(a).logical_not(), ~a)
    check(Tensor(a) + 1, a.astype(np.int32) + 1, dtype="int32")


def test_where_maximum_minimum_clip():
    c = rnd((3, 4), "bool")
    a, b = rnd((3, 4)), rnd((4,))
    check(Tensor(c).where(Tensor(a), Tensor(b)), np.where(c, a, b))
    check(Tensor(c).where(Tensor(a), 0.5), np.where(c, a, np.float32(0.5)))
    check(Tensor(c).where(1, 0), np.where(c, 1, 0).astype(np.int32), dtype="int32")
    check(Tensor(c).where(1, 0.5), np.where(c, 1, 0.5).astype(np.float32), dtype="float32")
    check(Tensor(a).where(1.0, -1.0), np.where(a != 0, 1.0, -1.0).astype(np.float32))
    for dt in ALL:
        x, y = rnd((3, 4), dt), rnd((4,), dt)
        check(Tensor(x).maximum(Tensor(y)), np.maximum(x, y))
        check(Tensor(x).minimum(Tensor(y)), np.minimum(x, y))
    n = np.array([np.nan, 1.0, -0.0], np.float32)
    check(Tensor(n).maximum(0.0), np.maximum(n, 0))
    check(Tensor(n).minimum(0.5), np.minimum(n, 0.5))
    check(Tensor(a).clip(-1, 1), np.clip(a, -1, 1))
    check(Tensor(a).clip(max_=0.5), np.minimum(a, 0.5))
    i = rnd((6,), "int16")
    check(Tensor(i).clip(-1, 2), np.clip(i, -1, 2), dtype="int16")
    check(Tensor(a).masked_fill(Tensor(c), -5.0), np.where(c, -5.0, a).astype(np.float32))
    check(Tensor(a).lerp(Tensor(b), 0.25), a + (b - a) * np.float32(0.25))


# ---- unary math ------------------------------------------------------------------------------------------------------
UNARY = {
    "exp": (np.exp, (-4, 4)), "exp2": (np.exp2, (-4, 4)), "log": (np.log, (0.1, 10)), "log2": (np.log2, (0.1, 10)),
    "sqrt": (np.sqrt, (0, 10)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 10)), "sin": (np.sin, (-6, 6)),
    "cos": (np.cos, (-6, 6)), "tan": (np.tan, (-1.2, 1.2)), "reciprocal": (np.reciprocal, (0.5, 4)),
    "floor": (np.floor, (-5, 5)), "ceil": (np.ceil, (-5, 5)), "trunc": (np.trunc, (-5, 5)),
    "round": (np.round, (-5, 5)), "square": (np.square, (-3, 3)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dt", FLOATS)
def test_unary_math(name, dt):
    fn, (lo, hi) = UNARY[name]
    a = rnd((5, 4), dt, lo=lo, hi=hi)
    tol = {"float16": 1e-2, "float32": 2e-6, "float64": 1e-12}[dt]
    check(getattr(Tensor(a), name)(), fn(a), dtype=dt, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("name", ["exp", "log2", "sqrt", "sin", "cos", "reciprocal"])
def test_unary_math_on_ints_gives_default_float(name):
    a = rnd((5,), "int32", lo=1, hi=9)
    ref = UNARY[name][0](a.astype(np.float64))  # numpy's int reciprocal is integral; ours is float (tinygrad)
    check(getattr(Tensor(a), name)(), ref.astype(np.float32), dtype="float32", rtol=1e-5, atol=1e-6)


def test_rounding_edge_cases():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.0, -3.7, 1e20, np.inf, -np.inf, np.nan], np.float32)
    check(Tensor(a).round(), np.round(a))
    check(Tensor(a).floor(), np.floor(a))
    check(Tensor(a).ceil(), np.ceil(a))
    check(Tensor(a).trunc(), np.trunc(a))
    i = rnd((4,), "int32")
    check(Tensor(i).floor(), i, dtype="int32")


def test_isnan_isinf_isfinite():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    check(Tensor(a).isnan(), np.isnan(a))
    check(Tensor(a).isinf(), np.isinf(a))
    check(Tensor(a).isfinite(), np.isfinite(a))
    check(Tensor([1, 2]).isinf(), np.array([False, False]))


# ---- activations -----------------------------------------------------------------------------------------------------
def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(np.float64))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x.astype(np.float64)))


ACTS = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "leaky_relu": lambda x: np.where(x < 0, 0.01 * x, x),
    "sigmoid": _sigmoid,
    "tanh": lambda x: np.tanh(x.astype(np.float64)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x * _sigmoid(x),
    "softplus": lambda x: np.log1p(np.exp(x.astype(np.float64))),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x.astype(np.float64))),
    "celu": lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x.astype(np.float64))),
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hardsigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
    "hardtanh": lambda x: np.clip(x, -1, 1),
    "erf": _erf,
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x.astype(np.float64)))),
    "quick_gelu": lambda x: x * _sigmoid(1.702 * x),
}


@pytest.mark.parametrize("name", sorted(ACTS))
def test_activations(name):
    a = rnd((4, 6), "float32", lo=-5, hi=5)
    check(getattr(Tensor(a), name)(), ACTS[name](a), dtype="float32", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "gelu", "relu", "erf"])
def test_activations_half(name):
    a = rnd((10,), "float16", lo=-3, hi=3)
    check(getattr(Tensor(a), name)(), ACTS[name](a), dtype="float16", rtol=1e-2, atol=1e-2)


def test_activations_extreme_values_stay_finite():
    a = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], np.float32)
    check(Tensor(a).sigmoid(), _sigmoid(a), atol=1e-7)
    check(Tensor(a).softplus(), np.logaddexp(0, a.astype(np.float64)), rtol=1e-6)
    check(Tensor(a).tanh(), np.tanh(a), atol=1e-6)


# ---- 0-d and empty ---------------------------------------------------------------------------------------------------
def test_zero_d_and_empty():
    check(Tensor(2.0) * Tensor(3.0), np.float32(6.0))
    check(Tensor(np.float32(2)).exp(), np.exp(np.float32(2)))
    e = np.zeros((0, 3), np.float32)
    check(Tensor(e) + 1, e + 1)
    check(Tensor(e).exp(), np.exp(e))
    check(Tensor(e) < Tensor(np.ones(3, np.float32)), e < 1)


# ---- property: broadcasting ------------------------------------------------------------------------------------------
_dim = st.integers(0, 3)


@st.composite
def _broadcastable(draw):
    base = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    def variant():
        k = draw(st.integers(0, len(base)))
        return tuple(1 if draw(st.booleans()) else d for d in base[len(base) - k:])
    return variant(), variant()


@settings(max_examples=examples(40), deadline=None)
@given(_broadcastable(), st.sampled_from(["add", "mul", "sub", "maximum", "lt"]))
def test_hypothesis_broadcasting(shapes, opname):
    sa, sb = shapes
    a, b = rnd(sa), rnd(sb)
    ref = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "maximum": np.maximum, "lt": np.less}[opname]
    got = {"add": operator.add, "mul": operator.mul, "sub": operator.sub, "maximum": Tensor.maximum,
           "lt": operator.lt}[opname](Tensor(a), Tensor(b))
    check(got, ref(a, b))


def test_out_of_range_python_int_wraps_like_tinygrad():
    """In arithmetic a Python int outside the tensor's int dtype is wrapped into it (tinygrad; numpy 2 raises)."""
    check(Tensor(np.array([1], np.int8)) + 1000, np.array([1 + 1000 - 1024], np.int8), dtype="int8")  # 1000 -> -24
    check(Tensor(np.array([1, 2], np.uint8)) * -1, np.array([255, 254], np.uint8), dtype="uint8")
    check(Tensor(np.array([1], np.uint8)) + 255, np.array([0], np.uint8))
    assert (Tensor([0], dtype="int") | 0xFFFFFFFF).item() == -1
    check(Tensor(np.array([5], np.int64)) - 2**64, np.array([5], np.int64), dtype="int64")


def test_int_pow_wraps_like_numpy():
    """Regression: integer ** went through float64 and saturated (uint8 3 ** 7 gave 255, numpy 139)."""
    rng = np.random.default_rng(7)
    for dt in SINTS + UINTS:
        lo = -50 if dt in SINTS else 0
        a = rng.integers(lo, 50, 40).astype(dt)
        b = rng.integers(0, min(200, np.iinfo(dt).max), 40).astype(dt)
        check(Tensor(a) ** Tensor(b), a**b, dtype=dt)
        check(Tensor(a) ** 77, a**77, dtype=dt)
        check(3 ** Tensor(b), np.asarray(3**b), dtype=dt)
    i = np.array([-2, -1, 0, 1, 2, -1], np.int32)
    check(Tensor(i) ** Tensor(np.array([-1, -1, -1, -1, -2, -2], np.int32)), np.array([0, -1, 2**31 - 1, 1, 0, 1]))
    t = np.array([True, False, True])
    check(Tensor(t) ** Tensor(t), t**t, dtype="int8")


def test_float_pow_special_values_match_numpy():
    """Regression: (-0.0) ** -1 was +inf, (-1.5) ** inf was -inf, (-1) ** inf was nan; half floats lost ~3 ulp."""
    vals = np.array([-np.inf, -3, -2.5, -1, -0.5, -0.0, 0.0, 0.5, 1, 2.5, 3, np.inf, np.nan])
    a, b = (v.ravel() for v in np.meshgrid(vals, vals, indexing="ij"))
    for dt in FLOATS:
        x, y = a.astype(dt), b.astype(dt)
        with np.errstate(all="ignore"):
            want = x**y
        got = check(Tensor(x) ** Tensor(y), want, dtype=dt, rtol=1e-3 if dt == "float16" else None)
        ok = np.isnan(want) | (np.signbit(got) == np.signbit(want))
        assert ok.all(), (x[~ok], y[~ok], got[~ok], want[~ok])
    h = np.array([-1.5, 0.0, 2.25], np.float16)
    check(100 ** Tensor(h), np.float16(100) ** h, rtol=1e-3, atol=0)


def test_bool_scalar_floordiv_mod_bool_tensor():
    """Regression: `True // bool_tensor` and `True % bool_tensor` crashed ('int' object has no attribute)."""
    t = np.array([True, False, True])
    with np.errstate(all="ignore"):
        check(True // Tensor(t), True // t, dtype="int8")
        check(True % Tensor(t), True % t, dtype="int8")
        check(Tensor(t) // True, t // True, dtype="int8")


def test_comparisons_with_out_of_range_python_ints_follow_numpy():
    for arr, ys in ((np.array([0, 1, 255], np.uint8), (-1, -300, 256, 1000)),
                    (np.array([-128, 0, 127], np.int8), (-129, 128))):
        t = Tensor(arr)
        for y in ys:
            for name in ("__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__ne__"):
                got = getattr(t, name)(y)
                assert got.dtype is dtypes.bool and got.shape == arr.shape
                np.testing.assert_array_equal(got.numpy(), getattr(arr, name)(y), err_msg=f"{arr.dtype} {name} {y}")
    check(Tensor(np.array([1], np.uint8)) + -1, np.array([0], np.uint8))  # arithmetic wraps (tinygrad)
