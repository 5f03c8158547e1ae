"""uopir.nn.state: load_state_dict's checks, and safetensors files both ways with the `safetensors` package."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from safetensors import TensorSpec, deserialize, serialize

from uopir import Tensor, dtypes, nn
from uopir.nn.state import (
    get_parameters,
    get_state_dict,
    load_state_dict,
    safe_load,
    safe_load_metadata,
    safe_save,
    tar_extract,
)

# every dtype safetensors and uopir share: (safetensors name, uopir dtype, numpy storage of the values below)
DTYPES = [("F64", dtypes.float64, "<f8"), ("F32", dtypes.float32, "<f4"), ("F16", dtypes.float16, "<f2"),
          ("BF16", dtypes.bfloat16, None), ("I64", dtypes.int64, "<i8"), ("I32", dtypes.int32, "<i4"),
          ("I16", dtypes.int16, "<i2"), ("I8", dtypes.int8, "i1"), ("U64", dtypes.uint64, "<u8"),
          ("U32", dtypes.uint32, "<u4"), ("U16", dtypes.uint16, "<u2"), ("U8", dtypes.uint8, "u1"),
          ("BOOL", dtypes.bool, "?")]
VALUES = np.array([[0, 1, 2], [3, 100, 7]])
BF16_BITS = np.array([[0x3F80, 0xC040, 0x0000], [0x7F80, 0x3E20, 0x4700]], np.uint16)  # 1, -3, 0, inf, .15625, 32768


def _bf16_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _tensors() -> dict[str, Tensor]:
    out = {}
    for name, d, st in DTYPES:
        if d is dtypes.bfloat16:
            out[name.lower()] = Tensor(_bf16_float(BF16_BITS), dtype=d)
        else:
            out[name.lower()] = Tensor(VALUES.astype(st) if d is not dtypes.bool else VALUES % 2 == 1, dtype=d)
    out["scalar"] = Tensor(np.array(2.5, np.float32))
    out["empty"] = Tensor(np.zeros((0, 3), np.float32))
    return out


def test_safetensors_reads_what_we_write(tmp_path: Path) -> None:
    fn = tmp_path / "w.safetensors"
    safe_save(_tensors(), fn, metadata={"format": "uopir", "epoch": "3"})
    got = dict(deserialize(fn.read_bytes()))
    for name, d, st in DTYPES:
        info = got[name.lower()]
        assert info["dtype"] == name and info["shape"] == [2, 3]
        if d is dtypes.bfloat16:
            assert np.frombuffer(info["data"], "<u2").reshape(2, 3).tolist() == BF16_BITS.tolist()
        else:
            want = VALUES % 2 == 1 if d is dtypes.bool else VALUES.astype(st)
            assert np.frombuffer(info["data"], st).reshape(2, 3).tolist() == want.tolist()
    assert got["scalar"]["shape"] == [] and np.frombuffer(got["scalar"]["data"], "<f4").tolist() == [2.5]
    assert got["empty"]["shape"] == [0, 3] and len(got["empty"]["data"]) == 0
    from safetensors import safe_open  # the package's numpy loader (numpy has no bfloat16: read raw above)
    with safe_open(str(fn), framework="numpy") as f:
        assert f.metadata() == {"format": "uopir", "epoch": "3"}
        assert f.get_tensor("f16").dtype == np.float16 and f.get_tensor("i64").tolist() == VALUES.tolist()
    assert safe_load_metadata(fn) == {"format": "uopir", "epoch": "3"}


def test_we_read_what_safetensors_writes(tmp_path: Path) -> None:
    arrays = {}
    for name, d, st in DTYPES:
        arrays[name.lower()] = (BF16_BITS if d is dtypes.bfloat16 else VALUES % 2 == 1 if d is dtypes.bool
                                else VALUES.astype(st))
    names = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "bool": "bool", "i64": "int64",
             "i32": "int32", "i16": "int16", "i8": "int8", "u64": "uint64", "u32": "uint32", "u16": "uint16",
             "u8": "uint8"}
    arrays = {k: np.ascontiguousarray(a) for k, a in arrays.items()}  # alive while serialize reads their memory
    specs = {k: TensorSpec(dtype=names[k], shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
             for k, a in arrays.items()}
    fn = tmp_path / "theirs.safetensors"
    fn.write_bytes(serialize(specs, {"who": "safetensors"}))
    got = safe_load(fn)
    assert safe_load_metadata(fn) == {"who": "safetensors"}
    for name, d, _ in DTYPES:
        t = got[name.lower()]
        assert t.dtype is d and t.shape == (2, 3)
        want = _bf16_float(BF16_BITS) if d is dtypes.bfloat16 else arrays[name.lower()]
        assert np.array_equal(t.numpy(), want), name


class _Net:
    def __init__(self) -> None:
        self.l1 = nn.Linear(3, 4)
        self.l2 = nn.Linear(4, 2, bias=False)


def test_load_state_dict_copies_in_place_and_checks_keys(tmp_path: Path) -> None:
    src, dst = _Net(), _Net()
    assert len(get_parameters(src)) == 3 and get_parameters(src)[0] is src.l1.weight
    fn = tmp_path / "net.safetensors"
    safe_save(get_state_dict(src), fn)
    buf = dst.l1.weight.uop
    load_state_dict(dst, safe_load(fn))
    assert dst.l1.weight.uop is buf  # assigned into the model's own buffer
    for k, t in get_state_dict(dst).items():
        assert np.array_equal(t.numpy(), get_state_dict(src)[k].numpy()), k
    sd = get_state_dict(src)
    with pytest.raises(KeyError, match=r"missing keys \(in the model, not in the state dict\): l2.weight"):
        load_state_dict(dst, {k: v for k, v in sd.items() if k != "l2.weight"})
    with pytest.raises(KeyError, match=r"unexpected keys .*: extra"):
        load_state_dict(dst, {**sd, "extra": Tensor([1.0])})
    with pytest.raises(ValueError, match=r"Shape mismatch in layer `l1.bias`: Expected shape \(4,\), but found \(5,\)"):
        load_state_dict(dst, {**sd, "l1.bias": Tensor(np.zeros(5, np.float32))})
    before = dst.l2.weight.numpy()
    new_bias = np.arange(4, dtype=np.float64)  # a float64 value is cast to the model's float32
    load_state_dict(dst, {"l1.bias": Tensor(new_bias), "extra": Tensor([1.0])}, strict=False)
    assert dst.l1.bias.dtype is dtypes.float32 and dst.l1.bias.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert np.array_equal(dst.l2.weight.numpy(), before)


def test_load_state_dict_returns_what_it_loaded_and_can_consume_or_defer() -> None:
    """tinygrad's signature: the loaded tensors are returned, consume=True empties the source dict as it goes,
    realize=False leaves the assigns pending (the values appear when realized)."""
    net = _Net()
    sd = {k: Tensor(np.full(t.shape, 3.0, np.float32)) for k, t in get_state_dict(net).items()}
    loaded = load_state_dict(net, sd, consume=True, realize=False)
    assert loaded == list(get_state_dict(net).values()) and sd == {}
    Tensor.realize_all(*loaded)
    assert all((t.numpy() == 3.0).all() for t in loaded)


def test_get_state_dict_collects_another_tensor_type() -> None:
    """tensor_type (tinygrad's): walk a container of foreign arrays, as a test compares a torch checkpoint's."""
    ckpt = {"model": {"w": np.zeros(2), "layers": [np.ones(1)]}, "step": 3}
    sd = get_state_dict(ckpt, tensor_type=np.ndarray)
    assert list(sd) == ["model.w", "model.layers.0"] and sd["model.layers.0"].tolist() == [1.0]



def test_tar_extract_reads_regular_files_from_a_path_or_bytes(tmp_path: Path) -> None:
    """tinygrad's tar_extract: member name -> uint8 tensor of its bytes; directories and links are left out."""
    files = {"a/w.bin": bytes(range(7)), "empty": b"", "long": b"xy" * 300}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folder = tarfile.TarInfo("a")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("w.lnk")
        link.type, link.linkname = tarfile.SYMTYPE, "a/w.bin"
        tar.addfile(link)
    (tmp_path / "t.tar").write_bytes(buf.getvalue())
    for src in (tmp_path / "t.tar", Tensor(buf.getvalue())):
        got = tar_extract(src)
        assert set(got) == set(files)
        for name, data in files.items():
            assert got[name].dtype is dtypes.uint8 and got[name].numpy().tobytes() == data
    (tmp_path / "bad.tar").write_bytes(b"not a tar file" * 50)
    with pytest.raises(tarfile.ReadError, match=r"tar_extract: .*bad.tar is not a tar archive"):
        tar_extract(tmp_path / "bad.tar")
    with pytest.raises(FileNotFoundError):
        tar_extract(tmp_path / "missing.tar")
