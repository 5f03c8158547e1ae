"""uopir.onnx: run ONNX models through uopir (needs the `onnx` package: pip install uopir[onnx])."""
from uopir.onnx.registry import Node, OnnxImportError, OpFn, lookup, onnx_op

__all__ = ["Node", "OnnxImportError", "OpFn", "lookup", "onnx_op"]
