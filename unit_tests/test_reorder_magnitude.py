"""The tolerance of reordered float sums (uopir.backends.python.magnitude, tolerance.compare's `magnitude`): a long
sum that cancels is measured against the sum of |terms|, not its result, and still catches a wrong kernel."""
from __future__ import annotations

import numpy as np

from uopir.backends.python import evaluate
from uopir.backends.python.magnitude import reorder_magnitudes
from uopir.backends.tolerance import EPS, TOLERANCE, compare
from uopir.dialects import tensor
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp


def _buf(i: int, shape: tuple[int, ...], d: DType = dtypes.float32) -> UOp:
    return UOp(tensor.BUFFER, d, (), (i, "python", shape))


def _sum(x: UOp, axes: tuple[int, ...], op: str = "add") -> UOp:
    return UOp(tensor.REDUCE, x.dtype, (x,), (op, axes))


def _lanes(x: np.ndarray, n: int = 16, skip: int | None = None) -> np.float32:
    """x summed as an n-lane vector accumulator would (lane i takes every n-th term, in f32), then the lanes (lane
    `skip` left out: a wrong kernel)."""
    acc = np.zeros(n, np.float32)
    for k in range(0, x.size, n):
        acc[:len(x[k:k + n])] += x[k:k + n]
    out = np.float32(0)
    for i, v in enumerate(acc):
        out = out if i == skip else np.float32(out + v)
    return out


def _cancelling(n: int = 512) -> np.ndarray:
    """Pairs +a, -a + small, shuffled: the partial sums wander in the thousands, the sum is about 3."""
    rng = np.random.default_rng(7)
    a = rng.uniform(100, 3000, n // 2)
    x = np.concatenate([a, -a + rng.uniform(-0.05, 0.05, n // 2)])
    return rng.permutation(x).astype(np.float32)


def test_a_long_cancelling_sum_is_measured_against_its_terms() -> None:
    x = _cancelling()
    root = UOp.sink(_sum(_buf(0, x.shape), (0,)))
    ref = np.asarray(evaluate(root, {0: x})[0])  # index order
    (mag,) = reorder_magnitudes(root, {0: x})
    assert mag.shape == (1,) and mag[0] == np.abs(x.astype(np.float64)).sum()
    got = np.float32([_lanes(x)])  # a valid order (kernel-optimize's lanes)
    exact = x.astype(np.float64).sum()
    # both orders err by far more than 64 ulps of the result, each within the sound bound (n-1) u sum|x|
    bound = (x.size - 1) * EPS["f32"] / 2 * mag[0]
    assert abs(ref[0] - exact) <= bound and abs(got[0] - exact) <= bound
    assert not compare(got, ref, dtypes.float32, "accumulate").ok  # the tolerance of the result alone: too tight
    assert compare(got, ref, dtypes.float32, "accumulate", magnitude=mag).ok
    # a wrong kernel still fails: the last term dropped, a term counted twice, a lane left out of the combine
    tol = TOLERANCE["accumulate"]["f32"] * EPS["f32"] * (2 * abs(float(ref[0])) + mag[0])
    assert tol < 0.1 * np.abs(x).min()  # dropping or repeating any one term errs by 10x the tolerance
    for wrong in (_lanes(x[:-1]), _lanes(np.append(x, x[0])), _lanes(x, skip=3)):
        assert not compare(np.float32([wrong]), ref, dtypes.float32, "accumulate", magnitude=mag).ok


def test_magnitudes_follow_the_ops() -> None:
    x, y = np.float32([[1, -2, 3], [-4, 5, 6]]), np.float32([0.5, -2])
    bx, by = _buf(0, (2, 3)), _buf(1, (2,))
    s = UOp(tensor.RESHAPE, dtypes.float32, (_sum(bx, (1,)),), (2,))  # sums 2 and 7, sum|x| 6 and 15
    outs = [s.alu("core.mul", by), s.alu("core.fdiv", by), by.alu("core.fdiv", s), by.lt(s).where(s, by),
            _sum(bx, (1,), "max"), s.alu("core.mul", 2.0).cast(dtypes.int32),
            UOp(tensor.PAD, dtypes.float32, (bx,), ((1, 0), (0, 0))), s.alu("core.sqrt")]
    got = reorder_magnitudes(UOp.sink(*outs), {0: x, 1: y})
    want = [[3, 30], [12, 7.5], [0.5 * 6 / 4, 2 * 15 / 49], [6, 15], [[0], [0]], [0, 0], np.zeros((3, 3)),
            [6 / (2 * 2**0.5), 15 / (2 * 7**0.5)]]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, np.asarray(w, np.float64), rtol=1e-12)
    # what the table does not know leaves the plain tolerance
    assert reorder_magnitudes(UOp.sink(_sum(bx, (1,), "mul")), {0: x}) is None
