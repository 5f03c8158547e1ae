"""device-decompose{target=…}: rewrite the ops a target lacks (not in `target.native_ops`) into ops it has.

Every rewrite is exact against uopir.dialects.semantics (bit for bit, every dtype), so decomposing never changes a
result:

- `mulacc a, b, c` → `a * b + c` (mulacc is specified unfused);
- `sub a, b` → `a + -b`; `neg x` → `x * -1` (floats: a sign flip, -0.0 included), `0 - x` (ints), `x ^ true` (bool);
- `recip x` → `1 / x`; `cmpeq` ↔ `cmpne` through `^ true`;
- integer `idiv`/`mod` by a power of two 2^k → shifts and masks: `x >> k`, `x & (2^k - 1)` when x is known to be
  non-negative (always: it is cheaper everywhere), else C truncation as `(x + ((x >> (w-1)) & (2^k - 1))) >> k`
  and `x - (q << k)` (only for targets without idiv/mod).

- arithmetic on a float dtype the target does not compute in (not in `target.dtypes`: f16 or bf16 on a target
  without them) runs in float32 between casts: `cast(op(cast(a, f32), cast(b, f32)), f16)`. Exact for add, sub,
  mul, fdiv, sqrt, recip, mod, trunc, max, neg, where and comparisons (a correctly rounded f32 result rounded again to
  f16/bf16 is the correctly rounded result: 24 >= 2p+2 bits; bf16 is specified this way); exp2/log2/sin get the
  f32 function rounded once, as numpy computes them; mulacc splits into mul and add first (it rounds twice).

A float dtype the target lacks with no exact emulation (float64 on a gpu without fp64) is an error at the first
ALU op or cast computing in it, read from `target.dtypes`.

Ops with no exact decomposition (exp2, log2, sin, sqrt, trunc, fdiv, max, where, shifts, logic) that the target
lacks are an error at the op: approximations would change results, so a target must have them. The one
approximating pass is device-transcendental (it runs before this one, for targets that ask): vector exp2/log2 as
polynomials within the differential tolerance. `lacks=core.exp2,...` removes ops from the target's native set (to test,
or to model a smaller target).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.dialects import core as C
from uopir.dialects.core import const_value
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import REGISTRY, OpDef
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat, is_float, is_int
from uopir.ir.valuerange import vmin
from uopir.passes.device.common import in_kernels, resolve_target
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import check_target_option

__all__ = ["DecomposeOptions", "device_decompose", "DECOMPOSE"]


class _Ctx:
    def __init__(self, native: frozenset[OpDef], computes: frozenset[DType] = frozenset(), wide: DType | None = None):
        self.native = native
        self.computes = computes  # the scalar dtypes the target computes in (Target.dtypes)
        self.wide = wide  # the float dtype emulated floats compute in (f32)

    def lacks(self, op: OpDef) -> bool:
        return op not in self.native


def _const(like: UOp, v: object) -> UOp:
    return UOp.const(like.dtype, v)


def _pow2(c: UOp) -> int | None:
    """k when the const c is 2**k (k >= 1) on every lane, else None."""
    v = const_value(c)
    lanes = v if type(v) is tuple else (v,)
    if not lanes or any(type(x) is not int or x < 2 or x & (x - 1) for x in lanes) or len(set(lanes)) != 1:
        return None
    return lanes[0].bit_length() - 1


def _mulacc(ctx: _Ctx, u: UOp) -> UOp | None:
    if not ctx.lacks(C.MULACC):
        return None
    a, b, c = u.src
    return UOp(C.ADD, u.dtype, (UOp(C.MUL, u.dtype, (a, b)), c))


def _sub(ctx: _Ctx, u: UOp) -> UOp | None:
    if not ctx.lacks(C.SUB) or u.dtype.scalar is dtypes.bool:
        return None
    a, b = u.src
    return UOp(C.ADD, u.dtype, (a, UOp(C.NEG, u.dtype, (b,))))


def _neg(ctx: _Ctx, u: UOp) -> UOp | None:
    if not ctx.lacks(C.NEG):
        return None
    x = u.src[0]
    if u.dtype.scalar is dtypes.bool:
        return UOp(C.XOR, u.dtype, (x, _const(x, True)))
    if u.dtype.is_float:
        return UOp(C.MUL, u.dtype, (x, _const(x, -1.0)))
    if ctx.lacks(C.SUB):
        return UOp(C.MUL, u.dtype, (x, _const(x, -1)))
    return UOp(C.SUB, u.dtype, (_const(x, 0), x))


def _recip(ctx: _Ctx, u: UOp) -> UOp | None:
    if not ctx.lacks(C.RECIP):
        return None
    return UOp(C.FDIV, u.dtype, (_const(u, 1.0), u.src[0]))


def _cmp_not(ctx: _Ctx, u: UOp) -> UOp | None:
    other = C.CMPNE if u.op is C.CMPEQ else C.CMPEQ
    if not ctx.lacks(u.op) or ctx.lacks(other):
        return None
    flip = UOp(other, u.dtype, u.src)
    return UOp(C.XOR, u.dtype, (flip, _const(flip, True)))


def _div_pow2(ctx: _Ctx, u: UOp, x: UOp, c: UOp) -> UOp | None:
    k = _pow2(c)
    if k is None:
        return None
    d = u.dtype
    mask = _const(x, (1 << k) - 1)
    if d.scalar.kind == "uint" or vmin(x) >= 0:
        return UOp(C.SHR, d, (x, _const(x, k))) if u.op is C.IDIV else UOp(C.AND, d, (x, mask))
    if not ctx.lacks(u.op):
        return None  # the target divides; the C compiler does this itself
    bias = UOp(C.AND, d, (UOp(C.SHR, d, (x, _const(x, d.scalar.bits - 1))), mask))
    q = UOp(C.SHR, d, (UOp(C.ADD, d, (x, bias)), _const(x, k)))
    return q if u.op is C.IDIV else UOp(C.SUB, d, (x, UOp(C.SHL, d, (q, _const(x, k)))))


def _promote(ctx: _Ctx, u: UOp) -> UOp | None:
    """An op on a float dtype the target does not compute in, done in ctx.wide between casts (exact; see above)."""
    if ctx.wide is None:
        return None
    narrow = [s.dtype for s in u.src if s.dtype.scalar.is_float and s.dtype.scalar not in ctx.computes]
    if not narrow and not (u.dtype.scalar.is_float and u.dtype.scalar not in ctx.computes):
        return None
    if u.op is C.MULACC:
        a, b, c = u.src
        return UOp(C.ADD, u.dtype, (UOp(C.MUL, u.dtype, (a, b)), c))
    srcs = tuple(s.cast(ctx.wide.vec(s.dtype.count)) if s.dtype.scalar.is_float and s.dtype.scalar not in ctx.computes
                 else s for s in u.src)
    if u.dtype.scalar.is_float and u.dtype.scalar not in ctx.computes:
        return UOp(u.op, ctx.wide.vec(u.dtype.count), srcs, u.arg).cast(u.dtype)
    return UOp(u.op, u.dtype, srcs, u.arg)


PROMOTE = PatternMatcher([(UPat(C.ALU_OPS, name="u"), _promote, "emulated-float-via-f32")])

DECOMPOSE = PatternMatcher([
    (UPat(C.MULACC, name="u"), _mulacc, "mulacc-to-mul-add"),
    (UPat(C.SUB, name="u"), _sub, "sub-to-add-neg"),
    (UPat(C.NEG, name="u"), _neg, "neg-to-mul-or-sub"),
    (UPat(C.RECIP, dtype=is_float, name="u"), _recip, "recip-to-fdiv"),
    (UPat((C.CMPEQ, C.CMPNE), name="u"), _cmp_not, "cmp-to-negated-cmp"),
    (UPat((C.IDIV, C.MOD), dtype=is_int, src=(UPat.var("x"), UPat.cvar("c")), name="u"), _div_pow2,
     "div-mod-pow2-to-shift"),
])


@dataclass
class DecomposeOptions:
    """device-decompose's options."""
    target: str = field(default="cpu", metadata={"help": "a target name: cpu, gpu or a device (python, c, ...)"})
    lacks: list[str] = field(default_factory=list, metadata={
        "help": "ops to treat as missing from the target (e.g. core.mulacc,core.exp2)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)


def _uncomputable(u: UOp, computes: frozenset[DType]) -> DType | None:
    """The float dtype an ALU op or cast computes in that the target lacks and nothing emulates (f64 on a target
    without fp64; f16/bf16 run in f32), else None. Loads and stores only move bits, so they need no check."""
    if u.op not in C.ALU_OPS and u.op is not C.CAST:
        return None
    for d in (u.dtype, *(s.dtype for s in u.src)):
        x = d.scalar
        if x.is_float and x not in computes and x not in (dtypes.float16, dtypes.bfloat16):
            return x
    return None


@register_pass("device-decompose", summary="rewrite ops the target lacks into ops it has (exactly)",
               consumes=("core", "kernel", "device"), produces=("core", "kernel", "device"), options=DecomposeOptions)
def device_decompose(root: UOp, options: DecomposeOptions, ctx: PassContext) -> UOp:
    t = resolve_target(options.target, root, ctx)
    if t is None:
        return root
    missing: set[OpDef] = set()
    for name in options.lacks:
        op = REGISTRY.get(name)
        if op is None or op not in C.ALU_OPS:
            ctx.error(root, f"device-decompose: lacks={name}: not a core ALU op")
            return root
        missing.add(op)
    emulated = any(d.is_float and d not in t.dtypes for d in (dtypes.float16, dtypes.bfloat16))
    dctx = _Ctx(frozenset(t.native_ops) - missing, frozenset(t.dtypes),
                dtypes.float32 if emulated and dtypes.float32 in t.dtypes else None)

    def run(k: UOp) -> UOp:
        if dctx.wide is not None:
            k = graph_rewrite(k, PROMOTE, ctx=dctx, stats=ctx.stats)
        out = graph_rewrite(k, DECOMPOSE, ctx=dctx, stats=ctx.stats)
        for u in out.toposort():
            lost = _uncomputable(u, t.dtypes)
            if lost is not None:
                ctx.error(u, f"target '{t.name}' does not compute in {lost} (its description lacks the dtype) and "
                             f"{lost} has no exact emulation: compute in float32, or use a device that has {lost}")
                break
            if u.op in C.ALU_OPS and dctx.lacks(u.op):
                ctx.error(u, f"target '{t.name}' has no {u.op.name} and device-decompose knows no exact "
                             f"decomposition of it for {u.dtype}")
                break
        return out
    return in_kernels(root, run)

