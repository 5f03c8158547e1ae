"""roll, repeat_interleave, unfold, diag, diagonal, meshgrid, einsum and pad's modes against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from tensor_testing import check, rnd

from uopir import Tensor, dtypes


# ---- roll ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shifts, dims", [(1, None), ((1,), None), (-7, None), (1, 0), (-1, 0), (5, -1),
                                          ((2, 1), (0, 1)), ((1, 1), (1, 1)), (0, 1), ((3, -2), (-1, 0))])
def test_roll(shifts, dims):
    a = rnd((2, 3, 4), "int32")
    check(Tensor(a).roll(shifts, dims), np.roll(a, shifts, dims))


def test_roll_empty_0d_and_errors():
    check(Tensor(np.zeros((2, 0, 3), np.float32)).roll(1, 1), np.zeros((2, 0, 3), np.float32))
    check(Tensor(np.zeros((0,), np.float32)).roll(1, 0), np.zeros((0,), np.float32))
    check(Tensor(5.0).roll(3), np.float32(5.0))
    with pytest.raises(RuntimeError, match="one shift per dim"):
        Tensor.ones(2, 4).roll((1, 2))
    with pytest.raises(IndexError):
        Tensor.ones(2, 4).roll(1, 2)


# ---- repeat_interleave -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reps, dim", [(2, None), (3, 0), (2, 1), (2, -1), (2, -2), (0, 1), (1, 0)])
def test_repeat_interleave(reps, dim):
    a = rnd((3, 3), "float32")
    check(Tensor(a).repeat_interleave(reps, dim), np.repeat(a, reps, dim))


def test_repeat_interleave_0d_bool_and_errors():
    check(Tensor(True).repeat_interleave(3), np.array([True, True, True]))
    with pytest.raises(ValueError, match="non-negative"):
        Tensor.ones(3).repeat_interleave(-1)


# ---- unfold ----------------------------------------------------------------------------------------------------------
def _unfold_ref(a, dim, size, step):
    w = np.lib.stride_tricks.sliding_window_view(a, size, axis=dim)
    idx = [slice(None)] * a.ndim
    idx[dim % a.ndim] = slice(None, None, step)
    return w[tuple(idx)]


@pytest.mark.parametrize("shape, dim, size, step", [((8,), 0, 2, 1), ((8,), 0, 2, 2), ((8,), 0, 7, 3),
                                                    ((3, 3, 3), 2, 2, 8), ((3, 3, 3), 1, 0, 8),
                                                    ((2, 3, 2, 3), -1, 2, 2), ((5, 2), 0, 3, 1), ((2, 0, 4), 2, 2, 1)])
def test_unfold(shape, dim, size, step):
    a = rnd(shape, "int16")
    check(Tensor(a).unfold(dim, size, step), _unfold_ref(a, dim, size, step))


def test_unfold_errors():
    t = Tensor.ones(8)
    with pytest.raises(RuntimeError, match="larger than dim"):
        t.unfold(0, 9, 3)
    with pytest.raises(IndexError):
        t.unfold(1, 8, 3)
    with pytest.raises(RuntimeError, match="step must be > 0"):
        t.unfold(0, 1, -1)
    with pytest.raises(RuntimeError, match="size must be >= 0"):
        t.unfold(0, -1, 1)


# ---- diag, diagonal --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 5])
def test_diag(n):
    a = rnd((n,), "float32")
    check(Tensor(a).diag(), np.diag(a))
    with pytest.raises(ValueError, match="1-d"):
        Tensor.ones(2, 2).diag()


@pytest.mark.parametrize("shape, offset, d1, d2", [((5, 5), 0, 0, 1), ((3, 4), 0, 0, 1), ((4, 3), 0, 0, 1),
                                                   ((3, 3, 3), 0, -2, -1), ((4, 5, 6), 0, -2, -1),
                                                   ((2, 3, 4, 5), 0, -2, -1), ((5, 5), 1, 0, 1), ((5, 5), -1, 0, 1),
                                                   ((3, 5), 2, 0, 1), ((3, 5), 7, 0, 1), ((3, 5), -4, 0, 1),
                                                   ((2, 3, 4), 1, 2, 0), ((4, 0), 0, 0, 1)])
def test_diagonal(shape, offset, d1, d2):
    a = rnd(shape, "int32")
    check(Tensor(a).diagonal(offset, d1, d2), np.diagonal(a, offset, d1, d2))


def test_diagonal_errors():
    with pytest.raises(RuntimeError, match="same dim"):
        Tensor.ones(3, 3).diagonal(dim1=0, dim2=0)
    with pytest.raises(IndexError):
        Tensor.ones(3, 3).diagonal(dim1=0, dim2=2)


# ---- meshgrid --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    x, y, z = np.array([0., 1., 2.], np.float32), np.array([3, 4, 5, 6], np.int32), np.array([7., 8.], np.float32)
    for arrs in ((x,), (x, y), (x, y, z)):
        got = Tensor(arrs[0]).meshgrid(*(Tensor(a) for a in arrs[1:]), indexing=indexing)
        want = np.meshgrid(*arrs, indexing=indexing)
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            check(g, w)


def test_meshgrid_scalar_and_errors():
    a, b = Tensor(2.0).meshgrid(Tensor([1.0, 3.0]))
    check(a, np.full((1, 2), 2.0, np.float32))
    check(b, np.array([[1.0, 3.0]], np.float32))
    with pytest.raises(RuntimeError, match="indexing"):
        Tensor.ones(2).meshgrid(Tensor.ones(3), indexing="ji")


# ---- einsum ----------------------------------------------------------------------------------------------------------
EINSUM = [("->", [()]), ("ij->ji", [(3, 3)]), ("ij -> ji", [(3, 2)]), ("ji", [(3, 4)]), ("jki", [(2, 3, 4)]),
          ("ij,jk", [(2, 3), (3, 4)]), ("ijk->", [(2, 3, 4)]), ("ij->j", [(3, 3)]), ("ik,k->i", [(3, 4), (4,)]),
          ("jk,ki->ji", [(3, 4), (4, 5)]), ("i,i->i", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
          ("ijk,ikl->jil", [(2, 4, 5), (2, 5, 3)]), ("pqrs,tuqvr->pstuv", [(2, 3, 2, 2), (2, 2, 3, 2, 2)]),
          ("ik,jkl,il->ij", [(2, 3), (4, 3, 5), (2, 5)]), ("...id,...jd->...ij", [(3, 2, 4), (3, 5, 4)]),
          ("...id,...jd", [(3, 2, 4), (3, 5, 4)]), ("i...j,ji...->...", [(2, 3, 4, 5), (5, 2, 4)]),
          ("i,i", [(5,), (5,)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("...ii", [(3, 4, 4)]), ("iij", [(3, 3, 2)]),
          ("ii->", [(4, 4)]), ("...ii->...i", [(3, 4, 4)]), ("...ii->...", [(3, 4, 4)]), ("iji->j", [(3, 2, 3)]),
          ("bA,Ab->", [(2, 3), (3, 2)]), ("...,...->...", [(2, 1), (3,)]), ("ij,jk->ik", [(0, 3), (3, 2)]),
          ("ij,jk->ik", [(2, 0), (0, 2)])]


@pytest.mark.parametrize("formula, shapes", EINSUM)
def test_einsum(formula, shapes):
    arrs = [rnd(s, "float32") for s in shapes]
    check(Tensor.einsum(formula, *(Tensor(a) for a in arrs)), np.einsum(formula.replace(" ", ""), *arrs),
          rtol=1e-5, atol=1e-5)


def test_einsum_list_dtypes_and_broadcast():
    a, b = rnd((2, 3), "int32"), rnd((3, 4), "int32")
    check(Tensor.einsum("ij,jk->ik", [Tensor(a), Tensor(b)]), a @ b, dtype="int32")
    check(Tensor.einsum("ij,jk->ik", Tensor(a), Tensor(b), dtype="float64"), (a @ b).astype(np.float64),
          dtype="float64")
    h = rnd((2, 3), "float16")
    check(Tensor.einsum("ij->i", Tensor(h)), h.astype(np.float32).sum(1).astype(np.float16), dtype="float16")
    bo = rnd((2, 3), "bool")
    check(Tensor.einsum("ij,ij->i", Tensor(bo), Tensor(bo)), (bo & bo).any(1), dtype="bool")
    # a labeled dim of size 1 broadcasts (torch)
    x, y = rnd((1, 3), "float32"), rnd((4, 3), "float32")
    check(Tensor.einsum("ij,ij->ij", Tensor(x), Tensor(y)), x * y)
    # ellipsis dims missing from an explicit output are summed (torch; numpy rejects it)
    p, q = rnd((2, 3, 2, 2), "float32"), rnd((2, 3, 2, 2), "float32")
    check(Tensor.einsum("ij...,ij...->ij", Tensor(p), Tensor(q)), (p * q).sum((2, 3)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("formula, shapes, exc, msg", [
    ("pqrs,tuqvr->pstuv", [(3, 8, 10, 5), (11, 5, 13, 16, 8)], RuntimeError, "do not broadcast"),
    ("ij,jk->ij", [(2, 2), (2, 2), (2, 2)], ValueError, "names 2 operands, got 3"),
    ("ij,jk->ij", [(2, 2)], RuntimeError, "names 2 operands, got 1"),
    ("...ik...,...jk->", [(2, 3, 4), (2, 3, 4)], RuntimeError, "more than one ellipsis"),
    ("i...j,ji...->...", [(2, 3, 4), (2, 3, 4)], RuntimeError, "do not broadcast"),
    ("ijk->i", [(2, 3)], ValueError, "3 subscripts"),
    ("ij->ik", [(2, 3)], ValueError, "'k' does not occur"),
    ("ij->ii", [(2, 3)], ValueError, "repeats subscript"),
    ("i1->i", [(2, 3)], ValueError, "not a subscript letter"),
    ("ii->i", [(2, 3)], ValueError, "sizes 2 and 3"),
])
def test_einsum_errors(formula, shapes, exc, msg):
    with pytest.raises(exc, match=msg):
        Tensor.einsum(formula, *(Tensor.ones(*s) for s in shapes))


# ---- pad modes -------------------------------------------------------------------------------------------------------
def _np_pad(a, flat, mode):
    """torch's flat (last dim first) padding through np.pad, negative amounts cropped after (reflect, replicate)
    or before (circular)."""
    pairs = [(0, 0)] * a.ndim
    for i in range(len(flat) // 2):
        pairs[a.ndim - 1 - i] = (flat[2 * i], flat[2 * i + 1])
    nm = {"replicate": "edge", "circular": "wrap", "reflect": "reflect"}[mode]
    if mode == "circular":
        a = a[tuple(slice(max(0, -b), s - max(0, -e)) for (b, e), s in zip(pairs, a.shape, strict=True))]
        return np.pad(a, [(max(0, b), max(0, e)) for b, e in pairs], mode=nm)
    out = np.pad(a, [(max(0, b), max(0, e)) for b, e in pairs], mode=nm)
    return out[tuple(slice(max(0, -b), s - max(0, -e)) for (b, e), s in zip(pairs, out.shape, strict=True))]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, flat", [((1, 1, 5, 5), (0, 2, 3, 2)), ((5, 5, 5), (0, 2)),
                                         ((1, 2, 3, 4, 4), (1, 2, 2, 0, 1, 2)), ((3, 3, 3), (-1, 2, 2, -1)),
                                         ((1, 5, 5), (2, -3, 0, -2)), ((1, 5, 5), (4, 4, 0, 4)), ((4, 5), (0, 0))])
def test_pad_modes(mode, shape, flat):
    a = rnd(shape, "float32")
    check(Tensor(a).pad(flat, mode=mode), _np_pad(a, flat, mode))


def test_pad_modes_grouped_dtypes_and_errors():
    a = rnd((3, 4), "int8")
    check(Tensor(a).pad(((1, 2), None), mode="reflect"), np.pad(a, ((1, 2), (0, 0)), mode="reflect"))
    check(Tensor(a).pad(((3, 11), (0, 7)), mode="replicate"), np.pad(a, ((3, 11), (0, 7)), mode="edge"))
    b = rnd((2, 3), "bool")
    check(Tensor(b).pad((2, 3), mode="circular"), np.pad(b, ((0, 0), (2, 3)), mode="wrap"))
    check(Tensor.ones(2, 2).pad((1, 1), value=5.0), np.pad(np.ones((2, 2), np.float32), ((0, 0), (1, 1)),
                                                           constant_values=5.0))
    with pytest.raises(ValueError, match="smaller than dim"):
        Tensor.ones(1, 1, 5, 5).pad((3, 5, 0, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="more than once"):
        Tensor.ones(1, 1, 5, 5).pad((3, 6, 0, 0), mode="circular")
    with pytest.raises(NotImplementedError, match="typo"):
        Tensor.ones(3, 3, 3).pad((3, 0), mode="typo")


def test_pad_mode_keeps_dtype():
    t = Tensor.ones(2, 3, dtype=dtypes.int16).pad((1, 1, 1, 1), mode="replicate")
    assert t.dtype is dtypes.int16 and t.shape == (4, 5)
