"""ONNX element types and their uopir and numpy dtypes: a leaf module, so the importer and the op modules that
need a dtype (sequences, random ops, shapes) import it without importing each other."""
from __future__ import annotations

import numpy as np

from uopir.ir.dtype import DType, dtypes
from uopir.onnx.registry import OnnxImportError

# ONNX TensorProto.DataType -> uopir dtype; the low-precision ones (uopir.onnx.lowp.LOWP) are held wider where the
# importer tracks them (lowp_dtype), the others are named in the error
_DTYPES: dict[int, DType] = {
    1: dtypes.float32, 2: dtypes.uint8, 3: dtypes.int8, 4: dtypes.uint16, 5: dtypes.int16, 6: dtypes.int32,
    7: dtypes.int64, 9: dtypes.bool, 10: dtypes.float16, 11: dtypes.float64, 12: dtypes.uint32, 13: dtypes.uint64,
    16: dtypes.bfloat16,
}
_UNSUPPORTED_NAMES = {0: "undefined", 8: "string", 14: "complex64", 15: "complex128", 17: "float8e4m3fn",
                      18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4",
                      23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2"}


def onnx_dtype(elem_type: int, where: str = "") -> DType:
    """The uopir dtype of an ONNX element type; OnnxImportError (prefixed by `where`) for one uopir has not."""
    d = _DTYPES.get(elem_type)
    if d is None:
        name = _UNSUPPORTED_NAMES.get(elem_type, f"type {elem_type}")
        raise OnnxImportError(f"{where}unsupported dtype {name}")
    return d


def np_dtype(d: DType) -> np.dtype:
    """The numpy dtype that holds `d`'s values on the host (bfloat16 as float32)."""
    from uopir.frontend.dtype_promotion import to_np
    return np.dtype(np.float32) if d == dtypes.bfloat16 else to_np(d)
