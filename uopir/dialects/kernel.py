"""The kernel dialect: one kernel with its loops explicit (ranges), memory access through pointers, and
reductions over ranges. Values here have no tensor shape; the dtype carries everything.
"""
from __future__ import annotations

from collections.abc import Iterator

from uopir.dialects.core import REDUCE_OPS
from uopir.ir.dtype import dtypes
from uopir.ir.ops import INT, STR, Attr, EnumAttr, IntAttr, Trait, def_op
from uopir.ir.roles import register_roles
from uopir.ir.rules import index_result_and_operand, symbolic_variable, void_result
from uopir.ir.uop import UOp
from uopir.ir.valuerange import register_range

AXIS_KINDS = ("global", "local", "loop", "reduce", "upcast", "unroll", "group")


# ---- helpers ---------------------------------------------------------------------------------------------------------
def _ranges(u: UOp, first: int) -> Iterator[str]:
    for i, r in enumerate(u.src[first:], first):
        if r.op.name != "kernel.range":
            yield f"operand {i} must be a kernel.range, got {r.op.name}"
            return


def _gate(u: UOp) -> Iterator[str]:
    g = u.operands.gate
    if g is not None and g.dtype is not dtypes.bool:
        yield f"gate must be bool, got {g.dtype}"


def _fits_pointee(ptr_base, d) -> bool:
    """A load/store moves one element of the pointee or a vector of them."""
    return d is ptr_base or (d.count > 1 and d.scalar is ptr_base)


# ---- verifiers -------------------------------------------------------------------------------------------------------
def _verify_def(u: UOp) -> Iterator[str]:
    yield from void_result(u)
    for i, s in enumerate(u.src):
        if s.dtype is not dtypes.void:
            yield f"operand {i} must be an effect (void), got {s.dtype} from {s.op.name}"
            return


def _verify_param(u: UOp) -> Iterator[str]:
    d = u.dtype
    if not d.is_ptr or d.addrspace != "global":
        yield f"result must be a global pointer, got {d}"


def _verify_range(u: UOp) -> Iterator[str]:
    yield from index_result_and_operand(u, "range end")


def _verify_end(u: UOp) -> Iterator[str]:
    yield from void_result(u)
    yield from _ranges(u, 1)


def _verify_index(u: UOp) -> Iterator[str]:
    p = u.operands.ptr.dtype
    if not p.is_ptr:
        yield f"first operand must be a pointer, got {p}"
    elif u.dtype is not p:
        yield f"result dtype {u.dtype} differs from pointer dtype {p}"
    if u.operands.offset.dtype is not dtypes.index:
        yield f"offset must be index, got {u.operands.offset.dtype}"
    yield from _gate(u)


def _verify_load(u: UOp) -> Iterator[str]:
    p = u.operands.ptr.dtype
    if not p.is_ptr:
        yield f"first operand must be a pointer, got {p}"
        return
    if not _fits_pointee(p.base, u.dtype):
        yield f"result dtype must be {p.base} or a vector of it, got {u.dtype}"
    if len(u.src) == 2:
        yield "a load takes an alternative value and a gate together (3 operands), not 2"
    elif len(u.src) == 3:
        if u.operands.alt.dtype is not u.dtype:
            yield f"alternative value dtype {u.operands.alt.dtype} differs from result dtype {u.dtype}"
        yield from _gate(u)


def _verify_store(u: UOp) -> Iterator[str]:
    yield from void_result(u)
    p, v = u.operands.ptr.dtype, u.operands.value.dtype
    if not p.is_ptr:
        yield f"first operand must be a pointer, got {p}"
    elif not _fits_pointee(p.base, v):
        yield f"stored value dtype must be {p.base} or a vector of it, got {v}"
    yield from _gate(u)


def _verify_reduce(u: UOp) -> Iterator[str]:
    d, v = u.dtype, u.operands.value.dtype
    if d is not v and (d.scalar is not v.scalar or d.is_ptr):
        yield f"result dtype {d} differs from operand dtype {v}"
    elif v.count % d.count:
        yield f"result lanes {d.count} must divide the operand's {v.count} lanes (each run of operand lanes " \
              f"reduces into one result lane)"
    yield from _ranges(u, 1)


def _sized_ptr(space: str):
    def check(u: UOp) -> Iterator[str]:
        d = u.dtype
        if not d.is_ptr or d.addrspace != space or d.size < 0:
            yield f"result must be a {space} pointer with a size (ptr<T, {space}, N>), got {d}"
    return check


def _verify_after(u: UOp) -> Iterator[str]:
    p = u.operands.ptr.dtype
    if not p.is_ptr or p.addrspace == "global":
        yield f"first operand must be a local or register pointer (a kernel's scratch buffer), got {p}"
    elif u.dtype is not p:
        yield f"result dtype {u.dtype} differs from pointer dtype {p}"
    for i, s in enumerate(u.operands.effects, 1):
        if s.dtype is not dtypes.void:
            yield f"operand {i} must be an effect (a store or an end), got {s.dtype} from {s.op.name}"
            return


# ---- the ops ---------------------------------------------------------------------------------------------------------
DEF = def_op("kernel.def", (0, None), (Attr("name", STR),), Trait.TERMINATOR | Trait.COLLECTS_EFFECTS, _verify_def,
             summary="the root of a kernel body: its effects (stores, ends)")
PARAM = def_op("kernel.param", 0, (Attr("idx", IntAttr(lo=0)),), Trait.PURE, _verify_param,
               summary="the idx-th buffer argument, a global pointer")
VAR = def_op("kernel.var", 0, (Attr("name", STR), Attr("min", INT), Attr("max", INT)), Trait.PURE, symbolic_variable,
             summary="a symbolic integer argument in [min, max]")
register_roles({"kernel_var": VAR})  # a kernel's variables, for UOp.variables (found by role)
RANGE = def_op("kernel.range", 1, (Attr("axis", IntAttr(lo=0)), Attr("kind", EnumAttr(*AXIS_KINDS), "loop")),
               Trait.PURE, _verify_range, summary="an index running over [0, end) on an axis of the given kind",
               operands=("end",))
END = def_op("kernel.end", (2, None), verify=_verify_end, summary="closes ranges after the value (usually a store)",
             operands=("value", "*ranges"))
INDEX = def_op("kernel.index", (2, 3), traits=Trait.PURE, verify=_verify_index,
               summary="pointer + offset (in elements), optionally gated", operands=("ptr", "offset", "gate"))
LOAD = def_op("kernel.load", (1, 3), verify=_verify_load,
              summary="read an element (or vector); with alt and gate, alt where the gate is false",
              operands=("ptr", "alt", "gate"))
STORE = def_op("kernel.store", (2, 3), traits=Trait.SIDE_EFFECT, verify=_verify_store,
               summary="write a value through a pointer, optionally gated", operands=("ptr", "value", "gate"))
REDUCE = def_op("kernel.reduce", (1, None), (Attr("op", EnumAttr(*REDUCE_OPS)),), Trait.PURE, _verify_reduce,
                summary="reduce the value over the given ranges (and runs of its lanes into fewer)",
                operands=("value", "*ranges"))
LOCAL = def_op("kernel.local", 0, (Attr("id", INT),), verify=_sized_ptr("local"),
               summary="a buffer in workgroup-local memory")
REGISTER = def_op("kernel.register", 0, (Attr("id", INT),), verify=_sized_ptr("register"),
                  summary="a buffer in registers (private memory)")
AFTER = def_op("kernel.after", (2, None), traits=Trait.PURE, verify=_verify_after,
               summary="a scratch pointer, to be read after the effects (stores, ends) it names have run",
               operands=("ptr", "*effects"))


# ---- value ranges ----------------------------------------------------------------------------------------------------
# A range runs over [0, end - 1]; a variable over its declared [min, max] (uopir.ir.valuerange). A range that may run
# no iteration (end <= 0) gets no bound: a singleton [0, 0] would fold the addresses it indexes to constants, and a
# load at such an address (past the end of an empty slice) is then hoisted out of the loop and read although the loop
# never runs.

register_range(RANGE, lambda _, s: (0, s[0][1] - 1) if s[0][1] >= 1 else None)
register_range(VAR, lambda u, _: (u.attrs.min, u.attrs.max))


# ---- effects ---------------------------------------------------------------------------------------------------------
def pointer_base(ptr: UOp) -> UOp | None:
    """The buffer a pointer points into (through kernel.index and kernel.after): a param, or a local or register
    scratch buffer; None for a pointer of another form."""
    while ptr.op is INDEX or ptr.op is AFTER:
        ptr = ptr.operands.ptr
    return ptr if ptr.op is PARAM or ptr.op is LOCAL or ptr.op is REGISTER else None


def stored_params(root: UOp) -> frozenset[int] | None:
    """The `idx` of every buffer argument a kernel (or device program) stores into, or None when a store's pointer
    does not lead back to a param or a scratch buffer (a form `pointer_base` does not know: callers then assume that
    any argument may be written). Runtimes ask it to tell a kernel's inputs from its outputs."""
    out: set[int] = set()
    for u in root.toposort():
        if u.op is STORE:
            base = pointer_base(u.operands.ptr)
            if base is None:
                return None
            if base.op is PARAM:
                out.add(base.attrs.idx)
    return frozenset(out)
