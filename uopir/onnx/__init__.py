"""uopir.onnx: run ONNX models through uopir (needs the `onnx` package: pip install 'uopir[onnx]').

`from_onnx(path | ModelProto)` imports a model (unsupported operators and dtypes raise `OnnxImportError` naming the
node, its operator and its opset); calling the result with `{input name: array or Tensor}` gives the outputs by name.
Operators live in the op modules imported below, registered with `registry.onnx_op`.
"""
from uopir.onnx import ops_attention as ops_attention  # noqa: F401
from uopir.onnx import ops_control as ops_control  # noqa: F401  (registers its operators)
from uopir.onnx import ops_elementwise as ops_elementwise  # noqa: F401
from uopir.onnx import ops_ml as ops_ml  # noqa: F401
from uopir.onnx import ops_nn as ops_nn  # noqa: F401  (onnxops)
from uopir.onnx import ops_quant as ops_quant  # noqa: F401
from uopir.onnx import ops_random as ops_random  # noqa: F401
from uopir.onnx import ops_reduce as ops_reduce  # noqa: F401
from uopir.onnx import ops_rnn as ops_rnn  # noqa: F401  (onnxops)
from uopir.onnx import ops_sequence as ops_sequence  # noqa: F401
from uopir.onnx import ops_shape as ops_shape
from uopir.onnx import ops_signal as ops_signal  # noqa: F401
from uopir.onnx import ops_training as ops_training  # noqa: F401
from uopir.onnx import ops_vision as ops_vision  # noqa: F401
from uopir.onnx.importer import OnnxModel, OnnxOpError, from_onnx
from uopir.onnx.registry import (
                                 Node,
                                 OnnxImportError,
                                 OpFn,
                                 const_ints,
                                 lookup,
                                 onnx_op,
                                 registered_ops,
                                 supported_ops_text,
)

__all__ = ["Node", "OnnxImportError", "OnnxModel", "OnnxOpError", "OpFn", "const_ints", "from_onnx", "lookup",
           "onnx_op", "registered_ops", "supported_ops_text"]
