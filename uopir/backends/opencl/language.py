"""OpenCL C as a C dialect: its `Language` value for the shared C-style renderer (uopir.backends.codegen.cstyle).

OpenCL C has no headers: the fixed-width integer names and their limits are typedefs and defines of the header, the
float functions have no `f` suffix (`exp2` is overloaded), `memcpy` is the compiler's builtin and `half` is a
keyword (f16 rides as its bits in `uopir_half`). `#pragma OPENCL FP_CONTRACT OFF` keeps a*b+c two roundings, as
the semantics say; the build asks for correctly rounded division and sqrt (`-cl-fp32-correctly-rounded-divide-sqrt`).
Bool buffers are `uchar` (OpenCL forbids bool in a kernel's parameters).
"""
from __future__ import annotations

from uopir.backends.codegen.cprelude import Helper
from uopir.backends.codegen.cstyle import Language
from uopir.backends.codegen.names import opencl_ident

__all__ = ["OPENCL"]

_STDINT = """typedef char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef uchar uint8_t;
typedef ushort uint16_t;
typedef uint uint32_t;
typedef ulong uint64_t;
#define INT8_MIN CHAR_MIN
#define INT8_MAX CHAR_MAX
#define INT16_MIN SHRT_MIN
#define INT16_MAX SHRT_MAX
#define INT32_MIN INT_MIN
#define INT32_MAX INT_MAX
#define INT64_MIN LONG_MIN
#define INT64_MAX LONG_MAX
#define UINT8_MAX UCHAR_MAX
#define UINT16_MAX USHRT_MAX
#define UINT32_MAX UINT_MAX
#define UINT64_MAX ULONG_MAX
"""
_FLOAT_FNS = ("exp2", "log2", "sin", "sqrt", "trunc", "fmod")


def _vector_helpers() -> dict[str, Helper]:
    """OpenCL's own vector types for the C renderer's f32/f64 vectors: `f32x4` is `float4`, loaded and stored with
    vload/vstore (any alignment, any address space); the lane-wise max of the C prelude (NaN wins, +0.0 above -0.0)
    with as_int/as_float instead of vector casts (OpenCL C has no casts between vector types)."""
    out: dict[str, Helper] = {}
    for scalar, bits, itype in (("float", 32, "int"), ("double", 64, "long")):
        for n in (2, 4, 8, 16):
            if n * bits > 512:
                continue
            vt, cl, it = f"f{bits}x{n}", f"{scalar}{n}", f"{itype}{n}"
            out[vt] = Helper(f"typedef {cl} {vt};\n#define load_{vt}(p) vload{n}(0, (p))\n"
                             f"#define store_{vt}(p, v) vstore{n}((v), 0, (p))")
            out[f"max_{vt}"] = Helper(
                f"static inline {vt} max_{vt}({vt} a, {vt} b) {{\n"
                f"  {it} ia = as_{it}(a), ib = as_{it}(b);\n"
                f"  {it} pick_a = (a > b) | (a != a) | (~((b > a) | (b != b)) & ~(ia < 0));\n"
                f"  return as_{cl}((ia & pick_a) | (ib & ~pick_a));\n}}", deps=(vt,))
    return out


def _header(text: str) -> str:
    lines = ["#pragma OPENCL FP_CONTRACT OFF"]
    if "double" in text:
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    lines.append(_STDINT.rstrip("\n"))
    lines.extend(f"#define {f}f {f}" for f in _FLOAT_FNS if f"{f}f(" in text)
    if "f16_to_f32" in text or "f32_to_f16" in text:
        lines.append("#define UOPIR_SOFT_F16  /* the prelude's exact bit code for f16 <-> f32 */")
    if "memcpy" in text:
        lines.append("#define memcpy __builtin_memcpy")
    lines.append("#define half uopir_half  /* half is a keyword of OpenCL C: f16 rides as its bits */")
    return "\n".join(lines) + "\n"


OPENCL = Language(
    name="opencl",
    title="OpenCL",
    kernel_head="__kernel void",
    buffer="__global {t}* {name}",
    var_type="long",
    ids={"global_id": "get_global_id({dim})", "group_id": "get_group_id({dim})",
         "local_id": "get_local_id({dim})"},
    local="__local {t} {name}[{n}];",
    barrier="barrier(CLK_LOCAL_MEM_FENCE);",
    header=_header,
    helpers={
        "f32_bits": Helper("static inline uint32_t f32_bits(float x) { return as_uint(x); }\n"
                           "static inline float f32_from_bits(uint32_t b) { return as_float(b); }"),
        "math": Helper(""),
        **_vector_helpers(),
    },
    vector_lanes=(2, 4, 8, 16),
    bool_buffer="uchar",
    ident=opencl_ident,
)
