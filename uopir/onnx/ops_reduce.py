"""ONNX reductions (Reduce*, ArgMax/ArgMin, CumSum) and the softmax family on the Tensor API.

Axes are an attribute up to opset 12 (ReduceSum) / 17 (the others) and an optional input after; empty axes mean all
axes unless noop_with_empty_axes. Results keep the input dtype (the Tensor API accumulates ints in int64: cast back).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from uopir.ir.dtype import dtypes
from uopir.onnx.ops_elementwise import _req
from uopir.onnx.registry import Node, const_ints, onnx_op

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


def _axes(node: Node, x: Tensor, axes: list[int] | None) -> tuple[int, ...] | None:
    """Normalized axes; None for 'no reduction' (noop_with_empty_axes)."""
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(x.ndim))
    out = []
    for a in axes:
        if not -x.ndim <= a < max(x.ndim, 1):
            raise node.error(f"axis {a} is out of range for rank {x.ndim}")
        out.append(a % x.ndim if x.ndim else 0)
    return tuple(sorted(set(out)))


def _reduce(name: str, f, input_since: int) -> None:  # noqa: ANN001
    def make(from_input: bool):  # noqa: ANN202
        def op(node: Node, inputs: list) -> Tensor:
            x = _req(node, inputs, 0)
            if from_input:
                t = inputs[1] if len(inputs) > 1 else None
                raw = const_ints(node, t, "axes") if t is not None else None
            else:
                raw = node.attr("axes", None)
            axes = _axes(node, x, raw)
            if axes is None:
                return x
            keep = bool(node.attr("keepdims", 1))
            if x.ndim == 0:
                return f(x.reshape(1), (0,), False)
            return f(x, axes, keep)
        return op
    onnx_op(name)(make(False))
    onnx_op(name, since=input_since)(make(True))


def _same(x: Tensor, r: Tensor) -> Tensor:
    return r if r.dtype == x.dtype else r.cast(x.dtype)


_reduce("ReduceSum", lambda x, a, k: _same(x, x.sum(a, keepdim=k)), 13)
_reduce("ReduceMean", lambda x, a, k: _same(x, x.mean(a, keepdim=k)), 18)
_reduce("ReduceProd", lambda x, a, k: _same(x, x.prod(a, keepdim=k)), 18)


def _extreme(x: Tensor, a: tuple[int, ...], k: bool, largest: bool) -> Tensor:
    """max/min; over an empty axis the identity (the spec: -inf / +inf, the int type's min / max, False / True)."""
    if any(x.shape[i] == 0 for i in a):
        import numpy as np
        shape = tuple(1 if i in a else s for i, s in enumerate(x.shape)) if k else tuple(
            s for i, s in enumerate(x.shape) if i not in a)
        if x.dtype.is_float:
            v: float | int | bool = -math.inf if largest else math.inf
        elif x.dtype == dtypes.bool:
            v = not largest
        else:
            from uopir.frontend.dtype_promotion import to_np
            info = np.iinfo(to_np(x.dtype))
            v = int(info.min if largest else info.max)
        from uopir.frontend.tensor import Tensor
        return Tensor.full(shape, v, dtype=x.dtype, device=x.device)
    return x.max(a, keepdim=k) if largest else x.min(a, keepdim=k)


_reduce("ReduceMax", lambda x, a, k: _extreme(x, a, k, True), 18)
_reduce("ReduceMin", lambda x, a, k: _extreme(x, a, k, False), 18)
_reduce("ReduceL1", lambda x, a, k: _same(x, x.abs().sum(a, keepdim=k)), 18)
_reduce("ReduceL2", lambda x, a, k: _same(x, (x * x).sum(a, keepdim=k).cast(
    x.dtype if x.dtype.is_float else dtypes.float32).sqrt()), 18)
_reduce("ReduceSumSquare", lambda x, a, k: _same(x, (x * x).sum(a, keepdim=k)), 18)
_reduce("ReduceLogSum", lambda x, a, k: _same(x, x.sum(a, keepdim=k).log()), 18)
_reduce("ReduceLogSumExp", lambda x, a, k: _same(x, x.logsumexp(a, keepdim=k)), 18)


def _arg(name: str, largest: bool) -> None:
    @onnx_op(name)
    def op(node: Node, inputs: list) -> Tensor:
        x = _req(node, inputs, 0)
        axis = node.attr("axis", 0)
        if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
            raise node.error(f"axis {axis} is out of range for rank {x.ndim}")
        axis %= max(x.ndim, 1)
        keep = bool(node.attr("keepdims", 1))
        last = node.opset >= 12 and bool(node.attr("select_last_index", 0))
        y = x if largest else (-x if x.dtype != dtypes.bool else x.logical_not())
        if last:
            n = x.shape[axis]
            idx = (n - 1) - y.flip(axis).argmax(axis, keepdim=keep)
        else:
            idx = y.argmax(axis, keepdim=keep)
        return idx.cast(dtypes.int64)


_arg("ArgMax", True)
_arg("ArgMin", False)


def _softmax(name: str, f) -> None:  # noqa: ANN001
    @onnx_op(name)
    def legacy(node: Node, inputs: list) -> Tensor:  # opset < 13: coerced to 2-D at axis
        x = _req(node, inputs, 0)
        axis = node.attr("axis", 1)
        axis %= max(x.ndim, 1)
        outer = 1
        for s in x.shape[:axis]:
            outer *= s
        return f(x.reshape(outer, -1), 1).reshape(x.shape)

    @onnx_op(name, since=13)
    def op(node: Node, inputs: list) -> Tensor:
        x = _req(node, inputs, 0)
        return f(x, node.attr("axis", -1))


def _hardmax(x: Tensor, axis: int) -> Tensor:
    axis %= max(x.ndim, 1)
    n = x.shape[axis]
    idx = x.argmax(axis, keepdim=True)
    from uopir.frontend.tensor import Tensor
    ar = Tensor.arange(n, device=x.device).reshape(*([1] * axis), n, *([1] * (x.ndim - axis - 1)))
    return (idx == ar).cast(x.dtype)


_softmax("Softmax", lambda x, a: x.softmax(a))
_softmax("LogSoftmax", lambda x, a: x.log_softmax(a))
_softmax("Hardmax", _hardmax)


def _cumulative(name: str, since: int, scan, identity: int) -> None:  # noqa: ANN001
    """CumSum / CumProd: `scan(x, axis)` is the inclusive scan; `exclusive` shifts it by one along the axis, the
    identity first (a shift rather than undoing the last step: x - x is NaN for an infinite x); `reverse` scans from
    the end."""
    @onnx_op(name, since=since)
    def op(node: Node, inputs: list) -> Tensor:
        x = _req(node, inputs, 0)
        axis = const_ints(node, inputs[1] if len(inputs) > 1 else None, "axis")[0]
        if x.ndim == 0:
            raise node.error(f"{name} of a 0-d tensor")
        axis %= x.ndim
        rev = bool(node.attr("reverse", 0))
        if rev:
            x = x.flip(axis)
        y = scan(x, axis)
        if node.attr("exclusive", 0):
            pads = [(0, 0)] * x.ndim
            pads[axis] = (1, 0)
            y = y.pad(tuple(pads), value=identity).shrink(tuple((0, x.shape[axis]) if i == axis else (0, s)
                                                                for i, s in enumerate(x.shape)))
        if rev:
            y = y.flip(axis)
        return _same(x, y)


_cumulative("CumSum", 11, lambda x, a: x.cumsum(a), 0)
_cumulative("CumProd", 26, lambda x, a: x.cumprod(a), 1)
