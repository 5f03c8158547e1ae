"""tensor-canonicalize: fold movement chains, constants and identities at the tensor level; drop dead values.

Every rewrite preserves the reference interpreter's semantics bit for bit (uopir.backends.python), which is also
what constant folding uses, so a folded const evaluates exactly like the graph it replaces. Choices:

- Float identities only where exact: `x * 1.0`, `x / 1.0`, `x + (-0.0)` and `x - 0.0` fold to x; `x + 0.0` is
  kept (it turns -0.0 into +0.0). Integer/bool identities: `x + 0`, `x - 0`, `x * 1`, `x idiv 1`, `x | 0`,
  `x ^ 0`, `x & ~0`, shifts by a multiple of the bit width, `max(x, MIN)`, `x op x` for and/or/max.
- A rewrite that drops a subgraph (`where` with a constant condition or equal branches) fires only when the
  dropped part has no side effect (tensor.assign, tensor.call), so buffer writes are never lost.
- Rewrites that would change a value's shape (a shapeless x in `x * shaped_one`) do not fire.
- The graph is what the root reaches, so dead values vanish by construction; group sources are deduplicated (a
  sink's results are kept, in position).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from uopir.dialects.core import ALU_OPS, const, const_value
from uopir.dialects.semantics import alu, bitcast_array, cast_array, const_array, to_python
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import Trait
from uopir.ir.pattern import PatternMatcher, RewriteStats, UPat, graph_rewrite
from uopir.ir.uop import UOp
from uopir.passes.manager import PassContext, register_pass

__all__ = ["tensor_canonicalize", "movement_patterns", "fold_patterns", "identity_patterns", "dead_patterns",
           "canonicalize_patterns"]


# ---- helpers ---------------------------------------------------------------------------------------------------------
def _has_effect(u: UOp) -> bool:
    """Does evaluating u write a buffer (so dropping it would lose the write)?"""
    return any(n.op.has(Trait.SIDE_EFFECT) for n in u.toposort())


def _splat(c: UOp) -> Any:
    """The single value of a const (every lane equal for vectors), or a sentinel when lanes differ."""
    v = const_value(c)
    if type(v) is tuple:
        return v[0] if all(_same_bits(v[0], x) for x in v) else _MIXED
    return v


_MIXED: Any = object()


def _same_bits(a: Any, b: Any) -> bool:
    if type(a) is float and type(b) is float:
        return a.hex() == b.hex() if a == a and b == b else (a != a and b != b)
    return type(a) is type(b) and a == b


def _is_value(c: UOp, want: Any) -> bool:
    """c is a const equal to `want` in every lane, bit for bit for floats (so 0.0 is not -0.0)."""
    v = _splat(c)
    if v is _MIXED:
        return False
    if c.dtype.is_float:
        return type(v) is float and _same_bits(v, float(want))
    return v == want and not (c.dtype.is_bool and type(want) is not bool and want not in (0, 1))


def _keep_shape(u: UOp, x: UOp) -> UOp | None:
    """x as the replacement of u, unless that changes the value's shape or dtype."""
    if x.dtype is not u.dtype:
        return None
    if x.shape == u.shape:
        return x
    if x.op.name == "core.const" and u.shape is not None and x.dtype.count == 1:
        return const(x.dtype, const_value(x), u.shape)
    return None


# ---- movement chains and no-op movement ------------------------------------------------------------------------------
def _reshape(x: UOp, r: UOp) -> UOp | None:
    if r.arg == x.shape:
        return x
    if x.op.name == "tensor.reshape":
        return r.replace(src=x.src) if x.src[0].shape != r.arg else x.src[0]
    return None


def _permute(x: UOp, p: UOp) -> UOp | None:
    if p.arg == tuple(range(len(p.arg))):
        return x
    if x.op.name == "tensor.permute":
        return p.replace(src=x.src, arg=tuple(x.arg[i] for i in p.arg))
    return None


def _expand(x: UOp, e: UOp) -> UOp | None:
    if e.arg == x.shape:
        return x
    if x.op.name == "tensor.expand":
        return e.replace(src=x.src)
    return None


def _pad(x: UOp, p: UOp) -> UOp | None:
    if all(b == 0 and a == 0 for b, a in p.arg):
        return x
    if x.op.name == "tensor.pad":
        pads = tuple((b0 + b1, a0 + a1) for (b0, a0), (b1, a1) in zip(x.arg, p.arg, strict=True))
        return p.replace(src=x.src, arg=pads)
    return None


def _shrink(x: UOp, s: UOp) -> UOp | None:
    xs = x.shape
    if xs is not None and all(b == 0 and e == d for (b, e), d in zip(s.arg, xs, strict=True)):
        return x
    if x.op.name == "tensor.shrink":
        bounds = tuple((b0 + b1, b0 + e1) for (b0, _), (b1, e1) in zip(x.arg, s.arg, strict=True))
        return s.replace(src=x.src, arg=bounds)
    return None


def _flip(x: UOp, f: UOp) -> UOp | None:
    xs = x.shape
    axes = tuple(a for a in f.arg if xs is None or xs[a] != 1)  # flipping a size-1 axis does nothing
    if x.op.name == "tensor.flip":
        inner = x.src[0].shape
        both = sorted(set(axes) ^ {a for a in x.arg if inner is None or inner[a] != 1})
        return x.src[0] if not both else f.replace(src=x.src, arg=tuple(both))
    if not axes:
        return x
    return f.replace(arg=axes) if axes != f.arg else None


def _chain(op: str, fn: Any) -> tuple:
    return (UPat(op, src=(UPat.var("x"),), name="m"), lambda x, m: fn(x, m), f"{op.split('.')[1]}-fold")


movement_patterns = PatternMatcher([
    _chain("tensor.reshape", _reshape),
    _chain("tensor.permute", _permute),
    _chain("tensor.expand", _expand),
    _chain("tensor.pad", _pad),
    _chain("tensor.shrink", _shrink),
    _chain("tensor.flip", _flip),
    (UPat(("tensor.contiguous", "tensor.detach"), src=(UPat(("tensor.contiguous", "tensor.detach"), name="y"),),
          name="m"), lambda m, y: y if y.op is m.op else None, "idempotent-fold"),
], name="tensor-movement")


# ---- constant folding ------------------------------------------------------------------------------------------------
def _scalar_of(c: UOp) -> np.ndarray:
    return const_array(c.dtype, const_value(c))


def _fold_alu(u: UOp) -> UOp | None:
    """An elementwise op on consts becomes the const it evaluates to (computed on one element)."""
    shape = u.shape
    if shape is not None and u.dtype.count != 1:
        return None
    if any(t.scalar.np_name is None for t in (u.dtype, *(s.dtype for s in u.src))):
        return None  # a pointer (a bitcast int -> ptr is valid IR): no value to fold to
    vals = [_scalar_of(s) for s in u.src]
    name = u.op.name
    if name == "core.cast":
        r = cast_array(vals[0], u.src[0].dtype, u.dtype)
    elif name == "core.bitcast":
        r = bitcast_array(vals[0], u.src[0].dtype, u.dtype)
    else:
        r = alu(name, u.dtype, vals, [s.dtype for s in u.src])
    return const(u.dtype, to_python(r, u.dtype), shape)


def _fold_movement(c: UOp, m: UOp) -> UOp | None:
    """A movement op of a splat tensor const is the const in the new shape (pad only when the value is +0)."""
    if c.dtype.count != 1:
        return None
    if m.op.name == "tensor.pad" and not _is_value(c, False if c.dtype.is_bool else 0):
        return None
    return const(c.dtype, const_value(c), m.shape)


def _fold_reduce(c: UOp, r: UOp) -> UOp | None:
    """A reduce of a splat const: exact for max/min (any dtype) and for integer/bool add/mul."""
    op, axes = r.arg
    cs = c.shape
    if cs is None or c.dtype.count != 1:
        return None
    n = 1
    for a in axes:
        n *= cs[a]
    d, v = c.dtype, const_value(c)
    if n == 0:
        ident = {"add": 0, "mul": 1, "max": d.min, "min": d.max}[op]
        return const(d, ident, r.shape)
    if op in ("max", "min"):
        return const(d, v, r.shape)
    if d.is_bool:
        return const(d, v, r.shape)  # or / and of copies of v
    if d.is_int:
        return const(d, v * n if op == "add" else pow(v, n, 1 << d.bits), r.shape)
    return None


_ELEMENTWISE = tuple(ALU_OPS) + ("core.cast", "core.bitcast")
fold_patterns = PatternMatcher([
    (UPat(_ELEMENTWISE, src=UPat.cvar(), name="u"), _fold_alu, "const-fold"),
    (UPat(("tensor.reshape", "tensor.permute", "tensor.expand", "tensor.shrink", "tensor.flip", "tensor.pad"),
          src=(UPat.cvar("c"),), name="m"), _fold_movement, "const-movement"),
    (UPat("tensor.reduce", src=(UPat.cvar("c"),), name="r"), _fold_reduce, "const-reduce"),
], name="tensor-const-fold")


# ---- identities ------------------------------------------------------------------------------------------------------
def _all_ones(d: DType) -> Any:
    return True if d.is_bool else (d.max if d.is_unsigned else -1)


def _right_identity(u: UOp, x: UOp, c: UOp) -> UOp | None:
    """x op c == x for the op's right identity c (exact in the dtype)."""
    d, name = u.dtype, u.op.name
    if d.is_float:
        ok = (name == "core.mul" and _is_value(c, 1.0)) or (name == "core.fdiv" and _is_value(c, 1.0)) or \
             (name == "core.add" and _is_value(c, -0.0)) or (name == "core.sub" and _is_value(c, 0.0)) or \
             (name == "core.max" and _is_value(c, float("-inf")))
    elif d.is_bool:
        ok = (name in ("core.add", "core.or", "core.xor", "core.max") and _is_value(c, False)) or \
             (name in ("core.mul", "core.and") and _is_value(c, True))
    else:
        v = _splat(c)
        if v is _MIXED:
            return None
        ok = (name in ("core.add", "core.sub", "core.or", "core.xor") and v == 0) or \
             (name in ("core.mul", "core.idiv") and v == 1) or (name == "core.and" and v == _all_ones(d.scalar)) or \
             (name in ("core.shl", "core.shr") and v % d.scalar.bits == 0) or (name == "core.max" and v == d.scalar.min)
    return _keep_shape(u, x) if ok else None


def _same_operands(u: UOp, x: UOp) -> UOp | None:
    return _keep_shape(u, x)


def _where_const(w: UOp, c: UOp, a: UOp, b: UOp) -> UOp | None:
    v = _splat(c)
    if v is _MIXED:
        return None
    keep, drop = (a, b) if v else (b, a)
    if _has_effect(drop):
        return None
    return _keep_shape(w, keep)


def _where_same(w: UOp, c: UOp, a: UOp) -> UOp | None:
    return None if _has_effect(c) else _keep_shape(w, a)


def _where_bool(w: UOp, c: UOp, t: UOp, f: UOp) -> UOp | None:
    """where(c, true, false) is c itself for a bool result."""
    if w.dtype is not dtypes.bool or not (_is_value(t, True) and _is_value(f, False)):
        return None
    return _keep_shape(w, c)


_X, _C = UPat.var("x"), UPat.cvar("c")
_RIGHT_ID_OPS = ("core.add", "core.sub", "core.mul", "core.fdiv", "core.idiv", "core.or", "core.xor", "core.and",
                 "core.shl", "core.shr", "core.max")
identity_patterns = PatternMatcher([
    (UPat(_RIGHT_ID_OPS, src=(_X, _C), name="u"), _right_identity, "right-identity"),
    (UPat(("core.and", "core.or", "core.max"), src=(_X, _X), name="u"), _same_operands, "idempotent-op"),
    (UPat("core.neg", src=(UPat("core.neg", src=(_X,)),), name="u"), _same_operands, "double-neg"),
    (UPat("core.cast", src=(_X,), name="u"), lambda u, x: x if x.dtype is u.dtype else None, "noop-cast"),
    (UPat("core.where", src=(UPat.cvar("c"), UPat.var("a"), UPat.var("b")), name="w"), _where_const,
     "where-const-cond"),
    (UPat("core.where", src=(UPat.var("c"), UPat.var("a"), UPat.var("a")), name="w"), _where_same, "where-same"),
    (UPat("core.where", src=(UPat.var("c"), UPat.cvar("t"), UPat.cvar("f")), name="w"), _where_bool, "where-bool"),
], name="tensor-identities")


# ---- dead values ----------------------------------------------------------------------------------------------------
def _dedup(s: UOp) -> UOp | None:
    uniq = tuple(dict.fromkeys(s.src))
    return s.replace(src=uniq) if len(uniq) != len(s.src) else None


# A group's operands are effects, so a repeated one is redundant; a sink's operands are the program's results, read
# by position, so the sink keeps every one of them (duplicates included).
dead_patterns = PatternMatcher([
    (UPat("core.group", name="s"), _dedup, "dedup-sources"),
], name="tensor-dead")

canonicalize_patterns = movement_patterns + fold_patterns + identity_patterns + dead_patterns


def tensor_canonicalize(root: UOp, stats: RewriteStats | None = None) -> UOp:
    """Rewrite to a fixed point with every canonicalization family (sources first)."""
    return graph_rewrite(root, canonicalize_patterns, stats=stats)


@register_pass("tensor-canonicalize", summary="fold movement chains, constants and identities; drop dead values",
               consumes=("core", "tensor"), produces=("core", "tensor"))
def _tensor_canonicalize_pass(root: UOp, options: Any, ctx: PassContext) -> UOp:
    return tensor_canonicalize(root, ctx.stats)
