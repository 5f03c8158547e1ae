"""The C-style renderer for gpu languages: the C renderer's program walk, lane expressions and exact-semantics
helpers, with what differs between C dialects (OpenCL C, CUDA C) taken from a small `Language` description.

The walk, every ALU/cast/load/store expression and the prelude helpers are the C backend's (uopir.backends.c); a
`Language` says only how the dialect spells what C spells differently:

- the kernel's head (`__kernel void` / `extern "C" __global__ void`) and its buffer parameters (`__global T*`),
  bool buffers as bytes where the language forbids bool pointers in a kernel's parameters;
- the hardware ids (`device.special`): `get_global_id(0)` / `blockIdx.x * blockDim.x + threadIdx.x`, ...; a global
  id gets a guard (`if (gidx0 >= n) return;`: a launch may round the grid up), group and local ids do not (their
  launch is exact, so every thread reaches every barrier);
- local memory (`kernel.local`: `__local` / `__shared__` arrays at the kernel's top) and `device.barrier`
  (`barrier(CLK_LOCAL_MEM_FENCE)` / `__syncthreads()`);
- the header that stands in for the C headers (fixed-width integer names, limits, NAN/INFINITY, float function
  names), the helper functions' qualifier (`static inline` / `static __device__ inline`), and helper texts the
  dialect writes better (`as_uint` in OpenCL, cuda_fp16.h / cuda_bf16.h conversions in CUDA);
- vectors: where the language has vector types (`Language.vectors`: OpenCL's float4, ...), f32/f64 vectors of
  2..16 lanes live in them, loaded and stored whole (`vload4`/`vstore4`: a float4 load of 4 contiguous elements);
  other vectors, and every vector in a language without them (CUDA here: its float4 loads need 16-byte alignment),
  are rendered lane by lane, never as GCC vector types.

f16 values ride as their bits (`half` is `#define`d to a 16-bit carrier: `half` is a keyword in OpenCL and a type
of cuda_fp16.h) and bf16 in a float, as in C, so buffers keep numpy's layouts and every op rounds as the semantics
say. Kernels must be compiled without contraction of a*b+c into fma (OpenCL: `#pragma OPENCL FP_CONTRACT OFF`;
CUDA: `--fmad=false`) and with correctly rounded division and sqrt.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from uopir.backends.c.lanes import Lanes
from uopir.backends.c.prelude import Helper, prelude
from uopir.backends.c.prelude import vector_ok as c_vector_ok
from uopir.backends.c.renderer import CEmitter, CPtr, CRenderer
from uopir.backends.codegen.names import c_ident
from uopir.backends.cpu.program import kernel_signature, op_error
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["Language", "GpuRenderer", "kernel_name"]


@dataclass(frozen=True)
class Language:
    """How one C dialect spells the parts of a kernel that differ from C (see the module docstring)."""

    name: str  # the language name of its device.source (`opencl`, `cuda`)
    title: str  # the backend's name in messages (`OpenCL`, `CUDA`)
    kernel_head: str  # before the kernel's name: `__kernel void`
    buffer: str  # a buffer parameter, `{t}` its element type and `{name}` its name: `__global {t}* {name}`
    var_type: str  # a kernel.var parameter's type (64-bit)
    ids: Mapping[str, str]  # special kind -> expression with `{dim}` (0, 1, 2) or `{xyz}` (x, y, z)
    local: str  # a local-memory array at the kernel's top: `__local {t} {name}[{n}];`
    barrier: str  # a workgroup barrier statement
    header: Callable[[str], str]  # the rendered kernel text -> the lines that replace the C headers
    helper_qualifier: str = "static inline"  # what `static inline` of a prelude helper becomes
    helpers: Mapping[str, Helper] = field(default_factory=dict)  # prelude helpers written for this dialect
    bool_buffer: str = "bool"  # element type of a bool buffer parameter
    # f32/f64 vectors of 2..16 lanes in the language's own vector types (its helpers define the C renderer's vector
    # typedefs, loads, stores and max); False: every vector is rendered lane by lane
    vectors: bool = False
    # a program's or variable's name as an identifier of the dialect (uopir.backends.codegen.names)
    ident: Callable[[str], str] = c_ident

    def special(self, kind: str, dim: int) -> str:
        return self.ids[kind].format(dim=dim, xyz="xyz"[dim])


class _GpuEmitter(CEmitter):
    """The C emitter whose helpers come from the language first (and their dependencies too)."""

    def __init__(self, lang: Language):
        super().__init__(restrict=False)
        self.lang = lang
        self.locals: list[str] = []  # local-memory declarations, placed at the kernel's top

    def pack(self, v: Lanes, d: DType) -> str:
        """A vector expression of v's lanes, as the language's vector literal `(float4)(a, b, c, d)` (parentheses,
        not braces: the loads and stores are macros, whose arguments split at commas outside parentheses)."""
        if v.vec is not None or not self.lang.vectors:
            return super().pack(v, d)
        return f"({self.vtype(d)})({', '.join(v.lane(i) for i in range(d.count))})"

    def use(self, name: str, helper: Helper | None = None) -> None:
        if name in self.helpers:
            return
        h = self.lang.helpers.get(name, helper)
        super().use(name, h)
        for dep in self.helpers[name].deps:
            self.use(dep)


_INCLUDE = re.compile(r"#include <[^>]*>\n")




class GpuRenderer(CRenderer):
    """device.program -> one kernel in a C dialect described by `lang`."""

    def __init__(self, lang: Language):
        super().__init__(restrict=False)
        self.lang = lang
        self.language, self.title = lang.name, lang.title
        self.ident = lang.ident  # type: ignore[assignment]

    def vector_ok(self, d: DType) -> bool:  # type: ignore[override]
        """Whether a vector value lives in one of the language's vector types (else lane by lane)."""
        return self.lang.vectors and d.count in (2, 4, 8, 16) and c_vector_ok(d)

    def emitter(self) -> CEmitter:
        return _GpuEmitter(self.lang)

    def render(self, program: UOp) -> str:
        sig = kernel_signature(program, self.ident, self.title)
        em = self.emitter()
        assert isinstance(em, _GpuEmitter)
        self.walk(em, program)
        lang = self.lang
        args = []
        for i, d in enumerate(sig.params):
            t = "uint8_t" if d is None else lang.bool_buffer if d is dtypes.bool else em.ctype(d)
            args.append(lang.buffer.format(t=t, name=f"unused{i}" if d is None else f"data{i}"))
        args.extend(f"{lang.var_type} {self.ident(v)}" for v in sig.vars)
        helpers = _INCLUDE.sub("", prelude(em.helpers)).replace("static inline ", lang.helper_qualifier + " ")
        body = [*("  " + h for h in em.locals), *("  " + h for h in em.hoisted), *em.lines]
        text = f"{lang.kernel_head} {sig.name}({', '.join(args)}) {{\n" + "\n".join(body) + ("\n" if body else "") \
            + "}\n"
        head = lang.header(helpers + text)  # before the renaming comment, whose names the header must not read
        return f"{head}{helpers}\n{self.renamed(program, sig)}{text}"

    def _op(self, em: CEmitter, u: UOp, escapes: bool, blocks: list[UOp]) -> None:
        assert isinstance(em, _GpuEmitter)
        if u.op is K.LOCAL:
            if u.dtype.size <= 0:
                raise op_error(u, f"local memory needs a size (ptr<T, local, N>), got {u.dtype}")
            name = f"lmem{u.arg}"
            em.locals.append(self.lang.local.format(t=em.ctype(u.dtype.base), name=name, n=u.dtype.size))
            em.vals[u] = CPtr(name, "0", None, u.dtype)
        elif u.op is D.BARRIER:
            em.emit(self.lang.barrier)
        elif u.op is D.AFTER:
            em.vals[u] = em.vals[u.src[0]]  # the same pointer; its place in the program orders the reads
        elif u.op is D.WMMA:
            raise op_error(u, f"the {self.title} backend cannot render device.wmma: tensor cores are not supported yet")
        else:
            super()._op(em, u, escapes, blocks)

    def _special(self, em: CEmitter, u: UOp, blocks: list[UOp]) -> None:
        """A hardware id: the language's id expression; a global id returns early past its size."""
        kind, dim = u.arg
        prefix = {"global_id": "gidx", "group_id": "gid", "local_id": "lidx"}[kind]
        name = f"{prefix}{dim}"
        if name in em.ids:
            raise op_error(u, f"two device.special {kind} ids on dim {dim}")
        em.ids.append(name)
        size = self._scalar(em, u.src[0])
        em.emit(f"const int64_t {name} = (int64_t)({self.lang.special(kind, dim)});")
        if kind == "global_id":
            em.emit(f"if ({name} >= {size}) return;")
        em.vals[u] = Lanes([name])


# ---- what the runtime needs from a program ---------------------------------------------------------------------------
def kernel_name(program: UOp, lang: Language) -> str:
    """The name the rendered kernel has: the program's, through the language's identifier rule."""
    return kernel_signature(program, lang.ident, lang.title).name
