"""How a user-controlled name (a program, kernel or variable name from a .uop file, a Tensor program or an ONNX model)
reaches generated device code: one identifier rule and one comment/string rule per output language, and no other way.

Identifiers (`c_ident`, `opencl_ident`, `cuda_ident`, `llvm_ident`, `mlir_ident`): an ordinary name (an ASCII letter,
then letters, digits and single underscores, at most `MAX_PLAIN` characters) that is no keyword of the language and
nothing the generated code or its headers define stays as it is, so emitted kernels keep their readable names. Any
other name becomes a readable stem (its letters and digits, runs of anything else as one `_`) plus `_h` and a digest
of the whole name: deterministic and valid in the language. Two different names meet only if 32 bits of their
sha256 do: an ordinary name is never changed, a changed one always ends in `_h` + 8 hex digits, and a name that already
looks like that is changed too. The host languages (C, LLVM IR, MLIR) share one rule: their kernels are host symbols
that ctypes looks up, and the `c` device's in-process tier renders the same program as LLVM IR.

Text (`c_string`, `c_comment`, `llvm_string`, `llvm_comment`): a comment or string that carries a name can never end
early. Each escaped form is printable ASCII only, so no line break (LF, CR, U+0085, U+2028/2029), NUL or other control
character reaches a `//`, `;` or `/* */` comment; C comments also never hold `*/` or `/*`, and a plain name (`r_4_3`)
is written as it is. MLIR string attributes are printed by xDSL, which escapes them (`mlir_text` only makes a name
encodable first).
"""
from __future__ import annotations

import hashlib
import re

__all__ = ["MAX_PLAIN", "c_ident", "opencl_ident", "cuda_ident", "llvm_ident", "mlir_ident", "c_string", "c_comment",
           "llvm_string", "llvm_comment", "mlir_text"]

MAX_PLAIN = 128  # characters of a name kept as it is; a longer one is shortened to a stem and a digest
_STEM = 48  # characters of the readable stem of a changed name
_PLAIN = re.compile(r"[A-Za-z](?:_?[A-Za-z0-9])*_?")  # no leading or double underscore: reserved in C and C++
_MANGLED = re.compile(r".*_h[0-9a-f]{8}")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def _words(*groups: str) -> frozenset[str]:
    return frozenset(w for g in groups for w in g.split())


def _math(names: str) -> str:
    """C's math functions in their double, float and long double spellings."""
    return " ".join(f"{n} {n}f {n}l" for n in names.split())


# ---- what each language reserves -------------------------------------------------------------------------------------
_C_KEYWORDS = _words(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while",
    "alignas alignof bool constexpr false nullptr static_assert thread_local true typeof typeof_unqual asm",
    "main defined")
# the names the headers a kernel includes (stdbool, stdint, math, string, stdlib) declare in lower case
_LIBC = _words(
    _math("acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 exp10 pow10 frexp ilogb "
          "ldexp log log10 log1p log2 logb modf scalbn scalbln scalb cbrt fabs hypot pow sqrt erf erfc lgamma tgamma "
          "gamma ceil floor nearbyint rint lrint llrint round lround llround trunc fmod remainder drem remquo copysign "
          "nan nextafter nexttoward fdim fmax fmin fma significand j0 j1 jn y0 y1 yn sincos finite isinf isnan"),
    "isfinite isnormal fpclassify signbit isgreater isgreaterequal isless islessequal islessgreater isunordered "
    "math_errhandling signgam",
    "abort abs atexit at_quick_exit atof atoi atol atoll bsearch calloc div exit free getenv labs ldiv llabs lldiv "
    "malloc mblen mbstowcs mbtowc qsort quick_exit rand realloc srand strtod strtof strtol strtold strtoll strtoul "
    "strtoull system wcstombs wctomb aligned_alloc random srandom initstate setstate drand48 erand48 lrand48 nrand48 "
    "mrand48 jrand48 srand48 seed48 lcong48 rand_r posix_memalign mkstemp mkstemps mkdtemp mktemp realpath setenv "
    "unsetenv putenv clearenv alloca valloc reallocarray getloadavg ecvt fcvt gcvt a64l l64a on_exit getsubopt",
    "memcpy memmove memset memcmp memchr strcpy strncpy strcat strncat strcmp strncmp strcoll strxfrm strchr strrchr "
    "strspn strcspn strpbrk strstr strtok strlen strerror strdup strndup stpcpy stpncpy strnlen strtok_r strsignal "
    "memccpy bzero bcopy bcmp index rindex strcasecmp strncasecmp ffs ffsl ffsll strsep strerror_r explicit_bzero "
    "mempcpy memrchr rawmemchr strchrnul",
    "memrefCopy")  # what MLIR's lowering to LLVM calls besides malloc and free
# the names the generated code itself defines: locals and parameters, the prelude's helpers and types, our macros
_T = r"(?:b|[iu](?:8|16|32|64)|f16|bf16|f32|f64)"
_C_OURS = re.compile(
    r"(?:data|unused|v|acc|ridx|reg|gidx|gsize|gid|lidx|lmem|var|slot)\d+(?:_\d+)?|core_id|core_count"
    rf"|(?:idiv|mod|f2i|max|load|store)_{_T}(?:x\d+)?|bitcast_{_T}_{_T}|[fiu](?:8|16|32|64)x\d+"
    r"|half|bf16|uopir_half|f32_bits|f32_from_bits|f16_to_f32|f32_to_f16|f64_to_f32_odd|f64_to_f16|bf16_round"
    r"|bf16_from_f64|f64_sticky_[iu]64|uopir\w*|UOPIR\w*"
    r"|\w+_t"  # type names (stdint's, POSIX reserves the suffix)
    # macros: NAN, INT8_MIN, HUGE_VAL, M_PI, CLK_LOCAL_MEM_FENCE (capitals; a kernel's E_16 is none: no letter after _)
    r"|[A-Z][A-Z0-9_]*_[A-Z0-9_]*[A-Z][A-Z0-9_]*|NAN|INFINITY|NULL|EOF|MAXFLOAT")
_OPENCL = _words(
    "kernel global local constant private generic read_only write_only read_write uniform pipe half uchar ushort uint "
    "ulong quad complex imaginary vec_step image1d_t image2d_t image3d_t sampler_t event_t",
    "mad clamp mix step smoothstep sign cross dot distance length normalize degrees radians abs_diff add_sat hadd "
    "rhadd mad_hi mad_sat max min mul_hi rotate sub_sat upsample popcount clz ctz mad24 mul24 select bitselect "
    "shuffle shuffle2 any all printf barrier prefetch wait_group_events mem_fence read_mem_fence write_mem_fence "
    "maxmag minmag pown powr rootn rsqrt sinpi cospi tanpi acospi asinpi atanpi atan2pi fract isequal isnotequal "
    "isordered enqueue_kernel")
_OPENCL_RE = re.compile(
    r"(?:bool|char|uchar|short|ushort|int|uint|long|ulong|half|float|double|quad)(?:2|3|4|8|16)"
    r"|(?:get|as|convert|vload|vstore|vloada|vstorea|native|half|fast|atomic|atom|async|read|write|work_group"
    r"|sub_group|to|is)_\w*|vload\w*|vstore\w*")
_CUDA = _words(
    "alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class "
    "compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype "
    "default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline "
    "int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register "
    "reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template "
    "this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t "
    "while xor xor_eq final override import module",
    "threadIdx blockIdx blockDim gridDim warpSize dim3 half half2 bfloat16 texture surface std cuda nvcuda "
    "cooperative_groups min "
    "max printf assert clock clock64 saturate fdividef rsqrt rsqrtf rcbrt rcbrtf sinpi sinpif cospi cospif "
    "sincospi sincospif normcdf normcdff normcdfinv normcdfinvf erfinv erfinvf erfcinv erfcinvf erfcx erfcxf rnorm "
    "rnormf norm normf norm3d norm3df norm4d norm4df rhypot rhypotf cyl_bessel_i0 cyl_bessel_i0f cyl_bessel_i1 "
    "cyl_bessel_i1f")
_CUDA_RE = re.compile(
    r"(?:char|uchar|short|ushort|int|uint|long|ulong|longlong|ulonglong|float|double)[1-4]"
    r"|atomic\w*|make_\w+|cuda[A-Z]\w*|nv_\w+|tex[A-Z0-9]\w*|surf[A-Z0-9]\w*"
    r"|h2?(?:sqrt|rsqrt|rcp|log|log2|log10|exp|exp2|exp10|cos|sin|trunc|ceil|floor|rint|tanh|abs|max|min|fma|add|sub"
    r"|mul|div|neg|eq|ne|lt|le|gt|ge|equ|neu|ltu|leu|gtu|geu|isnan|isinf)(?:_\w+)?")


def _c_reserved(name: str) -> bool:
    return name in _C_KEYWORDS or name in _LIBC or _C_OURS.fullmatch(name) is not None


# ---- identifiers -----------------------------------------------------------------------------------------------------
def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _mangle(name: str, reserved_in_language: bool) -> str:
    """`name` kept when it is ordinary and not reserved, else stem + `_h` + digest (see the module docstring)."""
    if (len(name) <= MAX_PLAIN and _PLAIN.fullmatch(name) and not _MANGLED.fullmatch(name)
            and not reserved_in_language):
        return name
    stem = _NOT_ALNUM.sub("_", name)[:_STEM].strip("_")
    if not stem[:1].isalpha():
        stem = "k_" + stem if stem else "k"
    return f"{stem}_h{_digest(name)}"


def c_ident(name: str) -> str:
    """`name` as a C identifier (a kernel function or a variable parameter): no keyword, no name of the headers a
    kernel includes, none of the generated code's locals, helpers or macros."""
    return _mangle(name, _c_reserved(name))


def opencl_ident(name: str) -> str:
    """`name` as an OpenCL C identifier: C's rule, plus OpenCL's keywords, types and built-in functions."""
    return _mangle(name, _c_reserved(name) or name in _OPENCL or _OPENCL_RE.fullmatch(name) is not None)


def cuda_ident(name: str) -> str:
    """`name` as a CUDA C++ identifier: C's rule, plus C++ keywords and CUDA's built-in variables, types and
    functions (cuda_fp16.h's and cuda_bf16.h's included)."""
    return _mangle(name, _c_reserved(name) or name in _CUDA or _CUDA_RE.fullmatch(name) is not None)


def llvm_ident(name: str) -> str:
    """`name` as an LLVM IR function name: C's rule, since the function is a host symbol found through ctypes (and
    the `c` device's in-process tier renders the same program both ways)."""
    return c_ident(name)


def mlir_ident(name: str) -> str:
    """`name` as an MLIR symbol (`func.func @name`): C's rule, since the function is lowered through LLVM to a host
    symbol the cpu runtime calls."""
    return c_ident(name)


# ---- comments and strings --------------------------------------------------------------------------------------------
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9_.\-]*")


def c_string(text: str) -> str:
    """`text` as a C string literal, quotes included: printable ASCII as itself but for `"`, `\\` and `?` (no
    trigraph), each other byte of its UTF-8 as a three-digit octal escape (which, unlike `\\x`, cannot swallow a
    following hex digit)."""
    out = ['"']
    for b in text.encode("utf-8", "surrogatepass"):
        if b in b'"\\?':
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def c_comment(text: str) -> str:
    """`text` for a C, OpenCL C or CUDA comment (`/* */` or `//`): a plain name as it is, anything else as its
    c_string with `*/` and `/*` broken, so the comment can neither end nor nest early."""
    if _PLAIN_TEXT.fullmatch(text) and text:
        return text
    return c_string(text).replace("*/", "*\\/").replace("/*", "/\\*")


def llvm_string(text: str) -> str:
    """`text` as an LLVM IR quoted string (a quoted name, `c"..."` data or a metadata string), as LLVM prints one:
    printable ASCII as itself but for `"` (`\\22`) and `\\` (`\\\\`), each other byte of its UTF-8 as `\\XX`."""
    out = ['"']
    for b in text.encode("utf-8", "surrogatepass"):
        out.append("\\\\" if b == 0x5C else chr(b) if 0x20 <= b < 0x7F and b != 0x22 else f"\\{b:02X}")
    out.append('"')
    return "".join(out)


def llvm_comment(text: str) -> str:
    """`text` for a `;` comment of LLVM IR: a plain name as it is, anything else as its llvm_string (printable
    ASCII: no line break can end the comment)."""
    return text if _PLAIN_TEXT.fullmatch(text) and text else llvm_string(text)


def mlir_text(text: str) -> str:
    """`text` as the value of an MLIR string attribute: xDSL's printer escapes quotes, backslashes and every byte
    that is not printable ASCII (`\\0A`); only a lone surrogate, which no UTF-8 text holds, becomes U+FFFD first."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
