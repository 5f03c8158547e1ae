"""The LLVM runtime: object code linked into one MCJIT execution engine, its kernels called through ctypes.

Every kernel's object file (compiler.py) is added to the process's one engine and linked there (its calls into libm,
for sin or exp2, resolve to the process's symbols); its function address is wrapped in a ctypes function. The call
itself (argument checks, the no-alias variant for overlapping buffers, the split of a global id across cores) is
uopir.backends.cpu.runtime's `HostKernel`, shared with the C backend. A compile still running (a Future) is waited
for at the kernel's first call.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from uopir.backends.cpu.program import KernelSignature
from uopir.backends.cpu.runtime import HostKernel, HostRuntime, bind
from uopir.backends.interface import Program
from uopir.backends.llvm.compiler import LLVMHost, llvm_host, symbol
from uopir.backends.llvm.renderer import kernel_signature
from uopir.ir.uop import UOp

__all__ = ["LLVMRuntime", "LLVMKernel", "JIT"]


class JIT:
    """The process's MCJIT engine: object files in, function addresses out (each symbol linked once)."""

    _instance: JIT | None = None
    _lock = threading.Lock()

    def __init__(self, host: LLVMHost):
        llvm = host.binding
        self.host = host
        self._llvm = llvm
        self._tm = host.target_machine()
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self._tm)
        self._addrs: dict[str, int] = {}

    @classmethod
    def get(cls) -> JIT:
        with cls._lock:
            if cls._instance is None:
                host = llvm_host()
                if host is None:
                    raise RuntimeError("llvmlite is not installed: the llvm backend cannot run kernels")
                cls._instance = JIT(host)
            return cls._instance

    def address(self, sym: str, binary: bytes) -> int:
        """The address of `sym`, linking `binary` (an object file defining it) first if it is new here."""
        with self._lock:
            addr = self._addrs.get(sym)
            if addr is None:
                self._engine.add_object_file(self._llvm.ObjectFileRef.from_data(binary))
                self._engine.finalize_object()
                addr = self._engine.get_function_address(sym)
                if not addr:
                    raise RuntimeError(f"the object code does not define {sym}")
                self._addrs[sym] = addr
            return addr


class LLVMKernel(HostKernel):
    """One kernel: its object code (or the Future of its compile), linked into the JIT at the first call."""

    def __init__(self, sig: KernelSignature, sym: str, binary: bytes | Future[bytes], alias_fn: Callable[[], Any],
                 threads: int = 1, on_binary: Callable[[bytes], None] | None = None):
        super().__init__(sig, alias_fn, threads)
        self.symbol, self._binary, self._on_binary = sym, binary, on_binary
        if not isinstance(binary, Future):
            self._load()

    def _load(self) -> Any:
        b = self._binary
        binary = b.result() if isinstance(b, Future) else b
        self._fn = bind(self.sig, JIT.get().address(self.symbol, binary))
        if self._on_binary is not None:
            self._on_binary(binary)
        return self._fn


class LLVMRuntime(HostRuntime):
    """Loads LLVM kernels (object code) into the JIT and runs them on host buffers."""

    device = "llvm"

    def __init__(self, compile_variant: Callable[[UOp], tuple[str, bytes]] | None = None, threads: int = 1):
        self.compile_variant = compile_variant  # program -> (source, object code) rendered without noalias
        self.threads = threads  # cores a parallel kernel is split across

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | Future[bytes] | None) -> Program:
        """A Program for the object code of `source` (`binary` may be a Future of a compile still running)."""
        if binary is None or source is None:
            raise ValueError("the LLVM runtime loads object code compiled from LLVM IR (source and binary)")
        sig = kernel_signature(program)
        variant = self.compile_variant

        def alias_fn() -> Any:
            if variant is None:
                raise RuntimeError(f"kernel {sig.name}: its buffers overlap and no no-alias-free variant is available")
            src, obj = variant(program)
            return JIT.get().address(symbol(sig.name, src), obj)

        prog = Program(name, self.device, program, source, None, None)  # type: ignore[arg-type]

        def got(b: bytes) -> None:
            prog.binary = b

        prog.entry = LLVMKernel(sig, symbol(sig.name, source), binary, alias_fn, self.threads, got)
        return prog
