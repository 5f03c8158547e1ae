"""The tensor dialect: what the frontend builds (buffers, movement, reductions, effects) and, after scheduling,
calls of kernels on buffers.

Every tensor value has a shape derived by the op's shape rule; a rule that cannot hold raises ShapeError naming
both shapes, which the verifier turns into a located diagnostic.
"""
from __future__ import annotations

from collections.abc import Iterator

from uopir.ir.diagnostics import ShapeError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import INT, INTS, REGION, SHAPE, STR, Attr, EnumAttr, IntAttr, Trait, TupleAttr, def_op
from uopir.ir.rules import index_result, symbolic_variable
from uopir.ir.uop import UOp

REDUCE_OPS = ("add", "mul", "max", "min")
MOVEMENT_NAMES = frozenset(("tensor.reshape", "tensor.permute", "tensor.expand", "tensor.pad", "tensor.shrink",
                            "tensor.flip"))
# views a tensor.assign may write through (no expand/pad: those alias or invent elements)
_ASSIGNABLE_VIEWS = frozenset(("tensor.reshape", "tensor.permute", "tensor.shrink", "tensor.flip", "tensor.assign"))


# ---- helpers ---------------------------------------------------------------------------------------------------------
def fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def tensor_type(shape: tuple[int, ...], dtype: DType) -> str:
    """`tensor<4x4xf32>` / `tensor<f32>`: the printed type of a tensor value, for messages."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + f"{dtype}>"


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
    while base.op.name in _ASSIGNABLE_VIEWS and base.src:
        base = base.src[0]
    if base.op.name != "tensor.buffer":
        via = f" (through {t.op.name})" if base is not t else ""
        yield f"assign target must be a tensor.buffer or a reshape/permute/shrink/flip view of one, got " \
              f"{base.op.name}{via}"


def _verify_bind(u: UOp) -> Iterator[str]:
    yield from index_result(u)
    var, val = u.src
    if var.op.name != "tensor.var":
        yield f"first operand must be a tensor.var, got {var.op.name}"
        return
    if val.op.name != "core.const" or val.dtype is not dtypes.index or type(val.arg) is not int:
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
    if root != "kernel.def":
        yield f"the kernel region's root must be a kernel.def, got {root}"


# ---- the ops ---------------------------------------------------------------------------------------------------------
_PAIRS = TupleAttr(TupleAttr(IntAttr(lo=0), 2))

BUFFER = def_op("tensor.buffer", 0,
                (Attr("id", IntAttr(lo=0)), Attr("device", STR), Attr("shape", SHAPE, in_type=True)),
                verify=_verify_buffer, shape=_buffer_shape, summary="a realized buffer on a device")
RESHAPE = def_op("tensor.reshape", 1, (Attr("shape", SHAPE),), Trait.PURE, _verify_like_src0, _reshape_shape,
                 summary="same elements, new shape (row-major)")
PERMUTE = def_op("tensor.permute", 1, (Attr("perm", INTS),), Trait.PURE, _verify_like_src0, _permute_shape,
                 summary="reorder the axes: result axis i is operand axis perm[i]")
EXPAND = def_op("tensor.expand", 1, (Attr("shape", SHAPE),), Trait.PURE, _verify_like_src0, _expand_shape,
                summary="broadcast size-1 axes to a larger size")
PAD = def_op("tensor.pad", 1, (Attr("pads", _PAIRS),), Trait.PURE, _verify_like_src0, _pad_shape,
             summary="add [before, after] zeros on each axis")
SHRINK = def_op("tensor.shrink", 1, (Attr("bounds", _PAIRS),), Trait.PURE, _verify_like_src0, _shrink_shape,
                summary="keep [start, end) on each axis")
FLIP = def_op("tensor.flip", 1, (Attr("axes", INTS),), Trait.PURE, _verify_like_src0, _flip_shape,
              summary="reverse the order along the given axes")
REDUCE = def_op("tensor.reduce", 1, (Attr("op", EnumAttr(*REDUCE_OPS)), Attr("axes", INTS)), Trait.PURE,
                _verify_like_src0, _reduce_shape, summary="reduce along axes, keeping them as size 1")
COPY = def_op("tensor.copy", 1, (Attr("device", STR),), verify=_verify_like_src0, shape=_same_shape,
              summary="the operand's value on another device")
ASSIGN = def_op("tensor.assign", 2, traits=Trait.SIDE_EFFECT, verify=_verify_assign, shape=_assign_shape,
                summary="write value into the target buffer; the result is the updated target")
CONTIGUOUS = def_op("tensor.contiguous", 1, verify=_verify_like_src0, shape=_same_shape,
                    summary="materialize the operand into its own buffer")
DETACH = def_op("tensor.detach", 1, traits=Trait.PURE, verify=_verify_like_src0, shape=_same_shape,
                summary="the same value, cut from the gradient graph")
VAR = def_op("tensor.var", 0, (Attr("name", STR), Attr("min", INT), Attr("max", INT)), Trait.PURE, symbolic_variable,
             summary="a symbolic integer in [min, max]")
BIND = def_op("tensor.bind", 2, traits=Trait.PURE, verify=_verify_bind,
              summary="a symbolic variable bound to a concrete value")
CALL = def_op("tensor.call", (0, None), (Attr("kernel", REGION), Attr("name", STR)), Trait.SIDE_EFFECT, _verify_call,
              summary="run a kernel (the region) on buffers; void, ordered by its operands")
AFTER = def_op("tensor.after", (2, None), traits=Trait.PURE, verify=_verify_after, shape=_same_shape,
               summary="the buffer's contents once the given effects (calls) have run")
