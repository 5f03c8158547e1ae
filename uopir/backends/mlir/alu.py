"""The ALU part of the MLIR export: uopir's core ops and casts as arith/math ops with uopir's exact semantics.

`AluExport` is mixed into the exporter of one function (uopir.backends.mlir.export), which provides `add(op)` (append
an op, return its result), `const(type, value)` (a constant made once at the function top) and `get(uop, lanes)`
(a value, broadcast to lanes). The choices where MLIR's ops differ from uopir.dialects.semantics mirror the LLVM
renderer's (uopir.backends.llvm.renderer): guarded integer division, masked shift amounts, saturating float -> int
casts, one rounding through round-to-odd where a cast narrows twice; docs/mlir.md has the table.
"""
from __future__ import annotations

from xdsl.dialects import arith, vector
from xdsl.dialects import math as mmath
from xdsl.dialects.builtin import IndexType, VectorType, f32, f64, i32, i64
from xdsl.ir import Attribute, SSAValue

from uopir.backends.codegen.program import op_error
from uopir.backends.cpu.alu import BOOL_OP, COMPARE, const_shift, unguarded_divisor
from uopir.backends.mlir import ops as X
from uopir.backends.mlir.types import SCALAR, bit_width, mlir_type, signed, vec, zero_of
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["AluExport"]

_INT_BIN = {"core.add": arith.AddiOp, "core.sub": arith.SubiOp, "core.mul": arith.MuliOp, "core.and": arith.AndIOp,
            "core.or": arith.OrIOp, "core.xor": arith.XOrIOp}
_BITWISE = {"or": arith.OrIOp, "and": arith.AndIOp, "xor": arith.XOrIOp}
_FLOAT_BIN = {"core.add": arith.AddfOp, "core.sub": arith.SubfOp, "core.mul": arith.MulfOp, "core.fdiv": arith.DivfOp,
              "core.max": arith.MaximumfOp}
_FLOAT_UN = {"core.sqrt": mmath.SqrtOp, "core.trunc": mmath.TruncOp, "core.exp2": mmath.Exp2Op,
             "core.log2": mmath.Log2Op, "core.sin": mmath.SinOp}


class AluExport:
    """Casts, bitcasts and the core ALU ops on scalars and vectors alike (a mixin of the function exporter)."""

    def add(self, op) -> SSAValue:  # provided by the exporter
        raise NotImplementedError

    def const(self, t: Attribute, value: object) -> SSAValue:  # provided by the exporter
        raise NotImplementedError

    def get(self, u: UOp, n: int | None = None) -> SSAValue:  # provided by the exporter
        raise NotImplementedError

    def cast(self, x: SSAValue, s: DType, d: DType, n: int) -> SSAValue:
        s, d = s.scalar, d.scalar
        if s is d:
            return x
        dt = vec(SCALAR[d], n)
        if d is dtypes.bool:
            zero = self.const(x.type, zero_of(SCALAR[s]))
            if s.is_float:
                return self.add(X.CmpfOp(x, zero, "une"))
            return self.add(X.CmpiOp(x, zero, "ne"))
        if s is dtypes.bool:
            if d.is_float:
                return self.add(X.UIToFPOp(x, dt))
            if d is dtypes.index:
                return self.add(X.IndexCastOp(self.add(X.ExtUIOp(x, vec(i64, n))), dt))
            return self.add(X.ExtUIOp(x, dt))
        if d.is_float and s.is_float:
            if d is dtypes.bfloat16:
                if s is dtypes.float64:
                    return self.add(arith.TruncFOp(self.f64_to_f32_odd(x, n), dt))
                if s is dtypes.float16:
                    x = self.add(arith.ExtFOp(x, vec(f32, n)))
                return self.add(arith.TruncFOp(x, dt))
            if d is dtypes.float16 and s is dtypes.float64:
                return self.add(arith.TruncFOp(self.f64_to_f32_odd(x, n), dt))
            if s is dtypes.bfloat16 and d is dtypes.float16:  # exact in f32, then rounded once
                return self.add(arith.TruncFOp(self.add(arith.ExtFOp(x, vec(f32, n))), dt))
            if bit_width(s) < bit_width(d):
                return self.add(arith.ExtFOp(x, dt))
            return self.add(arith.TruncFOp(x, dt))
        if d.is_float:  # int -> float, correctly rounded from the exact value
            unsigned = s.kind == "uint"
            if s is dtypes.index:
                x, s = self.add(X.IndexCastOp(x, vec(i64, n))), dtypes.int64
            conv = X.UIToFPOp if unsigned else X.SIToFPOp
            if d is dtypes.bfloat16:
                if bit_width(s) == 64:
                    wide = self.int64_to_f64_sticky(x, n, not unsigned)
                else:
                    wide = self.add(conv(x, vec(f64, n)))
                return self.add(arith.TruncFOp(self.f64_to_f32_odd(wide, n), dt))
            if d is dtypes.float16:  # exact in f32 below 2**24; beyond that f16 overflows to inf either way
                return self.add(arith.TruncFOp(self.add(conv(x, vec(f32, n))), dt))
            return self.add(conv(x, dt))
        if s.is_float:
            return self.float_to_int(x, s, d, n)
        # int -> int wraps
        if s is dtypes.index or d is dtypes.index:
            if s is dtypes.index:
                x64 = self.add(X.IndexCastOp(x, vec(i64, n)))
                return self.cast(x64, dtypes.int64, d, n)
            if bit_width(s) < 64:
                x = self.add((X.ExtUIOp if s.kind == "uint" else X.ExtSIOp)(x, vec(i64, n)))
            return self.add(X.IndexCastOp(x, dt))
        sb, db = bit_width(s), bit_width(d)
        if sb == db:
            return x
        if db < sb:
            return self.add(X.TruncIOp(x, dt))
        return self.add((X.ExtUIOp if s.kind == "uint" else X.ExtSIOp)(x, dt))

    def float_to_int(self, x: SSAValue, s: DType, d: DType, n: int) -> SSAValue:
        """Truncate toward zero and saturate to d's range; NaN -> 0 (fptosi/fptoui alone are poison outside)."""
        if s in (dtypes.float16, dtypes.bfloat16):  # exact in f32
            x, s = self.add(arith.ExtFOp(x, vec(f32, n))), dtypes.float32
        ft = x.type
        target = dtypes.int64 if d is dtypes.index else d
        it = vec(SCALAR[target], n)
        t = self.add(mmath.TruncOp(x))
        lo, hi = float(target.min), float(target.max) + 1.0  # powers of two: exact in every float type
        over = self.add(X.CmpfOp(t, self.const(ft, hi), "oge"))
        under = self.add(X.CmpfOp(t, self.const(ft, lo), "olt"))
        nan = self.add(X.CmpfOp(x, x, "uno"))
        bad = self.add(arith.OrIOp(self.add(arith.OrIOp(over, under)), nan))
        safe = self.add(X.SelectOp(bad, self.const(ft, 0.0), t))
        conv = X.FPToUIOp if target.kind == "uint" else X.FPToSIOp
        r = self.add(conv(safe, it))
        r = self.add(X.SelectOp(over, self.const(it, signed(bit_width(target), int(target.max))), r))
        r = self.add(X.SelectOp(under, self.const(it, signed(bit_width(target), int(target.min))), r))
        if d is dtypes.index:
            r = self.add(X.IndexCastOp(r, vec(IndexType(), n)))
        return r

    def f64_to_f32_odd(self, x: SSAValue, n: int) -> SSAValue:
        """f64 (x n) rounded to f32 with round-to-odd (a later rounding to a narrower type is then exact)."""
        ft, it = vec(f32, n), vec(i32, n)
        r = self.add(arith.TruncFOp(x, ft))
        back = self.add(arith.ExtFOp(r, x.type))
        inexact = self.add(X.CmpfOp(back, x, "one"))
        away = self.add(X.CmpfOp(self.add(mmath.AbsFOp(back)), self.add(mmath.AbsFOp(x)), "ogt"))
        bits = self.add(arith.BitcastOp(r, it))
        one = self.const(it, 1)
        dec = self.add(arith.AndIOp(inexact, away))
        bits = self.add(X.SelectOp(dec, self.add(arith.SubiOp(bits, one)), bits))
        bits = self.add(X.SelectOp(inexact, self.add(arith.OrIOp(bits, one)), bits))
        return self.add(arith.BitcastOp(bits, ft))

    def int64_to_f64_sticky(self, x: SSAValue, n: int, signed: bool) -> SSAValue:
        """A 64-bit int (x n) as an f64 that rounds correctly to any narrower float: exact below 2**53, else with
        the bits shifted out kept as a sticky bit."""
        it, dt = vec(i64, n), vec(f64, n)
        zero = self.const(it, 0)
        m = x
        neg = None
        if signed:
            neg = self.add(X.CmpiOp(x, zero, "slt"))
            m = self.add(X.SelectOp(neg, self.add(arith.SubiOp(zero, x)), x))
        big = self.add(X.CmpiOp(m, self.const(it, 1 << 53), "uge"))
        low = self.add(arith.AndIOp(m, self.const(it, 0x7FF)))
        sticky = self.add(X.ExtUIOp(self.add(X.CmpiOp(low, zero, "ne")), it))
        red = self.add(arith.OrIOp(self.add(arith.ShRUIOp(m, self.const(it, 11))), sticky))
        redf = self.add(arith.MulfOp(self.add(X.UIToFPOp(red, dt)), self.const(dt, 2048.0)))
        mag = self.add(X.SelectOp(big, redf, self.add(X.UIToFPOp(m, dt))))
        if neg is None:
            return mag
        return self.add(X.SelectOp(neg, self.add(arith.NegfOp(mag)), mag))

    def bitcast(self, u: UOp) -> SSAValue:
        """The same bits as another dtype."""
        src = u.operands.x
        s, d = src.dtype, u.dtype
        x = self.get(src)
        if s is d:
            return x
        sb, db = bit_width(s), bit_width(d)
        if dtypes.bool in (s.scalar, d.scalar) or dtypes.index in (s.scalar, d.scalar) or sb * s.count != db * d.count:
            raise op_error(u, f"the MLIR export cannot bitcast {s} to {d}")
        t = mlir_type(d)
        if s.count == 1 and d.count == 1:
            return self.add(arith.BitcastOp(x, t))
        if s.count == 1:
            x = self.add(vector.BroadcastOp(x, VectorType(x.type, [1])))
        if d.count == 1:
            one = self.add(vector.BitcastOp(x, VectorType(t, [1])))
            return self.add(vector.ExtractOp(one, [0], t))
        return self.add(vector.BitcastOp(x, t))

    # ---- the ALU
    def alu(self, u: UOp) -> SSAValue:
        name = u.op.name
        d, n = u.dtype.scalar, u.dtype.count
        if name == "core.where":
            ops = u.operands
            c = self.get(ops.cond)
            a, b = self.get(ops.a, n), self.get(ops.b, n)
            return self.add(X.SelectOp(c, a, b))
        src = u.src[0].dtype.scalar
        args = [self.get(s, n) for s in u.src]
        if name in COMPARE:
            signed_p, unsigned_p, float_p = COMPARE[name]
            if src.is_float:
                return self.add(X.CmpfOp(args[0], args[1], float_p))
            pred = unsigned_p if src.kind == "uint" or src is dtypes.bool else signed_p
            return self.add(X.CmpiOp(args[0], args[1], pred))
        t = mlir_type(u.dtype)
        if d is dtypes.bool:
            if name in BOOL_OP:
                return self.add(_BITWISE[BOOL_OP[name]](args[0], args[1]))
            if name == "core.neg":
                return self.add(arith.XOrIOp(args[0], self.const(t, True)))
            if name == "core.mulacc":
                return self.add(arith.OrIOp(self.add(arith.AndIOp(args[0], args[1])), args[2]))
            raise op_error(u, f"the MLIR export cannot compute {name} on bool")
        if d.is_float:
            if name in _FLOAT_BIN:
                return self.add(_FLOAT_BIN[name](args[0], args[1]))
            if name == "core.mod":
                return self.add(X.RemFOp(args[0], args[1]))
            if name == "core.neg":
                return self.add(arith.NegfOp(args[0]))
            if name == "core.recip":
                return self.add(arith.DivfOp(self.const(t, 1.0), args[0]))
            if name in _FLOAT_UN:
                return self.add(_FLOAT_UN[name](args[0]))
            if name == "core.mulacc":  # not fused: the product is rounded, then the sum
                return self.add(arith.AddfOp(self.add(arith.MulfOp(args[0], args[1])), args[2]))
            raise op_error(u, f"the MLIR export cannot compute {name} on {d}")
        bits = bit_width(d)
        unsigned = d.kind == "uint"
        if name in _INT_BIN:  # wraps: no overflow flags
            return self.add(_INT_BIN[name](args[0], args[1]))
        if name == "core.neg":
            return self.add(arith.SubiOp(self.const(t, 0), args[0]))
        if name == "core.mulacc":
            return self.add(arith.AddiOp(self.add(arith.MuliOp(args[0], args[1])), args[2]))
        if name == "core.max":
            return self.add((arith.MaxUIOp if unsigned else arith.MaxSIOp)(args[0], args[1]))
        if name in ("core.idiv", "core.mod"):
            return self.divmod(u, name == "core.idiv", t, unsigned, args)
        if name in ("core.shl", "core.shr"):
            k = const_shift(u, bits)
            if k is not None:
                amt = self.const(t, k)
            else:
                amt = self.add(arith.AndIOp(args[1], self.const(t, bits - 1)))
            kind = arith.ShLIOp if name == "core.shl" else arith.ShRUIOp if unsigned else arith.ShRSIOp
            return self.add(kind(args[0], amt))
        raise op_error(u, f"the MLIR export cannot compute {name} on {d}")

    def divmod(self, u: UOp, div: bool, t: Attribute, unsigned: bool, args: list[SSAValue]) -> SSAValue:
        """Integer division / remainder with the semantics' total rules: x/0 = x%0 = 0, MIN/-1 = MIN, MIN%-1 = 0."""
        a, b = args
        op = (arith.DivUIOp if div else arith.RemUIOp) if unsigned else (arith.DivSIOp if div else arith.RemSIOp)
        if unguarded_divisor(u):
            return self.add(op(a, b))
        zero_c = self.const(t, 0)
        zero = self.add(X.CmpiOp(b, zero_c, "eq"))
        special = zero
        minus1 = None
        if not unsigned:
            minus1 = self.add(X.CmpiOp(b, self.const(t, -1), "eq"))
            special = self.add(arith.OrIOp(zero, minus1))
        safe = self.add(X.SelectOp(special, self.const(t, 1), b))
        r = self.add(op(a, safe))
        if not div:
            return self.add(X.SelectOp(special, zero_c, r))
        r = self.add(X.SelectOp(zero, zero_c, r))
        if minus1 is None:
            return r
        return self.add(X.SelectOp(minus1, self.add(arith.SubiOp(zero_c, a)), r))
