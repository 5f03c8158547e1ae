"""Tensor.schedule(): the kernels that realizing tensors would run, without running them.

The tensors' graphs go through `tensor-canonicalize` and `tensor-to-kernel` (one program for all of them, so values
they share are computed once); each item is one kernel call in execution order. Realized inputs are buffers, not
kernels. New buffers get ids above the largest id in the program (see tensor-to-kernel): they are names inside this
schedule, not entries of the frontend's buffer table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


@dataclass(frozen=True)
class ScheduleItem:
    """One kernel call: `ast` is the kernel.def (print it with print_ir), `bufs` its tensor.buffer operands in
    parameter order (the first is the buffer it writes)."""

    name: str
    ast: UOp
    bufs: tuple[UOp, ...]


def schedule(*tensors: Tensor) -> list[ScheduleItem]:
    """The kernel calls that compute `tensors`, in execution order."""
    from uopir.passes.manager import PassManager
    from uopir.passes.tensor_to_kernel import schedule as lower

    root = PassManager.parse("tensor-canonicalize").run(UOp.sink(*(t.uop for t in tensors)), verify=False)
    kernels, _ = lower(root)
    return [ScheduleItem(k.name, k.ast, tuple(k.buffers)) for k in kernels]
