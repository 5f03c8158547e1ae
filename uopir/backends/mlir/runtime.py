"""The MLIR runtime: the llvm backend's JIT and kernel call, for object code compiled from exported MLIR.

The object code (compiler.py) is linked into the process's one MCJIT engine (uopir.backends.llvm.runtime.JIT) and
called through ctypes by `LLVMKernel` (uopir.backends.cpu.runtime's HostKernel: pointers in kernel.param order, the
variables in name order; compiler.py's wrapper turns that call into MLIR's). The kernel's symbol is `NAME.DIGEST` of
its MLIR text. An exported global id is an `scf.parallel` that one call runs whole (the function takes no core
arguments). The exported functions carry no no-alias marks, so the one binary also serves launches whose buffers
overlap.
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from uopir.backends.cpu.program import kernel_signature
from uopir.backends.cpu.runtime import HostRuntime
from uopir.backends.interface import Program
from uopir.backends.llvm.compiler import symbol
from uopir.backends.llvm.runtime import JIT, LLVMKernel
from uopir.backends.mlir.compiler import entry_name
from uopir.ir.uop import UOp

__all__ = ["MLIRRuntime"]


class MLIRRuntime(HostRuntime):
    """Loads MLIR kernels (object code) into the llvm backend's JIT and runs them on host buffers."""

    device = "mlir"

    def __init__(self, threads: int = 1):
        self.threads = threads  # cores a parallel kernel is split across

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | Future[bytes] | None) -> Program:
        """A Program for the object code of the MLIR `source` (`binary` may be a Future of a compile still running)."""
        if binary is None or source is None:
            raise ValueError("the MLIR runtime loads object code compiled from MLIR text (source and binary)")
        fname = entry_name(source)
        # a global id is an scf.parallel in the function (it takes no core arguments): one call runs all of it
        sig = replace(kernel_signature(program, name=lambda _: fname, backend="mlir"), parallel=False)
        sym = symbol(fname, source)

        def same_binary() -> Any:  # no noalias marks: the kernel itself serves overlapping buffers
            return JIT.get().address(sym, binary.result() if isinstance(binary, Future) else binary)

        prog = Program(name, self.device, program, source, None, None)  # type: ignore[arg-type]

        def got(b: bytes) -> None:
            prog.binary = b

        prog.entry = LLVMKernel(sig, sym, binary, same_binary, self.threads, got)
        return prog
