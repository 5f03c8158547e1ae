"""A running sum or product along a long axis is computed in blocks (Reduction._blocked_scan): its kernels do
O(n * SCAN_BLOCK) work, not the masked triangle's O(n**2), and give numpy's values, -0.0 and infinities included.
So is a topk of few of a long row (selection._first_by_rounds, _first_by_select, _first_of_blocks), in the rank
sort's stable order."""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.estimates import estimate
from uopir.frontend.reduction import SCAN_BLOCK


def test_long_cumsum_is_blocked() -> None:
    rows, n = 2, 16 * SCAN_BLOCK
    x = Tensor(np.ones((rows, n), np.float32))
    flops = sum(estimate(p.program).flops for p in x.cumsum(1).programs())
    assert flops < 8 * rows * n * SCAN_BLOCK  # the triangle: ~3 * rows * n * n = 48 * rows * n * SCAN_BLOCK


def test_blocked_values_match_numpy() -> None:
    rng = np.random.default_rng(0)
    n = 3 * SCAN_BLOCK + 5  # a partial last block
    x = rng.standard_normal((3, n)).astype(np.float32)
    np.testing.assert_allclose(Tensor(x).cumsum(1).numpy(), np.cumsum(x, 1), rtol=1e-5, atol=1e-5)
    p = (1 + 0.01 * x).astype(np.float32)
    np.testing.assert_allclose(Tensor(p.T).cumprod(0).numpy(), np.cumprod(p.T, 0), rtol=1e-5)
    k = rng.integers(-9, 9, (2, n)).astype(np.int32)
    assert np.array_equal(Tensor(k).cumsum(1).numpy(), np.cumsum(k, 1, dtype=np.int64))
    z = np.full((2, n), -0.0, np.float32)
    z[0, 2 * SCAN_BLOCK + 1] = 0.0  # -0.0 up to here, +0.0 after it
    z[1, SCAN_BLOCK + 3], z[1, SCAN_BLOCK + 9] = np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        want = np.cumsum(z, 1)
    got = Tensor(z).cumsum(1).numpy()
    assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("k", [5, 12])
def test_topk_of_few_of_a_long_row(k: int) -> None:
    """topk of few of 1000: k=5 one pick per round (plain reductions of n), k=12 each block of 64 ranked on its own
    and then the 16 * 12 candidates; both far under the full rank sort's 1M comparisons per row, both
    with its values and stable indices, NaN the largest."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 30, (2, 1000)).astype(np.float32)  # many ties across blocks
    x[0, ::9] = np.nan
    for largest in (True, False):
        v, i = Tensor(x).topk(k, largest=largest)
        key = np.where(np.isnan(x), np.inf, x)  # NaN sorts as the largest value
        key = -key if largest else key
        want = np.argsort(key, axis=-1, kind="stable")[:, :k]
        assert np.array_equal(i.numpy(), want)
        assert np.array_equal(v.numpy(), np.take_along_axis(x, want, -1), equal_nan=True)
    flops = sum(estimate(p.program).flops for p in Tensor(x).topk(k)[1].programs())
    full = sum(estimate(p.program).flops for p in Tensor(x).sort(descending=True)[1].programs())
    assert flops < full / 4


def test_topk_of_many_of_a_long_row_selects_by_key_bits() -> None:
    """topk(20) of 1100 float32 / int32: the 20th largest order key found bit by bit, the kept 20 rank-sorted
    (selection._first_by_select); ties at the threshold keep the lowest indices, -0.0 equals +0.0 and keeps its
    sign, NaN is the largest value."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 40, (3, 1100)).astype(np.float32)
    x[0, ::5] = np.nan
    x[1, :] = -0.0
    x[1, 7::11] = 0.0
    xi = rng.integers(-5, 5, (2, 1100)).astype(np.int32)
    xi[0, ::3] = np.iinfo(np.int32).min
    for a, largest in ((x, False), (xi, True)):
        v, i = Tensor(a).topk(20, largest=largest)
        key = np.where(np.isnan(a), np.inf, a).astype(np.float64)  # NaN sorts as the largest value
        want = np.argsort(-key if largest else key, axis=-1, kind="stable")[:, :20]
        assert np.array_equal(i.numpy(), want)
        got, ref = v.numpy(), np.take_along_axis(a, want, -1)
        assert np.array_equal(got, ref, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(ref))
    flops = sum(estimate(p.program).flops for p in Tensor(x).topk(20)[1].programs())
    full = sum(estimate(p.program).flops for p in Tensor(x).sort(descending=True)[1].programs())
    assert flops < full / 10  # the blocks (64 long, 18 x 20 candidates) take ~1/7


def test_kept_positions_count_blocks_not_elements() -> None:
    """The compaction of a topk's selection (selection._kept_positions): the r-th set position of each row, found by
    counting blocks of running counts and then one block's elements (a gather), in well under count * n work,
    where a one-hot pick of each kept element costs ~4 * count * n per row."""
    from uopir.frontend.selection import _kept_positions
    rng = np.random.default_rng(4)
    n, count = 4100, 64
    sel = np.zeros((2, n), np.bool_)
    sel[0, rng.choice(n, count, replace=False)] = True
    sel[1, :count - 2] = True  # the first block full, and the last position (a ragged last block)
    sel[1, [n - 1, n - 20]] = True
    got = _kept_positions(Tensor(sel), count)
    flops = sum(estimate(p.program).flops for p in got.programs())  # ~0.77M, the running count's blocks most of it
    assert flops < 2 * 2 * count * n  # one one-hot pick: a compare, an and, a select and an add per (row, r, i)
    assert np.array_equal(got.numpy(), np.stack([np.flatnonzero(r) for r in sel]))


def test_topk_rounds_take_each_extreme_in_a_kernel_of_its_own() -> None:
    """Each round of _first_by_rounds realizes its extreme before the lowest index that holds it is found: fused,
    the index's reduction read the max as a running scalar and the max ran as one scalar chain (64x1000 k=5 on llvm
    2.1 ms -> 0.12 ms). The first free NaN and the first hit are one reduction (keyed j and j + n), so a float row
    takes two kernels per round (fused rounds took two, NaN's own index three)."""
    x = np.random.default_rng(5).standard_normal((2, 1000)).astype(np.float32)
    assert len(Tensor(x).topk(5)[1].programs()) == 2 * 5
