"""ONNX random operators: RandomUniform, RandomNormal (and their *Like), Bernoulli, Multinomial, and the mask of
Dropout in training mode.

The numbers are drawn on the host, as uopir's own `Tensor.rand` draws them, by numpy's legacy generator the way onnx's
reference implementation does: a node with a `seed` draws from `np.random.RandomState(seed)` afresh on every call,
so a seed gives the same output on every call and the same values as `onnx.reference.ReferenceEvaluator` (RandomUniform
and RandomNormal bit for bit; Bernoulli as its ONNX function body, `uniform < p`). A node without a seed draws its
RandomState's seed from uopir's generator (`Tensor.manual_seed` makes a run reproducible): each call, and each replay of
a captured plan, gives new numbers.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from uopir.ir.dtype import DType, dtypes
from uopir.onnx.ops_shape import req
from uopir.onnx.registry import Node, onnx_op
from uopir.onnx.types import np_dtype, onnx_dtype

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


def _state(seed: float | None) -> np.random.RandomState:
    """The generator of one draw: seeded by the node, else by a number from uopir's generator."""
    from uopir.frontend.tensor import Tensor
    if seed is None or np.isnan(seed):
        return np.random.RandomState(int(Tensor._rng.integers(2**32)))
    return np.random.RandomState(int(seed))


def draw(node: Node, shape: tuple[int, ...], dtype: DType, fn: Callable[[np.random.RandomState, tuple], np.ndarray],
         seed: float | None) -> Tensor:
    """A host-drawn tensor (`fn(state, shape)`), drawn again by each replay of a captured plan."""
    from uopir.frontend.tensor import Tensor
    if any(not isinstance(s, int) or s < 0 for s in shape):
        raise node.error(f"shape {list(shape)} must be sizes >= 0")
    return Tensor._random(tuple(shape), dtype, node.device, lambda s: fn(_state(seed), s), dtype)


def _dtype(node: Node, like: Tensor | None) -> DType:
    if node.has("dtype"):
        d = onnx_dtype(node.attr("dtype"), f"{node.where()}: attribute 'dtype': ")
    else:
        d = like.dtype if like is not None else dtypes.float32
    if not d.is_float:
        raise node.error(f"dtype {d} is not a float type")
    return d


def _uniform(node: Node, shape: tuple[int, ...], d: DType) -> Tensor:
    lo, hi = float(node.attr("low", 0.0)), float(node.attr("high", 1.0))
    nd = np_dtype(d)
    return draw(node, shape, d, lambda st, s: (st.rand(*s).astype(nd) * (hi - lo) + lo).astype(nd),
                node.attr("seed", None))


def _normal(node: Node, shape: tuple[int, ...], d: DType) -> Tensor:
    mean, scale = float(node.attr("mean", 0.0)), float(node.attr("scale", 1.0))
    nd = np_dtype(d)
    return draw(node, shape, d, lambda st, s: (st.randn(*s).astype(nd) * scale + mean).astype(nd),
                node.attr("seed", None))


@onnx_op("RandomUniform")
def random_uniform(node: Node, inputs: list) -> Tensor:
    return _uniform(node, tuple(node.attr("shape")), _dtype(node, None))


@onnx_op("RandomNormal")
def random_normal(node: Node, inputs: list) -> Tensor:
    return _normal(node, tuple(node.attr("shape")), _dtype(node, None))


@onnx_op("RandomUniformLike")
def random_uniform_like(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    return _uniform(node, tuple(x.shape), _dtype(node, x))


@onnx_op("RandomNormalLike")
def random_normal_like(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    return _normal(node, tuple(x.shape), _dtype(node, x))


@onnx_op("Bernoulli", since=15)
def bernoulli(node: Node, inputs: list) -> Tensor:
    """1 where a uniform draw (in the input's dtype) is below the probability: ONNX's function body of Bernoulli."""
    p = req(node, inputs, 0)
    out = onnx_dtype(node.attr("dtype"), f"{node.where()}: attribute 'dtype': ") if node.has("dtype") else p.dtype
    nd = np_dtype(p.dtype)
    u = draw(node, tuple(p.shape), p.dtype, lambda st, s: st.rand(*s).astype(nd), node.attr("seed", None))
    return (u < p).cast(out)


@onnx_op("Multinomial", since=7)
def multinomial(node: Node, inputs: list) -> Tensor:
    """`sample_size` class indices per row of the [batch, classes] unnormalized log-probabilities: the first class
    whose cumulative probability exceeds a uniform draw."""
    from uopir.frontend.tensor import Tensor
    x = req(node, inputs, 0)
    if x.ndim != 2:
        raise node.error(f"the input must be [batch, classes], got shape {tuple(x.shape)}")
    out = onnx_dtype(node.attr("dtype", 6), f"{node.where()}: attribute 'dtype': ")
    if out not in (dtypes.int32, dtypes.int64):
        raise node.error(f"dtype {out} must be int32 or int64")
    n = node.attr("sample_size", 1)
    b, c = x.shape
    cdf = x.cast(dtypes.float32).softmax(1).cumsum(1)  # [b, c]
    u = draw(node, (b, n), dtypes.float32, lambda st, s: st.rand(*s).astype(np.float32), node.attr("seed", None))
    idx = (cdf.reshape(b, 1, c) <= u.reshape(b, n, 1)).cast(dtypes.int32).sum(2)
    return idx.minimum(Tensor.full((), c - 1, dtype=dtypes.int32, device=x.device)).cast(out)


def dropout_mask(node: Node, x: Tensor, ratio: float) -> Tensor:
    """Dropout's training mask, as onnx's reference draws it: `uniform(0, 1) >= ratio`."""
    return draw(node, tuple(x.shape), dtypes.bool, lambda st, s: st.uniform(0.0, 1.0, s) >= ratio,
                node.attr("seed", None))

