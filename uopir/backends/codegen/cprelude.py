"""The C prelude: the helper functions a rendered kernel calls where plain C differs from uopir's semantics.

Each helper is a small `static inline` function, emitted only when a kernel uses it (with the helpers it calls and
the headers it needs), so `--emit=c` shows a kernel with just what it relies on. The choices they implement are those
of uopir.dialects.semantics, bit for bit:

- `half` carries f16 as its IEEE bits (uint16_t) and `bf16` carries bf16 in a float (the numpy carriers). Every f16
  or bf16 op computes in float and rounds back once (exact for the ops that are correctly rounded in float).
- integer division and remainder by zero give 0 and MIN / -1 wraps (C traps); shifts take the amount modulo the
  width; float -> int casts truncate, saturate and send NaN to 0 (C leaves all three undefined);
- max propagates NaN and orders +0.0 above -0.0 (C's fmax does neither);
- conversions to bf16 and f16 round to nearest even from the exact source value: from double through a
  round-to-odd float, from 64-bit ints through a sticky double.

Integer add/sub/mul/neg wrap because kernels are compiled with -fwrapv (uopir.backends.c.compiler).
"""
from __future__ import annotations

from dataclasses import dataclass

from uopir.ir.dtype import DType, dtypes

__all__ = ["Helper", "HELPERS", "ctype", "int_helper", "float_helper", "bitcast_helper", "prelude", "vector_ok",
           "int_vector_ok", "vector_type", "mask_type", "vector_fma", "vector_max", "VECTOR_DTYPES",
           "INT_VECTOR_DTYPES"]

# C spelling of each scalar dtype (f16 and bf16 by their carriers, named for readability)
_CTYPES: dict[DType, str] = {
    dtypes.bool: "bool", dtypes.int8: "int8_t", dtypes.int16: "int16_t", dtypes.int32: "int32_t",
    dtypes.int64: "int64_t", dtypes.uint8: "uint8_t", dtypes.uint16: "uint16_t", dtypes.uint32: "uint32_t",
    dtypes.uint64: "uint64_t", dtypes.float16: "half", dtypes.bfloat16: "bf16", dtypes.float32: "float",
    dtypes.float64: "double", dtypes.index: "int64_t",
}
# a short suffix per dtype for helper names (idiv_i32, max_f32, ...)
_SUFFIX: dict[DType, str] = {
    dtypes.bool: "b", dtypes.int8: "i8", dtypes.int16: "i16", dtypes.int32: "i32", dtypes.int64: "i64",
    dtypes.uint8: "u8", dtypes.uint16: "u16", dtypes.uint32: "u32", dtypes.uint64: "u64", dtypes.float16: "f16",
    dtypes.bfloat16: "bf16", dtypes.float32: "f32", dtypes.float64: "f64", dtypes.index: "i64",
}


def ctype(d: DType) -> str:
    """The C type of a scalar dtype (KeyError for others)."""
    return _CTYPES[d.scalar]


def suffix(d: DType) -> str:
    return _SUFFIX[d.scalar]


@dataclass(frozen=True)
class Helper:
    """One prelude entry: its C text, the helpers it calls and the headers it needs."""

    text: str
    deps: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()


_BASE_INCLUDES = ("stdbool.h", "stdint.h")

HELPERS: dict[str, Helper] = {
    "math": Helper("", includes=("math.h",)),  # NAN, INFINITY, exp2f, ...
    "half": Helper("typedef uint16_t half; /* f16, as its IEEE bits */"),
    "bf16": Helper("typedef float bf16; /* bf16, carried in a float whose low 16 bits are zero */"),
    "f32_bits": Helper(
        "static inline uint32_t f32_bits(float x) { uint32_t b; memcpy(&b, &x, 4); return b; }\n"
        "static inline float f32_from_bits(uint32_t b) { float x; memcpy(&x, &b, 4); return x; }",
        includes=("string.h",)),
    # f16 <-> f32: the compiler's _Float16 where it has one (exact widening; narrowing rounds to nearest even, with
    # the cpu's instructions when it has them), else exact bit code (also with -DUOPIR_SOFT_F16)
    "f16_to_f32": Helper(
        "#if defined(__FLT16_MAX__) && !defined(UOPIR_SOFT_F16)\n"
        "static inline float f16_to_f32(half h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }\n"
        "#else\n"
        "static inline float f16_to_f32(half h) {\n"
        "  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, o;\n"
        "  if (em >= 0x7c00u) o = 0x7f800000u | ((em & 0x3ffu) << 13);\n"
        "  else if (em >= 0x400u) o = (em << 13) + ((127u - 15u) << 23);\n"
        "  else o = f32_bits((float)em * 0x1p-24f);\n"
        "  return f32_from_bits(o | sign);\n"
        "}\n"
        "#endif", ("half", "f32_bits")),
    "f32_to_f16": Helper(
        "#if defined(__FLT16_MAX__) && !defined(UOPIR_SOFT_F16)\n"
        "static inline half f32_to_f16(float x) { _Float16 f = (_Float16)x; half h; memcpy(&h, &f, 2); return h; }\n"
        "#else\n"
        "static inline half f32_to_f16(float x) {\n"
        "  uint32_t b = f32_bits(x), sign = b & 0x80000000u, o;\n"
        "  b ^= sign;\n"
        "  if (b > 0x7f800000u) o = 0x7c00u | ((b >> 13) & 0x3ffu) | (((b >> 13) & 0x3ffu) == 0u); /* NaN: payload */\n"
        "  else if (b >= 0x47800000u) o = 0x7c00u;\n"
        "  else if (b < 0x38800000u) o = f32_bits(f32_from_bits(b) + 0.5f) - 0x3f000000u;\n"
        "  else o = (b + 0xc8000fffu + ((b >> 13) & 1u)) >> 13;\n"
        "  return (half)(o | (sign >> 16));\n"
        "}\n"
        "#endif", ("half", "f32_bits")),
    # double -> float rounded to odd: a later round to nearest (f16, bf16) is then correctly rounded from the double
    "f64_to_f32_odd": Helper(
        "static inline float f64_to_f32_odd(double d) {\n"
        "  float f = (float)d;\n"
        "  if ((double)f == d || d != d) return f;\n"
        "  uint32_t b = f32_bits(f);\n"
        "  if (fabs((double)f) > fabs(d)) b -= 1u;\n"
        "  return f32_from_bits(b | 1u);\n"
        "}", ("f32_bits",), ("math.h",)),
    "f64_to_f16": Helper("static inline half f64_to_f16(double d) { return f32_to_f16(f64_to_f32_odd(d)); }",
                         ("f32_to_f16", "f64_to_f32_odd")),
    "bf16_round": Helper(
        "static inline bf16 bf16_round(float x) {\n"
        "  uint32_t b = f32_bits(x);\n"
        "  b = x != x ? (b & 0xffff0000u) | 0x00400000u : (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;\n"
        "  return f32_from_bits(b);\n"
        "}", ("bf16", "f32_bits")),
    "bf16_from_f64": Helper("static inline bf16 bf16_from_f64(double d) { return bf16_round(f64_to_f32_odd(d)); }",
                            ("bf16_round", "f64_to_f32_odd")),
    # 64-bit ints as a double that rounds correctly to <= 51 bits: exact below 2**53, else with a sticky bit
    "f64_sticky": Helper(
        "static inline double f64_sticky_u64(uint64_t m) {\n"
        "  return m < (1ull << 53) ? (double)m : (double)((m >> 11) | (uint64_t)((m & 0x7ffu) != 0)) * 2048.0;\n"
        "}\n"
        "static inline double f64_sticky_i64(int64_t a) {\n"
        "  double r = f64_sticky_u64(a < 0 ? 0u - (uint64_t)a : (uint64_t)a);\n"
        "  return a < 0 ? -r : r;\n"
        "}"),
}

_FLOAT_MAX = (
    "static inline {t} max_{s}({t} a, {t} b) {{\n"
    "  return (a > b || a != a) ? a : (b > a || b != b) ? b : (signbit(a) ? b : a);\n"
    "}}")


def _int_template(kind: str, d: DType) -> Helper:
    t, s, bits = ctype(d), suffix(d), d.itemsize * 8
    u = f"uint{bits}_t"
    signed = d.kind in ("int", "index")
    if kind == "idiv":
        body = (f"b == 0 ? 0 : b == -1 ? ({t})(0u - ({u})a) : ({t})(a / b)" if signed else
                f"b == 0 ? 0 : ({t})(a / b)")
        return Helper(f"static inline {t} idiv_{s}({t} a, {t} b) {{ return {body}; }}")
    if kind == "mod":
        body = f"(b == 0 || b == -1) ? 0 : ({t})(a % b)" if signed else f"b == 0 ? 0 : ({t})(a % b)"
        return Helper(f"static inline {t} mod_{s}({t} a, {t} b) {{ return {body}; }}")
    if kind == "f2i":  # float -> int: truncate toward zero, saturate, NaN -> 0 (decided in double: exact for f32)
        hi = f"0x1p{bits - 1 if signed else bits}"
        lo = f"-0x1p{bits - 1}" if signed else "-1.0"
        lo_val = f"INT{bits}_MIN" if signed else "0"
        hi_val = f"INT{bits}_MAX" if signed else f"UINT{bits}_MAX"
        # x <= lo - 1 (as a double) is trunc(x) < lo; for 64 bits lo - 1 rounds to lo, which saturates to lo too
        lo_cmp = f"x <= {lo} - 1.0" if signed and bits < 64 else f"x <= {lo}" if signed else "x <= -1.0"
        return Helper(f"static inline {t} f2i_{s}(double x) {{\n"
                      f"  return x != x ? 0 : x >= {hi} ? {hi_val} : {lo_cmp} ? {lo_val} : ({t})x;\n"
                      f"}}")
    raise KeyError(kind)


def int_helper(kind: str, d: DType) -> tuple[str, Helper]:
    """(name, helper) of a per-int-type helper: idiv, mod or f2i (the cast from a double to d)."""
    return f"{kind}_{suffix(d)}", _int_template(kind, d)


def float_helper(kind: str, d: DType) -> tuple[str, Helper]:
    """(name, helper) of a per-float-type helper: max (NaN-propagating, +0 above -0)."""
    if kind != "max":
        raise KeyError(kind)
    t = {dtypes.float64: "double"}.get(d.scalar, "float")  # f16/bf16 compute in float
    s = "f64" if t == "double" else "f32"
    return f"max_{s}", Helper(_FLOAT_MAX.format(t=t, s=s), includes=("math.h",))


def bitcast_helper(src: DType, dst: DType) -> tuple[str, Helper]:
    """(name, helper) reinterpreting the bits of a scalar of the same width (bf16 by the top half of its carrier)."""
    s, d = suffix(src), suffix(dst)
    name = f"bitcast_{s}_{d}"
    ts, td = ctype(src), ctype(dst)
    if src.scalar is dtypes.bfloat16:
        return name, Helper(f"static inline {td} {name}(bf16 x) {{ uint16_t b = (uint16_t)(f32_bits(x) >> 16); "
                            f"{td} r; memcpy(&r, &b, 2); return r; }}", ("bf16", "f32_bits"), ("string.h",))
    if dst.scalar is dtypes.bfloat16:
        return name, Helper(f"static inline bf16 {name}({ts} x) {{ uint16_t b; memcpy(&b, &x, 2); "
                            f"return f32_from_bits((uint32_t)b << 16); }}", ("bf16", "f32_bits"), ("string.h",))
    return name, Helper(f"static inline {td} {name}({ts} x) {{ {td} r; memcpy(&r, &x, sizeof r); return r; }}",
                        includes=("string.h",))


def prelude(used: dict[str, Helper]) -> str:
    """The includes and helpers for the helpers in `used` (name -> helper), dependencies first."""
    order: list[str] = []
    seen: set[str] = set()
    for name in used:
        stack = [(name, False)]
        while stack:  # iterative post-order over the (small, acyclic) helper dependencies
            n, done = stack.pop()
            if done:
                if n not in seen:
                    seen.add(n)
                    order.append(n)
                continue
            if n in seen:
                continue
            stack.append((n, True))
            h = used.get(n) or HELPERS[n]
            stack.extend((dep, False) for dep in reversed(h.deps) if dep not in seen)
    helpers = [used.get(n) or HELPERS[n] for n in order]
    includes: list[str] = list(_BASE_INCLUDES)
    for h in helpers:
        includes.extend(i for i in h.includes if i not in includes)
    lines = [f"#include <{i}>" for i in includes]
    lines.extend(h.text for h in helpers if h.text)
    return "\n".join(lines) + "\n"


# ---- vector types (GCC/clang vector extensions) --------------------------------------------------------------------
VECTOR_DTYPES = (dtypes.float32, dtypes.float64)  # lanes computed natively with vector types; others lane by lane
# integer vectors in C (uopir.backends.c): two's complement lanes, wrapping under -fwrapv like the scalar ops; bool
# vectors are masks (below), f16/bf16 vectors stay lane by lane (their carriers are not their values)
INT_VECTOR_DTYPES = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16,
                     dtypes.uint32, dtypes.uint64)  # not index: addresses are computed lane by lane


def _vector_bytes_ok(d: DType) -> bool:
    n = d.count * d.scalar.itemsize
    return d.count > 1 and 8 <= n <= 64 and n & (n - 1) == 0


def vector_ok(d: DType) -> bool:
    """Whether values of dtype d (a vector) are held in a native vector type: f32/f64, 2..64 bytes, power of two."""
    return d.scalar in VECTOR_DTYPES and _vector_bytes_ok(d)


def int_vector_ok(d: DType) -> bool:
    """Whether an integer vector dtype fits a native vector type (8..64 bytes, a power of two)."""
    return d.scalar in INT_VECTOR_DTYPES and _vector_bytes_ok(d)


def vector_type(d: DType) -> tuple[str, Helper]:
    """(type name, helper) of a vector dtype: the typedef and its unaligned load/store through memcpy."""
    t, s = ctype(d.scalar), suffix(d.scalar)
    name = f"{s}x{d.count}"
    text = (f"typedef {t} {name} __attribute__((vector_size({d.count * d.scalar.itemsize})));\n"
            f"static inline {name} load_{name}(const {t}* p) {{ {name} v; memcpy(&v, p, sizeof v); return v; }}\n"
            f"static inline void store_{name}({t}* p, {name} v) {{ memcpy(p, &v, sizeof v); }}")
    return name, Helper(text, includes=("string.h",))


def mask_type(bits: int, n: int) -> DType:
    """The dtype whose vector type carries a bool vector of n lanes as a mask of `bits`-bit lanes (all ones where
    true, zero where false): what a vector compare of `bits`-bit lanes yields in GCC/clang."""
    return {8: dtypes.int8, 16: dtypes.int16, 32: dtypes.int32, 64: dtypes.int64}[bits].vec(n)


def vector_fma(d: DType) -> tuple[str, Helper]:
    """(name, helper) of device.fma on an f32 vector type: `a * b + c` with contraction on (clang fuses it into one
    vector FMA; -ffp-contract=off holds everywhere else), elsewhere `__builtin_fmaf` per lane, which GCC's loop
    vectorizer turns into one vector FMA too. Either way each lane is the fused result, rounded once."""
    vt, _ = vector_type(d)
    name = f"fma_{vt}"
    text = (f"static inline {vt} {name}({vt} a, {vt} b, {vt} c) {{\n"
            f"#if defined(__clang__)\n"
            f"#pragma STDC FP_CONTRACT ON\n"
            f"  return a * b + c;\n"
            f"#else\n"
            f"  {vt} r;\n"
            f"  for (int i = 0; i < {d.count}; i++) r[i] = __builtin_fmaf(a[i], b[i], c[i]);\n"
            f"  return r;\n"
            f"#endif\n"
            f"}}")
    return name, Helper(text, deps=(vt,))


def vector_max(d: DType) -> tuple[str, Helper]:
    """(name, helper) of core.max on a vector type. Floats: the scalar max_* rule (NaN wins, +0.0 above -0.0)
    lane-wise, with vector compares and a bit select, so it stays vector code; integers: a compare and a select."""
    vt, _ = vector_type(d)
    bits = d.scalar.itemsize * 8
    it, _ = vector_type(mask_type(bits, d.count))
    name = f"max_{vt}"
    if d.scalar not in VECTOR_DTYPES:
        text = (f"static inline {vt} {name}({vt} a, {vt} b) {{\n"
                f"  {vt} pick_a = ({vt})(a > b);\n"
                f"  return (a & pick_a) | (b & ~pick_a);\n"
                f"}}")
        return name, Helper(text, deps=(vt,))
    # b where b > a, where b alone is NaN, where they are equal and b is +0 (or the same value); else a (a NaN
    # wins, as in max_f32): three compares of a, side by side, so that a running max (a: the accumulator) waits on
    # one compare and the or of their masks, not on a chain of them
    generic = (f"  {it} pick_b = (b > a) | ((b != b) & (a == a)) | ((b == a) & (({it})b >= 0));\n"
               f"  return ({vt})((({it})b & pick_b) | (({it})a & ~pick_b));\n")
    x86 = _RANGE_MAX.get((d.scalar.name, d.count))
    if x86 is None:
        return name, Helper(f"static inline {vt} {name}({vt} a, {vt} b) {{\n{generic}}}", deps=(vt, it))
    # on an AVX-512DQ host (-march=native): vrangeps (the larger, +0.0 above -0.0; a quiet NaN loses) and, where a
    # lane is NaN, their sum by a masked add (a NaN, a's first): 3 instructions for the 7 above (a max pool's taps)
    pre, sfx, bits = x86
    text = (f"#if defined(__AVX512DQ__) && defined(__AVX512VL__)\n#include <immintrin.h>\n#endif\n"
            f"static inline {vt} {name}({vt} a, {vt} b) {{\n"
            f"#if defined(__AVX512DQ__) && defined(__AVX512VL__)\n"
            f"  __mmask{max(8, d.count)} nan = {pre}_cmp_{sfx}_mask(a, b, _CMP_UNORD_Q);\n"
            f"  return {pre}_mask_add_{sfx}({pre}_range_{sfx}(a, b, 5), nan, a, b);\n"
            f"#else\n{generic}#endif\n}}")
    return name, Helper(text, deps=(vt, it))


# (dtype name, lanes) -> (intrinsic prefix, suffix, register bits) of the vector types vector_max computes with
# vrangeps/vrangepd on an AVX-512DQ host
_RANGE_MAX = {("f32", 4): ("_mm", "ps", 128), ("f32", 8): ("_mm256", "ps", 256), ("f32", 16): ("_mm512", "ps", 512),
              ("f64", 2): ("_mm", "pd", 128), ("f64", 4): ("_mm256", "pd", 256), ("f64", 8): ("_mm512", "pd", 512)}
