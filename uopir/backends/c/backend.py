"""The C backend: device programs rendered to C, compiled by the system compiler, run through ctypes on host memory.

    graph --default{target=c}--> schedule of tensor.calls whose regions are device.programs
          --CRenderer--> C --CCompiler (disk cache)--> .so --CRuntime (ctypes)--> kernels run on numpy buffers

A kernel not in the disk cache runs compiled in process by LLVM until the C compiler, running in the background, has
built its binary (tiered compile: uopir.backends.c.tiered; `UOPIR_C_TIERED=0` turns it off).

Its target description is the host cpu's (`host_cpu("c")`: vector width from the cpu flags, cores), registered as
`c` when uopir.backends loads.
"""
from __future__ import annotations

import threading
from functools import partial

from uopir.backends.c.compiler import QUICK_FLAGS, CCompiler
from uopir.backends.c.renderer import CRenderer
from uopir.backends.c.runtime import CRuntime, PooledHostAllocator
from uopir.backends.c.tiered import cache_is_cold, prefetch, tier0_address, tiered_enabled
from uopir.backends.cpu.runtime import host_target
from uopir.backends.cpu.runtime import threads as cpu_threads
from uopir.backends.estimates import estimate
from uopir.backends.interface import Backend, Buffer, Program
from uopir.backends.realize import print_compiled, realize
from uopir.ir.uop import UOp
from uopir.passes.target import Target, target

__all__ = ["CBackend", "PIPELINE", "LOWERING", "c_target", "threads", "QUICK_WORK", "quick"]

PIPELINE = "default{target=c}"
# what realize runs: the same passes kernel by kernel, so each kernel's compile starts while the next one lowers
LOWERING = "default{target=c per-kernel=true}"
# A kernel whose launch does fewer operations and moves fewer bytes than this (uopir.backends.estimates) compiles
# with QUICK_FLAGS (-O1): it runs in well under a millisecond either way, and the compile, which a first realize
# waits for, is what costs. A matmul of 256x256 and more, or an elementwise op over 4M floats, gets -O2.
QUICK_WORK = 1 << 24


def quick(program: UOp) -> bool:
    """Whether `program` (a device.program) is compiled with QUICK_FLAGS: its work at one launch is below
    QUICK_WORK (a program whose sizes depend on variables is not: its work is unknown)."""
    try:
        est = estimate(program)
    except Exception:  # noqa: BLE001 - a size that needs a variable's value
        return False
    return max(est.flops, est.bytes) < QUICK_WORK


def threads() -> int:
    """How many cores a parallel kernel is split across: $UOPIR_THREADS, else the cores of the target."""
    return cpu_threads("c")


def c_target() -> Target:
    """The C target: the host cpu (uopir.backends.cpu.runtime.host_target); every core op is native (the prelude
    covers the ones C lacks)."""
    return host_target("c")


class CBackend(Backend):
    """Compiles device programs to C with the system compiler and runs them on host buffers."""

    device = "c"
    pipeline = PIPELINE
    lowering = LOWERING

    def __init__(self, compiler: CCompiler | None = None, tiered: bool | None = None):
        # tiered: whether a kernel not in the disk cache first runs compiled by LLVM in process (None: unless
        # $UOPIR_C_TIERED is off or llvmlite is missing, and only with the default compilers: a backend given its
        # own compiler runs that compiler's binaries from the first launch)
        self.tiered = tiered if tiered is not None else (None if compiler is None else False)
        self.target = target("c")
        self.renderer = CRenderer()
        self.compiler = compiler if compiler is not None else CCompiler()
        self.quick_compiler = CCompiler(self.compiler.cmd, QUICK_FLAGS) if compiler is None else self.compiler
        self.allocator = PooledHostAllocator(self.device)
        self.runtime = CRuntime(self._compile_no_restrict, threads=threads())
        if self.tiered is not False and tiered_enabled() and cache_is_cold():
            prefetch()  # no C binary cached yet: the first kernels will run on tier 0, which needs llvmlite
        if self.compiler.available:  # the compiler's identity (`cc --version`, a subprocess) names the cache folder:
            # find it while the first program is still being lowered, not when its first kernel is compiled
            threading.Thread(target=lambda: self.compiler.name, name="uopir-cc-identity", daemon=True).start()

    @property
    def available(self) -> bool:
        return self.compiler.available

    @property
    def reason(self) -> str:
        return "no C compiler found (set $CC or install cc or clang)"

    def _compile_no_restrict(self, program: UOp) -> bytes:
        return self.compiler.compile_cached(CRenderer(restrict=False).render(program))

    def compile(self, program: UOp, name: str | None = None) -> Program:
        """Render, compile (through the disk cache; -O1 for a kernel that does little work, see `quick`) and load
        one device.program. Tiered (see __init__), a kernel not in the cache runs compiled in process by LLVM
        until its C binary is built (uopir.backends.c.tiered). `UOPIR_DEBUG=4` prints the C source of each kernel
        compiled, `=6` its device program too."""
        if not self.available:
            raise RuntimeError(f"device 'c' cannot compile programs: {self.reason}")
        src = self.renderer.render(program)
        print_compiled(program, name or program.arg, src, "C source")
        cc = self.quick_compiler if quick(program) else self.compiler
        if self.tiered is True or (self.tiered is None and tiered_enabled()):
            binary = cc.cached(src)
            if binary is None:
                prefetch()
                return self.runtime.load_tiered(name or program.arg, program, src, cc.compile_detached(src),
                                                lambda: tier0_address(program))
            return self.runtime.load(name or program.arg, program, src, binary, partial(cc.recompile, src))
        return self.runtime.load(name or program.arg, program, src, cc.compile_async(src), partial(cc.recompile, src))

    def realize(self, root: UOp) -> Buffer:
        """The value of a tensor-level graph: lowered by `default{target=c}`, its kernels compiled and run one by one
        (uopir.backends.realize: schedule cache, UOPIR_DEBUG lines)."""
        return realize(self, root)
