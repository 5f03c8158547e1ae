"""Weight files from outside: safetensors files are checked by the `safetensors` library, and a malformed one is one
StateFileError naming the file and the field at fault (issue 24, item 5: the hand-written reader took overlapping
offsets and `[2.7]` shapes and raised RecursionError/TypeError on others). The malformed files are written here with
struct and json, not by the library, so that the library's own writer cannot tidy them."""
from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from uopir import Tensor, dtypes
from uopir.nn.state import StateFileError, safe_load, safe_load_metadata, safe_save


def _raw(header: dict | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    """A file: the 8-byte header length (the true one unless `length` is given), the header, the data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def _t(dtype: str, shape: object, offsets: object) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


def _nested(depth: int) -> bytes:
    return b'{"__metadata__":{"a":' + b'{"a":' * depth + b'"x"' + b"}" * depth + b"}}"


# (case, the file's bytes, what the message must say besides the file's name, also refused by safe_load_metadata)
MALFORMED: list[tuple[str, bytes, str, bool]] = [
    ("empty file", b"", "the file is empty", True),
    ("truncated length", b"\x10\x00\x00", r"3 bytes, shorter than the 8-byte header length", True),
    ("header past the end", _raw(b"{}", length=100), r"header length 100 runs past the end of the file \(10 bytes\)",
     True),
    ("absurd header length", _raw(b"{}", length=2**62), f"header length {2**62} is over the limit", True),
    ("header not UTF-8", _raw(b'{"\xff": 1}'), "header is not UTF-8", True),
    ("header not JSON", _raw(b"{no}"), "header is not valid JSON", True),
    ("empty header", _raw(b""), "header is not valid JSON", True),
    ("header an array", _raw(b"[1, 2]"), "header is a JSON array, not an object", True),
    ("deeply nested header", _raw(b"[" * 100_000 + b"]" * 100_000), "header nests too deeply", True),
    ("deeply nested metadata", _raw(_nested(5000)), "header nests too deeply", True),
    ("metadata an array", _raw({"__metadata__": [1]}), "__metadata__ is a JSON array, not an object", True),
    ("metadata a string", _raw({"__metadata__": "x"}), "__metadata__ is a JSON string, not an object", True),
    ("metadata value a number", _raw({"__metadata__": {"epoch": 3}}), "__metadata__ value 'epoch' is a JSON number",
     True),
    ("tensor not an object", _raw({"w": [1]}, bytes(4)), "tensor 'w' is a JSON array, not an object", True),
    ("no dtype", _raw({"w": {"shape": [1], "data_offsets": [0, 4]}}, bytes(4)), "tensor 'w' has no dtype", True),
    ("dtype a number", _raw({"w": _t(7, [1], [0, 4])}, bytes(4)), "tensor 'w': dtype 7 is not a string", True),
    ("unknown dtype", _raw({"w": _t("F33", [1], [0, 4])}, bytes(4)), "tensor 'w' has dtype 'F33', which uopir cannot",
     True),
    ("dtype uopir lacks", _raw({"w": _t("F8_E4M3", [1], [0, 1])}, bytes(1)), "dtype 'F8_E4M3', which uopir cannot",
     False),
    ("float shape", _raw({"w": _t("F32", [2.7], [0, 8])}, bytes(8)), r"tensor 'w': shape \[2\.7\] is not a list", True),
    ("bool shape", _raw({"w": _t("F32", [True], [0, 4])}, bytes(4)), r"tensor 'w': shape \[True\] is not a list", True),
    ("string shape", _raw({"w": _t("F32", ["2"], [0, 8])}, bytes(8)), r"tensor 'w': shape \['2'\] is not a list",
     True),
    ("negative shape", _raw({"w": _t("F32", [-2], [0, 8])}, bytes(8)), r"tensor 'w': shape \[-2\] is not a list",
     True),
    ("shape not a list", _raw({"w": _t("F32", 2, [0, 8])}, bytes(8)), "tensor 'w': shape 2 is not a list", True),
    ("float offsets", _raw({"w": _t("F32", [1], [0.0, 4.0])}, bytes(4)), r"'w': data_offsets \[0\.0, 4\.0\] is not a",
     True),
    ("string offsets", _raw({"w": _t("F32", [1], ["0", "4"])}, bytes(4)), r"'w': data_offsets \['0', '4'\] is not a",
     True),
    ("bool offsets", _raw({"w": _t("U8", [1], [False, True])}, bytes(1)), r"'w': data_offsets \[False, True\] is not",
     True),
    ("negative offsets", _raw({"w": _t("F32", [1], [-4, 0])}, bytes(4)), r"'w': data_offsets \[-4, 0\] is not", True),
    ("three offsets", _raw({"w": _t("F32", [1], [0, 4, 8])}, bytes(8)), r"'w': data_offsets \[0, 4, 8\] is not", True),
    ("offsets reversed", _raw({"w": _t("F32", [0], [4, 0])}, bytes(4)), r"'w': data_offsets \[4, 0\] is not", True),
    ("shape and offsets disagree", _raw({"w": _t("F32", [3], [0, 8])}, bytes(8)),
     r"tensor 'w': shape \[3\] of F32 needs 12 bytes, its data_offsets \[0, 8\] hold 8", True),
    ("shape overflows", _raw({"w": _t("F32", [2**40] * 3, [0, 8])}, bytes(8)), "tensor 'w': shape .* needs", True),
    ("offsets overlap", _raw({"a": _t("F32", [1], [0, 4]), "b": _t("F32", [1], [0, 4])}, bytes(4)),
     r"tensor 'b': data_offsets \[0, 4\] overlap the bytes before 4", True),
    ("offsets overlap in part", _raw({"a": _t("F32", [2], [0, 8]), "b": _t("F32", [1], [4, 8])}, bytes(8)),
     r"tensor 'b': data_offsets \[4, 8\] overlap", True),
    ("offsets leave a gap", _raw({"a": _t("F32", [1], [0, 4]), "b": _t("F32", [1], [8, 12])}, bytes(12)),
     r"tensor 'b': data_offsets \[8, 12\] leave bytes 4\.\.8 unused", True),
    ("offsets past the data", _raw({"w": _t("F32", [2], [0, 8])}, bytes(4)),
     "data_offsets cover 8 bytes of data, the file holds 4", True),
    ("bytes after the data", _raw({"w": _t("F32", [1], [0, 4])}, bytes(12)),
     "data_offsets cover 4 bytes of data, the file holds 12", True),
    ("tensor named twice", _raw(b'{"w":' + json.dumps(_t("F32", [1], [0, 4])).encode() + b',"w":'
                                + json.dumps(_t("F32", [1], [0, 4])).encode() + b"}", bytes(4)),
     "the header has the key 'w' twice", True),
    ("metadata key twice", _raw(b'{"__metadata__": {"k": "1", "k": "2"}}'), "the header has the key 'k' twice", True),
    ("field twice", _raw(b'{"w": {"dtype": "F32", "dtype": "I32", "shape": [1], "data_offsets": [0, 4]}}', bytes(4)),
     "the header has the key 'dtype' twice", True),
]


@pytest.mark.parametrize("case,raw,says,metadata_too", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_file_is_one_clear_error(tmp_path: Path, case: str, raw: bytes, says: str,
                                           metadata_too: bool) -> None:
    fn = tmp_path / "w.safetensors"
    fn.write_bytes(raw)
    readers: list[Callable] = [safe_load, safe_load_metadata] if metadata_too else [safe_load]
    for read in readers:
        with pytest.raises(StateFileError, match=f"^{re.escape(str(fn))}: .*{says}"):
            read(fn)
    if not metadata_too:
        assert safe_load_metadata(fn) == {}


def test_header_over_the_size_cap(tmp_path: Path) -> None:
    """A header longer than the library's 100 MB cap is refused before it is read (a sparse file: no disk used)."""
    fn = tmp_path / "big.safetensors"
    with open(fn, "wb") as f:
        f.write(struct.pack("<Q", 100_000_001))
        f.truncate(8 + 100_000_001)
    with pytest.raises(StateFileError, match=f"^{re.escape(str(fn))}: the header length 100000001 is over the limit"):
        safe_load(fn)


def test_paths_that_are_not_files(tmp_path: Path) -> None:
    with pytest.raises(StateFileError, match=f"^{re.escape(str(tmp_path))}: is a folder, not a safetensors file"):
        safe_load(tmp_path)
    with pytest.raises(StateFileError, match="^/dev/null: is not a regular file"):
        safe_load_metadata("/dev/null")
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        safe_load(missing)
    with pytest.raises(OSError, match=f"^{re.escape(str(tmp_path))}: cannot write the safetensors file"):
        safe_save({"w": Tensor([1.0])}, tmp_path)
    assert issubclass(StateFileError, ValueError)


# every dtype uopir and safetensors share: (uopir dtype, numpy storage or None for bfloat16)
DTYPES = [(dtypes.float64, "<f8"), (dtypes.float32, "<f4"), (dtypes.float16, "<f2"), (dtypes.bfloat16, None),
          (dtypes.int64, "<i8"), (dtypes.int32, "<i4"), (dtypes.int16, "<i2"), (dtypes.int8, "i1"),
          (dtypes.uint64, "<u8"), (dtypes.uint32, "<u4"), (dtypes.uint16, "<u2"), (dtypes.uint8, "u1"),
          (dtypes.bool, "?")]
BF16_BITS = np.array([[0x3F80, 0xC040, 0x0000], [0x7F80, 0x3E20, 0xFF80]], np.uint16)  # 1, -3, 0, inf, .15625, -inf


def _values(st: str) -> np.ndarray:
    """Values that use each storage's range: the extremes, -1 / the top bit, fractions where the dtype has them."""
    d = np.dtype(st)
    if d.kind == "b":
        return np.array([[True, False, True], [False, False, True]])
    if d.kind == "f":
        return np.array([[0.5, -3.25, np.finfo(d).max], [np.finfo(d).tiny, -0.0, 1024.0]], d)
    info = np.iinfo(d)
    return np.array([[info.min, info.max, 0], [1, info.max // 3, info.min // 5 if info.min else 7]], d)


def _bf16_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_every_dtype_round_trips(tmp_path: Path) -> None:
    fn = tmp_path / "all.safetensors"
    ts = {d.name: Tensor(_bf16_float(BF16_BITS) if st is None else _values(st), dtype=d) for d, st in DTYPES}
    ts["scalar"], ts["empty"] = Tensor(np.array(-2.5, np.float32)), Tensor(np.zeros((0, 3), np.int8))
    safe_save(ts, fn, metadata={"epoch": "3", "note": "ünïcode, \"quotes\"\n"})
    back = safe_load(fn)
    assert sorted(back) == sorted(ts)
    for k, t in ts.items():
        assert back[k].dtype is t.dtype and back[k].shape == t.shape, k
        assert np.array_equal(back[k].numpy(), t.numpy()), k
    assert np.array_equal(back[dtypes.bfloat16.name].numpy(), _bf16_float(BF16_BITS))
    assert safe_load_metadata(fn) == {"epoch": "3", "note": "ünïcode, \"quotes\"\n"}


def test_library_files_load_and_ours_load_in_the_library(tmp_path: Path) -> None:
    """safetensors.numpy.save_file -> safe_load, and safe_save -> safetensors.numpy.load_file (numpy's dtypes)."""
    arrays = {np.dtype(st).name: _values(st) for _, st in DTYPES if st is not None}
    theirs = tmp_path / "theirs.safetensors"
    save_file(arrays, theirs, metadata={"who": "safetensors"})
    got = safe_load(theirs)
    assert safe_load_metadata(theirs) == {"who": "safetensors"}
    for d, st in DTYPES:
        if st is not None:
            t = got[np.dtype(st).name]
            assert t.dtype is d and np.array_equal(t.numpy(), arrays[np.dtype(st).name]), d
    ours = tmp_path / "ours.safetensors"
    safe_save({k: Tensor(a) for k, a in arrays.items()}, ours)
    back = load_file(ours)
    assert sorted(back) == sorted(arrays)
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and np.array_equal(back[k], a), k


def test_bfloat16_at_an_offset_and_header_order(tmp_path: Path) -> None:
    """A hand-written file whose header lists the tensors out of data order, with a bf16 tensor after an f32 one and
    a space-padded header: the values come from the right bytes and the dict follows the header."""
    f32 = np.array([1.5, -2.0, 3.0], "<f4")
    bits = np.array([0x4049, 0xBF80], "<u2")  # 3.140625, -1
    header = json.dumps({"b": _t("BF16", [2, 1], [12, 16]), "__metadata__": {"k": "v"},
                         "a": _t("F32", [3], [0, 12])}).encode() + b"   "
    fn = tmp_path / "hand.safetensors"
    fn.write_bytes(_raw(header, f32.tobytes() + bits.tobytes()))
    got = safe_load(fn)
    assert list(got) == ["b", "a"]
    assert got["b"].dtype is dtypes.bfloat16 and got["b"].numpy().tolist() == [[3.140625], [-1.0]]
    assert got["a"].numpy().tolist() == [1.5, -2.0, 3.0]


def test_the_library_is_imported_on_first_use() -> None:
    """`import uopir.nn.state` does not load safetensors; without the package, loading says what to install."""
    code = ("import sys, uopir, uopir.nn.state as s; assert 'safetensors' not in sys.modules\n"
            "sys.modules['safetensors'] = None\n"
            "try:\n    s.safe_load_metadata(sys.argv[1])\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, __file__], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install safetensors" in out.stdout
