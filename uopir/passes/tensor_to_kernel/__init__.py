"""tensor-to-kernel: the lowering from the tensor dialect to kernels (schedule.py) over index arithmetic
(indexing.py); importing this package registers the pass."""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.ir.uop import UOp
from uopir.passes.lower_dialects import lower_dialects
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.tensor_to_kernel.schedule import MAX_KERNEL_OPS, Kernel, schedule

__all__ = ["Kernel", "schedule", "tensor_to_kernel", "TensorToKernelOptions"]


@dataclass
class TensorToKernelOptions:
    """tensor-to-kernel's options."""
    max_ops: int = field(default=MAX_KERNEL_OPS, metadata={
        "help": "size budget: tensor nodes rendered into one kernel before it is cut by materializing an intermediate "
                "(at least 2)"})

    def __post_init__(self) -> None:
        if self.max_ops < 2:
            raise ValueError(f"max-ops must be at least 2, got {self.max_ops}")


def tensor_to_kernel(root: UOp) -> UOp:
    """The scheduled program: tensor.calls of kernels on buffers, results as tensor.after reads."""
    return schedule(root)[1]


@register_pass("tensor-to-kernel", summary="fuse a tensor program into kernels and emit the schedule of their calls",
               consumes=("tensor",), produces=("core", "tensor", "kernel"), options=TensorToKernelOptions)
def _tensor_to_kernel_pass(root: UOp, options: TensorToKernelOptions, ctx: PassContext) -> UOp:
    root = lower_dialects(root, ctx)  # a plugin dialect's ops, in a pipeline that does not list lower-dialects
    kernels, out = schedule(root, options.max_ops)
    ctx.count("kernels", len(kernels))
    return out
