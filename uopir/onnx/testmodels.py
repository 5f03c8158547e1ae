"""Two small real-shaped ONNX models built with onnx.helper and random initializers, for the model tests
(unit_tests/test_onnx_models.py) and the bench (bench/onnx_models.py):

- `small_cnn`: Conv -> BatchNormalization -> Relu -> MaxPool -> Conv (stride 2, groups) -> Relu ->
  GlobalAveragePool -> Flatten -> Gemm, an image classifier's shape.
- `transformer_block`: a pre-norm encoder block: LayerNormalization, Q/K/V MatMuls, heads by Reshape/Transpose,
  scaled QK^T, Softmax, the weighted sum, the output projection and residual, then LayerNormalization, an MLP with
  Gelu and a second residual.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _helpers() -> tuple[Any, Any, Any]:
    import onnx
    from onnx import helper, numpy_helper
    return onnx, helper, numpy_helper


def _finish(nodes: list, inputs: list, outputs: list, inits: dict[str, np.ndarray], name: str, opset: int) -> Any:
    onnx, helper, numpy_helper = _helpers()
    g = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10  # readable by the onnxruntime of the test extra
    onnx.checker.check_model(m)
    return m


def small_cnn(batch: int = 2, size: int = 16, classes: int = 10, seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """(model, example inputs): (batch, 3, size, size) images -> (batch, classes) logits."""
    onnx, helper, _ = _helpers()
    r = np.random.default_rng(seed)

    def w(*s: int, scale: float = 0.3) -> np.ndarray:
        return (r.standard_normal(s) * scale).astype(np.float32)

    inits = {"c1_w": w(8, 3, 3, 3), "c1_b": w(8), "bn_s": 1 + w(8, scale=0.1), "bn_b": w(8, scale=0.1),
             "bn_m": w(8, scale=0.1), "bn_v": (1 + np.abs(w(8))).astype(np.float32),
             "c2_w": w(16, 4, 3, 3), "c2_b": w(16), "fc_w": w(classes, 16), "fc_b": w(classes)}
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "c1_w", "c1_b"], ["c1"], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-5),
        n("Relu", ["bn"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "c2_w", "c2_b"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], group=2),
        n("Relu", ["c2"], ["r2"]),
        n("GlobalAveragePool", ["r2"], ["gap"]),
        n("Flatten", ["gap"], ["flat"], axis=1),
        n("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    f = onnx.TensorProto.FLOAT
    m = _finish(nodes, [helper.make_tensor_value_info("x", f, [batch, 3, size, size])],
                [helper.make_tensor_value_info("logits", f, [batch, classes])], inits, "small_cnn", 17)
    return m, {"x": r.standard_normal((batch, 3, size, size)).astype(np.float32)}


def transformer_block(batch: int = 1, seq: int = 8, dim: int = 32, heads: int = 4, hidden: int = 64,
                      seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """(model, example inputs): (batch, seq, dim) -> (batch, seq, dim)."""
    onnx, helper, _ = _helpers()
    r = np.random.default_rng(seed)
    hd = dim // heads

    def w(*s: int) -> np.ndarray:
        return (r.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)

    inits = {
        "ln1_s": (1 + 0.1 * r.standard_normal(dim)).astype(np.float32), "ln1_b": w(dim) * 0.1,
        "wq": w(dim, dim), "wk": w(dim, dim), "wv": w(dim, dim), "wo": w(dim, dim),
        "ln2_s": (1 + 0.1 * r.standard_normal(dim)).astype(np.float32), "ln2_b": w(dim) * 0.1,
        "w1": w(dim, hidden), "b1": w(hidden) * 0.1, "w2": w(hidden, dim), "b2": w(dim) * 0.1,
        "heads_shape": np.array([batch, seq, heads, hd], np.int64), "merged": np.array([batch, seq, dim], np.int64),
        "scale": np.array(1 / np.sqrt(hd), np.float32),
    }
    n = helper.make_node
    nodes = [n("LayerNormalization", ["x", "ln1_s", "ln1_b"], ["h"], axis=-1, epsilon=1e-5)]
    for p in ("q", "k", "v"):
        nodes += [n("MatMul", ["h", f"w{p}"], [f"{p}0"]),
                  n("Reshape", [f"{p}0", "heads_shape"], [f"{p}1"]),
                  n("Transpose", [f"{p}1"], [p], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["q", "k"], ["qk"]),
        n("Mul", ["qk", "scale"], ["qks"]),
        n("Softmax", ["qks"], ["att"], axis=-1),
        n("MatMul", ["att", "v"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "merged"], ["ctx_m"]),
        n("MatMul", ["ctx_m", "wo"], ["o"]),
        n("Add", ["x", "o"], ["res1"]),
        n("LayerNormalization", ["res1", "ln2_s", "ln2_b"], ["h2"], axis=-1, epsilon=1e-5),
        n("MatMul", ["h2", "w1"], ["f1"]),
        n("Add", ["f1", "b1"], ["f1b"]),
        n("Gelu", ["f1b"], ["g"]),
        n("MatMul", ["g", "w2"], ["f2"]),
        n("Add", ["f2", "b2"], ["f2b"]),
        n("Add", ["res1", "f2b"], ["y"]),
    ]
    f = onnx.TensorProto.FLOAT
    m = _finish(nodes, [helper.make_tensor_value_info("x", f, [batch, seq, dim])],
                [helper.make_tensor_value_info("y", f, [batch, seq, dim])], inits, "transformer_block", 20)
    return m, {"x": r.standard_normal((batch, seq, dim)).astype(np.float32)}
