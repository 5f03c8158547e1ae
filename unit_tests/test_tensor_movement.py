"""Movement ops and __getitem__ against numpy (hypothesis for reshape and indexing)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples
from tensor_testing import check, rnd

from uopir import Tensor, dtypes


def test_reshape_view():
    a = rnd((2, 3, 4))
    x = Tensor(a)
    check(x.reshape(6, 4), a.reshape(6, 4))
    check(x.reshape((4, -1)), a.reshape(4, -1))
    check(x.reshape([-1]), a.reshape(-1))
    check(x.view(2, 12), a.reshape(2, 12))
    check(x.reshape(2, None, 4), a)
    check(Tensor(np.float32(5)).reshape(1, 1), np.full((1, 1), 5, np.float32))
    one = rnd((1,))
    check(Tensor(one).reshape(()), one.reshape(()))
    check(Tensor(np.zeros((0, 4), np.float32)).reshape(4, 0, 3), np.zeros((4, 0, 3), np.float32))
    assert x.reshape(2, 3, 4) is x


def test_reshape_errors_name_shapes():
    x = Tensor.ones(2, 3)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 2\)"):
        x.reshape(4, 2)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        x.reshape(-1, 4)
    with pytest.raises(ValueError, match="only one"):
        x.reshape(-1, -1)


def test_permute_transpose_T():
    a = rnd((2, 3, 4))
    x = Tensor(a)
    check(x.permute(2, 0, 1), a.transpose(2, 0, 1))
    check(x.permute((-1, -3, -2)), a.transpose(2, 0, 1))
    check(x.transpose(0, 2), a.swapaxes(0, 2))
    check(x.transpose(), a.swapaxes(1, 0))
    m = rnd((3, 5))
    check(Tensor(m).T, m.T)
    with pytest.raises(ValueError, match=r"permutation.*\(2, 3, 4\)"):
        x.permute(0, 0, 1)
    with pytest.raises(ValueError, match="axis 3"):
        x.permute(0, 1, 3)


def test_expand():
    a = rnd((3, 1))
    check(Tensor(a).expand(3, 4), np.broadcast_to(a, (3, 4)))
    check(Tensor(a).expand(2, -1, 5), np.broadcast_to(a, (2, 3, 5)))
    check(Tensor(a).broadcast_to((2, 3, 2)), np.broadcast_to(a, (2, 3, 2)))
    with pytest.raises(ValueError, match=r"\(3, 1\).*\(4, 4\)"):
        Tensor(a).expand(4, 4)


def test_pad():
    a = rnd((2, 3))
    x = Tensor(a)
    check(x.pad(((1, 0), (2, 1))), np.pad(a, ((1, 0), (2, 1))))
    check(x.pad(((1, 1), None), value=-2.5), np.pad(a, ((1, 1), (0, 0)), constant_values=-2.5))
    check(x.pad((1, 2)), np.pad(a, ((0, 0), (1, 2))))  # flat torch-style: last dim first
    check(x.pad((1, 2, 0, 1), value=float("-inf")), np.pad(a, ((0, 1), (1, 2)), constant_values=-np.inf))
    check(x.pad(((-1, 1), (0, -2))), np.pad(a[1:, :1], ((0, 1), (0, 0))))
    i = rnd((2, 2), "int8")
    check(Tensor(i).pad(((1, 1), (0, 0)), value=7), np.pad(i, ((1, 1), (0, 0)), constant_values=7), dtype="int8")
    b = rnd((2,), "bool")
    check(Tensor(b).pad(((1, 1),), value=True), np.pad(b, 1, constant_values=True))
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        x.pad(((1, 1),))


def test_shrink_flip():
    a = rnd((4, 5))
    x = Tensor(a)
    check(x.shrink(((1, 3), None)), a[1:3])
    check(x.shrink(((0, 0), (2, 5))), a[0:0, 2:5])
    check(x.flip(0), a[::-1])
    check(x.flip(0, -1), a[::-1, ::-1])
    check(x.flip((1,)), a[:, ::-1])
    with pytest.raises(ValueError, match=r"\(4, 5\)"):
        x.shrink(((0, 5), None))
    with pytest.raises(ValueError, match="repeat"):
        x.flip(1, -1)


def test_squeeze_unsqueeze_flatten_unflatten():
    a = rnd((1, 3, 1, 2))
    x = Tensor(a)
    check(x.squeeze(), a.squeeze())
    check(x.squeeze(2), a.squeeze(2))
    check(x.squeeze(1), a)  # not size 1: unchanged (tinygrad/torch)
    check(x.unsqueeze(0), a[None])
    check(x.unsqueeze(-1), a[..., None])
    check(x.flatten(), a.reshape(-1))
    check(x.flatten(1), a.reshape(1, -1))
    check(x.flatten(1, 2), a.reshape(1, 3, 2))
    b = rnd((6, 2))
    check(Tensor(b).unflatten(0, (2, 3)), b.reshape(2, 3, 2))
    check(Tensor(np.float32(1)).flatten(), np.ones(1, np.float32))
    with pytest.raises(ValueError, match="axis 5"):
        x.unsqueeze(5)


def test_repeat():
    a = rnd((2, 3))
    check(Tensor(a).repeat(2, 1), np.tile(a, (2, 1)))
    check(Tensor(a).repeat((2, 1, 3)), np.tile(a, (2, 1, 3)))
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        Tensor(a).repeat(2)


def test_cat_stack_split_chunk():
    a, b, c = rnd((2, 3)), rnd((1, 3)), rnd((4, 3))
    check(Tensor(a).cat(Tensor(b), Tensor(c)), np.concatenate([a, b, c]))
    check(Tensor(a).cat(Tensor(a), dim=-1), np.concatenate([a, a], axis=-1))
    check(Tensor(a).cat(Tensor(a.astype(np.float64))), np.concatenate([a, a.astype(np.float64)]), dtype="float64")
    bo = rnd((2, 2), "bool")
    check(Tensor(bo).cat(Tensor(~bo)), np.concatenate([bo, ~bo]))
    check(Tensor(a).stack(Tensor(a + 1)), np.stack([a, a + 1]))
    check(Tensor(a).stack(Tensor(a + 1), dim=-1), np.stack([a, a + 1], axis=-1))
    parts = Tensor(c).split(3)
    assert [p.shape for p in parts] == [(3, 3), (1, 3)]
    check(parts[1], c[3:])
    p2 = Tensor(c).split([1, 3], dim=0)
    check(p2[1], c[1:])
    ch = Tensor(rnd((2, 7))).chunk(3, dim=1)
    assert [p.shape for p in ch] == [(2, 3), (2, 3), (2, 1)]
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3,\)"):
        Tensor(a).cat(Tensor(rnd((3,))))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        Tensor(a).cat(Tensor(rnd((2, 4))))
    with pytest.raises(ValueError, match="add up"):
        Tensor(c).split([1, 1])


def test_tril_triu():
    a = rnd((3, 4))
    for k in (-1, 0, 2):
        check(Tensor(a).tril(k), np.tril(a, k))
        check(Tensor(a).triu(k), np.triu(a, k))


# ---- __getitem__ -----------------------------------------------------------------------------------------------------
A = rnd((4, 5, 6))

BASIC = [
    (1,), (-1,), (slice(None),), (slice(1, 3),), (slice(None, None, 2),), (slice(None, None, -1),),
    (slice(4, 0, -2),), (slice(-2, None),), (slice(10, 20),), (1, 2, 3), (-1, slice(1, 5, 3), None),
    (Ellipsis, 2), (None, Ellipsis, None), (slice(None), None, 1), (0, Ellipsis), (Ellipsis,),
    (slice(3, 1),), (slice(None, None, 3), slice(None, None, -4), slice(1, None, 5)),
]


@pytest.mark.parametrize("idx", BASIC, ids=str)
def test_getitem_basic(idx):
    check(Tensor(A)[idx], A[idx])


ADV = [
    ([0, 2],), (np.array([[1, 3], [0, 0]]),), ([-1, 0],), (slice(None), [4, 0, 1]),
    ([0, 1], [2, 3]), ([0, 1], slice(None), [2, 3]), (1, slice(None), [1, 2]), (slice(1, 3), [0, 2], 4),
    (Ellipsis, [5, 0]), ([[0], [1]], [1, 2, 3]), (None, [1, 2], slice(None, None, 2)),
]


def torch_index(a: np.ndarray, idx: tuple) -> np.ndarray:
    """a[idx] by torch's (and tinygrad's) rule, computed with numpy: the ints index first as basic indexing (each
    removes its dim), then the integer arrays alone are numpy's advanced indices, so only they decide adjacency."""
    ell = [k for k, i in enumerate(idx) if i is Ellipsis]
    if ell:
        real = sum(1 for i in idx if i is not None and i is not Ellipsis)
        idx = idx[:ell[0]] + (slice(None),) * (a.ndim - real) + idx[ell[0] + 1:]
    arrays = [isinstance(i, list | tuple | np.ndarray) for i in idx]
    a1 = a[tuple(slice(None) if arr else i for i, arr in zip(idx, arrays, strict=True))]
    rest = tuple(np.asarray(i) if arr else slice(None) for i, arr in zip(idx, arrays, strict=True)
                 if arr or not isinstance(i, int))
    return a1[rest]


@pytest.mark.parametrize("idx", ADV, ids=str)
def test_getitem_tensor_indices(idx):
    t_idx = tuple(Tensor(np.asarray(i, np.int32)) if isinstance(i, list | np.ndarray) else i for i in idx)
    check(Tensor(A)[t_idx], torch_index(A, idx))
    check(Tensor(A)[idx], torch_index(A, idx))  # lists work too


def test_getitem_dtypes_and_errors():
    i = rnd((4, 3), "int8")
    check(Tensor(i)[Tensor([2, 0])], i[[2, 0]], dtype="int8")
    b = rnd((4,), "bool")
    check(Tensor(b)[Tensor([3, 1, 1])], b[[3, 1, 1]], dtype="bool")
    x = Tensor(A)
    with pytest.raises(IndexError, match=r"out of bounds.*\(4, 5, 6\)"):
        x[4]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="boolean"):
        x[Tensor([True, False, True, False])]
    with pytest.raises(IndexError):
        x[1.5]
    with pytest.raises(IndexError, match="ellipsis"):
        x[..., 0, ...]
    assert Tensor(np.float32(1))[()].shape == ()
    check(Tensor(np.zeros((0, 3), np.float32))[:, 1], np.zeros((0,), np.float32))
    assert Tensor(A)[Tensor(2)].shape == (5, 6)


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_hypothesis_slicing(data):
    shape = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=3))
    a = rnd(tuple(shape))
    idx = []
    for n in shape:
        kind = data.draw(st.sampled_from(["slice", "int", "none"] if n else ["slice", "none"]))
        if kind == "int":
            idx.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "none":
            idx.append(None)
            idx.append(slice(None))
        else:
            start = data.draw(st.none() | st.integers(-7, 7))
            stop = data.draw(st.none() | st.integers(-7, 7))
            step = data.draw(st.none() | st.integers(-4, 4).filter(lambda s: s != 0))
            idx.append(slice(start, stop, step))
    check(Tensor(a)[tuple(idx)], a[tuple(idx)])


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_hypothesis_reshape_permute(shape, data):
    a = rnd(tuple(shape))
    n = a.size
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    d = data.draw(st.sampled_from(divisors))
    check(Tensor(a).reshape(d, -1), a.reshape(d, -1))
    perm = data.draw(st.permutations(range(len(shape))))
    check(Tensor(a).permute(perm), a.transpose(perm))


def test_iteration_and_int_tensor_index_with_dtype():
    x = Tensor([[1, 2], [3, 4]], dtype=dtypes.int64)
    assert [r.tolist() for r in x] == [[1, 2], [3, 4]]


def test_narrow_index_tensors():
    a = rnd((300,))
    idx = np.array([255, 3, 200], np.uint8)
    check(Tensor(a)[Tensor(idx)], a[idx])
    check(Tensor(a)[Tensor(np.array([-1, 5], np.int8))], a[[-1, 5]])
    check(Tensor(a.reshape(1, 300)).gather(1, Tensor(idx.reshape(1, 3))), a[idx].reshape(1, 3))


def test_getitem_ints_are_basic_indexing():
    """Ints remove their dim before the index tensors are placed (torch, tinygrad; numpy counts ints as advanced
    indices): tensors adjacent once the ints are out keep their place, a None or a non-empty ellipsis between them
    sends their dims to the front, an empty ellipsis does not separate them."""
    a = np.arange(24).reshape(2, 3, 4)
    assert Tensor(a)[1, :, [1, 2]].shape == (3, 2)  # numpy: (2, 3)
    assert Tensor(a)[:, 0, [1, 2]].shape == (2, 2)
    for idx in [(slice(None), [0], ..., [0]), (slice(None), 0, ..., [1, 2]), (slice(None), [0], [0]),
                (..., [1], [0, 2]), (slice(None), 0, None, [0]), ([1], 0, [0, 3]), ([1], None, [0, 2]),
                ([0, 1], ..., [2])]:
        check(Tensor(a)[idx], torch_index(a, idx))
    b = np.arange(120).reshape(2, 3, 4, 5)
    idx = (None, 0, [[-1, 0]], ..., [[-3]], None, slice(None, -1, -1))
    check(Tensor(b)[idx], torch_index(b, idx))
    c = np.arange(2 * 5 * 6 * 5 * 3 * 4).reshape(2, 5, 6, 5, 3, 4)
    d = np.array([[4, 0], [-1, 2]])
    want = torch_index(c, (1, slice(None), slice(3, 11, 2), d, slice(0, 2)))
    assert want.shape == (5, 2, 2, 2, 2, 4) and want[0, 0, 0, 0, 0, 0] == c[1, 0, 3, 4, 0, 0]  # numpy: (2, 2, 5, ...)
    check(Tensor(c)[1, :, 3:11:2, Tensor(d), 0:2], want)


def test_getitem_lists_and_tuples():
    """torch's and tinygrad's reading of lists and tuples as indices."""
    a = np.arange(12).reshape(3, 4)
    x = Tensor(a)
    check(x[[0, 2]], a[[0, 2]])  # a list of ints: one index into dim 0
    check(x[(0, 1), :], a[[0, 1], :])  # a tuple inside the index: an index tensor
    check(x[(0, 1)], a[0, 1])  # the index itself a tuple: one index per dim (Python's own rule)
    check(x[[[0, 1], [1, 3]]], a[[0, 1], [1, 3]])  # a list of lists: one index per dim (tinygrad)
    check(x[((2,), (0,)), (1, 3)], a[[[2], [0]], [1, 3]])
    check(x[[True, False, 2]], a[[1, 0, 2]])  # bools among ints read as ints
    check(x[[]], a[np.array([], np.int64)])
    check(x[1, (3, 0)], a[1, [3, 0]])
    check(Tensor(np.float32(5))[None], np.array([5], np.float32))
    for bad in ([1.5], [True, False], [[0, 1], [2]]):
        with pytest.raises(IndexError):
            x[bad, :]
    with pytest.raises(IndexError):
        x[Tensor([0, 1]), Tensor([0, 1, 2])]  # index tensors that do not broadcast

