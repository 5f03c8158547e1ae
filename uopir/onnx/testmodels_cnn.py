"""The real CNNs of issue 26 (ResNet-18, MobileNetV3-small, EfficientNet-B0, SqueezeNet 1.1) built with onnx.helper
and random weights (fixed seed), for the bench (bench/real_models.py) and the model tests
(unit_tests/test_onnx_cnn_models.py), since torchvision (a multi-GB CUDA build) is not installed here.

Faithful to torchvision's definitions as torch exports them in eval mode (opset 17): every layer's shape, kernel,
stride, padding, group count and channel count, the op types (BatchNormalization folded into Conv with a bias, as
the exporter folds it; Relu, HardSwish, HardSigmoid, Sigmoid*Mul for SiLU, MaxPool with ceil_mode for SqueezeNet,
GlobalAveragePool for the adaptive pools to 1x1, Concat for the fire modules, Flatten + Gemm for the classifier),
the residual Adds and the squeeze-excite blocks (GlobalAveragePool, 1x1 Conv, activation, 1x1 Conv, gate, Mul).
Simplified: the weights are random (He-scaled so that activations stay O(1) through the depth; biases small), Dropout
is omitted (an identity in eval mode), the input size is a parameter (224 by default; the tests use less), and
ops the exporter may emit around the classifier (a Reshape for Flatten on old opsets) are the plain forms.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from uopir.onnx.testmodels import _finish, _helpers


class _Net:
    """A graph under construction: nodes, initializers, fresh names, He-scaled random weights."""

    def __init__(self, seed: int) -> None:
        self.r = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: dict[str, np.ndarray] = {}
        self.n = 0

    def name(self, p: str) -> str:
        self.n += 1
        return f"{p}{self.n}"

    def node(self, op: str, ins: list[str], **attrs: Any) -> str:
        _, helper, _ = _helpers()
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int | None = None, group: int = 1,
             gain: float = 2.0) -> str:
        """A Conv with a bias (a conv + eval BatchNormalization folded, as torch's exporter emits it)."""
        p = k // 2 if pad is None else pad
        fan_in = cin // group * k * k
        w, b = self.name("w"), self.name("b")
        self.inits[w] = (self.r.standard_normal((cout, cin // group, k, k)) * np.sqrt(gain / fan_in)).astype(np.float32)
        self.inits[b] = (self.r.standard_normal(cout) * 0.05).astype(np.float32)
        return self.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p],
                         group=group)

    def gemm(self, x: str, cin: int, cout: int, gain: float = 1.0) -> str:
        w, b = self.name("w"), self.name("b")
        self.inits[w] = (self.r.standard_normal((cout, cin)) * np.sqrt(gain / cin)).astype(np.float32)
        self.inits[b] = (self.r.standard_normal(cout) * 0.05).astype(np.float32)
        return self.node("Gemm", [x, w, b], transB=1)

    def act(self, x: str, kind: str) -> str:
        if kind == "relu":
            return self.node("Relu", [x])
        if kind == "hswish":
            return self.node("HardSwish", [x])
        if kind == "silu":  # torch exports SiLU as x * Sigmoid(x)
            return self.node("Mul", [x, self.node("Sigmoid", [x])])
        if kind == "none":
            return x
        raise ValueError(kind)

    def pool_flat(self, x: str) -> str:
        """torch's AdaptiveAvgPool2d(1) + flatten, as exported."""
        return self.node("Flatten", [self.node("GlobalAveragePool", [x])], axis=1)

    def finish(self, out: str, batch: int, size: int, classes: int, name: str) -> tuple[Any, dict]:
        onnx, helper, _ = _helpers()
        assert self.nodes[-1].output[0] == out
        self.nodes[-1].output[0] = "logits"
        f = onnx.TensorProto.FLOAT
        m = _finish(self.nodes, [helper.make_tensor_value_info("x", f, [batch, 3, size, size])],
                    [helper.make_tensor_value_info("logits", f, [batch, classes])], self.inits, name, 17)
        return m, {"x": self.r.standard_normal((batch, 3, size, size)).astype(np.float32)}


def _divisible(v: float, d: int = 8) -> int:
    """torchvision's _make_divisible: round to a multiple of d, never below 90% of v."""
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def resnet18(batch: int = 1, size: int = 224, classes: int = 1000, seed: int = 0) -> tuple[Any, dict]:
    """(model, inputs): ResNet-18, 7x7/2 stem, 3x3/2 max pool, 4 stages of 2 BasicBlocks (1x1/2 downsample)."""
    g = _Net(seed)
    x = g.node("Relu", [g.conv("x", 3, 64, 7, stride=2, pad=3)])
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            s = 2 if stage > 0 and block == 0 else 1
            h = g.node("Relu", [g.conv(x, cin, cout, 3, stride=s)])
            h = g.conv(h, cout, cout, 3, gain=1.0)
            skip = g.conv(x, cin, cout, 1, stride=s, gain=1.0) if s != 1 or cin != cout else x
            x = g.node("Relu", [g.node("Add", [h, skip])])
            cin = cout
    out = g.gemm(g.pool_flat(x), 512, classes)
    return g.finish(out, batch, size, classes, "resnet18")


# 1 / E[act(x)^2] for x ~ N(0, 1): the He gain that keeps a conv fed by act(...) at unit variance, so that random
# weights do not let the signal vanish through 16 blocks (trained BatchNorm statistics do that in the real nets)
_GAIN = {"relu": 2.0, "hswish": 3.02, "silu": 2.81, "none": 1.0}


def _inverted_residual(g: _Net, x: str, cin: int, k: int, exp: int, cout: int, se: int, act: str, stride: int,
                       se_act: str, gate: str) -> str:
    """An MBConv block: 1x1 expand (skipped when exp == cin), kxk depthwise, squeeze-excite with `se` channels
    (0: none), 1x1 linear project, residual when the shape is kept. The excite conv's bias is +3 so the random
    gates sit near 1 (not 0.5, which would halve the signal at every block) yet still vary per channel."""
    h = g.act(g.conv(x, cin, exp, 1, gain=1.0), act) if exp != cin else x
    h = g.act(g.conv(h, exp, exp, k, stride=stride, group=exp, gain=_GAIN[act] if exp != cin else 1.0), act)
    if se:
        s = g.act(g.conv(g.node("GlobalAveragePool", [h]), exp, se, 1, gain=4.0), se_act)
        s = g.conv(s, se, exp, 1, gain=_GAIN[se_act])
        g.inits[g.nodes[-1].input[2]] += 3.0
        s = g.node("HardSigmoid", [s], alpha=1 / 6, beta=0.5) if gate == "hsigmoid" else g.node("Sigmoid", [s])
        h = g.node("Mul", [h, s])
    h = g.conv(h, exp, cout, 1, gain=_GAIN[act] * 1.1)
    return g.node("Add", [h, x]) if stride == 1 and cin == cout else h


# torchvision mobilenet_v3_small: (kernel, expanded, out, squeeze-excite, activation, stride) per block
_MNV3_SMALL = [(3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2), (3, 88, 24, False, "relu", 1),
               (5, 96, 40, True, "hswish", 2), (5, 240, 40, True, "hswish", 1), (5, 240, 40, True, "hswish", 1),
               (5, 120, 48, True, "hswish", 1), (5, 144, 48, True, "hswish", 1), (5, 288, 96, True, "hswish", 2),
               (5, 576, 96, True, "hswish", 1), (5, 576, 96, True, "hswish", 1)]


def mobilenet_v3_small(batch: int = 1, size: int = 224, classes: int = 1000, seed: int = 0) -> tuple[Any, dict]:
    """(model, inputs): MobileNetV3-small: 3x3/2 stem (HardSwish), 11 inverted residuals (depthwise 3x3/5x5,
    squeeze-excite with HardSigmoid), 1x1 to 576, pool, 576 -> 1024 (HardSwish) -> classes."""
    g = _Net(seed)
    x = g.act(g.conv("x", 3, 16, 3, stride=2, gain=1.0), "hswish")
    cin = 16
    for k, exp, cout, se, act, s in _MNV3_SMALL:
        x = _inverted_residual(g, x, cin, k, exp, cout, _divisible(exp // 4) if se else 0, act, s, "relu",
                               "hsigmoid")
        cin = cout
    x = g.act(g.conv(x, cin, 576, 1, gain=1.0), "hswish")
    h = g.act(g.gemm(g.pool_flat(x), 576, 1024, gain=_GAIN["hswish"]), "hswish")
    out = g.gemm(h, 1024, classes, gain=_GAIN["hswish"])
    return g.finish(out, batch, size, classes, "mobilenet_v3_small")


# torchvision efficientnet_b0: (expand ratio, kernel, stride, out channels, layers) per stage
_EFFNET_B0 = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
              (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]


def efficientnet_b0(batch: int = 1, size: int = 224, classes: int = 1000, seed: int = 0) -> tuple[Any, dict]:
    """(model, inputs): EfficientNet-B0: 3x3/2 stem (SiLU), 16 MBConv blocks (SiLU, squeeze-excite to a quarter of
    the block's input channels, Sigmoid gate), 1x1 to 1280, pool, classes."""
    g = _Net(seed)
    x = g.act(g.conv("x", 3, 32, 3, stride=2, gain=1.0), "silu")
    cin = 32
    for e, k, s, cout, layers in _EFFNET_B0:
        for i in range(layers):
            x = _inverted_residual(g, x, cin, k, cin * e, cout, max(1, cin // 4), "silu", s if i == 0 else 1,
                                   "silu", "sigmoid")
            cin = cout
    x = g.act(g.conv(x, cin, 1280, 1, gain=1.0), "silu")
    out = g.gemm(g.pool_flat(x), 1280, classes, gain=_GAIN["silu"])
    return g.finish(out, batch, size, classes, "efficientnet_b0")


def squeezenet1_1(batch: int = 1, size: int = 224, classes: int = 1000, seed: int = 0) -> tuple[Any, dict]:
    """(model, inputs): SqueezeNet 1.1: 3x3/2 stem, 8 fire modules (1x1 squeeze, 1x1 and 3x3 expands joined by
    Concat) between 3x3/2 ceil-mode max pools, a 1x1 conv classifier, ReLU, global pool, Flatten."""
    g = _Net(seed)

    def pool(x: str) -> str:
        return g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    def fire(x: str, cin: int, sq: int, e1: int, e3: int) -> str:
        s = g.node("Relu", [g.conv(x, cin, sq, 1)])
        return g.node("Concat", [g.node("Relu", [g.conv(s, sq, e1, 1)]), g.node("Relu", [g.conv(s, sq, e3, 3)])],
                      axis=1)

    x = pool(g.node("Relu", [g.conv("x", 3, 64, 3, stride=2, pad=0)]))
    x = pool(fire(fire(x, 64, 16, 64, 64), 128, 16, 64, 64))
    x = pool(fire(fire(x, 128, 32, 128, 128), 256, 32, 128, 128))
    x = fire(fire(fire(fire(x, 256, 48, 192, 192), 384, 48, 192, 192), 384, 64, 256, 256), 512, 64, 256, 256)
    x = g.node("Relu", [g.conv(x, 512, classes, 1, pad=0, gain=1.0)])
    out = g.pool_flat(x)
    return g.finish(out, batch, size, classes, "squeezenet1_1")


MODELS: dict[str, Callable[..., tuple[Any, dict]]] = {
    "resnet18": resnet18, "mobilenet_v3_small": mobilenet_v3_small, "efficientnet_b0": efficientnet_b0,
    "squeezenet1_1": squeezenet1_1}
