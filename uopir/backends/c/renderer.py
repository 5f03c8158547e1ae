"""The C renderer: one linearized `device.program` -> one C function (plus the prelude helpers it uses).

The program's operands are its ops in execution order (what device-linearize makes). The renderer walks them once:
`device.loop`/`device.endloop` and `device.if`/`device.endif` open and close C blocks, every other value becomes a
typed local assigned where the program computes it, so loads, stores and accumulator updates happen in exactly the
program's order. Constants, parameters, variables, pointers (`kernel.index`), `core.gep` and `core.vectorize` have no
statement of their own: they are expressions used in place. An accumulator (`device.acc`) is a variable declared
where the program declares it; reading it, or the result of a `device.accstore`, reads its current value.

Vectors of f32/f64 and of integers (8..64 bytes) live in GCC/clang vector types (`f32x16`, `i32x16`): loads and
stores through memcpy (any alignment), accumulators, the ALU, compares (bool vectors as masks), selects, shifts,
casts and bitcasts as vector code, each lane exactly the scalar op (uopir.backends.codegen.cvector; an op wider than
64 bytes in 64-byte pieces). Other vectors (f16, bf16, bool in memory), and the ops that keep their per-lane rules
(integer division, float -> int casts), are rendered lane by lane (one scalar local per lane, `v[i]` to read a lane
of a vector type). A value used after the block that computes it has closed is declared at the top of the
function and assigned in place (it keeps the value of the last iteration, as in the program).

A global id (`device.special {kind = global_id}`, what kernel-optimize's `global` axis becomes) is a loop over the
rest of the program; the first one is split across cores: the function takes `core_id, core_count` and runs its
contiguous share of the ids (see runtime.py). Local ids (workgroups) are an error on a cpu.

Function signature: `void NAME(T0* restrict data0, ..., int64_t var..., [int64_t core_id, int64_t core_count])`:
the `kernel.param` pointers in index order, then the `kernel.var` values in name order (`kernel_signature`). NAME and
the variables' parameters are the names of the IR made identifiers by uopir.backends.codegen.names (a comment above
the function says what a changed name was). Ops that C on a cpu cannot run (local ids, barriers, tensor cores, local
memory) are located errors.
"""
from __future__ import annotations

from uopir.backends.codegen.clanes import Lanes
from uopir.backends.codegen.cprelude import Helper, prelude, vector_fma
from uopir.backends.codegen.cstyle import CSTYLE_ROWS, CEmitter, CPtr, CStyleRenderer, Language
from uopir.backends.codegen.names import c_ident
from uopir.backends.codegen.program import STACK_SCRATCH, KernelSignature, check_special
from uopir.backends.codegen.program import kernel_signature as _signature
from uopir.backends.codegen.walk import CPU_REFUSES, Row
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["CRenderer", "CEmitter", "CPtr", "C_LANGUAGE", "C_ROWS", "KernelSignature", "kernel_signature"]

# C on the host: GCC vector types for f32/f64 vectors of 2..64 bytes, the C headers, ids as loops
C_LANGUAGE = Language(name="c", title="C", vector_lanes=None, gnu_vectors=True, ident=c_ident)


def kernel_signature(program: UOp, backend: str = "C") -> KernelSignature:
    """How the C function of `program` is called; its name is the program's through c_ident."""
    return _signature(program, c_ident, backend)


# GCC is superlinear in a function's size, mostly in register allocation once many values are live (an unrolled
# kernel's lanes). A kernel over HUGE_KERNEL statements is compiled at -O1 with one-region IRA (HUGE_PRAGMA): the
# 9,380-statement max-pool backward kernel of a small CNN compiles in 3.7 s instead of 9.3 s (-O1) / 11.8 s (-O2) and
# runs as fast as at -O2 (14-15 ms CPU); at -O0 (1.4 s) it ran 134 ms, 6-20x slower than the LLVM tier 0 it replaces
# (uopir.backends.c.tiered). Over GIANT_KERNEL statements, -O0 (GCC took minutes on such kernels).
HUGE_KERNEL = 2000
HUGE_PRAGMA = '#pragma GCC optimize ("O1", "ira-region=one")'
GIANT_KERNEL = 20000


# ---- the rows C on a cpu spells its own way ----------------------------------------------------------------------
def _local(em: CEmitter, u: UOp, escapes: bool) -> None:
    """kernel.local, never zeroed (it holds no value until the kernel stores one, as on a GPU: pack's copy writes its
    whole panel before the tile reads it): a stack array up to STACK_SCRATCH bytes; a larger scratch buffer
    (kernel-optimize's packed panels) is 64-byte aligned heap memory per call, freed at return (nothing is kept past
    a launch: a cache of buffers per kernel would hold each big panel for the life of the process)."""
    name, t = em.fresh("reg"), em.ctype(u.dtype.base)
    em.vals[u] = CPtr(name, "0", None, u.dtype)
    nbytes = u.dtype.size * u.dtype.base.itemsize
    if nbytes <= STACK_SCRATCH:
        em.hoisted.append(f"{t} {name}[{max(u.dtype.size, 1)}] __attribute__((aligned(64)));")
        return
    em.use("stdlib", Helper("", includes=("stdlib.h",)))
    em.hoisted.append(f"{t}* {name} = ({t}*)aligned_alloc(64, {-(-nbytes // 64) * 64});")
    em.hoisted.append(f"if (!{name}) abort();")
    em.cleanup.append(f"free({name});")


def _special(em: CEmitter, u: UOp, escapes: bool) -> None:
    """A global (or group) id on a cpu: a loop over the rest of the program. The first one in the program is
    split across cores: core `core_id` of `core_count` runs its contiguous share of the ids."""
    _, dim = check_special(u, em.who, em.innermost(), em.id_dims)
    size = em.scalar(u.operands.size)
    name = f"gidx{dim}"
    em.ids.append(name)
    if len(em.ids) == 1:
        n = f"gsize{dim}"
        em.emit(f"const int64_t {n} = {size};")
        em.emit(f"for (int64_t {name} = {n} * core_id / core_count; {name} < {n} * (core_id + 1) / core_count; "
                f"{name}++) {{")
    else:
        em.emit(f"for (int64_t {name} = 0; {name} < {size}; {name}++) {{")
    em.depth += 1
    em.vals[u] = Lanes([name])


def _fma(em: CEmitter, u: UOp, escapes: bool) -> None:
    """device.fma (f32, rounded once): `__builtin_fmaf` per lane (one instruction with -march=native on a cpu with
    FMA, a libm call elsewhere), a vector type's helper (cprelude.vector_fma) for a vector."""
    srcs = [em.lanes(s) for s in u.src]
    if u.dtype.count > 1 and em.lang.any_vector_ok(u.dtype):
        name, helper = vector_fma(u.dtype)
        em.use(name, helper)
        em.set_vector(u, f"{name}({', '.join(em.pack(x, u.dtype) for x in srcs)})", escapes)
        return
    em.set(u, [f"__builtin_fmaf({', '.join(x.lane(i) for x in srcs)})" for i in range(u.dtype.count)], escapes)


C_ROWS: dict[OpDef, Row] = {**CSTYLE_ROWS, **CPU_REFUSES, K.LOCAL: _local, D.SPECIAL: _special, D.FMA: _fma}


class CRenderer(CStyleRenderer):
    """device.program -> C source text. `restrict=False` renders the variant for buffers that alias each other."""

    language = "c"
    title = "C"  # the backend's name in error messages
    rows = C_ROWS

    def __init__(self, restrict: bool = True):
        super().__init__(C_LANGUAGE, restrict)

    def render(self, program: UOp) -> str:
        sig = kernel_signature(program, self.title)
        em = self.emitter()
        self.walk(em, program)
        args = []
        for i, d in enumerate(sig.params):
            if d is None:
                args.append(f"void* unused{i}")
            else:
                args.append(f"{em.ctype(d)}* {'restrict ' if self.restrict else ''}data{i}")
        args.extend(f"int64_t {self.ident(v)}" for v in sig.vars)
        if sig.parallel:
            args.extend(("int64_t core_id", "int64_t core_count"))
        while em.depth > 1:  # the loops of global ids span the rest of the program
            em.depth -= 1
            em.emit("}")
        for line in em.cleanup:
            em.emit(line)
        head = prelude(em.helpers)
        if len(em.lines) > GIANT_KERNEL:
            head += (f"/* {len(em.lines)} statements: compiled without optimization (GCC's passes take minutes on "
                     f"functions this large) */\n#pragma GCC optimize (\"O0\")\n")
        elif len(em.lines) > HUGE_KERNEL:
            head += (f"/* {len(em.lines)} statements: -O1 with one-region register allocation (GCC is superlinear "
                     f"in a function's size) */\n{HUGE_PRAGMA}\n")
        body = [*("  " + h for h in em.hoisted), *em.lines]
        return f"{head}\n{self.renamed(program, sig)}void {sig.name}({', '.join(args) or 'void'}) {{\n" \
            + "\n".join(body) + ("\n" if body else "") + "}\n"
