"""The C runtime: load a compiled shared object with ctypes and call its kernel on host buffers.

A kernel is called with the data pointers of its buffers (kernel.param order) and the values of its variables (name
order), as its `KernelSignature` says; ctypes releases the GIL for the call. A kernel with a global id (a parallel
loop) also takes `core_id, core_count`: it is called once per core, from a thread pool, each call running its share
of the ids, and the launch returns when all have. Kernels are compiled with `restrict`
pointers; a launch whose buffers overlap in memory (an in-place update passed twice) runs a variant rendered without
`restrict`, compiled on first need, so the compiler's no-alias assumption is never false.
"""
from __future__ import annotations

import ctypes
import math
import os
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from uopir.backends.c.renderer import KernelSignature, kernel_signature
from uopir.backends.interface import Buffer, HostAllocator, LaunchBuffers, Program, Runtime
from uopir.dialects.semantics import np_dtype
from uopir.ir.dtype import DType
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


# what an empty buffer is passed as: a branch-free gated load reads element 0 (up to a vector of 64 bytes) and drops it
_SCRATCH = ctypes.create_string_buffer(128)
_SCRATCH_ADDR = ctypes.addressof(_SCRATCH)

_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's worker threads for parallel kernels (grown on demand, never shrunk)."""
    global _POOL, _POOL_SIZE
    if _POOL is None or _POOL_SIZE < workers:
        old = _POOL
        _POOL, _POOL_SIZE = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="uopir-c"), workers
        if old is not None:
            old.shutdown(wait=False)
    return _POOL


class PooledHostAllocator(HostAllocator):
    """Host buffers whose memory is reused: the array of a collected buffer is kept (up to `budget` bytes, the oldest
    dropped first) and handed to the next allocation of the same element type and size, so a steady loop of
    realizes does not pay the page faults of fresh memory each time (tinygrad's LRU allocator does the same). An
    array anything else still references (a numpy view of it, say) is never reused."""

    def __init__(self, device: str, budget: int = 256 << 20):
        super().__init__(device)
        self.budget, self.held = budget, 0
        self._pool: OrderedDict[tuple[np.dtype, int], list[np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def _alloc(self, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
        want = np_dtype(dtype)
        key = (want, math.prod(shape))
        with self._lock:
            free = self._pool.get(key)
            if free:
                arr = free.pop()
                if not free:
                    del self._pool[key]
                self.held -= arr.nbytes
                arr.shape = shape  # in place: a reshape would be a view, never pooled again
                return arr
        return np.empty(shape, want)

    def _free(self, handle: np.ndarray) -> None:
        # the references a free array has here: the dying Buffer's slot (weakref callbacks run before slots are
        # cleared), the finalizer's arguments, this call's parameter and getrefcount's own; more: someone else has it
        if sys.getrefcount(handle) > 4 or handle.base is not None or not 0 < handle.nbytes <= self.budget:
            return
        with self._lock:
            self._pool.setdefault((handle.dtype, handle.size), []).append(handle)
            self._pool.move_to_end((handle.dtype, handle.size))
            self.held += handle.nbytes
            while self.held > self.budget:
                key, arrs = next(iter(self._pool.items()))
                self.held -= arrs.pop(0).nbytes
                if not arrs:
                    del self._pool[key]


class CKernel:
    """One kernel: the C function and how to call it. The binary may still be compiling (a Future): it is loaded
    on the first call, and `on_binary` gets it then. `alias_fn` builds the no-restrict variant; `threads` is how
    many cores a parallel kernel is split across."""

    def __init__(self, sig: KernelSignature, binary: bytes | Future[bytes], alias_fn: Callable[[], ctypes._CFuncPtr],
                 threads: int = 1, on_binary: Callable[[bytes], None] | None = None):
        self.sig, self.threads = sig, max(1, threads)
        self._binary, self._on_binary = binary, on_binary
        self._fn: ctypes._CFuncPtr | None = None
        self._alias_fn = alias_fn
        self._aliased: ctypes._CFuncPtr | None = None
        if not isinstance(binary, Future):
            self._load()

    def ready(self) -> None:
        """Wait for the binary (if it is still compiling) and load it."""
        if self._fn is None:
            self._load()

    def _load(self) -> ctypes._CFuncPtr:
        b = self._binary
        binary = b.result() if isinstance(b, Future) else b
        self._fn = self._bind(getattr(load_library(binary), self.sig.name))
        if self._on_binary is not None:
            self._on_binary(binary)
        return self._fn

    def _bind(self, fn: ctypes._CFuncPtr) -> ctypes._CFuncPtr:
        n_ints = len(self.sig.vars) + (2 if self.sig.parallel else 0)
        fn.argtypes = [ctypes.c_void_p] * len(self.sig.params) + [ctypes.c_int64] * n_ints
        fn.restype = None
        return fn

    def __call__(self, arrays: Sequence[np.ndarray], var_vals: Mapping[str, int]) -> None:
        sig = self.sig
        if len(arrays) < len(sig.params):
            raise ValueError(f"kernel {sig.name} takes {len(sig.params)} buffers, got {len(arrays)}")
        ptrs: list[int | None] = []
        spans: list[tuple[int, int]] = []
        for i, (d, a) in enumerate(zip(sig.params, arrays, strict=False)):
            if d is not None:
                if a.dtype != np_dtype(d):
                    raise TypeError(f"kernel {sig.name}: buffer {i} must hold {np_dtype(d)} ({d.name}), got {a.dtype}")
                if not a.flags.c_contiguous:
                    raise ValueError(f"kernel {sig.name}: buffer {i} must be C-contiguous")
            addr = a.ctypes.data if a.size else _SCRATCH_ADDR  # gated loads read element 0 of every buffer
            ptrs.append(addr)
            if d is not None and a.nbytes:
                spans.append((addr, addr + a.nbytes))
        missing = [v for v in sig.vars if v not in var_vals]
        if missing:
            raise ValueError(f"kernel {sig.name}: variable(s) {', '.join(missing)} not bound (pass var_vals)")
        args = [*ptrs, *(int(var_vals[v]) for v in sig.vars)]
        fn = self._fn or self._load()
        if len(spans) > 1 and _overlap(spans):
            if self._aliased is None:
                self._aliased = self._bind(self._alias_fn())
            fn = self._aliased
        if not sig.parallel:
            fn(*args)
            return
        n = self.threads
        if n == 1:
            fn(*args, 0, 1)
            return
        futures = [_pool(n - 1).submit(fn, *args, i, n) for i in range(1, n)]
        fn(*args, 0, n)  # this thread runs the first share
        for f in futures:
            f.result()


def _overlap(spans: list[tuple[int, int]]) -> bool:
    spans = sorted(spans)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))


class CRuntime(Runtime):
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

    def ready(self, prog: Program) -> None:
        prog.entry.ready()

    def launch(self, prog: Program, buffers: LaunchBuffers, *, global_size: tuple[int, ...] = (1, 1, 1),
               local_size: tuple[int, ...] = (1, 1, 1), var_vals: Mapping[str, int] | None = None) -> Any:
        """Run a kernel on its buffers (by kernel.param position); it writes them in place and returns None."""
        if isinstance(buffers, Mapping):
            raise TypeError("a C kernel takes its buffers by position (kernel.param index), not by id")
        arrays = [_host(b) for b in buffers]
        prog.entry(arrays, dict(var_vals or {}))
        return None


def _host(b: Buffer | np.ndarray) -> np.ndarray:
    if isinstance(b, np.ndarray):
        return b
    v = b.host_view()
    if v is None:
        raise TypeError(f"the C runtime runs on host buffers, got {b!r}")
    return v
