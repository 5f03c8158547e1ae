"""The work a compiled kernel does: floating/integer operations and bytes of memory, counted from the program the
backend runs (a kernel.def or a linearized device.program) at the sizes of one launch.

    flops: every ALU op on data (not index arithmetic), times its lanes, times how often it runs (mulacc, fma: two)
    bytes: per buffer parameter, the bytes its loads and stores move, at most the buffer's size (a value read in
           every iteration of a loop it does not depend on is counted once per buffer, as memory traffic would be)

How often an op runs: in a device program, the product of the trip counts of the loops (and global/local ids) open
where the program has it; in a kernel.def, the product of the sizes of the ranges its value depends on (a reduction
binds its own ranges). Sizes over symbolic variables are evaluated at the launch's variable values. These are the
figures of `UOPIR_DEBUG=2` (GFLOP/s and GB/s per kernel run, as tinygrad's DEBUG=2 prints them).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from uopir.dialects import core, device, kernel
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import smax, sym_infer
from uopir.ir.uop import UOp

__all__ = ["Estimates", "estimate"]

_ALU = frozenset((*core.ALU_OPS, device.FMA))


@dataclass(frozen=True)
class Estimates:
    """What one launch of a kernel computes: `flops` operations and `bytes` of memory traffic."""

    flops: int
    bytes: int

    def rates(self, seconds: float) -> tuple[float, float]:
        """(GFLOP/s, GB/s) for a run of `seconds`."""
        s = max(seconds, 1e-12)
        return self.flops / s / 1e9, self.bytes / s / 1e9


def _size(x: UOp, var_vals: Mapping[str, int]) -> int:
    try:
        return max(0, sym_infer(x, var_vals))
    except ValueError:  # an op a dimension cannot hold, or an unbound variable: its largest value
        return max(0, smax(x))


def _is_data_op(u: UOp) -> bool:
    """An ALU op on data values (index arithmetic and comparisons of indices are addressing, not work)."""
    if u.op not in _ALU or u.dtype.scalar is dtypes.index:
        return False
    return not (u.src and u.src[0].dtype.scalar is dtypes.index)


def _param(ptr: UOp) -> int | None:
    """The kernel.param index a pointer (kernel.index chain) reads or writes, None for local/register memory."""
    while ptr.op is not kernel.PARAM:
        if not ptr.src:
            return None
        ptr = ptr.src[0]
    return ptr.arg


def _ops(u: UOp) -> int:
    return u.dtype.count * (2 if u.op is core.MULACC or u.op is device.FMA else 1)


def estimate(program: UOp, var_vals: Mapping[str, int] | None = None,
             buffer_bytes: Sequence[int] | None = None) -> Estimates:
    """The flops and bytes of one launch of `program` (a kernel.def or device.program) with `var_vals`; with
    `buffer_bytes` (each parameter's buffer size) a parameter's traffic is capped at its buffer's size."""
    vals = dict(var_vals or {})
    moved: dict[int, int] = {}
    flops = 0

    def access(ptr: UOp, value_dtype, times: int) -> None:
        p = _param(ptr)
        if p is not None:
            moved[p] = moved.get(p, 0) + times * value_dtype.itemsize

    if program.op is device.PROGRAM:
        mults = [1]
        for u in program.src:
            op = u.op
            if op is device.LOOP:
                mults.append(mults[-1] * _size(u.operands.end, vals))
            elif op is device.ENDLOOP:
                mults.pop()
            elif op is device.SPECIAL:  # a global/local id: the rest of the program runs once per id
                mults[-1] *= _size(u.operands.size, vals)
            elif op is kernel.LOAD:
                access(u.operands.ptr, u.dtype, mults[-1])
            elif op is kernel.STORE:
                ops = u.operands
                access(ops.ptr, ops.value.dtype, mults[-1])
            elif _is_data_op(u):
                flops += mults[-1] * _ops(u)
    else:
        free: dict[UOp, frozenset[UOp]] = {}
        sizes: dict[UOp, int] = {}

        def times(rs: frozenset[UOp]) -> int:
            n = 1
            for r in rs:
                n *= sizes[r]
            return n

        for u in program.toposort():
            op = u.op
            if op is kernel.RANGE:
                sizes[u] = _size(u.operands.end, vals)
                free[u] = frozenset((u,))
                continue
            deps = frozenset().union(*(free[s] for s in u.src)) if u.src else frozenset()
            if op is kernel.REDUCE:
                ops = u.operands
                flops += times(free[ops.value]) * u.dtype.count
                deps = free[ops.value] - frozenset(ops.ranges)
            elif op is kernel.LOAD:
                access(u.operands.ptr, u.dtype, times(deps))
            elif op is kernel.STORE:
                ops = u.operands
                access(ops.ptr, ops.value.dtype, times(deps | free[ops.ptr]))
            elif op is kernel.END:
                deps = deps - frozenset(u.operands.ranges)
            elif _is_data_op(u):
                flops += times(deps) * _ops(u)
            free[u] = deps
    if buffer_bytes is not None:
        for p in moved:
            if p < len(buffer_bytes):
                moved[p] = min(moved[p], buffer_bytes[p])
    return Estimates(flops, sum(moved.values()))
