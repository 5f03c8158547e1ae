"""The C-style renderer for gpu languages: the shared C-style walk and rows (uopir.backends.codegen.cstyle), lane
expressions and exact-semantics helpers, with the gpu rows (hardware ids, local memory, barriers) and what differs
between C dialects (OpenCL C, CUDA C) taken from their `Language` values.

The walk, every ALU/cast/load/store expression and the prelude helpers are C's (uopir.backends.codegen.cstyle,
uopir.backends.c); a `Language` says only how the dialect spells what C spells differently:

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
- vectors: where the language has vector types (`Language.vector_lanes`: OpenCL's float4, ...), f32/f64 vectors of
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

from uopir.backends.codegen.clanes import Lanes
from uopir.backends.codegen.cprelude import Helper, prelude
from uopir.backends.codegen.cstyle import CSTYLE_ROWS, CEmitter, CPtr, CStyleRenderer, Language
from uopir.backends.codegen.program import kernel_signature, op_error
from uopir.backends.codegen.walk import Row, refuse
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["Language", "GpuRenderer", "GpuEmitter", "GPU_ROWS", "kernel_name"]


class GpuEmitter(CEmitter):
    """The C emitter whose helpers come from the language first (and their dependencies too)."""

    def __init__(self, lang: Language):
        super().__init__(lang, restrict=False)
        self.locals: list[str] = []  # local-memory declarations, placed at the kernel's top

    def pack(self, v: Lanes, d: DType) -> str:
        """A vector expression of v's lanes, as the language's vector literal `(float4)(a, b, c, d)` (parentheses,
        not braces: the loads and stores are macros, whose arguments split at commas outside parentheses)."""
        if v.vec is not None or not self.lang.vector_lanes:
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


# ---- the rows a gpu language spells its own way ------------------------------------------------------------------
def _local(em: GpuEmitter, u: UOp, escapes: bool) -> None:
    if u.dtype.size <= 0:
        raise op_error(u, f"local memory needs a size (ptr<T, local, N>), got {u.dtype}")
    name = f"lmem{u.arg}"
    em.locals.append(em.lang.local.format(t=em.ctype(u.dtype.base), name=name, n=u.dtype.size))
    em.vals[u] = CPtr(name, "0", None, u.dtype)


def _barrier(em: GpuEmitter, u: UOp, escapes: bool) -> None:
    em.emit(em.lang.barrier)


def _after(em: GpuEmitter, u: UOp, escapes: bool) -> None:
    em.vals[u] = em.vals[u.operands.ptr]  # the same pointer; its place in the program orders the reads


def _wmma(em: GpuEmitter, u: UOp, escapes: bool) -> None:
    raise op_error(u, f"the {em.lang.title} backend cannot render device.wmma: tensor cores are not supported yet")


def _special(em: GpuEmitter, u: UOp, escapes: bool) -> None:
    """A hardware id: the language's id expression; a global id returns early past its size."""
    kind, dim = u.arg
    prefix = {"global_id": "gidx", "group_id": "gid", "local_id": "lidx"}[kind]
    name = f"{prefix}{dim}"
    if name in em.ids:
        raise op_error(u, f"two device.special {kind} ids on dim {dim}")
    em.ids.append(name)
    size = em.scalar(u.operands.size)
    em.emit(f"const int64_t {name} = (int64_t)({em.lang.special(kind, dim)});")
    if kind == "global_id":
        em.emit(f"if ({name} >= {size}) return;")
    em.vals[u] = Lanes([name])


GPU_ROWS: dict[OpDef, Row] = {**CSTYLE_ROWS, K.LOCAL: _local, D.BARRIER: _barrier, D.AFTER: _after, D.WMMA: _wmma,
                              D.SPECIAL: _special, D.FMA: refuse}  # fma: gpu targets do not contract


class GpuRenderer(CStyleRenderer):
    """device.program -> one kernel in a C dialect described by `lang`."""

    rows = GPU_ROWS

    def __init__(self, lang: Language):
        super().__init__(lang, restrict=False)

    def emitter(self) -> CEmitter:
        return GpuEmitter(self.lang)

    def render(self, program: UOp) -> str:
        sig = kernel_signature(program, self.ident, self.title)
        em = self.emitter()
        assert isinstance(em, GpuEmitter)
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


# ---- what the runtime needs from a program ---------------------------------------------------------------------------
def kernel_name(program: UOp, lang: Language) -> str:
    """The name the rendered kernel has: the program's, through the language's identifier rule."""
    return kernel_signature(program, lang.ident, lang.title).name
