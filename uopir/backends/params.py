"""What a kernel does with its buffer params, read from the program: `written_params` (the params it stores to).

Shared by the device runtimes (opencl, cuda: only the written buffers are copied back) and uop-run (the written
buffers are a kernel's outputs). It reads a kernel.def or a device.program alike: both address buffers through
kernel.param, kernel.index and kernel.store.
"""
from __future__ import annotations

from uopir.dialects import kernel as K
from uopir.ir.uop import UOp

__all__ = ["written_params"]


def written_params(program: UOp) -> frozenset[int]:
    """The indices of the buffers a program stores to (the others need no copy back from a device)."""
    out: set[int] = set()
    for u in program.toposort():
        if u.op is K.STORE:
            p = u.operands.ptr
            while p.op is K.INDEX:
                p = p.operands.ptr
            if p.op is K.PARAM:
                out.add(p.arg)
    return frozenset(out)
