"""The ALU choices the LLVM renderer and the MLIR export share (both write LLVM-style integer and float ops).

The two languages name the same instructions (`icmp slt` / `arith.cmpi slt`, `or` / `arith.ori`), so what uopir's
semantics (uopir.dialects.semantics) fix is decided here once: the predicate of each comparison (floats compare
ordered, except `!=`, which is true for NaN), what each op is on bools (i1: `+` is or, `*` is and, `max` is or), when a
division needs no guard (a constant divisor other than 0 and -1), and a constant shift amount masked to the width.
"""
from __future__ import annotations

from uopir.dialects import core as C
from uopir.ir.uop import UOp

__all__ = ["COMPARE", "BOOL_OP", "unguarded_divisor", "const_shift"]

# core comparison -> (signed int predicate, unsigned int and bool predicate, float predicate)
COMPARE: dict[str, tuple[str, str, str]] = {
    "core.cmplt": ("slt", "ult", "olt"), "core.cmpne": ("ne", "ne", "une"), "core.cmpeq": ("eq", "eq", "oeq")}

# core op on bool (i1) -> the bitwise op that computes it
BOOL_OP: dict[str, str] = {"core.add": "or", "core.mul": "and", "core.max": "or", "core.and": "and", "core.or": "or",
                           "core.xor": "xor"}


def unguarded_divisor(u: UOp) -> bool:
    """u (an integer idiv or mod) divides by a scalar constant other than 0 and -1: the plain instruction is exact.
    Any other divisor is replaced by 1 where it is 0 (or -1, signed) and the result selected (x/0 = x%0 = 0,
    MIN/-1 = MIN, MIN%-1 = 0), since those divisions are undefined in LLVM and MLIR."""
    c = u.src[1]
    return c.op is C.CONST and c.dtype.count == 1 and int(c.arg) not in (0, -1)


def const_shift(u: UOp, bits: int) -> int | None:
    """The shift amount of u (a shl or shr on `bits`-bit ints) masked to the width when it is a scalar constant; None
    when it is computed (the renderer then masks it with an `and`)."""
    b = u.src[1]
    return int(b.arg) & (bits - 1) if b.op is C.CONST and b.dtype.count == 1 else None
