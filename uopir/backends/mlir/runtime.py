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
from functools import cache
from typing import Any

from uopir.backends.codegen.program import kernel_signature
from uopir.backends.cpu.runtime import HostRuntime
from uopir.backends.interface import Program
from uopir.backends.llvm.compiler import symbol
from uopir.backends.llvm.runtime import JIT, LLVMKernel
from uopir.backends.mlir.compiler import entry_name
from uopir.ir.uop import UOp

__all__ = ["MLIRRuntime"]


# LLVM converts to bfloat with these compiler-rt functions where the cpu has no conversion that keeps subnormals
# (compiler.py turns the flushing ones off); libgcc 12 lacks them, so they are defined here once per process, with
# integer code: round to nearest even (f64 first to a round-to-odd f32, so the result is rounded once), NaN kept quiet
BF16_HELPERS = """
define bfloat @__truncsfbf2(float %x) {
  %b = bitcast float %x to i32
  %nan = fcmp uno float %x, %x
  %hi = lshr i32 %b, 16
  %lsb = and i32 %hi, 1
  %bias = add i32 %lsb, 32767
  %r = add i32 %b, %bias
  %h = lshr i32 %r, 16
  %q = or i32 %hi, 64
  %s = select i1 %nan, i32 %q, i32 %h
  %t = trunc i32 %s to i16
  %o = bitcast i16 %t to bfloat
  ret bfloat %o
}

define bfloat @__truncdfbf2(double %x) {
  %r = fptrunc double %x to float
  %back = fpext float %r to double
  %exact = fcmp oeq double %back, %x
  %ab = call double @llvm.fabs.f64(double %back)
  %ax = call double @llvm.fabs.f64(double %x)
  %away = fcmp ogt double %ab, %ax
  %rb = bitcast float %r to i32
  %down = sub i32 %rb, 1
  %tz = select i1 %away, i32 %down, i32 %rb
  %odd = or i32 %tz, 1
  %ob = select i1 %exact, i32 %rb, i32 %odd
  %o = bitcast i32 %ob to float
  %res = call bfloat @__truncsfbf2(float %o)
  ret bfloat %res
}

declare double @llvm.fabs.f64(double)
"""


@cache
def bf16_helpers() -> None:
    """Link BF16_HELPERS into the JIT and make their names resolvable for every kernel linked after."""
    from uopir.backends.mlir.compiler import MLIRCompiler

    c = MLIRCompiler().llvm
    mod = c.optimize(BF16_HELPERS)
    assert c.host is not None
    obj = bytes(c.host.target_machine().emit_object(mod))
    jit = JIT.get()
    for name in ("__truncsfbf2", "__truncdfbf2"):
        c.host.binding.add_symbol(name, jit.address(name, obj))


class MLIRRuntime(HostRuntime):
    """Loads MLIR kernels (object code) into the llvm backend's JIT and runs them on host buffers."""

    device = "mlir"

    def __init__(self, threads: int = 1):
        self.threads = threads  # cores a parallel kernel is split across

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | Future[bytes] | None) -> Program:
        """A Program for the object code of the MLIR `source` (`binary` may be a Future of a compile still running)."""
        if binary is None or source is None:
            raise ValueError("the MLIR runtime loads object code compiled from MLIR text (source and binary)")
        bf16_helpers()
        fname = entry_name(source)
        # a global id is an scf.parallel in the function (it takes no core arguments): one call runs all of it
        sig = replace(kernel_signature(program, name=lambda _: fname, backend="mlir"), parallel=False)
        sym = symbol(fname, source)

        def same_binary() -> Any:  # no noalias marks: the kernel itself serves overlapping buffers
            return JIT.get().load(sym, binary.result() if isinstance(binary, Future) else binary)

        prog = Program(name, self.device, program, source, None, None)  # type: ignore[arg-type]
        got = prog.binary_callback()

        prog.entry = LLVMKernel(sig, sym, binary, same_binary, self.threads, got)
        return prog
