"""uopir.nn.state.torch_load: PyTorch checkpoints read without torch, in every layout torch.save writes.

Files come from unit_tests/torch_checkpoints.py (torch's layouts, written without torch), from unit_tests/data/torch
(two small files torch 2.13 saved: the zip layout and the legacy stream), and, where torch is importable, from torch
itself at test time. A hostile pickle must be refused before it runs; a damaged file is one StateFileError naming it.
"""
from __future__ import annotations

import collections
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch_checkpoints as tc

from uopir import Tensor, dtypes, nn
from uopir.nn.state import StateFileError, load_state_dict, safe_save, torch_load

DATA = Path(__file__).parent / "data" / "torch"
SAVERS = {"zip": tc.save_zip, "stream": tc.save_stream, "tar": tc.save_tar}
# every torch dtype uopir has: (values, the uopir dtype torch_load gives); bfloat16 as its bits (1.5, -3, 0.15625)
DTYPES = {"float64": ([0.25, -1e300], dtypes.float64), "float32": ([1.5, -2.0], dtypes.float32),
          "float16": ([0.5, 65504.0], dtypes.float16), "bfloat16": ([0x3FC0, 0xC040, 0x3E20], dtypes.bfloat16),
          "int64": ([-(2**62), 7], dtypes.int64), "int32": ([-(2**31), 5], dtypes.int32),
          "int16": ([-300, 2], dtypes.int16), "int8": ([-128, 127], dtypes.int8), "uint8": ([0, 255], dtypes.uint8),
          "bool": ([True, False], dtypes.bool), "uint16": ([1, 65535], dtypes.uint16),
          "uint32": ([2**32 - 1, 3], dtypes.uint32), "uint64": ([2**64 - 1, 9], dtypes.uint64)}


def _bf16(bits: list[int]) -> list[float]:
    return (np.array(bits, np.uint32) << 16).view(np.float32).tolist()


def _views() -> tuple[dict[str, tc.View], dict[str, np.ndarray]]:
    """Tensors sharing one storage (a matrix, its transpose, an offset slice, a broadcast row) and what they hold."""
    st = tc.tensor(np.arange(12), "float32").storage
    m = np.arange(12, dtype=np.float32)
    views = {"w": tc.View(st, 0, (3, 4), (4, 1)), "t": tc.View(st, 0, (4, 3), (1, 4)),
             "s": tc.View(st, 5, (2, 3), (3, 1)), "b": tc.View(st, 2, (2, 3), (0, 2)),
             "e": tc.View(st, 12, (0, 2), (2, 1))}
    want = {"w": m.reshape(3, 4), "t": m.reshape(3, 4).T, "s": m[5:11].reshape(2, 3), "b": np.tile(m[2:7:2], (2, 1)),
            "e": np.zeros((0, 2), np.float32)}
    return views, want


@pytest.mark.parametrize("layout", SAVERS)
def test_views_of_one_storage_in_each_layout(tmp_path: Path, layout: str) -> None:
    views, want = _views()
    fn = tmp_path / "ckpt.pt"
    SAVERS[layout]({"model": collections.OrderedDict(views), "epoch": 3, "tag": b"\x00\xff"}, fn)
    got = torch_load(fn)
    assert set(got) == {"model", "epoch", "tag"} and got["epoch"] == 3 and got["tag"] == b"\x00\xff"
    assert isinstance(got["model"], collections.OrderedDict) and list(got["model"]) == list(views)
    for k, t in got["model"].items():
        assert isinstance(t, Tensor) and t.dtype is dtypes.float32 and t.shape == want[k].shape
        np.testing.assert_array_equal(t.numpy(), want[k])


@pytest.mark.parametrize("byteorder", ["little", "big", None])
def test_every_dtype_in_the_zip_layout(tmp_path: Path, byteorder: str | None) -> None:
    sd = {name: tc.tensor([vals], name) for name, (vals, _) in DTYPES.items()}
    sd["scalar"] = tc.tensor(np.float64(2.5), "float64")
    sd["p"] = tc.View(tc.tensor([4.0], "float32").storage, 0, (1,), (1,), parameter=True)
    sd["dt"] = tc.Global("torch", "float16")  # a torch.dtype value (as optimizer or AMP state may hold)
    fn = tmp_path / "d.pth"
    tc.save_zip(sd, fn, archive="some_model_name", byteorder=byteorder)  # no byteorder record: little (torch < 2.1)
    got = torch_load(fn)
    for name, (vals, d) in DTYPES.items():
        assert got[name].dtype is d, name
        assert got[name].numpy().tolist() == [_bf16(vals) if d is dtypes.bfloat16 else vals], name
    assert got["scalar"].shape == () and got["scalar"].numpy().tolist() == 2.5
    assert got["p"].numpy().tolist() == [4.0] and got["dt"] is dtypes.float16


@pytest.mark.parametrize("name", ["zip.pt", "stream.pt"])
def test_files_torch_saved(name: str) -> None:
    """unit_tests/data/torch/*.pt, saved by torch 2.13 (see the file list in this module's docstring)."""
    got = torch_load(DATA / name)
    assert got["epoch"] == 3
    sd = got["model"]
    base = np.arange(12, dtype=np.float32) / 4
    np.testing.assert_array_equal(sd["weight"].numpy(), base[:6].reshape(2, 3))
    np.testing.assert_array_equal(sd["bias"].numpy(), base[6:8])
    np.testing.assert_array_equal(sd["t"].numpy(), base.reshape(3, 4).T)
    assert sd["half"].dtype is dtypes.float16 and sd["half"].numpy().tolist() == [0.5, -2.0]
    assert sd["bf16"].dtype is dtypes.bfloat16 and sd["bf16"].numpy().tolist() == [1.5, -3.0]
    assert sd["steps"].dtype is dtypes.int64 and sd["steps"].shape == () and sd["steps"].numpy().tolist() == 7
    assert sd["mask"].numpy().tolist() == [True, False] and sd["p"].numpy().tolist() == [1.0, 1.0]
    if name == "zip.pt":  # uint16 goes through _rebuild_tensor_v3 (torch >= 2.3), zip layout only
        assert sd["u16"].dtype is dtypes.uint16 and sd["u16"].numpy().tolist() == [1, 65535]


def test_torch_saves_a_module_state_dict_we_load(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    torch.save(net.state_dict(), tmp_path / "net.pt")
    torch.save(net.state_dict(), tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    want = net(torch.from_numpy(x)).detach().numpy()

    class Net:
        def __init__(self) -> None:
            self.layers = [nn.Linear(3, 4), nn.Linear(4, 2)]

    for fn in ("net.pt", "old.pt"):
        sd = torch_load(tmp_path / fn)
        model = Net()
        load_state_dict(model, {f"layers.{k}": v for k, v in sd.items()})
        np.testing.assert_allclose(model.layers[1](model.layers[0](Tensor(x))).numpy(), want, rtol=1e-5, atol=1e-6)


def test_load_state_dict_takes_the_result(tmp_path: Path) -> None:
    w, b = np.arange(6, dtype=np.float32).reshape(2, 3) / 8, np.array([0.5, -1], np.float32)
    fn = tmp_path / "lin.pt"
    tc.save_zip(collections.OrderedDict(weight=tc.tensor(w), bias=tc.tensor(b)), fn)
    lin = nn.Linear(3, 2)
    load_state_dict(lin, torch_load(fn))
    x = np.array([[1, 2, 3]], np.float32)
    np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ w.T + b, rtol=1e-6)


def _hostile(fn: Path, payload: object) -> None:
    tc.save_zip({}, fn, data_pkl=tc.dumps({"model": payload})[0])


@pytest.mark.parametrize("payload, named", [
    (lambda m: tc.Call(tc.Global("os", "system"), (f"touch {m}",)), "os.system"),
    (lambda m: tc.Call(tc.Global("builtins", "eval"), (f"open({str(m)!r}, 'w')",)), "builtins.eval"),
    (lambda m: tc.Call(tc.Global("builtins", "getattr"), (tc.Global("os", "system"), "__call__")), "builtins.getattr"),
    (lambda m: tc.Call(tc.Global("torch.nn.modules.linear", "Linear"), (3, 2)), "torch.nn.modules.linear.Linear"),
])
def test_a_hostile_pickle_is_refused_unrun(tmp_path: Path, payload: object, named: str) -> None:
    marker = tmp_path / "ran"
    fn = tmp_path / "evil.pt"
    _hostile(fn, payload(marker))
    with pytest.raises(StateFileError, match=rf"evil\.pt: the pickle asks for {named}, .*refused without running it"):
        torch_load(fn)
    assert not marker.exists()


def test_a_rebuild_function_given_other_than_its_arguments_is_refused(tmp_path: Path) -> None:
    fn = tmp_path / "odd.pt"
    _hostile(fn, tc.Call(tc.Global("_codecs", "encode"), ("x", "rot13")))
    with pytest.raises(StateFileError, match=r"odd\.pt: the pickle calls _codecs.encode with .*rot13"):
        torch_load(fn)
    _hostile(fn, tc.Call(tc.Global("torch._utils", "_rebuild_tensor_v2"), ("not a storage", 0, (1,), (1,))))
    with pytest.raises(StateFileError, match=r"odd\.pt: a tensor is rebuilt from str 'not a storage'"):
        torch_load(fn)
    storage = tc.tensor([1.0]).storage
    _hostile(fn, tc.Call(tc.Global("torch._utils", "_rebuild_tensor_v2"), (storage, 0, (1,), (1,)), {"numpy": 1}))
    with pytest.raises(StateFileError, match=r"odd\.pt: the pickle sets the state of a tensor"):
        torch_load(fn)


def _damaged(tmp_path: Path, how: str) -> Path:
    fn = tmp_path / f"{how}.pt"
    views, _ = _views()
    if how == "truncated":
        tc.save_zip(views, fn)
        fn.write_bytes(fn.read_bytes()[:300])
    elif how == "magic":
        tc.save_stream(views, fn, magic=12345)
    elif how == "missing":
        tc.save_zip(views, fn, skip=("0",))
    elif how == "short":
        tc.save_zip({"w": tc.View(tc.tensor(np.arange(4), "float32").storage, 0, (2, 4), (4, 1))}, fn)
    elif how == "stream-cut":
        tc.save_stream(views, fn)
        fn.write_bytes(fn.read_bytes()[:-10])
    elif how == "empty":
        fn.write_bytes(b"")
    elif how == "safetensors":
        safe_save({"w": Tensor(np.ones(2, np.float32))}, fn)
    elif how == "pickle":
        fn.write_bytes(pickle.dumps({"w": [1.0]}, protocol=2))
    elif how == "no-data-pkl":
        with zipfile.ZipFile(fn, "w") as z:
            z.writestr("a/other.txt", "x")
    elif how == "huge-count":
        tc.save_stream(views, fn)
        data = fn.read_bytes()
        at = data.index((12).to_bytes(8, "little") + np.float32(0).tobytes())  # storage 0's element count
        fn.write_bytes(data[:at] + (2**60).to_bytes(8, "little") + data[at + 8:])
    elif how == "storage-type":
        tc.save_zip({}, fn, data_pkl=tc.dumps({"t": tc.Global("torch", "FloatStorage")})[0])
    elif how == "complex":
        tc.save_zip({"c": tc.tensor([1 + 2j], "complex64")}, fn)
    return fn


@pytest.mark.parametrize("how, said", [
    ("truncated", "a zip archive without its central directory"),
    ("magic", "a pickle that starts with int 12345, not torch's magic number"),
    ("missing", "storage '0' has no record archive/data/0 in the archive"),
    ("short", r"a tensor of shape \(2, 4\) \(offset 0, stride \(4, 1\)\) reaches element 7 of storage '0', which "
              "holds 4"),
    ("stream-cut", "the file ends inside the data of storage '0' \\(38 of 48 bytes\\)"),
    ("empty", "the file is empty"),
    ("safetensors", "it looks like a safetensors file: read it with safe_load"),
    ("pickle", "a pickle that starts with dict"),
    ("no-data-pkl", "a zip archive without one ARCHIVE/data.pkl record"),
    ("complex", "storage '0' holds complex64, which uopir cannot load"),
    ("huge-count", r"the file ends inside the data of storage '0' \(0 of 4611686018427387904 bytes\)"),
    ("storage-type", "the checkpoint holds torch.FloatStorage itself"),
])
def test_a_bad_file_is_one_error_naming_it(tmp_path: Path, how: str, said: str) -> None:
    fn = _damaged(tmp_path, how)
    with pytest.raises(StateFileError, match=rf"^{str(fn)}: .*{said}"):
        torch_load(fn)


def test_a_folder_or_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StateFileError, match="is a folder, not a PyTorch checkpoint"):
        torch_load(tmp_path)
    with pytest.raises(FileNotFoundError):
        torch_load(os.path.join(tmp_path, "nope.pt"))
