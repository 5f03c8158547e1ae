"""ONNX operators whose lowering bench/onnx_ops.py found far slower than onnxruntime, pinned by the work their
kernels do (uopir.backends.estimates) beside their values: an integer nearest upscale is movement only."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from uopir.backends.estimates import estimate  # noqa: E402
from uopir.onnx import from_onnx  # noqa: E402


def _resize_model(shape: tuple[int, ...], scales: list[float], **attrs: object) -> onnx.ModelProto:
    out = [int(s * f) for s, f in zip(shape, scales, strict=True)]
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], **attrs)], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                          [numpy_helper.from_array(np.array(scales, np.float32), "s")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("attrs", [{}, {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}])
def test_resize_nearest_2x_is_a_repeat(attrs: dict) -> None:
    x = np.random.default_rng(0).standard_normal((1, 3, 5, 6)).astype(np.float32)
    m = from_onnx(_resize_model(x.shape, [1, 1, 2, 2], mode="nearest", **attrs), device="python")
    y = m.run_graph({"x": x})["y"]
    assert sum(estimate(p.program).flops for p in y.programs()) == 0  # no one-hot gather (a sum over the source)
    assert np.array_equal(y.numpy(), x.repeat(2, axis=2).repeat(2, axis=3))
