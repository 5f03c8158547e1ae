"""Shape arithmetic of the Tensor frontend: broadcasting, axis normalization, shape arguments.

Plain functions over tuples of ints, with the frontend's error messages; they know no Tensor, so the tensor, the
indexing and the nn modules all use them without importing each other.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from uopir.frontend.variable import fmt_dims, static_only
from uopir.ir.diagnostics import AxisError, BroadcastError
from uopir.ir.uop import UOp


class ShapeArgsError(TypeError, ValueError):
    """A shape given both as a sequence and as separate ints: a TypeError, and a ValueError as tinygrad raises."""


def shape_args(shape: Any, rest: tuple) -> tuple:
    """Accept f(2, 3), f((2, 3)) and f([2, 3])."""
    if isinstance(shape, Sequence) and not isinstance(shape, str):
        if rest:
            raise ShapeArgsError(f"give the shape either as one sequence or as separate ints, not {shape!r} and "
                                 f"{rest!r}")
        return tuple(shape)
    return (shape, *rest)


def tensor_args(first: Any, rest: tuple, what: str) -> list:
    """The operands of cat/stack as tinygrad takes them: `f(a, b, c)` or `f((a, b, c))` / `f([a, b, c])` (a
    sequence alone, so `Tensor.stack((a, b), c)` is a ValueError, as in tinygrad)."""
    if isinstance(first, list | tuple):
        if rest:
            raise ValueError(f"{what} takes the tensors either as one list/tuple or as separate arguments, not both")
        if not first:
            raise ValueError(f"{what} needs at least one tensor")
        return list(first)
    return [first, *rest]


def check_shape(shape: tuple, what: str = "shape") -> tuple[int, ...]:
    """The shape as Python ints; ValueError unless every dim is a non-negative int (a symbolic dim is an error here:
    the ops that take them check with uopir.frontend.variable)."""
    if any(isinstance(s, UOp) for s in shape):
        static_only(shape, what)
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0:
            raise ValueError(f"{what} {shape} must be non-negative ints")
    return tuple(int(s) for s in shape)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting of shapes; BroadcastError (a RuntimeError, ValueError and IndexError) names every shape."""
    n = max(len(s) for s in shapes)
    out = []
    for i in range(n):
        dims = {s[i - n + len(s)] for s in shapes if i - n + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise BroadcastError(f"shapes {', '.join(fmt_dims(s) for s in shapes)} cannot be broadcast together")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def norm_axis(axis: int, ndim: int, shape: tuple[int, ...] | None = None) -> int:
    """`axis` counted from the front (negative ones count from the end); a 0-d tensor accepts 0 and -1. Out of range:
    AxisError (an IndexError, as tinygrad and torch raise, and a ValueError)."""
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"axis must be an int, got {type(axis).__name__}")
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= axis <= hi:
        raise AxisError(f"axis {axis} is out of range for a tensor of shape {shape if shape is not None else ''}"
                         f" (ndim {ndim})")
    return int(axis) % max(ndim, 1)
