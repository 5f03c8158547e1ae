"""The C runtime: load a compiled shared object with ctypes and call its kernel on host buffers.

A kernel is called with the data pointers of its buffers (kernel.param order) and the values of its variables (name
order), as its `KernelSignature` says; ctypes releases the GIL for the call. A kernel with a global id (a parallel
loop) also takes `core_id, core_count`: it is called once per core, from a thread pool, each call running its share
of the ids, and the launch returns when all have. Kernels are compiled with `restrict`
pointers; a launch whose buffers overlap in memory (an in-place update passed twice) runs a variant rendered without
`restrict`, compiled on first need, so the compiler's no-alias assumption is never false. The call itself (argument
checks, aliasing, the split across cores) and the pooled allocator are shared with the LLVM backend
(uopir.backends.cpu.runtime).
"""
from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import Future

from uopir.backends.c.renderer import KernelSignature, kernel_signature
from uopir.backends.cpu.runtime import HostKernel, HostRuntime, PooledHostAllocator, bind
from uopir.backends.interface import Program
from uopir.ir.uop import UOp

__all__ = ["CRuntime", "CKernel", "PooledHostAllocator", "load_library"]


def load_library(binary: bytes) -> ctypes.CDLL:
    """dlopen the shared object `binary` (written to a private temporary file, removed once loaded)."""
    fd, path = tempfile.mkstemp(prefix="uopir-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(binary)
        return ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_NOW", 2))
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


class CKernel(HostKernel):
    """One kernel: the C function and how to call it (uopir.backends.cpu.runtime.HostKernel). The binary may still
    be compiling (a Future): it is loaded on the first call, and `on_binary` gets it then."""

    def __init__(self, sig: KernelSignature, binary: bytes | Future[bytes], alias_fn: Callable[[], ctypes._CFuncPtr],
                 threads: int = 1, on_binary: Callable[[bytes], None] | None = None):
        super().__init__(sig, alias_fn, threads)
        self._binary, self._on_binary = binary, on_binary
        if not isinstance(binary, Future):
            self._load()

    def _load(self) -> ctypes._CFuncPtr:
        b = self._binary
        binary = b.result() if isinstance(b, Future) else b
        self._fn = bind(self.sig, getattr(load_library(binary), self.sig.name))
        if self._on_binary is not None:
            self._on_binary(binary)
        return self._fn


class CRuntime(HostRuntime):
    """Loads C kernels (shared objects) and runs them on host buffers."""

    device = "c"

    def __init__(self, compile_variant: Callable[[UOp], bytes] | None = None, threads: int = 1):
        self.compile_variant = compile_variant  # program -> binary rendered without restrict
        self.threads = threads  # cores a parallel kernel is split across

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | Future[bytes] | None) -> Program:
        """A Program for a compiled shared object; `binary` may be a Future of one still compiling (loaded at the
        first launch; Program.binary is filled then)."""
        if binary is None:
            raise ValueError("the C runtime loads compiled shared objects (binary is None)")
        sig = kernel_signature(program)
        variant = self.compile_variant

        def alias_fn() -> ctypes._CFuncPtr:
            if variant is None:
                raise RuntimeError(f"kernel {sig.name}: its buffers overlap and no no-restrict variant is available")
            return getattr(load_library(variant(program)), sig.name)

        prog = Program(name, self.device, program, source, None, None)  # type: ignore[arg-type]

        def got(b: bytes) -> None:
            prog.binary = b

        prog.entry = CKernel(sig, binary, alias_fn, self.threads, got)
        return prog
