"""ONNX elementwise, math, logic and cast operators (and Identity, Constant) on the Tensor API.

ONNX binary ops take operands of one dtype (the spec's type constraint) with numpy broadcasting (opset >= 7), so
uopir's promotion never changes a result dtype here; where ONNX's result dtype differs from the Tensor op's (int
division truncates, Pow keeps the base's dtype) the op function says so.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from uopir.ir.dtype import DType, dtypes
from uopir.onnx.importer import lowp_dtype, to_tensor
from uopir.onnx.lowp import LowpType, cast_to, lowp_of_np, to_storage
from uopir.onnx.ops_shape import req
from uopir.onnx.registry import Node, OnnxImportError, onnx_op
from uopir.onnx.types import onnx_dtype

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor

Ins = "list[Tensor | None]"


def _req(node: Node, inputs: list, i: int) -> Tensor:
    if i >= len(inputs) or inputs[i] is None:
        raise node.error(f"input {i} is required")
    return inputs[i]


# ---- plumbing ----------------------------------------------------------------------------------------------------
@onnx_op("Identity")
def identity(node: Node, inputs: list) -> Tensor:
    return _req(node, inputs, 0)


@onnx_op("Constant")
def constant(node: Node, inputs: list) -> Tensor:
    for key in ("sparse_value", "value_string", "value_strings"):
        if node.has(key):
            raise node.error(f"unsupported Constant attribute '{key}'")
    if node.has("value"):
        arr = node.attr("value")
        if arr.dtype.kind in "OSUc":
            raise node.error(f"unsupported dtype {arr.dtype} of the constant")
        lt = lowp_of_np(arr.dtype)
        if lt is not None:  # float8/float4/int4/int2: held in the storage dtype
            node.lowp_out[0] = lt
            return to_tensor(to_storage(arr, lt), lt.storage, node.device)
        return _scalar_or_tensor(arr, _np_to_dtype(node, arr), node.device)
    if node.has("value_float"):
        return _scalar_or_tensor(np.array(node.attr("value_float"), np.float32), dtypes.float32, node.device)
    if node.has("value_floats"):
        return to_tensor(np.array(node.attr("value_floats"), np.float32), None, node.device)
    if node.has("value_int"):
        return to_tensor(np.array(node.attr("value_int"), np.int64), None, node.device)
    if node.has("value_ints"):
        return to_tensor(np.array(node.attr("value_ints"), np.int64), None, node.device)
    raise node.error("Constant has no value attribute")


def _scalar_or_tensor(arr: np.ndarray, d: DType, device: str) -> Tensor:
    """A one-element float32/float64 Constant as a constant tensor (its value a literal in the kernels that read it,
    seen by ops: erf(x / sqrt 2) multiplies), any other as a buffer of its values."""
    if arr.size == 1 and d in (dtypes.float32, dtypes.float64):
        from uopir.frontend.tensor import Tensor
        return Tensor.full(arr.shape, float(arr.reshape(-1)[0]), dtype=d, device=device)
    return to_tensor(arr, d, device)


def _np_to_dtype(node: Node, arr):  # noqa: ANN001, ANN202
    from uopir.frontend.dtype_promotion import to_dtype
    if arr.dtype.name == "bfloat16":
        return dtypes.bfloat16
    try:
        return to_dtype(arr.dtype)
    except TypeError:
        raise node.error(f"unsupported dtype {arr.dtype}") from None


def _to_dtype_attr(node: Node):  # noqa: ANN202
    try:
        return onnx_dtype(int(node.attr("to")))
    except OnnxImportError as e:
        raise node.error(str(e)) from None


def cast_value(node: Node, x: Tensor, x_lowp: LowpType | None, d, lt: LowpType | None) -> Tensor:  # noqa: ANN001
    """x (of low-precision type x_lowp when not None, held in its storage dtype) cast to dtype d, or to the
    low-precision type lt (then the result holds lt's values in its storage dtype; see uopir.onnx.lowp)."""
    if lt is None:
        return x if x.dtype == d else x.cast(d)
    node.lowp_out[0] = lt
    if lt is x_lowp:
        return x
    saturate = bool(node.attr("saturate", 1))
    return cast_to(x, lt, saturate, node.attr("round_mode", "up"))


@onnx_op("Cast")
def cast(node: Node, inputs: list) -> Tensor:
    x = _req(node, inputs, 0)
    try:
        d, lt = lowp_dtype(int(node.attr("to")))
    except OnnxImportError as e:
        raise node.error(str(e)) from None
    return cast_value(node, x, node.lowp_in[0] if node.lowp_in else None, d, lt)


@onnx_op("CastLike", since=15)
def cast_like(node: Node, inputs: list) -> Tensor:
    x, like = _req(node, inputs, 0), _req(node, inputs, 1)
    lin = node.lowp_in + [None] * (2 - len(node.lowp_in))
    return cast_value(node, x, lin[0], like.dtype, lin[1])


# ---- arithmetic --------------------------------------------------------------------------------------------------
def _binary(name: str, f) -> None:  # noqa: ANN001
    @onnx_op(name)
    def op(node: Node, inputs: list) -> Tensor:
        if node.opset < 7 and node.attr("broadcast", 0) and node.has("axis"):
            raise node.error("legacy broadcast with an axis (opset < 7) is unsupported")
        return f(_req(node, inputs, 0), _req(node, inputs, 1))


_binary("Add", lambda a, b: a + b)
_binary("Sub", lambda a, b: a - b)
_binary("Mul", lambda a, b: a * b)


def _div(a: Tensor, b: Tensor) -> Tensor:
    if a.dtype.is_float:
        return a / b
    return a.div(b, rounding_mode="trunc").cast(a.dtype)


_binary("Div", _div)


@onnx_op("Pow")
def pow_(node: Node, inputs: list) -> Tensor:
    x, y = _req(node, inputs, 0), _req(node, inputs, 1)
    if x.dtype.is_float:
        return x.pow(y.cast(x.dtype) if y.dtype != x.dtype else y)
    if y.dtype.is_float:  # an int base to a float power: computed in float64 and truncated, as the reference
        r = x.cast(dtypes.float64).pow(y.cast(dtypes.float64))
        near = r.round()  # exp2/log2 rounding must not turn an exact integer power into the integer below
        return ((r - near).abs() < 1e-9 * near.abs().maximum(1)).where(near, r).cast(x.dtype)
    return x.pow(y.cast(x.dtype) if y.dtype != x.dtype else y).cast(x.dtype)


@onnx_op("Mod", since=10)
def mod(node: Node, inputs: list) -> Tensor:
    a, b = _req(node, inputs, 0), _req(node, inputs, 1)
    if node.attr("fmod", 0):
        return a.fmod(b)
    return a % b


def _unary(name: str, f, since: int = 1) -> None:  # noqa: ANN001
    @onnx_op(name, since=since)
    def op(node: Node, inputs: list) -> Tensor:
        x = _req(node, inputs, 0)
        if x.dtype in (dtypes.float16, dtypes.bfloat16):  # computed in float32 and rounded once, as the reference
            y = f(node, x.cast(dtypes.float32))
            return y if y.dtype == dtypes.bool else y.cast(x.dtype)
        return f(node, x)


_unary("Neg", lambda n, x: -x)
_unary("Abs", lambda n, x: x.abs())
_unary("Reciprocal", lambda n, x: x.reciprocal())
_unary("Sqrt", lambda n, x: x.sqrt())
_unary("Exp", lambda n, x: x.exp())
_unary("Log", lambda n, x: x.log())
_unary("Sin", lambda n, x: x.sin(), 7)
_unary("Cos", lambda n, x: x.cos(), 7)
_unary("Tan", lambda n, x: x.tan(), 7)
_unary("Asin", lambda n, x: x.asin(), 7)
_unary("Acos", lambda n, x: x.acos(), 7)
_unary("Atan", lambda n, x: x.atan(), 7)
_unary("Sinh", lambda n, x: x.sinh(), 9)
_unary("Cosh", lambda n, x: x.cosh(), 9)
_unary("Asinh", lambda n, x: x.asinh(), 9)
_unary("Acosh", lambda n, x: x.acosh(), 9)
_unary("Atanh", lambda n, x: x.atanh(), 9)
_unary("Erf", lambda n, x: x.erf(), 9)
_unary("Floor", lambda n, x: x.floor())
_unary("Ceil", lambda n, x: x.ceil())
_unary("Round", lambda n, x: x.round(), 11)
_unary("Sign", lambda n, x: x.sign(), 9)
_unary("Relu", lambda n, x: x.relu())
_unary("Sigmoid", lambda n, x: x.sigmoid())
_unary("Tanh", lambda n, x: x.tanh())
_unary("Softsign", lambda n, x: x / (1 + x.abs()))
_unary("Softplus", lambda n, x: x.softplus())
_unary("Mish", lambda n, x: x.mish(), 18)
# the spec's alpha * x with alpha = 1/6 (onnxruntime's HardSigmoid): a multiply, where x / 6 is a vector divide
_unary("HardSwish", lambda n, x: x * (x * (1 / 6) + 0.5).clip(0, 1), 14)
_unary("LeakyRelu", lambda n, x: x.leaky_relu(n.attr("alpha", 0.01)))
_unary("Elu", lambda n, x: x.elu(n.attr("alpha", 1.0)))
_unary("Celu", lambda n, x: x.celu(n.attr("alpha", 1.0)), 12)
_unary("Selu", lambda n, x: x.selu(n.attr("alpha", 1.67326319217681884765625),
                                   n.attr("gamma", 1.05070102214813232421875)))
_unary("HardSigmoid", lambda n, x: (x * n.attr("alpha", 0.2) + n.attr("beta", 0.5)).clip(0, 1))
_unary("ThresholdedRelu", lambda n, x: (x > n.attr("alpha", 1.0)).where(x, 0), 10)
_unary("IsNaN", lambda n, x: x.isnan(), 9)
_unary("IsInf", lambda n, x: x.isinf(bool(n.attr("detect_positive", 1)), bool(n.attr("detect_negative", 1))), 10)
_unary("Not", lambda n, x: x.logical_not())
_unary("BitwiseNot", lambda n, x: x.bitwise_not(), 18)


@onnx_op("Gelu", since=20)
def gelu(node: Node, inputs: list) -> Tensor:
    approx = node.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        raise node.error(f"unknown approximate '{approx}'")
    return _req(node, inputs, 0).gelu(approximate=approx)


@onnx_op("PRelu")
def prelu(node: Node, inputs: list) -> Tensor:
    x, slope = _req(node, inputs, 0), _req(node, inputs, 1)
    return (x < 0).where(x * slope, x)


def _clip(x: Tensor, lo, hi) -> Tensor:  # noqa: ANN001
    if lo is not None:
        x = x.maximum(lo)
    if hi is not None:
        x = x.minimum(hi)
    return x


@onnx_op("Clip")
def clip_attrs(node: Node, inputs: list) -> Tensor:
    return _clip(_req(node, inputs, 0), node.attr("min", -math.inf), node.attr("max", math.inf))


@onnx_op("Clip", since=11)
def clip(node: Node, inputs: list) -> Tensor:
    x = _req(node, inputs, 0)
    lo = inputs[1] if len(inputs) > 1 else None
    hi = inputs[2] if len(inputs) > 2 else None
    return _clip(x, lo, hi)


def _variadic(name: str, f) -> None:  # noqa: ANN001
    @onnx_op(name)
    def op(node: Node, inputs: list) -> Tensor:
        ts = [t for t in inputs if t is not None]
        if not ts:
            raise node.error("needs at least one input")
        acc = ts[0]
        for t in ts[1:]:
            acc = f(acc, t)
        return acc / len(ts) if name == "Mean" else acc


_variadic("Max", lambda a, b: a.maximum(b))
_variadic("Min", lambda a, b: a.minimum(b))
_variadic("Sum", lambda a, b: a + b)
_variadic("Mean", lambda a, b: a + b)


# ---- logic and bits ----------------------------------------------------------------------------------------------
_binary("And", lambda a, b: a & b)
_binary("Or", lambda a, b: a | b)
_binary("Xor", lambda a, b: a ^ b)
_binary("Equal", lambda a, b: a == b)
_binary("Less", lambda a, b: a < b)
_binary("Greater", lambda a, b: a > b)


@onnx_op("LessOrEqual", since=12)
def less_equal(node: Node, inputs: list) -> Tensor:
    return _req(node, inputs, 0) <= _req(node, inputs, 1)


@onnx_op("GreaterOrEqual", since=12)
def greater_equal(node: Node, inputs: list) -> Tensor:
    return _req(node, inputs, 0) >= _req(node, inputs, 1)


@onnx_op("BitwiseAnd", since=18)
def bitwise_and(node: Node, inputs: list) -> Tensor:
    return _req(node, inputs, 0) & _req(node, inputs, 1)


@onnx_op("BitwiseOr", since=18)
def bitwise_or(node: Node, inputs: list) -> Tensor:
    return _req(node, inputs, 0) | _req(node, inputs, 1)


@onnx_op("BitwiseXor", since=18)
def bitwise_xor(node: Node, inputs: list) -> Tensor:
    return _req(node, inputs, 0) ^ _req(node, inputs, 1)


@onnx_op("BitShift", since=11)
def bit_shift(node: Node, inputs: list) -> Tensor:
    """Shift amounts outside [0, bits) (the spec: as a shift by the full width) give 0, or -1 where an arithmetic
    right shift fills with the sign bit."""
    x, y = _req(node, inputs, 0), _req(node, inputs, 1)
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise node.error(f"direction must be LEFT or RIGHT, got '{direction}'")
    bits = x.dtype.itemsize * 8
    ok = (y < bits) if x.dtype.is_unsigned else (y >= 0) & (y < bits)
    shifted = x.lshift(ok.where(y, 0)) if direction == "LEFT" else x.rshift(ok.where(y, 0))
    full = x.zeros_like() if direction == "LEFT" or x.dtype.is_unsigned else (x < 0).where(-1, 0).cast(x.dtype)
    return ok.where(shifted, full)


@onnx_op("Where", since=9)
def where(node: Node, inputs: list) -> Tensor:
    c, x, y = _req(node, inputs, 0), _req(node, inputs, 1), _req(node, inputs, 2)
    return (c if c.dtype == dtypes.bool else c.cast(dtypes.bool)).where(x, y)


@onnx_op("Swish", since=24)
def swish(node: Node, inputs: list) -> Tensor:
    x = _req(node, inputs, 0)
    return x * (x * node.attr("alpha", 1.0)).sigmoid()


@onnx_op("SwiGLU", since=28)
def swiglu(node: Node, inputs: list) -> Tensor:
    a, b = req(node, inputs, 0), req(node, inputs, 1, "B")
    return a * (a * node.attr("alpha", 1.0)).sigmoid() * b


@onnx_op("Shrink", since=9)
def shrink(node: Node, inputs: list) -> Tensor:
    x = _req(node, inputs, 0)
    lambd, bias = node.attr("lambd", 0.5), node.attr("bias", 0.0)
    return (x < -lambd).where(x + bias, (x > lambd).where(x - bias, 0)).cast(x.dtype)


@onnx_op("BitCast", since=26)
def bitcast(node: Node, inputs: list) -> Tensor:
    x, d = _req(node, inputs, 0), _to_dtype_attr(node)
    if dtypes.bool in (x.dtype, d) and d.itemsize == 1 and x.dtype.itemsize == 1:
        return x.cast(d)  # bool is one byte in ONNX, 0 or 1
    if d.itemsize != x.dtype.itemsize:
        raise node.error(f"BitCast between element sizes {x.dtype.itemsize} and {d.itemsize} is unsupported")
    return x.bitcast(d)


@onnx_op("LpNormalization")
def lp_normalization(node: Node, inputs: list) -> Tensor:
    x = _req(node, inputs, 0)
    axis, p = node.attr("axis", -1), node.attr("p", 2)
    if p not in (1, 2):
        raise node.error(f"p must be 1 or 2, got {p}")
    norm = x.abs().sum(axis, keepdim=True) if p == 1 else (x * x).sum(axis, keepdim=True).sqrt()
    return (norm == 0).where(0, x / norm).cast(x.dtype)
