"""Symbolic dimensions in the frontend: `Variable("n", 1, 128)`, its `.bind(k)`, and the checks shape ops run on them.

As in tinygrad, a variable is a UOp (`tensor.var`); `.bind(k)` gives a `tensor.bind` that carries the value k, and
either one can stand where an int dimension does in reshape, expand, shrink, pad, slicing (`t[:, :n]`) and the
splat creators (`Tensor.ones(n, 4)`). Arithmetic on them (`n + 1`, `n * 4`, `10 - n`) gives index UOps; shapes keep
their canonical form (uopir.ir.symbolic), so equal dimensions are one UOp and `(n + 2) - n` is the int 2.

The kernels keep the variable (kernel.var), so one compiled kernel serves every bound value; the bound values travel
beside the graph (`uopir.ir.symbolic.var_vals`). Where a dimension has a value now (every variable in it is bound),
the frontend checks the op at that value and raises ValueError naming the op and the dimensions; elsewhere the
tensor dialect's rules apply (they reject only what no value of the variables could satisfy).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from uopir.dialects import tensor as T
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import canon, render, sym_infer
from uopir.ir.uop import UOp

__all__ = ["Variable", "is_sym", "as_dim", "dims", "value_of", "fmt_dims", "static_only"]


def Variable(name: str, min_val: int, max_val: int) -> UOp:  # noqa: N802 - tinygrad's name
    """A symbolic integer `name` in [min_val, max_val] (a `tensor.var`); `.bind(k)` gives it the value k."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"Variable needs a non-empty name, got {name!r}")
    for what, v in (("min_val", min_val), ("max_val", max_val)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"Variable {name!r}: {what} must be an int, got {type(v).__name__}")
    if min_val > max_val:
        raise ValueError(f"Variable {name!r}: min_val {min_val} > max_val {max_val}")
    return UOp(T.VAR, dtypes.index, (), (name, int(min_val), int(max_val)))


def is_sym(x: Any) -> bool:
    """Is x a symbolic dimension (a UOp), not an int?"""
    return isinstance(x, UOp)


def as_dim(x: Any, what: str) -> int | UOp:
    """An int or a symbolic dimension in canonical form; TypeError for anything else (`what` names the argument)."""
    if isinstance(x, UOp):
        if x.dtype is not dtypes.index or x.shape is not None:
            raise TypeError(f"{what}: a symbolic dimension must be an index value (a Variable, a bound one, or "
                            f"arithmetic on them), got {x.op.name} of type {x.dtype}")
        return canon(x)
    if isinstance(x, bool) or not isinstance(x, int | np.integer):
        raise TypeError(f"{what}: expected an int or a Variable, got {type(x).__name__}")
    return int(x)


def dims(shape: Iterable[Any], what: str) -> tuple[int | UOp, ...]:
    return tuple(as_dim(d, what) for d in shape)


def value_of(d: int | UOp) -> int | None:
    """The value a dimension has now (every variable in it bound), else None."""
    if not isinstance(d, UOp):
        return d
    try:
        return sym_infer(d)
    except ValueError:
        return None


def fmt_dims(shape: Iterable[Any]) -> str:
    """`(3, n)`: a shape for messages, a symbolic dim as its expression."""
    parts = [render(d) if isinstance(d, UOp) else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def static_only(shape: Iterable[Any], what: str) -> None:
    """ValueError when `what` (a shape argument that must be static) holds a symbolic dimension."""
    shape = tuple(shape)
    if any(isinstance(d, UOp) for d in shape):
        raise ValueError(f"{what} {fmt_dims(shape)} needs a static shape (symbolic dims are taken by reshape, "
                         f"expand, pad, shrink, slicing and full/zeros/ones)")
