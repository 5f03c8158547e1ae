"""uopir.nn.torch_load: read PyTorch checkpoints (.pt/.pth) without torch, building only tensors and plain values.

A checkpoint is a pickle whose tensors point at storages (flat arrays of one dtype) by a persistent id
('storage', StorageType, key, location, numel); a tensor is rebuilt from (storage, offset, size, stride). Three
layouts hold them (torch.serialization):
- zip (torch >= 1.6): ARCHIVE/data.pkl, each storage's bytes in ARCHIVE/data/KEY, ARCHIVE/byteorder ("little" or
  "big"; little when absent); ARCHIVE is any one top-level folder name (torch uses the file's stem or "archive").
- legacy stream (torch 0.4-1.5, and `_use_new_zipfile_serialization=False`): pickles of the magic number, the protocol
  version and a sys_info dict (its little_endian flag), the main pickle, the list of storage keys, then for each key
  in that order an 8-byte element count and the storage's bytes.
- tar (torch < 0.1.10): members `storages` (a count, then per storage a pickle (key, location, StorageType), a count
  and the bytes; then a pickle of storage views (key, root key, element offset, numel)), `tensors` (a count, then per
  tensor a pickle (key, storage key, TensorType) and its ndim, sizes, strides and offset as little-endian integers)
  and `pickle` (the object, whose persistent ids are the keys).
A pickle can call anything it names, so the unpickler resolves only the names a weight file needs: the tensor
rebuild functions, storage and dtype names (inert markers), collections.OrderedDict, set/frozenset and
_codecs.encode with latin1 (protocol 2's bytes). Any other name (os.system, builtins.eval, an nn.Module class) is a
StateFileError naming the file and the global, raised before anything is called. The rebuild functions return
placeholders; once every storage's bytes are known each becomes a uopir Tensor (values copied, strides and offsets
honoured, so views of one storage come out right), and containers keep their shape ({"model": sd, "epoch": 3}).
"""
from __future__ import annotations

import collections
import os
import pickle
import stat
import struct
import tarfile
import zipfile
import zlib
from typing import IO, Any

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import DType, dtypes
from uopir.nn.errors import StateFileError

__all__ = ["torch_load"]

_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER: the legacy stream's first pickle
# torch dtype name -> (uopir dtype, numpy storage type of its elements); bfloat16 is read as its 16 bits
_DTYPES: dict[str, tuple[DType, str]] = {
    "float64": (dtypes.float64, "f8"), "float32": (dtypes.float32, "f4"), "float16": (dtypes.float16, "f2"),
    "bfloat16": (dtypes.bfloat16, "u2"), "int64": (dtypes.int64, "i8"), "int32": (dtypes.int32, "i4"),
    "int16": (dtypes.int16, "i2"), "int8": (dtypes.int8, "i1"), "uint64": (dtypes.uint64, "u8"),
    "uint32": (dtypes.uint32, "u4"), "uint16": (dtypes.uint16, "u2"), "uint8": (dtypes.uint8, "u1"),
    "bool": (dtypes.bool, "b1"),
}
_ALIASES = {"double": "float64", "float": "float32", "half": "float16", "long": "int64", "int": "int32",
            "short": "int16"}
# torch.<Name>Storage (and the legacy torch.<Name>Tensor types) -> torch dtype name
_STORAGES = {"Double": "float64", "Float": "float32", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
             "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
             "ComplexDouble": "complex128", "ComplexFloat": "complex64", "QInt8": "qint8", "QUInt8": "quint8",
             "QInt32": "qint32", "QUInt4x2": "quint4x2", "QUInt2x4": "quint2x4"}


class _Refused(Exception):
    """A fault found while reading, as a message; torch_load adds the file's name and raises StateFileError."""


class _Marker:
    """What a storage, tensor-type or dtype global resolves to: a name, never callable, never built upon."""

    __slots__ = ("name", "kind", "dtype")

    def __init__(self, name: str, kind: str, dtype: str | None) -> None:
        self.name, self.kind, self.dtype = name, kind, dtype  # kind: storage, tensortype, dtype or type

    def __setstate__(self, state: Any) -> None:
        raise _Refused(f"the pickle sets the state of {self.name}")


class _Storage:
    """A storage named by the pickle: its dtype, element count and (once read) bytes, or a slice of a root storage."""

    __slots__ = ("key", "dtype", "numel", "raw", "root", "start")

    def __init__(self, key: str, dtype: str, numel: int) -> None:
        self.key, self.dtype, self.numel = key, dtype, numel
        self.raw: bytes | None = None
        self.root: _Storage | None = None
        self.start = 0  # in elements of root

    def __setstate__(self, state: Any) -> None:
        raise _Refused(f"the pickle sets the state of storage {self.key!r}")

    def elements(self, order: str) -> np.ndarray:
        """The storage's elements as a 1-d numpy array in native byte order (bfloat16: its bits)."""
        if self.root is not None:
            return self.root.elements(order)[self.start:self.start + self.numel]
        npt = _DTYPES[self.dtype][1] if self.dtype != "untyped" else "u1"
        item = np.dtype(npt).itemsize
        if self.raw is None:
            raise _Refused(f"storage {self.key!r} has no data in the file")
        if len(self.raw) < self.numel * item:
            raise _Refused(f"storage {self.key!r} holds {len(self.raw)} bytes, the pickle says {self.numel} elements "
                           f"of {self.dtype} ({self.numel * item} bytes)")
        return np.frombuffer(self.raw, order + npt if item > 1 else npt, self.numel).astype(npt, copy=False)


class _TensorRef:
    """A tensor the pickle rebuilds: a view (offset, size, stride in elements) of a storage; a Tensor at the end."""

    __slots__ = ("storage", "offset", "size", "stride", "dtype")

    def __init__(self, storage: Any, offset: Any, size: Any, stride: Any, dtype: str | None = None) -> None:
        if not isinstance(storage, _Storage):
            raise _Refused(f"a tensor is rebuilt from {_what(storage)}, not a storage")
        ints = (offset, *size, *stride) if isinstance(size, tuple | list) and isinstance(stride, tuple | list) else ()
        if not ints or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ints) \
                or len(size) != len(stride):
            raise _Refused(f"a tensor of storage {storage.key!r} has offset {offset!r}, size {size!r} and stride "
                           f"{stride!r}: not an offset and two lists of as many integers >= 0")
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)
        self.dtype = dtype or storage.dtype

    def __setstate__(self, state: Any) -> None:
        raise _Refused("the pickle sets the state of a tensor")

    def tensor(self, order: str, device: str | None) -> Tensor:
        st = self.storage
        if self.dtype not in _DTYPES:
            raise _Refused(f"storage {st.key!r} holds {self.dtype}, which uopir cannot load (known: "
                           f"{', '.join(_DTYPES)})")
        d, npt = _DTYPES[self.dtype]
        elems = st.elements(order)
        if st.dtype == "untyped":  # _rebuild_tensor_v3: a byte storage, the dtype beside it (in the file's order)
            item = np.dtype(npt).itemsize
            elems = elems[:len(elems) // item * item].view(order + npt if item > 1 else npt).astype(npt, copy=False)
        shape = f"a tensor of shape {self.size} (offset {self.offset}, stride {self.stride})"
        if 0 in self.size:
            arr = np.zeros(self.size, npt)
        else:
            last = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride, strict=True))
            if last >= len(elems):
                raise _Refused(f"{shape} reaches element {last} of storage {st.key!r}, which holds {len(elems)}")
            arr = np.lib.stride_tricks.as_strided(elems[self.offset:], self.size,
                                                  [s * elems.itemsize for s in self.stride], writeable=False)
        arr = np.array(arr, order="C")  # a copy (ascontiguousarray would make a 0-d tensor 1-d)
        if d is dtypes.bfloat16:  # uopir carries bfloat16 in float32 on the host: the bits are its top half
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return Tensor(arr, dtype=d, device=device)


def _what(v: Any) -> str:
    r = repr(v)
    return f"{type(v).__name__} {r if len(r) <= 40 else r[:37] + '...'}"


# ---- the names a checkpoint may use ---------------------------------------------------------------------------------
def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> _TensorRef:
    """torch._utils._rebuild_tensor(_v2): (storage, offset, size, stride[, requires_grad, hooks, metadata])."""
    return _TensorRef(storage, offset, size, stride)


def _rebuild_tensor_v3(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, hooks: Any,
                       dtype: Any, *_: Any) -> _TensorRef:
    """torch._utils._rebuild_tensor_v3: a byte storage and the dtype (uint16/32/64 and newer dtypes)."""
    if not isinstance(dtype, _Marker) or dtype.kind != "dtype":
        raise _Refused(f"_rebuild_tensor_v3 got the dtype {_what(dtype)}")
    return _TensorRef(storage, offset, size, stride, dtype.dtype)


def _rebuild_parameter(data: Any, *_: Any) -> Any:
    """torch._utils._rebuild_parameter(_with_state): an nn.Parameter is its tensor here."""
    if not isinstance(data, _TensorRef):
        raise _Refused(f"a Parameter is rebuilt from {_what(data)}, not a tensor")
    return data


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    """torch._tensor._rebuild_from_type_v2: a Tensor or Parameter rebuilt by one of the functions above."""
    if func not in (_rebuild_tensor, _rebuild_tensor_v3, _rebuild_parameter) or not isinstance(args, tuple):
        raise _Refused(f"_rebuild_from_type_v2 got the function {_what(func)}")
    if not isinstance(new_type, _Marker) or new_type.name not in ("torch.Tensor", "torch.nn.parameter.Parameter"):
        raise _Refused(f"_rebuild_from_type_v2 got the type {_what(new_type)}")
    return func(*args)


def _encode(text: Any, encoding: Any = "utf-8") -> bytes:
    """_codecs.encode as protocol 2 pickles bytes: only (str, 'latin1')."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused(f"the pickle calls _codecs.encode with {_what(text)}, {_what(encoding)}")
    return text.encode("latin1")


_FUNCTIONS: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor, ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("collections", "OrderedDict"): collections.OrderedDict, ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset, ("_codecs", "encode"): _encode, ("torch", "Size"): tuple,
}


def _marker(module: str, name: str) -> _Marker | None:
    """The inert marker for a storage type, legacy tensor type or dtype global; None for any other name."""
    full = f"{module}.{name}"
    if module in ("torch", "torch.cuda") and name.endswith(("Storage", "Tensor")):
        base = name.removesuffix("Storage").removesuffix("Tensor")
        if base in _STORAGES:
            return _Marker(full, "storage" if name.endswith("Storage") else "tensortype", _STORAGES[base])
    if full in ("torch.UntypedStorage", "torch.storage.UntypedStorage"):
        return _Marker(full, "storage", "untyped")
    if module == "torch" and (name in _DTYPES or name in _ALIASES or name.startswith(("float8", "complex", "qint",
                                                                                       "quint"))):
        return _Marker(full, "dtype", _ALIASES.get(name, name))
    if full in ("torch.Tensor", "torch.nn.parameter.Parameter"):
        return _Marker(full, "type", None)
    return None


class _Unpickler(pickle.Unpickler):
    """pickle's unpickler with every global resolved from the tables above (anything else refused, unrun)."""

    def __init__(self, f: IO[bytes], persistent: Any = None) -> None:
        super().__init__(f)
        self._persistent = persistent

    def find_class(self, module: str, name: str) -> Any:
        fn = _FUNCTIONS.get((module, name))
        if fn is not None:
            return fn
        m = _marker(module, name)
        if m is None:
            raise _Refused(f"the pickle asks for {module}.{name}, which is not a tensor, storage or container; refused "
                           "without running it (torch_load builds only tensors, OrderedDicts and plain values)")
        return m

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise _Refused(f"a pickle that names no storage has the persistent id {_what(pid)}")
        return self._persistent(pid)


def _unpickle(f: IO[bytes], persistent: Any = None) -> Any:
    return _Unpickler(f, persistent).load()


class _Storages:
    """The storages one file's pickle names, by key (one _Storage per key, however often it is named)."""

    def __init__(self) -> None:
        self.by_key: dict[str, _Storage] = {}

    def named(self, pid: Any) -> _Storage:
        """persistent_load of the zip and legacy-stream layouts: ('storage', type, key, location, numel[, view])."""
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise _Refused(f"the persistent id {_what(pid)} is not ('storage', type, key, location, numel)")
        kind, key, numel = pid[1], pid[2], pid[4]
        if not isinstance(kind, _Marker) or kind.kind != "storage":
            raise _Refused(f"storage {key!r} has the type {_what(kind)}, not a storage type")
        if not isinstance(key, str) or not isinstance(numel, int) or isinstance(numel, bool) or numel < 0:
            raise _Refused(f"the persistent id {_what(pid)} has no string key and element count")
        st = self.by_key.get(key)
        if st is None:
            st = self.by_key[key] = _Storage(key, kind.dtype, numel)
        elif st.dtype != kind.dtype:
            raise _Refused(f"storage {key!r} is named as {st.dtype} and as {kind.dtype}")
        view = pid[5] if len(pid) == 6 else None
        if view is None:
            return st
        if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[0], str)
                and all(isinstance(v, int) and v >= 0 for v in view[1:])):
            raise _Refused(f"storage {key!r} has the view {_what(view)}, not (key, offset, numel)")
        sub = _Storage(view[0], st.dtype, view[2])
        sub.root, sub.start = st, view[1]
        if view[1] + view[2] > st.numel:
            raise _Refused(f"view {view[0]!r} of storage {key!r} ends at element {view[1] + view[2]}, past its "
                           f"{st.numel}")
        return sub


# ---- the three layouts ----------------------------------------------------------------------------------------------
def _load_zip(path: str) -> tuple[Any, str]:
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        pkls = [n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")]
        if len(pkls) != 1:
            raise _Refused("a zip archive without one ARCHIVE/data.pkl record: not a PyTorch checkpoint" if not pkls
                           else f"the archive holds {len(pkls)} data.pkl records ({', '.join(pkls[:3])})")
        prefix = pkls[0].removesuffix("data.pkl")
        order = "<"
        if prefix + "byteorder" in names:
            text = z.read(prefix + "byteorder")
            if text not in (b"little", b"big"):
                raise _Refused(f"the record {prefix}byteorder says {text[:20]!r}, not little or big")
            order = "<" if text == b"little" else ">"
        storages = _Storages()
        with z.open(pkls[0]) as f:
            obj = _unpickle(f, storages.named)
        for key, st in storages.by_key.items():
            rec = f"{prefix}data/{key}"
            if rec not in names:
                raise _Refused(f"storage {key!r} has no record {rec} in the archive")
            st.raw = z.read(rec)
    return obj, order


def _load_stream(f: IO[bytes]) -> tuple[Any, str]:
    """The legacy layout: magic, protocol version, sys_info, the object, the storage keys, then the storages."""
    magic = _unpickle(f)
    if magic != _MAGIC:
        raise _Refused(f"a pickle that starts with {_what(magic)}, not torch's magic number: not a PyTorch checkpoint")
    version = _unpickle(f)
    if version != 1001:
        raise _Refused(f"the legacy protocol version is {_what(version)}, not 1001")
    info = _unpickle(f)
    order = "<" if not isinstance(info, dict) or info.get("little_endian", True) else ">"
    storages = _Storages()
    obj = _unpickle(f, storages.named)
    keys = _unpickle(f)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise _Refused(f"the list of storage keys is {_what(keys)}")
    for key in keys:
        st = storages.by_key.get(key)
        if st is None:
            raise _Refused(f"the file has data for storage {key!r}, which the pickle does not name")
        n, st.raw = _sized_block(f, key, st.dtype, order, os.fstat(f.fileno()).st_size)
        if n != st.numel:
            raise _Refused(f"storage {key!r} has {n} elements in the file, the pickle says {st.numel}")
    return obj, order


def _sized_block(f: IO[bytes], key: str, dtype: str, order: str, size: int) -> tuple[int, bytes]:
    """A storage as torch writes it to a stream: its element count (8 bytes), then its bytes (of a stream of `size`
    bytes: a count past its end is refused before anything is allocated for it)."""
    if dtype not in _DTYPES and dtype != "untyped":
        raise _Refused(f"storage {key!r} holds {dtype}, which uopir cannot load (known: {', '.join(_DTYPES)})")
    head = f.read(8)
    if len(head) < 8:
        raise _Refused(f"the file ends before the data of storage {key!r}")
    n = struct.unpack(order + "q", head)[0]
    item = np.dtype(_DTYPES[dtype][1]).itemsize if dtype in _DTYPES else 1
    raw = f.read(n * item) if 0 <= n * item <= size else b""
    if n < 0 or len(raw) < n * item:
        raise _Refused(f"the file ends inside the data of storage {key!r} ({len(raw)} of {n * item} bytes)")
    return n, raw


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    try:
        f = tar.extractfile(name)
    except KeyError:
        f = None
    if f is None:
        raise _Refused(f"the tar archive has no {name!r} member: not a PyTorch checkpoint")
    return f


def _load_tar(path: str) -> tuple[Any, str]:
    with tarfile.open(path, "r:") as tar:
        objects: dict[int, Any] = {}
        f = _member(tar, "storages")
        for _ in range(_count(_unpickle(f), "storages")):
            rec = _unpickle(f)
            if not (isinstance(rec, tuple) and len(rec) == 3 and isinstance(rec[0], int)
                    and isinstance(rec[2], _Marker) and rec[2].kind == "storage"):
                raise _Refused(f"the storage record {_what(rec)} is not (key, location, StorageType)")
            n, raw = _sized_block(f, str(rec[0]), rec[2].dtype, "<", tar.getmember("storages").size)
            st = objects[rec[0]] = _Storage(str(rec[0]), rec[2].dtype, n)
            st.raw = raw
        for view in _unpickle(f):
            if not (isinstance(view, tuple) and len(view) == 4 and view[1] in objects
                    and all(isinstance(v, int) and v >= 0 for v in view[2:])
                    and view[2] + view[3] <= objects[view[1]].numel):
                raise _Refused(f"the storage view {_what(view)} is not (key, root key, offset, numel) inside its root")
            root = objects[view[1]]
            sub = _Storage(str(view[0]), root.dtype, view[3])
            sub.root, sub.start = root, view[2]
            objects[view[0]] = sub
        f = _member(tar, "tensors")
        for _ in range(_count(_unpickle(f), "tensors")):
            rec = _unpickle(f)
            if not (isinstance(rec, tuple) and len(rec) == 3 and rec[1] in objects):
                raise _Refused(f"the tensor record {_what(rec)} is not (key, storage key, TensorType) of a storage")
            meta = f.read(8)
            ndim = struct.unpack("<i", meta[:4])[0] if len(meta) == 8 else -1
            if not 0 <= ndim <= 64:
                raise _Refused(f"tensor {rec[0]!r} has no valid dimension count")
            nums = f.read(8 * (2 * ndim + 1))
            if len(nums) < 8 * (2 * ndim + 1):
                raise _Refused(f"the file ends inside the shape of tensor {rec[0]!r}")
            vals = struct.unpack(f"<{2 * ndim + 1}q", nums)
            objects[rec[0]] = _TensorRef(objects[rec[1]], vals[-1], vals[:ndim], vals[ndim:2 * ndim])

        def named(pid: Any) -> Any:
            try:
                return objects[int(pid)]
            except (KeyError, ValueError, TypeError):
                raise _Refused(f"the pickle names the object {_what(pid)}, which the archive does not hold") from None

        return _unpickle(_member(tar, "pickle"), named), "<"


def _count(n: Any, what: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _Refused(f"the number of {what} is {_what(n)}")
    return n


# ---- the result -----------------------------------------------------------------------------------------------------
def _resolve(obj: Any, order: str, device: str | None, memo: dict[int, Any]) -> Any:
    """obj with each placeholder made its Tensor (or dtype); dicts and lists in place, tuples and sets anew."""
    i = id(obj)
    if i in memo:
        return memo[i]
    if isinstance(obj, _TensorRef):
        out: Any = obj.tensor(order, device)
    elif isinstance(obj, _Marker):
        if obj.kind != "dtype" or obj.dtype not in _DTYPES:
            raise _Refused(f"the checkpoint holds {obj.name} itself, which uopir has no value for")
        out = _DTYPES[obj.dtype][0]
    elif isinstance(obj, _Storage):
        raise _Refused(f"the checkpoint holds storage {obj.key!r} itself, not a tensor of it")
    elif isinstance(obj, dict):
        memo[i] = obj
        for k, v in obj.items():
            if isinstance(k, _TensorRef | _Marker | _Storage):
                raise _Refused("a dict in the checkpoint has a tensor or storage as a key")
            obj[k] = _resolve(v, order, device, memo)
        return obj
    elif isinstance(obj, list):
        memo[i] = obj
        obj[:] = [_resolve(v, order, device, memo) for v in obj]
        return obj
    elif isinstance(obj, tuple | set | frozenset):
        out = type(obj)(_resolve(v, order, device, memo) for v in obj)
    else:
        out = obj
    memo[i] = out
    return out


def torch_load(fn: str | os.PathLike, device: str | None = None) -> Any:
    """The object a PyTorch checkpoint holds (usually a state dict), each tensor a uopir Tensor, without torch.

    Reads the zip, legacy-stream and tar layouts of torch.save; builds only tensors, OrderedDicts and plain values.
    A file it cannot read or refuses (a hostile or damaged pickle, a truncated archive, a missing storage, a dtype
    uopir lacks) is one StateFileError naming the file and the fault; a missing file is FileNotFoundError."""
    path = os.fspath(fn)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise StateFileError(f"{path}: is {'a folder' if stat.S_ISDIR(mode) else 'not a regular file'}, not a "
                             "PyTorch checkpoint")
    f = open(path, "rb")  # closed by the `with` below; a file that cannot be opened is its own OSError, naming it
    try:
        with f:
            head = f.read(512)
            is_zip = zipfile.is_zipfile(f)
            f.seek(0)
            if is_zip:
                obj, order = _load_zip(path)
            elif head.startswith(b"PK\x03\x04"):
                raise _Refused("a zip archive without its central directory (truncated or damaged?)")
            elif head[257:262] == b"ustar":
                obj, order = _load_tar(path)
            elif head[:1] == b"\x80":
                obj, order = _load_stream(f)
            else:
                raise _Refused(_not_a_checkpoint(head))
        return _resolve(obj, order, device, {})
    except _Refused as e:
        raise StateFileError(f"{path}: {e}") from None
    except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error, struct.error,
            ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError,
            MemoryError, NotImplementedError, OSError) as e:  # zipfile: an unknown method, a seek before the start
        if isinstance(e, StateFileError):
            raise
        what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise StateFileError(f"{path}: damaged or not a PyTorch checkpoint ({what[:200]})") from None


def _not_a_checkpoint(head: bytes) -> str:
    if not head:
        return "the file is empty, not a PyTorch checkpoint"
    if len(head) >= 9 and head[8:9] == b"{":
        return "not a PyTorch checkpoint (it looks like a safetensors file: read it with safe_load)"
    return (f"not a PyTorch checkpoint: it starts with {head[:8]!r}, not a zip archive, a tar archive or a "
            "pickle")

