"""The analysis of a linearized `device.program` that every renderer makes (C, OpenCL C, CUDA C, LLVM IR, MLIR).

The program's operands are its ops in execution order (what device-linearize makes; see docs/dialects.md, "Program
form"). `schedule` gives that order with any value the program reads but does not list (constants, index math)
placed before its first use; `escaping` finds the values read after the block (loop or if) that computes them has
closed, which a renderer keeps in a variable declared at the function top; `kernel_signature` says how the rendered
function is called: the `kernel.param` pointers in index order, then the `kernel.var` values in name order, then
`core_id, core_count` when the program has a global id (each core runs its share of the ids; see runtime.py).
`UNSUPPORTED` names the ops a cpu cannot run, with the reason a located error gives; the `check_*` functions are the
checks every walk makes of the program's structure (blocks that close in order, ids outside every block), each raising
a located error that names the backend (`who`: "the C backend", "the MLIR export").
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["KernelSignature", "kernel_signature", "MAX_PARAMS", "schedule", "escaping", "uses", "op_error",
           "UNSUPPORTED", "NO_VALUE", "STACK_SCRATCH", "check_supported", "check_const", "check_closes",
           "check_all_closed", "check_special", "check_offset", "innermost", "computed"]


def op_error(u: UOp, msg: str) -> IRError:
    """An IRError located at u."""
    return IRError(diagnostics=[diag_at(u, msg)])


STACK_SCRATCH = 1 << 16  # bytes: a kernel.local up to this size is a stack array, a larger one heap memory per call
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
            names.add(u.attrs.name)
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


# ---- the checks every walk makes -------------------------------------------------------------------------------------
V = TypeVar("V")


def innermost(blocks: Sequence[tuple[UOp, Any]]) -> UOp | None:
    """The opener of the innermost open block, from a walk's stack of (opener, what the writer keeps for it)."""
    return blocks[-1][0] if blocks else None


def computed(vals: Mapping[UOp, V], u: UOp, pointer: type) -> V:
    """u's entry in a walk's values: a located error when the program reads u before computing it, or reads a
    pointer (an instance of `pointer`, the writer's class for them) as a value."""
    v = vals.get(u)
    if v is None:
        raise op_error(u, f"{u.op.name} is used before the program computes it")
    if isinstance(v, pointer):
        raise op_error(u, f"a pointer ({u.dtype}) cannot be used as a value here")
    return v


def check_supported(u: UOp, who: str) -> None:
    """A located error when u is an op a cpu cannot run (UNSUPPORTED)."""
    reason = UNSUPPORTED.get(u.op)
    if reason is not None:
        raise op_error(u, f"{who} cannot render {u.op.name}: {reason}")


def check_const(u: UOp, verb: str = "rendered") -> None:
    """A located error when a core.const holds a tensor-level value (a tuple for a scalar dtype)."""
    if type(u.arg) is tuple and u.dtype.count == 1:
        raise op_error(u, f"a tensor-shaped const cannot be {verb}: lower the program to the device level")


def check_closes(u: UOp, innermost: UOp | None) -> None:
    """A device.endloop / device.endif must close the innermost open block (`innermost`: its opener, None if none)."""
    opener = u.operands.block
    if innermost is not opener:
        inner = f" (the innermost open block is a {innermost.op.name})" if innermost is not None else ""
        raise op_error(u, f"{u.op.name} closes a {opener.op.name} that is not the innermost open block{inner}")


def check_all_closed(innermost: UOp | None) -> None:
    """After the walk no block may be open (`innermost`: the opener of the innermost one still open, None if none)."""
    if innermost is not None:
        end = "device.endloop" if innermost.op is D.LOOP else "device.endif"
        raise op_error(innermost, f"{innermost.op.name} is never closed (no {end} in the program)")


def check_special(u: UOp, who: str, innermost: UOp | None, dims: set[int]) -> tuple[str, int]:
    """A device.special on a cpu is a loop over the rest of the program: a global or group id (workgroups need a
    gpu), outside every loop and if (`innermost`: the opener of the innermost open block, None if none), one per dim
    (`dims`: those seen so far; this one's is added). Returns (kind, dim)."""
    kind, dim = u.arg
    if kind == "local_id":
        raise op_error(u, f"{who} cannot render device.special {{kind = local_id}}: workgroups need a gpu target; "
                          "lower for target=cpu")
    if innermost is not None:
        raise op_error(u, f"a {kind} inside a {innermost.op.name}: ids span the whole program")
    if dim in dims:
        raise op_error(u, f"two device.special ids on dim {dim}")
    dims.add(dim)
    return kind, dim


def check_offset(u: UOp) -> DType:
    """An offset or size operand is one integer (index, int or uint); returns its scalar dtype."""
    if u.dtype.count != 1:
        raise op_error(u, f"an offset or size must be a scalar, got {u.dtype}")
    d = u.dtype.scalar
    if d.is_float or d is dtypes.bool:
        raise op_error(u, f"an offset or size must be an integer, got {u.dtype}")
    return d
