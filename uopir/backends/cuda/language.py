"""CUDA C as a C dialect: its `Language` value for the shared C-style renderer (uopir.backends.codegen.cstyle).

Kernels are `extern "C" __global__` (an unmangled entry point in the PTX), helpers `static __device__ inline`.
Under NVRTC (`__CUDACC_RTC__`) there is no libc header: the fixed-width integer names and limits are typedefs and
defines; nvcc gets <stdint.h>. f16 <-> f32 conversions use cuda_fp16.h (`__half2float`, `__float2half_rn`: exact,
round to nearest even) and bf16 rounding cuda_bf16.h (`__float2bfloat16_rn`), included only when a kernel uses them;
f16 values still ride as their bits (`half` is `#define`d to a 16-bit carrier: cuda_fp16.h owns the name) and bf16
in a float, so buffers keep numpy's layouts. Compile with `--fmad=false` (no a*b+c contraction), as compiler.py does.
"""
from __future__ import annotations

from uopir.backends.codegen.cprelude import HELPERS, Helper
from uopir.backends.codegen.cstyle import Language
from uopir.backends.codegen.names import cuda_ident

__all__ = ["CUDA"]

_RTC_STDINT = """#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT8_MIN (-128)
#define INT8_MAX 127
#define INT16_MIN (-32768)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-9223372036854775807ll - 1)
#define INT64_MAX 9223372036854775807ll
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295u
#define UINT64_MAX 18446744073709551615ull
#else
#include <stdint.h>
#endif
"""


# cuda_fp16.h / cuda_bf16.h where the compiler finds them (nvcc always; NVRTC with the toolkit's include folder),
# else the C prelude's exact bit code (NVRTC from the wheel alone has no such headers)
_FP16 = """#if defined(__has_include)
#if __has_include(<cuda_fp16.h>)
#include <cuda_fp16.h>
#define UOPIR_CUDA_FP16 1
#endif
#endif"""
_BF16 = _FP16.replace("fp16", "bf16").replace("FP16", "BF16")


def _soft(name: str) -> str:
    """The portable branch of a C prelude helper written as `#if <fast> ... #else <portable> #endif`."""
    text = HELPERS[name].text
    return text.split("#else\n", 1)[1].rsplit("\n#endif", 1)[0] if "#else\n" in text else text


def _either(flag: str, fast: str, name: str) -> str:
    return f"#ifdef {flag}\n{fast}\n#else\n{_soft(name)}\n#endif"


def _header(text: str) -> str:
    lines = []
    if "UOPIR_CUDA_FP16" in text:
        lines.append(_FP16)
    if "UOPIR_CUDA_BF16" in text:
        lines.append(_BF16)
    lines.append(_RTC_STDINT.rstrip("\n"))
    if "NAN" in text:
        lines.append("#ifndef NAN\n#define NAN __int_as_float(0x7fc00000)\n#endif")
    if "INFINITY" in text:
        lines.append("#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif")
    lines.append("#define half uopir_half  /* f16 rides as its bits; cuda_fp16.h owns the name half */")
    return "\n".join(lines) + "\n"


CUDA = Language(
    name="cuda",
    title="CUDA",
    kernel_head='extern "C" __global__ void',
    buffer="{t}* {name}",
    var_type="int64_t",
    ids={"global_id": "(int64_t)blockIdx.{xyz} * blockDim.{xyz} + threadIdx.{xyz}", "group_id": "blockIdx.{xyz}",
         "local_id": "threadIdx.{xyz}"},
    local="__shared__ {t} {name}[{n}];",
    barrier="__syncthreads();",
    header=_header,
    helper_qualifier="static __device__ inline",
    helpers={
        "math": Helper(""),
        "f32_bits": Helper("static inline uint32_t f32_bits(float x) { return __float_as_uint(x); }\n"
                           "static inline float f32_from_bits(uint32_t b) { return __uint_as_float(b); }"),
        # cuda_fp16.h rounds; NaNs keep their payload by bit code (the intrinsics may return a canonical NaN)
        "f16_to_f32": Helper(_either(
            "UOPIR_CUDA_FP16",
            "static inline float f16_to_f32(half h) {\n"
            "  return (h & 0x7fffu) > 0x7c00u ? f32_from_bits(((uint32_t)(h & 0x8000u) << 16) | 0x7f800000u |\n"
            "    ((uint32_t)(h & 0x3ffu) << 13)) : __half2float(__ushort_as_half(h));\n}", "f16_to_f32"),
            ("half", "f32_bits")),
        "f32_to_f16": Helper(_either(
            "UOPIR_CUDA_FP16",
            "static inline half f32_to_f16(float x) {\n"
            "  uint32_t b = f32_bits(x), m = (b >> 13) & 0x3ffu;\n"
            "  return x != x ? (half)(((b >> 16) & 0x8000u) | 0x7c00u | m | (m == 0u))\n"
            "                : __half_as_ushort(__float2half_rn(x));\n}", "f32_to_f16"), ("half", "f32_bits")),
        "bf16_round": Helper(_either(
            "UOPIR_CUDA_BF16",
            "static inline bf16 bf16_round(float x) {\n"
            "  return x != x ? f32_from_bits((f32_bits(x) & 0xffff0000u) | 0x00400000u)\n"
            "                : __bfloat162float(__float2bfloat16_rn(x));\n}", "bf16_round"), ("bf16", "f32_bits")),
    },
    ident=cuda_ident,
)
