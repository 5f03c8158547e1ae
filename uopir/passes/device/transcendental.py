"""device-transcendental{target=…}: APPROXIMATE vector exp2/log2 by polynomials in core ops (a named, explicit pass).

A host cpu computes `core.exp2` / `core.log2` on a vector one lane at a time through libm (C's exp2f per lane,
LLVM's llvm.exp2 on a vector, which scalarizes to the same calls): softmax, gelu, sigmoid and tanh are bound by it.
This pass rewrites each f32/f64 vector exp2/log2 into core ops that stay vector code — range reduction, a
polynomial (mul and add: the semantics' `mulacc` is unfused anyway) and exponent scaling through integer adds and
`core.bitcast` — so every vector backend gets it and it shows in the printed IR. It runs only for targets whose
description asks (`Target.vector_transcendentals`, set for the host cpu backends c and llvm); scalar ops (one lane)
keep the target's own function.

The results are NOT the semantics' bit-exact numpy values: they are within the differential tolerance's
`transcendental` class (uopir.backends.tolerance): ≤ 1 ulp of f32 polynomial error for exp2 and ≤ ~3 ulp for log2
(unit_tests/test_transcendental.py measures them against numpy over the whole domain), and every special case is
exact: ±inf, NaN, ±0, overflow to inf, gradual underflow to 0 through the denormals (one rounding), log2 of 0 (-inf),
of a negative (NaN) and of denormal inputs.

- exp2(x): clamp x to [lo, hi] (just past the subnormal and overflow limits; NaN passes the compares), n =
  round-to-nearest(x) by adding and subtracting 1.5·2^p (exact for |x| < 2^(p-1)), f = x - n in [-½, ½], 2^f by a
  minimax polynomial, times 2^(n>>1) and then 2^(n - (n>>1)), each a power of two built in the exponent bits: the
  first product is exact, so an underflowing result is rounded once.
- log2(x): denormal x scaled by 2^p first; x = m·2^e with m in [√½, √2) read from the bits (subtract √½'s bits, the
  exponent is the arithmetic shift, the mantissa re-based on √½), s = (m-1)/(m+1), log2 m = s·P(s²); then
  e + log2 m, and x < 0 or NaN → NaN, 0 → -inf, +inf → +inf.

- 1 + exp2(x) (sigmoid's denominator: tanh, SiLU and gelu use it) is rewritten first as one sum, 6 vector ops
  fewer (one_plus_exp2_poly: no underflow path, one power of two), and sigmoid's -x·log2 e as x·-log2 e.

- fma (auto: where the target has one-rounding multiply-adds, `Target.contract_multiply_add`; on; off): each f32
  Horner step `acc * f + k` is one `device.fma` instead of a mul and an add (rounded once: within the same class, the
  tests' ulp bounds hold), and 1 + p·2^(n-1) too (its product is exact). 6-7 vector ops fewer per exp2: SiLU on 1M
  f32 elements, one core, llvm 188 -> 130 us. device-devectorize splits the fma like any elementwise op.

f16/bf16 vectors compute in f32 (device-decompose promotes them after this pass: they keep the target's function).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.ir.dtype import DType, dtypes
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat
from uopir.passes.device.common import in_kernels, resolve_target
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import check_target_option

__all__ = ["TranscendentalOptions", "device_transcendental", "TRANSCENDENTAL", "SUM_OF_EXP2", "exp2_poly", "log2_poly",
           "one_plus_exp2_poly"]


@dataclass(frozen=True)
class _Float:
    """What the rewrites need of one float dtype."""
    f: DType
    i: DType  # the signed integer of the same width
    mant: int  # explicit mantissa bits
    bias: int
    exp2_coeffs: tuple[float, ...]  # 2^f on [-1/2, 1/2], low order first
    log2_coeffs: tuple[float, ...]  # log2((1+s)/(1-s))/s as a polynomial in s², low order first


# Minimax-like fits (weighted least squares on Chebyshev nodes, numpy float64/longdouble, rounded to the dtype);
# measured maximum polynomial error: exp2 f32 0.81 ulp, f64 1.5 ulp; log2 f32 1.7 ulp on [√½, √2).
_F32 = _Float(dtypes.float32, dtypes.int32, 23, 127,
              (1.0, 0.6931471824645996, 0.24022646248340607, 0.05550329014658928, 0.009618519805371761,
               0.001339986571110785, 0.00015337580407503992),
              (2.885390043258667, 0.9617988467216492, 0.5767134428024292, 0.4317634701728821))
# f64 log2: the series 2/ln2 · s^(2k)/(2k+1) itself, enough terms that the next is below 2^-60 of the first
_LN2 = 0.6931471805599453094
_F64 = _Float(dtypes.float64, dtypes.int64, 52, 1023,
              (1.0, 0.6931471805599458, 0.24022650695910297, 0.05550410866481675, 0.009618129107537857,
               0.001333355814649887, 0.0001540353052787713, 1.5252734331130946e-05, 1.321539931789257e-06,
               1.0177675471986173e-07, 7.080122746221627e-09, 4.5355239258314944e-10),
              tuple(2.0 / _LN2 / (2 * k + 1) for k in range(13)))
_FLOATS = {dtypes.float32: _F32, dtypes.float64: _F64}


def _c(like: UOp, v: object) -> UOp:
    return UOp.const(like.dtype, v)


def _b(op: object, a: UOp, b: UOp) -> UOp:
    return UOp(op, a.dtype, (a, b))  # type: ignore[arg-type]


def _horner(x: UOp, coeffs: tuple[float, ...], fma: bool = False) -> UOp:
    """The polynomial at x, each step `acc * x + k` one `device.fma` when fma (f32 only: the op's domain)."""
    fused = fma and x.dtype.scalar is dtypes.float32
    acc = _c(x, coeffs[-1])
    for k in coeffs[-2::-1]:
        acc = UOp(D.FMA, x.dtype, (acc, x, _c(x, k))) if fused else _b(C.ADD, _b(C.MUL, acc, x), _c(x, k))
    return acc


def _bits_of(fl: _Float, v: float) -> int:
    return int(np.array(v, dtype=np.float32 if fl.f is dtypes.float32 else np.float64).view(
        np.int32 if fl.f is dtypes.float32 else np.int64))


def exp2_poly(x: UOp, fma: bool = False) -> UOp:
    """2**x for an f32/f64 vector x, in core ops (see the module docstring); fma: the polynomial's steps fused."""
    fl = _FLOATS[x.dtype.scalar]
    n_lanes = x.dtype.count
    idt = fl.i.vec(n_lanes)
    bdt = dtypes.bool.vec(n_lanes)
    lo, hi = _c(x, float(-(fl.bias + fl.mant + 2))), _c(x, float(fl.bias + 2))  # f32: -152 (gives 0), 129 (inf)
    # clamp by compare and select (NaN compares false and passes through): cheaper than core.max's NaN and
    # signed-zero rules, which a clamp does not need
    xc = UOp(C.WHERE, x.dtype, (UOp(C.CMPLT, bdt, (x, lo)), lo, x))
    xc = UOp(C.WHERE, x.dtype, (UOp(C.CMPLT, bdt, (hi, xc)), hi, xc))
    magic = 1.5 * 2.0 ** fl.mant
    t = _b(C.ADD, xc, _c(x, magic))  # n + magic, n = xc rounded to nearest even
    nf = _b(C.SUB, t, _c(x, magic))
    f = _b(C.SUB, xc, nf)
    p = _horner(f, fl.exp2_coeffs, fma)
    n = _b(C.SUB, UOp(C.BITCAST, idt, (t,)), UOp.const(idt, _bits_of(fl, magic)))
    n1 = _b(C.SHR, n, UOp.const(idt, 1))
    n2 = _b(C.SUB, n, n1)

    def pow2(k: UOp) -> UOp:
        return UOp(C.BITCAST, x.dtype, (_b(C.SHL, _b(C.ADD, k, UOp.const(idt, fl.bias)), UOp.const(idt, fl.mant)),))
    return _b(C.MUL, _b(C.MUL, p, pow2(n1)), pow2(n2))


def one_plus_exp2_poly(x: UOp, fma: bool = False) -> UOp:
    """1 + 2**x for an f32/f64 vector x (sigmoid's denominator), cheaper than 1 + exp2_poly(x), the same sum.

    Below 2^-(mant+2) an addend leaves 1 unchanged, so x is clamped at 3 - bias (f32: -124) and the underflow path
    is not needed; 2^n is then one power of two, applied once: the polynomial's coefficients are doubled (exact) and
    times 2^(n-1), whose biased exponent n - 1 + bias is in [1, 2·bias+1] (the top value is inf: x > bias+1 gives
    inf, and a finite 2^x near the overflow limit rounds once, as exp2_poly's first product does)."""
    fl = _FLOATS[x.dtype.scalar]
    n_lanes = x.dtype.count
    idt, bdt = fl.i.vec(n_lanes), dtypes.bool.vec(n_lanes)
    lo, hi = _c(x, float(3 - fl.bias)), _c(x, float(fl.bias + 2))
    xc = UOp(C.WHERE, x.dtype, (UOp(C.CMPLT, bdt, (x, lo)), lo, x))
    xc = UOp(C.WHERE, x.dtype, (UOp(C.CMPLT, bdt, (hi, xc)), hi, xc))
    magic = 1.5 * 2.0 ** fl.mant
    t = _b(C.ADD, xc, _c(x, magic))
    f = _b(C.SUB, xc, _b(C.SUB, t, _c(x, magic)))
    p2 = _horner(f, tuple(2.0 * k for k in fl.exp2_coeffs), fma)
    # n - 1 + bias = bits(t) - bits(magic) + bias - 1: one integer add of a folded constant
    e = _b(C.ADD, UOp(C.BITCAST, idt, (t,)), UOp.const(idt, fl.bias - 1 - _bits_of(fl, magic)))
    scale = UOp(C.BITCAST, x.dtype, (_b(C.SHL, e, UOp.const(idt, fl.mant)),))
    if fma and x.dtype.scalar is dtypes.float32:  # p2 * scale is exact (a power of two, a normal result): the same sum
        return UOp(D.FMA, x.dtype, (p2, scale, _c(x, 1.0)))
    return _b(C.ADD, _c(x, 1.0), _b(C.MUL, p2, scale))


def log2_poly(x: UOp, fma: bool = False) -> UOp:
    """log2(x) for an f32/f64 vector x, in core ops (see the module docstring); fma: the polynomial's steps fused."""
    fl = _FLOATS[x.dtype.scalar]
    n_lanes = x.dtype.count
    idt, bdt = fl.i.vec(n_lanes), dtypes.bool.vec(n_lanes)
    tiny = 2.0 ** (1 - fl.bias)  # the smallest normal
    sub = UOp(C.CMPLT, bdt, (x, _c(x, tiny)))
    xs = UOp(C.WHERE, x.dtype, (sub, _b(C.MUL, x, _c(x, 2.0 ** fl.mant)), x))
    eadj = UOp(C.WHERE, x.dtype, (sub, _c(x, float(-fl.mant)), _c(x, 0.0)))
    rt = UOp.const(idt, _bits_of(fl, float(np.sqrt(np.float64(0.5)))))
    shifted = _b(C.SUB, UOp(C.BITCAST, idt, (xs,)), rt)
    e = _b(C.SHR, shifted, UOp.const(idt, fl.mant))  # arithmetic: the exponent of x relative to √½
    m = UOp(C.BITCAST, x.dtype, (_b(C.ADD, _b(C.AND, shifted, UOp.const(idt, (1 << fl.mant) - 1)), rt),))
    one = _c(x, 1.0)
    s = _b(C.FDIV, _b(C.SUB, m, one), _b(C.ADD, m, one))
    r = _b(C.ADD, _b(C.ADD, e.cast(x.dtype), eadj), _b(C.MUL, s, _horner(_b(C.MUL, s, s), fl.log2_coeffs, fma)))
    inf = _c(x, float("inf"))
    r = UOp(C.WHERE, x.dtype, (UOp(C.CMPEQ, bdt, (x, inf)), inf, r))
    r = UOp(C.WHERE, x.dtype, (UOp(C.CMPEQ, bdt, (x, _c(x, 0.0))), _c(x, float("-inf")), r))
    bad = UOp(C.OR, bdt, (UOp(C.CMPLT, bdt, (x, _c(x, 0.0))), UOp(C.CMPNE, bdt, (x, x))))
    return UOp(C.WHERE, x.dtype, (bad, _c(x, float("nan")), r))


def _exp2(ctx: bool, u: UOp) -> UOp | None:
    return exp2_poly(u.src[0], ctx) if u.dtype.count > 1 and u.dtype.scalar in _FLOATS else None


def _log2(ctx: bool, u: UOp) -> UOp | None:
    return log2_poly(u.src[0], ctx) if u.dtype.count > 1 and u.dtype.scalar in _FLOATS else None


def _is_one(u: UOp) -> bool:
    if u.op is not C.CONST:
        return False
    v = C.const_value(u)
    return all(k == 1.0 for k in (v if type(v) is tuple else (v,)))


def _unneg(y: UOp) -> UOp:
    """-x * c as x * -c (sigmoid's exp(-x)): the same bits, a sign flip commutes with the rounded product."""
    if y.op is C.MUL:
        for n, c in (y.src, y.src[::-1]):
            if n.op is C.NEG and c.op is C.CONST:
                v = C.const_value(c)
                return _b(C.MUL, n.src[0], UOp.const(c.dtype, tuple(-k for k in v) if type(v) is tuple else -v))
    return y


def _one_plus_exp2(ctx: tuple[frozenset[UOp], bool], a: UOp, b: UOp) -> UOp | None:
    shared, fma = ctx  # the exp2s read elsewhere too (e / (1 + e)), which keep one polynomial; fuse its steps?
    for one, e in ((a, b), (b, a)):
        if _is_one(one) and e.op is C.EXP2 and e.dtype.count > 1 and e.dtype.scalar in _FLOATS and e not in shared:
            return one_plus_exp2_poly(_unneg(e.src[0]), fma)
    return None


# runs first, while the exp2 under the add is still there to see
SUM_OF_EXP2 = PatternMatcher([
    (UPat(C.ADD, src=(UPat.var("a"), UPat.var("b"))), _one_plus_exp2, "one-plus-vector-exp2-to-polynomial"),
])

TRANSCENDENTAL = PatternMatcher([
    (UPat(C.EXP2, name="u"), _exp2, "vector-exp2-to-polynomial"),
    (UPat(C.LOG2, name="u"), _log2, "vector-log2-to-polynomial"),
])


@dataclass
class TranscendentalOptions:
    """device-transcendental's options."""
    target: str = field(default="cpu", metadata={"help": "a target name: cpu, gpu or a device (c, llvm, ...)"})
    force: bool = field(default=False, metadata={
        "help": "rewrite even when the target does not ask for it (Target.vector_transcendentals)"})
    fma: str = field(default="auto", metadata={
        "help": "the f32 polynomials' steps as device.fma: auto (where the target has FMA), on or off"})

    def __post_init__(self) -> None:
        if self.fma not in ("auto", "on", "off"):
            raise ValueError(f"fma must be auto, on or off, got {self.fma!r}")
        check_target_option(self.target)


@register_pass("device-transcendental",
               summary="APPROXIMATE vector exp2/log2 by core-op polynomials (targets that ask; within tolerance)",
               consumes=("core", "kernel", "device"), produces=("core", "kernel", "device"),
               options=TranscendentalOptions)
def device_transcendental(root: UOp, options: TranscendentalOptions, ctx: PassContext) -> UOp:
    t = resolve_target(options.target, root, ctx)
    if t is None or not (options.force or t.vector_transcendentals):
        return root
    fma = options.fma == "on" or (options.fma == "auto" and t.contract_multiply_add)

    def run(k: UOp) -> UOp:
        readers: dict[UOp, int] = {}
        for u in k.toposort():
            for s in set(u.src):
                if s.op is C.EXP2:
                    readers[s] = readers.get(s, 0) + 1
        shared = frozenset(e for e, n in readers.items() if n > 1)
        return graph_rewrite(graph_rewrite(k, SUM_OF_EXP2, ctx=(shared, fma), stats=ctx.stats), TRANSCENDENTAL,
                             ctx=fma, stats=ctx.stats)
    return in_kernels(root, run)
