"""The core dialect: constants, casts, the ALU, vector build/extract and graph roots; shared by every level.

Dtype rules live in each op's `verify`, the elementwise shape rule in `elementwise_shape`; the hash-consed UOp
constructor checks nothing (hot path), the verifier (uopir.ir.verify) runs these. Each op's folds are declared right
after its row (uopir.ir.folds); the `canonicalize` pass gathers them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from uopir.dialects.semantics import alu, bitcast_array, cast_array, const_array, to_python
from uopir.ir.diagnostics import IRError, ShapeError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.folds import declare_folds, has_effect
from uopir.ir.ops import INTS, SCALAR, SHAPE, Attr, AttrError, OpDef, OptionalAttr, Trait, def_op, fmt_literal, register
from uopir.ir.roles import register_roles
from uopir.ir.rules import void_result
from uopir.ir.symbolic import render
from uopir.ir.uop import UOp, normalize_const
from uopir.ir.upat import UPat
from uopir.ir.valuerange import Range, register_range

_PE = Trait.PURE | Trait.ELEMENTWISE
_PEC = _PE | Trait.COMMUTATIVE
REDUCE_OPS = ("add", "mul", "max", "min")  # the kinds of tensor.reduce and kernel.reduce


# ---- shared helpers (module level so the shape/verify closures stay cheap) -------------------------------------------
def fmt_shape(shape: tuple[int | UOp, ...]) -> str:
    """`[4, 4]`: how a shape is spelled in messages and attributes (a symbolic dim as its expression, `n*4`)."""
    return "[" + ", ".join(str(d) if type(d) is int else render(d) for d in shape) + "]"


def static_shape(shape: tuple | None) -> bool:
    """Does the shape hold only ints (no symbolic dim)?"""
    return shape is None or all(type(d) is int for d in shape)


def elementwise_shape(u: UOp) -> tuple[int, ...] | None:
    """Operands with a shape must agree; shapeless ones (scalar consts, indices) broadcast."""
    out = None
    for s in u.src:
        sh = s.shape
        if sh is not None:
            if out is None:
                out = sh
            elif sh != out:
                raise ShapeError(f"elementwise operands have different shapes: {fmt_shape(out)} vs {fmt_shape(sh)}")
    return out


def _src0_shape(u: UOp) -> tuple[int, ...] | None:
    return u.src[0].shape


def _numeric(d: DType) -> bool:
    return d.kind not in ("void", "ptr")


def _check_value_dtype(d: DType, what: str) -> Iterator[str]:
    if not _numeric(d):
        yield f"{what} must be a number, bool or vector, got {d}"


def _all_equal(u: UOp) -> Iterator[str]:
    """Operands and result share one numeric dtype."""
    first = u.src[0].dtype
    for s in u.src[1:]:
        if s.dtype is not first:
            yield f"operand dtypes differ: {first} vs {s.dtype}"
            return
    if u.dtype is not first:
        yield f"result dtype {u.dtype} differs from operand dtype {first}"
        return
    yield from _check_value_dtype(first, "operand dtype")


def _verify_binary(u: UOp) -> Iterator[str]:
    yield from _all_equal(u)


def _verify_sub(u: UOp) -> Iterator[str]:
    yield from _all_equal(u)
    if u.dtype.scalar is dtypes.bool:
        yield "sub is not defined on bool"


def _verify_neg(u: UOp) -> Iterator[str]:
    yield from _all_equal(u)
    if u.dtype.scalar is dtypes.bool:
        yield "neg is not defined on bool"


def _verify_float(u: UOp) -> Iterator[str]:
    errs = list(_all_equal(u))
    yield from errs
    if not errs and not u.dtype.is_float:
        yield f"result dtype must be a float, got {u.dtype}"


def _verify_int(u: UOp) -> Iterator[str]:
    errs = list(_all_equal(u))
    yield from errs
    if not errs and not u.dtype.is_int:
        yield f"result dtype must be an integer, got {u.dtype}"


def _verify_int_or_float(u: UOp) -> Iterator[str]:
    errs = list(_all_equal(u))
    yield from errs
    if not errs and not (u.dtype.is_int or u.dtype.is_float):
        yield f"result dtype must be an integer or a float, got {u.dtype}"


def _verify_logic(u: UOp) -> Iterator[str]:
    errs = list(_all_equal(u))
    yield from errs
    if not errs and not (u.dtype.is_int or u.dtype.is_bool):
        yield f"result dtype must be an integer or bool, got {u.dtype}"


def _verify_cmp(u: UOp) -> Iterator[str]:
    a, b = u.src[0].dtype, u.src[1].dtype
    if a is not b:
        yield f"operand dtypes differ: {a} vs {b}"
        return
    yield from _check_value_dtype(a, "operand dtype")
    if _numeric(a) and u.dtype is not dtypes.bool.vec(a.count):
        yield f"result dtype must be {dtypes.bool.vec(a.count)}, got {u.dtype}"


def _verify_where(u: UOp) -> Iterator[str]:
    c, a, b = (s.dtype for s in u.src)
    if a is not b:
        yield f"operand dtypes differ: {a} vs {b}"
    elif u.dtype is not a:
        yield f"result dtype {u.dtype} differs from operand dtype {a}"
    elif not _numeric(a):
        yield f"operand dtype must be a number, bool or vector, got {a}"
    elif c is not dtypes.bool.vec(a.count) and c is not dtypes.bool:
        yield f"condition must be {dtypes.bool.vec(a.count)}, got {c}"


def _verify_mulacc(u: UOp) -> Iterator[str]:
    yield from _all_equal(u)
    if u.dtype.scalar is dtypes.bool:
        yield "mulacc is not defined on bool"


def _verify_cast(u: UOp) -> Iterator[str]:
    x = u.operands.x.dtype
    yield from _check_value_dtype(x, "operand dtype")
    yield from _check_value_dtype(u.dtype, "result dtype")
    if _numeric(x) and _numeric(u.dtype) and x.count != u.dtype.count:
        yield f"cast changes the lane count: {x} to {u.dtype}"


def _bitwidth(d: DType) -> int:
    return 64 if d.is_ptr else d.bits * d.count


def _verify_bitcast(u: UOp) -> Iterator[str]:
    x = u.operands.x.dtype
    if x is dtypes.void or u.dtype is dtypes.void:
        yield f"cannot bitcast {x} to {u.dtype}"
    elif _bitwidth(x) != _bitwidth(u.dtype):
        yield f"bitcast changes the bit width: {x} ({_bitwidth(x)} bits) to {u.dtype} ({_bitwidth(u.dtype)} bits)"


# ---- const ---------------------------------------------------------------------------------------------------------
def _shaped(arg: Any) -> bool:
    """A tensor-shaped const's arg is (value, shape); a vector const's arg is a tuple of lane values."""
    return type(arg) is tuple and len(arg) == 2 and type(arg[1]) is tuple


def const_value(u: UOp) -> Any:
    """The value of a core.const, shaped or not."""
    return u.arg[0] if _shaped(u.arg) else u.arg


def const(dtype: DType, value: Any, shape: tuple[int, ...] | None = None) -> UOp:
    """Build a const; with `shape` it is a tensor value (`core.const 0.0 : tensor<3x4xf32>`)."""
    v = normalize_const(dtype, value)
    if shape is not None and not static_shape(tuple(shape)):
        raise ValueError(f"a shaped core.const needs a static shape, got {fmt_shape(tuple(shape))} (expand a const "
                         f"to a symbolic shape instead)")
    return UOp(CONST, dtype, (), v if shape is None else (v, tuple(shape)))


def _check_literal(dtype: DType, v: Any) -> None:
    """Text input is exact: a literal that does not fit its type is an error, never silently wrapped/truncated."""
    if type(v) is tuple:
        for x in v:
            _check_literal(dtype.scalar, x)
        return
    if dtype.is_bool and type(v) is not bool:
        raise AttrError(f"expected true or false for {dtype}, got {fmt_literal(v)}")
    if dtype.is_int:
        if type(v) is not int:
            raise AttrError(f"expected an integer for {dtype}, got {fmt_literal(v)}")
        if not dtype.min <= v <= dtype.max:
            raise AttrError(f"integer {v} does not fit {dtype} (range [{dtype.min}, {dtype.max}])")


def _normalize_const_arg(dtype: DType, arg: Any) -> Any:
    try:
        _check_literal(dtype, arg[0] if _shaped(arg) else arg)
    except AttrError as e:
        raise AttrError(f"attribute 'value': {e}") from None
    try:
        if _shaped(arg):
            if dtype.count != 1:
                raise AttrError(f"a tensor-shaped const needs a scalar dtype, got {dtype}")
            return (normalize_const(dtype, arg[0]), arg[1])
        return normalize_const(dtype, arg)
    except (ValueError, TypeError) as e:
        raise AttrError(str(e)) from None


def _verify_const(u: UOp) -> Iterator[str]:
    d = u.dtype
    if not _numeric(d):
        yield f"const must have a number, bool or vector dtype, got {d}"


def _const_shape(u: UOp) -> tuple[int, ...] | None:
    return u.arg[1] if _shaped(u.arg) else None


class _ConstOp(OpDef):
    """core.const keeps the bare value as its arg (as UOp.const builds it); only a shaped const carries a tuple."""

    def attr_values(self, arg: Any) -> dict[str, Any]:
        if _shaped(arg):
            return {"value": arg[0], "shape": arg[1]}
        return {"value": arg, "shape": None}

    def make_arg(self, values: dict[str, Any]) -> Any:
        arg = super().make_arg(values)
        return arg[0] if arg[1] is None else arg

    def attr_reader(self, i: int) -> property:
        return property(_const_attr_value if i == 0 else _const_attr_shape)


def _const_attr_value(v: Any) -> Any:
    return const_value(v._u)


def _const_attr_shape(v: Any) -> tuple[int, ...] | None:
    return _const_shape(v._u)


CONST = register(_ConstOp("core.const", (0, 0), (Attr("value", SCALAR), Attr("shape", OptionalAttr(SHAPE), None, True)),
                          Trait.PURE, _verify_const, _const_shape, 1, _normalize_const_arg,
                          "a constant scalar, vector (one value per lane) or tensor (splat)"))
register_roles({"const": CONST})  # UPat.cvar and UOp.const (uopir.ir.roles), used by the folds below

# ---- what folds are built from: exact constant values, replacements that keep the type, constant evaluation -------
# Every fold is exact against uopir.dialects.semantics (the interpreter's own semantics), bit for bit: floats fold
# only where IEEE gives the same bits for every input (x * 1.0 folds, x + 0.0 does not: -0.0 + 0.0 is +0.0), and a
# fold that drops a subgraph fires only when that subgraph has no side effect (buffer writes are never lost).
MIXED: Any = object()  # splat() of a const whose lanes differ


def same_bits(a: Any, b: Any) -> bool:
    """Equal as stored values: floats by their bits (0.0 is not -0.0; any NaN equals any NaN)."""
    if type(a) is float and type(b) is float:
        return a.hex() == b.hex() if a == a and b == b else (a != a and b != b)
    return type(a) is type(b) and a == b


def splat(c: UOp) -> Any:
    """The single value of a const (every lane equal for a vector), or MIXED."""
    v = const_value(c)
    if type(v) is tuple:
        return v[0] if all(same_bits(v[0], x) for x in v) else MIXED
    return v


# A lane test is a value (compared exactly: bit for bit for floats) or a predicate `(value, scalar dtype) -> bool`.
LaneTest = Any


def lanes_are(c: UOp, test: LaneTest) -> bool:
    """Every lane of the const c passes `test`."""
    v = splat(c)
    if v is MIXED:
        return False
    if callable(test):
        return bool(test(v, c.dtype.scalar))
    if c.dtype.is_float:
        return type(v) is float and same_bits(v, float(test))
    if c.dtype.is_bool:
        return v is test
    return type(v) is int and type(test) is int and v == test


def _shape_of(u: UOp) -> Any:
    """u's shape, or MIXED when it has none that holds (an unverified graph: no fold, the verifier reports it)."""
    try:
        return u.shape
    except Exception:  # noqa: BLE001 - any broken shape rule means "do not fold"
        return MIXED


def keep(u: UOp, x: UOp) -> UOp | None:
    """x as u's replacement when it has u's type; a scalar const stands in re-shaped (`c : tensor<4xf32>`)."""
    if x.dtype is not u.dtype:
        return None
    xs, us = _shape_of(x), _shape_of(u)
    if xs is MIXED or us is MIXED:
        return None
    if xs == us:
        return x
    if x.op is CONST and us is not None and x.dtype.count == 1 and static_shape(us):
        return const(x.dtype, const_value(x), us)
    return None


_FOLD_ERRORS = (IRError, ShapeError, ValueError, TypeError, OverflowError, KeyError, IndexError)


def _evaluated(u: UOp, compute: Callable[[], np.ndarray]) -> UOp | None:
    """u replaced by the constant `compute()` gives (in u's shape), or None when it cannot be a constant."""
    shape = _shape_of(u)
    if shape is MIXED or (shape is not None and (u.dtype.count != 1 or not static_shape(shape))):
        return None
    if any(d.scalar.np_name is None for d in (u.dtype, *(s.dtype for s in u.src))):
        return None  # a pointer (a bitcast int -> ptr is valid IR): no value to fold to
    try:
        with np.errstate(all="ignore"):  # overflow, inf and NaN are defined results here, not accidents
            return const(u.dtype, to_python(compute(), u.dtype), shape)
    except _FOLD_ERRORS:
        return None


def fold_constant(u: UOp) -> UOp | None:
    """An ALU op whose operands are all constants is the constant it evaluates to."""
    d, src = u.dtype, u.src
    if u.op is WHERE:
        ok = src[1].dtype is d and src[2].dtype is d and src[0].dtype in (dtypes.bool, dtypes.bool.vec(d.count))
    elif u.op in (CMPLT, CMPNE, CMPEQ):
        ok = src[0].dtype is src[1].dtype and d is dtypes.bool.vec(src[0].dtype.count)
    else:
        ok = all(s.dtype is d for s in src)
    if not ok:
        return None  # malformed: leave it for the verifier
    return _evaluated(u, lambda: alu(u.op.name, d, [const_array(s.dtype, const_value(s)) for s in src],
                                     [s.dtype for s in src]))


def fold_cast(u: UOp, c: UOp) -> UOp | None:
    if c.dtype.count != u.dtype.count:
        return None
    return _evaluated(u, lambda: cast_array(const_array(c.dtype, const_value(c)), c.dtype, u.dtype))


def fold_bitcast(u: UOp, c: UOp) -> UOp | None:
    if _bitwidth(c.dtype) != _bitwidth(u.dtype):
        return None
    return _evaluated(u, lambda: bitcast_array(const_array(c.dtype, const_value(c)), c.dtype, u.dtype))


def _same_type(u: UOp, x: UOp) -> UOp | None:
    return keep(u, x)


def _family_test(d: DType, ints: LaneTest, bools: LaneTest, floats: LaneTest) -> LaneTest:
    return floats if d.is_float else bools if d.is_bool else ints if d.is_int else None


_X, _C = UPat.var("x"), UPat.cvar("c")


def identity(op: OpDef, name: str, ints: LaneTest = None, bools: LaneTest = None,
             floats: LaneTest = None) -> tuple[UPat, Callable[..., UOp | None], str]:
    """`x op c -> x` where c passes the test for u's dtype family (either order for a commutative op)."""
    def fold(u: UOp, x: UOp, c: UOp) -> UOp | None:
        test = _family_test(u.dtype, ints, bools, floats)
        return keep(u, x) if test is not None and c.dtype is u.dtype and lanes_are(c, test) else None
    fold.__name__ = fold.__qualname__ = name.replace("-", "_")
    return UPat(op, src=(_X, _C), name="u"), fold, name


def absorb(op: OpDef, name: str, ints: LaneTest = None, bools: LaneTest = None) -> tuple[UPat, Callable, str]:
    """`x op c -> c` where c absorbs every value (not on floats: NaN and inf), when x has no side effect."""
    def fold(ctx: Any, u: UOp, x: UOp, c: UOp) -> UOp | None:
        test = _family_test(u.dtype, ints, bools, None)
        if test is None or c.dtype is not u.dtype or not lanes_are(c, test) or has_effect(ctx, x):
            return None
        return keep(u, c)
    fold.__name__ = fold.__qualname__ = name.replace("-", "_")
    return UPat(op, src=(_X, _C), name="u"), fold, name


def idempotent(op: OpDef, name: str) -> tuple[UPat, Callable, str]:
    """`x op x -> x`."""
    return UPat(op, src=(_X, _X), name="u"), _same_type, name


def _all_ones(v: Any, d: DType) -> bool:
    return v == (d.max if d.is_unsigned else -1)


def _multiple_of_width(v: Any, d: DType) -> bool:
    return v % d.bits == 0  # the amount is taken modulo the width


def _is_min(v: Any, d: DType) -> bool:
    return v == d.min


def _where_const(ctx: Any, u: UOp, c: UOp, a: UOp, b: UOp) -> UOp | None:
    v = splat(c)
    if v is MIXED:
        return None
    kept, dropped = (a, b) if v else (b, a)
    return None if has_effect(ctx, dropped) else keep(u, kept)


def _where_same(ctx: Any, u: UOp, c: UOp, a: UOp) -> UOp | None:
    return None if has_effect(ctx, c) else keep(u, a)


def _where_bool(u: UOp, c: UOp, t: UOp, f: UOp) -> UOp | None:
    """where(c, true, false) is c for a bool result."""
    if u.dtype is not dtypes.bool or not (lanes_are(t, True) and lanes_are(f, False)):
        return None
    return keep(u, c)


def _group_dedup(g: UOp) -> UOp | None:
    uniq = tuple(dict.fromkeys(g.src))
    return g.replace(src=uniq) if len(uniq) != len(g.src) else None


# ---- casts and the ALU -----------------------------------------------------------------------------------------------
CAST = def_op("core.cast", 1, traits=_PE, verify=_verify_cast, shape=_src0_shape,
              summary="value conversion to the result dtype (same lane count)", operands=("x",))
declare_folds((UPat(CAST, src=(UPat.cvar("c"),), name="u"), fold_cast, "fold-cast"), constant=True)
declare_folds((UPat(CAST, src=(_X,), name="u"), _same_type, "cast-same-type"))
BITCAST = def_op("core.bitcast", 1, traits=_PE, verify=_verify_bitcast, shape=_src0_shape,
                 summary="reinterpret the bits as the result dtype (same total width)", operands=("x",))
declare_folds((UPat(BITCAST, src=(UPat.cvar("c"),), name="u"), fold_bitcast, "fold-bitcast"), constant=True)
declare_folds((UPat(BITCAST, src=(_X,), name="u"), _same_type, "bitcast-same-type"))

# Each row's identities, beside it (an `identity` test per dtype family: ints, bools, floats; floats only exact).
_ew = elementwise_shape
ADD = def_op("core.add", 2, traits=_PEC, verify=_verify_binary, shape=_ew, summary="a + b")
declare_folds(identity(ADD, "add-zero", ints=0, bools=False, floats=-0.0))
SUB = def_op("core.sub", 2, traits=_PE, verify=_verify_sub, shape=_ew, summary="a - b")
declare_folds(identity(SUB, "sub-zero", ints=0, floats=0.0))
MUL = def_op("core.mul", 2, traits=_PEC, verify=_verify_binary, shape=_ew, summary="a * b")
declare_folds(identity(MUL, "mul-one", ints=1, bools=True, floats=1.0), absorb(MUL, "mul-zero", ints=0, bools=False))
MAX = def_op("core.max", 2, traits=_PEC, verify=_verify_binary, shape=_ew, summary="the larger of a and b")
declare_folds(identity(MAX, "max-lowest", ints=_is_min, bools=False, floats=float("-inf")), idempotent(MAX, "max-self"))
FDIV = def_op("core.fdiv", 2, traits=_PE, verify=_verify_float, shape=_ew, summary="float division a / b")
declare_folds(identity(FDIV, "fdiv-one", floats=1.0))
IDIV = def_op("core.idiv", 2, traits=_PE, verify=_verify_int, shape=_ew,
              summary="integer division, truncating toward zero (C semantics)")
declare_folds(identity(IDIV, "idiv-one", ints=1))
MOD = def_op("core.mod", 2, traits=_PE, verify=_verify_int_or_float, shape=_ew,
             summary="remainder of truncating division, with the sign of a (C % on ints, fmod on floats: exact)")
NEG = def_op("core.neg", 1, traits=_PE, verify=_verify_neg, shape=_ew, summary="-x")
declare_folds((UPat(NEG, src=(UPat(NEG, src=(_X,)),), name="u"), _same_type, "double-neg"))
RECIP = def_op("core.recip", 1, traits=_PE, verify=_verify_float, shape=_ew, summary="1 / x")
EXP2 = def_op("core.exp2", 1, traits=_PE, verify=_verify_float, shape=_ew, summary="2 ** x")
LOG2 = def_op("core.log2", 1, traits=_PE, verify=_verify_float, shape=_ew, summary="log base 2 of x")
SIN = def_op("core.sin", 1, traits=_PE, verify=_verify_float, shape=_ew, summary="sine of x (radians)")
SQRT = def_op("core.sqrt", 1, traits=_PE, verify=_verify_float, shape=_ew, summary="square root of x")
TRUNC = def_op("core.trunc", 1, traits=_PE, verify=_verify_float, shape=_ew, summary="x rounded toward zero")
CMPLT = def_op("core.cmplt", 2, traits=_PE, verify=_verify_cmp, shape=_ew, summary="a < b, as bool")
CMPNE = def_op("core.cmpne", 2, traits=_PEC, verify=_verify_cmp, shape=_ew, summary="a != b, as bool")
CMPEQ = def_op("core.cmpeq", 2, traits=_PEC, verify=_verify_cmp, shape=_ew, summary="a == b, as bool")
AND = def_op("core.and", 2, traits=_PEC, verify=_verify_logic, shape=_ew, summary="bitwise/logical and")
declare_folds(identity(AND, "and-ones", ints=_all_ones, bools=True), absorb(AND, "and-zero", ints=0, bools=False),
              idempotent(AND, "and-self"))
OR = def_op("core.or", 2, traits=_PEC, verify=_verify_logic, shape=_ew, summary="bitwise/logical or")
declare_folds(identity(OR, "or-zero", ints=0, bools=False), idempotent(OR, "or-self"))
XOR = def_op("core.xor", 2, traits=_PEC, verify=_verify_logic, shape=_ew, summary="bitwise/logical xor")
declare_folds(identity(XOR, "xor-zero", ints=0, bools=False))
SHL = def_op("core.shl", 2, traits=_PE, verify=_verify_int, shape=_ew, summary="a << b")
declare_folds(identity(SHL, "shl-width", ints=_multiple_of_width))
SHR = def_op("core.shr", 2, traits=_PE, verify=_verify_int, shape=_ew,
             summary="a >> b (arithmetic for signed, logical for unsigned)")
declare_folds(identity(SHR, "shr-width", ints=_multiple_of_width))
WHERE = def_op("core.where", 3, traits=_PE, verify=_verify_where, shape=_ew, summary="cond ? a : b",
               operands=("cond", "a", "b"))
declare_folds((UPat(WHERE, src=(UPat.cvar("c"), UPat.var("a"), UPat.var("b")), name="u"), _where_const,
               "where-const-cond"),
              (UPat(WHERE, src=(UPat.var("c"), UPat.var("a"), UPat.var("a")), name="u"), _where_same, "where-same"),
              (UPat(WHERE, src=(UPat.var("c"), UPat.cvar("t"), UPat.cvar("f")), name="u"), _where_bool, "where-bool"))
MULACC = def_op("core.mulacc", 3, traits=_PE, verify=_verify_mulacc, shape=_ew, summary="a * b + c",
                operands=("a", "b", "c"))

ALU_OPS: tuple[OpDef, ...] = (ADD, SUB, MUL, MAX, FDIV, IDIV, MOD, NEG, RECIP, EXP2, LOG2, SIN, SQRT, TRUNC, CMPLT,
                              CMPNE, CMPEQ, AND, OR, XOR, SHL, SHR, WHERE, MULACC)
ELEMENTWISE_OPS: tuple[OpDef, ...] = (CAST, BITCAST, *ALU_OPS)
declare_folds((UPat(ALU_OPS, src=UPat.cvar(), name="u"), fold_constant, "fold-constant"), constant=True)


# ---- vectors -------------------------------------------------------------------------------------------------------
def _verify_vectorize(u: UOp) -> Iterator[str]:
    s = u.src[0].dtype
    for x in u.src[1:]:
        if x.dtype is not s:
            yield f"operand dtypes differ: {s} vs {x.dtype}"
            return
    if not _numeric(s) or s.count != 1:
        yield f"vectorize operands must be scalars, got {s}"
    elif u.dtype is not s.vec(len(u.src)):
        yield f"result dtype must be {s.vec(len(u.src))}, got {u.dtype}"


def _verify_gep(u: UOp) -> Iterator[str]:
    v = u.operands.x.dtype
    idx = u.attrs.idx
    if not _numeric(v):
        yield f"gep operand must be a vector, got {v}"
        return
    if not idx:
        yield "gep needs at least one index"
        return
    for i in idx:
        if not 0 <= i < v.count:
            yield f"gep index {i} out of range for {v} ({v.count} lanes)"
            return
    if u.dtype is not v.scalar.vec(len(idx)):
        yield f"result dtype must be {v.scalar.vec(len(idx))}, got {u.dtype}"


VECTORIZE = def_op("core.vectorize", (1, None), traits=Trait.PURE, verify=_verify_vectorize,
                   summary="build a vector from one scalar per lane")
GEP = def_op("core.gep", 1, (Attr("idx", INTS),), Trait.PURE, _verify_gep,
             summary="extract lanes of a vector (one index: a scalar)", operands=("x",))


# ---- roots -----------------------------------------------------------------------------------------------------------
SINK = def_op("core.sink", (0, None), traits=Trait.TERMINATOR | Trait.COLLECTS_EFFECTS, verify=void_result,
              summary="the void root of a graph: keeps its operands alive")
GROUP = def_op("core.group", (0, None), traits=Trait.COLLECTS_EFFECTS, verify=void_result,
               summary="groups effects into one void value without being a root")
# the ops of UOp's and UPat's operator sugar (`a + b`, `x < y`, `UOp.sink`), found by role by the core
register_roles({"cast": CAST, "bitcast": BITCAST, "add": ADD, "sub": SUB, "mul": MUL, "neg": NEG, "fdiv": FDIV,
                "idiv": IDIV, "mod": MOD, "max": MAX, "lt": CMPLT, "ne": CMPNE, "eq": CMPEQ, "and": AND, "or": OR,
                "xor": XOR, "shl": SHL, "shr": SHR, "where": WHERE, "mulacc": MULACC, "sink": SINK})
declare_folds((UPat(GROUP, name="g"), _group_dedup, "group-dedup"))


# ---- value ranges ----------------------------------------------------------------------------------------------------
# How each core op bounds its result (uopir.ir.valuerange): exact integer bounds; the dtype's wraparound is applied
# by the mechanism. Float results are bounded only by consts, where, gep and vectorize (NaN-free when not full).


def _range_const(u: UOp, _: tuple[Range, ...]) -> Range | None:
    v = const_value(u)
    lanes = v if type(v) is tuple else (v,)
    if not lanes or any(x != x for x in lanes):  # NaN: unbounded
        return None
    return (min(lanes), max(lanes))


def _corners(vals: list) -> Range:
    return (min(vals), max(vals))


def _range_mul(_: UOp, s: tuple[Range, ...]) -> Range:
    (a0, a1), (b0, b1) = s
    return _corners([a0 * b0, a0 * b1, a1 * b0, a1 * b1])


def _range_neg(u: UOp, s: tuple[Range, ...]) -> Range:
    lo, hi = s[0]
    return (1 - hi, 1 - lo) if u.dtype.scalar is dtypes.bool else (-hi, -lo)  # on bool, neg is logical not


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _range_idiv(_: UOp, s: tuple[Range, ...]) -> Range:
    """Truncating division is monotone in a and, on a divisor range of one sign, in b: the corners bound it; x/0
    is 0."""
    (a0, a1), (b0, b1) = s
    vals = [0] if b0 <= 0 <= b1 else []
    for lo, hi in ((b0, min(b1, -1)), (max(b0, 1), b1)):
        if lo <= hi:
            vals += [_tdiv(a, b) for a in (a0, a1) for b in (lo, hi)]
    return _corners(vals)


def _range_mod(_: UOp, s: tuple[Range, ...]) -> Range:
    """C remainder: the sign of a, |r| < |b| and |r| <= |a|; x % 0 is 0."""
    (a0, a1), (b0, b1) = s
    m = max(abs(b0), abs(b1)) - 1
    if m < 0:
        return (0, 0)
    return (0 if a0 >= 0 else max(a0, -m), 0 if a1 <= 0 else min(a1, m))


def _range_cmplt(_: UOp, s: tuple[Range, ...]) -> Range:
    (a0, a1), (b0, b1) = s
    if a1 < b0:
        return (True, True)
    if a0 >= b1:
        return (False, False)
    return (False, True)


def _range_cmpne(_: UOp, s: tuple[Range, ...]) -> Range:
    (a0, a1), (b0, b1) = s
    if a1 < b0 or b1 < a0:
        return (True, True)
    if a0 == a1 == b0 == b1:
        return (False, False)
    return (False, True)


def _range_cmpeq(u: UOp, s: tuple[Range, ...]) -> Range:
    lo, hi = _range_cmpne(u, s)
    return (not hi, not lo)


def _all_ones_above(n: int) -> int:
    """The smallest 2**k - 1 >= n (n >= 0): a bound for a | b and a ^ b when both are in [0, n]."""
    return (1 << n.bit_length()) - 1


def _range_and(u: UOp, s: tuple[Range, ...]) -> Range | None:
    (a0, a1), (b0, b1) = s
    if u.dtype.scalar is dtypes.bool:
        return (int(a0) & int(b0), int(a1) & int(b1))
    if a0 >= 0 and b0 >= 0:
        return (0, min(a1, b1))
    if a0 >= 0 or b0 >= 0:  # a non-negative operand bounds the result
        return (0, a1 if a0 >= 0 else b1)
    return None


def _range_or(u: UOp, s: tuple[Range, ...]) -> Range | None:
    (a0, a1), (b0, b1) = s
    if u.dtype.scalar is dtypes.bool:
        return (int(a0) | int(b0), int(a1) | int(b1))
    if a0 >= 0 and b0 >= 0:
        return (max(a0, b0), _all_ones_above(max(a1, b1)))
    return None


def _range_xor(u: UOp, s: tuple[Range, ...]) -> Range | None:
    (a0, a1), (b0, b1) = s
    if u.dtype.scalar is dtypes.bool:
        return (int(a0) ^ int(b0),) * 2 if a0 == a1 and b0 == b1 else (0, 1)
    if a0 >= 0 and b0 >= 0:
        return (0, _all_ones_above(max(a1, b1)))
    return None


def _shift_ok(u: UOp, b: Range) -> bool:
    """The amount is in [0, bits) (the semantics masks it with bits - 1, so other amounts are not a plain shift)."""
    return 0 <= b[0] and b[1] < u.dtype.scalar.bits


def _range_shl(u: UOp, s: tuple[Range, ...]) -> Range | None:
    (a0, a1), b = s
    if not _shift_ok(u, b):
        return None
    return _corners([a << k for a in (a0, a1) for k in b])  # a * 2**k; wraparound is the mechanism's check


def _range_shr(u: UOp, s: tuple[Range, ...]) -> Range | None:
    (a0, a1), b = s
    if not _shift_ok(u, b):
        return None
    return _corners([a >> k for a in (a0, a1) for k in b])  # floor(a / 2**k): arithmetic, or logical on a >= 0


def _range_cast(u: UOp, s: tuple[Range, ...]) -> Range | None:
    src, dst = u.operands.x.dtype, u.dtype
    lo, hi = s[0]
    if dst.scalar is dtypes.bool:
        if lo == hi == 0:
            return (False, False)
        return (True, True) if lo > 0 or hi < 0 else (False, True)
    if src.is_float:  # truncate and saturate a known value; NaN (never a point range) would give 0
        if lo != hi or lo != lo:
            return None
        if lo >= dst.max + 1:
            return (dst.max, dst.max)
        if lo < dst.min:
            return (dst.min, dst.min)
        return (int(lo), int(lo))
    return (int(lo), int(hi))  # int -> int keeps the value when it fits (else the mechanism says full range)


def _range_mulacc(u: UOp, s: tuple[Range, ...]) -> Range:
    lo, hi = _range_mul(u, s[:2])  # a * b + c: modular arithmetic wraps once at the end, as if exact
    return (lo + s[2][0], hi + s[2][1])


def _range_where(_: UOp, s: tuple[Range, ...]) -> Range:
    c, a, b = s
    if c[0]:
        return a
    if not c[1]:
        return b
    return (min(a[0], b[0]), max(a[1], b[1]))


def _range_union(_: UOp, s: tuple[Range, ...]) -> Range | None:
    return (min(r[0] for r in s), max(r[1] for r in s)) if s else None


register_range(CONST, _range_const, floats=True)
register_range(ADD, lambda _, s: (s[0][0] + s[1][0], s[0][1] + s[1][1]))
register_range(SUB, lambda _, s: (s[0][0] - s[1][1], s[0][1] - s[1][0]))
register_range(MUL, _range_mul)
register_range(NEG, _range_neg)
register_range(IDIV, _range_idiv)
register_range(MOD, _range_mod)
register_range(MAX, lambda _, s: (max(s[0][0], s[1][0]), max(s[0][1], s[1][1])))
register_range(MULACC, _range_mulacc)
register_range(CMPLT, _range_cmplt)
register_range(CMPNE, _range_cmpne)
register_range(CMPEQ, _range_cmpeq)
register_range(AND, _range_and)
register_range(OR, _range_or)
register_range(XOR, _range_xor)
register_range(SHL, _range_shl)
register_range(SHR, _range_shr)
register_range(CAST, _range_cast)
register_range(WHERE, _range_where, floats=True)
register_range(GEP, lambda _, s: s[0], floats=True)
register_range(VECTORIZE, _range_union, floats=True)
