"""The tensor dialect: what the frontend builds (buffers, movement, reductions, effects) and, after scheduling,
calls of kernels on buffers.

Every tensor value has a shape derived by the op's shape rule; a rule that cannot hold raises ShapeError naming
both shapes, which the verifier turns into a located diagnostic.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uopir.dialects.core import CONST, REDUCE_OPS, const, const_value, fmt_shape, keep, lanes_are
from uopir.ir.diagnostics import ShapeError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.folds import declare_folds
from uopir.ir.ops import INT, INTS, REGION, SHAPE, STR, Attr, EnumAttr, IntAttr, OpDef, Trait, TupleAttr, def_op
from uopir.ir.pattern import UPat
from uopir.ir.printer import fmt_type
from uopir.ir.rules import index_result, symbolic_variable
from uopir.ir.uop import UOp


# ---- helpers ---------------------------------------------------------------------------------------------------------
def tensor_type(shape: tuple[int, ...], dtype: DType) -> str:
    """`tensor<4x4xf32>` / `tensor<f32>`: the printed type of a tensor value, for messages."""
    return fmt_type(dtype, shape)


def prod(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _operand_shape(u: UOp) -> tuple[int, ...]:
    """The tensor operand's shape; movement ops do not apply to scalars or kernel-level values."""
    x = u.src[0]
    s = x.shape
    if s is None:
        raise ShapeError(f"operand must be a tensor, got a value of type {x.dtype} without a shape")
    return s


def _check_axes(axes: tuple[int, ...], shape: tuple[int, ...], dtype: DType) -> None:
    seen = set()
    for a in axes:
        if not 0 <= a < len(shape):
            raise ShapeError(f"axis {a} out of range for {tensor_type(shape, dtype)} ({len(shape)} axes)")
        if a in seen:
            raise ShapeError(f"axis {a} repeated in {fmt_shape(axes)}")
        seen.add(a)


# ---- shape rules -----------------------------------------------------------------------------------------------------
def _buffer_shape(u: UOp) -> tuple[int, ...]:
    return u.arg[2]


def _same_shape(u: UOp) -> tuple[int, ...]:
    return _operand_shape(u)


def _reshape_shape(u: UOp) -> tuple[int, ...]:
    s, new = _operand_shape(u), u.arg
    if prod(s) != prod(new):
        raise ShapeError(f"cannot reshape {tensor_type(s, u.src[0].dtype)} ({prod(s)} elements) to {fmt_shape(new)} "
                         f"({prod(new)} elements)")
    return new


def _permute_shape(u: UOp) -> tuple[int, ...]:
    s, perm = _operand_shape(u), u.arg
    if sorted(perm) != list(range(len(s))):
        raise ShapeError(f"{fmt_shape(perm)} is not a permutation of the {len(s)} axes of "
                         f"{tensor_type(s, u.src[0].dtype)}")
    return tuple(s[p] for p in perm)


def _expand_shape(u: UOp) -> tuple[int, ...]:
    s, new = _operand_shape(u), u.arg
    if len(s) != len(new):
        raise ShapeError(f"cannot expand {tensor_type(s, u.src[0].dtype)} to {fmt_shape(new)}: "
                         f"rank {len(s)} vs {len(new)}")
    for i, (a, b) in enumerate(zip(s, new, strict=True)):
        if a != b and a != 1:
            raise ShapeError(f"cannot expand {tensor_type(s, u.src[0].dtype)} to {fmt_shape(new)}: "
                             f"axis {i} has size {a}, not 1")
    return new


def _pad_shape(u: UOp) -> tuple[int, ...]:
    s, pads = _operand_shape(u), u.arg
    if len(pads) != len(s):
        raise ShapeError(f"pad of {tensor_type(s, u.src[0].dtype)} needs {len(s)} [before, after] pairs, "
                         f"got {len(pads)}")
    return tuple(b + d + a for d, (b, a) in zip(s, pads, strict=True))


def _shrink_shape(u: UOp) -> tuple[int, ...]:
    s, bounds = _operand_shape(u), u.arg
    if len(bounds) != len(s):
        raise ShapeError(f"shrink of {tensor_type(s, u.src[0].dtype)} needs {len(s)} [start, end] pairs, "
                         f"got {len(bounds)}")
    for i, (d, (b, e)) in enumerate(zip(s, bounds, strict=True)):
        if not 0 <= b <= e <= d:
            raise ShapeError(f"cannot shrink {tensor_type(s, u.src[0].dtype)} to bounds "
                             f"{[list(x) for x in bounds]}: axis {i} needs 0 <= {b} <= {e} <= {d}")
    return tuple(e - b for b, e in bounds)


def _flip_shape(u: UOp) -> tuple[int, ...]:
    s = _operand_shape(u)
    _check_axes(u.arg, s, u.src[0].dtype)
    return s


def _reduce_shape(u: UOp) -> tuple[int, ...]:
    s = _operand_shape(u)
    axes = u.arg[1]
    _check_axes(axes, s, u.src[0].dtype)
    return tuple(1 if i in axes else d for i, d in enumerate(s))


def _assign_shape(u: UOp) -> tuple[int, ...]:
    t, v = u.src[0].shape, u.src[1].shape
    if t is None:
        raise ShapeError(f"assign target must be a tensor, got a value of type {u.src[0].dtype} without a shape")
    if v is not None and v != t:
        raise ShapeError(f"assign target and value have different shapes: {fmt_shape(t)} vs {fmt_shape(v)}")
    return t


# ---- dtype rules -----------------------------------------------------------------------------------------------------
def _verify_like_src0(u: UOp) -> Iterator[str]:
    if u.dtype is not u.src[0].dtype:
        yield f"result dtype {u.dtype} differs from operand dtype {u.src[0].dtype}"


def _verify_buffer(u: UOp) -> Iterator[str]:
    d = u.dtype
    if d.count != 1 or d.kind in ("void", "ptr"):
        yield f"buffer dtype must be a scalar number or bool, got {d}"


def _verify_assign(u: UOp) -> Iterator[str]:
    t, v = u.src
    if t.dtype is not v.dtype:
        yield f"assign target and value dtypes differ: {t.dtype} vs {v.dtype}"
    elif u.dtype is not t.dtype:
        yield f"result dtype {u.dtype} differs from target dtype {t.dtype}"
    base = t
    while base.op in ASSIGNABLE_VIEWS and base.src:
        base = base.src[0]
    if base.op is not BUFFER:
        via = f" (through {t.op.name})" if base is not t else ""
        yield f"assign target must be a tensor.buffer or a reshape/permute/shrink/flip view of one, got " \
              f"{base.op.name}{via}"


def _verify_bind(u: UOp) -> Iterator[str]:
    yield from index_result(u)
    var, val = u.src
    if var.op is not VAR:
        yield f"first operand must be a tensor.var, got {var.op.name}"
        return
    if val.op is not CONST or val.dtype is not dtypes.index or type(val.arg) is not int:
        yield f"second operand must be an index core.const, got {val.op.name} of type {val.dtype}"
        return
    name, lo, hi = var.arg
    if not lo <= val.arg <= hi:
        yield f"value {val.arg} of variable {name!r} is outside [{lo}, {hi}]"


def _verify_after(u: UOp) -> Iterator[str]:
    yield from _verify_like_src0(u)
    if u.src[0].op.name != "tensor.buffer":
        yield f"first operand must be a tensor.buffer, got {u.src[0].op.name}"
    for i, s in enumerate(u.src[1:], 1):
        if s.dtype is not dtypes.void:
            yield f"operand {i} must be an effect (void), got {s.dtype} from {s.op.name}"
            return


def _verify_call(u: UOp) -> Iterator[str]:
    if u.dtype is not dtypes.void:
        yield f"result must be void, got {u.dtype}"
    root = getattr(u.arg[0].op, "name", "an unregistered op")
    if root not in ("kernel.def", "device.program"):
        yield f"the kernel region's root must be a kernel.def or a device.program, got {root}"


# ---- folds (declared beside each row below; exact against uopir.dialects.semantics) -----------------------------
def _reshape_fold(x: UOp, m: UOp) -> UOp | None:
    """A reshape to the operand's shape is the operand; a reshape of a reshape is one reshape."""
    if m.arg == x.shape:
        return x
    if x.op is RESHAPE:
        return m.replace(src=x.src) if x.src[0].shape != m.arg else x.src[0]
    return None


def _permute_fold(x: UOp, m: UOp) -> UOp | None:
    """The identity permutation is the operand; permutes compose (result axis i is source axis p1[p2[i]])."""
    if m.arg == tuple(range(len(m.arg))):
        return x
    if x.op is PERMUTE:
        return m.replace(src=x.src, arg=tuple(x.arg[i] for i in m.arg))
    return None


def _expand_fold(x: UOp, m: UOp) -> UOp | None:
    if m.arg == x.shape:
        return x
    return m.replace(src=x.src) if x.op is EXPAND else None


def _pad_fold(x: UOp, m: UOp) -> UOp | None:
    """Zero pads are the operand; pads of pads add up."""
    if all(b == 0 and a == 0 for b, a in m.arg):
        return x
    if x.op is PAD:
        return m.replace(src=x.src, arg=tuple((b0 + b1, a0 + a1) for (b0, a0), (b1, a1) in zip(x.arg, m.arg,
                                                                                              strict=True)))
    return None


def _shrink_fold(x: UOp, m: UOp) -> UOp | None:
    """A full shrink is the operand; shrinks of shrinks add their offsets."""
    xs = x.shape
    if xs is not None and all(b == 0 and e == d for (b, e), d in zip(m.arg, xs, strict=True)):
        return x
    if x.op is SHRINK:
        return m.replace(src=x.src, arg=tuple((b0 + b1, b0 + e1) for (b0, _), (b1, e1) in zip(x.arg, m.arg,
                                                                                             strict=True)))
    return None


def _flip_fold(x: UOp, m: UOp) -> UOp | None:
    """Flipping size-1 axes does nothing; flips of flips keep the axes flipped an odd number of times."""
    xs = x.shape
    axes = tuple(a for a in m.arg if xs is None or xs[a] != 1)
    if x.op is FLIP:
        inner = x.src[0].shape
        both = sorted(set(axes) ^ {a for a in x.arg if inner is None or inner[a] != 1})
        return x.src[0] if not both else m.replace(src=x.src, arg=tuple(both))
    if not axes:
        return x
    return m.replace(arg=axes) if axes != m.arg else None


def _movement(op: OpDef, fn: Any, name: str) -> tuple[UPat, Any, str]:
    return UPat(op, src=(UPat.var("x"),), name="m"), fn, name


def _const_movement(c: UOp, m: UOp) -> UOp | None:
    """A movement of a splat const is the const in the new shape (a pad only when the value is +0 / false)."""
    if c.dtype.count != 1 or (m.op is PAD and not lanes_are(c, False if c.dtype.is_bool else 0)):
        return None
    try:
        return const(c.dtype, const_value(c), m.shape)
    except ShapeError:  # an unverified graph: the verifier reports it
        return None


def _const_reduce(c: UOp, r: UOp) -> UOp | None:
    """A reduce of a splat const: exact for max/min (any dtype) and for integer/bool add/mul."""
    op, axes = r.arg
    try:
        cs, rs = c.shape, r.shape
    except ShapeError:
        return None
    if cs is None or c.dtype.count != 1 or r.dtype is not c.dtype:
        return None
    n = prod(tuple(cs[a] for a in axes))
    d, v = c.dtype, const_value(c)
    if n == 0:
        return const(d, {"add": 0, "mul": 1, "max": d.min, "min": d.max}[op], rs)
    if op in ("max", "min") or d.is_bool:
        return const(d, v, rs)  # for bool add/mul are or/and of copies of v
    if d.is_int:
        return const(d, v * n if op == "add" else pow(v, n, 1 << d.bits), rs)
    return None


def _twice(x: UOp, m: UOp) -> UOp | None:
    """contiguous(contiguous(x)) and detach(detach(x)) are the inner op."""
    return keep(m, x)


# ---- the ops ---------------------------------------------------------------------------------------------------------
_PAIRS = TupleAttr(TupleAttr(IntAttr(lo=0), 2))

BUFFER = def_op("tensor.buffer", 0,
                (Attr("id", IntAttr(lo=0)), Attr("device", STR), Attr("shape", SHAPE, in_type=True)),
                verify=_verify_buffer, shape=_buffer_shape, summary="a realized buffer on a device")
RESHAPE = def_op("tensor.reshape", 1, (Attr("shape", SHAPE),), Trait.PURE, _verify_like_src0, _reshape_shape,
                 summary="same elements, new shape (row-major)")
declare_folds(_movement(RESHAPE, _reshape_fold, "reshape-fold"))
PERMUTE = def_op("tensor.permute", 1, (Attr("perm", INTS),), Trait.PURE, _verify_like_src0, _permute_shape,
                 summary="reorder the axes: result axis i is operand axis perm[i]")
declare_folds(_movement(PERMUTE, _permute_fold, "permute-fold"))
EXPAND = def_op("tensor.expand", 1, (Attr("shape", SHAPE),), Trait.PURE, _verify_like_src0, _expand_shape,
                summary="broadcast size-1 axes to a larger size")
declare_folds(_movement(EXPAND, _expand_fold, "expand-fold"))
PAD = def_op("tensor.pad", 1, (Attr("pads", _PAIRS),), Trait.PURE, _verify_like_src0, _pad_shape,
             summary="add [before, after] zeros on each axis")
declare_folds(_movement(PAD, _pad_fold, "pad-fold"))
SHRINK = def_op("tensor.shrink", 1, (Attr("bounds", _PAIRS),), Trait.PURE, _verify_like_src0, _shrink_shape,
                summary="keep [start, end) on each axis")
declare_folds(_movement(SHRINK, _shrink_fold, "shrink-fold"))
FLIP = def_op("tensor.flip", 1, (Attr("axes", INTS),), Trait.PURE, _verify_like_src0, _flip_shape,
              summary="reverse the order along the given axes")
declare_folds(_movement(FLIP, _flip_fold, "flip-fold"))
MOVEMENT_OPS: tuple[OpDef, ...] = (RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP)
declare_folds((UPat(MOVEMENT_OPS, src=(UPat.cvar("c"),), name="m"), _const_movement, "const-movement"), constant=True)
REDUCE = def_op("tensor.reduce", 1, (Attr("op", EnumAttr(*REDUCE_OPS)), Attr("axes", INTS)), Trait.PURE,
                _verify_like_src0, _reduce_shape, summary="reduce along axes, keeping them as size 1")
declare_folds((UPat(REDUCE, src=(UPat.cvar("c"),), name="r"), _const_reduce, "const-reduce"), constant=True)
COPY = def_op("tensor.copy", 1, (Attr("device", STR),), verify=_verify_like_src0, shape=_same_shape,
              summary="the operand's value on another device")
ASSIGN = def_op("tensor.assign", 2, traits=Trait.SIDE_EFFECT, verify=_verify_assign, shape=_assign_shape,
                summary="write value into the target buffer; the result is the updated target")
# the views a tensor.assign may write through (no expand/pad: those alias or invent elements)
ASSIGNABLE_VIEWS: tuple[OpDef, ...] = (RESHAPE, PERMUTE, SHRINK, FLIP, ASSIGN)
CONTIGUOUS = def_op("tensor.contiguous", 1, verify=_verify_like_src0, shape=_same_shape,
                    summary="materialize the operand into its own buffer")
declare_folds((UPat(CONTIGUOUS, src=(UPat(CONTIGUOUS, name="x"),), name="m"), _twice, "contiguous-twice"))
DETACH = def_op("tensor.detach", 1, traits=Trait.PURE, verify=_verify_like_src0, shape=_same_shape,
                summary="the same value, cut from the gradient graph")
declare_folds((UPat(DETACH, src=(UPat(DETACH, name="x"),), name="m"), _twice, "detach-twice"))
VAR = def_op("tensor.var", 0, (Attr("name", STR), Attr("min", INT), Attr("max", INT)), Trait.PURE, symbolic_variable,
             summary="a symbolic integer in [min, max]")
BIND = def_op("tensor.bind", 2, traits=Trait.PURE, verify=_verify_bind,
              summary="a symbolic variable bound to a concrete value")
CALL = def_op("tensor.call", (0, None), (Attr("kernel", REGION), Attr("name", STR)), Trait.SIDE_EFFECT, _verify_call,
              summary="run a kernel (the region) on buffers; void, ordered by its operands")
AFTER = def_op("tensor.after", (2, None), traits=Trait.PURE, verify=_verify_after, shape=_same_shape,
               summary="the buffer's contents once the given effects (calls) have run")
