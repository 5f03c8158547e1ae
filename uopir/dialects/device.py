"""The device dialect: what a target executes — thread ids, barriers, structured control flow markers,
register accumulators, tensor-core multiplies, and the linearized program.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from uopir.ir.dtype import dtypes
from uopir.ir.ops import INT, STR, Attr, EnumAttr, IntAttr, Trait, TupleAttr, def_op, quote
from uopir.ir.rules import index_result_and_operand, void_result
from uopir.ir.uop import UOp
from uopir.ir.valuerange import register_range

SPECIAL_KINDS = ("group_id", "local_id", "global_id")
_LOOPS = frozenset(("device.loop", "kernel.range"))


def _first_is(name: str):
    def check(u: UOp) -> Iterator[str]:
        yield from void_result(u)
        if u.operands.block.op.name != name:
            yield f"first operand must be a {name}, got {u.operands.block.op.name}"
    return check


def _verify_if(u: UOp) -> Iterator[str]:
    yield from void_result(u)
    cond = u.operands.cond
    if cond.dtype is not dtypes.bool:
        yield f"condition must be bool, got {cond.dtype}"


def _verify_acc(u: UOp) -> Iterator[str]:
    init = u.operands.init.dtype
    if u.dtype is not init:
        yield f"result dtype {u.dtype} differs from init dtype {init}"
    if init.kind in ("void", "ptr"):
        yield f"accumulator must hold a number or vector, got {init}"
    for i, s in enumerate(u.operands.loops, 1):
        if s.op.name not in _LOOPS:
            yield f"operand {i} must be a device.loop (or kernel.range), got {s.op.name}"
            return


def _verify_accstore(u: UOp) -> Iterator[str]:
    acc, val = u.operands.acc, u.operands.value
    if acc.op.name != "device.acc":
        yield f"first operand must be a device.acc, got {acc.op.name}"
    if val.dtype is not acc.dtype:
        yield f"stored value dtype {val.dtype} differs from accumulator dtype {acc.dtype}"
    if u.dtype is not dtypes.void and u.dtype is not acc.dtype:
        yield f"result must be void or the accumulator dtype {acc.dtype}, got {u.dtype}"


def _verify_after(u: UOp) -> Iterator[str]:
    p = u.operands.ptr.dtype
    if not p.is_ptr:
        yield f"first operand must be a pointer, got {p}"
    elif u.dtype is not p:
        yield f"result dtype {u.dtype} differs from pointer dtype {p}"
    for i, s in enumerate(u.operands.effects, 1):
        if s.dtype is not dtypes.void:
            yield f"operand {i} must be an effect (void), got {s.dtype} from {s.op.name}"
            return


def _verify_fma(u: UOp) -> Iterator[str]:
    a, b, c = (s.dtype for s in u.src)
    if not (a is b is c is u.dtype):
        yield f"operands and result must have one dtype, got {a}, {b}, {c} -> {u.dtype}"
    elif u.dtype.scalar is not dtypes.float32:
        yield f"fma is defined on f32 and its vectors, got {u.dtype}"


def _verify_wmma(u: UOp) -> Iterator[str]:
    a, b, c = (s.dtype for s in u.src)
    if u.dtype is not c:
        yield f"result dtype {u.dtype} differs from accumulator operand dtype {c}"
    for what, d in (("a", a), ("b", b), ("c", c)):
        if d.count < 2 or d.kind in ("void", "ptr"):
            yield f"operand {what} must be a vector, got {d}"
            return


SPECIAL = def_op("device.special", 1, (Attr("kind", EnumAttr(*SPECIAL_KINDS)), Attr("dim", IntAttr(0, 2))),
                 Trait.PURE, index_result_and_operand, summary="a hardware thread/block id in [0, size) on one dim",
                 operands=("size",))
BARRIER = def_op("device.barrier", (0, None), traits=Trait.SIDE_EFFECT, verify=void_result,
                 summary="workgroup barrier after its operands (local memory writes)")
AFTER = def_op("device.after", (2, None), traits=Trait.PURE, verify=_verify_after,
               summary="its pointer operand, read only after the effects that follow it (a barrier)",
               operands=("ptr", "*effects"))
IF = def_op("device.if", (1, None), verify=_verify_if, summary="open a block run only where cond holds",
            operands=("cond", "*deps"))
ENDIF = def_op("device.endif", (1, None), verify=_first_is("device.if"),
               summary="close the block of a device.if after its operands", operands=("block", "*deps"))
LOOP = def_op("device.loop", 1, (Attr("id", INT),), verify=index_result_and_operand,
              summary="a loop counter over [0, end): a range lowered to a sequential loop", operands=("end",))
ENDLOOP = def_op("device.endloop", (1, None), verify=_first_is("device.loop"),
                 summary="close a device.loop after its operands", operands=("block", "*deps"))
ACC = def_op("device.acc", (1, None), (Attr("id", INT),), verify=_verify_acc,
             summary="a register accumulator initialized to init outside the given loops",
             operands=("init", "*loops"))
ACCSTORE = def_op("device.accstore", 2, traits=Trait.SIDE_EFFECT, verify=_verify_accstore,
                  summary="update an accumulator; a non-void result reads the updated value", operands=("acc", "value"))
WMMA = def_op("device.wmma", 3, (Attr("name", STR), Attr("dims", TupleAttr(IntAttr(lo=1), 3)), Attr("device", STR)),
              Trait.PURE, _verify_wmma, summary="tensor-core multiply-accumulate a*b+c on fragments (vectors)",
              operands=("a", "b", "c"))
FMA = def_op("device.fma", 3, traits=Trait.PURE | Trait.ELEMENTWISE, verify=_verify_fma,
             summary="fused multiply-add a * b + c, rounded once (f32; device-contract, targets that fuse)",
             operands=("a", "b", "c"))
_OPENS = {"device.loop": "device.endloop", "device.if": "device.endif"}
_CLOSES = {v: k for k, v in _OPENS.items()}


def _verify_program(u: UOp) -> Iterator[str]:
    """The program contract (docs/dialects.md): every op listed once, after its operands; loops and ifs closed
    innermost first; nothing defined inside a block (a loop counter included) is read after it closes, except an
    accumulator update (`device.accstore`), whose value after the loop is the accumulator's final value."""
    yield from void_result(u)
    index: dict[UOp, int] = {}
    dead: set[UOp] = set()  # values of blocks already closed
    open_: list[tuple[UOp, list[UOp]]] = []  # open block -> values defined in it
    for i, op in enumerate(u.src):
        where = f"operand {i} ({op.op.name})"
        if op in index:
            yield f"{where} is listed twice (first as operand {index[op]})"
            return
        for s in op.src:
            if s not in index:
                yield f"{where} uses a {s.op.name} that is not listed before it"
                return
            if s in dead:
                yield f"{where} uses a {s.op.name} defined inside a loop or if that is closed before it"
                return
        index[op] = i
        name = op.op.name
        if name in _CLOSES:
            if not open_ or open_[-1][0] is not op.operands.block:
                yield f"{where} does not close the innermost open {_CLOSES[name]}"
                return
            dead.update(v for v in open_.pop()[1] if v.op.name != "device.accstore")
            dead.add(op.operands.block)
        else:
            if open_:
                open_[-1][1].append(op)
            if name in _OPENS:
                open_.append((op, []))
    if open_:
        yield f"{open_[-1][0].op.name} (operand {index[open_[-1][0]]}) is never closed"


PROGRAM = def_op("device.program", (0, None), (Attr("name", STR),), Trait.TERMINATOR, _verify_program,
                 summary="the linearized program: its operands in execution order")

_LANG = re.compile(r"[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.$-]*")


def _verify_source(u: UOp) -> Iterator[str]:
    yield from void_result(u)
    lang, name = u.attrs.lang, u.attrs.name
    if not _LANG.fullmatch(lang):
        yield f"lang must be a lowercase language name such as \"c\" or \"llvm\", got {quote(lang)}"
    if not _NAME.fullmatch(name):
        yield f"name must be an identifier (letters, digits, '_', '.', '$', '-'), got {quote(name)}"


SOURCE = def_op("device.source", 0, (Attr("lang", STR), Attr("name", STR), Attr("text", STR)), Trait.PURE,
                _verify_source, summary="emitted source text of one program in a language (what emit-<lang> makes)")


# ---- value ranges ----------------------------------------------------------------------------------------------------
# A loop counter and a hardware id run over [0, end - 1] (uopir.ir.valuerange), like the kernel.range they replace.

register_range(LOOP, lambda _, s: (0, max(0, s[0][1] - 1)))
register_range(SPECIAL, lambda _, s: (0, max(0, s[0][1] - 1)))
