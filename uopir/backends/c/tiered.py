"""Tiered compile for the C backend: a kernel whose C binary is not in the disk cache first runs compiled in process
by LLVM, while the system C compiler builds its binary in the background.

    kernel not in the cache --> cc -O2 starts in a detached process (CCompiler.compile_detached)
    first launch, binary not built yet --> tier 0: the device program rendered to LLVM IR (the llvm backend's
        renderer), compiled by llvmlite with no IR optimization (-O0 passes, the host's code generator) into the
        process's MCJIT, and run through ctypes
    a later launch finds the binary built --> the C binary, from then on (tier 1)

Why: the C compiler's process (driver, cc1, as, ld) is most of a cold realize (the 512x512 matmul kernel: about 0.17
CPU seconds of gcc at -O2), while LLVM in process compiles it in about 0.03 s, and the kernel, vectorized by
kernel-expand already, runs about as fast (4 ms against 3.5 ms). Importing llvmlite costs about 0.05-0.08 s: it
starts on a thread as soon as a first kernel misses the cache (`prefetch`), so it overlaps the rest of the lowering;
when the cache holds no C binary at all (`cache_is_cold`), as soon as the C backend is made, so it overlaps all of
it (mostly loading LLVM's shared library, which does not hold the GIL).

Both tiers compute the same bits: the two renderers follow the same semantics (core ops in program order, no fp
contraction: C is compiled with -ffp-contract=off and the LLVM IR carries no fast-math flags; the same integer
wrap, division and shift rules, NaN handling and casts); unit_tests/test_c_tiered.py runs kernels on both tiers and
compares their outputs bit for bit, and the differential suite checks each renderer against the interpreter.

Controls: `UOPIR_C_TIERED=0` turns it off (every first launch waits for the C compiler, as before); it is off when
llvmlite is not installed, for a CBackend made with an explicit compiler (tests of the C binaries), and for a
kernel the LLVM renderer cannot render (it waits for its C binary). `UOPIR_DEBUG=2` prints a line when a kernel
runs on tier 0 and when it switches to its C binary.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from functools import cache
from typing import Any

from uopir.ir import env
from uopir.ir.uop import UOp

__all__ = ["TIERED_ENV", "tiered_enabled", "llvm_available", "prefetch", "tier0_address", "cache_is_cold"]

TIERED_ENV = env.C_TIERED.name
TIER0_OPT = 0  # LLVM's IR pass level for tier 0 (the code generator runs at its default level)


@cache
def llvm_available() -> bool:
    """Whether llvmlite is installed (found without importing it)."""
    return importlib.util.find_spec("llvmlite") is not None


def tiered_enabled() -> bool:
    """$UOPIR_C_TIERED is not off (0/false/no/off) and llvmlite is installed."""
    if not env.C_TIERED.get():
        return False
    return llvm_available()


_PREFETCH: threading.Thread | None = None
_PREFETCH_LOCK = threading.Lock()


def _load_llvm() -> None:
    # Only llvmlite (loading LLVM's shared library is the slow part), never a uopir module: two threads importing
    # uopir modules that import each other can each hold the lock the other waits for, and Python then raises
    # _DeadlockError in one of them. llvmlite imports nothing of uopir, so the main thread can import the llvm
    # backend while this runs (it waits for llvmlite's module lock, no cycle).
    try:
        import llvmlite.binding  # noqa: F401
    except Exception:  # a broken install shows when tier 0 is used; at interpreter exit the import may fail too
        pass


def prefetch() -> None:
    """Import llvmlite on a thread (once): loading LLVM's library is most of tier 0's start-up,
    which runs while this thread goes on lowering."""
    global _PREFETCH
    with _PREFETCH_LOCK:
        if _PREFETCH is None:
            _PREFETCH = threading.Thread(target=_load_llvm, name="uopir-llvm-import", daemon=True)
            _PREFETCH.start()


def cache_is_cold() -> bool:
    """Whether the disk cache holds no C binary at all (no `c-*` folder in it): then every kernel will start on
    tier 0, and the C backend starts `prefetch` when it is made, before any lowering."""
    from uopir.backends.cache import cache_dir, cache_enabled

    try:
        return not cache_enabled() or not any(n.startswith("c-") for n in os.listdir(cache_dir()))
    except OSError:
        return True


def tier0_address(program: UOp) -> Any:
    """The code of `program`'s kernel compiled in process by LLVM (tier 0: a `JITCode`, whose address is valid while it
    lives; `bind` makes a function holding it), with the C kernel's calling convention; None when LLVM cannot compile it
    here (no llvmlite, an op its renderer lacks, a different signature): the caller waits for the C binary then."""
    from uopir.backends.c.renderer import kernel_signature as c_signature
    from uopir.backends.llvm.compiler import llvm_host, symbol
    from uopir.backends.llvm.renderer import LLVMRenderer, kernel_signature
    from uopir.backends.llvm.runtime import JIT

    host = llvm_host()
    if host is None:
        return None
    try:
        sig, csig = kernel_signature(program), c_signature(program)
        if (sig.params, sig.vars, sig.parallel) != (csig.params, csig.vars, csig.parallel):
            return None
        ir = LLVMRenderer(True, cpu=host.cpu, features=host.features, wide_vectors=host.avx512).render(program)
        obj = _compiler().compile(ir)
        return JIT.get().load(symbol(sig.name, ir), obj)  # freed once the kernel runs its C binary
    except Exception as e:  # noqa: BLE001 - any failure: the C binary runs instead
        from uopir.backends.realize import debug_level, debug_print

        if debug_level() >= 2:
            debug_print(f"*** c        tier 0 (llvm) cannot compile kernel {program.arg}: "
                        f"{str(e).splitlines()[0][:200]}; waiting for its C binary")
        return None


@cache
def _compiler() -> Any:
    from uopir.backends.llvm.compiler import LLVMCompiler

    return LLVMCompiler(TIER0_OPT)
