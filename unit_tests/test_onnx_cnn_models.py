"""The real CNNs of issue 26 built by uopir/onnx/testmodels_cnn.py (ResNet-18, MobileNetV3-small, EfficientNet-B0,
SqueezeNet 1.1): each builds at full size with the layer structure of its torchvision original and passes
onnx.checker, and runs through uopir's c device at a reduced input size matching onnxruntime (float32, 1e-4
relative). SqueezeNet compiles in seconds; the others take tens of seconds cold, so they are marked slow.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from uopir.onnx import from_onnx  # noqa: E402
from uopir.onnx.testmodels_cnn import MODELS  # noqa: E402

# (Conv count, depthwise Conv count, other op counts) of the torchvision models as exported, BatchNorm folded
STRUCTURE = {
    "resnet18": (20, 0, {"MaxPool": 1, "Add": 8, "Relu": 17, "Gemm": 1, "GlobalAveragePool": 1}),
    "mobilenet_v3_small": (52, 11, {"HardSwish": 19, "HardSigmoid": 9, "Add": 6, "Gemm": 2}),
    "efficientnet_b0": (81, 16, {"Sigmoid": 65, "Add": 9, "Gemm": 1, "GlobalAveragePool": 17}),
    "squeezenet1_1": (26, 0, {"Concat": 8, "MaxPool": 3, "Relu": 26, "GlobalAveragePool": 1}),
}
PARAMS = {"resnet18": 11_689_512 - 4_800, "mobilenet_v3_small": 2_542_856 - 6_056,
          "efficientnet_b0": 5_288_548 - 21_008, "squeezenet1_1": 1_235_496}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_builds(name: str) -> None:
    m, feeds = MODELS[name]()
    onnx.checker.check_model(m, full_check=True)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    convs, depthwise, others = STRUCTURE[name]
    groups = [next((a.i for a in n.attribute if a.name == "group"), 1) for n in m.graph.node if n.op_type == "Conv"]
    assert (ops["Conv"], sum(g > 1 for g in groups)) == (convs, depthwise)
    assert {k: ops[k] for k in others} == others
    assert feeds["x"].shape == (1, 3, 224, 224)
    # torchvision's parameter counts (11,689,512; 2,542,856; 5,288,548; 1,235,496) less one per BatchNorm channel:
    # its scale and shift fold into one conv bias
    assert sum(int(np.prod(i.dims)) for i in m.graph.initializer) == PARAMS[name]


def _check(name: str, size: int) -> None:
    m, feeds = MODELS[name](size=size)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    # the output follows the input (random weights that let the signal vanish would make any kernel pass)
    other = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": feeds["x"][:, :, ::-1].copy()})[0]
    assert np.abs(other - want).max() > 0.05 * np.abs(want).max()
    got = from_onnx(m, device="c").run(feeds)["logits"]
    assert got.shape == want.shape == (1, 1000)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


def test_squeezenet_matches_onnxruntime() -> None:
    _check("squeezenet1_1", 32)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "efficientnet_b0"])
def test_model_matches_onnxruntime(name: str) -> None:
    _check(name, 32)
