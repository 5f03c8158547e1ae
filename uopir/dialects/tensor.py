"""The tensor dialect: what the frontend builds (buffers, movement, reductions, effects) and, after scheduling,
calls of kernels on buffers.

Every tensor value has a shape derived by the op's shape rule; a rule that cannot hold raises ShapeError naming
both shapes, which the verifier turns into a located diagnostic.

Symbolic dimensions: a dimension may be an `index` expression over variables (`tensor.var`, or a `tensor.bind` of
one to a value; see uopir.ir.symbolic). reshape, expand, pad and shrink take them: their attribute holds `?` where a
dimension (or pad / shrink amount) is symbolic, and the op takes one extra operand per `?`, in the attribute's
order: `tensor.shrink %x, %n {bounds = [[0, ?], [0, 4]]} : tensor<?x4xf32>`. Shapes hold the canonical form of
those expressions (`sym_arg`), and the printed type shows a symbolic dimension as `?`. `movement(op, x, arg)` builds
such an op from an arg holding ints and symbolic dims alike. Rules on symbolic amounts reject what no value of the
variables could satisfy (tinygrad's lenient `resolve`); a bound value is checked where it is known (the frontend).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from uopir.dialects.core import CONST, REDUCE_OPS, const, const_value, fmt_shape, keep, lanes_are
from uopir.ir.diagnostics import ShapeError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.folds import declare_folds
from uopir.ir.ops import (
    DYN,
    INT,
    INTS,
    REGION,
    SHAPE,
    STR,
    SYM_PAIRS,
    SYM_SHAPE,
    Attr,
    EnumAttr,
    IntAttr,
    OpDef,
    Trait,
    def_op,
)
from uopir.ir.printer import fmt_type
from uopir.ir.roles import register_roles
from uopir.ir.rules import index_result, symbolic_variable
from uopir.ir.symbolic import canon, sadd, seq, smax, smin, sprod, ssub, sym_infer
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat
from uopir.ir.valuerange import register_range


# ---- helpers ---------------------------------------------------------------------------------------------------------
def tensor_type(shape: tuple[int, ...], dtype: DType) -> str:
    """`tensor<4x4xf32>` / `tensor<f32>`: the printed type of a tensor value, for messages."""
    return fmt_type(dtype, shape)


def prod(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _dim(d: int | UOp) -> str:
    return fmt_shape((d,))[1:-1]


def _static(shape: tuple) -> bool:
    for d in shape:
        if type(d) is not int:
            return False
    return True




def sym_arg(u: UOp) -> Any:
    """u's shape/pads/bounds attribute with every `?` replaced by the (canonical) dimension its extra operand
    gives: ints and index UOps. ShapeError when the `?`s and the extra operands do not pair up."""
    arg = u.arg
    if len(u.src) == 1:  # the common, static case: no `?` may be left
        if DYN in arg or (arg and type(arg[0]) is tuple and any(DYN in x for x in arg)):
            raise ShapeError(f"{_count_dyn(arg)} '?' in the attribute but no symbolic operand")
        return arg
    extra = u.operands.dims
    it = iter(enumerate(extra, 1))

    def dim(v: Any) -> Any:
        if v is not DYN:
            return v
        i, d = next(it, (None, None))
        if d is None:
            raise ShapeError(f"{_count_dyn(arg)} '?' in the attribute but {len(extra)} symbolic operand"
                             f"{'' if len(extra) == 1 else 's'}")
        if d.dtype is not dtypes.index or d.shape is not None:
            raise ShapeError(f"operand {i} (a symbolic dimension) must be an index value, got {d.op.name} of type "
                             f"{fmt_type(d.dtype, d.shape)}")
        return canon(d)

    out = tuple(tuple(dim(v) for v in x) if type(x) is tuple else dim(x) for x in arg)
    if next(it, None) is not None:
        raise ShapeError(f"{len(extra)} symbolic operands for {_count_dyn(arg)} '?' in the attribute")
    return out


def _count_dyn(arg: tuple) -> int:
    return sum(_count_dyn(x) if type(x) is tuple else x is DYN for x in arg)


def call_var_vals(call: UOp, var_vals: Mapping[str, int] | None = None) -> dict[str, int]:
    """The values a tensor.call gives its kernel's kernel.vars, by name: a tensor.bind operand its own value, a
    tensor.var operand the one `var_vals` has for it (ValueError naming it when there is none)."""
    out: dict[str, int] = {}
    for x in call.src:
        if x.op is VAR or (x.op is BIND and x.operands.var.op is VAR):
            out[(x if x.op is VAR else x.operands.var).attrs.name] = sym_infer(x, var_vals)
    return out


def movement(op: OpDef, x: UOp, arg: Any) -> UOp:
    """The movement op `op` of x with `arg` (a shape, or [before, after] / [start, end] pairs) whose entries are
    ints or symbolic dims (index UOps): each symbolic one becomes `?` and an extra operand (canonical, so equal
    dims are one UOp)."""
    extra: list[UOp] = []

    def dim(v: Any) -> Any:
        if isinstance(v, UOp):
            v = canon(v)
            if isinstance(v, UOp):
                extra.append(v)
                return DYN
        return int(v)

    a = tuple(tuple(dim(v) for v in e) if isinstance(e, tuple | list) else dim(e) for e in arg)
    return UOp(op, x.dtype, (x, *extra), a)


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
    return u.attrs.shape


def _same_shape(u: UOp) -> tuple[int, ...]:
    return _operand_shape(u)


def _reshape_shape(u: UOp) -> tuple[int, ...]:
    s, new = _operand_shape(u), u.attrs.shape
    if len(u.src) == 1 and DYN not in new and _static(s):  # static (inline: shapes are inferred on every build)
        if prod(s) != prod(new):
            raise ShapeError(f"cannot reshape {tensor_type(s, u.operands.x.dtype)} ({prod(s)} elements) to "
                             f"{fmt_shape(new)} ({prod(new)} elements)")
        return new
    new = sym_arg(u)
    if not seq(sprod(s), sprod(new)):
        raise ShapeError(f"cannot reshape {fmt_shape(s)} ({_dim(sprod(s))} elements) to {fmt_shape(new)} "
                         f"({_dim(sprod(new))} elements)")
    return new


def _permute_shape(u: UOp) -> tuple[int, ...]:
    s, perm = _operand_shape(u), u.attrs.perm
    if sorted(perm) != list(range(len(s))):
        raise ShapeError(f"{fmt_shape(perm)} is not a permutation of the {len(s)} axes of "
                         f"{tensor_type(s, u.operands.x.dtype)}")
    return tuple(s[p] for p in perm)


def _expand_shape(u: UOp) -> tuple[int, ...]:
    s, new = _operand_shape(u), u.attrs.shape
    if len(u.src) > 1 or DYN in new:
        new = sym_arg(u)
    if len(s) != len(new):
        raise ShapeError(f"cannot expand {tensor_type(s, u.operands.x.dtype)} to {fmt_shape(new)}: "
                         f"rank {len(s)} vs {len(new)}")
    for i, (a, b) in enumerate(zip(s, new, strict=True)):
        if a != b and a != 1:
            raise ShapeError(f"cannot expand {tensor_type(s, u.operands.x.dtype)} to {fmt_shape(new)}: "
                             f"axis {i} has size {_dim(a)}, not 1")
    return new


def _pad_shape(u: UOp) -> tuple[int, ...]:
    s, pads = _operand_shape(u), u.attrs.pads
    if len(pads) != len(s):
        raise ShapeError(f"pad of {tensor_type(s, u.operands.x.dtype)} needs {len(s)} [before, after] pairs, "
                         f"got {len(pads)}")
    if len(u.src) == 1 and _static(s):
        try:
            return tuple(b + d + a for d, (b, a) in zip(s, pads, strict=True))
        except TypeError:  # a `?` without its operand: sym_arg says so
            pass
    pads = sym_arg(u)
    for i, (b, a) in enumerate(pads):
        for what, amount in (("before", b), ("after", a)):
            if smax(amount) < 0:
                raise ShapeError(f"pad amount {_dim(amount)} ({what}, axis {i}) is negative for "
                                 f"every value of its variables")
    return tuple(sadd(b, d, a) for d, (b, a) in zip(s, pads, strict=True))


def _shrink_shape(u: UOp) -> tuple[int, ...]:
    s, bounds = _operand_shape(u), u.attrs.bounds
    if len(bounds) != len(s):
        raise ShapeError(f"shrink of {tensor_type(s, u.operands.x.dtype)} needs {len(s)} [start, end] pairs, "
                         f"got {len(bounds)}")
    if len(u.src) == 1 and _static(s):
        try:
            for i, (d, (b, e)) in enumerate(zip(s, bounds, strict=True)):
                if not 0 <= b <= e <= d:
                    raise ShapeError(f"cannot shrink {tensor_type(s, u.operands.x.dtype)} to bounds "
                                     f"{[list(x) for x in bounds]}: axis {i} needs 0 <= {b} <= {e} <= {d}")
            return tuple(e - b for b, e in bounds)
        except TypeError:  # a `?` without its operand: sym_arg says so
            pass
    bounds = sym_arg(u)
    for i, (d, (b, e)) in enumerate(zip(s, bounds, strict=True)):
        # symbolic: reject what fails for every value of the variables (a bound value is checked where it is known)
        if smax(b) < 0 or smin(ssub(b, e)) > 0 or smin(ssub(e, d)) > 0:
            raise ShapeError(f"cannot shrink {fmt_shape(s)} to bounds "
                             f"[{', '.join(fmt_shape(x) for x in bounds)}]: axis {i} needs 0 <= "
                             f"{_dim(b)} <= {_dim(e)} <= {_dim(d)}")
    return tuple(ssub(e, b) for b, e in bounds)


def _flip_shape(u: UOp) -> tuple[int, ...]:
    s = _operand_shape(u)
    _check_axes(u.attrs.axes, s, u.operands.x.dtype)
    return s


def _reduce_shape(u: UOp) -> tuple[int, ...]:
    s = _operand_shape(u)
    axes = u.attrs.axes
    _check_axes(axes, s, u.operands.x.dtype)
    return tuple(1 if i in axes else d for i, d in enumerate(s))


def _assign_shape(u: UOp) -> tuple[int, ...]:
    target = u.operands.target
    t, v = target.shape, u.operands.value.shape
    if t is None:
        raise ShapeError(f"assign target must be a tensor, got a value of type {target.dtype} without a shape")
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


def _verify_arange(u: UOp) -> Iterator[str]:
    d, shape = u.dtype, u.attrs.shape
    if d.count != 1 or d.kind not in ("int", "uint"):
        yield f"arange dtype must be a scalar integer, got {d}"
    elif len(shape) != 1:
        yield f"arange shape must have one dim, got {fmt_shape(shape)}"
    elif shape[0] - 1 > d.max:
        yield f"arange of {shape[0]} elements does not fit {d} (largest value {shape[0] - 1})"


def _verify_assign(u: UOp) -> Iterator[str]:
    t, v = u.operands.target, u.operands.value
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
    var, val = u.operands.var, u.operands.value
    if var.op is not VAR:
        yield f"first operand must be a tensor.var, got {var.op.name}"
        return
    if val.op is not CONST or val.dtype is not dtypes.index or type(val.arg) is not int:
        yield f"second operand must be an index core.const, got {val.op.name} of type {val.dtype}"
        return
    name, lo, hi = var.attrs.name, var.attrs.min, var.attrs.max
    if not lo <= val.attrs.value <= hi:
        yield f"value {val.attrs.value} of variable {name!r} is outside [{lo}, {hi}]"


def _verify_after(u: UOp) -> Iterator[str]:
    yield from _verify_like_src0(u)
    buf = u.operands.buffer
    if buf.op.name != "tensor.buffer":
        yield f"first operand must be a tensor.buffer, got {buf.op.name}"
    for i, s in enumerate(u.operands.effects, 1):
        if s.dtype is not dtypes.void:
            yield f"operand {i} must be an effect (void), got {s.dtype} from {s.op.name}"
            return


def _verify_call(u: UOp) -> Iterator[str]:
    if u.dtype is not dtypes.void:
        yield f"result must be void, got {u.dtype}"
    kernel = u.attrs.kernel
    root = getattr(kernel.op, "name", "an unregistered op")
    if root not in ("kernel.def", "device.program"):
        yield f"the kernel region's root must be a kernel.def or a device.program, got {root}"
        return
    # a kernel.var of the kernel gets its value from the operand that is that variable (or a binding of it)
    given = {(s if s.op is VAR else s.operands.var).attrs.name for s in u.src
             if s.op is VAR or (s.op is BIND and s.operands.var.op is VAR)}
    for x in kernel.toposort():
        if x.op.name == "kernel.var" and type(x.arg) is tuple and x.attrs.name not in given:
            yield f"the kernel uses variable {x.attrs.name!r}, but no operand gives it (pass its tensor.var or " \
                  "tensor.bind)"
            return


# ---- folds (declared beside each row below; exact against uopir.dialects.semantics) -----------------------------
def _reshape_fold(x: UOp, m: UOp) -> UOp | None:
    """A reshape to the operand's shape is the operand; a reshape of a reshape is one reshape."""
    if m.attrs.shape == x.shape:
        return x
    if x.op is RESHAPE:
        inner = x.operands.x
        return m.replace(src=(inner,)) if inner.shape != m.attrs.shape else inner
    return None


def _permute_fold(x: UOp, m: UOp) -> UOp | None:
    """The identity permutation is the operand; permutes compose (result axis i is source axis p1[p2[i]])."""
    perm = m.attrs.perm
    if perm == tuple(range(len(perm))):
        return x
    if x.op is PERMUTE:
        return m.replace(src=x.src, arg=tuple(x.attrs.perm[i] for i in perm))
    return None


def _expand_fold(x: UOp, m: UOp) -> UOp | None:
    if m.attrs.shape == x.shape:
        return x
    return m.replace(src=(x.operands.x,)) if x.op is EXPAND else None


def _pad_fold(x: UOp, m: UOp) -> UOp | None:
    """Zero pads are the operand; pads of pads add up."""
    pads = m.attrs.pads
    if all(b == 0 and a == 0 for b, a in pads):
        return x
    if x.op is PAD and len(x.src) == 1:
        return m.replace(src=x.src, arg=tuple((b0 + b1, a0 + a1) for (b0, a0), (b1, a1) in zip(x.attrs.pads, pads,
                                                                                              strict=True)))
    return None


def _shrink_fold(x: UOp, m: UOp) -> UOp | None:
    """A full shrink is the operand; shrinks of shrinks add their offsets."""
    xs = x.shape
    bounds = m.attrs.bounds
    if xs is not None and all(b == 0 and e == d for (b, e), d in zip(bounds, xs, strict=True)):
        return x
    if x.op is SHRINK and len(x.src) == 1:
        return m.replace(src=x.src, arg=tuple((b0 + b1, b0 + e1) for (b0, _), (b1, e1) in zip(x.attrs.bounds, bounds,
                                                                                             strict=True)))
    return None


def _flip_fold(x: UOp, m: UOp) -> UOp | None:
    """Flipping size-1 axes does nothing; flips of flips keep the axes flipped an odd number of times."""
    xs = x.shape
    axes = tuple(a for a in m.attrs.axes if xs is None or xs[a] != 1)
    if x.op is FLIP:
        inner = x.operands.x.shape
        both = sorted(set(axes) ^ {a for a in x.attrs.axes if inner is None or inner[a] != 1})
        return x.operands.x if not both else m.replace(src=x.src, arg=tuple(both))
    if not axes:
        return x
    return m.replace(arg=axes) if axes != m.attrs.axes else None


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
    op, axes = r.attrs.op, r.attrs.axes
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

BUFFER = def_op("tensor.buffer", 0,
                (Attr("id", IntAttr(lo=0)), Attr("device", STR), Attr("shape", SHAPE, in_type=True)),
                verify=_verify_buffer, shape=_buffer_shape, summary="a realized buffer on a device")
# element i is i: the index along the one dim, lowered to the kernel's own loop index (no buffer), so a one-hot pick
# `idx == arange(n)` reads as a compare with the range that kernel-simplify folds into a load at idx
ARANGE = def_op("tensor.arange", 0, (Attr("shape", SHAPE, in_type=True),), Trait.PURE, _verify_arange, _buffer_shape,
                summary="0, 1, ..., n-1 along one dim (the element's own index)")
RESHAPE = def_op("tensor.reshape", (1, None), (Attr("shape", SYM_SHAPE),), Trait.PURE, _verify_like_src0,
                 _reshape_shape, summary="same elements, new shape (row-major)", operands=("x", "*dims"))
declare_folds(_movement(RESHAPE, _reshape_fold, "reshape-fold"))
PERMUTE = def_op("tensor.permute", 1, (Attr("perm", INTS),), Trait.PURE, _verify_like_src0, _permute_shape,
                 summary="reorder the axes: result axis i is operand axis perm[i]", operands=("x",))
declare_folds(_movement(PERMUTE, _permute_fold, "permute-fold"))
EXPAND = def_op("tensor.expand", (1, None), (Attr("shape", SYM_SHAPE),), Trait.PURE, _verify_like_src0, _expand_shape,
                summary="broadcast size-1 axes to a larger size", operands=("x", "*dims"))
declare_folds(_movement(EXPAND, _expand_fold, "expand-fold"))
PAD = def_op("tensor.pad", (1, None), (Attr("pads", SYM_PAIRS),), Trait.PURE, _verify_like_src0, _pad_shape,
             summary="add [before, after] zeros on each axis", operands=("x", "*dims"))
declare_folds(_movement(PAD, _pad_fold, "pad-fold"))
SHRINK = def_op("tensor.shrink", (1, None), (Attr("bounds", SYM_PAIRS),), Trait.PURE, _verify_like_src0,
                _shrink_shape,
                summary="keep [start, end) on each axis", operands=("x", "*dims"))
declare_folds(_movement(SHRINK, _shrink_fold, "shrink-fold"))
FLIP = def_op("tensor.flip", 1, (Attr("axes", INTS),), Trait.PURE, _verify_like_src0, _flip_shape,
              summary="reverse the order along the given axes", operands=("x",))
declare_folds(_movement(FLIP, _flip_fold, "flip-fold"))
MOVEMENT_OPS: tuple[OpDef, ...] = (RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP)
declare_folds((UPat(MOVEMENT_OPS, src=(UPat.cvar("c"),), name="m"), _const_movement, "const-movement"), constant=True)
REDUCE = def_op("tensor.reduce", 1, (Attr("op", EnumAttr(*REDUCE_OPS)), Attr("axes", INTS)), Trait.PURE,
                _verify_like_src0, _reduce_shape, summary="reduce along axes, keeping them as size 1",
                operands=("x",))
declare_folds((UPat(REDUCE, src=(UPat.cvar("c"),), name="r"), _const_reduce, "const-reduce"), constant=True)
COPY = def_op("tensor.copy", 1, (Attr("device", STR),), verify=_verify_like_src0, shape=_same_shape,
              summary="the operand's value on another device", operands=("x",))
ASSIGN = def_op("tensor.assign", 2, traits=Trait.SIDE_EFFECT, verify=_verify_assign, shape=_assign_shape,
                summary="write value into the target buffer; the result is the updated target",
                operands=("target", "value"))
# the views a tensor.assign may write through (no expand/pad: those alias or invent elements)
ASSIGNABLE_VIEWS: tuple[OpDef, ...] = (RESHAPE, PERMUTE, SHRINK, FLIP, ASSIGN)
CONTIGUOUS = def_op("tensor.contiguous", 1, verify=_verify_like_src0, shape=_same_shape,
                    summary="materialize the operand into its own buffer", operands=("x",))
declare_folds((UPat(CONTIGUOUS, src=(UPat(CONTIGUOUS, name="x"),), name="m"), _twice, "contiguous-twice"))
DETACH = def_op("tensor.detach", 1, traits=Trait.PURE, verify=_verify_like_src0, shape=_same_shape,
                summary="the same value, cut from the gradient graph", operands=("x",))
declare_folds((UPat(DETACH, src=(UPat(DETACH, name="x"),), name="m"), _twice, "detach-twice"))
VAR = def_op("tensor.var", 0, (Attr("name", STR), Attr("min", INT), Attr("max", INT)), Trait.PURE, symbolic_variable,
             summary="a symbolic integer in [min, max]")
BIND = def_op("tensor.bind", 2, traits=Trait.PURE, verify=_verify_bind,
              summary="a symbolic variable bound to a concrete value", operands=("var", "value"))
register_roles({"var": VAR, "bind": BIND})  # the symbolic dimensions of uopir.ir.symbolic (found by role)
CALL = def_op("tensor.call", (0, None), (Attr("kernel", REGION), Attr("name", STR)), Trait.SIDE_EFFECT, _verify_call,
              summary="run a kernel (the region) on buffers; void, ordered by its operands")
AFTER = def_op("tensor.after", (2, None), traits=Trait.PURE, verify=_verify_after, shape=_same_shape,
               summary="the buffer's contents once the given effects (calls) have run",
               operands=("buffer", "*effects"))

# A variable spans its declared range; so does a binding (its value is not part of the shapes built from it).
register_range(VAR, lambda u, _: (u.attrs.min, u.attrs.max))
register_range(BIND, lambda _, s: s[0])
