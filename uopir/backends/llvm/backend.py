"""The LLVM backend: device programs rendered to LLVM IR, optimized and compiled in process by llvmlite, run
through ctypes on host memory.

    graph --default{target=llvm}--> schedule of tensor.calls whose regions are device.programs
          --LLVMRenderer--> LLVM IR --LLVMCompiler (O3, host cpu; disk cache)--> object code
          --LLVMRuntime (MCJIT + ctypes)--> kernels run on numpy buffers

Available when llvmlite imports (the `test` extra installs it). Its target description is the host cpu's
(`host_target("llvm")`, as the C backend's), registered as `llvm` when uopir.backends loads.
"""
from __future__ import annotations

from functools import partial

from uopir.backends.cpu.runtime import PooledHostAllocator, host_target
from uopir.backends.cpu.runtime import threads as cpu_threads
from uopir.backends.interface import Backend, Buffer, Program
from uopir.backends.llvm.compiler import LLVMCompiler
from uopir.backends.llvm.renderer import LLVMRenderer
from uopir.backends.llvm.runtime import LLVMRuntime
from uopir.backends.realize import print_compiled, realize
from uopir.ir.uop import UOp
from uopir.passes.target import Target, target

__all__ = ["LLVMBackend", "PIPELINE", "llvm_target"]

PIPELINE = "default{target=llvm}"


def llvm_target() -> Target:
    """The LLVM target: the host cpu (uopir.backends.cpu.runtime.host_target); every core op is native; on an
    AVX-512 host a vector of any lane count stays one value for LLVM to legalize (`masked_vectors`)."""
    t = host_target("llvm")
    return t.derive(masked_vectors=t.max_vector_bytes >= 64)


class LLVMBackend(Backend):
    """Compiles device programs to LLVM IR, optimizes and JIT-compiles them with llvmlite, runs them on host
    buffers."""

    device = "llvm"
    pipeline = PIPELINE

    def __init__(self, compiler: LLVMCompiler | None = None):
        self.target = target("llvm")
        self.compiler = compiler if compiler is not None else LLVMCompiler()
        self.renderer = self._renderer(noalias=True)
        self.allocator = PooledHostAllocator(self.device)
        self.runtime = LLVMRuntime(self._compile_aliasing, threads=cpu_threads("llvm"))

    def _renderer(self, noalias: bool) -> LLVMRenderer:
        h = self.compiler.host
        if h is None:
            return LLVMRenderer(noalias)
        return LLVMRenderer(noalias, cpu=h.cpu, features=h.features, wide_vectors=h.avx512)

    @property
    def available(self) -> bool:
        return self.compiler.available

    @property
    def reason(self) -> str:
        return "llvmlite is not installed (pip install llvmlite, or the test extra)"

    def _compile_aliasing(self, program: UOp) -> tuple[str, bytes]:
        src = self._renderer(noalias=False).render(program)
        return src, self.compiler.compile_cached(src)

    def compile(self, program: UOp, name: str | None = None) -> Program:
        """Render, compile (through the disk cache, in the background on a miss) and load one device.program.
        `UOPIR_DEBUG=4` prints the LLVM IR of each kernel compiled, `=6` its device program too."""
        if not self.available:
            raise RuntimeError(f"device 'llvm' cannot compile programs: {self.reason}")
        src = self.renderer.render(program)
        print_compiled(program, name or program.arg, src, "LLVM IR", ";")
        return self.runtime.load(name or program.arg, program, src, self.compiler.compile_async(src),
                                 partial(self.compiler.recompile, src))

    def realize(self, root: UOp) -> Buffer:
        """The value of a tensor-level graph: lowered by `default{target=llvm}`, its kernels compiled and run one by
        one (uopir.backends.realize)."""
        return realize(self, root)
