"""The walk over a linearized `device.program` that every host-cpu renderer (C, LLVM IR) makes.

The program's operands are its ops in execution order (what device-linearize makes; see docs/dialects.md, "Program
form"). `schedule` gives that order with any value the program reads but does not list (constants, index math)
placed before its first use; `escaping` finds the values read after the block (loop or if) that computes them has
closed, which a renderer keeps in a variable declared at the function top; `kernel_signature` says how the rendered
function is called: the `kernel.param` pointers in index order, then the `kernel.var` values in name order, then
`core_id, core_count` when the program has a global id (each core runs its share of the ids; see runtime.py).
`UNSUPPORTED` names the ops a cpu cannot run, with the reason a located error gives.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import DType
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["KernelSignature", "kernel_signature", "MAX_PARAMS", "schedule", "escaping", "uses", "op_error",
           "UNSUPPORTED", "NO_VALUE", "STACK_SCRATCH"]


def op_error(u: UOp, msg: str) -> IRError:
    """An IRError located at u."""
    return IRError(diagnostics=[diag_at(u, msg)])


STACK_SCRATCH = 1 << 16  # bytes: a kernel.local up to this size is a stack array, a larger one zeroed heap memory
NO_VALUE = frozenset((C.SINK, C.GROUP, D.PROGRAM))  # ops that compute nothing and emit nothing
UNSUPPORTED: dict[OpDef, str] = {
    D.BARRIER: "barriers (device.barrier) need a gpu target; lower for target=cpu",
    D.AFTER: "reads ordered after a barrier (device.after) need a gpu target",
    D.WMMA: "tensor-core multiplies (device.wmma) need a gpu target",
    K.RANGE: "a kernel.range is left: run kernel-to-device and device-linearize first",
    K.REDUCE: "a kernel.reduce is left: run kernel-to-device and device-linearize first",
    K.END: "a kernel.end is left: run kernel-to-device and device-linearize first",
}


@dataclass(frozen=True)
class KernelSignature:
    """How a rendered kernel is called: its name, pointer parameters (dtype per index; None where no kernel.param
    has that index), scalar variables (by name, in argument order), and whether it takes `core_id, core_count`
    last (a kernel with a global id: each core runs its share of the ids)."""

    name: str
    params: tuple[DType | None, ...]
    vars: tuple[str, ...]
    parallel: bool = False


MAX_PARAMS = 4096  # the most buffer arguments a rendered kernel takes


def kernel_signature(program: UOp, name: Callable[[str], str] = str, backend: str = "a cpu") -> KernelSignature:
    """The signature of the function rendered from `program`; `name` turns the program's name into the function's."""
    if program.op is not D.PROGRAM:
        raise op_error(program, f"the {backend} backend renders a device.program, got {program.op.name}")
    got = _SIGNATURES.get(program)
    if got is None:
        got = _scan(program, backend)
        _SIGNATURES[program] = got
    params, names, parallel = got
    return KernelSignature(name(program.arg), params, names, parallel)


# a program's (params, vars, parallel): the C renderer, the runtime and tier 0 each ask for the same program's
_SIGNATURES: weakref.WeakKeyDictionary[UOp, tuple[tuple[DType | None, ...], tuple[str, ...], bool]] = \
    weakref.WeakKeyDictionary()


def _scan(program: UOp, backend: str) -> tuple[tuple[DType | None, ...], tuple[str, ...], bool]:
    params: dict[int, DType] = {}
    names: set[str] = set()
    parallel = False
    for u in program.toposort():
        if u.op is K.PARAM:
            params[u.arg] = u.dtype.base
        elif u.op is K.VAR:
            names.add(u.arg[0])
        elif u.op is D.SPECIAL:
            parallel = True
    n = max(params) + 1 if params else 0
    if n > MAX_PARAMS:  # one pointer argument per index up to the largest: a huge index is not a function to render
        big = next(u for u in program.toposort() if u.op is K.PARAM and u.arg == n - 1)
        raise op_error(big, f"kernel.param index {n - 1} is too large: the {backend} backend renders one pointer "
                            f"argument per index, at most {MAX_PARAMS}")
    return tuple(params.get(i) for i in range(n)), tuple(sorted(names)), parallel


def uses(u: UOp) -> tuple[UOp, ...]:
    """The operands whose values u reads (the extra operands of structure ops only order them)."""
    if u.op in (D.ENDLOOP, D.ENDIF, D.IF, D.ACC, D.LOOP, D.BARRIER, D.AFTER):
        return u.src[:1] if u.op in (D.IF, D.ACC, D.LOOP, D.AFTER) else ()
    if u.op in (D.PROGRAM, C.SINK, C.GROUP):
        return ()
    return u.src


def schedule(program: UOp) -> list[UOp]:
    """The program's ops in execution order: its operands, each preceded by any value it reads that the program
    does not list (consts, index math) in dependency order."""
    listed = set(program.src)
    placed: set[UOp] = set()
    order: list[UOp] = []
    for op in program.src:
        if op in placed:
            continue
        stack: list[tuple[UOp, bool]] = [(op, False)]
        while stack:  # iterative post-order over the unlisted values op reads
            u, ready = stack.pop()
            if u in placed:
                continue
            if ready:
                placed.add(u)
                order.append(u)
                continue
            stack.append((u, True))
            stack.extend((s, False) for s in reversed(uses(u)) if s not in placed and (s not in listed or s is op))
            for s in uses(u):
                if s in listed and s not in placed and s is not op:
                    raise op_error(u, f"{u.op.name} reads a value that the program computes later ({s.op.name})")
                if s.op in (D.LOOP, D.ACC) and s not in placed:
                    raise op_error(u, f"{u.op.name} reads a {s.op.name} that is not among the program's operands")
    return order


def escaping(order: list[UOp]) -> set[UOp]:
    """Values read after the block (loop or if) that computes them has closed."""
    block: dict[UOp, int] = {}
    stack = [0]
    closed: set[int] = set()
    out: set[UOp] = set()
    n = 0
    for u in order:
        for s in uses(u):
            b = block.get(s)
            if b is not None and b in closed:
                out.add(s)
        if u.op in (D.ENDLOOP, D.ENDIF):
            if len(stack) > 1:
                closed.add(stack.pop())
            block[u] = stack[-1]
            continue
        block[u] = stack[-1]
        if u.op in (D.LOOP, D.IF):
            n += 1
            stack.append(n)
            if u.op is D.LOOP:
                block[u] = n  # the counter lives inside its loop
    return out
