"""Write PyTorch checkpoint files without torch, byte for byte in torch.save's layouts, for the torch_load tests.

A tensor here is a View of a Storage (a 1-d numpy array named by a torch dtype); a checkpoint object is any nest of
dicts, lists, tuples and plain values holding Views. The pickles name torch's globals (torch._utils._rebuild_tensor_v2,
torch.FloatStorage, ...) as torch writes them, through Global, which pickles as a GLOBAL opcode without importing
anything; Call(Global(...), args) pickles as that global called with args (how a hostile file is made).
Writers: save_zip (torch >= 1.6), save_stream (the legacy stream: `_use_new_zipfile_serialization=False`) and
save_tar (torch < 0.1.10), each the layout uopir.nn.torch_load documents.
"""
from __future__ import annotations

import io
import pickle
import struct
import tarfile
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

MAGIC = 0x1950A86A20F9469CFC6C
# torch dtype name -> (its Storage class's name, numpy type of the stored elements); None: saved with _rebuild_tensor_v3
DTYPES = {"float64": ("Double", "f8"), "float32": ("Float", "f4"), "float16": ("Half", "f2"),
          "bfloat16": ("BFloat16", "u2"), "int64": ("Long", "i8"), "int32": ("Int", "i4"), "int16": ("Short", "i2"),
          "int8": ("Char", "i1"), "uint8": ("Byte", "u1"), "bool": ("Bool", "b1"), "uint16": (None, "u2"),
          "uint32": (None, "u4"), "uint64": (None, "u8"), "complex64": ("ComplexFloat", "c8")}


class Global:
    """A module-level name as a pickle refers to it (a GLOBAL opcode); nothing is imported."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> Any:  # the pickler only checks that a reduce function is callable
        raise AssertionError("a Global is only pickled")


@dataclass(eq=False)
class Call:
    """func(*args), as a pickle's REDUCE (then BUILD with state, when given)."""
    func: Global
    args: tuple
    state: Any = None

    def __reduce__(self) -> Any:
        return (self.func, self.args) if self.state is None else (self.func, self.args, self.state)


@dataclass(eq=False)
class Storage:
    """A torch storage: a flat array of one dtype (bfloat16: its bits as uint16)."""
    data: np.ndarray
    dtype: str
    key: str = ""


@dataclass(eq=False)
class View:
    """A tensor: shape, stride and offset (in elements) into a storage; parameter=True pickles as an nn.Parameter."""
    storage: Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    parameter: bool = False

    def numpy(self) -> np.ndarray:
        """What torch would load (bfloat16: its bits), for comparing."""
        a = self.storage.data
        return np.lib.stride_tricks.as_strided(a[self.offset:], self.shape, [s * a.itemsize for s in self.stride])


def tensor(values: Any, dtype: str = "float32") -> View:
    """A contiguous tensor of its own storage."""
    a = np.array(values, dtype=DTYPES[dtype][1], order="C")
    st = Storage(a.reshape(-1), dtype)
    return View(st, 0, a.shape, tuple(s // max(a.itemsize, 1) for s in a.strides))


def _tensor_reduce(v: View, stream: bool) -> Any:
    cls, _ = DTYPES[v.storage.dtype]
    hooks = Call(Global("collections", "OrderedDict"), ())
    if cls is None:
        args = (v.storage, v.offset, v.shape, v.stride, False, hooks, Global("torch", v.storage.dtype))
        red = Call(Global("torch._utils", "_rebuild_tensor_v3"), args)
    else:
        red = Call(Global("torch._utils", "_rebuild_tensor_v2"), (v.storage, v.offset, v.shape, v.stride, False, hooks))
    if v.parameter:
        red = Call(Global("torch._utils", "_rebuild_parameter"), (red, True, hooks))
    return red


class _Pickler(pickle._Pickler):  # the pure-Python pickler: its dispatch table can take Global
    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, f: io.BytesIO, stream: bool = False, keys: dict[int, str] | None = None) -> None:
        super().__init__(f, protocol=2)
        self.stream, self.storages, self.keys = stream, {}, keys

    def save_global_marker(self, obj: Global) -> None:
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())

    dispatch[Global] = save_global_marker

    def persistent_id(self, obj: Any) -> Any:
        if self.keys is not None:  # the tar layout: objects by key
            return self.keys.get(id(obj))
        if not isinstance(obj, Storage):
            return None
        if not obj.key:
            obj.key = str(len(self.storages))
        self.storages[obj.key] = obj
        cls, _ = DTYPES[obj.dtype]
        kind = Global("torch.storage", "UntypedStorage") if cls is None else Global("torch", cls + "Storage")
        numel = obj.data.nbytes if cls is None else obj.data.size
        return ("storage", kind, obj.key, "cpu", numel) + ((None,) if self.stream else ())

    def reducer_override(self, obj: Any) -> Any:
        return _tensor_reduce(obj, self.stream).__reduce__() if isinstance(obj, View) else NotImplemented


def dumps(obj: Any, stream: bool = False, keys: dict[int, str] | None = None) -> tuple[bytes, dict[str, Storage]]:
    """obj pickled as torch pickles it (protocol 2), and the storages it names, by key."""
    f = io.BytesIO()
    p = _Pickler(f, stream, keys)
    p.dump(obj)
    return f.getvalue(), p.storages


def _bytes(st: Storage, order: str = "<") -> bytes:
    a = st.data
    return a.astype(a.dtype.newbyteorder(order)).tobytes() if a.itemsize > 1 else a.tobytes()


def save_zip(obj: Any, path: Any, archive: str = "archive", byteorder: str | None = "little",
             data_pkl: bytes | None = None, skip: tuple[str, ...] = ()) -> None:
    """torch.save's zip layout (data_pkl: a pickle to write instead of obj's; skip: storage keys to leave out)."""
    pkl, storages = dumps(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{archive}/data.pkl", pkl if data_pkl is None else data_pkl)
        if byteorder is not None:
            z.writestr(f"{archive}/byteorder", byteorder)
        for key, st in storages.items():
            if key not in skip:
                z.writestr(f"{archive}/data/{key}", _bytes(st, "<" if byteorder != "big" else ">"))
        z.writestr(f"{archive}/version", "3\n")


def save_stream(obj: Any, path: Any, magic: int = MAGIC) -> None:
    """The legacy stream layout: magic, version, sys_info, the object, the sorted keys, each storage sized."""
    out = io.BytesIO()
    for head in (magic, 1001, {"protocol_version": 1001, "little_endian": True,
                               "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        pickle.dump(head, out, protocol=2)
    pkl, storages = dumps(obj, stream=True)
    out.write(pkl)
    keys = sorted(storages)
    pickle.dump(keys, out, protocol=2)
    for k in keys:
        out.write(struct.pack("<q", storages[k].data.size) + _bytes(storages[k]))
    with open(path, "wb") as f:
        f.write(out.getvalue())


def _views(obj: Any, out: list[View]) -> list[View]:
    if isinstance(obj, View):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _views(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _views(v, out)
    return out


def save_tar(obj: Any, path: Any) -> None:
    """The tar layout: members sys_info, pickle (tensors as persistent ids), storages and tensors."""
    views = list({id(v): v for v in _views(obj, [])}.values())
    roots = list({id(v.storage): v.storage for v in views}.values())
    skey = {id(s): 100 + i for i, s in enumerate(roots)}
    tkey = {id(v): 1000 + i for i, v in enumerate(views)}
    storages = io.BytesIO()
    pickle.dump(len(roots), storages, protocol=2)
    for s in roots:
        storages.write(dumps((skey[id(s)], "cpu", Global("torch", DTYPES[s.dtype][0] + "Storage")))[0])
        storages.write(struct.pack("<q", s.data.size) + _bytes(s))
    pickle.dump([], storages, protocol=2)
    tensors = io.BytesIO()
    pickle.dump(len(views), tensors, protocol=2)
    for v in views:
        kind = Global("torch", DTYPES[v.storage.dtype][0] + "Tensor")
        tensors.write(dumps((tkey[id(v)], skey[id(v.storage)], kind))[0])
        n = len(v.shape)
        tensors.write(struct.pack(f"<i4x{n}q{n}qq", n, *v.shape, *v.stride, v.offset))
    main, _ = dumps(obj, keys={id(v): str(tkey[id(v)]) for v in views})
    with tarfile.open(path, "w:", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("sys_info", pickle.dumps({"little_endian": True}, protocol=2)), ("pickle", main),
                           ("storages", storages.getvalue()), ("tensors", tensors.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

