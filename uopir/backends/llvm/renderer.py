"""The LLVM renderer: one linearized `device.program` -> one LLVM IR function (a module of text).

The walk is the C renderer's (uopir.backends.codegen.program: execution order, escaping values, signature); what differs
is the language. Every value is an SSA register of its LLVM type (`<16 x float>` for a vector: every core op and
cast is written once, for scalars and vectors alike); what changes over time lives in an `alloca` of the entry
block, read where it is used and written where the program writes it, which the optimizer's mem2reg turns into
registers: loop counters, accumulators (`device.acc`; reading it or an accstore's result reads its current value),
values used after the block that computes them has closed, `kernel.register` arrays (zeroed by `llvm.memset`:
an aggregate `zeroinitializer` store makes LLVM's passes quadratic in the array's length) and `kernel.local` ones
(never zeroed; over STACK_SCRATCH bytes 64-byte aligned heap memory, freed at return). Loops and ifs are basic
blocks.

Exact semantics (uopir.dialects.semantics), with no fast-math flag anywhere: every float op of a kernel is the IEEE op
of its dtype, and each of the flags (nnan, ninf, nsz, arcp, contract, afn, reassoc) would change a result the
semantics fixes (NaN and inf inputs, -0.0, sequential reductions, unfused mulacc). The choices LLVM leaves open:

- integer add/sub/mul/neg/shl wrap (no nsw/nuw); `sdiv`/`srem` by 0 or MIN/-1 are undefined, so the divisor is
  replaced by 1 there and the result selected (x/0 = x%0 = 0, MIN/-1 = MIN, MIN%-1 = 0); shift amounts are masked
  to the width; `max` is `llvm.smax`/`umax` on ints and `llvm.maximum` on floats (NaN wins, +0.0 above -0.0),
  on an AVX-512DQ host `vrangeps` and a masked add for float vectors of up to one register (3 instructions);
- float -> int casts are `llvm.fptosi.sat`/`fptoui.sat` (truncate, saturate, NaN -> 0; from f16 through float:
  LLVM 22's AVX512-FP16 lowering of f16 -> i16 sends NaN to MIN); to bool `!= 0` (`une`);
- f16 is LLVM's `half` (each op rounded to half; LLVM computes it in float where the cpu has no half arithmetic,
  which is correctly rounded); bf16 is carried in a `float` (its numpy carrier) and rounded to nearest even after
  every op, by integer code (never the cpu's bf16 instructions: they flush subnormals); a bf16 buffer is rounded
  when read. f64 -> f16/bf16 and 64-bit int -> bf16 round once: through a round-to-odd float, from 64-bit ints
  through a sticky double (as the semantics and the C prelude do);
- bool is `i1` in registers and a byte in memory (`!= 0` when read);
- gated loads are branch free: a scalar reads element 0 where the gate is off (the runtime gives an empty buffer a
  scratch element) and selects, a vector is an `llvm.masked.load`; gated stores branch;
- on an AVX-512 host an ungated vector load of a row of 7 or 14 lanes (a depthwise conv's taps) is one masked load of
  the next power of two (one instruction, touching nothing past the row, where a plain <14 x float> load is 8 + 4 +
  2 pieces: MASKED_MIN_PIECES), except a load whose lanes are read one at a time (_lanes_read_apart).

A global id (`device.special {kind = global_id}`) is a loop over the rest of the program; the first is split across
cores (the function takes `core_id, core_count`; uopir.backends.cpu.runtime calls it once per core). Buffer pointers
are `noalias` (the runtime runs a variant rendered with `noalias=False` when two buffers overlap). The function
carries the host's `target-cpu`/`target-features` and, on AVX-512, `"prefer-vector-width"="512"`. Names from the IR
reach the text only through uopir.backends.codegen.names: the function's name is the program's through `llvm_ident`,
and the header comment names the program and its variables through `llvm_comment`.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from uopir.backends.codegen.names import llvm_comment, llvm_ident
from uopir.backends.codegen.program import (
    STACK_SCRATCH,
    KernelSignature,
    check_const,
    check_offset,
    check_special,
    op_error,
)
from uopir.backends.codegen.program import kernel_signature as _signature
from uopir.backends.codegen.walk import CPU_REFUSES, NO_VALUE_ROWS, Row, Writer, rows, walk
from uopir.backends.cpu.alu import BOOL_OP, COMPARE, const_shift, unguarded_divisor
from uopir.backends.interface import Renderer
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import const_array, np_dtype
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["LLVMRenderer", "LLVM_ROWS", "kernel_signature"]


def kernel_signature(program: UOp) -> KernelSignature:
    """How the function of `program` is called; its name is the program's through llvm_ident (a C identifier too,
    for ctypes and the object file's symbol table)."""
    return _signature(program, llvm_ident, "LLVM")


# ---- types and literals ----------------------------------------------------------------------------------------------
_SCALAR: dict[DType, str] = {
    dtypes.bool: "i1", dtypes.int8: "i8", dtypes.int16: "i16", dtypes.int32: "i32", dtypes.int64: "i64",
    dtypes.uint8: "i8", dtypes.uint16: "i16", dtypes.uint32: "i32", dtypes.uint64: "i64", dtypes.index: "i64",
    dtypes.float16: "half", dtypes.bfloat16: "float", dtypes.float32: "float", dtypes.float64: "double",
}
_MANGLE = {"half": "f16", "float": "f32", "double": "f64"}
_MEM_BYTES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "float": 4, "double": 8}


def scalar_type(d: DType) -> str:
    """The LLVM type of a scalar dtype in registers (bf16 in its float carrier, bool as i1)."""
    return _SCALAR[d.scalar]


def mem_type(d: DType) -> str:
    """The LLVM type of a scalar dtype in memory (bool is a byte)."""
    return "i8" if d.scalar is dtypes.bool else _SCALAR[d.scalar]


def vec(t: str, n: int) -> str:
    return t if n == 1 else f"<{n} x {t}>"


def mangle(t: str, n: int) -> str:
    """The overload suffix of an intrinsic for type t (x n lanes): f32, v16f32, i64, v4i8."""
    s = _MANGLE.get(t, t)
    return s if n == 1 else f"v{n}{s}"


def _signed(bits: int, v: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) and bits > 1 else v


def scalar_lit(t: str, v: object) -> str:
    """A literal of LLVM scalar type t: floats by their exact bits, ints as signed decimals."""
    if t == "i1":
        return "true" if v else "false"
    if t == "half":
        return f"0xH{int(np.asarray(v, np.float16).view(np.uint16)):04X}"
    if t in ("float", "double"):
        return f"0x{struct.unpack('<Q', struct.pack('<d', float(v)))[0]:016X}"  # a float's value is exact in double
    return str(_signed(int(t[1:]), int(v)))  # type: ignore[call-overload]


def splat(t: str, n: int, v: object) -> str:
    """A literal of t x n lanes, every lane v."""
    s = scalar_lit(t, v)
    return s if n == 1 else "<" + ", ".join(f"{t} {s}" for _ in range(n)) + ">"


def const_lit(d: DType, value: object) -> str:
    """The literal of a const op's value (a vector const: one value or a tuple of lanes) through the semantics'
    carrier, so it is exactly the value the interpreter computes with."""
    t, n = scalar_type(d), d.count
    lanes = value if n > 1 and type(value) is tuple else (value,) * n
    vals = [const_array(d.scalar, v).reshape(-1)[0] for v in lanes]
    if n == 1:
        return scalar_lit(t, vals[0])
    return "<" + ", ".join(f"{t} {scalar_lit(t, v)}" for v in vals) + ">"


# ---- values ----------------------------------------------------------------------------------------------------------
class _Val:
    """An SSA value (a register or a literal) of LLVM type `ty` (scalar type `t`, `n` lanes)."""

    __slots__ = ("ref", "t", "n")

    def __init__(self, ref: str, t: str, n: int):
        self.ref, self.t, self.n = ref, t, n

    @property
    def ty(self) -> str:
        return vec(self.t, self.n)


class _Slot:
    """A variable in an alloca (accumulator, escaping value): read with a load where it is used."""

    __slots__ = ("addr", "t", "n")

    def __init__(self, addr: str, t: str, n: int):
        self.addr, self.t, self.n = addr, t, n


class _Ptr:
    """A pointer value: the base pointer, an i64 element offset (a ref) and an optional i1 gate (a ref)."""

    __slots__ = ("base", "off", "gate", "dtype")

    def __init__(self, base: str, off: str, gate: str | None, dtype: DType):
        self.base, self.off, self.gate, self.dtype = base, off, gate, dtype


class _Fn:
    """One function being written: its entry allocas, body lines, intrinsic declarations and fresh names."""

    def __init__(self) -> None:
        self.allocas: list[str] = []
        self.lines: list[str] = []
        self.declares: dict[str, str] = {}
        self.n = 0
        self.blocks = 0

    def fresh(self, prefix: str = "v") -> str:
        self.n += 1
        return f"%{prefix}{self.n}"

    def label(self, kind: str) -> str:
        self.blocks += 1
        return f"{kind}{self.blocks}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def block(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def ins(self, text: str, prefix: str = "v") -> str:
        """Emit `%new = text`; return %new."""
        r = self.fresh(prefix)
        self.emit(f"{r} = {text}")
        return r

    def intrinsic(self, name: str, ret: str, args: list[str]) -> str:
        self.declares.setdefault(name, f"declare {ret} @{name}({', '.join(args)})")
        return name

    def call(self, name: str, ret: str, args: list[tuple[str, str]]) -> str:
        self.intrinsic(name, ret, [t for t, _ in args])
        return self.ins(f"call {ret} @{name}({', '.join(f'{t} {r}' for t, r in args)})")


# ---- exact arithmetic, for scalars and vectors alike ---------------------------------------------------------------
class _Math:
    """Instruction sequences for one op on values of type t x n (the semantics' exact choices)."""

    def __init__(self, fn: _Fn):
        self.f = fn

    def bf16_round(self, x: str, n: int) -> str:
        """A float (x n) rounded to nearest even bf16 (NaN stays a quiet NaN), by integer code."""
        f, ft, it = self.f, vec("float", n), vec("i32", n)
        c16, c1, c7fff = splat("i32", n, 16), splat("i32", n, 1), splat("i32", n, 0x7FFF)
        hi, quiet = splat("i32", n, 0xFFFF0000), splat("i32", n, 0x00400000)
        b = f.ins(f"bitcast {ft} {x} to {it}")
        odd = f.ins(f"and {it} {f.ins(f'lshr {it} {b}, {c16}')}, {c1}")
        r = f.ins(f"add {it} {f.ins(f'add {it} {b}, {c7fff}')}, {odd}")
        r = f.ins(f"and {it} {r}, {hi}")
        q = f.ins(f"or {it} {f.ins(f'and {it} {b}, {hi}')}, {quiet}")
        nan = f.ins(f"fcmp uno {ft} {x}, {x}")
        sel = f.ins(f"select {vec('i1', n)} {nan}, {it} {q}, {it} {r}")
        return f.ins(f"bitcast {it} {sel} to {ft}")

    def f64_to_f32_odd(self, x: str, n: int) -> str:
        """A double (x n) rounded to float with round-to-odd (a later rounding to a narrower type is then exact)."""
        f, dt, ft, it, bt = self.f, vec("double", n), vec("float", n), vec("i32", n), vec("i1", n)
        r = f.ins(f"fptrunc {dt} {x} to {ft}")
        back = f.ins(f"fpext {ft} {r} to {dt}")
        inexact = f.ins(f"fcmp one {dt} {back}, {x}")
        fabs = f"llvm.fabs.{mangle('double', n)}"
        away = f.ins(f"fcmp ogt {dt} {f.call(fabs, dt, [(dt, back)])}, {f.call(fabs, dt, [(dt, x)])}")
        bits = f.ins(f"bitcast {ft} {r} to {it}")
        dec = f.ins(f"and {bt} {inexact}, {away}")
        one = splat("i32", n, 1)
        bits = f.ins(f"select {bt} {dec}, {it} {f.ins(f'sub {it} {bits}, {one}')}, {it} {bits}")
        bits = f.ins(f"select {bt} {inexact}, {it} {f.ins(f'or {it} {bits}, {one}')}, {it} {bits}")
        return f.ins(f"bitcast {it} {bits} to {ft}")

    def int64_to_f64_sticky(self, x: str, n: int, signed: bool) -> str:
        """A 64-bit int (x n) as a double that rounds correctly to any narrower float: exact below 2**53, else the
        bits shifted out kept as a sticky bit."""
        f, it, dt, bt = self.f, vec("i64", n), vec("double", n), vec("i1", n)
        m, zero = x, splat("i64", n, 0)
        if signed:
            neg = f.ins(f"icmp slt {it} {x}, {zero}")
            m = f.ins(f"select {bt} {neg}, {it} {f.ins(f'sub {it} {zero}, {x}')}, {it} {x}")
        big = f.ins(f"icmp uge {it} {m}, {splat('i64', n, 1 << 53)}")
        low = f.ins(f"and {it} {m}, {splat('i64', n, 0x7FF)}")
        sticky = f.ins(f"zext {bt} {f.ins(f'icmp ne {it} {low}, {zero}')} to {it}")
        eleven, scale = splat("i64", n, 11), splat("double", n, 2048.0)
        red = f.ins(f"or {it} {f.ins(f'lshr {it} {m}, {eleven}')}, {sticky}")
        redf = f.ins(f"fmul {dt} {f.ins(f'uitofp {it} {red} to {dt}')}, {scale}")
        mag = f.ins(f"select {bt} {big}, {dt} {redf}, {dt} {f.ins(f'uitofp {it} {m} to {dt}')}")
        if not signed:
            return mag
        return f.ins(f"select {bt} {neg}, {dt} {f.ins(f'fneg {dt} {mag}')}, {dt} {mag}")

    def round_to(self, x: str, d: DType, n: int) -> str:
        """A float-typed result rounded to bf16 when d is bf16 (other dtypes are rounded by their type)."""
        return self.bf16_round(x, n) if d.scalar is dtypes.bfloat16 else x

    def cast(self, x: str, s: DType, d: DType, n: int) -> str:
        f = self.f
        s, d = s.scalar, d.scalar
        st, dt = vec(scalar_type(s), n), vec(scalar_type(d), n)
        if s is d:
            return x
        if d is dtypes.bool:
            if s.is_float:
                return f.ins(f"fcmp une {st} {x}, {splat(scalar_type(s), n, 0.0)}")
            return f.ins(f"icmp ne {st} {x}, {splat(scalar_type(s), n, 0)}")
        if s is dtypes.bool:
            if d.is_float:
                return f.ins(f"uitofp {st} {x} to {dt}")
            return f.ins(f"zext {st} {x} to {dt}")
        if d.is_float and s.is_float:
            if d is dtypes.bfloat16:
                if s is dtypes.float64:
                    return self.bf16_round(self.f64_to_f32_odd(x, n), n)
                return self.bf16_round(x if s is not dtypes.float16 else f.ins(f"fpext {st} {x} to {dt}"), n)
            if d is dtypes.float16 and s is dtypes.float64:
                return f.ins(f"fptrunc {vec('float', n)} {self.f64_to_f32_odd(x, n)} to {dt}")
            if st == dt:  # bf16 -> f32: the carrier is the value
                return x
            width = {"half": 16, "float": 32, "double": 64}
            conv = "fpext" if width[scalar_type(s)] < width[scalar_type(d)] else "fptrunc"
            return f.ins(f"{conv} {st} {x} to {dt}")
        if d.is_float:  # int -> float, correctly rounded from the exact value
            conv = "uitofp" if s.kind == "uint" else "sitofp"
            if d is dtypes.bfloat16:
                if s.itemsize == 8:
                    wide = self.int64_to_f64_sticky(x, n, s.kind != "uint")
                else:
                    wide = f.ins(f"{conv} {st} {x} to {vec('double', n)}")
                return self.bf16_round(self.f64_to_f32_odd(wide, n), n)
            if d is dtypes.float16:  # exact in float below 2**24; beyond that f16 overflows to inf either way
                ft = vec("float", n)
                return f.ins(f"fptrunc {ft} {f.ins(f'{conv} {st} {x} to {ft}')} to {dt}")
            return f.ins(f"{conv} {st} {x} to {dt}")
        if s.is_float:  # float -> int: truncate, saturate, NaN -> 0
            if s is dtypes.float16:  # exact in float; LLVM's x86 AVX512-FP16 lowering of f16 -> i16 sends NaN to MIN
                x, s, st = f.ins(f"fpext {st} {x} to {vec('float', n)}"), dtypes.float32, vec("float", n)
            sat = "fptoui" if d.kind == "uint" else "fptosi"
            name = f"llvm.{sat}.sat.{mangle(scalar_type(d), n)}.{mangle(scalar_type(s), n)}"
            return f.call(name, dt, [(st, x)])
        sb, db = s.itemsize * 8, d.itemsize * 8  # int -> int wraps
        if sb == db:
            return x
        if db < sb:
            return f.ins(f"trunc {st} {x} to {dt}")
        return f.ins(f"{'zext' if s.kind == 'uint' else 'sext'} {st} {x} to {dt}")


_FLOAT_BIN = {"core.add": "fadd", "core.sub": "fsub", "core.mul": "fmul", "core.fdiv": "fdiv", "core.mod": "frem"}
_INT_BIN = {"core.add": "add", "core.sub": "sub", "core.mul": "mul", "core.and": "and", "core.or": "or",
            "core.xor": "xor"}
_FLOAT_UN = {"core.sqrt": "sqrt", "core.trunc": "trunc", "core.exp2": "exp2", "core.log2": "log2", "core.sin": "sin"}
_EXACT_IN_BF16 = frozenset(("core.max", "core.neg", "core.trunc", "core.mod", "core.where"))  # no rounding needed


# an ungated vector load that LLVM would cut into at least this many power-of-two pieces (a row of 7: 4 + 2 + 1; of
# 14: 8 + 4 + 2) is one masked load on an AVX-512 host: a depthwise conv's taps (1152 x 7x7 5x5: 143 -> 103 us, 672 x
# 14x14 5x5: 166 -> 142 us, one core). Not fewer pieces, nor stores (the gain is in the 25 loads per row; SqueezeNet's
# 3-column conv tiles stored by masked 4-lane stores took 74 -> 95 us in one A/B at load 10)
MASKED_MIN_PIECES = 3


def _lanes(idx: Any) -> str:
    return ", ".join(f"i32 {i}" for i in idx)


def _head_mask(n: int, m: int) -> str:
    """The constant mask <m x i1> of the first n lanes."""
    return "<" + ", ".join("i1 true" if i < n else "i1 false" for i in range(m)) + ">"


def _lanes_read_apart(program: UOp) -> set[UOp]:
    """The values whose lanes the program reads one at a time (a core.gep of them, or of their cast, that takes one
    lane or repeats lanes): such a load stays plain, since LLVM reads each lane of a plain load as a broadcast from
    memory but must load a masked one whole and shuffle every lane out of it (a dense conv's 14-column input row,
    each column broadcast against a channel vector: 256 x 14x14 3x3 1.0 -> 1.8 ms, one core). A gep of distinct
    lanes is one shuffle of either load: a strided depthwise conv's tap (every other lane of a row of 13) reads one
    masked load, where the plain load is 8 + 4 + 1 pieces joined by shuffles."""
    apart: set[UOp] = set()
    for g in program.toposort():
        if g.op is C.GEP and (len(g.attrs.idx) == 1 or len(set(g.attrs.idx)) < len(g.attrs.idx)):
            x = g.operands.x
            while x.op in (C.CAST, C.BITCAST):
                x = x.operands.x
            apart.add(x)
    return apart


class LLVMRenderer(Renderer):
    """device.program -> LLVM IR text (a module with one function). `noalias=False` renders the variant for buffers
    that overlap; `cpu`/`features` become the function's target attributes (the host's, from the compiler), and
    `wide_vectors` adds `"prefer-vector-width"="512"` (AVX-512 hosts)."""

    language = "llvm"

    def __init__(self, noalias: bool = True, cpu: str | None = None, features: str | None = None,
                 wide_vectors: bool = False):
        self.noalias, self.cpu, self.features, self.wide_vectors = noalias, cpu, features, wide_vectors

    def render(self, program: UOp) -> str:
        sig = kernel_signature(program)
        w = _Walk(self, sig)
        w.lanes_apart = _lanes_read_apart(program)
        walk(program, LLVM_ROWS, w)
        while w.ids:  # the loops of global ids span the rest of the program
            w.close_loop(w.ids.pop())
        for addr in w.frees:
            w.f.emit(f"call void @free(ptr {addr})")
        w.f.emit("ret void")
        args = []
        for i, d in enumerate(sig.params):
            args.append(f"ptr %unused{i}" if d is None else f"ptr {'noalias ' if self.noalias else ''}%data{i}")
        args.extend(f"i64 %var{i}" for i in range(len(sig.vars)))
        if sig.parallel:
            args.extend(("i64 %core_id", "i64 %core_count"))
        attrs = ["nounwind"]
        if self.cpu:
            attrs.append(f'"target-cpu"="{self.cpu}"')
        if self.features:
            attrs.append(f'"target-features"="{self.features}"')
        if self.wide_vectors:
            attrs.append('"prefer-vector-width"="512"')
        head = [f"; kernel {llvm_comment(program.arg)}: {len(sig.params)} buffers, "
                f"vars ({', '.join(llvm_comment(v) for v in sig.vars)})"
                f"{', split across cores' if sig.parallel else ''}"]
        head += sorted(w.f.declares.values())
        body = ["entry:", *("  " + a for a in w.f.allocas), *w.f.lines]
        return "\n".join([*head, "", f"define void @{sig.name}({', '.join(args)}) #0 {{", *body, "}", "",
                          f"attributes #0 = {{ {' '.join(attrs)} }}", ""])


class _Walk(Writer):
    """The state of one rendering: values, open blocks ((opener, loop labels / if's end)), ids."""

    who = "the LLVM backend"
    pointer = _Ptr

    def __init__(self, r: LLVMRenderer, sig: KernelSignature):
        super().__init__()
        self.r, self.sig = r, sig
        self.f = _Fn()
        self.m = _Math(self.f)
        self.ids: list[tuple[str, str, str, str]] = []
        self.id_dims: set[int] = set()
        self.frees: list[str] = []  # heap scratch buffers, freed before returning
        self.lanes_apart: set[UOp] = set()  # loads that stay plain (_lanes_read_apart)

    # ---- values
    def get(self, u: UOp, n: int | None = None) -> _Val:
        """u's value (loaded when it lives in a slot), broadcast to n lanes when u is a scalar and n > 1."""
        v = self.value(u)
        if isinstance(v, _Slot):
            v = _Val(self.f.ins(f"load {vec(v.t, v.n)}, ptr {v.addr}"), v.t, v.n)
        if n is not None and n > 1 and v.n == 1:
            f = self.f
            one = f.ins(f"insertelement <1 x {v.t}> poison, {v.t} {v.ref}, i64 0")
            return _Val(f.ins(f"shufflevector <1 x {v.t}> {one}, <1 x {v.t}> poison, <{n} x i32> zeroinitializer"),
                        v.t, n)
        return v

    def alloca(self, t: str, init: str | None, prefix: str = "slot") -> str:
        """A variable of type t in the entry block (set to `init` there unless None)."""
        addr = self.f.fresh(prefix)
        self.f.allocas.append(f"{addr} = alloca {t}")
        if init is not None:
            self.f.allocas.append(f"store {t} {init}, ptr {addr}")
        return addr

    def array(self, mt: str, size: int) -> str:
        """A zeroed array of `size` elements of memory type mt in the entry block. Zeroed by `llvm.memset`, never by
        storing an aggregate `zeroinitializer`: LLVM splits an aggregate store into one store per element and its
        passes then take time quadratic in the array's length (a 64x64 f32 packed panel took seconds at O3, 128x128
        minutes)."""
        addr = self.f.fresh("reg")
        nbytes = size * _MEM_BYTES[mt]
        memset = self.f.intrinsic("llvm.memset.p0.i64", "void", ["ptr", "i8", "i64", "i1"])
        self.f.allocas.append(f"{addr} = alloca [{size} x {mt}], align 64")
        self.f.allocas.append(f"call void @{memset}(ptr align 64 {addr}, i8 0, i64 {nbytes}, i1 false)")
        return addr

    def define(self, u: UOp, ref: str, escapes: bool) -> None:
        """u's value is `ref`; kept in a slot when it is read after its block has closed."""
        t, n = scalar_type(u.dtype), u.dtype.count
        if escapes:
            addr = self.alloca(vec(t, n), "zeroinitializer")
            self.f.emit(f"store {vec(t, n)} {ref}, ptr {addr}")
            self.vals[u] = _Slot(addr, t, n)
        else:
            self.vals[u] = _Val(ref, t, n)

    def ptr(self, u: UOp) -> _Ptr:
        p = self.vals.get(u)
        if not isinstance(p, _Ptr):
            raise op_error(u, f"expected a pointer, got {u.op.name} : {u.dtype}")
        return p

    # ---- blocks
    def open_loop(self, start: str, end: str) -> tuple[str, str, str, str]:
        f = self.f
        addr = self.alloca("i64", None, "ridx")
        head, body, done = f.label("loop"), f.label("body"), f.label("done")
        f.emit(f"store i64 {start}, ptr {addr}")
        f.emit(f"br label %{head}")
        f.block(head)
        i = f.ins(f"load i64, ptr {addr}", "i")
        f.emit(f"br i1 {f.ins(f'icmp slt i64 {i}, {end}')}, label %{body}, label %{done}")
        f.block(body)
        return addr, i, head, done

    def close_loop(self, loop: tuple[str, str, str, str]) -> None:
        addr, i, head, done = loop
        f = self.f
        f.emit(f"store i64 {f.ins(f'add i64 {i}, 1')}, ptr {addr}")
        f.emit(f"br label %{head}")
        f.block(done)

    # ---- the rows (LLVM_ROWS)
    def const(self, u: UOp, escapes: bool) -> None:
        check_const(u)
        if u.dtype.scalar not in _SCALAR:
            raise op_error(u, f"the LLVM backend has no type for {u.dtype}")
        self.vals[u] = _Val(const_lit(u.dtype, u.arg), scalar_type(u.dtype), u.dtype.count)

    def param(self, u: UOp, escapes: bool) -> None:
        self.vals[u] = _Ptr(f"%data{u.arg}", "0", None, u.dtype)

    def var(self, u: UOp, escapes: bool) -> None:
        ref = f"%var{self.sig.vars.index(u.attrs.name)}"
        t = scalar_type(u.dtype)
        self.vals[u] = _Val(ref if t == "i64" else self.f.ins(f"trunc i64 {ref} to {t}"), t, 1)

    def register(self, u: UOp, escapes: bool) -> None:
        size, mt = max(u.dtype.size, 1), mem_type(u.dtype.base)
        self.vals[u] = _Ptr(self.array(mt, size), "0", None, u.dtype)

    def local(self, u: UOp, escapes: bool) -> None:
        """Never zeroed (kernel.local holds no value until the kernel stores one): a stack array up to STACK_SCRATCH
        bytes; a larger one (kernel-optimize's packed panels) is 64-byte aligned heap memory per call, freed before
        returning (nothing kept past a launch)."""
        f = self.f
        if u.dtype.size * u.dtype.base.itemsize <= STACK_SCRATCH:
            addr = f.fresh("reg")
            f.allocas.append(f"{addr} = alloca [{max(u.dtype.size, 1)} x {mem_type(u.dtype.base)}], align 64")
            self.vals[u] = _Ptr(addr, "0", None, u.dtype)
            return
        f.intrinsic("aligned_alloc", "ptr", ["i64", "i64"])
        f.intrinsic("free", "void", ["ptr"])
        addr = f.fresh("reg")
        nbytes = u.dtype.size * u.dtype.base.itemsize
        f.allocas.append(f"{addr} = call ptr @aligned_alloc(i64 64, i64 {-(-nbytes // 64) * 64})")
        self.frees.append(addr)
        self.vals[u] = _Ptr(addr, "0", None, u.dtype)

    def index_op(self, u: UOp, escapes: bool) -> None:
        f, ops = self.f, u.operands
        p = self.ptr(ops.ptr)
        off = self.index(ops.offset)
        if p.off != "0":
            off = f.ins(f"add i64 {p.off}, {off}")
        gate = p.gate
        if (own := ops.gate) is not None:
            g = self.get(own).ref
            gate = g if gate is None else f.ins(f"and i1 {gate}, {g}")
        self.vals[u] = _Ptr(p.base, off, gate, u.dtype)

    def gep(self, u: UOp, escapes: bool) -> None:
        f = self.f
        v = self.get(u.operands.x)
        lanes = tuple(u.attrs.idx)
        if v.n == 1:  # lane 0 of a scalar, once or repeated (a broadcast)
            self.define(u, v.ref if len(lanes) == 1 else self.get(u.operands.x, len(lanes)).ref, escapes)
        elif len(lanes) == 1:
            self.define(u, f.ins(f"extractelement {v.ty} {v.ref}, i64 {lanes[0]}"), escapes)
        else:
            mask = ", ".join(f"i32 {i}" for i in lanes)
            self.define(u, f.ins(f"shufflevector {v.ty} {v.ref}, {v.ty} poison, <{len(lanes)} x i32> <{mask}>"),
                        escapes)

    def vectorize(self, u: UOp, escapes: bool) -> None:
        t, n = scalar_type(u.dtype), u.dtype.count
        ref = "poison"
        for i, s in enumerate(u.src):
            ref = self.f.ins(f"insertelement {vec(t, n)} {ref}, {t} {self.get(s).ref}, i64 {i}")
        self.define(u, ref, escapes)

    def loop(self, u: UOp, escapes: bool) -> None:
        loop = self.open_loop("0", self.index(u.operands.end))
        self.open(u, loop)
        self.vals[u] = _Val(loop[1], "i64", 1)

    def if_(self, u: UOp, escapes: bool) -> None:
        f = self.f
        then, end = f.label("then"), f.label("endif")
        f.emit(f"br i1 {self.get(u.operands.cond).ref}, label %{then}, label %{end}")
        f.block(then)
        self.open(u, end)

    def end(self, u: UOp, escapes: bool) -> None:
        info = self.close(u)
        if isinstance(info, str):
            self.f.emit(f"br label %{info}")
            self.f.block(info)
        else:
            self.close_loop(info)

    def acc(self, u: UOp, escapes: bool) -> None:
        t, n = scalar_type(u.dtype), u.dtype.count
        init = self.get(u.operands.init, n)
        addr = self.alloca(vec(t, n), "zeroinitializer", "acc")
        self.f.emit(f"store {vec(t, n)} {init.ref}, ptr {addr}")
        self.vals[u] = _Slot(addr, t, n)

    def accstore(self, u: UOp, escapes: bool) -> None:
        ops = u.operands
        acc = self.vals.get(ops.acc)
        if not isinstance(acc, _Slot):
            raise op_error(u, "device.accstore's first operand must be a device.acc")
        v = self.get(ops.value, acc.n)
        self.f.emit(f"store {vec(acc.t, acc.n)} {v.ref}, ptr {acc.addr}")
        self.vals[u] = acc

    def cast(self, u: UOp, escapes: bool) -> None:
        n = u.dtype.count
        src = u.operands.x
        x = self.get(src, n)
        self.define(u, self.m.cast(x.ref, src.dtype, u.dtype, n), escapes)

    def bitcast_op(self, u: UOp, escapes: bool) -> None:
        self.define(u, self.bitcast(u), escapes)

    def alu_op(self, u: UOp, escapes: bool) -> None:
        self.define(u, self.alu(u), escapes)

    def fma_op(self, u: UOp, escapes: bool) -> None:
        """device.fma: llvm.fma (rounded once; one instruction on a cpu with FMA)."""
        n = u.dtype.count
        ty = vec(scalar_type(u.dtype.scalar), n)
        args = [(ty, self.get(s, n).ref) for s in u.src]
        self.define(u, self.f.call(f"llvm.fma.{mangle(scalar_type(u.dtype.scalar), n)}", ty, args), escapes)

    def index(self, u: UOp) -> str:
        """An index operand as an i64 ref."""
        v = self.get(u)
        d = check_offset(u)
        if v.t == "i64":
            return v.ref
        return self.f.ins(f"{'zext' if d.kind == 'uint' else 'sext'} {v.t} {v.ref} to i64")

    def special(self, u: UOp, escapes: bool) -> None:
        check_special(u, self.who, self.innermost(), self.id_dims)
        size = self.index(u.operands.size)
        f = self.f
        if not self.ids:  # the first id: this core's contiguous share [n*id/count, n*(id+1)/count)
            lo = f.ins(f"sdiv i64 {f.ins(f'mul i64 {size}, %core_id')}, %core_count")
            nxt = f.ins("add i64 %core_id, 1")
            hi = f.ins(f"sdiv i64 {f.ins(f'mul i64 {size}, {nxt}')}, %core_count")
            loop = self.open_loop(lo, hi)
        else:
            loop = self.open_loop("0", size)
        self.ids.append(loop)
        self.vals[u] = _Val(loop[1], "i64", 1)

    def _gate(self, u: UOp, p: _Ptr) -> str | None:
        gate = p.gate
        if (own := u.operands.gate) is not None:
            g = self.get(own).ref
            gate = g if gate is None else self.f.ins(f"and i1 {gate}, {g}")
        return gate

    def _from_mem(self, x: str, d: DType, n: int) -> str:
        """A value read from memory in its register form (bool from a byte, bf16 rounded: the semantics)."""
        if d.scalar is dtypes.bool:
            return self.f.ins(f"icmp ne {vec('i8', n)} {x}, {splat('i8', n, 0)}")
        if d.scalar is dtypes.bfloat16:
            return self.m.bf16_round(x, n)
        return x

    def load(self, u: UOp, escapes: bool) -> None:
        f, ops = self.f, u.operands
        p = self.ptr(ops.ptr)
        gate = self._gate(u, p)
        d, n = u.dtype, u.dtype.count
        mt, al = mem_type(d), np_dtype(d).itemsize
        if gate is None:
            addr = p.base if p.off == "0" else f.ins(f"getelementptr inbounds {mt}, ptr {p.base}, i64 {p.off}")
            m = 0 if u in self.lanes_apart else self._masked_width(n, al)
            if m:  # one masked vector load, not a load per power-of-two piece of n (a row of 14: 8 + 4 + 2)
                vt = vec(mt, m)
                x = f.call(f"llvm.masked.load.{mangle(mt, m)}.p0", vt,
                           [(f"ptr align {al}", addr), (f"<{m} x i1>", _head_mask(n, m)), (vt, "poison")])
                x = f.ins(f"shufflevector {vt} {x}, {vt} poison, <{n} x i32> <{_lanes(range(n))}>")
            else:
                x = f.ins(f"load {vec(mt, n)}, ptr {addr}, align {al}")
            self.define(u, self._from_mem(x, d, n), escapes)
            return
        alt = self.get(ops.alt, n).ref if ops.alt is not None else splat(scalar_type(d), n, 0)
        if n == 1:  # branch free: element 0 where the gate is off (every buffer has one), then a select
            off = f.ins(f"select i1 {gate}, i64 {p.off}, i64 0")
            x = f.ins(f"load {mt}, ptr {f.ins(f'getelementptr inbounds {mt}, ptr {p.base}, i64 {off}')}, align {al}")
        else:  # a masked load touches no memory where the mask is off
            addr = p.base if p.off == "0" else f.ins(f"getelementptr inbounds {mt}, ptr {p.base}, i64 {p.off}")
            one = f.ins(f"insertelement <1 x i1> poison, i1 {gate}, i64 0")
            mask = f.ins(f"shufflevector <1 x i1> {one}, <1 x i1> poison, <{n} x i32> zeroinitializer")
            vt = vec(mt, n)
            x = f.call(f"llvm.masked.load.{mangle(mt, n)}.p0", vt,
                       [(f"ptr align {al}", addr), (f"<{n} x i1>", mask), (vt, "zeroinitializer")])
        x = self._from_mem(x, d, n)
        ty = vec(scalar_type(d), n)
        self.define(u, f.ins(f"select i1 {gate}, {ty} {x}, {ty} {alt}"), escapes)

    def _masked_width(self, n: int, itemsize: int) -> int:
        """The lanes of the masked vector load that reads n elements of `itemsize` bytes in one instruction on an
        AVX-512 host (mask registers: a masked load suppresses faults where the mask is off), or 0 where a plain load
        serves: n a power of two or LLVM's plain pieces of it (a power of two each) fewer than MASKED_MIN_PIECES, or
        no wider vector (a 32- or 64-bit element) fits a register."""
        m = 1 << max(0, n - 1).bit_length()
        if not self.r.wide_vectors or n.bit_count() < MASKED_MIN_PIECES or itemsize not in (4, 8) \
                or m * itemsize > 64:
            return 0
        return m

    def store(self, u: UOp, escapes: bool) -> None:
        f, ops = self.f, u.operands
        p = self.ptr(ops.ptr)
        gate = self._gate(u, p)
        d = ops.value.dtype
        n = d.count
        v = self.get(ops.value, n).ref
        mt, al = mem_type(d), np_dtype(d).itemsize
        if d.scalar is dtypes.bool:
            v = f.ins(f"zext {vec('i1', n)} {v} to {vec('i8', n)}")
        cont = None
        if gate is not None:
            then, cont = f.label("store"), f.label("stored")
            f.emit(f"br i1 {gate}, label %{then}, label %{cont}")
            f.block(then)
        addr = p.base if p.off == "0" else f.ins(f"getelementptr inbounds {mt}, ptr {p.base}, i64 {p.off}")
        f.emit(f"store {vec(mt, n)} {v}, ptr {addr}, align {al}")
        if cont is not None:
            f.emit(f"br label %{cont}")
            f.block(cont)

    def bitcast(self, u: UOp) -> str:
        """The same bits as another dtype (bf16's bits are the top half of its float carrier)."""
        f = self.f
        src = u.operands.x
        s, d = src.dtype, u.dtype
        x = self.get(src).ref
        if s is d:
            return x
        sn, dn = s.count, d.count
        sb, db = s.scalar.itemsize * 8, d.scalar.itemsize * 8
        if dtypes.bool in (s.scalar, d.scalar) or sb * sn != db * dn:
            raise op_error(u, f"the LLVM backend cannot bitcast {s} to {d}")
        si, di = vec(f"i{sb}", sn), vec(f"i{db}", dn)
        # to integer bits of the source width
        if s.scalar is dtypes.bfloat16:
            wt, c16 = vec("i32", sn), splat("i32", sn, 16)
            w = f.ins(f"bitcast {vec('float', sn)} {x} to {wt}")
            bits = f.ins(f"trunc {wt} {f.ins(f'lshr {wt} {w}, {c16}')} to {si}")
        elif s.scalar.is_float:
            bits = f.ins(f"bitcast {vec(scalar_type(s), sn)} {x} to {si}")
        else:
            bits = x
        if si != di:
            bits = f.ins(f"bitcast {si} {bits} to {di}")
        if d.scalar is dtypes.bfloat16:
            wt, c16 = vec("i32", dn), splat("i32", dn, 16)
            w = f.ins(f"shl {wt} {f.ins(f'zext {di} {bits} to {wt}')}, {c16}")
            return f.ins(f"bitcast {wt} {w} to {vec('float', dn)}")
        if d.scalar.is_float:
            return f.ins(f"bitcast {di} {bits} to {vec(scalar_type(d), dn)}")
        return bits

    def range_max(self, t: str, n: int, a: str, b: str) -> str | None:
        """The semantics' float max of a vector on an AVX-512DQ host in 3 instructions, where llvm.maximum takes 6 in
        a dependent chain: `vrangeps` with imm 5 (the larger, its own sign: +0.0 above -0.0, a quiet NaN loses), then
        where either lane is NaN their sum (a NaN, NaN's operand first, as np.maximum's) by a masked add. A max pool's
        9 taps per output spend most of their time here. Lanes are padded to the next register width (a row of 13 to
        16). None elsewhere (another host, a scalar, f16/bf16, more than one register)."""
        feats = set((self.r.features or "").split(","))
        ew = {"float": 32, "double": 64}.get(t)
        if ew is None or n < 2 or "+avx512dq" not in feats or "+avx512vl" not in feats:
            return None
        w = next((w for w in (128, 256, 512) if n * ew <= w), None)
        if w is None:
            return None
        f, wn = self.f, w // ew
        ty, wty = vec(t, n), vec(t, wn)
        if wn != n:
            idx = ", ".join(f"i32 {i}" for i in range(n)) + "".join(", i32 poison" for _ in range(wn - n))
            a, b = (f.ins(f"shufflevector {ty} {x}, {ty} poison, <{wn} x i32> <{idx}>") for x in (a, b))
        mask = [("i8" if wn <= 8 else "i16" if wn == 16 else "i32", "-1")]
        name = f"llvm.x86.avx512.mask.range.{'ps' if ew == 32 else 'pd'}.{w}"
        r = f.call(name, wty, [(wty, a), (wty, b), ("i32", "5"), (wty, "zeroinitializer"), *mask,
                               *([("i32", "4")] if w == 512 else [])])
        nan = f.ins(f"fcmp uno {wty} {a}, {b}")
        r = f.ins(f"select <{wn} x i1> {nan}, {wty} {f.ins(f'fadd {wty} {a}, {b}')}, {wty} {r}")
        if wn != n:
            r = f.ins(f"shufflevector {wty} {r}, {wty} poison, <{n} x i32> <{', '.join(f'i32 {i}' for i in range(n))}>")
        return r

    def alu(self, u: UOp) -> str:
        f, m = self.f, self.m
        name = u.op.name
        d, n = u.dtype.scalar, u.dtype.count
        if name == "core.where":
            ops = u.operands
            c = self.get(ops.cond)
            if c.n not in (1, n):
                raise op_error(u, f"core.where: a condition of {c.n} lanes for {n}")
            a, b = self.get(ops.a, n), self.get(ops.b, n)
            return f.ins(f"select {c.ty} {c.ref}, {a.ty} {a.ref}, {b.ty} {b.ref}")
        src = u.src[0].dtype.scalar
        args = [self.get(s, n).ref for s in u.src]
        st = vec(scalar_type(src), n)
        if name in COMPARE:
            signed_p, unsigned_p, float_p = COMPARE[name]
            if src.is_float:
                return f.ins(f"fcmp {float_p} {st} {args[0]}, {args[1]}")
            pred = unsigned_p if src.kind == "uint" or src is dtypes.bool else signed_p
            return f.ins(f"icmp {pred} {st} {args[0]}, {args[1]}")
        t = scalar_type(d)
        ty = vec(t, n)
        if d is dtypes.bool:
            if name in BOOL_OP:
                return f.ins(f"{BOOL_OP[name]} {ty} {args[0]}, {args[1]}")
            if name == "core.neg":
                return f.ins(f"xor {ty} {args[0]}, {splat('i1', n, True)}")
            if name == "core.mulacc":
                return f.ins(f"or {ty} {f.ins(f'and {ty} {args[0]}, {args[1]}')}, {args[2]}")
            raise op_error(u, f"the LLVM backend cannot compute {name} on bool")
        if d.is_float:
            if name in _FLOAT_BIN:
                r = f.ins(f"{_FLOAT_BIN[name]} {ty} {args[0]}, {args[1]}")
            elif name == "core.max":
                r = self.range_max(t, n, args[0], args[1]) or \
                    f.call(f"llvm.maximum.{mangle(t, n)}", ty, [(ty, args[0]), (ty, args[1])])
            elif name == "core.neg":
                r = f.ins(f"fneg {ty} {args[0]}")
            elif name == "core.recip":
                r = f.ins(f"fdiv {ty} {splat(t, n, 1.0)}, {args[0]}")
            elif name in _FLOAT_UN:
                r = f.call(f"llvm.{_FLOAT_UN[name]}.{mangle(t, n)}", ty, [(ty, args[0])])
            elif name == "core.mulacc":  # not fused: the product is rounded, then the sum
                p = m.round_to(f.ins(f"fmul {ty} {args[0]}, {args[1]}"), d, n)
                r = f.ins(f"fadd {ty} {p}, {args[2]}")
            else:
                raise op_error(u, f"the LLVM backend cannot compute {name} on {d}")
            return r if name in _EXACT_IN_BF16 else m.round_to(r, d, n)
        bits = d.itemsize * 8
        unsigned = d.kind == "uint"
        if name in _INT_BIN:  # wraps: no nsw/nuw
            return f.ins(f"{_INT_BIN[name]} {ty} {args[0]}, {args[1]}")
        if name == "core.neg":
            return f.ins(f"sub {ty} {splat(t, n, 0)}, {args[0]}")
        if name == "core.mulacc":
            return f.ins(f"add {ty} {f.ins(f'mul {ty} {args[0]}, {args[1]}')}, {args[2]}")
        if name == "core.max":
            return f.call(f"llvm.{'umax' if unsigned else 'smax'}.{mangle(t, n)}", ty, [(ty, args[0]), (ty, args[1])])
        if name in ("core.idiv", "core.mod"):
            return self.divmod(u, name == "core.idiv", ty, t, n, unsigned, args)
        if name in ("core.shl", "core.shr"):
            k = const_shift(u, bits)
            if k is not None:
                amt = splat(t, n, k)
            else:
                amt = f.ins(f"and {ty} {args[1]}, {splat(t, n, bits - 1)}")
            kind = "shl" if name == "core.shl" else "lshr" if unsigned else "ashr"
            return f.ins(f"{kind} {ty} {args[0]}, {amt}")
        raise op_error(u, f"the LLVM backend cannot compute {name} on {d}")

    def divmod(self, u: UOp, div: bool, ty: str, t: str, n: int, unsigned: bool, args: list[str]) -> str:
        """Integer division / remainder with the semantics' total rules: x/0 = x%0 = 0, MIN/-1 = MIN, MIN%-1 = 0."""
        f = self.f
        a, b = args
        instr = ("udiv" if div else "urem") if unsigned else ("sdiv" if div else "srem")
        if unguarded_divisor(u):
            return f.ins(f"{instr} {ty} {a}, {b}")
        bt = vec("i1", n)
        zero = f.ins(f"icmp eq {ty} {b}, {splat(t, n, 0)}")
        special = zero
        minus1 = None
        if not unsigned:
            minus1 = f.ins(f"icmp eq {ty} {b}, {splat(t, n, -1)}")
            special = f.ins(f"or {bt} {zero}, {minus1}")
        safe = f.ins(f"select {bt} {special}, {ty} {splat(t, n, 1)}, {ty} {b}")
        r = f.ins(f"{instr} {ty} {a}, {safe}")
        if not div:
            return f.ins(f"select {bt} {special}, {ty} {splat(t, n, 0)}, {ty} {r}")
        r = f.ins(f"select {bt} {zero}, {ty} {splat(t, n, 0)}, {ty} {r}")
        if minus1 is None:
            return r
        z = splat(t, n, 0)
        return f.ins(f"select {bt} {minus1}, {ty} {f.ins(f'sub {ty} {z}, {a}')}, {ty} {r}")


LLVM_ROWS: dict[OpDef, Row] = {
    **NO_VALUE_ROWS,
    **CPU_REFUSES,
    **rows(C.ALU_OPS, _Walk.alu_op),
    C.CONST: _Walk.const, C.CAST: _Walk.cast, C.BITCAST: _Walk.bitcast_op, C.GEP: _Walk.gep,
    C.VECTORIZE: _Walk.vectorize,
    K.PARAM: _Walk.param, K.VAR: _Walk.var, K.REGISTER: _Walk.register, K.LOCAL: _Walk.local,
    K.INDEX: _Walk.index_op, K.LOAD: _Walk.load, K.STORE: _Walk.store,
    D.LOOP: _Walk.loop, D.ENDLOOP: _Walk.end, D.IF: _Walk.if_, D.ENDIF: _Walk.end, D.ACC: _Walk.acc,
    D.ACCSTORE: _Walk.accstore, D.SPECIAL: _Walk.special, D.FMA: _Walk.fma_op,
}
