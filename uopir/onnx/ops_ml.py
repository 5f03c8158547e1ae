"""The ai.onnx.ml operators that are plain tensor math: Binarizer and ArrayFeatureExtractor (the tree ensembles,
encoders and string ops of that domain are not supported)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.onnx.ops_elementwise import _req
from uopir.onnx.registry import Node, const_ints, onnx_op

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor

ML = "ai.onnx.ml"


@onnx_op("Binarizer", domain=ML)
def binarizer(node: Node, inputs: list) -> Tensor:
    x = _req(node, inputs, 0)
    return (x > node.attr("threshold", 0.0)).cast(x.dtype)


@onnx_op("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(node: Node, inputs: list) -> Tensor:
    """x[..., indices] (indices read while the graph is built); a (1, n) input keeps its leading 1."""
    x = _req(node, inputs, 0)
    idx = const_ints(node, inputs[1] if len(inputs) > 1 else None, "Y")
    n = x.shape[-1]
    if any(not -n <= i < n for i in idx):
        raise node.error(f"an index in {idx} is out of range for the last dim {n}")
    from uopir.frontend.tensor import Tensor
    picked = Tensor.stack(*(x[..., i % n] for i in idx), dim=-1) if idx else x[..., :0]
    return picked.reshape(1, len(idx)) if x.ndim == 1 else picked
