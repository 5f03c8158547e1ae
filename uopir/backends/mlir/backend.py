"""The MLIR backend: device programs exported to standard MLIR with xDSL, lowered by LLVM's own MLIR tools, compiled
by llvmlite and run through ctypes on host memory.

    graph --default{target=mlir}--> schedule of tensor.calls whose regions are device.programs
          --export_text (xDSL: func/scf/arith/math/memref/vector)--> MLIR
          --MLIRCompiler (mlir-opt to the llvm dialect, mlir-translate to LLVM IR, llvmlite O3; batched; disk cache)
          --> object code --MLIRRuntime (the llvm backend's MCJIT + ctypes)--> kernels run on numpy buffers

Available when the exporter imports (xDSL), mlir-opt and mlir-translate are found (Debian package mlir-19-tools,
see tools.find_mlir_tool) and llvmlite imports; otherwise `available` is False, `reason` names what is missing and
realize raises with it. `mlir` is a backend, not a Tensor device: a graph runs on it through
`get_backend("mlir").realize(root)` (the differential suite does so). Its target is the host cpu's, as llvm's.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import cache

from uopir.backends.c.backend import quick
from uopir.backends.cpu.runtime import PooledHostAllocator, host_target
from uopir.backends.cpu.runtime import threads as cpu_threads
from uopir.backends.interface import Backend, Buffer, Program
from uopir.backends.mlir.compiler import MLIRCompiler
from uopir.backends.mlir.runtime import MLIRRuntime
from uopir.backends.realize import print_compiled, realize
from uopir.ir.uop import UOp
from uopir.passes.target import Target, target

__all__ = ["MLIRBackend", "PIPELINE", "LOWERING", "mlir_target", "exporter"]

PIPELINE = "default{target=mlir}"
# what realize runs: the same passes kernel by kernel, so each kernel's export and compile start while the next lowers
LOWERING = "default{target=mlir per-kernel=true}"


def mlir_target() -> Target:
    """The MLIR target: the host cpu (uopir.backends.cpu.runtime.host_target), as the llvm backend's."""
    return host_target("mlir")


@cache
def exporter() -> tuple[Callable[[UOp], str] | None, str]:
    """(the text of one device.program's module, "") when the MLIR exporter imports, else (None, why not). The
    module is export_text's for that program without xDSL's verifier, which costs a third of the export (the
    exporter's own tests verify every differential-suite program; mlir-opt verifies what the backend compiles)."""
    try:
        from xdsl.dialects.builtin import ModuleOp

        from uopir.backends.mlir.export import export_function, kernel_signature, print_module
    except ImportError as e:
        missing = "xdsl (pip install xdsl, or the test extra)" if "xdsl" in str(e) else f"the MLIR exporter ({e})"
        return None, missing

    def text(program: UOp) -> str:
        return print_module(ModuleOp([export_function(program, kernel_signature(program).name)]))
    return text, ""


class MLIRBackend(Backend):
    """Exports device programs to MLIR and runs them through mlir-opt, mlir-translate and llvmlite."""

    device = "mlir"
    pipeline = PIPELINE
    lowering = LOWERING

    def __init__(self, compiler: MLIRCompiler | None = None):
        self.target = target("mlir")
        self.compiler = compiler if compiler is not None else MLIRCompiler()
        self.allocator = PooledHostAllocator(self.device)
        self.runtime = MLIRRuntime(threads=cpu_threads("mlir"))

    def missing(self) -> list[str]:
        """What this machine lacks for the backend (empty when it is available)."""
        export, why = exporter()
        return ([] if export is not None else [why]) + self.compiler.missing()

    @property
    def available(self) -> bool:
        return not self.missing()

    @property
    def reason(self) -> str:
        missing = self.missing()
        return "missing " + ", ".join(missing) if missing else ""

    def source(self, program: UOp) -> str:
        """The MLIR text of one device.program (what the compiler takes)."""
        export, why = exporter()
        if export is None:
            raise RuntimeError(f"device 'mlir' cannot export programs: missing {why}")
        return export(program)

    def compile(self, program: UOp, name: str | None = None) -> Program:
        """Export, compile (through the disk cache; on a miss in the background, batched with the other kernels
        being compiled; LLVM at O1 for a kernel that does little work, as the C backend's `quick`) and load one
        device.program. `UOPIR_DEBUG=4` prints the MLIR of each kernel compiled."""
        if not self.available:
            raise RuntimeError(f"device 'mlir' cannot compile programs: {self.reason}")
        src = self.source(program)
        print_compiled(program, name or program.arg, src, "MLIR")
        return self.runtime.load(name or program.arg, program, src, self.compiler.compile_async(src, quick(program)))

    def realize(self, root: UOp) -> Buffer:
        """The value of a tensor-level graph: lowered by `default{target=mlir}`, its kernels compiled and run one by
        one (uopir.backends.realize)."""
        if not self.available:
            raise RuntimeError(f"device 'mlir' cannot run programs: {self.reason}")
        return realize(self, root)
