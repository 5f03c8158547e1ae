"""What uop-opt and uop-run do with an .onnx file: the model's tensor-level IR as .uop text, and running it."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.ir.dtype import dtypes
from uopir.ir.ops import quote
from uopir.onnx.importer import OnnxModel, from_onnx
from uopir.onnx.lowp import LowpType, lowp_of_np
from uopir.onnx.registry import OnnxImportError

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


def load(path: str, device: str | None = None) -> OnnxModel:
    """The model of an .onnx file (importing the op modules); OSError / OnnxImportError for a bad file."""
    import uopir.onnx  # noqa: F401  (registers the operators)
    return from_onnx(path, device)


def _comment_name(name: str) -> str:
    """A model's name for a `//` comment of the .uop text: as it is when plain, else as a .uop string literal (so a
    line break in it cannot end the comment and make the rest IR)."""
    return name if re.fullmatch(r"[\w.:/\-]*", name) else quote(name)


def model_ir(model: OnnxModel, feeds: Mapping[str, Any] | None = None) -> str:
    """The tensor-level .uop text of the model: its outputs in one core.sink, each graph input and initializer a
    tensor.buffer (named in the header comments). dim_param dims are 1 unless `feeds` give the inputs."""
    from uopir.ir.printer import print_ir
    from uopir.ir.uop import UOp
    given = dict(feeds or {})
    example = model.example_inputs()
    outs: dict[str, Tensor] = model.run_graph({k: given.get(k, v) for k, v in example.items()})
    env = model.last_inputs
    lines = [f"// ONNX model: {_comment_name(model.proto.graph.name) or '(unnamed graph)'}, opsets "
             + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(model.opsets.items()))]
    for name, t in env.items():
        kind = "initializer" if name in model.initializers else "input"
        bid = t.uop.attrs.id if t.uop.op.name == "tensor.buffer" else "?"
        lines.append(f"// {kind} {_comment_name(name)}: buffer id {bid} {tuple(t.shape)} {t.dtype.name}")
    lines.append("// outputs (the sink's operands, in order): " + ", ".join(_comment_name(o) for o in outs))
    return "\n".join(lines) + "\n" + print_ir(UOp.sink(*(t.uop for t in outs.values())))


def load_feeds(model: OnnxModel, pairs: list[tuple[str, np.ndarray]], seed: int = 0) -> dict[str, Any]:
    """The given inputs (name -> array) completed with random ones of the declared shapes. An input of a
    low-precision ONNX type (float8, float4, int4, int2) may be given as `as_lowp` takes it; any other array must
    have a dtype uopir has (OnnxImportError naming the input otherwise)."""
    names = set(model.inputs) | set(model.initializers)
    for name, _ in pairs:
        if name not in names:
            raise KeyError(f"the model has no input '{name}'; its inputs are {', '.join(model.inputs) or 'none'}")
    lowp = {**model._lowp_inits, **model.lowp_inputs}
    for name, a in pairs:
        if name in lowp:  # as_lowp checks it
            continue
        d = np.asarray(a).dtype
        try:
            dtypes.from_numpy(d)
        except TypeError:  # text, records, complex numbers, raw bytes...
            want = f", the model wants {model.inputs[name][0]}" if name in model.inputs else ""
            raise OnnxImportError(f"input '{name}': numpy dtype {d} is not a type uopir has{want}") from None
    feeds: dict[str, Any] = {n: (as_lowp(a, lowp[n], n) if n in lowp else a) for n, a in pairs}
    for k, v in model.example_inputs(seed=seed).items():
        feeds.setdefault(k, v)
    return feeds


def as_lowp(arr: np.ndarray, lt: LowpType, name: str) -> np.ndarray:
    """`arr` as an array of `lt`'s ml_dtypes dtype, for input `name`: an array of that dtype as it is; the raw
    bytes np.save writes for one (np.load gives them back as 1-byte void, `|V1`) read as that dtype; a float, int
    or uint array whose every value the type holds exactly (NaN only where the type has one). Anything else is an
    OnnxImportError naming the first value the type cannot hold."""
    arr = np.asarray(arr)
    if lowp_of_np(arr.dtype) is lt:
        return arr
    if arr.dtype.kind == "V" and arr.dtype.itemsize == lt.np_dtype.itemsize and arr.dtype.fields is None:
        return arr.view(lt.np_dtype)
    if arr.dtype.kind not in "fiu" or lowp_of_np(arr.dtype) is not None:
        raise OnnxImportError(f"input '{name}': dtype {arr.dtype}, the model wants {lt.name} (an ml_dtypes "
                              f"{lt.np_dtype} array, or float values that {lt.name} holds exactly)")
    with np.errstate(all="ignore"):
        conv = arr.astype(lt.np_dtype)
        back = conv.astype(np.float64)
    want = arr.astype(np.float64)
    same = (back == want) | (np.isnan(back) & np.isnan(want))
    if arr.dtype.kind in "iu":  # float64 rounds an int beyond 2^53: compare those exactly
        for i in np.argwhere(same & (np.abs(want) >= 2.0 ** 53)):
            same[tuple(i)] = int(back[tuple(i)]) == int(arr[tuple(i)])
    if not same.all():
        at = tuple(int(i) for i in np.argwhere(~same)[0])
        raise OnnxImportError(f"input '{name}': the {arr.dtype} value {arr[at]!s} at index {list(at)} is no "
                              f"{lt.name} value (give values {lt.name} holds exactly, or an ml_dtypes {lt.np_dtype} "
                              "array)")
    return conv
