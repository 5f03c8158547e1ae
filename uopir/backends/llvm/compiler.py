"""The LLVM compiler: LLVM IR text -> optimized object code for the host cpu, with llvmlite (LLVM in process).

`llvm.initialize()` raises in current llvmlite (LLVM initializes its core itself): only the native target and its asm
printer are initialized, once. A compile parses the text in a fresh LLVM context (so compiles may run on several
threads at once: llvmlite releases the GIL in LLVM's code), sets the host's triple and data layout, verifies the
module, runs the new pass manager's O3 pipeline (loop and SLP vectorization on) for the host cpu name and features,
and emits an object file for the MCJIT runtime (runtime.py). The kernel's function is renamed `NAME.DIGEST` (a
digest of the source) so that kernels of one name from different programs never clash in the one JIT that holds
them all.

The object code is what is cached on disk (uopir.backends.cache), keyed by the source and namespaced by llvmlite's
and LLVM's versions, the host triple, cpu name and features: a hit skips LLVM entirely (the JIT only links it). The
cache checks an entry's digest before returning it: LLVM's linker trusts an object file, and a damaged one crashes
the process (SIGSEGV).
"""
from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Any

from uopir.backends.cache import cache_evict, cache_get, cache_key, cache_put
from uopir.backends.interface import CompileError as BaseCompileError
from uopir.backends.interface import Compiler
from uopir.ir.once import once

__all__ = ["LLVMCompiler", "LLVMHost", "CompileError", "llvm_host", "symbol", "run_pipeline"]

_INIT_LOCK = threading.Lock()


class CompileError(BaseCompileError):
    """LLVM rejected the IR (the message names the line)."""


@dataclass(frozen=True)
class LLVMHost:
    """What LLVM knows of this machine: its triple, cpu name and features (`+avx2,+avx512f,...`)."""

    binding: Any  # llvmlite.binding
    version: str
    triple: str
    cpu: str
    features: str

    @property
    def avx512(self) -> bool:
        return "+avx512f" in self.features.split(",")

    def target_machine(self) -> Any:
        llvm = self.binding
        t = llvm.Target.from_triple(self.triple)
        return t.create_target_machine(cpu=self.cpu, features=self.features, opt=3, codemodel="jitdefault")


@cache
def llvm_host() -> LLVMHost | None:
    """The host as llvmlite sees it, or None when llvmlite is not installed (or cannot initialize)."""
    try:
        import llvmlite
        import llvmlite.binding as llvm
    except ImportError:
        return None
    with _INIT_LOCK:
        try:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
        except Exception:  # noqa: BLE001 - any failure means: no usable LLVM here
            return None
    version = f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"
    return LLVMHost(llvm, version, llvm.get_process_triple(), llvm.get_host_cpu_name(),
                    llvm.get_host_cpu_features().flatten())


def symbol(name: str, source: str) -> str:
    """The object file's symbol of the kernel `name` rendered as `source`."""
    return f"{name}.{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def run_pipeline(llvm: Any, pb: Any, mod: Any) -> None:
    """Run the pass builder's per-module pipeline on `mod`, then free the pass manager. llvmlite (0.45 to 0.50 at
    least) never frees a ModulePassManager: the empty `ObjectRef._dispose` precedes `NewPassManager._dispose` in its
    MRO, so every run would keep its passes for the life of the process (about 55 KB at O3: 110 MB for 2000 kernels)."""
    mpm = pb.getModulePassManager()
    try:
        mpm.run(mod, pb)
    finally:
        if type(mpm)._dispose is llvm.ffi.ObjectRef._dispose:
            llvm.ffi.lib.LLVMPY_DisposeNewModulePassManger(mpm)
            mpm.detach()
        else:  # a fixed llvmlite frees it itself
            mpm.close()


_LOCAL = threading.local()


@once
def _compile_pool() -> ThreadPoolExecutor:
    """The process's compile threads: one pool, also when several threads compile their first kernels at once."""
    return ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="uopir-llvm")


class LLVMCompiler(Compiler):
    """LLVM IR -> object code at -O`opt` for the host cpu (through the disk cache)."""

    def __init__(self, opt: int = 3):
        self.opt = opt
        self.flags = (f"O{opt}", "vectorize-loops", "vectorize-slp")
        self.host = llvm_host()

    @property
    def available(self) -> bool:
        return self.host is not None

    @property
    def name(self) -> str:  # type: ignore[override]
        """The cache namespace: llvmlite/LLVM versions and the host's triple, cpu and features (a digest)."""
        h = self.host
        ident = "none" if h is None else "\0".join((h.version, h.triple, h.cpu, h.features))
        return "llvm-" + hashlib.sha256(ident.encode()).hexdigest()[:16]

    def _tm(self) -> Any:
        tm = getattr(_LOCAL, "tm", None)  # one target machine per thread: LLVM's are not shared across threads
        if tm is None:
            assert self.host is not None
            tm = _LOCAL.tm = self.host.target_machine()
        return tm

    def optimize(self, source: str) -> Any:
        """The module of `source`, verified and optimized (in a fresh context, kept alive by the module)."""
        if self.host is None:
            raise RuntimeError("llvmlite is not installed: the llvm backend cannot compile")
        llvm = self.host.binding
        tm = self._tm()
        ctx = llvm.create_context()
        try:
            mod = llvm.parse_assembly(source, context=ctx)
            mod.triple = self.host.triple
            mod.data_layout = str(tm.target_data)
            mod.verify()
        except RuntimeError as e:
            raise CompileError(f"LLVM rejected the kernel's IR: {e}") from None
        pto = llvm.create_pipeline_tuning_options(speed_level=self.opt)
        pto.loop_vectorization = pto.slp_vectorization = self.opt >= 2
        pb = llvm.create_pass_builder(tm, pto)
        run_pipeline(llvm, pb, mod)
        mod._uopir_context = ctx  # noqa: SLF001 - the context must outlive the module
        return mod

    def compile(self, source: str) -> bytes:
        mod = self.optimize(source)
        fns = [f for f in mod.functions if not f.is_declaration]
        if len(fns) != 1:
            raise CompileError(f"an LLVM kernel module defines one function, this one {len(fns)}")
        fns[0].name = symbol(fns[0].name, source)
        return bytes(self._tm().emit_object(mod))

    def recompile(self, source: str, why: str) -> bytes:
        """The object code of `source` compiled again, its cache entry (which failed to load: `why`) deleted first."""
        cache_evict(self.name, cache_key(self.name, self.flags, source), why)
        return self.compile_cached(source)

    def compile_async(self, source: str) -> bytes | Future[bytes]:
        """The object code: bytes on a cache hit, else a Future of a compile running on a worker thread (so a
        schedule's kernels compile in parallel)."""
        key = cache_key(self.name, self.flags, source)
        hit = cache_get(self.name, key)
        if hit is not None:
            return hit

        def job() -> bytes:
            binary = self.compile(source)
            cache_put(self.name, key, binary)
            return binary

        return _compile_pool().submit(job)
