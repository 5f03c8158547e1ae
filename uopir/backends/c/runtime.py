"""The C runtime: load a compiled shared object with ctypes and call its kernel on host buffers.

A kernel is called with the data pointers of its buffers (kernel.param order) and the values of its variables (name
order), as its `KernelSignature` says; ctypes releases the GIL for the call. A kernel with a global id (a parallel
loop) also takes `core_id, core_count`: it is called once per core (on the native pool of uopir.backends.cpu.graph),
each call running its share of the ids, and the launch returns when all have. Kernels are compiled with `restrict`
pointers; a launch whose buffers overlap in memory (an in-place update passed twice) runs a variant rendered without
`restrict`, compiled on first need, so the compiler's no-alias assumption is never false. The call itself (argument
checks, aliasing, the split across cores) and the pooled allocator are shared with the LLVM backend
(uopir.backends.cpu.runtime).
"""
from __future__ import annotations

import _ctypes
import ctypes
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from uopir.backends.c.compiler import BASE_FLAGS, CCompiler, DetachedCompile
from uopir.backends.c.renderer import KernelSignature, kernel_signature
from uopir.backends.cpu import graph as native_graph
from uopir.backends.cpu.runtime import HostKernel, HostRuntime, PooledHostAllocator, bind
from uopir.backends.interface import Program
from uopir.backends.realize import debug_level, debug_print
from uopir.ir.uop import UOp

__all__ = ["CRuntime", "CKernel", "TieredKernel", "Pending", "PooledHostAllocator", "load_library", "library_function",
           "LibraryFunction"]

Pending = Future[bytes] | DetachedCompile  # a C binary still compiling: done() and result()


def load_library(binary: bytes) -> ctypes.CDLL:
    """dlopen the shared object `binary` (written to a private temporary file, removed once loaded). It is dlclosed
    when the CDLL object is collected; take its functions with `library_function`, which hold it."""
    fd, path = tempfile.mkstemp(prefix="uopir-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(binary)
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_NOW", 2))
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if _DLCLOSE is not None:
        weakref.finalize(lib, _DLCLOSE, lib._handle).atexit = False  # at exit a daemon thread may still run it
    return lib


_DLCLOSE = getattr(_ctypes, "dlclose", None)  # POSIX


class LibraryFunction:
    """A function of a loaded library: its `address` is valid while this object lives (it holds the library);
    `bind` makes a ctypes function that holds it, so the library is closed only after the last such function."""

    __slots__ = ("library", "address")

    def __init__(self, library: ctypes.CDLL, address: int):
        self.library, self.address = library, address


def library_function(binary: bytes, name: str) -> LibraryFunction:
    """The function `name` of the shared object `binary`, loaded now (OSError when it does not load or lacks the
    name). Taken by address: a function ctypes takes from a library (`lib[name]`) refers to itself, a cycle that
    keeps the library open until the cyclic collector runs."""
    lib = load_library(binary)
    dlsym = getattr(_ctypes, "dlsym", None)
    addr = dlsym(lib._handle, name) if dlsym is not None else ctypes.cast(lib[name], ctypes.c_void_p).value
    return LibraryFunction(lib, addr)


class CKernel(HostKernel):
    """One kernel: the C function and how to call it (uopir.backends.cpu.runtime.HostKernel). The binary may still
    be compiling (a Future): it is loaded on the first call, and `on_binary` gets it then. A binary given as bytes (a
    disk cache hit) that does not load (dlopen fails, or it lacks the kernel) is replaced by `recompile(why)`, once."""

    def __init__(self, sig: KernelSignature, binary: bytes | Future[bytes], alias_fn: Callable[[], LibraryFunction],
                 threads: int = 1, on_binary: Callable[[bytes], None] | None = None,
                 recompile: Callable[[str], bytes] | None = None):
        super().__init__(sig, alias_fn, threads)
        self._binary, self._on_binary = binary, on_binary
        self._recompile = recompile if isinstance(binary, bytes) else None  # a Future is a fresh compile
        if not isinstance(binary, Future):
            self._load()

    def _load(self) -> ctypes._CFuncPtr:
        b = self._binary
        binary = b if isinstance(b, bytes) else b.result()
        try:
            fn = library_function(binary, self.sig.name)
        except (OSError, AttributeError) as e:
            if self._recompile is None:
                raise
            binary = self._binary = self._recompile(str(e).splitlines()[0] if str(e) else type(e).__name__)
            fn = library_function(binary, self.sig.name)
        self._recompile = None
        self._fn = bind(self.sig, fn)
        if self._on_binary is not None:
            self._on_binary(binary)
        return self._fn


class TieredKernel(CKernel):
    """A kernel whose C binary is still compiling (uopir.backends.c.tiered): a launch before the binary is built runs
    the kernel compiled in process by LLVM (`tier0()`: its code, freed when the kernel switches to C, or None when LLVM
    cannot compile it: then the launch waits for the binary); the first launch that finds the binary built switches to
    it for good. `tier` is "" (nothing loaded yet), "llvm" or "c"; `ready()` loads whichever is available now,
    `finish()` waits for the C binary."""

    def __init__(self, sig: KernelSignature, binary: Pending, alias_fn: Callable[[], LibraryFunction],
                 threads: int, on_binary: Callable[[bytes], None] | None, tier0: Callable[[], Any]):
        HostKernel.__init__(self, sig, alias_fn, threads)
        self._binary, self._on_binary, self._tier0 = binary, on_binary, tier0
        self._recompile: Callable[[str], bytes] | None = None  # its binary is a fresh compile
        self.tier = ""
        self.tier0_launches = 0
        self._lock = threading.Lock()

    def _load(self) -> ctypes._CFuncPtr:
        with self._lock:
            if self._fn is not None:
                return self._fn
            if not self._binary.done():
                t0 = time.perf_counter()
                addr = self._tier0()
                if addr is not None:
                    self._fn, self.tier = bind(self.sig, addr), "llvm"
                    if debug_level() >= 2:
                        debug_print(f"*** c        tier 0: kernel {self.sig.name} compiled in process by LLVM in "
                                    f"{(time.perf_counter() - t0) * 1e3:.1f} ms; it runs so until its C binary is "
                                    f"built")
                    return self._fn
            fn = CKernel._load(self)
            self.tier = "c"
            return fn

    def finish(self) -> None:
        """Wait for the C binary and run it from now on."""
        if self.tier != "c":
            with self._lock:
                was = self.tier
                CKernel._load(self)
                self.tier = "c"
            if was == "llvm" and debug_level() >= 2:
                debug_print(f"*** c        tier 1: kernel {self.sig.name} switched to its C binary after "
                            f"{self.tier0_launches} launch(es) in process")

    def _call(self, ptrs: list[int], spans: list[tuple[int, int]], var_vals: Mapping[str, int]) -> None:
        if self.tier == "llvm":
            if self._binary.done():
                self.finish()
            else:
                self.tier0_launches += 1
        HostKernel._call(self, ptrs, spans, var_vals)


class CRuntime(HostRuntime):
    """Loads C kernels (shared objects) and runs them on host buffers."""

    device = "c"

    def __init__(self, compile_variant: Callable[[UOp], bytes] | None = None, threads: int = 1):
        self.compile_variant = compile_variant  # program -> binary rendered without restrict
        self.threads = threads  # cores a parallel kernel is split across

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | Future[bytes] | None,
             recompile: Callable[[str], bytes] | None = None) -> Program:
        """A Program for a compiled shared object; `binary` may be a Future of one still compiling (loaded at the
        first launch; Program.binary is filled then). `recompile(why)` replaces a cached binary that fails to load
        (CKernel)."""
        if binary is None:
            raise ValueError("the C runtime loads compiled shared objects (binary is None)")
        prog, sig, alias_fn, got = self._program(name, program, source)
        prog.entry = CKernel(sig, binary, alias_fn, self.threads, got, recompile)
        return prog

    def _program(self, name: str, program: UOp, source: str | None) -> tuple[
            Program, KernelSignature, Callable[[], LibraryFunction], Callable[[bytes], None]]:
        sig = kernel_signature(program)
        variant = self.compile_variant

        def alias_fn() -> LibraryFunction:
            if variant is None:
                raise RuntimeError(f"kernel {sig.name}: its buffers overlap and no no-restrict variant is available")
            return library_function(variant(program), sig.name)

        prog = Program(name, self.device, program, source, None, None)  # type: ignore[arg-type]
        got = prog.binary_callback()

        return prog, sig, alias_fn, got

    def load_tiered(self, name: str, program: UOp, source: str, binary: Pending,
                    tier0: Callable[[], Any]) -> Program:
        """A Program whose C binary is still compiling (`binary`), run meanwhile by `tier0` (TieredKernel)."""
        prog, sig, alias_fn, got = self._program(name, program, source)
        prog.entry = TieredKernel(sig, binary, alias_fn, self.threads, got, tier0)
        return prog

    def finish(self, prog: Program) -> None:
        """Wait until `prog` runs its final binary (a tiered kernel's C binary; nothing to do for the others)."""
        entry = prog.entry
        if isinstance(entry, TieredKernel):
            entry.finish()
        else:
            entry.ready()


def _build_runner(src: str) -> Any:
    """The native launch graph's runner (uopir.backends.cpu.graph): its source compiled once by the C compiler into
    the compile cache and loaded; None without a C compiler."""
    cc = CCompiler(flags=(*BASE_FLAGS, "-pthread"))
    return load_library(cc.compile_cached(src)) if cc.available else None


native_graph.set_builder(_build_runner)
