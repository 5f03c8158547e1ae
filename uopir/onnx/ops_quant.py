"""ONNX linear quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis and blocked scales; int8/uint8/
int16/uint16/int32 and the low-precision types of uopir.onnx.lowp: int4/uint4/int2/uint2, float8, float4e2m1) and
DynamicQuantizeLinear."""
from __future__ import annotations

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.onnx.importer import lowp_dtype
from uopir.onnx.lowp import cast_to
from uopir.onnx.ops_elementwise import _req
from uopir.onnx.ops_nn import conv_integer
from uopir.onnx.ops_shape import opt, req
from uopir.onnx.registry import Node, OnnxImportError, onnx_op
from uopir.onnx.types import onnx_dtype

_RANGES = {dtypes.uint8: (0, 255), dtypes.int8: (-128, 127), dtypes.uint16: (0, 65535), dtypes.int16: (-32768, 32767),
           dtypes.int32: (-(2 ** 31), 2 ** 31 - 1)}


def _along(node: Node, s: Tensor, x: Tensor, axis: int, block: int) -> Tensor:
    """A scale or zero point shaped to broadcast against x: a scalar as is, a vector along `axis`, a blocked one
    repeated block times along `axis` (cut to x's size)."""
    if s.ndim == 0 or (s.ndim == 1 and s.shape[0] == 1 and not block):
        return s.reshape(())
    axis %= x.ndim
    if block:
        if s.ndim != x.ndim:
            raise node.error(f"a blocked scale must have x's rank {x.ndim}, got shape {tuple(s.shape)}")
        r = s.repeat_interleave(block, dim=axis)
        return r.shrink(tuple((0, n) for n in x.shape))
    if s.ndim != 1 or s.shape[0] != x.shape[axis]:
        raise node.error(f"the scale's shape {tuple(s.shape)} does not fit axis {axis} of {tuple(x.shape)}")
    return s.reshape(*[x.shape[axis] if i == axis else 1 for i in range(x.ndim)])


def _dtype_attr(node: Node, name: str):  # noqa: ANN202
    code = node.attr(name, 0)
    if not code:
        return None
    try:
        return onnx_dtype(int(code))
    except OnnxImportError as e:
        raise node.error(str(e)) from None


@onnx_op("QuantizeLinear", since=10)
def quantize_linear(node: Node, inputs: list) -> Tensor:
    x, scale = _req(node, inputs, 0), _req(node, inputs, 1)
    zp = inputs[2] if len(inputs) > 2 else None
    axis, block = node.attr("axis", 1), node.attr("block_size", 0)
    lowp_in = node.lowp_in + [None] * (3 - len(node.lowp_in))
    if zp is not None:
        d, lt = zp.dtype, lowp_in[2]
    elif node.attr("output_dtype", 0):
        try:
            d, lt = lowp_dtype(int(node.attr("output_dtype")))
        except OnnxImportError as e:
            raise node.error(str(e)) from None
    else:
        d, lt = dtypes.uint8, None
    if lt is None and d not in _RANGES:
        raise node.error(f"unsupported quantized dtype {d}")
    prec = _dtype_attr(node, "precision")
    s = _along(node, scale, x, axis, block)
    q = x.cast(prec) / s.cast(prec) if prec is not None else x / s
    if lt is not None:
        node.lowp_out[0] = lt
        if lt.is_float:  # float8: the saturating (or not) cast; float4 adds its zero point first, as the reference
            if lt.code == 23 and zp is not None:
                q = q + _along(node, zp, x, axis, block).cast(q.dtype)
            return cast_to(q, lt, bool(node.attr("saturate", 1)))
        lo, hi = lt.int_range
        qi = q.round().cast(dtypes.int64)
        if zp is not None:
            qi = qi + _along(node, zp, x, axis, block).cast(dtypes.int64)
        return qi.clip(lo, hi).cast(lt.storage)
    qi = q.round().cast(dtypes.int64)
    if zp is not None:
        qi = qi + _along(node, zp, x, axis, block).cast(dtypes.int64)
    lo, hi = _RANGES[d]
    return qi.clip(lo, hi).cast(d)


@onnx_op("DequantizeLinear", since=10)
def dequantize_linear(node: Node, inputs: list) -> Tensor:
    x, scale = _req(node, inputs, 0), _req(node, inputs, 1)
    zp = inputs[2] if len(inputs) > 2 else None
    axis, block = node.attr("axis", 1), node.attr("block_size", 0)
    dx = x.cast(dtypes.float32)
    lt = node.lowp_in[0] if node.lowp_in else None
    if zp is not None and not (lt is not None and lt.is_float):  # a float8/float4 zero point is 0 (ignored)
        dx = dx - _along(node, zp, x, axis, block).cast(dtypes.float32)
    y = dx * _along(node, scale, x, axis, block)
    out = _dtype_attr(node, "output_dtype")
    if out is None and len(node.lowp_in) > 1 and node.lowp_in[1] is not None:
        raise node.error(f"unsupported dtype {node.lowp_in[1].name} of the output (a scale of that type needs an "
                         "output_dtype)")
    out = out or scale.dtype
    return y.cast(out)


@onnx_op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(node: Node, inputs: list) -> list[Tensor]:
    x = _req(node, inputs, 0).cast(dtypes.float32)
    rmax, rmin = x.max().maximum(0.0), x.min().minimum(0.0)
    scale = (rmax - rmin) / 255.0
    zp = (0.0 - rmin / scale).round().clip(0, 255)
    y = ((x / scale).round() + zp).clip(0, 255).cast(dtypes.uint8)
    return [y, scale, zp.cast(dtypes.uint8)]


# ---- quantized linear algebra ----------------------------------------------------------------------------------------
def _requant(node: Node, acc: Tensor, scale: Tensor, zp: Tensor | None, like: Tensor | None) -> Tensor:
    """round-half-even(acc * scale) + zero point, saturated to the output's int type (the zero point's dtype)."""
    d = zp.dtype if zp is not None else (like.dtype if like is not None else dtypes.uint8)
    y = (acc.cast(dtypes.float32) * scale.cast(dtypes.float32))
    r = y.round()  # Tensor.round rounds half to even (torch)
    if zp is not None:
        r = r + zp.cast(dtypes.float32)
    return r.clip(d.min, d.max).cast(d)


def _per(t: Tensor | None, nd: int, row: bool) -> Tensor | int:
    """A zero point / scale per tensor, per row (a) or per column (b), shaped to broadcast."""
    if t is None:
        return 0
    if t.numel() == 1:
        return t.reshape(())
    if t.ndim == 1:
        return t.reshape(-1, 1) if row else t
    return t


@onnx_op("QLinearMatMul", since=10)
def qlinear_matmul(node: Node, inputs: list) -> Tensor:
    a, sa, za = req(node, inputs, 0), req(node, inputs, 1, "a_scale"), opt(inputs, 2)
    b, sb, zb = req(node, inputs, 3, "b"), req(node, inputs, 4, "b_scale"), opt(inputs, 5)
    sy, zy = req(node, inputs, 6, "y_scale"), opt(inputs, 7)
    ai = a.cast(dtypes.int32) - _per(za, a.ndim, True)
    bi = b.cast(dtypes.int32) - _per(zb, b.ndim, False)
    acc = ai.cast(dtypes.float32) @ bi.cast(dtypes.float32)  # exact below 2^24, as the float reference
    scale = _per(sa, a.ndim, True) * _per(sb, b.ndim, False) / sy.reshape(())
    return _requant(node, acc, scale if isinstance(scale, Tensor) else Tensor(scale, device=a.device), zy, a)


@onnx_op("QLinearConv", since=10)
def qlinear_conv(node: Node, inputs: list) -> Tensor:
    x, sx, zx = req(node, inputs, 0), req(node, inputs, 1, "x_scale"), req(node, inputs, 2, "x_zero_point")
    w, sw, zw = req(node, inputs, 3, "w"), req(node, inputs, 4, "w_scale"), req(node, inputs, 5, "w_zero_point")
    sy, zy, b = req(node, inputs, 6, "y_scale"), req(node, inputs, 7, "y_zero_point"), opt(inputs, 8)
    acc = conv_integer(node, [x, w, zx, zw])
    if b is not None:
        acc = acc + b.cast(dtypes.int32).reshape((1, -1) + (1,) * (x.ndim - 2))
    swc = sw.reshape((1, -1) + (1,) * (x.ndim - 2)) if sw.numel() > 1 else sw.reshape(())
    scale = sx.reshape(()).cast(dtypes.float32) * swc.cast(dtypes.float32) / sy.reshape(()).cast(dtypes.float32)
    return _requant(node, acc, scale, zy, x)
