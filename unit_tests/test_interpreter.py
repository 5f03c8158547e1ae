"""The reference interpreter against numpy and hand-computed results, with the edge cases of each dtype family."""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest

import uopir  # noqa: F401  (registers the dialects)
from uopir.backends.python import evaluate, run_kernel
from uopir.dialects import core, kernel, tensor
from uopir.dialects.semantics import bf16_round, values_equal
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

f16, bf16, f32, f64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
i8, i16, i32, i64, u8, u16, u32, u64 = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8,
                                        dtypes.uint16, dtypes.uint32, dtypes.uint64)


def buf(i: int, d: DType, shape: tuple[int, ...]) -> UOp:
    return UOp(tensor.BUFFER, d, (), (i, "python", tuple(shape)))


def c(d: DType, v, shape=None) -> UOp:
    return core.const(d, v, shape)


def binop(op, a: UOp, b: UOp, d: DType | None = None) -> UOp:
    return UOp(op, d or a.dtype, (a, b))


def run_bin(op, d: DType, a, b, out: DType | None = None) -> np.ndarray:
    """op applied elementwise to two arrays of dtype d given as buffers 0 and 1."""
    a, b = np.asarray(a, dtype=d.np_name), np.asarray(b, dtype=d.np_name)
    g = binop(op, buf(0, d, a.shape), buf(1, d, b.shape), out)
    return evaluate(g, {0: a, 1: b})


def run_un(op, d: DType, a, out: DType | None = None) -> np.ndarray:
    a = np.asarray(a, dtype=d.np_name)
    return evaluate(UOp(op, out or d, (buf(0, d, a.shape),)), {0: a})


def cast(d_from: DType, d_to: DType, a) -> np.ndarray:
    return run_un(core.CAST, d_from, a, d_to)


# ---- integers --------------------------------------------------------------------------------------------------------
def test_int8_add_mul_sub_neg_wrap():
    a, b = [127, -128, 100, -100], [1, -1, 100, 100]
    assert run_bin(core.ADD, i8, a, b).tolist() == [-128, 127, -56, 0]
    assert run_bin(core.SUB, i8, a, b).tolist() == [126, -127, 0, 56]
    assert run_bin(core.MUL, i8, a, b).tolist() == [127, -128, 16, -16]
    assert run_un(core.NEG, i8, [-128, 5]).tolist() == [-128, -5]
    assert run_bin(core.ADD, u8, [255, 200], [1, 100]).tolist() == [0, 44]
    assert run_bin(core.SUB, u8, [0], [1]).tolist() == [255]
    big = np.iinfo(np.int64).max
    assert run_bin(core.ADD, i64, [big], [1]).tolist() == [-big - 1]
    assert run_bin(core.MUL, u64, [2**63], [2]).tolist() == [0]


def test_result_dtypes_are_exact():
    r = run_bin(core.ADD, i8, [1], [2])
    assert r.dtype == np.int8
    assert run_bin(core.CMPLT, i8, [1], [2], dtypes.bool).dtype == np.bool_
    assert run_bin(core.ADD, bf16, [1.0], [2.0]).dtype == np.float32


def _c_div(a: int, b: int) -> tuple[int, int]:
    if b == 0:
        return 0, 0
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return q, a - q * b


@pytest.mark.parametrize("d", [i8, i16, i32, i64, dtypes.index])
def test_idiv_mod_c_semantics_signed(d):
    vals = list(range(-7, 8))
    a = [x for x in vals for _ in vals]
    b = vals * len(vals)
    q, r = run_bin(core.IDIV, d, a, b), run_bin(core.MOD, d, a, b)
    for x, y, qq, rr in zip(a, b, q.tolist(), r.tolist(), strict=True):
        assert (qq, rr) == _c_div(x, y), (x, y)
    lo = -(1 << (d.bits - 1))
    assert run_bin(core.IDIV, d, [lo, lo, lo], [-1, 1, 0]).tolist() == [lo, lo, 0]
    assert run_bin(core.MOD, d, [lo, lo, lo], [-1, 1, 0]).tolist() == [0, 0, 0]


@pytest.mark.parametrize("d", [u8, u32, u64])
def test_idiv_mod_unsigned(d):
    top = (1 << d.bits) - 1
    assert run_bin(core.IDIV, d, [7, top, 5, 0], [2, 2, 0, 0]).tolist() == [3, top // 2, 0, 0]
    assert run_bin(core.MOD, d, [7, top, 5, 0], [2, 2, 0, 0]).tolist() == [1, 1, 0, 0]


@pytest.mark.parametrize("d", [dtypes.float16, dtypes.float32, dtypes.float64])
def test_mod_on_floats_is_exact_fmod(d):
    r = run_bin(core.MOD, d, [7.5, -7.5, 7.5, 1.0, -0.0, math.inf, 3.0], [2.0, 2.0, -2.0, 0.0, 1.0, 1.0, math.inf])
    got = [float(x) for x in r.tolist()]
    assert got[:3] == [1.5, -1.5, 1.5]  # the sign of the dividend (C fmod)
    assert math.isnan(got[3]) and math.isnan(got[5])  # x mod 0.0 and inf mod x are NaN
    assert got[4] == 0.0 and math.copysign(1.0, got[4]) == -1.0 and got[6] == 3.0
    x = run_bin(core.MOD, d, [0.7], [0.1])  # exact, unlike x - trunc(x / y) * y
    t = np.dtype(d.np_name).type
    assert x.tolist() == [float(np.fmod(t(0.7), t(0.1)))]


def test_shifts():
    assert run_bin(core.SHL, i8, [1, 64, 1, 1, 3], [3, 1, 8, 9, -1]).tolist() == [8, -128, 1, 2, -128]
    assert run_bin(core.SHR, i8, [-128, -1, 64, -128], [1, 7, 8, 9]).tolist() == [-64, -1, 64, -64]
    assert run_bin(core.SHR, u8, [128, 255], [1, 7]).tolist() == [64, 1]
    assert run_bin(core.SHL, u32, [1, 1], [31, 32]).tolist() == [1 << 31, 1]
    assert run_bin(core.SHR, i64, [-(1 << 63), 1 << 62], [63, 64]).tolist() == [-1, 1 << 62]
    assert run_bin(core.SHR, u64, [1 << 63], [63]).tolist() == [1]


def test_bitwise_and_bool_ops():
    assert run_bin(core.AND, i8, [-1, 12], [5, 10]).tolist() == [5, 8]
    assert run_bin(core.OR, u8, [240], [15]).tolist() == [255]
    assert run_bin(core.XOR, i16, [-1], [1]).tolist() == [-2]
    t, f = True, False
    assert run_bin(core.AND, dtypes.bool, [t, t, f], [t, f, f]).tolist() == [t, f, f]
    assert run_bin(core.ADD, dtypes.bool, [t, f, f], [t, t, f]).tolist() == [t, t, f]
    assert run_bin(core.MUL, dtypes.bool, [t, t, f], [t, f, f]).tolist() == [t, f, f]
    assert run_bin(core.MAX, dtypes.bool, [t, f], [f, f]).tolist() == [t, f]


# ---- casts -----------------------------------------------------------------------------------------------------------
def test_cast_float_to_int_truncates_and_saturates():
    x = [3.9, -3.9, 127.5, 128.0, -129.0, np.inf, -np.inf, np.nan, -0.5, 1e30]
    assert cast(f32, i8, x).tolist() == [3, -3, 127, 127, -128, 127, -128, 0, 0, 127]
    assert cast(f32, u8, x).tolist() == [3, 0, 127, 128, 0, 255, 0, 0, 0, 255]
    assert cast(f64, i64, [2.0**63, -2.0**63, -2.0**64, np.nan]).tolist() == [2**63 - 1, -2**63, -2**63, 0]
    assert cast(f64, u64, [2.0**64, 2.0**63, -1.0]).tolist() == [2**64 - 1, 2**63, 0]
    assert cast(f16, i32, [65504.0, -2.5]).tolist() == [65504, -2]
    assert cast(bf16, i16, [bf16_round(np.float32(1e10)), -3.0]).tolist() == [32767, -3]


def test_cast_int_bool():
    assert cast(i32, dtypes.bool, [0, 5, -1]).tolist() == [False, True, True]
    assert cast(f32, dtypes.bool, [0.0, -0.0, np.nan, 0.5]).tolist() == [False, False, True, True]
    assert cast(dtypes.bool, f32, [True, False]).tolist() == [1.0, 0.0]
    assert cast(dtypes.bool, i8, [True, False]).tolist() == [1, 0]
    assert cast(i32, i8, [300, -129]).tolist() == [44, 127]
    assert cast(i8, u8, [-1]).tolist() == [255]
    assert cast(u8, i8, [200]).tolist() == [-56]


def _bf16_ref(x: Fraction | float | int) -> float:
    """Nearest-even bf16 of an exact value, by brute force over the two neighbours (finite, in range)."""
    f = Fraction(x)
    if f == 0:
        return 0.0
    sign = -1 if f < 0 else 1
    m = abs(f)
    e = math.floor(math.log2(m)) if m else 0
    while Fraction(2) ** e > m:
        e -= 1
    while Fraction(2) ** (e + 1) <= m:
        e += 1
    e = max(e, -126)
    ulp = Fraction(2) ** (e - 7)
    lo = (m // ulp) * ulp
    hi = lo + ulp
    if m - lo < hi - m or (m - lo == hi - m and (lo / ulp) % 2 == 0):
        r = lo
    else:
        r = hi
    return sign * float(r)


def test_bf16_round_ties_even_and_specials():
    one = 1.0
    ties = np.array([one + 2**-8, one + 3 * 2**-8, one + 2**-8 + 2**-20, -(one + 2**-8)], np.float32)
    assert bf16_round(ties).tolist() == [1.0, one + 2**-6, one + 2**-7, -1.0]
    special = bf16_round(np.array([np.inf, -np.inf, np.nan, 3.4e38, -0.0], np.float32))
    assert special[0] == np.inf and special[1] == -np.inf and np.isnan(special[2]) and special[3] == np.inf
    assert np.signbit(special[4])


def test_bf16_rounding_random_against_exact_reference():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(500) * 10.0 ** rng.integers(-30, 30, 500)).astype(np.float64)
    got64 = cast(f64, bf16, x)
    got32 = cast(f32, bf16, x.astype(np.float32))
    for v, g in zip(x, got64, strict=True):
        assert g == _bf16_ref(float(v))
    for v, g in zip(x.astype(np.float32), got32, strict=True):
        assert g == _bf16_ref(float(v))


def test_no_double_rounding_to_bf16():
    # f64 value just above a bf16 tie, whose f32 rounding lands exactly on the tie
    x = 1.0 + 2**-8 + 2**-40
    assert cast(f64, bf16, [x]).tolist() == [1.0 + 2**-7]
    big = (1 << 62) + (1 << 54) + 1  # int64 just above a bf16 tie; int->f64 alone would round onto the tie
    assert cast(i64, bf16, [big]).tolist() == [_bf16_ref(big)]
    assert cast(u64, bf16, [2**64 - 1]).tolist() == [2.0**64]


def test_int_to_float_correctly_rounded():
    big = (1 << 62) + (1 << 38) + 1
    assert cast(i64, f32, [big]).tolist() == [float(np.float32(2.0**62 + 2.0**39))]
    assert cast(i32, f16, [70000, 2049]).tolist() == [np.inf, 2048.0]


def test_float_to_float_casts():
    assert cast(f64, f32, [1.0 + 2**-30]).tolist() == [1.0]
    assert cast(f32, f16, [65520.0, 1e-8]).tolist() == [np.inf, 0.0]
    assert cast(bf16, f32, [bf16_round(np.float32(1.5))]).tolist() == [1.5]


def test_bitcast():
    assert run_un(core.BITCAST, f32, [1.0], i32).tolist() == [0x3F800000]
    assert run_un(core.BITCAST, i32, [0x3F800000], f32).tolist() == [1.0]
    assert run_un(core.BITCAST, bf16, [1.0], i16).tolist() == [0x3F80]
    assert run_un(core.BITCAST, u16, [0x4000], bf16).tolist() == [2.0]
    assert run_un(core.BITCAST, f16, [1.0], u16).tolist() == [0x3C00]
    assert run_un(core.BITCAST, i8, [-1], u8).tolist() == [255]


# ---- floats ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [f16, f32, f64])
@pytest.mark.parametrize("op,fn", [(core.EXP2, np.exp2), (core.LOG2, np.log2), (core.SIN, np.sin),
                                   (core.SQRT, np.sqrt), (core.RECIP, np.reciprocal), (core.TRUNC, np.trunc)])
def test_unary_float_in_dtype(d, op, fn):
    x = np.array([0.0, -0.0, 0.5, 1.0, 2.5, -2.5, 3.0, 100.0, np.inf, -np.inf, np.nan], dtype=d.np_name)
    with np.errstate(all="ignore"):
        want = fn(x)
    got = run_un(op, d, x)
    assert got.dtype == want.dtype
    assert values_equal(got, want)


def test_f16_precision():
    assert run_bin(core.ADD, f16, [2048.0, 65504.0], [1.0, 32.0]).tolist() == [2048.0, np.inf]
    assert run_bin(core.MUL, f16, [300.0], [300.0]).tolist() == [np.inf]


def test_bf16_ops_round_every_result():
    a = bf16_round(np.float32([1.0, 256.0, 3.0]))
    b = bf16_round(np.float32([2**-8, 1.0, 3.0]))
    assert run_bin(core.ADD, bf16, a, b).tolist() == [1.0, 256.0, 6.0]
    r = run_bin(core.FDIV, bf16, [1.0], [3.0])
    assert r.tolist() == [_bf16_ref(Fraction(1, 3))]


def test_max_nan_and_signed_zero():
    r = run_bin(core.MAX, f32, [np.nan, 1.0, -0.0, 0.0, -np.inf], [1.0, np.nan, 0.0, -0.0, -np.inf])
    assert np.isnan(r[0]) and np.isnan(r[1])
    assert not np.signbit(r[2]) and not np.signbit(r[3]) and r[4] == -np.inf
    assert run_bin(core.MAX, i8, [-128, 3], [-1, 2]).tolist() == [-1, 3]


def test_comparisons_and_where():
    nan = np.nan
    assert run_bin(core.CMPLT, f32, [1.0, nan, -0.0], [2.0, 1.0, 0.0], dtypes.bool).tolist() == [True, False, False]
    assert run_bin(core.CMPNE, f32, [nan, 0.0], [nan, -0.0], dtypes.bool).tolist() == [True, False]
    assert run_bin(core.CMPEQ, i8, [1, 2], [1, 3], dtypes.bool).tolist() == [True, False]
    assert run_bin(core.CMPLT, u8, [255], [0], dtypes.bool).tolist() == [False]
    cond = np.array([True, False, True])
    g = UOp(core.WHERE, i32, (buf(0, dtypes.bool, (3,)), buf(1, i32, (3,)), c(i32, -7)))
    assert evaluate(g, {0: cond, 1: np.array([1, 2, 3], np.int32)}).tolist() == [1, -7, 3]


def test_mulacc_is_not_fused():
    a = np.float32(1 + 2**-12)
    # a*a = 1 + 2**-11 + 2**-24 rounds to 1 + 2**-11 in f32, then - (1 + 2**-11) = 0; fused would give 2**-24
    g = UOp(core.MULACC, f32, (c(f32, float(a)), c(f32, float(a)), c(f32, -(1 + 2**-11))))
    assert evaluate(g, {}).item() == 0.0
    assert evaluate(UOp(core.MULACC, i8, (c(i8, 100), c(i8, 2), c(i8, 100))), {}).item() == 44


def test_fdiv_by_zero_is_ieee():
    r = run_bin(core.FDIV, f32, [1.0, -1.0, 0.0], [0.0, 0.0, 0.0])
    assert r[0] == np.inf and r[1] == -np.inf and np.isnan(r[2])


# ---- consts, shapes, broadcasting ------------------------------------------------------------------------------------
def test_consts():
    assert evaluate(c(f32, 1.5), {}).shape == ()
    r = evaluate(c(i8, 3, (2, 3)), {})
    assert r.shape == (2, 3) and r.dtype == np.int8 and (r == 3).all()
    assert evaluate(c(bf16, 0.1), {}).item() == _bf16_ref(0.1)
    assert evaluate(c(f16, 1e6), {}).item() == np.inf
    assert evaluate(c(dtypes.bool, True, (2,)), {}).tolist() == [True, True]


def test_shapeless_operand_broadcasts():
    g = buf(0, f32, (2, 2)) + c(f32, 1.0)
    assert evaluate(g, {0: np.ones((2, 2), np.float32)}).tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_zero_d_and_empty_tensors():
    x0 = np.array(5, np.int32)
    assert evaluate(buf(0, i32, ()) * c(i32, 2), {0: x0}).shape == ()
    e = np.zeros((0, 3), np.float32)
    g = buf(0, f32, (0, 3)) + c(f32, 1.0)
    assert evaluate(g, {0: e}).shape == (0, 3)
    red = UOp(tensor.REDUCE, f32, (buf(0, f32, (0, 3)),), ("add", (0,)))
    assert evaluate(red, {0: e}).tolist() == [[0.0, 0.0, 0.0]]
    for op, want in [("mul", 1.0), ("max", -np.inf), ("min", np.inf)]:
        red = UOp(tensor.REDUCE, f32, (buf(0, f32, (0, 3)),), (op, (0,)))
        assert evaluate(red, {0: e}).tolist() == [[want] * 3]
    red = UOp(tensor.REDUCE, f32, (buf(0, f32, (0, 3)),), ("add", (1,)))
    assert evaluate(red, {0: e}).shape == (0, 1)
    red = UOp(tensor.REDUCE, i8, (buf(0, i8, (0,)),), ("max", (0,)))
    assert evaluate(red, {0: np.zeros((0,), np.int8)}).tolist() == [-128]


# ---- reductions ------------------------------------------------------------------------------------------------------
def reduce(x: np.ndarray, d: DType, op: str, axes: tuple[int, ...]) -> np.ndarray:
    return evaluate(UOp(tensor.REDUCE, d, (buf(0, d, x.shape),), (op, axes)), {0: x})


def test_reduce_int_wraps_in_dtype():
    x = np.array([100, 100, 100], np.int8)
    r = reduce(x, i8, "add", (0,))
    assert r.dtype == np.int8 and r.tolist() == [44]
    assert reduce(x, i8, "mul", (0,)).tolist() == [np.int8(np.uint8(1000000 % 256).view(np.int8))]
    assert reduce(np.array([255, 1], np.uint8), u8, "add", (0,)).tolist() == [0]


def test_reduce_axes_keepdims_and_order():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    for axes in [(0,), (1,), (2,), (0, 2), (0, 1, 2), ()]:
        r = reduce(x, i32, "add", axes)
        assert r.shape == tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        assert (r == x.sum(axis=axes, keepdims=True, dtype=np.int32)).all()
        assert (reduce(x, i32, "max", axes) == x.max(axis=axes, keepdims=True, initial=-2**31)).all()
        assert (reduce(x, i32, "min", axes) == x.min(axis=axes, keepdims=True, initial=2**31 - 1)).all()


def test_reduce_float_sequential_in_dtype():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 257)).astype(np.float32) * 1000
    r = reduce(x, f32, "add", (1,))
    for row, got in zip(x, r[:, 0], strict=True):
        acc = np.float32(0)
        for v in row:
            acc = np.float32(acc + v)
        assert got == acc
    h = np.array([1.0] + [2**-11] * 8, np.float16)
    assert reduce(h, f16, "add", (0,)).tolist() == [1.0]  # f16 accumulation: each 1 + 2**-11 ties to 1
    b = bf16_round(np.array([1.0] + [2**-8] * 4, np.float32))
    assert reduce(b, bf16, "add", (0,)).tolist() == [1.0]
    assert reduce(np.array([-0.0, -0.0], np.float32), f32, "add", (0,)).tolist() == [0.0]
    assert not np.signbit(reduce(np.array([-0.0], np.float32), f32, "add", (0,))[0])


def test_reduce_nan_and_zero_signs():
    x = np.array([[1.0, np.nan, 3.0], [0.0, -0.0, -0.0]], np.float32)
    mx, mn = reduce(x, f32, "max", (1,)), reduce(x, f32, "min", (1,))
    assert np.isnan(mx[0, 0]) and np.isnan(mn[0, 0])
    assert mx[1, 0] == 0 and not np.signbit(mx[1, 0])
    assert mn[1, 0] == 0 and np.signbit(mn[1, 0])
    assert np.isnan(reduce(x, f32, "add", (1,))[0, 0])


def test_reduce_bool():
    x = np.array([[True, False], [False, False]])
    assert reduce(x, dtypes.bool, "add", (1,)).tolist() == [[True], [False]]
    assert reduce(x, dtypes.bool, "mul", (1,)).tolist() == [[False], [False]]
    assert reduce(x, dtypes.bool, "max", (0,)).tolist() == [[True, False]]


# ---- movement --------------------------------------------------------------------------------------------------------
def test_movement_ops_match_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = buf(0, f32, (2, 3, 4))

    def ev(op, arg, d=f32):
        return evaluate(UOp(op, d, (b,), arg), {0: x})

    assert (ev(tensor.RESHAPE, (6, 4)) == x.reshape(6, 4)).all()
    assert (ev(tensor.PERMUTE, (2, 0, 1)) == x.transpose(2, 0, 1)).all()
    assert (ev(tensor.PAD, ((1, 0), (0, 2), (1, 1))) == np.pad(x, ((1, 0), (0, 2), (1, 1)))).all()
    assert (ev(tensor.SHRINK, ((1, 2), (0, 3), (1, 3))) == x[1:2, 0:3, 1:3]).all()
    assert (ev(tensor.FLIP, (0, 2)) == x[::-1, :, ::-1]).all()
    e = UOp(tensor.EXPAND, f32, (UOp(tensor.RESHAPE, f32, (b,), (2, 1, 12)),), (2, 5, 12))
    assert (evaluate(e, {0: x}) == np.broadcast_to(x.reshape(2, 1, 12), (2, 5, 12))).all()


def test_pad_bool_and_int():
    x = np.array([True, True])
    g = UOp(tensor.PAD, dtypes.bool, (buf(0, dtypes.bool, (2,)),), ((1, 1),))
    assert evaluate(g, {0: x}).tolist() == [False, True, True, False]


def test_identity_ops_and_sink():
    x = np.arange(3, dtype=np.int32)
    b = buf(0, i32, (3,))
    outs = evaluate(UOp.sink(UOp(tensor.CONTIGUOUS, i32, (b,)), UOp(tensor.DETACH, i32, (b,)),
                             UOp(tensor.COPY, i32, (b,), "c")), {0: x})
    assert isinstance(outs, list) and len(outs) == 3 and all((o == x).all() for o in outs)


def test_bf16_buffers_are_read_as_bf16():
    x = np.array([1.0 + 2**-8 + 2**-20], np.float32)  # not a bf16 value: rounded when read
    assert evaluate(buf(0, bf16, (1,)) * c(bf16, 1.0), {0: x}).tolist() == [1.0 + 2**-7]


def test_results_do_not_alias_buffers():
    x = np.arange(4, dtype=np.float32)
    r = evaluate(UOp(tensor.RESHAPE, f32, (buf(0, f32, (4,)),), (2, 2)), {0: x})
    r[0, 0] = 100.0
    assert x[0] == 0.0


# ---- assign ----------------------------------------------------------------------------------------------------------
def test_assign_direct_and_reads_see_entry_values():
    x = np.arange(4, dtype=np.int32)
    b = buf(0, i32, (4,))
    a = UOp(tensor.ASSIGN, i32, (b, b + c(i32, 10)))
    old, new = evaluate(UOp.sink(b * c(i32, 1), a), {0: x})
    assert old.tolist() == [0, 1, 2, 3] and new.tolist() == [10, 11, 12, 13]
    assert x.tolist() == [10, 11, 12, 13]


def test_assign_through_views():
    x = np.zeros((2, 3), np.float32)
    b = buf(0, f32, (2, 3))
    view = UOp(tensor.SHRINK, f32, (UOp(tensor.PERMUTE, f32, (b,), (1, 0)),), ((1, 3), (0, 1)))
    evaluate(UOp(tensor.ASSIGN, f32, (view, c(f32, 7.0, (2, 1)))), {0: x})
    assert x.tolist() == [[0, 7, 7], [0, 0, 0]]
    fl = UOp(tensor.FLIP, f32, (UOp(tensor.RESHAPE, f32, (b,), (6,)),), (0,))
    val = buf(1, f32, (6,))
    evaluate(UOp(tensor.ASSIGN, f32, (fl, val)), {0: x, 1: np.arange(6, dtype=np.float32)})
    assert x.reshape(-1).tolist() == [5, 4, 3, 2, 1, 0]


def test_assign_scalar_value_broadcasts():
    x = np.zeros(3, np.int8)
    evaluate(UOp(tensor.ASSIGN, i8, (buf(0, i8, (3,)), c(i8, 4))), {0: x})
    assert x.tolist() == [4, 4, 4]


def test_assign_through_expand_is_an_error():
    x = np.zeros((1, 3), np.float32)
    e = UOp(tensor.EXPAND, f32, (buf(0, f32, (1, 3)),), (2, 3))
    with pytest.raises(IRError, match="tensor.assign"):
        evaluate(UOp(tensor.ASSIGN, f32, (e, c(f32, 1.0, (2, 3)))), {0: x})


# ---- symbols, vectors, errors ----------------------------------------------------------------------------------------
def test_var_and_bind():
    v = UOp(tensor.VAR, dtypes.index, (), ("n", 1, 10))
    bound = UOp(tensor.BIND, dtypes.index, (v, c(dtypes.index, 4)))
    assert evaluate(bound * c(dtypes.index, 3), {}).item() == 12
    assert evaluate(v, {}, var_vals={"n": 7}).item() == 7
    with pytest.raises(IRError, match="not bound"):
        evaluate(v, {})


def test_vectors():
    a = UOp(core.VECTORIZE, f32.vec(2), (c(f32, 1.0), c(f32, 2.0)))
    s = a + c(f32.vec(2), (10.0, 20.0))
    assert evaluate(s, {}).tolist() == [11.0, 22.0]
    assert evaluate(UOp(core.GEP, f32, (s,), (1,)), {}).item() == 22.0
    assert evaluate(UOp(core.GEP, f32.vec(2), (s,), (1, 0)), {}).tolist() == [22.0, 11.0]
    h = UOp(core.BITCAST, f32, (UOp(core.VECTORIZE, f16.vec(2), (c(f16, 0.0), c(f16, 1.875))),))
    assert evaluate(h, {}).item() == struct.unpack("<f", struct.pack("<2e", 0.0, 1.875))[0]


def test_buffer_errors_are_clear():
    b = buf(3, f32, (2,))
    with pytest.raises(IRError, match="no buffer with id 3"):
        evaluate(b, {})
    with pytest.raises(IRError, match="buffer 3 is float64"):
        evaluate(b, {3: np.zeros(2, np.float64)})
    with pytest.raises(IRError, match=r"buffer 3 is float32\[3\]"):
        evaluate(b, {3: np.zeros(3, np.float32)})


def _idx(v: int) -> UOp:
    return c(dtypes.index, v)


def _matvec_kernel() -> UOp:
    """out[i] = sum_j a[i*4 + j] * b[j] for i < 3, j < 4."""
    pf = f32.ptr()
    out, a, b = (UOp(kernel.PARAM, pf, (), i) for i in range(3))
    ri = UOp(kernel.RANGE, dtypes.index, (_idx(3),), (0, "global"))
    rj = UOp(kernel.RANGE, dtypes.index, (_idx(4),), (1, "reduce"))
    la = UOp(kernel.LOAD, f32, (UOp(kernel.INDEX, pf, (a, ri * _idx(4) + rj)),))
    lb = UOp(kernel.LOAD, f32, (UOp(kernel.INDEX, pf, (b, rj)),))
    red = UOp(kernel.REDUCE, f32, (la * lb, rj), "add")
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, pf, (out, ri)), red))
    return UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st, ri)),), "matvec")


def test_kernel_call_runs_the_body():
    a = np.arange(12, dtype=np.float32)
    b = np.array([1.0, -1.0, 2.0, 0.5], np.float32)
    out = np.zeros(3, np.float32)
    call = UOp(tensor.CALL, dtypes.void, (buf(0, f32, (3,)), buf(1, f32, (12,)), buf(2, f32, (4,))),
               (_matvec_kernel(), "matvec"))
    evaluate(UOp.sink(call), {0: out, 1: a, 2: b})
    want = [sum(np.float32(a[i * 4 + j]) * b[j] for j in range(4)) for i in range(3)]
    assert out.tolist() == [float(np.float32(w)) for w in want]


def test_kernel_gated_load_and_store():
    pi = i32.ptr()
    out, a = UOp(kernel.PARAM, pi, (), 0), UOp(kernel.PARAM, pi, (), 1)
    r = UOp(kernel.RANGE, dtypes.index, (_idx(4),), (0, "loop"))
    inside = r.lt(_idx(2))
    ld = UOp(kernel.LOAD, i32, (UOp(kernel.INDEX, pi, (a, r + _idx(10), inside)), c(i32, -1), inside))
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, pi, (out, r)), ld + c(i32, 1)))
    kdef = UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st, r)),), "k")
    o = np.zeros(4, np.int32)
    run_kernel(kdef, [o, np.arange(12, dtype=np.int32)])
    assert o.tolist() == [11, 12, 0, 0]
    bad = UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (UOp(kernel.STORE, dtypes.void, (
        UOp(kernel.INDEX, pi, (out, r + _idx(1))), c(i32, 0))), r)),), "bad")
    with pytest.raises(IRError, match="out-of-bounds store"):
        run_kernel(bad, [o, o])


def test_kernel_ops_outside_a_call_are_errors():
    p = UOp(kernel.PARAM, f32.ptr(), (), 0)
    with pytest.raises(IRError, match="outside a tensor.call"):
        evaluate(UOp(kernel.LOAD, f32, (UOp(kernel.INDEX, f32.ptr(), (p, c(dtypes.index, 0))),)), {})


def test_values_equal_is_bit_exact():
    assert values_equal(np.float32([np.nan, 1.0]), np.float32([-np.nan, 1.0]))
    assert not values_equal(np.float32([0.0]), np.float32([-0.0]))
    assert not values_equal(np.int8([1]), np.int16([1]))
    assert values_equal([np.int8([1]), None], [np.int8([1]), None])


def test_pad_of_a_0d_tensor_is_the_identity():
    """Regression: `tensor.pad {pads = []}` of a 0-d tensor (valid IR) crashed in np.pad (empty pad list)."""
    from uopir.ir.verify import verify
    x = buf(0, dtypes.float32, ())
    p = UOp(tensor.PAD, dtypes.float32, (x,), ())
    verify(p)
    out = evaluate(p, {0: np.array(-0.0, np.float32)})
    assert values_equal(out, np.array(-0.0, np.float32))


# ---- the handler tables ----------------------------------------------------------------------------------------------
def test_handler_tables_cover_their_dialects_by_opdef():
    from uopir.backends.python import core as pcore
    from uopir.backends.python import interpreter
    from uopir.backends.python import kernel as pkernel
    from uopir.backends.python import tensor as ptensor
    from uopir.ir.ops import DIALECTS, OpDef

    assert set(pcore.HANDLERS) == set(DIALECTS["core"])
    assert set(ptensor.HANDLERS) == set(DIALECTS["tensor"])
    assert set(pkernel.HANDLERS) == set(DIALECTS["kernel"])
    assert set(interpreter.TABLE) == set(DIALECTS["core"]) | set(DIALECTS["tensor"])
    assert set(pkernel.TABLE) == set(DIALECTS["core"]) | set(DIALECTS["kernel"])
    assert all(type(k) is OpDef or isinstance(k, OpDef) for k in interpreter.TABLE)
    assert pkernel.TABLE[core.ADD] is pcore.HANDLERS[core.ADD]  # one ALU handler at both levels


def test_semantics_alu_names_match_the_dialect_group():
    from uopir.dialects.semantics import ALU_NAMES

    assert ALU_NAMES == {op.name for op in core.ALU_OPS}


def test_an_op_without_a_handler_is_a_located_error():
    from uopir.ir.parser import parse_ir

    text = ("%0 = core.const 4 : index\n"
            "%1 = device.special %0 {kind = local_id, dim = 0} : index\n"
            "core.sink %1\n")
    with pytest.raises(IRError, match=r"prog\.uop:2:\d+: error: device\.special outside a device\.program: the "
                                      r"reference interpreter runs device-level ops only in a linearized kernel"):
        evaluate(parse_ir(text, "prog.uop"), {})


def test_an_unknown_dialect_op_is_named():
    from uopir.ir.ops import def_op, get_op

    try:
        op = get_op("testinterp.opaque")
    except KeyError:
        op = def_op("testinterp.opaque", 0, summary="an op no interpreter table knows")
    with pytest.raises(IRError, match="the reference interpreter has no handler for testinterp.opaque"):
        evaluate(UOp(op, f32, ()), {})
    kdef = UOp(kernel.DEF, dtypes.void, (UOp(kernel.STORE, dtypes.void, (
        UOp(kernel.INDEX, f32.ptr(), (UOp(kernel.PARAM, f32.ptr(), (), 0), _idx(0))), UOp(op, f32, ()))),), "k")
    with pytest.raises(IRError, match="no handler for testinterp.opaque inside a kernel"):
        run_kernel(kdef, [np.zeros(1, np.float32)])


def test_vectors_inside_a_kernel_run_and_a_lane_changing_bitcast_is_a_named_error():
    p = UOp(kernel.PARAM, f32.ptr(), (), 0)
    v = UOp(core.VECTORIZE, f32.vec(2), (c(f32, 1.0), c(f32, 2.0)))
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, f32.ptr(), (p, _idx(1))), UOp(core.GEP, f32, (v,), (1,))))
    out = np.zeros(2, np.float32)
    run_kernel(UOp(kernel.DEF, dtypes.void, (st,), "k"), [out])
    assert out.tolist() == [0.0, 2.0]
    vload = UOp(kernel.LOAD, f32.vec(2), (UOp(kernel.INDEX, f32.ptr(), (p, _idx(0))),))
    bc = UOp(core.BITCAST, dtypes.uint64, (vload,))
    st2 = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, dtypes.uint64.ptr(), (
        UOp(kernel.PARAM, dtypes.uint64.ptr(), (), 1), _idx(0))), bc))
    with pytest.raises(IRError, match="does not run a lane-changing core.bitcast inside a kernel yet"):
        run_kernel(UOp(kernel.DEF, dtypes.void, (st2,), "k"), [np.zeros(2, np.float32), np.zeros(1, np.uint64)])


def test_run_kernel_needs_a_kernel_def():
    with pytest.raises(IRError, match="run_kernel needs a kernel.def, got core.const"):
        run_kernel(c(f32, 1.0), [])


def test_kernel_of_many_reductions_shares_axes() -> None:
    """A kernel with more ranges than numpy has axes (14 fused matmul sums: 42 ranges) runs: ranges of separate
    reductions are never open together, so they share numpy axes."""
    from uopir import Tensor
    from uopir.backends.python.kernel import MAX_AXES, _range_axes

    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(14)]
    ws = [rng.standard_normal((4, 2)).astype(np.float32) for _ in range(14)]
    t = Tensor.cat(*[(Tensor(x, device="python") @ Tensor(w, device="python")).sum().reshape(1)
                     for x, w in zip(xs, ws, strict=True)])
    kdef = t.schedule()[-1].ast
    order = kdef.toposort()
    ranges = [u for u in order if u.op is kernel.RANGE]
    assert len(ranges) > MAX_AXES
    assert max(_range_axes(kdef, order).values()) < 4
    np.testing.assert_allclose(t.numpy(), [(x @ w).sum() for x, w in zip(xs, ws, strict=True)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["core.exp2", "core.log2", "core.sin"])
def test_transcendentals_do_not_depend_on_the_array_layout(name: str) -> None:
    """numpy's unit-stride (SIMD) and strided loops differ by an ulp for these; a reversed view (even a 1-element
    one, which numpy flags contiguous) must give the contiguous result."""
    from uopir.dialects.semantics import alu

    x = np.random.default_rng(5).uniform(0.1, 3, 257).astype(np.float32)
    x[0] = 0.5671601  # exp2 of it: 1.4816043 by the unit-stride loop, 1.4816042 by the strided one
    want = alu(name, dtypes.float32, [x.copy()])
    np.testing.assert_array_equal(alu(name, dtypes.float32, [x[::-1]])[::-1], want)
    np.testing.assert_array_equal(alu(name, dtypes.float32, [x[:1][::-1]]), want[:1])
    np.testing.assert_array_equal(alu(name, dtypes.float32, [x[::2]]), want[::2])


def test_device_program_of_more_loops_than_numpy_axes_runs():
    """A concatenation of 40 pieces that kernel-peel cuts into one loop per piece: the device program has more
    vectorized loops than numpy has axes, and the reference interpreter runs them one after another on shared axes
    (it refused with numpy's 32-dimension error before)."""
    from uopir import Tensor
    from uopir.backends.python.device import run_program
    from uopir.dialects import device
    from uopir.ir.regions import regions_of
    from uopir.passes.manager import PassManager

    pieces = [np.arange(i * 100, i * 100 + 100, dtype=np.int32) for i in range(40)]
    out = Tensor.cat(*[Tensor(p) for p in pieces])
    lowered = PassManager.parse("default{target=c}").run(UOp.sink(out.uop))
    (call,) = [u for u in lowered.toposort() if u.op is tensor.CALL]
    prog = next(r for r in regions_of(call) if r.op is device.PROGRAM)
    assert sum(u.op is device.LOOP for u in prog.src) > 32
    ids = sorted(s.arg[0] for s in call.src[1:])  # the pieces' buffers, numbered in the order they were made
    bufs = [np.zeros(4000, np.int32)] + [pieces[ids.index(s.arg[0])].copy() for s in call.src[1:]]
    run_program(prog, bufs)
    np.testing.assert_array_equal(bufs[0], np.concatenate(pieces))
