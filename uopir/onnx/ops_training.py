"""The training-domain optimizers of ONNX (ai.onnx.preview.training: Adagrad, Adam, Momentum) on the Tensor API: one
update step of every optimized tensor, the inputs grouped as (R, T, x..., g..., state...)."""
from __future__ import annotations

import math

from uopir.frontend.tensor import Tensor
from uopir.onnx.ops_shape import req, scalar
from uopir.onnx.registry import Node, onnx_op

_TRAINING = "ai.onnx.preview.training"


def _groups(node: Node, inputs: list, per: int) -> tuple[float, int, list[list[Tensor]]]:
    """(learning rate, step count, [[x, g, ...] per optimized tensor]) of an optimizer node."""
    r, t = scalar(node, req(node, inputs, 0, "R"), "R"), int(scalar(node, req(node, inputs, 1, "T"), "T"))
    rest = inputs[2:]
    if len(rest) % per:
        raise node.error(f"{len(rest)} tensor inputs do not split into groups of {per}")
    n = len(rest) // per
    return float(r), t, [[rest[j * n + i] for j in range(per)] for i in range(n)]


@onnx_op("Adagrad", domain=_TRAINING)
def adagrad(node: Node, inputs: list) -> list[Tensor]:
    r, t, groups = _groups(node, inputs, 3)
    decay, eps, norm = node.attr("decay_factor", 0.0), node.attr("epsilon", 1e-6), node.attr("norm_coefficient", 0.0)
    rr = r / (1 + t * decay)
    xs, hs = [], []
    for x, g, h in groups:
        gr = x * norm + g
        hn = h + gr * gr
        xs.append((x - rr * gr / (hn.sqrt() + eps)).cast(x.dtype))
        hs.append(hn.cast(h.dtype))
    return xs + hs


@onnx_op("Adam", domain=_TRAINING)
def adam(node: Node, inputs: list) -> list[Tensor]:
    r, t, groups = _groups(node, inputs, 4)
    alpha, beta = node.attr("alpha", 0.9), node.attr("beta", 0.999)
    eps, norm, post = node.attr("epsilon", 1e-6), node.attr("norm_coefficient", 0.0), \
        node.attr("norm_coefficient_post", 0.0)
    ra = r * math.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    xs, vs, hs = [], [], []
    for x, g, v, h in groups:
        gr = x * norm + g
        vn = v * alpha + gr * (1 - alpha)
        hn = h * beta + gr * gr * (1 - beta)
        xs.append(((x - ra * (vn / (hn.sqrt() + eps))) * (1 - post)).cast(x.dtype))
        vs.append(vn.cast(v.dtype))
        hs.append(hn.cast(h.dtype))
    return xs + vs + hs


@onnx_op("Momentum", domain=_TRAINING)
def momentum(node: Node, inputs: list) -> list[Tensor]:
    r, t, groups = _groups(node, inputs, 3)
    alpha, beta, norm = node.attr("alpha"), node.attr("beta"), node.attr("norm_coefficient")
    mode = node.attr("mode")
    if mode not in ("standard", "nesterov"):
        raise node.error(f"unknown mode {mode!r}")
    b = beta if t > 0 else 1.0
    xs, vs = [], []
    for x, g, v in groups:
        gr = x * norm + g
        vn = v * alpha + gr * b
        xs.append((x - r * vn if mode == "standard" else x - r * (gr + vn * alpha)).cast(x.dtype))
        vs.append(vn.cast(v.dtype))
    return xs + vs
