"""What a kernel does with its buffer params, read from the program: `written_params` (the params it stores to) and
`param_sizes` (how many elements each one's index math reaches).

Shared by the device runtimes (opencl, cuda: only the written buffers are copied back) and uop-run (the written
buffers are a kernel's outputs). It reads a kernel.def or a device.program alike: both address buffers through
kernel.param, kernel.index and kernel.store.
"""
from __future__ import annotations

from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.ir.valuerange import value_range

__all__ = ["written_params", "param_sizes"]


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


def param_sizes(body: UOp) -> dict[int, tuple[int | None, UOp]]:
    """param index -> (elements its index math reaches, or None when unbounded; the index op that decides): the
    buffer sizes that running a bare kernel needs (uop-run, the search's fresh buffers)."""
    lanes: dict = {}
    for u in body.toposort():
        if u.op in (K.LOAD, K.STORE):
            ops = u.operands
            n = (u.dtype if u.op is K.LOAD else ops.value.dtype).count
            lanes[ops.ptr] = max(lanes.get(ops.ptr, 1), n)
    out: dict[int, tuple[int | None, UOp]] = {}
    for u in body.toposort():
        if u.op is not K.INDEX:
            continue
        base, off = u.operands.ptr, u.operands.offset
        while base.op is K.INDEX:
            off, base = None, base.operands.ptr  # an index of an index: no bound from here
        if base.op is not K.PARAM:
            continue
        if off is None:
            out[base.arg] = (None, u)
            continue
        lo, hi = value_range(off)
        prev = out.get(base.arg, (0, u))
        if prev[0] is None:
            continue
        if lo < 0 or hi >= 2**40:
            out[base.arg] = (None, u)
        else:
            out[base.arg] = (max(prev[0], int(hi) + lanes.get(u, 1)), u)
    return out
