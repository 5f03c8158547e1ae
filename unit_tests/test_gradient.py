"""Autograd against central finite differences in float64: every differentiable frontend op, and second-order
gradients of a few. Kept out of the frontend suite's name pattern (test_tensor_*): it realizes about a hundred graphs,
which takes seconds on the python device but minutes of C compilation on the c leg; test_tensor_gradient.py holds the
analytic and API tests that run on both.

The finite-difference check is directional (as torch's fast gradcheck): for random directions v_i, one per input,
(L(x_i + h v_i) - L(x_i - h v_i)) / 2h must equal <dL/dx_i, v_i>, where L = sum(f(x) * w) with a random w (so the
incoming gradient is not all ones). Every evaluation and every gradient of a case is one graph, realized once.
Inputs are drawn away from kinks (|x| >= 0.3 and well apart), so max, relu and abs are differentiable there.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from uopir import Tensor, dtypes
from uopir.ir.verify import verify

RNG = np.random.default_rng(7)
H = 1e-6


def away(shape: tuple[int, ...], lo: float = 0.3, hi: float = 2.0, positive: bool = False) -> np.ndarray:
    """Distinct float64 values with lo <= |x| <= hi (all positive if asked), spaced apart (no ties)."""
    n = math.prod(shape)
    mags = np.linspace(lo, hi, max(n, 1))[:n] + RNG.uniform(0, 0.4 * (hi - lo) / max(n, 1), n)
    signs = np.ones(n) if positive else RNG.choice([-1.0, 1.0], n)
    return RNG.permutation(mags * signs).reshape(shape)


def gradcheck(f: Callable[..., Tensor], *inputs: np.ndarray, rtol: float = 1e-5, atol: float = 1e-7) -> None:
    """f's gradient for each input against central differences along two random directions (one realize)."""
    xs = [Tensor(x, dtype=dtypes.float64) for x in inputs]
    out = f(*xs)
    w = Tensor(RNG.uniform(0.5, 1.5, out.shape), dtype=dtypes.float64)

    def loss(*ts: Tensor) -> Tensor:
        return (f(*ts) * w).sum()

    grads = loss(*xs).gradient(*xs)
    parts = []
    for g, x in zip(grads, xs, strict=True):
        verify(g.uop)
        assert g.shape == x.shape and g.dtype is dtypes.float64
        for _ in range(2):
            v = Tensor(RNG.standard_normal(x.shape), dtype=dtypes.float64)
            plus = [y + v * H if y is x else y for y in xs]
            minus = [y - v * H if y is x else y for y in xs]
            fd = (loss(*plus) - loss(*minus)) / (2 * H)
            parts += [(g * v).sum().reshape(1).contiguous(), fd.reshape(1).contiguous()]
    got = Tensor.cat(*parts).numpy().reshape(-1, 2)
    np.testing.assert_allclose(got[:, 0], got[:, 1], rtol=rtol, atol=atol)


A, B, P = (3, 4), (2, 3, 4), "positive"


def _in(shape: tuple[int, ...], kind: str | None = None) -> np.ndarray:
    return away(shape, positive=kind == P)


# name -> (function, input arrays)
CASES: dict[str, tuple[Callable[..., Tensor], list[np.ndarray]]] = {
    # elementwise unary
    "neg": (lambda x: -x, [_in(A)]),
    "exp": (Tensor.exp, [_in(A)]),
    "exp2": (Tensor.exp2, [_in(A)]),
    "log": (Tensor.log, [_in(A, P)]),
    "log2": (Tensor.log2, [_in(A, P)]),
    "sqrt": (Tensor.sqrt, [_in(A, P)]),
    "rsqrt": (Tensor.rsqrt, [_in(A, P)]),
    "reciprocal": (Tensor.reciprocal, [_in(A)]),
    "sin": (Tensor.sin, [_in(A)]),
    "cos": (Tensor.cos, [_in(A)]),
    "tan": (Tensor.tan, [away(A, 0.1, 1.2)]),
    "square": (Tensor.square, [_in(A)]),
    "abs": (Tensor.abs, [_in(A)]),
    "sigmoid": (Tensor.sigmoid, [_in(A)]),
    "tanh": (Tensor.tanh, [_in(A)]),
    "relu": (Tensor.relu, [_in(A)]),
    "relu6": (Tensor.relu6, [_in(A) * 4]),
    "leaky_relu": (Tensor.leaky_relu, [_in(A)]),
    "gelu": (Tensor.gelu, [_in(A)]),
    "quick_gelu": (Tensor.quick_gelu, [_in(A)]),
    "silu": (Tensor.silu, [_in(A)]),
    "softplus": (Tensor.softplus, [_in(A)]),
    "mish": (Tensor.mish, [_in(A)]),
    "elu": (Tensor.elu, [_in(A)]),
    "celu": (Tensor.celu, [_in(A)]),
    "hardswish": (Tensor.hardswish, [_in(A)]),
    "hardsigmoid": (Tensor.hardsigmoid, [_in(A)]),
    "hardtanh": (Tensor.hardtanh, [away(A, 0.1, 0.9)]),
    "erf": (Tensor.erf, [_in(A)]),
    "clip": (lambda x: x.clip(-1.1, 1.3), [_in(A)]),
    "pow_int": (lambda x: x ** 3, [_in(A)]),
    "pow_float": (lambda x: x ** 2.5, [_in(A, P)]),
    "rpow": (lambda x: 2.0 ** x, [_in(A)]),
    "floor_mix": (lambda x: x.floor() + x * x.ceil() + x.round() * x.trunc(), [away(A, 0.2, 2.8)]),
    "cast_int_stops": (lambda x: x * x.int().double(), [away(A, 0.2, 2.8)]),
    # elementwise binary
    "add_broadcast": (lambda x, y: x + y, [_in((3, 1)), _in((1, 4))]),
    "sub": (lambda x, y: x - y, [_in(A), _in(A)]),
    "mul_broadcast": (lambda x, y: x * y, [_in(B), _in((4,))]),
    "div": (lambda x, y: x / y, [_in(A), _in(A)]),
    "rdiv_scalar": (lambda x: 2.0 / x, [_in(A)]),
    "maximum": (lambda x, y: x.maximum(y), [_in(A), _in(A)]),
    "minimum": (lambda x, y: x.minimum(y), [_in(A), _in(A)]),
    "pow_tensor": (lambda x, y: x ** y, [_in(A, P), _in(A)]),
    "mod_scalar": (lambda x: x % 0.7, [away(A, 0.05, 0.65, positive=True) + np.arange(12).reshape(A) * 0.7]),
    "where": (lambda x, y: (x > y).where(x * 2, y * y), [_in(A), _in(A)]),
    "lerp": (lambda x, y: x.lerp(y, 0.3), [_in(A), _in(A)]),
    # reductions
    "sum_axis": (lambda x: x.sum(1), [_in(B)]),
    "sum_all": (lambda x: x.sum(), [_in(B)]),
    "mean": (lambda x: x.mean((0, 2), keepdim=True), [_in(B)]),
    "max_axis": (lambda x: x.max(-1), [_in(B)]),
    "min_all": (lambda x: x.min(), [_in(B)]),
    "prod": (lambda x: x.prod(0), [_in(A)]),
    "var": (lambda x: x.var(1), [_in(A)]),
    "std": (lambda x: x.std(), [_in(A)]),
    "logsumexp": (lambda x: x.logsumexp(1), [_in(A)]),
    "softmax": (lambda x: x.softmax(), [_in(B)]),
    "log_softmax": (lambda x: x.log_softmax(0), [_in(A)]),
    "cumsum": (lambda x: x.cumsum(1), [_in(A)]),
    "cumprod": (lambda x: x.cumprod(0), [_in(A)]),
    # movement
    "reshape": (lambda x: x.reshape(4, 3) * Tensor.arange(12.0).reshape(4, 3), [_in(A)]),
    "permute": (lambda x: x.permute(2, 0, 1), [_in(B)]),
    "expand": (lambda x: x.expand(2, 3, 4), [_in((3, 1))]),
    "pad": (lambda x: x.pad(((1, 2), (0, 1))), [_in(A)]),
    "pad_value": (lambda x: x.pad(((1, 0), (2, 1)), value=3.0), [_in(A)]),
    "pad_crop": (lambda x: x.pad(((-1, 1), (0, -2))), [_in(A)]),
    "shrink": (lambda x: x.shrink(((1, 3), (0, 2))), [_in(A)]),
    "flip": (lambda x: x.flip(1), [_in(A)]),
    "getitem": (lambda x: x[1:, ::2, 1], [_in(B)]),
    "getitem_tensor": (lambda x: x[Tensor([2, 0, 2])], [_in(A)]),
    "cat": (lambda x, y: x.cat(y, dim=1), [_in(A), _in((3, 2))]),
    "stack": (lambda x, y: x.stack(y), [_in(A), _in(A)]),
    "repeat": (lambda x: x.repeat(2, 1), [_in(A)]),
    "split": (lambda x: x.split(2, 1)[1] * 2, [_in(A)]),
    "tril": (lambda x: x.tril(), [_in((3, 3))]),
    # linear algebra and nn
    "matmul": (lambda x, y: x @ y, [_in(A), _in((4, 2))]),
    "matmul_batched": (lambda x, y: x @ y, [_in(B), _in((4, 2))]),
    "matvec": (lambda x, y: x @ y, [_in(A), _in((4,))]),
    "linear": (lambda x, w, b: x.linear(w, b), [_in(A), _in((4, 2)), _in((2,))]),
    "conv2d": (lambda x, w, b: x.conv2d(w, b, padding=1), [_in((1, 2, 4, 4)), _in((3, 2, 3, 3)), _in((3,))]),
    "conv2d_stride_groups": (lambda x, w: x.conv2d(w, groups=2, stride=2),
                             [_in((1, 4, 5, 5)), _in((2, 2, 2, 2))]),
    "max_pool2d": (lambda x: x.max_pool2d(), [_in((1, 2, 4, 4))]),
    "max_pool2d_overlap": (lambda x: x.max_pool2d(3, stride=1), [_in((1, 1, 4, 4))]),
    "avg_pool2d": (lambda x: x.avg_pool2d(), [_in((1, 2, 4, 4))]),
    "layernorm": (lambda x: x.layernorm(), [_in(A)]),
    "batchnorm": (lambda x, w, b, m, s: x.batchnorm(w, b, m, s), [_in((2, 3, 2)), _in((3,)), _in((3,)), _in((3,)),
                                                                   _in((3,), P)]),
    "gather": (lambda x: x.gather(1, Tensor([[0, 2], [1, 1], [3, 0]])), [_in(A)]),
    "cross_entropy": (lambda x: x.cross_entropy(Tensor([0, 3, 1])), [_in(A)]),
    "cross_entropy_probs": (lambda x, y: x.cross_entropy(y.softmax(), label_smoothing=0.1), [_in(A), _in(A)]),
    "sparse_cce": (lambda x: x.sparse_categorical_crossentropy(Tensor([0, 3, 1])), [_in(A)]),
    "bce": (lambda x: x.sigmoid().binary_crossentropy(Tensor([[1.0, 0, 1, 0]] * 3)), [_in(A)]),
    "bce_logits": (lambda x: x.binary_crossentropy_logits(Tensor([[1.0, 0, 1, 0]] * 3)), [_in(A)]),
    "attention": (lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
                  [_in((1, 3, 2)), _in((1, 3, 2)), _in((1, 3, 2))]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_matches_finite_differences(name):
    f, inputs = CASES[name]
    gradcheck(f, *inputs)


# ---- second order ----------------------------------------------------------------------------------------------------
def _grad_of(f: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """x -> d/dx sum(f(x) * w) for a fixed random w: a function built of backward graphs, to check in turn."""
    def g(*xs: Tensor) -> Tensor:
        out = f(*xs)
        w = Tensor(np.linspace(0.5, 1.5, math.prod(out.shape)).reshape(out.shape), dtype=dtypes.float64)
        return (out * w).sum().gradient(xs[0])[0]
    return g


@pytest.mark.parametrize("name, f, inputs", [
    ("cube", lambda x: x ** 3, [_in(A)]),
    ("sin", Tensor.sin, [_in(A)]),
    ("tanh", Tensor.tanh, [_in(A)]),
    ("matmul_square", lambda x, y: (x @ y) * (x @ y), [_in(A), _in((4, 2))]),
])
def test_second_order_gradient(name, f, inputs):
    gradcheck(_grad_of(f), *inputs)


