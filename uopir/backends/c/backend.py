"""The C backend: device programs rendered to C, compiled by the system compiler, run through ctypes on host memory.

    graph --default{target=c}--> schedule of tensor.calls whose regions are device.programs
          --CRenderer--> C --CCompiler (disk cache)--> .so --CRuntime (ctypes)--> kernels run on numpy buffers

Its target description is the host cpu's (`host_cpu("c")`: vector width from the cpu flags, cores), registered as
`c` when uopir.backends loads.
"""
from __future__ import annotations

import os

from uopir.backends.c.compiler import CCompiler
from uopir.backends.c.renderer import CRenderer
from uopir.backends.c.runtime import CRuntime, PooledHostAllocator
from uopir.backends.interface import Backend, Buffer, Program
from uopir.backends.realize import realize
from uopir.ir.dtype import dtypes
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.target import Target, host_cpu, target

__all__ = ["CBackend", "PIPELINE", "c_target", "threads"]

PIPELINE = "default{target=c}"
THREADS_ENV = "UOPIR_THREADS"


def threads() -> int:
    """How many cores a parallel kernel is split across: $UOPIR_THREADS, else the cores of the target."""
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"${THREADS_ENV} must be a positive integer, got {env!r}") from None
    return target("c").threads


def _debug_level() -> int:
    v = os.environ.get("UOPIR_DEBUG", "").strip()
    try:
        return int(v) if v else 0
    except ValueError:
        return 1


def c_target() -> Target:
    """The C target: the host cpu (its vector width and cores); every core op is native (the prelude covers the
    ones C lacks). The register budget of a kernel's upcasts is half the vector registers as f32 accumulators: 16
    with 64-byte vectors (AVX-512 has 32 registers), else 8 (AVX2 has 16); at least eight independent accumulators
    hide the latency of a vector add."""
    t = host_cpu("c")
    regs = 16 if t.max_vector_bytes >= 64 else 8
    return t.derive(max_upcast=max(t.max_upcast, regs * t.vector_width(dtypes.float32)))


class CBackend(Backend):
    """Compiles device programs to C with the system compiler and runs them on host buffers."""

    device = "c"
    pipeline = PIPELINE

    def __init__(self, compiler: CCompiler | None = None):
        self.target = target("c")
        self.renderer = CRenderer()
        self.compiler = compiler if compiler is not None else CCompiler()
        self.allocator = PooledHostAllocator(self.device)
        self.runtime = CRuntime(self._compile_no_restrict, threads=threads())

    @property
    def available(self) -> bool:
        return self.compiler.available

    @property
    def reason(self) -> str:
        return "no C compiler found (set $CC or install cc or clang)"

    def _compile_no_restrict(self, program: UOp) -> bytes:
        return self.compiler.compile_cached(CRenderer(restrict=False).render(program))

    def compile(self, program: UOp, name: str | None = None) -> Program:
        """Render, compile (through the disk cache) and load one device.program. `UOPIR_DEBUG=4` prints the C
        source of each kernel compiled, `=6` its device program too."""
        if not self.available:
            raise RuntimeError(f"device 'c' cannot compile programs: {self.reason}")
        src = self.renderer.render(program)
        level = _debug_level()
        if level >= 6:
            print(f"// device program of kernel {name or program.arg}\n{print_ir(program)}", flush=True)
        if level >= 4:
            print(f"// C source of kernel {name or program.arg}\n{src}", flush=True)
        return self.runtime.load(name or program.arg, program, src, self.compiler.compile_async(src))

    def realize(self, root: UOp) -> Buffer:
        """The value of a tensor-level graph: lowered by `default{target=c}`, its kernels compiled and run one by one
        (uopir.backends.realize: schedule cache, UOPIR_DEBUG lines)."""
        return realize(self, root)
