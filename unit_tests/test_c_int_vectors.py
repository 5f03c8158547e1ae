"""The C backend's vector code for integers, bool masks, selects, casts and bitcasts (uopir.backends.codegen.cvector)
computes exactly the semantics: shifts of negative values and by out-of-range amounts, wraparound, NaN payloads
through bitcasts, masks of one width selecting lanes of another, 64-lane ops written in 64-byte pieces. Each check
also asserts the kernel was rendered as vector code (else it would test the lane-by-lane rows again)."""
from __future__ import annotations

import numpy as np
import pytest
from device_programs import SEMANTICS_CASES, check_casts, elementwise, on_device, run, shared_backend

from uopir.backends.c.renderer import CRenderer
from uopir.dialects import core as C
from uopir.dialects.semantics import alu, bitcast_array, cast_array, np_dtype, values_equal
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

C_DEVICE = [on_device("c")]
W = 16
INTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint32, dtypes.uint64)


def _ints(d: DType, n: int, seed: int) -> np.ndarray:
    """n values of d: its extremes, -1, 0, 1 and random bits."""
    info = np.iinfo(np_dtype(d))
    edge = [info.min, info.min + 1, -1 if info.min < 0 else 2, 0, 1, info.max - 1, info.max]
    rng = np.random.default_rng(seed)
    rand = rng.integers(info.min, info.max, n - len(edge), dtype=np_dtype(d), endpoint=True)
    return np.concatenate([np.array(edge, np_dtype(d)), rand])


def _run(prog: UOp, outs: list[DType], ins: list[np.ndarray]) -> tuple[list[np.ndarray], str]:
    backend = shared_backend("c")
    n = ins[0].size
    results = [np.zeros(n, np_dtype(d)) for d in outs]
    run(backend, prog, [*results, *ins])
    return results, CRenderer().render(prog)


@pytest.mark.parametrize("device", C_DEVICE)
@pytest.mark.parametrize("d", INTS, ids=lambda d: d.name)
def test_int_vector_shifts_and_wraparound(device: str, d: DType) -> None:
    """shl/shr by a vector amount (negative and past the width: taken modulo it), by constant amounts (one past the
    width, 3), add/sub/mul/neg/mulacc wrapping at the extremes, max and compares: equal to the semantics."""
    bits = d.itemsize * 8
    n = 8 * W
    a = _ints(d, n, 1)
    amounts = np.array([-1, 0, 1, 3, bits - 1, bits, bits + 1, 2 * bits + 5, -bits - 2], np.int64)
    b = cast_array(np.resize(amounts, n), dtypes.int64, d)
    vd = d.vec(W)

    def const(v: int) -> UOp:
        return UOp.const(vd, v)
    ops = [
        (d, lambda x, y: UOp(C.SHL, vd, (x, y)), lambda: alu("core.shl", d, [a, b])),
        (d, lambda x, y: UOp(C.SHR, vd, (x, y)), lambda: alu("core.shr", d, [a, b])),
        (d, lambda x, y: UOp(C.SHR, vd, (x, const(bits + 3))),
         lambda: alu("core.shr", d, [a, np.full(n, bits + 3, np_dtype(d))])),
        (d, lambda x, y: UOp(C.SHL, vd, (x, const(3))), lambda: alu("core.shl", d, [a, np.full(n, 3, np_dtype(d))])),
        (d, lambda x, y: UOp(C.ADD, vd, (x, y)), lambda: alu("core.add", d, [a, b])),
        (d, lambda x, y: UOp(C.SUB, vd, (x, y)), lambda: alu("core.sub", d, [a, b])),
        (d, lambda x, y: UOp(C.MUL, vd, (x, x)), lambda: alu("core.mul", d, [a, a])),
        (d, lambda x, y: UOp(C.NEG, vd, (x,)), lambda: alu("core.neg", d, [a])),
        (d, lambda x, y: UOp(C.MULACC, vd, (x, y, x)), lambda: alu("core.mulacc", d, [a, b, a])),
        (d, lambda x, y: UOp(C.MAX, vd, (x, y)), lambda: alu("core.max", d, [a, b])),
        (dtypes.bool, lambda x, y: UOp(C.CMPLT, dtypes.bool.vec(W), (x, y)), lambda: alu("core.cmplt", dtypes.bool,
                                                                                         [a, b])),
    ]
    prog = elementwise(f"ivec_{d.name}", n, [d, d], [(od, f) for od, f, _ in ops], W)
    got, src = _run(prog, [od for od, _, _ in ops], [a, b])
    for i, (got_i, (_, _, want)) in enumerate(zip(got, ops, strict=True)):
        assert values_equal(got_i, want()), (d.name, i, a[got_i != want()], b[got_i != want()])
    t = f"{'u' if d.kind == 'uint' else 'i'}{bits}x"
    assert f"{t}" in src and "<<" in src and " >> " in src  # vector code, not lane by lane
    assert "[15] <<" not in src and "[15] >>" not in src


@pytest.mark.parametrize("device", C_DEVICE)
@pytest.mark.parametrize(("f", "i", "payloads"), [
    (dtypes.float32, dtypes.int32, [0x7fc00001, 0xffc12345, 0x7f800001, 0xff800000, 0x80000000, 0x00000001]),
    (dtypes.float64, dtypes.int64, [0x7ff8000000000001, 0xfff0000000000001, 0x7ff0deadbeef0000, 0x8000000000000000]),
], ids=["f32", "f64"])
def test_vector_bitcasts_keep_nan_payloads(device: str, f: DType, i: DType, payloads: list[int]) -> None:
    """float -> int -> float bitcasts of whole vectors (and to a different lane count) move every bit: NaN payloads
    (quiet and signaling), -0.0, subnormals."""
    w = 64 // f.itemsize  # one 64-byte vector
    n = 2 * w
    u = np.dtype(f"u{f.itemsize}")
    raw = np.resize(np.array(payloads, np.uint64).astype(u), n)
    x = raw.view(np_dtype(f)).copy()
    vf, vi = f.vec(w), i.vec(w)
    other = dtypes.int32.vec(16) if f is dtypes.float64 else dtypes.int64.vec(8)  # another lane count
    outs = [
        (i, lambda v: UOp(C.BITCAST, vi, (v,))),
        (f, lambda v: UOp(C.BITCAST, vf, (UOp(C.ADD, vi, (UOp(C.BITCAST, vi, (v,)), UOp.const(vi, 0))),))),
        (f, lambda v: UOp(C.BITCAST, vf, (UOp(C.BITCAST, other, (v,)),))),
    ]
    prog = elementwise(f"bits_{f.name}", n, [f], outs, w)
    got, src = _run(prog, [d for d, _ in outs], [x])
    assert np.array_equal(got[0], bitcast_array(x, f, i))
    assert np.array_equal(got[1].view(u), raw) and np.array_equal(got[2].view(u), raw)
    cast = "(i32x16)" if f is dtypes.float32 else "(i64x8)"
    assert "bitcast_" not in src and "memcpy(v" not in src and cast in src


@pytest.mark.parametrize("device", C_DEVICE)
def test_masks_select_across_widths_and_64_lane_pieces(device: str) -> None:
    """A 64-lane f32 compare (four 64-byte pieces) and its masks selecting i8 and f64 lanes, combined by
    and/or/xor/not: equal to the semantics, NaN compares false, -0.0 and NaN payloads selected unchanged."""
    n = 4 * 64
    rng = np.random.default_rng(3)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    a[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0]
    b[:6] = [1.0, 0.0, -0.0, np.nan, -np.inf, np.nan]
    x8 = _ints(dtypes.int8, n, 5)
    xd = rng.standard_normal(n)
    xd[1] = np.frombuffer(np.uint64(0x7ff8000000000123).tobytes(), np.float64)[0]
    L = 64
    bv = dtypes.bool.vec(L)

    def lt(p: UOp, q: UOp) -> UOp:
        return UOp(C.CMPLT, bv, (p, q))
    outs = [
        (dtypes.float32, lambda p, q, r, s: UOp(C.WHERE, dtypes.float32.vec(L), (lt(p, q), p, q))),
        (dtypes.int8, lambda p, q, r, s: UOp(C.WHERE, dtypes.int8.vec(L), (lt(p, q), r, UOp.const(r.dtype, -128)))),
        (dtypes.float64, lambda p, q, r, s: UOp(C.WHERE, dtypes.float64.vec(L),
                                                (lt(q, p), s, UOp.const(s.dtype, -0.0)))),
        (dtypes.bool, lambda p, q, r, s: UOp(C.XOR, bv, (UOp(C.AND, bv, (lt(p, q), UOp(C.NEG, bv, (lt(q, p),)))),
                                                         UOp(C.OR, bv, (UOp(C.CMPNE, bv, (p, p)), lt(p, p)))))),
    ]
    prog = elementwise("masks", n, [dtypes.float32, dtypes.float32, dtypes.int8, dtypes.float64], outs, L)
    got, src = _run(prog, [d for d, _ in outs], [a, b, x8, xd])
    m = alu("core.cmplt", dtypes.bool, [a, b])
    assert values_equal(got[0], alu("core.where", dtypes.float32, [m, a, b]))
    assert np.array_equal(got[0].view(np.uint32)[1:3], np.array([0x0, 0x80000000], np.uint32))  # b's zeros
    assert np.array_equal(got[1], np.where(m, x8, np.int8(-128)))
    m2 = alu("core.cmplt", dtypes.bool, [b, a])
    want = np.where(m2, xd, -0.0)
    assert np.array_equal(got[2].view(np.uint64), want.view(np.uint64))
    assert np.array_equal(got[3], (m & ~m2) ^ (np.isnan(a) | False))
    assert "const i32x16 v" in src and " & ~v" in src  # 16-lane mask pieces, selects by them


@pytest.mark.parametrize("device", C_DEVICE)
@pytest.mark.parametrize("src", [dtypes.int8, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64,
                                 dtypes.float32, dtypes.float64], ids=lambda d: d.name)
def test_vector_casts_match_semantics(device: str, src: DType) -> None:
    """core.cast of 16-lane vectors from src to every dtype (vector conversions where C's equals the semantics,
    lanes elsewhere) on the edge values."""
    check_casts(shared_backend("c"), src, SEMANTICS_CASES["c"], W)
