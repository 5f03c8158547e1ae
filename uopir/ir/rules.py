"""Verifier rules that ops of several dialects share; each yields error messages like an op's `verify`."""
from __future__ import annotations

from collections.abc import Iterator

from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp


def void_result(u: UOp) -> Iterator[str]:
    if u.dtype is not dtypes.void:
        yield f"result must be void, got {u.dtype}"


def index_result(u: UOp) -> Iterator[str]:
    if u.dtype is not dtypes.index:
        yield f"result dtype must be index, got {u.dtype}"


def index_result_and_operand(u: UOp, operand: str = "operand") -> Iterator[str]:
    """An index computed from one index operand (a thread id's size, a loop's or range's end)."""
    yield from index_result(u)
    if u.src[0].dtype is not dtypes.index:
        yield f"{operand} must be index, got {u.src[0].dtype}"


def symbolic_variable(u: UOp) -> Iterator[str]:
    """A variable `{name, min, max}` of type index with a non-empty range."""
    yield from index_result(u)
    _, lo, hi = u.arg
    if lo > hi:
        yield f"variable range is empty: min {lo} > max {hi}"
