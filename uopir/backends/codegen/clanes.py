"""C expressions for one lane of a core op: exact literals, the ALU and casts, written as uopir's semantics say.

`Exprs` turns an op and its operands' lane expressions into one C expression, calling the prelude helpers where plain
C differs from the semantics (and recording which, so the prelude holds just those): f16 computes in float and is
rounded back, bf16 is rounded after each op, integer division and shifts go through helpers unless the divisor or
amount is a constant that needs none, float -> int casts saturate. `Lanes` is a value as one expression per lane, or
a vector variable (`vec`) whose lanes are `vec[i]`.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from uopir.backends.codegen.cprelude import (
    HELPERS,
    Helper,
    ctype,
    float_helper,
    int_helper,
    vector_type,
)
from uopir.backends.codegen.program import op_error
from uopir.dialects import core as C
from uopir.dialects.semantics import const_array
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["Exprs", "Lanes", "literal", "NATIVE_VECTOR"]


# ---- literals --------------------------------------------------------------------------------------------------------
def literal(d: DType, v: object, use: Callable[[str], None]) -> str:
    """A C literal of scalar dtype d holding the const value v exactly (through the semantics' carrier)."""
    x = const_array(d, v).reshape(-1)[0]
    if d is dtypes.bool:
        return "true" if bool(x) else "false"
    if d is dtypes.float16:
        return f"(half)0x{int(np.asarray(x).view(np.uint16)):04x}"
    if d.is_float:
        f = float(x)
        if math.isnan(f):
            use("math")
            return "NAN"
        if math.isinf(f):
            use("math")
            return "INFINITY" if f > 0 else "(-INFINITY)"
        text = repr(f) + ("" if d is dtypes.float64 else "f")
        return f"({text})" if text.startswith("-") else text
    i = int(x)
    bits = d.itemsize * 8
    if d.kind in ("int", "index"):
        if i == -(1 << (bits - 1)):
            return f"INT{bits}_MIN"
        text = f"{i}ll" if bits == 64 else str(i)
        return f"({text})" if i < 0 else text
    return f"{i}ull" if bits == 64 else f"{i}u"


# ---- ALU and casts on one lane ---------------------------------------------------------------------------------------
_FLOAT_FN = {"core.exp2": "exp2", "core.log2": "log2", "core.sin": "sin", "core.sqrt": "sqrt", "core.trunc": "trunc",
             "core.mod": "fmod"}
_CMP = {"core.cmplt": "<", "core.cmpne": "!=", "core.cmpeq": "=="}
# ops computed on whole vectors (vector_ok dtypes): exactly the scalar op on each lane, rounded once per lane
NATIVE_VECTOR = {"core.add": "{0} + {1}", "core.sub": "{0} - {1}", "core.mul": "{0} * {1}", "core.fdiv": "{0} / {1}",
                  "core.neg": "-{0}", "core.mulacc": "{0} * {1} + {2}"}
_ARITH = {"core.add": "+", "core.sub": "-", "core.mul": "*", "core.fdiv": "/", "core.and": "&", "core.or": "|",
          "core.xor": "^"}


class Lanes:
    """The C expressions of one value, one per lane (a scalar has one); `vec` names the vector variable holding
    them all when the value lives in a native vector type (its lanes are then `vec[i]`). `src` says, per lane,
    which lane of which vector variable the expression reads (None where it is not one), so that lanes gathered
    back in order (`core.gep`, `core.vectorize`) are written as the variable itself, not lane by lane."""

    __slots__ = ("exprs", "vec", "src")

    def __init__(self, exprs: list[str], vec: str | None = None,
                 src: list[tuple[str, int] | None] | None = None):
        self.exprs, self.vec, self.src = exprs, vec, src

    @staticmethod
    def of_vector(name: str, n: int, lane: str = "{v}[{i}]") -> Lanes:
        """The lanes of vector variable `name` (`lane`: how one lane is read, e.g. a mask lane as a bool)."""
        return Lanes([lane.format(v=name, i=i) for i in range(n)], name, [(name, i) for i in range(n)])

    def lane(self, i: int) -> str:
        return self.exprs[i if len(self.exprs) > 1 else 0]

    def lane_src(self, i: int) -> tuple[str, int] | None:
        if self.src is None:
            return None
        return self.src[i if len(self.src) > 1 else 0]

    def whole(self, lanes: range) -> str | None:
        """The vector variable whose lanes 0..n-1 are exactly `lanes` of this value, in order (else None)."""
        first = self.lane_src(lanes[0])
        if first is None or first[1] != 0:
            return None
        for k, i in enumerate(lanes):
            if self.lane_src(i) != (first[0], k):
                return None
        return first[0]


class Exprs:
    """Writes C expressions for one lane of a core op and collects the prelude helpers they call."""

    def __init__(self, shuffles: bool = False) -> None:
        self.helpers: dict[str, Helper] = {}
        self.vec_types: dict[str, str] = {}  # vector variable -> its C vector type
        self.shuffles = shuffles  # GCC/clang vector extensions: lanes of two vectors gather with one shuffle

    def use(self, name: str, helper: Helper | None = None) -> None:
        if name not in self.helpers:
            self.helpers[name] = helper if helper is not None else HELPERS[name]

    def vtype(self, d: DType) -> str:
        name, helper = vector_type(d)
        self.use(name, helper)
        return name

    def pack(self, v: Lanes, d: DType, first: int = 0) -> str:
        """An expression of d's vector type holding v's lanes first.. first+n-1 (a broadcast when v is a scalar);
        lanes that are exactly a vector variable of that type, in order, are that variable."""
        t = self.vtype(d)
        if v.vec is not None and first == 0 and self.vec_types.get(v.vec) == t:
            return v.vec
        lanes = range(first, first + d.count)
        if len(v.exprs) > 1 and (name := v.whole(lanes)) is not None and self.vec_types.get(name) == t:
            return name
        if self.shuffles and len(v.exprs) > 1 and (shuffle := self._shuffle(v, lanes, t)) is not None:
            return shuffle
        return f"({t}){{{', '.join(v.lane(i) for i in lanes)}}}"

    def _shuffle(self, v: Lanes, lanes: range, t: str) -> str | None:
        """Lanes that all read lanes of at most two vector variables of type t, as one `__builtin_shufflevector`
        (GCC 12+ and clang: a stride-2 window's every other lane of two loaded vectors); else None."""
        names: list[str] = []
        idx: list[int] = []
        for i in lanes:
            src = v.lane_src(i)
            if src is None or self.vec_types.get(src[0]) != t:
                return None
            if src[0] not in names:
                if len(names) == 2:
                    return None
                names.append(src[0])
            idx.append(src[1] + names.index(src[0]) * len(lanes))
        a, b = names[0], names[-1]
        return f"__builtin_shufflevector({a}, {b}, {', '.join(map(str, idx))})"

    def ctype(self, d: DType) -> str:
        if d.scalar is dtypes.float16:
            self.use("half")
        elif d.scalar is dtypes.bfloat16:
            self.use("bf16")
        return ctype(d)

    # compute-type conversions: f16 computes in float (bf16 already rides in one)
    def up(self, e: str, d: DType) -> str:
        if d.scalar is dtypes.float16:
            self.use("f16_to_f32")
            return f"f16_to_f32({e})"
        return e

    def down(self, e: str, d: DType) -> str:
        """A float-precision expression rounded to dtype d (f16, bf16); others unchanged."""
        if d.scalar is dtypes.float16:
            self.use("f32_to_f16")
            return f"f32_to_f16({e})"
        if d.scalar is dtypes.bfloat16:
            self.use("bf16_round")
            return f"bf16_round({e})"
        return e

    # one lane of a core op
    def alu(self, u: UOp, args: list[str]) -> str:
        name = u.op.name
        src = u.src[0].dtype.scalar if u.src else u.dtype.scalar
        d = u.dtype.scalar
        if name == "core.where":
            return f"{args[0]} ? {args[1]} : {args[2]}"
        if name in _CMP:
            if src.is_float:
                args = [self.up(a, src) for a in args]
            return f"{args[0]} {_CMP[name]} {args[1]}"
        if d.is_float:
            return self.float_alu(u, name, d, args)
        return self.int_alu(u, name, d, args)

    def float_alu(self, u: UOp, name: str, d: DType, args: list[str]) -> str:
        a = [self.up(x, d) for x in args]
        suf = "" if d is dtypes.float64 else "f"
        if name in ("core.add", "core.sub", "core.mul", "core.fdiv"):
            e = f"{a[0]} {_ARITH[name]} {a[1]}"
        elif name == "core.max":
            hname, helper = float_helper("max", d)
            self.use(hname, helper)
            e = f"{hname}({a[0]}, {a[1]})"
        elif name == "core.neg":
            e = f"-{a[0]}"
        elif name == "core.recip":
            e = f"1.0{suf} / {a[0]}"
        elif name in _FLOAT_FN:
            self.use("math")
            e = f"{_FLOAT_FN[name]}{suf}({', '.join(a)})"
        elif name == "core.mulacc":
            e = f"{self.up(self.down(f'{a[0]} * {a[1]}', d), d)} + {a[2]}"
        else:
            raise op_error(u, f"the C backend cannot compute {name} on {d}")
        return self.down(e, d)

    def int_alu(self, u: UOp, name: str, d: DType, args: list[str]) -> str:
        a = args
        if d is dtypes.bool:
            logic = {"core.add": "|", "core.mul": "&", "core.max": "|", "core.and": "&", "core.or": "|",
                     "core.xor": "^"}
            if name in logic:
                return f"{a[0]} {logic[name]} {a[1]}"
            if name == "core.neg":
                return f"!{a[0]}"
            if name == "core.mulacc":
                return f"({a[0]} & {a[1]}) | {a[2]}"
            raise op_error(u, f"the C backend cannot compute {name} on bool")
        bits = d.itemsize * 8
        if name in _ARITH and name != "core.fdiv":  # wraps: kernels are compiled with -fwrapv
            return f"{a[0]} {_ARITH[name]} {a[1]}"
        if name == "core.neg":
            return f"-{a[0]}"
        if name == "core.mulacc":
            return f"{a[0]} * {a[1]} + {a[2]}"
        if name == "core.max":
            return f"{a[0]} > {a[1]} ? {a[0]} : {a[1]}"
        if name in ("core.idiv", "core.mod"):
            b = u.src[1]
            if b.op is C.CONST and b.dtype.count == 1 and int(b.arg) not in (0, -1):
                return f"{a[0]} {'/' if name == 'core.idiv' else '%'} {a[1]}"
            hname, helper = int_helper("idiv" if name == "core.idiv" else "mod", d)
            self.use(hname, helper)
            return f"{hname}({a[0]}, {a[1]})"
        if name in ("core.shl", "core.shr"):
            b = u.src[1]
            if b.op is C.CONST and b.dtype.count == 1:
                amt = str(int(b.arg) & (bits - 1))
            else:
                amt = f"((uint{bits}_t){a[1]} & {bits - 1}u)"
            if name == "core.shl":
                return f"(uint{bits}_t){a[0]} << {amt}"
            return f"{a[0]} >> {amt}"
        raise op_error(u, f"the C backend cannot compute {name} on {d}")

    def cast(self, s: DType, d: DType, e: str) -> str:
        """One lane e of scalar type s converted to d (the caller reads the types once per op, not per lane)."""
        if s is d:
            return e
        if d is dtypes.bool:
            return f"{self.up(e, s)} != 0"
        if s is dtypes.bool:
            return self.down(f"(float){e}", d) if d in (dtypes.float16, dtypes.bfloat16) else f"({ctype(d)}){e}"
        if d.is_float:
            if s.is_float:
                if d is dtypes.float16 and s is dtypes.float64:
                    self.use("f64_to_f16")
                    return f"f64_to_f16({e})"
                if d is dtypes.bfloat16 and s is dtypes.float64:
                    self.use("bf16_from_f64")
                    return f"bf16_from_f64({e})"
                x = self.up(e, s)
                if d in (dtypes.float16, dtypes.bfloat16):
                    return self.down(x, d)
                return f"({ctype(d)}){x}"
            # int -> float
            if d is dtypes.bfloat16:
                self.use("bf16_from_f64")
                if s.itemsize == 8:
                    self.use("f64_sticky")
                    return f"bf16_from_f64(f64_sticky_{'u' if s.kind == 'uint' else 'i'}64({e}))"
                return f"bf16_from_f64((double){e})"
            if d is dtypes.float16:  # exact in float below 2**24; beyond that f16 overflows to inf either way
                return self.down(f"(float){e}", d)
            return f"({ctype(d)}){e}"
        if s.is_float:  # float -> int: truncate, saturate, NaN -> 0
            hname, helper = int_helper("f2i", d)
            self.use(hname, helper)
            return f"{hname}((double){self.up(e, s)})"
        return f"({ctype(d)}){e}"  # int -> int wraps
