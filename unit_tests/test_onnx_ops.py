"""The shape, indexing and nn operators of uopir.onnx (ops_shape.py, ops_nn.py), one small model per case built with
onnx.helper, run through `from_onnx` and through onnxruntime, outputs compared (dtype, shape, values; numpy
references where they are one line). Opset-dependent meanings get a case per opset (Split and Squeeze attributes
before 13, inputs after; Slice attributes before 10; Pad attributes before 11).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper  # noqa: E402

from uopir.onnx import OnnxImportError, from_onnx  # noqa: E402

R = np.random.default_rng(7)


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def i64(*vals: Any) -> np.ndarray:
    return np.array(vals, dtype=np.int64)


def model(op: str, ins: dict[str, np.ndarray], consts: dict[str, np.ndarray | None] | None = None,
          attrs: dict[str, Any] | None = None, nout: int = 1, opset: int = 18) -> onnx.ModelProto:
    """One `op` node: `ins` are graph inputs, `consts` initializers (None: an omitted optional input), in that
    order; the outputs' types come from onnx's shape inference."""
    consts = consts or {}
    names = list(ins) + [k if v is not None else "" for k, v in consts.items()]
    node = helper.make_node(op, names, [f"y{i}" for i in range(nout)], **(attrs or {}))
    gi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in ins.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items() if v is not None]
    g = helper.make_graph([node], op.lower(), gi, [], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)  # the onnxruntime in the test extra reads IR <= 10
    vi = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    first = helper.np_dtype_to_tensor_dtype(next(iter(ins.values())).dtype) if ins else onnx.TensorProto.FLOAT
    m.graph.output.extend([vi.get(f"y{i}") or helper.make_tensor_value_info(f"y{i}", first, None)
                           for i in range(nout)])  # (inference leaves out some function ops: the input's type)
    return m


def check(m: onnx.ModelProto, ins: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-6,
          ref: list[np.ndarray] | None = None) -> list[np.ndarray]:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, ins)
    out = from_onnx(m).run(ins)
    got = [out[o.name] for o in m.graph.output]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, onnxruntime {w.dtype}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape}, onnxruntime {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")
    for g, r in zip(got, ref or [], strict=False):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    return got


X = f32(2, 3, 4, 5)
IMG = f32(1, 2, 6, 7)
GRID1 = (R.random((1, 3, 4, 2)) * 2.4 - 1.2).astype(np.float32)  # sample points a little outside [-1, 1] too
GRID2 = (R.random((1, 2, 3, 2)) * 2.4 - 1.2).astype(np.float32)

# (id, op, inputs, consts, attrs, outputs, opset)
CASES: list[tuple[str, str, dict, dict, dict, int, int]] = [
    ("reshape", "Reshape", {"x": X}, {"s": i64(0, -1, 5)}, {}, 1, 18),
    ("reshape_allowzero", "Reshape", {"x": f32(0, 3)}, {"s": i64(3, 0)}, {"allowzero": 1}, 1, 18),
    ("transpose", "Transpose", {"x": X}, {}, {"perm": [2, 0, 3, 1]}, 1, 18),
    ("transpose_default", "Transpose", {"x": X}, {}, {}, 1, 18),
    ("concat", "Concat", {"a": f32(2, 3), "b": f32(2, 1)}, {}, {"axis": -1}, 1, 18),
    ("split_attr_v11", "Split", {"x": f32(6, 2)}, {}, {"axis": 0, "split": [1, 5]}, 2, 11),
    ("split_input_v13", "Split", {"x": f32(6, 2)}, {"s": i64(4, 2)}, {}, 2, 13),
    ("split_equal", "Split", {"x": f32(2, 6)}, {}, {"axis": 1}, 3, 13),
    ("split_num_outputs_v18", "Split", {"x": f32(7)}, {}, {"num_outputs": 3}, 3, 18),
    ("slice_attrs_v9", "Slice", {"x": X}, {}, {"starts": [1, -3], "ends": [100, -1], "axes": [1, 3]}, 1, 9),
    ("slice_steps", "Slice", {"x": X}, {"st": i64(-1, 0), "en": i64(-100, 5), "ax": i64(2, 3), "sp": i64(-2, 2)}, {},
     1, 13),
    ("slice_empty", "Slice", {"x": X}, {"st": i64(3), "en": i64(1)}, {}, 1, 13),
    ("squeeze_attr_v11", "Squeeze", {"x": f32(1, 3, 1)}, {}, {"axes": [-1]}, 1, 11),
    ("squeeze_input_v13", "Squeeze", {"x": f32(1, 3, 1)}, {"a": i64(0)}, {}, 1, 13),
    ("squeeze_all", "Squeeze", {"x": f32(1, 3, 1)}, {}, {}, 1, 13),
    ("unsqueeze_v11", "Unsqueeze", {"x": f32(3, 4)}, {}, {"axes": [0, -1]}, 1, 11),
    ("unsqueeze_v13", "Unsqueeze", {"x": f32(3, 4)}, {"a": i64(1, 3)}, {}, 1, 13),
    ("flatten", "Flatten", {"x": X}, {}, {"axis": -2}, 1, 18),
    ("flatten_0", "Flatten", {"x": X}, {}, {"axis": 0}, 1, 18),
    ("expand_bidirectional", "Expand", {"x": f32(3, 1)}, {"s": i64(2, 1, 4)}, {}, 1, 18),
    ("tile", "Tile", {"x": f32(2, 3)}, {"r": i64(2, 3)}, {}, 1, 18),
    ("pad_constant_v2", "Pad", {"x": f32(2, 3)}, {}, {"pads": [1, 0, 2, 1], "value": 1.5}, 1, 2),
    ("pad_constant", "Pad", {"x": f32(2, 3)}, {"p": i64(1, -1, 2, 1), "v": np.array(2.0, np.float32)}, {}, 1, 18),
    ("pad_reflect", "Pad", {"x": f32(3, 4)}, {"p": i64(2, 1, 1, 3)}, {"mode": "reflect"}, 1, 18),
    ("pad_edge", "Pad", {"x": f32(3, 4)}, {"p": i64(2, 1, 1, 3)}, {"mode": "edge"}, 1, 18),
    ("pad_wrap_axes", "Pad", {"x": f32(3, 4)}, {"p": i64(2, 3), "v": None, "a": i64(1)}, {"mode": "wrap"}, 1, 19),
    ("gather", "Gather", {"x": X}, {"i": np.array([[0, -1], [2, 1]], np.int64)}, {"axis": 1}, 1, 18),
    ("gather_scalar", "Gather", {"x": f32(5, 3)}, {"i": np.array(-2, np.int64)}, {}, 1, 18),
    ("gather_elements", "GatherElements", {"x": f32(3, 4)}, {"i": np.array([[0, 3], [-1, 1], [2, 2]], np.int64)},
     {"axis": 1}, 1, 18),
    ("gather_nd_batch", "GatherND", {"x": f32(2, 3, 4)}, {"i": np.array([[[1, 2]], [[-1, 0]]], np.int64)},
     {"batch_dims": 1}, 1, 18),
    ("gather_nd", "GatherND", {"x": f32(3, 4, 2)}, {"i": np.array([[0], [2]], np.int64)}, {}, 1, 18),
    ("scatter_elements_add", "ScatterElements", {"x": f32(3, 4)},
     {"i": np.array([[0, 1], [0, 0], [3, 3]], np.int64), "u": f32(3, 2)}, {"axis": 1, "reduction": "add"}, 1, 18),
    ("scatter_elements_max", "ScatterElements", {"x": f32(3, 4)},
     {"i": np.array([[0, -1]], np.int64), "u": f32(1, 2)}, {"axis": 0, "reduction": "max"}, 1, 18),
    ("scatter_nd", "ScatterND", {"x": f32(4, 3)}, {"i": np.array([[1], [3]], np.int64), "u": f32(2, 3)}, {}, 1, 18),
    ("scatter_nd_mul", "ScatterND", {"x": f32(2, 3)}, {"i": np.array([[0, 1], [0, 1]], np.int64), "u": f32(2)},
     {"reduction": "mul"}, 1, 18),
    ("shape_slice_v15", "Shape", {"x": X}, {}, {"start": 1, "end": -1}, 1, 18),
    ("size", "Size", {"x": X}, {}, {}, 1, 18),
    ("constant_of_shape", "ConstantOfShape", {}, {"s": i64(2, 3)},
     {"value": numpy_helper.from_array(np.array([7], np.int32))}, 1, 18),
    ("range_float", "Range", {}, {"a": np.array(1.0, np.float32), "b": np.array(3.2, np.float32),
                                  "d": np.array(0.5, np.float32)}, {}, 1, 18),
    ("range_int_down", "Range", {}, {"a": i64(10)[0], "b": i64(1)[0], "d": i64(-3)[0]}, {}, 1, 18),
    ("one_hot", "OneHot", {"i": np.array([[0, 3], [-1, 2]], np.int64)},
     {"d": np.array(4, np.int64), "v": np.array([-1.0, 5.0], np.float32)}, {"axis": 1}, 1, 18),
    ("trilu_lower", "Trilu", {"x": f32(2, 3, 4)}, {"k": np.array(1, np.int64)}, {"upper": 0}, 1, 18),
    ("trilu_upper", "Trilu", {"x": f32(4, 3)}, {"k": np.array(-1, np.int64)}, {}, 1, 18),
    ("topk_smallest", "TopK", {"x": np.array([[3, 1, 2, 1], [0, 5, 5, 4]], np.float32)}, {"k": i64(3)},
     {"largest": 0}, 2, 18),
    ("topk_v1", "TopK", {"x": f32(3, 5)}, {}, {"k": 2, "axis": 0}, 2, 1),
    ("nonzero", "NonZero", {"x": np.array([[1, 0, 2], [0, 0, 3]], np.float32)}, {}, {}, 1, 18),
    ("compress", "Compress", {"x": f32(3, 4)}, {"c": np.array([True, False, True])}, {"axis": 0}, 1, 18),
    ("reverse_sequence", "ReverseSequence", {"x": f32(4, 3, 2)}, {"l": i64(4, 1, 3)},
     {"batch_axis": 1, "time_axis": 0}, 1, 18),
    ("eye_like", "EyeLike", {"x": f32(3, 5)}, {}, {"k": 1, "dtype": onnx.TensorProto.INT32}, 1, 18),
    ("depth_to_space_crd", "DepthToSpace", {"x": f32(1, 8, 2, 3)}, {}, {"blocksize": 2, "mode": "CRD"}, 1, 18),
    ("depth_to_space_dcr", "DepthToSpace", {"x": f32(1, 8, 2, 3)}, {}, {"blocksize": 2}, 1, 18),
    ("space_to_depth", "SpaceToDepth", {"x": f32(1, 2, 4, 6)}, {}, {"blocksize": 2}, 1, 18),
    ("resize_nearest_asym", "Resize", {"x": IMG}, {"r": None, "s": np.array([1, 1, 1.5, 0.5], np.float32)},
     {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, 1, 18),
    ("resize_linear_half_pixel", "Resize", {"x": IMG}, {"r": None, "s": None, "z": i64(1, 2, 9, 4)},
     {"mode": "linear"}, 1, 18),
    ("resize_linear_align", "Resize", {"x": IMG}, {"r": None, "s": np.array([1, 1, 2, 2], np.float32)},
     {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, 1, 18),
    ("resize_cubic", "Resize", {"x": IMG}, {"r": None, "s": None, "z": i64(1, 2, 8, 5)},
     {"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel"}, 1, 18),
    ("upsample_v9", "Upsample", {"x": IMG}, {"s": np.array([1, 1, 2, 3], np.float32)}, {}, 1, 9),
    ("conv_groups_dilation", "Conv", {"x": f32(1, 4, 7, 6)}, {"w": f32(6, 2, 3, 2), "b": f32(6)},
     {"group": 2, "dilations": [2, 1], "pads": [1, 0, 2, 1], "strides": [1, 2]}, 1, 18),
    ("conv_same_lower", "Conv", {"x": f32(1, 2, 5, 5)}, {"w": f32(3, 2, 2, 2)},
     {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, 1, 18),
    ("conv_1d", "Conv", {"x": f32(2, 3, 9)}, {"w": f32(4, 3, 3)}, {"pads": [2, 0]}, 1, 18),
    ("conv_transpose", "ConvTranspose", {"x": f32(1, 2, 3, 4)}, {"w": f32(2, 3, 3, 3), "b": f32(3)},
     {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]}, 1, 18),
    ("conv_transpose_output_shape", "ConvTranspose", {"x": f32(1, 1, 3, 3)}, {"w": f32(1, 2, 3, 3)},
     {"strides": [3, 2], "output_shape": [10, 8]}, 1, 18),
    ("conv_transpose_groups", "ConvTranspose", {"x": f32(1, 4, 3)}, {"w": f32(4, 1, 2)},
     {"group": 2, "dilations": [2]}, 1, 18),
    ("maxpool_indices", "MaxPool", {"x": IMG}, {}, {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "strides": [2, 2]},
     2, 18),
    ("maxpool_ceil_dilation", "MaxPool", {"x": IMG}, {}, {"kernel_shape": [2, 2], "ceil_mode": 1, "strides": [2, 2],
                                                          "dilations": [2, 1]}, 1, 18),
    ("maxpool_storage_order", "MaxPool", {"x": IMG}, {}, {"kernel_shape": [2, 2], "storage_order": 1}, 2, 11),
    ("maxpool_same_upper", "MaxPool", {"x": IMG}, {}, {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER",
                                                       "strides": [2, 2]}, 1, 18),
    ("avgpool_exclude_pad", "AveragePool", {"x": IMG}, {}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 1, 18),
    ("avgpool_include_pad_ceil", "AveragePool", {"x": IMG}, {}, {"kernel_shape": [2, 3], "pads": [1, 1, 1, 1],
                                                                 "count_include_pad": 1, "ceil_mode": 1,
                                                                 "strides": [2, 2]}, 1, 18),
    ("avgpool_same_upper", "AveragePool", {"x": IMG}, {}, {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}, 1, 18),
    ("lppool", "LpPool", {"x": IMG}, {}, {"kernel_shape": [2, 2], "p": 3, "strides": [2, 2]}, 1, 18),
    ("global_average_pool", "GlobalAveragePool", {"x": IMG}, {}, {}, 1, 18),
    ("global_max_pool", "GlobalMaxPool", {"x": IMG}, {}, {}, 1, 18),
    ("global_lp_pool", "GlobalLpPool", {"x": IMG}, {}, {}, 1, 18),
    ("batchnorm", "BatchNormalization", {"x": IMG}, {"s": f32(2), "b": f32(2), "m": f32(2),
                                                     "v": np.abs(f32(2)) + 0.5}, {"epsilon": 1e-3}, 1, 15),
    ("instancenorm", "InstanceNormalization", {"x": IMG}, {"s": f32(2), "b": f32(2)}, {}, 1, 18),
    ("layernorm", "LayerNormalization", {"x": X}, {"s": f32(4, 5), "b": f32(4, 5)}, {"axis": 2}, 3, 18),
    ("groupnorm_v21", "GroupNormalization", {"x": f32(2, 4, 3)}, {"s": f32(4), "b": f32(4)}, {"num_groups": 2}, 1,
     21),
    ("lrn", "LRN", {"x": f32(1, 5, 3, 3)}, {}, {"size": 3, "alpha": 0.01, "beta": 0.5, "bias": 2.0}, 1, 18),
    ("mvn", "MeanVarianceNormalization", {"x": IMG}, {}, {}, 1, 18),
    ("gemm", "Gemm", {"a": f32(4, 3), "b": f32(5, 4)}, {"c": f32(5)},
     {"alpha": 0.5, "beta": 2.0, "transA": 1, "transB": 1}, 1, 18),
    ("gemm_rows_copy_b", "Gemm", {"a": f32(20, 24)}, {"b": f32(12, 24), "c": f32(12)}, {"transB": 1}, 1, 18),
    ("matmul_batched", "MatMul", {"a": f32(2, 1, 3, 4), "b": f32(3, 4, 2)}, {}, {}, 1, 18),
    ("matmul_vector", "MatMul", {"a": f32(4), "b": f32(2, 4, 3)}, {}, {}, 1, 18),
    ("matmul_integer", "MatMulInteger", {"a": R.integers(0, 255, (3, 4)).astype(np.uint8)},
     {"b": R.integers(0, 255, (4, 2)).astype(np.uint8), "az": np.array(12, np.uint8), "bz": np.array(3, np.uint8)},
     {}, 1, 18),
    ("einsum", "Einsum", {"a": f32(2, 3, 4), "b": f32(2, 4, 5)}, {}, {"equation": "bij, bjk -> bik"}, 1, 18),
    ("einsum_trace", "Einsum", {"a": f32(3, 3)}, {}, {"equation": "ii"}, 1, 18),
    ("einsum_rows_by_rows", "Einsum", {"a": f32(2, 3, 16, 4), "b": f32(2, 3, 5, 4)}, {},
     {"equation": "bhqd,bhkd->bhqk"}, 1, 18),  # attention's scores: run as MatMul from a copy of k^T
    ("dropout_inference", "Dropout", {"x": f32(3, 4)}, {}, {}, 2, 13),
    ("nll_loss", "NegativeLogLikelihoodLoss", {"x": f32(3, 4, 2)},
     {"t": np.array([[0, 3], [1, 1], [2, -100]], np.int64), "w": np.abs(f32(4))}, {"ignore_index": -100}, 1, 18),
    ("softmax_cross_entropy", "SoftmaxCrossEntropyLoss", {"x": f32(3, 4)}, {"t": i64(1, 0, 3)},
     {"reduction": "sum"}, 2, 18),
    # recurrent layers (ops_rnn)
    ("lstm_bidirectional_seq_lens_peepholes", "LSTM", {"x": f32(2, 2, 3)},
     {"w": f32(2, 12, 3), "r": f32(2, 12, 3), "b": f32(2, 24), "l": np.array([2, 1], np.int32), "h": f32(2, 2, 3),
      "c": f32(2, 2, 3), "p": f32(2, 9)}, {"hidden_size": 3, "direction": "bidirectional"}, 3, 14),
    ("gru_linear_before_reset", "GRU", {"x": f32(2, 3, 4)}, {"w": f32(1, 9, 4), "r": f32(1, 9, 3), "b": f32(1, 18)},
     {"hidden_size": 3, "linear_before_reset": 1}, 2, 14),  # (onnxruntime has no layout 1; the node tests do)
    ("rnn_reverse_clip", "RNN", {"x": f32(3, 2, 2)}, {"w": f32(1, 4, 2), "r": f32(1, 4, 4)},
     {"hidden_size": 4, "direction": "reverse", "clip": 0.5, "activations": ["Relu"]}, 2, 14),
    # ops_extra
    ("grid_sample_bilinear_border", "GridSample", {"x": IMG, "g": GRID1}, {},
     {"mode": "linear", "padding_mode": "border"}, 1, 20),
    ("grid_sample_cubic_reflection", "GridSample", {"x": f32(1, 1, 4, 5), "g": GRID2}, {},
     {"mode": "cubic", "padding_mode": "reflection", "align_corners": 1}, 1, 20),
    ("affine_grid", "AffineGrid", {"t": f32(2, 2, 3)}, {"s": i64(2, 1, 3, 4)}, {}, 1, 20),
    ("col2im", "Col2Im", {"x": f32(1, 8, 4)}, {"i": i64(4, 5), "b": i64(2, 2)},
     {"strides": [2, 2], "pads": [0, 0, 1, 0]}, 1, 18),
    ("center_crop_pad", "CenterCropPad", {"x": f32(5, 4, 3)}, {"s": i64(2, 7)}, {"axes": [0, 1]}, 1, 18),
    ("det", "Det", {"x": f32(2, 3, 3)}, {}, {}, 1, 18),
    ("unique_unsorted", "Unique", {"x": np.array([2, 1, 1, 3, 4, 3], np.float32)}, {}, {"sorted": 0}, 4, 18),
    ("nms", "NonMaxSuppression", {"b": np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6], [0, 10, 1, 11]]],
                                                np.float32), "s": np.array([[[0.9, 0.75, 0.6, 0.3]]], np.float32)},
     {"m": i64(3), "t": np.array([0.5], np.float32), "st": np.array([0.2], np.float32)}, {}, 1, 18),
    ("qlinear_matmul", "QLinearMatMul", {"a": R.integers(0, 255, (2, 4)).astype(np.uint8)},
     {"sa": np.array(0.05, np.float32), "za": np.array(100, np.uint8), "b": R.integers(0, 255, (4, 3)).astype(
         np.uint8), "sb": np.array(0.02, np.float32), "zb": np.array(120, np.uint8), "sy": np.array(0.1, np.float32),
      "zy": np.array(128, np.uint8)}, {}, 1, 18),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_onnxruntime(case: tuple) -> None:
    _, op, ins, consts, attrs, nout, opset = case
    check(model(op, ins, consts, attrs, nout, opset), ins)


def test_numpy_references() -> None:
    """A few results against numpy itself (not only onnxruntime)."""
    x = f32(3, 4, 5)
    got = check(model("Slice", {"x": x}, {"s": i64(3, 4), "e": i64(0, 0), "a": i64(2, 1), "p": i64(-2, -1)}), {"x": x})
    np.testing.assert_array_equal(got[0], x[:, :0:-1, 3:0:-2])
    got = check(model("Gather", {"x": x}, {"i": np.array([[2, -1]], np.int64)}, {"axis": 2}), {"x": x})
    np.testing.assert_array_equal(got[0], np.take(x, [[2, 4]], axis=2))
    got = check(model("Pad", {"x": x}, {"p": i64(0, 1, 2, 0, 2, 1)}, {"mode": "reflect"}), {"x": x})
    np.testing.assert_array_equal(got[0], np.pad(x, [(0, 0), (1, 2), (2, 1)], mode="reflect"))


def test_softmax_axis_meaning_changed_at_13() -> None:
    """Before opset 13 Softmax flattens to 2-D at `axis` (one softmax over dims axis..); from 13 on it is per-axis.
    (Softmax is onnxcore's; this checks the two opsets through a model that also reshapes, ops of this file.)"""
    x = f32(2, 3, 4)
    for opset in (11, 13):
        nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=1)]
        g = helper.make_graph(nodes, "sm", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(i64(2, 3, 4), "s")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        got = check(m, {"x": x})[0]
        e = np.exp(x - x.max(axis=(1, 2) if opset == 11 else 1, keepdims=True))
        ref = e / e.sum(axis=(1, 2) if opset == 11 else 1, keepdims=True)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_shape_computed_reshape_target() -> None:
    """Shape -> Gather -> Concat -> Reshape: a computed shape input is realized when the graph is built."""
    x = f32(2, 3, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
             helper.make_node("Concat", ["d0", "m1"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    g = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(i64(0), "i0"), numpy_helper.from_array(i64(-1), "m1")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    assert check(m, {"x": x})[0].shape == (2, 12)


@pytest.mark.parametrize("op, ins, consts, attrs, words", [
    ("Reshape", {"x": f32(2, 3)}, {"s": i64(4, -1)}, {}, "cannot infer"),
    ("Squeeze", {"x": f32(2, 3)}, {"a": i64(0)}, {}, "size is not 1"),
    ("Pad", {"x": f32(2, 3)}, {"p": i64(1, 1)}, {}, "2 entries per padded axis"),
    ("Dropout", {"x": f32(2, 3)}, {"r": np.array(1.0, np.float32), "t": np.array(True)}, {}, "below 1 in training"),
])
def test_bad_models_name_the_node(op: str, ins: dict, consts: dict, attrs: dict, words: str) -> None:
    node = helper.make_node(op, list(ins) + list(consts), ["y"], name="the_node", **attrs)
    g = helper.make_graph([node], "bad", [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape)
                                          for k, v in ins.items()],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(OnnxImportError, match=rf"node 'the_node' \({op}, opset 18\):.*{words}"):
        from_onnx(m).run(ins)


@pytest.mark.parametrize("rows, kernels", [(20, 2), (1, 1)])
def test_a_gemm_with_many_rows_reads_b_from_a_transposed_copy(rows: int, kernels: int) -> None:
    """Gemm(transB=1) with at least GEMM_COPY_MIN_ROWS rows of A reads B from a (K, N) copy (a kernel of its own,
    run once per plan for a weight), so the matmul's register tile takes B's column vectors; a one-row Gemm (a
    classifier head) reads B's (N, K) rows directly in its dot-product tile, with no copy."""
    from uopir.backends.realize import STATS
    m = model("Gemm", {"a": f32(rows, 24)}, {"b": f32(12, 24), "c": f32(12)}, {"transB": 1})
    before = STATS.kernels
    check(m, {"a": f32(rows, 24)})
    assert STATS.kernels - before == kernels


def test_a_k_transpose_is_read_from_a_copy_only_where_its_columns_fill_vectors() -> None:
    """q @ k^T reads k^T from a (K, N) copy, plain or scaled by a scalar (torch's attention export), unless N is
    short and ragged (20 tokens keep the dot-product tile; ViT's 197 get whole vectors of columns and a tail); a
    product of two tensors is no scaled permute."""
    from uopir.frontend.tensor import Tensor
    from uopir.onnx.ops_nn import _transposed_rows
    q, s = Tensor(f32(2, 20, 8)), Tensor(np.float32(0.5))
    assert _transposed_rows(q, Tensor(f32(2, 32, 8)).permute(0, 2, 1) * s)
    assert not _transposed_rows(q, Tensor(f32(2, 20, 8)).permute(0, 2, 1) * s)
    assert _transposed_rows(q, Tensor(f32(2, 32, 8)).permute(0, 2, 1))
    assert not _transposed_rows(q, Tensor(f32(2, 20, 8)).permute(0, 2, 1))
    assert _transposed_rows(q, Tensor(f32(2, 37, 8)).permute(0, 2, 1) * s)  # two vectors and more: a column tail
    assert not _transposed_rows(q, Tensor(f32(2, 32, 8)).permute(0, 2, 1) * Tensor(f32(2, 8, 32)))


@pytest.mark.parametrize("eq, kernels", [("bhqd,bhkd->bhqk", 2), ("bhqd,bhkd->bhkq", 1)])
def test_an_einsum_of_rows_by_rows_reads_b_from_a_transposed_copy(eq: str, kernels: int) -> None:
    """Attention's scores as an Einsum ('bhqd,bhkd->bhqk') run as MatMul does q @ k^T: k copied to (d, k) first (two
    kernels), where the fused dot-product tile was 1.7x slower at BERT's 12 x 128 x 64; another output order (the
    scores transposed) stays one einsum kernel."""
    from uopir.backends.realize import STATS
    ins = {"a": f32(1, 2, 16, 8), "b": f32(1, 2, 32, 8)}
    m = model("Einsum", ins, {}, {"equation": eq})
    before = STATS.kernels
    check(m, ins)
    assert STATS.kernels - before == kernels


@pytest.mark.parametrize("mode, lo, hi, skips, weights", [("TFIDF", 1, 3, 1, [0.5, 2.0, 1.0, 3.0, 1.5]),
                                                          ("IDF", 2, 3, 2, None)])
def test_tfidf_vectorizer_weighting_and_trigrams(mode: str, lo: int, hi: int, skips: int, weights: Any) -> None:
    """The node tests only cover TF without weights: IDF / TFIDF, weights, trigrams and skips against onnxruntime."""
    x = np.array([[1, 2, 3, 1, 2, 4, 2, 3], [3, 3, 1, 2, 2, 3, 4, 1]], np.int64)
    attrs = {"mode": mode, "min_gram_length": lo, "max_gram_length": hi, "max_skip_count": skips,
             "ngram_counts": [0, 2, 6], "ngram_indexes": [4, 0, 3, 1, 2], "pool_int64s": [2, 3, 1, 2, 2, 3, 1, 2, 3]}
    if weights:
        attrs["weights"] = weights
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y0"], **attrs)
    g = helper.make_graph([node], "tfidf", [helper.make_tensor_value_info("x", onnx.TensorProto.INT64, [2, 8])],
                          [helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    got = check(m, {"x": x})[0]
    assert got.shape == (2, 5) and got.any()
