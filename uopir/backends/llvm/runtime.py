"""The LLVM runtime: object code linked into MCJIT execution engines, its kernels called through ctypes.

Every kernel's object file (compiler.py) is added to an engine of the process's `JIT` and linked there (its calls
into libm, for sin or exp2, resolve to the process's symbols); its function address is wrapped in a ctypes function.
The call itself (argument checks, the no-alias variant for overlapping buffers, the split of a global id across
cores) is uopir.backends.cpu.runtime's `HostKernel`, shared with the C backend. A compile still running (a Future) is
waited for at the kernel's first call.

Memory: MCJIT cannot unlink one object file, only free a whole engine. So kernels are linked into engines of at most
`ENGINE_OBJECTS` object files each, and `JIT.load` returns a `JITCode` that keeps its engine alive; the ctypes
function made from it (`bind`) holds the JITCode, so the code cannot be freed while anything can still call it. Once
every kernel of an engine is collected (evicted from the realize caches, no plan or TinyJit holding it), the engine
and its code are freed. `JIT.address` links code for the life of the process (helpers whose symbols other code
resolves: the mlir backend's bf16 conversions).
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from uopir.backends.codegen.program import KernelSignature
from uopir.backends.cpu.runtime import HostKernel, HostRuntime, bind
from uopir.backends.interface import Program
from uopir.backends.llvm.compiler import LLVMHost, llvm_host, symbol
from uopir.backends.llvm.renderer import kernel_signature
from uopir.ir.uop import UOp

__all__ = ["LLVMRuntime", "LLVMKernel", "JIT", "JITCode", "ENGINE_OBJECTS"]


ENGINE_OBJECTS = 16  # object files linked into one MCJIT engine, which is freed when the last of its kernels is


class _Engine:
    """One MCJIT engine and what is linked into it (symbol -> address)."""

    def __init__(self, host: LLVMHost):
        llvm = host.binding
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host.target_machine())  # owns the machine
        self.symbols: dict[str, int] = {}
        self.objects = 0


class JITCode:
    """The linked code of one symbol: its `address` is valid while this object lives (it keeps its engine alive)."""

    __slots__ = ("symbol", "address", "_engine", "__weakref__")

    def __init__(self, symbol: str, address: int, engine: _Engine):
        self.symbol, self.address, self._engine = symbol, address, engine

    def __repr__(self) -> str:
        return f"<JITCode {self.symbol} at {self.address:#x}>"


class JIT:
    """The process's MCJIT engines: object files in, function addresses out (a live symbol is linked once)."""

    _instance: JIT | None = None
    _lock = threading.Lock()

    def __init__(self, host: LLVMHost):
        self.host = host
        self._llvm = host.binding
        self._permanent = _Engine(host)  # address(): code kept for the life of the process
        self._open: _Engine | None = None  # the engine new kernels are linked into, until it holds ENGINE_OBJECTS
        self._codes: weakref.WeakValueDictionary[str, JITCode] = weakref.WeakValueDictionary()

    @classmethod
    def get(cls) -> JIT:
        with cls._lock:
            if cls._instance is None:
                host = llvm_host()
                if host is None:
                    raise RuntimeError("llvmlite is not installed: the llvm backend cannot run kernels")
                cls._instance = JIT(host)
            return cls._instance

    def load(self, sym: str, binary: bytes) -> JITCode:
        """The code of `sym`, linking `binary` (an object file defining it) unless a live JITCode of it exists. The
        code is freed with its engine, after the last JITCode of that engine is collected."""
        with self._lock:
            code = self._codes.get(sym)
            if code is not None:
                return code
            eng = self._open
            if eng is None or (sym not in eng.symbols and eng.objects >= ENGINE_OBJECTS):
                eng = self._open = _Engine(self.host)
            addr = eng.symbols.get(sym) or self._link(eng, sym, binary)
            code = self._codes[sym] = JITCode(sym, addr, eng)
            return code

    def address(self, sym: str, binary: bytes) -> int:
        """The address of `sym`, linking `binary` (an object file defining it) first if it is new here; the code
        stays for the life of the process."""
        with self._lock:
            eng = self._permanent
            return eng.symbols.get(sym) or self._link(eng, sym, binary)

    def _link(self, eng: _Engine, sym: str, binary: bytes) -> int:
        eng.engine.add_object_file(self._llvm.ObjectFileRef.from_data(binary))
        eng.objects += 1
        eng.engine.finalize_object()
        addr = eng.engine.get_function_address(sym)
        if not addr:
            raise RuntimeError(f"the object code does not define {sym}")
        eng.symbols[sym] = addr
        return addr


class LLVMKernel(HostKernel):
    """One kernel: its object code (or the Future of its compile), linked into the JIT at the first call. Object code
    given as bytes (a disk cache hit) that does not define the kernel is replaced by `recompile(why)`, once."""

    def __init__(self, sig: KernelSignature, sym: str, binary: bytes | Future[bytes], alias_fn: Callable[[], Any],
                 threads: int = 1, on_binary: Callable[[bytes], None] | None = None,
                 recompile: Callable[[str], bytes] | None = None):
        super().__init__(sig, alias_fn, threads)
        self.symbol, self._binary, self._on_binary = sym, binary, on_binary
        self._recompile = recompile if isinstance(binary, bytes) else None  # a Future is a fresh compile
        if not isinstance(binary, Future):
            self._load()

    def _load(self) -> Any:
        b = self._binary
        binary = b.result() if isinstance(b, Future) else b
        try:
            code = JIT.get().load(self.symbol, binary)
        except RuntimeError as e:
            if self._recompile is None:
                raise
            binary = self._binary = self._recompile(str(e).splitlines()[0])
            code = JIT.get().load(self.symbol, binary)
        self._recompile = None
        self._fn = bind(self.sig, code)  # the function holds the code: freed with this kernel
        if self._on_binary is not None:
            self._on_binary(binary)
        return self._fn


class LLVMRuntime(HostRuntime):
    """Loads LLVM kernels (object code) into the JIT and runs them on host buffers."""

    device = "llvm"

    def __init__(self, compile_variant: Callable[[UOp], tuple[str, bytes]] | None = None, threads: int = 1):
        self.compile_variant = compile_variant  # program -> (source, object code) rendered without noalias
        self.threads = threads  # cores a parallel kernel is split across

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | Future[bytes] | None,
             recompile: Callable[[str], bytes] | None = None) -> Program:
        """A Program for the object code of `source` (`binary` may be a Future of a compile still running;
        `recompile(why)` replaces cached object code that fails to link: LLVMKernel)."""
        if binary is None or source is None:
            raise ValueError("the LLVM runtime loads object code compiled from LLVM IR (source and binary)")
        sig = kernel_signature(program)
        variant = self.compile_variant

        def alias_fn() -> Any:
            if variant is None:
                raise RuntimeError(f"kernel {sig.name}: its buffers overlap and no no-alias-free variant is available")
            src, obj = variant(program)
            return JIT.get().load(symbol(sig.name, src), obj)

        prog = Program(name, self.device, program, source, None, None)  # type: ignore[arg-type]
        got = prog.binary_callback()

        prog.entry = LLVMKernel(sig, symbol(sig.name, source), binary, alias_fn, self.threads, got, recompile)
        return prog
