"""uopir.nn.state: find a model's tensors, load weights into it, save/load safetensors files, read PyTorch checkpoints.

get_state_dict walks an object (its attributes, dicts, lists, tuples, namedtuples) and names each Tensor it finds by
its path ("layers.0.weight"), iteratively and in attribute order; get_parameters is its values without repeats.
load_state_dict assigns each value into the model's tensor in place (cast to the model's dtype) and realizes them all
as one program; shapes must match, and with strict=True (the default) so must the key sets.

safetensors files are read and written by the `safetensors` package, the format's reference implementation (imported
on first use): a weight file comes from outside, and the library checks all of its header (JSON, dtypes, shapes,
offsets that tile the data exactly, string metadata, a 100 MB header cap) before a byte of data is used. A file it
refuses is one StateFileError naming the file and, found by re-reading the header here, the field at fault. The
format: an 8-byte little-endian header length N, N bytes of JSON {name: {"dtype": "F32", "shape": [...],
"data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the tensors' bytes (C order, little endian).
bfloat16 is stored as its 16 bits (uopir carries it in float32 on the host; the carrier's low bits are zero, so no
rounding happens); numpy has no bfloat16, so those bytes are read here, at the offsets the library checked.
"""
from __future__ import annotations

import io
import json
import math
import os
import stat
import tarfile
from typing import Any

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import DType, dtypes
from uopir.nn.errors import StateFileError
from uopir.nn.torch_load import torch_load

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata",
           "StateFileError", "torch_load", "tar_extract"]

_SAFE_DTYPES: dict[str, DType] = {
    "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
    "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
    "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8, "BOOL": dtypes.bool,
}
_SAFE_NAMES = {d: n for n, d in _SAFE_DTYPES.items()}
_NP = {dtypes.float64: "<f8", dtypes.float32: "<f4", dtypes.float16: "<f2", dtypes.bfloat16: "<u2",
       dtypes.int64: "<i8", dtypes.int32: "<i4", dtypes.int16: "<i2", dtypes.int8: "i1",
       dtypes.uint64: "<u8", dtypes.uint32: "<u4", dtypes.uint16: "<u2", dtypes.uint8: "u1", dtypes.bool: "?"}
_SPEC_NAMES = {d: "bfloat16" if d is dtypes.bfloat16 else np.dtype(s).name for d, s in _NP.items()}  # TensorSpec's
_HEADER_LIMIT = 100_000_000  # bytes: the safetensors library refuses a longer header (its MAX_HEADER_SIZE)


# ---- walking a model ------------------------------------------------------------------------------------------------
def get_state_dict(obj: Any, prefix: str = "", tensor_type: type = Tensor) -> dict[str, Any]:
    """Every Tensor reachable from obj, by dotted path, in attribute order (an object met twice is walked once).
    tensor_type: the leaf type to collect (tinygrad's argument: `torch.Tensor` walks a torch checkpoint)."""
    out: dict[str, Tensor] = {}
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [(prefix, obj)]
    while stack:
        name, o = stack.pop()
        if isinstance(o, tensor_type):
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


def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = False,
                    consume: bool = False, realize: bool = True) -> list[Tensor]:
    """Assign state_dict's tensors into the model's (in place, cast to the model's dtype, moved to its device) and
    return the model's tensors loaded (tinygrad's). consume: delete each entry from state_dict once loaded (frees
    the source as it goes); realize=False leaves the assigns pending, to realize with other work.

    strict: the key sets must match (KeyError naming the missing and unexpected keys); else the model's tensors
    without a value keep theirs and extra values are ignored. A shape mismatch is always a ValueError (tinygrad's
    wording), except that a 0-d value and a one-element 1-d value load into each other."""
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
    bad = [f"Shape mismatch in layer `{k}`: Expected shape {tuple(t.shape)}, but found {tuple(state_dict[k].shape)} "
           "in state dict." for k, t in own.items() if k in state_dict
           and {tuple(state_dict[k].shape), tuple(t.shape)} not in ({tuple(t.shape)}, {(), (1,)})]
    if bad:
        raise ValueError("load_state_dict: " + " ".join(bad))
    targets = []
    for k, t in own.items():
        if k not in state_dict:
            if verbose:
                print(f"load_state_dict: {k} not in the state dict, kept")
            continue
        v = state_dict[k]
        if not isinstance(v, Tensor):
            v = Tensor(np.asarray(v), device=t.device)
        v = v.to(t.device).reshape(t.shape)  # () and (1,) load into each other (torch's num_batches_tracked, tinygrad)
        t.assign(v if v.dtype is t.dtype else v.cast(t.dtype))
        targets.append(t)
        if consume:
            del state_dict[k]
    if realize:
        Tensor.realize_all(*targets)
    return targets


# ---- safetensors ----------------------------------------------------------------------------------------------------
class _Bad(Exception):
    """A fault found in a header, as a message; the caller adds the file's name and raises StateFileError."""


def _library() -> Any:
    """The safetensors package, imported on first use (so that `import uopir` does not load it)."""
    try:
        import safetensors
    except ImportError:
        raise ImportError("uopir.nn.state reads and writes weight files with the safetensors package, which is not "
                          "installed: pip install safetensors") from None
    return safetensors


def _short(v: Any) -> str:
    """repr(v), cut to a length a one-line message can carry (a header may hold 100 MB of anything)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _json_type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(v), "number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json object hook: a key met twice is a fault (readers disagree on which copy wins; the library keeps one)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Bad(f"the header has the key {_short(k)} twice")
        out[k] = v
    return out


def _parse_header(text: bytes) -> dict[str, Any]:
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_unique_keys)
    except UnicodeDecodeError:
        raise _Bad("the header is not UTF-8 text") from None
    except RecursionError:
        raise _Bad("the header nests too deeply") from None
    except ValueError as e:
        raise _Bad(f"the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise _Bad(f"the header is a JSON {_json_type(header)}, not an object")
    return header


def _is_sizes(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)


def _check_entries(header: dict[str, Any], data_size: int) -> None:
    """Find the field at fault in a header the library refused (it says what is wrong, not always where)."""
    md = header.get("__metadata__")
    if md is not None:
        if not isinstance(md, dict):
            raise _Bad(f"__metadata__ is a JSON {_json_type(md)}, not an object of strings")
        for k, v in md.items():
            if not isinstance(v, str):
                raise _Bad(f"__metadata__ value {_short(k)} is a JSON {_json_type(v)}, not a string")
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        where = f"tensor {_short(name)}"
        if not isinstance(info, dict):
            raise _Bad(f"{where} is a JSON {_json_type(info)}, not an object of dtype, shape and data_offsets")
        for field in ("dtype", "shape", "data_offsets"):
            if field not in info:
                raise _Bad(f"{where} has no {field}")
        dname, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dname, str):
            raise _Bad(f"{where}: dtype {_short(dname)} is not a string")
        if not _is_sizes(shape):
            raise _Bad(f"{where}: shape {_short(shape)} is not a list of integers >= 0")
        if not _is_sizes(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
            raise _Bad(f"{where}: data_offsets {_short(offsets)} is not a pair of integers 0 <= begin <= end")
        d = _SAFE_DTYPES.get(dname)
        if d is not None and math.prod(shape) * d.itemsize != offsets[1] - offsets[0]:
            raise _Bad(f"{where}: shape {_short(shape)} of {dname} needs {math.prod(shape) * d.itemsize} bytes, its "
                       f"data_offsets {offsets} hold {offsets[1] - offsets[0]}")
        spans.append((offsets[0], offsets[1], name))
    end = 0
    for b, e, name in sorted(spans):  # the data is the tensors' bytes back to back, in some order, without a hole
        if b != end:
            how = f"overlap the bytes before {end}" if b < end else f"leave bytes {end}..{b} unused"
            raise _Bad(f"tensor {_short(name)}: data_offsets [{b}, {e}] {how}")
        end = e
    if end != data_size:
        raise _Bad(f"the data_offsets cover {end} bytes of data, the file holds {data_size} after the header")
    for name, info in header.items():
        if name != "__metadata__" and info["dtype"] not in _SAFE_DTYPES:
            raise _Bad(_dtype_fault(name, info["dtype"]))


def _dtype_fault(name: str, dname: str) -> str:
    return (f"tensor {_short(name)} has dtype {_short(dname)}, which uopir cannot load (known: "
            f"{', '.join(_SAFE_DTYPES)})")


def _explain(f: Any) -> str:
    """What is wrong with the file the library refused, naming the field (or '' when no field is at fault)."""
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    head = f.read(8)
    try:
        if size == 0:
            raise _Bad("the file is empty (a safetensors file starts with an 8-byte header length)")
        if len(head) < 8:
            raise _Bad(f"the file is {size} bytes, shorter than the 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > _HEADER_LIMIT:
            raise _Bad(f"the header length {n} is over the limit of {_HEADER_LIMIT} bytes")
        if n > size - 8:
            raise _Bad(f"the header length {n} runs past the end of the file ({size} bytes)")
        _check_entries(_parse_header(f.read(n)), size - 8 - n)
    except _Bad as e:
        return str(e)
    return ""


def _regular_file(fn: str | os.PathLike) -> str:
    path = os.fspath(fn)
    mode = os.stat(path).st_mode  # a missing file: FileNotFoundError naming it
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise StateFileError(f"{path}: is {kind}, not a safetensors file")
    return path


def _validated(path: str, f: Any) -> Any:
    """The library's handle on the file (it checks the whole header and the layout), or StateFileError."""
    st = _library()
    try:
        return st.safe_open(path, framework="numpy")
    except st.SafetensorError as e:
        said = str(e).removeprefix("Error while deserializing header: ")
        said = said if len(said) <= 300 else said[:297] + "..."
        fault = _explain(f)
        raise StateFileError(f"{path}: {fault + ' ' if fault else 'not a safetensors file '}(safetensors: {said})") \
            from None


def _header(path: str, f: Any) -> tuple[dict[str, Any], int]:
    """The header of a file the library accepted (for its order and offsets) and where the data starts."""
    f.seek(0)
    n = int.from_bytes(f.read(8), "little")
    try:
        return _parse_header(f.read(n)), 8 + n
    except _Bad as e:
        raise StateFileError(f"{path}: {e}") from None


def _array_of(t: Tensor) -> np.ndarray:
    """t's values as the little-endian C-order array safetensors stores (bfloat16: its 16 bits)."""
    arr = np.asarray(t.numpy(), order="C")
    if t.dtype is dtypes.bfloat16:  # the float32 carrier holds a bf16 value: its top 16 bits
        return (arr.astype(np.float32, copy=False).view(np.uint32) >> 16).astype("<u2")
    return np.asarray(arr.astype(_NP[t.dtype], copy=False), order="C")


def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write tensors to file fn in the safetensors format, with the safetensors package (in its order: by dtype
    alignment, then name)."""
    if metadata and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("safe_save: metadata must map str to str")
    arrays: dict[str, np.ndarray] = {}
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"safe_save: tensor name {name!r} is not allowed")
        if not isinstance(t, Tensor):
            raise TypeError(f"safe_save: {name!r} is a {type(t).__name__}, not a Tensor")
        if t.dtype not in _SAFE_NAMES:
            raise TypeError(f"safe_save: {name!r} has dtype {t.dtype!r}, which safetensors cannot store")
        arrays[name] = _array_of(t)
    st = _library()
    specs = {name: st.TensorSpec(dtype=_SPEC_NAMES[tensors[name].dtype], shape=list(a.shape), data_ptr=a.ctypes.data,
                                 data_len=a.nbytes) for name, a in arrays.items()}  # `arrays` keeps the memory alive
    try:  # the library writes a temporary file beside fn and renames it
        st.serialize_file(specs, os.fspath(fn), metadata=dict(metadata) if metadata else None)
    except st.SafetensorError as e:
        raise OSError(f"{os.fspath(fn)}: cannot write the safetensors file ({e})") from None


def safe_load_metadata(fn: str | os.PathLike) -> dict[str, str]:
    """The __metadata__ of a safetensors file ({} when it has none); the whole file is checked as safe_load does."""
    path = _regular_file(fn)
    with open(path, "rb") as f, _validated(path, f) as lib:
        _header(path, f)
        return dict(lib.metadata() or {})


def safe_load(fn: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """The tensors of a safetensors file, by name, in header order (the data is copied into uopir buffers)."""
    path = _regular_file(fn)
    out: dict[str, Tensor] = {}
    with open(path, "rb") as f, _validated(path, f) as lib:
        header, start = _header(path, f)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            d = _SAFE_DTYPES.get(info["dtype"])
            if d is None:
                raise StateFileError(f"{path}: {_dtype_fault(name, info['dtype'])}")
            if d is dtypes.bfloat16:  # numpy has no bfloat16: its bits, at the offsets the library checked
                b, e = info["data_offsets"]
                f.seek(start + b)
                raw = f.read(e - b)
                if len(raw) != e - b:
                    raise StateFileError(f"{path}: the file changed while it was read (tensor {_short(name)})")
                bits = np.frombuffer(raw, "<u2").reshape(info["shape"])
                arr = (bits.astype(np.uint32) << 16).view(np.float32)
            else:
                arr = lib.get_tensor(name).astype(_NP[d], copy=False)
            out[name] = Tensor(arr, dtype=d, device=device)
    return out


# ---- tar archives ---------------------------------------------------------------------------------------------------
def tar_extract(src: str | os.PathLike | Tensor) -> dict[str, Tensor]:
    """The regular files of a tar archive (a path, or a uint8 Tensor of its bytes) as uint8 tensors by member name
    (tinygrad's): directories and links are left out, nothing is written to disk. FileNotFoundError for a missing
    path, tarfile.ReadError (naming the source) for bytes that are not a tar archive."""
    if isinstance(src, Tensor):
        what, fobj = f"a {src.dtype!r} tensor of {src.numel()} elements", io.BytesIO(src.numpy().tobytes())
    else:
        what, fobj = os.fspath(src), open(os.fspath(src), "rb")  # closed by the with below
    with fobj:
        try:
            tar = tarfile.open(fileobj=fobj, mode="r:")
        except tarfile.ReadError as e:
            raise tarfile.ReadError(f"tar_extract: {what} is not a tar archive ({e})") from None
        with tar:
            return {m.name: Tensor(np.frombuffer(tar.extractfile(m).read(), np.uint8))  # type: ignore[union-attr]
                    for m in tar.getmembers() if m.isfile()}
