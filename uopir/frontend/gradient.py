"""Reverse-mode differentiation of tensor-dialect graphs: one derivative rule per op, as a pattern table.

`compute_gradient(root, root_grad, targets)` walks the graph from `root` back to `targets` in reverse topological order
(iteratively: graphs can be very deep) and returns, for each target, its gradient as ordinary tensor-dialect IR built
from the forward graph's values: it prints, round-trips through the parser and goes through the same passes and
kernels as any graph. A rule receives the incoming gradient as its context and returns one gradient per operand
(None for an operand that gets none), or a mapping {node: gradient} for a rule that matches a multi-op idiom and
differentiates it as a whole (`abs` is a bitcast/and/bitcast on the float's bits; `windows`, the strided windows of
conv and pool patches, is k padded rows of the gradient instead of a sum over the repeats of an expand).

Only float values carry gradients: an int or bool operand (a comparison's result, an index) gets none, so the rules
for comparisons, bit ops, integer division, trunc and bitcast return no gradient (their derivative is zero or
undefined). Everything the frontend builds from these ops (matmul, conv2d, pooling, softmax, losses, gather,
cumsum...) is differentiated through its decomposition. `tensor.detach` stops the walk.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend.weak_ids import WeakById
from uopir.ir.dtype import dtypes
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.symbolic import sadd, ssub
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat

LN_2 = math.log(2)


# ---- small builders (the result keeps the operand's dtype; numbers become shapeless consts) -------------------------
def _k(ref: UOp, v: float) -> UOp:
    return C.const(ref.dtype, v)


def _expand(g: UOp, shape: tuple) -> UOp:
    return g if g.shape == shape else T.movement(T.EXPAND, g, shape)


def _sum_to(g: UOp, axes: tuple[int, ...]) -> UOp:
    """g summed over `axes` (kept as size 1); half floats accumulate in float32."""
    if not axes:
        return g
    wide = g.dtype in (dtypes.float16, dtypes.bfloat16)
    x = g.cast(dtypes.float32) if wide else g
    r = UOp(T.REDUCE, x.dtype, (x,), ("add", axes))
    return r.cast(g.dtype) if wide else r


def _on_device_of(g: UOp, x: UOp) -> UOp:
    """g copied to the device x lives on (the device of a buffer x is built from); g itself when x has none."""
    for u in x.toposort():
        if u.op is T.BUFFER:
            return UOp(T.COPY, g.dtype, (g,), u.attrs.device)
    return g


# ---- the rules: (pattern, rule(ctx=incoming gradient, captures) -> gradients, name) ----------------------------------
def _max_grad(ctx: UOp, ret: UOp) -> tuple[UOp, UOp]:
    """max(a, b): the larger operand takes the gradient; on a tie each takes half (as tinygrad)."""
    a, b = ret.src
    tie = a.eq(b).where(ctx * 0.5, 0)
    return b.lt(a).where(ctx, tie), a.lt(b).where(ctx, tie)


def _reduce_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
    x = ret.operands.x
    op, axes = ret.attrs.op, ret.attrs.axes
    g = _expand(ctx, x.shape)
    if op == "add":
        return (g,)
    if op == "mul":  # d/dx_i prod(x) = prod(x) / x_i; at a zero x_i the product of the others (0 if another is 0)
        zero, one = x.eq(_k(x, 0.0)), _k(x, 1.0)
        zeros = _expand(_sum_to(zero.where(one, _k(x, 0.0)), axes), x.shape)
        others = _expand(UOp(T.REDUCE, x.dtype, (zero.where(one, x),), ("mul", axes)), x.shape)
        return (g * zero.where(zeros.eq(one).where(others, 0), _expand(ret, x.shape) / x),)
    hit = x.eq(_expand(ret, x.shape))  # max/min: the extreme elements share the gradient equally
    count = _sum_to(hit.where(_k(x, 1.0), _k(x, 0.0)), axes)
    return (hit.where(_expand(ctx / count, x.shape), 0),)  # divided once per reduced element, not per element


def _permute_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
    inv = tuple(sorted(range(len(ret.arg)), key=ret.arg.__getitem__))
    return (UOp(T.PERMUTE, ctx.dtype, (ctx,), inv),)


def _expand_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
    src = ret.operands.x.shape
    return (_sum_to(ctx, tuple(i for i, (a, b) in enumerate(zip(src, ret.shape, strict=True)) if a != b)),)


def _pad_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
    pads = T.sym_arg(ret)
    return (T.movement(T.SHRINK, ctx, tuple((b, sadd(b, d)) for (b, _), d in zip(pads, ret.operands.x.shape,
                                                                                 strict=True))),)


def _shrink_grad(ctx: UOp, ret: UOp) -> tuple[UOp]:
    bounds = T.sym_arg(ret)
    return (T.movement(T.PAD, ctx, tuple((b, ssub(d, e)) for (b, e), d in zip(bounds, ret.operands.x.shape,
                                                                             strict=True))),)


def _abs_grad(ctx: UOp, x: UOp, mask: UOp) -> dict[UOp, UOp] | None:
    """abs(x), built as bitcast(bitcast(x) & ~signbit): sign(x) * gradient, 0 at 0 (as tinygrad)."""
    if C.const_value(mask) != (1 << (x.dtype.bits - 1)) - 1:
        return None
    zero = _k(x, 0.0)
    return {x: x.lt(zero).where(-ctx, zero.lt(x).where(ctx, 0))}


def _pick_grad(ctx: UOp, r: UOp, m: UOp, x: UOp, e: UOp | None = None) -> dict[UOp, UOp]:
    """The frontend's bit-exact pick (gather, tensor indexing): bitcast(sum(where(onehot, bitcast(x), 0))) reads
    one element per output, so the gradient goes back to where the one-hot mask is set (summed where x was
    broadcast)."""
    g = m.where(_expand(T.movement(T.RESHAPE, ctx, r.shape), m.shape), 0)
    if e is not None:
        g = _sum_to(g, tuple(i for i, (a, b) in enumerate(zip(x.shape, m.shape, strict=True)) if a != b))
    return {x: g}


def _gather_map(top: UOp) -> tuple[UOp, int, tuple[int, int, int]] | None:
    """A chain of reshapes and shrinks over `x.reshape(pre + (1, i)).expand(pre + (reps, i)).reshape(...)` (the
    frontend's strided windows, `shape_ops._windows_last`) ending at `top` of shape pre + (k, out): when top[..., j, o]
    reads x[..., b + j * d + o * s], (x, len(pre), (b, d, s)). The chain is replayed on the indices of one row."""
    chain: list[UOp] = []
    u = top
    while u.op in (T.RESHAPE, T.SHRINK) and len(chain) < 16:
        chain.append(u)
        u = u.operands.x
    if u.op is not T.EXPAND or not chain or (pre_x := u.operands.x).op is not T.RESHAPE or len(top.src) != 1:
        return None
    x = pre_x.operands.x
    xs, es = x.shape, u.shape
    if xs is None or es is None or not all(type(d) is int for d in (*xs, *es)) or len(xs) == 0:
        return None
    npre = len(xs) - 1
    pre = xs[:npre]
    if pre_x.shape != pre + (1, xs[-1]) or es[:npre] != pre or es[-1] != xs[-1] or len(top.shape) != npre + 2:
        return None
    rows = np.broadcast_to(np.arange(xs[-1]), es[npre:])
    for v in reversed(chain):
        sh = v.shape
        if len(v.src) != 1 or sh is None or sh[:npre] != pre:
            return None
        if v.op is T.RESHAPE:
            rows = rows.reshape(sh[npre:])
        else:
            bounds = v.arg
            if any(b != (0, d) for b, d in zip(bounds[:npre], pre, strict=True)):
                return None
            rows = rows[tuple(slice(lo, hi) for lo, hi in bounds[npre:])]
    k, out = rows.shape
    b = int(rows[0, 0])
    d = int(rows[1, 0]) - b if k > 1 else 0
    s = int(rows[0, 1]) - b if out > 1 else 1
    if d < 0 or s < 1 or not np.array_equal(rows, b + d * np.arange(k)[:, None] + s * np.arange(out)[None, :]):
        return None
    return x, npre, (b, d, s)


def _windows_grad(ctx: UOp, ret: UOp) -> dict[UOp, UOp] | None:
    """Strided windows (conv and pool patches): the gradient of x[..., b + j * d + o * s] is, for each of the k
    window offsets j, that row of the gradient spread out by the stride and padded into place, and the k of them
    added. The generic chain of rules sums over the expand's repeats instead (reps x the work, with a division and a
    remainder per element)."""
    m = _gather_map(ret)
    if m is None:
        return None
    x, npre, (b, d, s) = m
    pre, i = x.shape[:npre], x.shape[-1]
    k, out = ret.shape[npre:]
    keep = ((0, 0),) * npre
    total = None
    for j in range(k):
        gj = T.movement(T.RESHAPE, T.movement(T.SHRINK, ctx, tuple((0, p) for p in pre) + ((j, j + 1), (0, out))),
                        pre + (out,))
        if s > 1 and out > 1:
            gj = T.movement(T.PAD, T.movement(T.RESHAPE, gj, pre + (out, 1)), keep + ((0, 0), (0, s - 1)))
            gj = T.movement(T.RESHAPE, gj, pre + (out * s,))
        start = b + j * d
        n = min(gj.shape[-1], i - start)
        if n != gj.shape[-1]:
            gj = T.movement(T.SHRINK, gj, tuple((0, p) for p in pre) + ((0, n),))
        if start or i - start - n:
            gj = T.movement(T.PAD, gj, keep + ((start, i - start - n),))
        total = gj if total is None else total + gj
    return {x: total}


FLOAT_POW: list[Any] = []  # (a, b) -> a ** b on float UOps: tensor.py registers Tensor._fpow (no import cycle)


def _pow_grad(ctx: UOp, a: UOp, b: UOp, ret: UOp) -> dict[UOp, UOp]:
    """The frontend's float pow (Tensor._fpow: selects around exp2(b * log2|a|)) differentiated as one op, as torch:
    d/da = b * a**(b-1) (0 where b == 0), d/db = a**b * ln a (at a == 0: -inf for b < 0, else 0)."""
    zero = _k(a, 0.0)
    da = b.eq(zero).where(zero, b * FLOAT_POW[0](a, b - 1.0))
    db = a.eq(zero).where(b.lt(zero).where(_k(a, -math.inf), zero), ret * UOp(C.LOG2, a.dtype, (a,)) * LN_2)
    return {a: ctx * da, b: ctx * db}


def _sigmoid_grad(ctx: UOp, ret: UOp, x: UOp, one: UOp, log2e: UOp) -> dict[UOp, UOp] | None:
    """sigmoid(x) = 1 / (1 + exp2(-x * log2(e))): s * (1 - s) * gradient, finite for any x (the op-by-op chain
    gives inf * 0 = nan once exp overflows)."""
    k = C.const_value(log2e)
    if C.const_value(one) != 1 or not isinstance(k, float) or abs(k - 1 / LN_2) > 1e-6:
        return None
    return {x: ctx * ret * (1.0 - ret)}


def _logistic_grad(ctx: UOp, ret: UOp, x: UOp, k: UOp, c: UOp, e: UOp) -> dict[UOp, UOp] | None:
    """q = e / (c + e) with e = exp2(k * x) and a constant c > 0 (`x.exp() / (1 + x.exp())`, a hand-written
    sigmoid): dq/dx = k ln2 * s (1 - s) with s = 1 / (1 + c/e), the same q in a form that stays finite where e
    overflows or underflows (the quotient rule gives 0 * inf = nan there, and so does torch's op-by-op chain).
    1 - s is taken as s * c/e where c/e < 1, so the gradient keeps its precision far out on the flat side."""
    kv, cv = C.const_value(k), C.const_value(c)
    if not isinstance(kv, float) or not isinstance(cv, (int, float)) or not cv > 0 or not math.isfinite(cv):
        return None
    r = _k(e, float(cv)) / e
    s = UOp(C.RECIP, e.dtype, (r + 1.0,))
    slope = r.lt(_k(e, 1.0)).where(s * s * r, s * (1.0 - s))
    return {x: ctx * slope * (kv * LN_2)}


def _cos_grad(ctx: UOp, hi: UOp, x: UOp, x2: UOp, sin_x: UOp) -> dict[UOp, UOp] | None:
    """The frontend's cos (math_ops.cos: sin(hi - x) + d * sin(x), d the rounding error of hi - x) is -sin(x): the
    op-by-op chain differentiates sin(hi - x) with a cos(hi - x) rounded back to sin(x), which drops the d * cos(x)
    that the correction term adds (off by 8e-3 at x = 1e6)."""
    if x is not x2 or not isinstance(v := C.const_value(hi), float) or abs(v - math.pi / 2) > 1e-3:
        return None
    return {x: -(ctx * sin_x)}


_NONE: tuple = ()  # no gradient for any operand
_F = UPat.var("x", dtype=lambda d: d.is_float)
_BITS = UPat(C.BITCAST, src=(_F,))
_PICK = UPat(T.REDUCE, arg=lambda a: a[0] == "add", name="r", src=(
    UPat(C.WHERE, src=(UPat.var("m"), UPat.any(_BITS, UPat(T.EXPAND, src=(_BITS,), name="e")), UPat.value(0))),))

_ABS = UPat(C.BITCAST, src=(UPat(C.AND, src=(UPat(C.BITCAST, src=(UPat.var("a"),)), UPat.cvar())),))
_POW = UPat(C.WHERE, name="ret", src=(UPat(), UPat(), UPat(C.WHERE, src=(UPat(), UPat(), UPat(C.EXP2, src=(
    UPat(C.MUL, src=(UPat.var("b"), UPat(C.LOG2, src=(_ABS,)))),))))))

_SIGMOID = UPat(C.RECIP, name="ret", src=(UPat(C.ADD, src=(UPat.cvar("one"), UPat(C.EXP2, src=(
    UPat(C.MUL, src=(UPat(C.NEG, src=(UPat.var("x"),)), UPat.cvar("log2e"))),)))),))

_EXP = UPat(C.EXP2, name="e", src=(UPat(C.MUL, src=(UPat.var("x"), UPat.cvar("k"))),))
_LOGISTIC = UPat(C.FDIV, name="ret", src=(_EXP, UPat(C.ADD, src=(UPat.cvar("c"), UPat.var("e")))))

_COS = UPat(C.ADD, src=(UPat(C.SIN, src=(UPat(C.SUB, src=(UPat.cvar("hi"), UPat.var("x"))),)),
                        UPat(C.MUL, src=(UPat(), UPat(C.SIN, name="sin_x", src=(UPat.var("x2"),))))))

GRADIENT_RULES = PatternMatcher([
    (_SIGMOID, _sigmoid_grad, "sigmoid"),
    (_LOGISTIC, _logistic_grad, "logistic"),
    (_COS, _cos_grad, "cos"),
    (_POW, _pow_grad, "pow"),
    # elementwise
    (UPat(C.CAST, name="ret"), lambda ctx, ret: (ctx.cast(ret.operands.x.dtype),) if ret.dtype.is_float else _NONE,
     "cast"),
    (UPat(C.BITCAST, dtype=lambda d: d.is_float, src=(UPat(C.AND, src=(UPat(C.BITCAST, src=(_F,)),
                                                                        UPat.cvar("mask"))),)), _abs_grad, "abs"),
    (UPat(C.BITCAST, dtype=lambda d: d.is_float, src=(UPat.any(UPat(T.RESHAPE, src=(_PICK,)), _PICK),)), _pick_grad,
     "pick"),
    (UPat(C.ADD, name="ret"), lambda ctx, ret: (ctx, ctx), "add"),
    (UPat(C.SUB, name="ret"), lambda ctx, ret: (ctx, -ctx), "sub"),
    (UPat(C.MUL, name="ret"), lambda ctx, ret: (ctx * ret.src[1], ctx * ret.src[0]), "mul"),
    # d(a/b)/db = -(a/b)/b, through the quotient: -a/b**2 overflows (b**2 = inf) where a/b is finite
    (UPat(C.FDIV, name="ret"), lambda ctx, ret: (ctx / ret.src[1], -(ctx * ret) / ret.src[1]), "fdiv"),
    (UPat(C.MULACC, name="ret"), lambda ctx, ret: (ctx * ret.operands.b, ctx * ret.operands.a, ctx), "mulacc"),
    (UPat(C.MOD, name="ret"),  # float fmod: a - trunc(a / b) * b
     lambda ctx, ret: (ctx, -ctx * UOp(C.TRUNC, ret.dtype, (ret.src[0] / ret.src[1],))), "mod"),
    (UPat(C.MAX, name="ret"), _max_grad, "max"),
    (UPat(C.NEG, name="ret"), lambda ctx, ret: (-ctx,), "neg"),
    (UPat(C.RECIP, name="ret"), lambda ctx, ret: (-ctx * ret * ret,), "recip"),
    (UPat(C.EXP2, name="ret"), lambda ctx, ret: (ctx * ret * LN_2,), "exp2"),
    (UPat(C.LOG2, name="ret"), lambda ctx, ret: (ctx / (ret.src[0] * LN_2),), "log2"),
    (UPat(C.SIN, name="ret"), lambda ctx, ret: (ctx * UOp(C.SIN, ret.dtype, (math.pi / 2 - ret.src[0],)),), "sin"),
    (UPat(C.SQRT, name="ret"), lambda ctx, ret: (ctx / (ret * 2),), "sqrt"),
    (UPat(C.WHERE, name="ret"),
     lambda ctx, ret: (None, ret.operands.cond.where(ctx, 0), ret.operands.cond.where(0, ctx)), "where"),
    # zero (or undefined) derivative: comparisons, bit ops, integer ops, rounding, reinterpreting bits
    (UPat((C.CMPLT, C.CMPNE, C.CMPEQ, C.AND, C.OR, C.XOR, C.SHL, C.SHR, C.IDIV, C.TRUNC, C.BITCAST)),
     lambda ctx: _NONE, "no-gradient"),
    # movement: each op's gradient is its inverse movement (expand's is a sum)
    (UPat((T.RESHAPE, T.SHRINK), name="ret"), _windows_grad, "windows"),
    (UPat(T.RESHAPE, name="ret"), lambda ctx, ret: (T.movement(T.RESHAPE, ctx, ret.operands.x.shape),), "reshape"),
    (UPat(T.PERMUTE, name="ret"), _permute_grad, "permute"),
    (UPat(T.EXPAND, name="ret"), _expand_grad, "expand"),
    (UPat(T.PAD, name="ret"), _pad_grad, "pad"),
    (UPat(T.SHRINK, name="ret"), _shrink_grad, "shrink"),
    (UPat(T.FLIP, name="ret"), lambda ctx, ret: (UOp(T.FLIP, ctx.dtype, (ctx,), ret.arg),), "flip"),
    (UPat(T.REDUCE, name="ret"), _reduce_grad, "reduce"),
    # the value passes through unchanged
    (UPat(T.CONTIGUOUS), lambda ctx: (ctx,), "contiguous"),
    (UPat(T.COPY, name="ret"), lambda ctx, ret: (_on_device_of(ctx, ret.operands.x),), "copy"),
    # stops: detach by definition; an assign's result is the written buffer, not a function of the old value
    (UPat((T.DETACH, T.ASSIGN, T.BIND, T.AFTER)), lambda ctx: _NONE, "stop"),
], name="gradient")


# ---- the tensors that want a gradient (what backward() fills) -------------------------------------------------------
_TRACKED = WeakById()


def track(t: Any, on: bool) -> None:
    """Remember (or forget) a live Tensor with requires_grad=True, for backward()."""
    if on:
        _TRACKED[id(t)] = t
    else:
        _TRACKED.pop(id(t), None)


def any_tracked() -> bool:
    """Is a tensor with requires_grad=True alive? Then realize keeps the graphs it replaces, for a later backward."""
    return bool(_TRACKED.data)


def tracked() -> list[Any]:
    return list(_TRACKED.values())


_LIVE = WeakById()


def live(t: Any, on: bool) -> None:
    """Remember (or forget) a live float Tensor whose requires_grad is None: backward() fills its .grad too when it
    is in the graph (as tinygrad); requires_grad=False opts out."""
    if on:
        _LIVE[id(t)] = t
    else:
        _LIVE.pop(id(t), None)


def live_tensors() -> list[Any]:
    return list(_LIVE.values())


# ---- the walk --------------------------------------------------------------------------------------------------------
def compute_gradient(root: UOp, root_grad: UOp, targets: Iterable[UOp]) -> dict[UOp, UOp]:
    """d(root)/d(target), weighted by root_grad (root's shape), for each target that is in root's graph: a zero
    gradient for one reached only through ops without a derivative. Targets not in the graph are left out."""
    tset = set(targets)
    topo = list(root.toposort(gate=lambda u: u.op is not T.DETACH))
    on_path: set[UOp] = set()
    for u in topo:  # sources first: a node is on the path when a target is at or below it
        if u in tset or (u.op is not T.DETACH and any(s in on_path for s in u.src)):
            on_path.add(u)
    grads: dict[UOp, UOp] = {root: root_grad} if root in on_path else {}
    for u in reversed(topo):
        g = grads.get(u)
        if g is None or not u.src:
            continue
        res = GRADIENT_RULES.rewrite(u, g)
        if res is None:
            raise NotImplementedError(f"no gradient rule for {u.op.name} (of type {T.tensor_type(u.shape, u.dtype)})")
        if u not in tset:
            del grads[u]  # consumed: keeps the table as small as the walk's frontier
        for s, gs in (res.items() if isinstance(res, dict) else zip(u.src, res, strict=False)):
            if gs is None or s not in on_path or not s.dtype.is_float:
                continue
            if gs.shape != s.shape:
                raise AssertionError(f"gradient rule for {u.op.name} gave shape {gs.shape} for an operand of shape "
                                     f"{s.shape}")
            grads[s] = gs if s not in grads else grads[s] + gs
    for t in tset & on_path:
        if t not in grads:
            z = C.const(t.dtype, 0.0, tuple(1 for _ in t.shape))
            grads[t] = _expand(z, t.shape)
    return {t: g for t, g in grads.items() if t in tset}
