"""uopir.nn.state: find a model's tensors, load weights into it, and save/load them in the safetensors format.

get_state_dict walks an object (its attributes, dicts, lists, tuples, namedtuples) and names each Tensor it finds by
its path ("layers.0.weight"), iteratively and in attribute order; get_parameters is its values without repeats.
load_state_dict assigns each value into the model's tensor in place (cast to the model's dtype) and realizes them all
as one program; shapes must match, and with strict=True (the default) so must the key sets.

safetensors (written by this module, no dependency): an 8-byte little-endian header length N, N bytes of JSON
{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with spaces
to a multiple of 8, then the tensors' bytes (C order, little endian) at those offsets. bfloat16 is stored as its
16 bits (uopir carries it in float32 on the host; the carrier's low bits are zero, so no rounding happens).
"""
from __future__ import annotations

import json
import math
import os
import struct
from collections import OrderedDict
from typing import Any

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import DType, dtypes

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata"]

_SAFE_DTYPES: dict[str, DType] = {
    "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
    "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
    "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8, "BOOL": dtypes.bool,
}
_SAFE_NAMES = {d: n for n, d in _SAFE_DTYPES.items()}
_NP = {dtypes.float64: "<f8", dtypes.float32: "<f4", dtypes.float16: "<f2", dtypes.bfloat16: "<u2",
       dtypes.int64: "<i8", dtypes.int32: "<i4", dtypes.int16: "<i2", dtypes.int8: "i1",
       dtypes.uint64: "<u8", dtypes.uint32: "<u4", dtypes.uint16: "<u2", dtypes.uint8: "u1", dtypes.bool: "?"}


# ---- walking a model ------------------------------------------------------------------------------------------------
def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from obj, by dotted path, in attribute order (an object met twice is walked once)."""
    out: dict[str, Tensor] = {}
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [(prefix, obj)]
    while stack:
        name, o = stack.pop()
        if isinstance(o, Tensor):
            out[name] = o
            continue
        if id(o) in seen:
            continue
        if hasattr(o, "_asdict") and isinstance(o, tuple):  # a namedtuple
            items = list(o._asdict().items())
        elif isinstance(o, dict):
            items = list(o.items())
        elif isinstance(o, list | tuple):
            items = list(enumerate(o))
        elif hasattr(o, "__dict__") and not isinstance(o, type):
            items = list(vars(o).items())
        else:
            continue
        seen.add(id(o))
        stack.extend((f"{name}.{k}" if name else str(k), v) for k, v in reversed(items))
    return out


def get_parameters(obj: Any) -> list[Tensor]:
    """The Tensors of get_state_dict(obj), each once."""
    out: list[Tensor] = []
    seen: set[int] = set()
    for t in get_state_dict(obj).values():
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = False) -> None:
    """Assign state_dict's tensors into the model's (in place, cast to the model's dtype, moved to its device).

    strict: the key sets must match (KeyError naming the missing and unexpected keys); else the model's tensors
    without a value keep theirs and extra values are ignored. A shape mismatch is always a ValueError."""
    own = get_state_dict(model)
    missing = [k for k in own if k not in state_dict]
    extra = [k for k in state_dict if k not in own]
    if strict and (missing or extra):
        parts = []
        if missing:
            parts.append(f"missing keys (in the model, not in the state dict): {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected keys (in the state dict, not in the model): {', '.join(extra)}")
        raise KeyError("load_state_dict(strict=True): " + "; ".join(parts))
    bad = [f"{k}: model {tuple(t.shape)}, state dict {tuple(state_dict[k].shape)}" for k, t in own.items()
           if k in state_dict and tuple(state_dict[k].shape) != tuple(t.shape)]
    if bad:
        raise ValueError("load_state_dict: shapes differ for " + "; ".join(bad))
    targets = []
    for k, t in own.items():
        if k not in state_dict:
            if verbose:
                print(f"load_state_dict: {k} not in the state dict, kept")
            continue
        v = state_dict[k]
        if not isinstance(v, Tensor):
            v = Tensor(np.asarray(v), device=t.device)
        v = v.to(t.device)
        t.assign(v if v.dtype is t.dtype else v.cast(t.dtype))
        targets.append(t)
    Tensor.realize_all(*targets)


# ---- safetensors ----------------------------------------------------------------------------------------------------
def _bytes_of(t: Tensor) -> bytes:
    arr = t.numpy()
    if t.dtype is dtypes.bfloat16:  # the float32 carrier holds a bf16 value: its top 16 bits
        return (np.ascontiguousarray(arr, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    return np.ascontiguousarray(arr).astype(_NP[t.dtype], copy=False).tobytes()


def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write tensors to file fn in the safetensors format (names sorted, as the safetensors package does)."""
    header: dict[str, Any] = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safe_save: metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    blobs: list[bytes] = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"safe_save: tensor name {name!r} is not allowed")
        if not isinstance(t, Tensor):
            raise TypeError(f"safe_save: {name!r} is a {type(t).__name__}, not a Tensor")
        if t.dtype not in _SAFE_NAMES:
            raise TypeError(f"safe_save: {name!r} has dtype {t.dtype!r}, which safetensors cannot store")
        data = _bytes_of(t)
        header[name] = {"dtype": _SAFE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(fn, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def _read_header(fn: str | os.PathLike, data: bytes) -> tuple[dict[str, Any], int]:
    if len(data) < 8:
        raise ValueError(f"{fn}: not a safetensors file (shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{fn}: not a safetensors file (header length {n} runs past the end of the file, "
                         f"{len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{fn}: the safetensors header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{fn}: the safetensors header is not a JSON object")
    return header, 8 + n


def safe_load_metadata(fn: str | os.PathLike) -> dict[str, str]:
    """The __metadata__ of a safetensors file ({} when it has none)."""
    with open(fn, "rb") as f:
        data = f.read()
    return dict(_read_header(fn, data)[0].get("__metadata__", {}))


def safe_load(fn: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """The tensors of a safetensors file, by name, in file order (the data is copied into uopir buffers)."""
    with open(fn, "rb") as f:
        data = f.read()
    header, start = _read_header(fn, data)
    size = len(data) - start
    out: OrderedDict[str, Tensor] = OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dname, shape, (b, e) = info["dtype"], tuple(int(s) for s in info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{fn}: tensor {name!r} needs dtype, shape and data_offsets [begin, end] in the "
                             f"header, got {info!r}") from None
        d = _SAFE_DTYPES.get(dname)
        if d is None:
            raise ValueError(f"{fn}: tensor {name!r} has dtype {dname!r}, which uopir cannot load (known: "
                             f"{', '.join(_SAFE_DTYPES)})")
        if not (0 <= b <= e <= size) or e - b != math.prod(shape) * d.itemsize:
            raise ValueError(f"{fn}: tensor {name!r} of {dname}{list(shape)} needs {math.prod(shape) * d.itemsize} "
                             f"bytes, its data_offsets are [{b}, {e}] in {size} bytes of data")
        arr = np.frombuffer(data, _NP[d], math.prod(shape), start + b).reshape(shape)
        if d is dtypes.bfloat16:
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = Tensor(np.array(arr, arr.dtype.newbyteorder("=")), dtype=d, device=device)
    return dict(out)
