"""device-transcendental: vector exp2/log2 as core-op polynomials, against numpy over the whole f32/f64 domain.

The rewrite is checked twice: on the reference interpreter (the exact semantics of the core ops it emits: the
algorithm itself) and on each host-cpu backend (c, llvm) through the default pipeline, which runs it because their
target asks (`vector_transcendentals`). Finite results within a few ulp of numpy computed wider and rounded once (a
subnormal result within a few subnormal steps); every special value exact: NaN where numpy has NaN, the same
infinities, zeros of the same sign.
"""
from __future__ import annotations

import numpy as np
import pytest

import uopir.backends  # noqa: F401  (registers the c and llvm targets)
from uopir import Tensor
from uopir.backends import available
from uopir.backends.python import evaluate
from uopir.dialects import core as C
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp
from uopir.passes.device.transcendental import exp2_poly, log2_poly, one_plus_exp2_poly
from uopir.passes.target import target

FLOATS = {dtypes.float32: np.float32, dtypes.float64: np.float64}
MAX_ULPS = 4.0


def _special(nt: type) -> np.ndarray:
    fi = np.finfo(nt)
    tiny, den = float(fi.tiny), float(fi.smallest_subnormal)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-3, 0.7071067811865476, 1.4142135623730951,
            127.0, 127.99, 128.0, 128.5, 129.0, 200.0, -125.5, -126.0, -127.0, -140.3, -149.0, -149.4, -149.6, -150.0,
            -150.5, -151.0, -200.0, 1023.0, 1023.9, 1024.0, 1025.0, -1022.0, -1050.2, -1074.0, -1074.4, -1075.0,
            -1076.0, -2000.0, 1e30, -1e30, tiny, tiny / 3, den, 3 * den, -den, -tiny, float(fi.max), -float(fi.max)]
    with np.errstate(over="ignore"):
        return np.array(vals, dtype=nt)


def samples(nt: type, n: int = 1 << 16) -> np.ndarray:
    """Special values, bit patterns spread over the whole domain (both signs, every exponent, NaNs and
    subnormals included), and dense values over exp2's interesting range; a multiple of 16 long."""
    bits = 8 * np.dtype(nt).itemsize
    ut = np.uint32 if bits == 32 else np.uint64
    step = (1 << bits) // n
    spread = (np.arange(n, dtype=np.uint64) * np.uint64(step) + np.uint64(12345)).astype(ut).view(nt)
    dense = np.linspace(-1100 if bits == 64 else -160, 1100 if bits == 64 else 140, n).astype(nt)
    x = np.concatenate([_special(nt), spread, dense, np.geomspace(1e-6, 1e6, n // 4).astype(nt)])
    return x[: len(x) // 16 * 16]


def check(got: np.ndarray, ref: np.ndarray, x: np.ndarray) -> None:
    nt = ref.dtype.type
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan), f"NaN at {x[np.isnan(got) != nan][:5]}"
    inf = np.isinf(ref)
    assert np.array_equal(got[inf], ref[inf]), f"inf at {x[inf][got[inf] != ref[inf]][:5]}"
    zero = ref == 0
    assert np.array_equal(got[zero], ref[zero]) and np.array_equal(np.signbit(got[zero]), np.signbit(ref[zero])), \
        f"zeros at {x[zero][(got[zero] != 0) | (np.signbit(got[zero]) != np.signbit(ref[zero]))][:5]}"
    fin = np.isfinite(ref)
    fi = np.finfo(nt)
    step = np.maximum(np.abs(ref[fin]).astype(np.float64) * float(fi.eps), float(fi.smallest_subnormal))
    ulps = np.abs(got[fin].astype(np.float64) - ref[fin].astype(np.float64)) / step
    worst = int(np.argmax(ulps))
    assert ulps[worst] <= MAX_ULPS, f"{ulps[worst]:.2f} ulp at x={x[fin][worst]!r}: got {got[fin][worst]!r}, " \
                                    f"numpy {ref[fin][worst]!r}"


def _ref(name: str, x: np.ndarray) -> np.ndarray:
    """numpy's function in a wider precision (f32 in f64, f64 in long double), rounded once: numpy's own f32 exp2
    is not correctly rounded below the normals (exp2(-149.6) gives 0, not the nearest subnormal 2^-149)."""
    wide = np.float64 if x.dtype == np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        return getattr(np, name)(x.astype(wide)).astype(x.dtype)


@pytest.mark.parametrize("d", list(FLOATS), ids=lambda d: d.name)
@pytest.mark.parametrize("name", ["exp2", "log2"])
def test_the_polynomials_match_numpy_on_the_interpreter(d: DType, name: str) -> None:
    """The rewrite's own ops under the exact semantics: the algorithm, independent of any compiler."""
    nt = FLOATS[d]
    x = samples(nt, 1 << 12)
    xs = UOp.const(d.vec(len(x)), tuple(x.tolist()))
    out = (exp2_poly if name == "exp2" else log2_poly)(xs)
    assert C.EXP2 not in {u.op for u in out.toposort()} and C.LOG2 not in {u.op for u in out.toposort()}
    got = np.asarray(evaluate(out, {}), dtype=nt).reshape(-1)
    check(got, _ref(name, x), x)


@pytest.mark.parametrize("device", ["c", "llvm"])
@pytest.mark.parametrize("nt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["exp2", "log2"])
def test_vector_exp2_log2_match_numpy_on_host_backends(device: str, nt: type, name: str) -> None:
    if device not in available():
        pytest.skip(f"{device} is unavailable")
    assert target(device).vector_transcendentals
    x = samples(nt)
    got = getattr(Tensor(x, device=device), name)().numpy()
    check(got, _ref(name, x), x)


def test_generic_targets_keep_the_exact_functions() -> None:
    """Only targets that ask get the approximation: the generic cpu (compared bit for bit with the interpreter by the
    lowering tests) and the interpreter keep exp2/log2 as they are."""
    assert not target("cpu").vector_transcendentals and not target("gpu").vector_transcendentals
    assert not target("python").vector_transcendentals


@pytest.mark.parametrize("d", list(FLOATS), ids=lambda d: d.name)
def test_one_plus_exp2_matches_numpy_on_the_interpreter(d: DType) -> None:
    """Sigmoid's denominator as one sum: no underflow path (1 + tiny is 1) and one power-of-two scale, still within
    a few ulp of numpy's 1 + 2^x over the whole domain, with inf, NaN and 1 exact."""
    nt = FLOATS[d]
    x = samples(nt, 1 << 10)
    got = np.asarray(evaluate(one_plus_exp2_poly(UOp.const(d.vec(len(x)), tuple(x.tolist()))), {}), dtype=nt)
    wide = np.float64 if nt is np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        ref = (1 + np.exp2(x.astype(wide))).astype(nt)
    check(got.reshape(-1), ref, x)


@pytest.mark.parametrize("device", ["llvm"])
def test_sigmoid_matches_numpy_over_the_f32_domain(device: str) -> None:
    """The fused 1 + 2^y path as the pipeline emits it (the sum pattern sees core.add of 1 and a vector exp2):
    within a few ulp of 1 / (1 + 2^y) in f64 for the same f32 y = -x·log2 e (the argument's own rounding is the
    frontend's exp, not this lowering), and 0 where that f32 denominator overflows (x < -88.72, as numpy in f32)."""
    if device not in available():
        pytest.skip(f"{device} is unavailable")
    x = samples(np.float32, 1 << 14)
    got = Tensor(x, device=device).sigmoid().numpy()
    with np.errstate(all="ignore"):
        den = 1 + np.exp2((-x * np.float32(np.log2(np.e))).astype(np.float64))
        ref = np.where(den > np.finfo(np.float32).max, 0.0, 1 / den).astype(np.float32)
    check(got, ref, x)
