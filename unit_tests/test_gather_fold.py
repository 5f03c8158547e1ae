"""Gathers and embeddings read one row per index: the frontend's one-hot pick over a lazy arange (`tensor.arange`,
the kernel's own loop index) and kernel-simplify's fold-one-hot rule, which turns the reduction over the table into
a load at the id. Semantics kept: negative ids count from the end (indexing, gather, ONNX Gather), an id out of
range reads 0 (and never reads out of bounds), every dtype arrives bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor, dtypes, nn
from uopir.dialects import kernel, tensor
from uopir.passes.kernel.simplify import simplify_kernel


def _ref_take(w: np.ndarray, idx: np.ndarray, axis: int = 0) -> np.ndarray:
    """numpy's take with the frontend's rules: a negative id counts from the end, one out of range reads 0."""
    n = w.shape[axis]
    j = np.where(idx < 0, idx + n, idx)
    ok = (j >= 0) & (j < n)
    got = np.take(w, np.where(ok, j, 0), axis=axis)
    shape = [1] * got.ndim
    shape[axis:axis + idx.ndim] = idx.shape
    return np.where(ok.reshape(shape), got, np.zeros((), w.dtype))


def _reduces_after_simplify(t: Tensor) -> int:
    (item,) = t.schedule()
    return sum(u.op is kernel.REDUCE for u in simplify_kernel(item.ast).toposort())


def test_arange_is_lazy_and_its_pick_folds() -> None:
    # no buffer for the arange, and after kernel-simplify no reduction over the table's 1000 rows is left
    ar = Tensor.arange(7)
    assert ar.uop.op is tensor.ARANGE and ar.numpy().tolist() == list(range(7))
    assert Tensor.arange(2, 11, 3, dtype=dtypes.int8).numpy().tolist() == [2, 5, 8]
    w = Tensor(np.zeros((1000, 4), np.float32))
    idx = Tensor(np.array([3, -1], np.int32))
    assert _reduces_after_simplify(w[idx]) == 0
    assert _reduces_after_simplify(w.gather(0, Tensor(np.zeros((2, 4), np.int64)))) == 0
    assert _reduces_after_simplify(nn.Embedding(1000, 4)(idx)) == 0


def test_out_of_range_and_negative_ids() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((10, 3)).astype(np.float32)
    w[4, 1] = -0.0
    idx = np.array([[0, 9, -1, -10, -11, 10, 4], [2**31 - 1, -2**31, 5, 3, -3, 12, 1]], np.int32)
    got = Tensor(w)[Tensor(idx)].numpy()
    want = _ref_take(w, idx)
    assert got.tobytes() == want.tobytes()  # bit for bit: -0.0 stays
    assert np.signbit(got[0, 6, 1]) and not got[0, 5].any()


@pytest.mark.parametrize("device", ["c", "llvm"])
def test_compiled_ids_far_out_of_range_read_in_bounds(device: str) -> None:
    w = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    idx = np.array([2**31 - 1, -2**31, 63, -64, 64, -65, 7, 10**9], np.int32)
    got = Tensor(w, device=device)[Tensor(idx, device=device)].numpy()
    np.testing.assert_array_equal(got, _ref_take(w, idx))
    empty = Tensor(np.zeros((0, 16), np.float32), device=device)  # no row to read: zeros
    np.testing.assert_array_equal(empty[Tensor(idx[:3], device=device)].numpy(), np.zeros((3, 16), np.float32))


def test_two_indexed_dims_int_table() -> None:
    t = np.arange(6 * 5 * 2, dtype=np.int64).reshape(6, 5, 2) * 7 - 100
    i = np.array([[0, 5, -1], [6, 2, -7]], np.int64)
    j = np.array([4, -5, 5], np.int64)
    got = Tensor(t)[Tensor(i), Tensor(j)].numpy()
    ii, jj = np.where(i < 0, i + 6, i), np.where(j < 0, j + 5, j)
    ok = ((ii >= 0) & (ii < 6) & (jj >= 0) & (jj < 5))[..., None]
    want = np.where(ok, t[np.clip(ii, 0, 5), np.clip(jj, 0, 4)], 0)
    np.testing.assert_array_equal(got, want)


def test_gather_middle_axis_f16_and_bool_tables() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 3)).astype(np.float16)
    idx = rng.integers(-7, 7, (2, 4, 3))
    got = Tensor(x).gather(1, Tensor(idx)).numpy()
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.take_along_axis(x, np.where(idx < 0, idx + 7, idx), 1))
    b = rng.random((9, 2)) < 0.5
    ids = np.array([8, 0, -2, 9, 3], np.int32)
    np.testing.assert_array_equal(Tensor(b)[Tensor(ids)].numpy(), _ref_take(b, ids))


def test_embedding_zero_rows_out_of_range_and_gradient() -> None:
    e = nn.Embedding(10, 4)
    w = e.weight.numpy()
    idx = np.array([[1, -1, 9, 10], [0, 3, 3, 2]], np.int32)
    ok = ((idx >= 0) & (idx < 10))[..., None]
    np.testing.assert_array_equal(e(Tensor(idx)).numpy(), np.where(ok, w[np.clip(idx, 0, 9)], 0))
    e.weight.requires_grad = True
    (e(Tensor(idx)) * 2).sum().backward()
    counts = np.bincount(idx[(idx >= 0) & (idx < 10)], minlength=10)
    np.testing.assert_array_equal(e.weight.grad.numpy(), np.repeat(2.0 * counts[:, None], 4, 1))


def test_onnx_gather_matches_onnxruntime() -> None:
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from uopir.onnx import from_onnx
    rng = np.random.default_rng(2)
    table = rng.standard_normal((500, 8)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gather", ["w", "ids"], ["y"], axis=0),
         helper.make_node("Gather", ["y", "col"], ["z"], axis=2)], "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, table.shape, table.ravel()),
         helper.make_tensor("col", TensorProto.INT64, [2], [-1, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"ids": np.array([[0, 499, -500], [-1, 250, 17]], np.int64)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = from_onnx(m, device="python").run(feeds)["z"]
    assert onnx is not None and got.shape == want.shape == (2, 3, 2)
    np.testing.assert_array_equal(got, want)


def test_pick_to_one_value_is_not_split_and_folds() -> None:
    # a scalar id into a 1M-element table: tensor-split-reduce leaves the pick whole (it folds into one load, so
    # partials would only add a kernel); no loop over the table's rows is left; the value is exact
    w = np.arange(1 << 20, dtype=np.float32)
    y = Tensor(w, device="c")[Tensor(np.array(-3), device="c")]
    progs = y.programs()
    assert len(progs) == 1
    loops = [u.src[0].arg for p in progs for u in p.program.toposort() if u.op.name == "device.loop"]
    assert loops == []  # before: loops over the table's rows
    assert y.item() == w[-3]
