"""Calling compiled host-cpu kernels through ctypes: argument checks, aliasing, the split across cores, host memory.

A kernel is called with the data pointers of its buffers (kernel.param order) and the values of its variables (name
order), as its `KernelSignature` says; ctypes releases the GIL for the call. A kernel with a global id (a parallel
loop) also takes `core_id, core_count`: it runs once per core, each call running its share of the ids, and the
launch returns when all have; the shares go to the persistent native pool of uopir.backends.cpu.graph (one ctypes
call per launch; measured in bench/launch_overhead.py: 59-131 us against 77-258 us for a Python thread pool on a
loaded machine), or, while that is not built or without a C compiler, to a Python thread pool.
Kernels are compiled with no-alias pointers (`restrict`,
`noalias`); a launch whose buffers overlap in memory (an in-place update passed twice) runs a variant compiled
without them on first need, so the compiler's no-alias assumption is never false.

`HostKernel` is that call; a backend subclass says how the function is obtained (`_load`) and how its no-alias-free
variant is (`alias_fn`). `HostRuntime` launches them on host buffers; `PooledHostAllocator` reuses freed arrays.
"""
from __future__ import annotations

import ctypes
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from uopir.backends.codegen.program import KernelSignature
from uopir.backends.cpu import graph as _graph
from uopir.backends.interface import Buffer, HostAllocator, LaunchBuffers, Program, Runtime, aligned_empty
from uopir.dialects.semantics import np_dtype
from uopir.ir import env
from uopir.ir.dtype import DType, dtypes
from uopir.passes.target import Target, host_cpu, target

__all__ = ["HostKernel", "HostRuntime", "PooledHostAllocator", "THREADS_ENV", "threads", "host_array", "host_info",
           "bind", "host_target", "address", "array_address", "overlaps", "SCRATCH_ADDR"]

THREADS_ENV = env.THREADS.name


# iterations below which a host kernel stays on one core: the pool's second core wakes in microseconds, and on a
# machine busy with other processes its share may wait a whole time slice (an LSTM's 20x64 ->
# 256 input projection, 4 us on one core, took ~30 us of the median call split in two on a loaded 2-core machine)
HOST_PARALLEL_MIN_WORK = 1 << 19
# ... by what a kernel does per iteration (Target.parallel_min_work_by_kind). bench/parallel_threshold.py, quiet, hot
# pool (issue 26's last stop): an elementwise kernel's two cores win from 2^16 iterations (7.6 -> 6.5 us; 2^18 30.8 ->
# 20.5), a depthwise window's from 2^18 (9.7 -> 8.2), a 1x1 conv's from 2^19-2^20; at load 8-15 one core and two
# were equal below 2^19 (no loss). Elementwise from 2^17 (ViT's six GELUs of 197 x 1536: ViT 15.36 -> 14.53 ms, best
# of 6 interleaved rounds at load 2-7); a window row from 2^18 is not kept: MobileNetV3's two 5x5/2 depthwise convs
# split, it measured 0.81 -> 0.87 ms (EfficientNet 5.28 -> 5.10) in the same rounds. A dot-product tile from 2^18 as
# every cpu target. Elementwise from 2^16 once KernelFacts.work stopped counting a peeled pad as the product of its
# segments (which had split every pad): the CNNs' pads of 65K-123K iterations ran split 13 vs 20 us (ResNet's
# 128x30x30), 9 vs 15 (256x16x16), 15 vs 22 (EfficientNet's 480x16x16) in one round at load 11 (--profile, hot
# pool); BERT-tiny's 128 x 512 GELU, the one steady kernel 2^16 adds beside them, read 25 us both ways.
HOST_PARALLEL_MIN_WORK_BY_KIND: tuple[tuple[str, int], ...] = (("elementwise", 1 << 16), ("dot", 1 << 18))


def host_target(name: str) -> Target:
    """The target of a host-cpu backend: the host cpu (its vector width and cores). The register budget of a
    kernel's upcasts is half the vector registers as f32 accumulators: 16 with 64-byte vectors (AVX-512 has 32
    registers), else 8 (AVX2 has 16); at least eight independent accumulators hide the latency of a vector add."""
    t = host_cpu(name)
    regs = 16 if t.max_vector_bytes >= 64 else 8
    return t.derive(max_upcast=max(t.max_upcast, regs * t.vector_width(dtypes.float32)),
                    parallel_min_work=max(t.parallel_min_work, HOST_PARALLEL_MIN_WORK),
                    parallel_min_work_by_kind=HOST_PARALLEL_MIN_WORK_BY_KIND)


def threads(device: str) -> int:
    """How many cores a parallel kernel is split across: $UOPIR_THREADS, else the cores of the device's target."""
    return env.THREADS.get() or target(device).threads


# what an empty buffer is passed as: a branch-free gated load reads element 0 (up to a vector of 64 bytes) and drops it
_SCRATCH = ctypes.create_string_buffer(128)
_SCRATCH_ADDR = SCRATCH_ADDR = ctypes.addressof(_SCRATCH)

_MAX_ARGS = 40  # graph.c's UOPIR_MAX_ARGS

_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_POOL_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's worker threads for parallel kernels (made once, grown on demand, never shrunk). A smaller pool
    it replaces is dropped, not shut down: another thread may still be submitting to it (a shut-down pool raises
    there); its threads end when the last reference to it goes."""
    global _POOL, _POOL_SIZE
    pool = _POOL
    if pool is not None and _POOL_SIZE >= workers:
        return pool
    with _POOL_LOCK:
        if _POOL is None or _POOL_SIZE < workers:
            _POOL, _POOL_SIZE = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="uopir-cpu"), workers
        return _POOL


class PooledHostAllocator(HostAllocator):
    """Host buffers whose memory is reused: the array of a collected buffer is kept (up to `budget` bytes, the oldest
    dropped first) and handed to the next allocation of the same element type and size, so a steady loop of
    realizes does not pay the page faults of fresh memory each time (tinygrad's LRU allocator does the same). An
    array anything else still references (a numpy view of it, say) is never reused. What a launch read of the array
    (`Buffer.host`: its address...) is kept with it, so the next buffer of that memory does not read it again."""

    def __init__(self, device: str, budget: int = 256 << 20):
        super().__init__(device)
        self.budget, self.held = budget, 0
        self._pool: OrderedDict[tuple[np.dtype, int], list[tuple[np.ndarray, Any]]] = OrderedDict()
        self._lock = threading.Lock()
        self._np: dict[DType, np.dtype] = {}  # np_dtype per dtype (np.dtype(name) costs ~0.3 us)

    def _take(self, dtype: DType, shape: tuple[int, ...]) -> tuple[np.dtype, tuple[np.ndarray, Any] | None]:
        """(the host element type, a pooled (array, host info) of its size or None)."""
        want = self._np.get(dtype)
        if want is None:
            want = self._np[dtype] = np_dtype(dtype)
        n = 1
        for d in shape:
            n *= d
        key = (want, n)
        with self._lock:
            free = self._pool.get(key)
            if not free:
                return want, None
            got = free.pop()
            if not free:
                del self._pool[key]
            self.held -= got[0].nbytes
        return want, got

    def alloc(self, dtype: DType, shape: tuple[int, ...]) -> Buffer:
        shape = tuple(shape)
        _, got = self._take(dtype, shape)
        if got is None:
            return super().alloc(dtype, shape)
        arr, host = got
        if arr.shape != shape:
            arr.shape = shape  # in place: a reshape would be a view, never pooled again
        buf = Buffer(self, dtype, shape, arr, True)
        buf.host = host
        return buf

    def _alloc(self, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
        want, got = self._take(dtype, shape)
        if got is None:
            return aligned_empty(shape, want)
        got[0].shape = shape
        return got[0]

    def _free(self, handle: np.ndarray, host: Any = None) -> None:
        # the references a free array has here: the dying Buffer's slot (Buffer.__del__ runs before slots are
        # cleared), this call's parameter and getrefcount's own; more: someone else has it
        if sys.getrefcount(handle) > 3 or not 0 < handle.nbytes <= self.budget:
            return
        base = handle.base  # an aligned array's byte block (aligned_empty): any other view of the memory holds it too
        if base is not None and (type(base) is not np.ndarray or base.base is not None or sys.getrefcount(base) > 3):
            return
        key = (handle.dtype, handle.size)
        with self._lock:
            pool = self._pool
            free = pool.get(key)
            if free is None:
                free = pool[key] = []
            else:
                pool.move_to_end(key)
            free.append((handle, host))
            self.held += handle.nbytes
            while self.held > self.budget:
                key, arrs = next(iter(pool.items()))
                self.held -= arrs.pop(0)[0].nbytes
                if not arrs:
                    del pool[key]


def bind(sig: KernelSignature, fn: Any) -> Any:
    """Give a ctypes function (or the address of one, or a JIT's code object with an `address`) the argument types
    of `sig`. A function made from a code object holds it (`code`), so the code lives as long as the function."""
    argtypes = [ctypes.c_void_p] * len(sig.params) + [ctypes.c_int64] * (len(sig.vars) + (2 if sig.parallel else 0))
    addr = getattr(fn, "address", fn)
    if isinstance(addr, int):
        f = ctypes.CFUNCTYPE(None, *argtypes)(addr)
        if addr is not fn:
            f.code = fn
        return f
    fn.argtypes = argtypes
    fn.restype = None
    return fn


class HostKernel:
    """One compiled kernel and how to call it on host arrays. Subclasses implement `_load` (the function, bound by
    `bind`); `alias_fn` gives the variant compiled without no-alias pointers; `threads` is how many cores a parallel
    kernel is split across."""

    def __init__(self, sig: KernelSignature, alias_fn: Callable[[], Any], threads: int = 1):
        self.sig, self.threads = sig, max(1, threads)
        self._wants = [None if d is None else np_dtype(d) for d in sig.params]  # element types checked per call
        self._fn: Any = None
        self._alias_fn = alias_fn
        self._aliased: Any = None

    def _load(self) -> Any:
        raise NotImplementedError

    def ready(self) -> None:
        """Wait for the binary (if it is still compiling in the background) and load it."""
        if self._fn is None:
            self._load()

    def __call__(self, arrays: Sequence[np.ndarray], var_vals: Mapping[str, int]) -> None:
        wants = self._wants
        if len(arrays) < len(wants):
            raise ValueError(f"kernel {self.sig.name} takes {len(wants)} buffers, got {len(arrays)}")
        ptrs: list[int] = []
        spans: list[tuple[int, int]] = []
        for want, a in zip(wants, arrays, strict=False):
            nbytes = a.nbytes
            addr = a.ctypes.data if nbytes else _SCRATCH_ADDR  # gated loads read element 0 of every buffer
            ptrs.append(addr)
            if want is not None:
                if a.dtype != want or not a.flags.c_contiguous:
                    self._bad(arrays)
                if nbytes:
                    spans.append((addr, addr + nbytes))
        self._call(ptrs, spans, var_vals)

    def call_buffers(self, buffers: Sequence[Buffer | np.ndarray], var_vals: Mapping[str, int], device: str) -> None:
        """`self(arrays, var_vals)` on host Buffers (or arrays), with what each Buffer's array says about itself
        (address, size, element type, layout) read once per Buffer and kept on it (`Buffer.host`): an array's ctypes
        address alone costs ~1 us to read, and a Buffer's array never changes."""
        wants = self._wants
        if len(buffers) < len(wants):
            raise ValueError(f"kernel {self.sig.name} takes {len(wants)} buffers, got {len(buffers)}")
        ptrs: list[int] = []
        spans: list[tuple[int, int]] = []
        for want, b in zip(wants, buffers, strict=False):
            info = b.host if type(b) is Buffer else None
            if info is None:
                info = _host_info(host_array(b, device))
                if type(b) is Buffer:
                    b.host = info
            addr, nbytes, dt, contiguous = info
            ptrs.append(addr)
            if want is not None:
                if dt != want or not contiguous:
                    self._bad([host_array(x, device) for x in buffers])
                if nbytes:
                    spans.append((addr, addr + nbytes))
        self._call(ptrs, spans, var_vals)

    def _call(self, ptrs: list[int], spans: list[tuple[int, int]], var_vals: Mapping[str, int]) -> None:
        """Call the kernel on buffer addresses (`spans`: the typed ones' byte ranges, checked for overlap)."""
        sig = self.sig
        if sig.vars:
            missing = [v for v in sig.vars if v not in var_vals]
            if missing:
                raise ValueError(f"kernel {sig.name}: variable(s) {', '.join(missing)} not bound (pass var_vals)")
            args = [*ptrs, *(int(var_vals[v]) for v in sig.vars)]
        else:
            args = ptrs
        fn = self._fn or self._load()
        if len(spans) > 1 and _overlap(spans):
            if self._aliased is None:
                self._aliased = bind(sig, self._alias_fn())
            fn = self._aliased
        if not sig.parallel:
            fn(*args)
            return
        n = self.threads
        if n == 1:
            fn(*args, 0, 1)
            return
        lib = _graph.native(wait=False)
        if lib is not None and len(args) + 2 <= _MAX_ARGS:  # the persistent native pool: one call, no Python threads
            lib.uopir_parallel(address(fn), (ctypes.c_int64 * len(args))(*args), len(args), n)
            return
        futures = [_pool(n - 1).submit(fn, *args, i, n) for i in range(1, n)]
        fn(*args, 0, n)  # this thread runs the first share
        for f in futures:
            f.result()


    def _bad(self, arrays: Sequence[np.ndarray]) -> None:
        """Raise the error of the first buffer of the wrong element type or layout."""
        sig = self.sig
        for i, (d, a) in enumerate(zip(sig.params, arrays, strict=False)):
            if d is not None:
                if a.dtype != np_dtype(d):
                    raise TypeError(f"kernel {sig.name}: buffer {i} must hold {np_dtype(d)} ({d.name}), got {a.dtype}")
                if not a.flags.c_contiguous:
                    raise ValueError(f"kernel {sig.name}: buffer {i} must be C-contiguous")

    def function(self, aliased: bool = False) -> Any:
        """The kernel's ctypes function (loaded now if it is not yet), or its no-alias-free variant."""
        fn = self._fn or self._load()
        if not aliased:
            return fn
        if self._aliased is None:
            self._aliased = bind(self.sig, self._alias_fn())
        return self._aliased


def address(fn: Any) -> int:
    """The native address of a ctypes function (remembered on it: a cast costs a microsecond)."""
    a = getattr(fn, "_uopir_address", None)
    if a is None:
        a = fn._uopir_address = ctypes.cast(fn, ctypes.c_void_p).value
    return a


_BYTE = ctypes.c_char


def array_address(a: np.ndarray) -> int:
    """The address of a C-contiguous host array's first element: through a ctypes view of a writable array (~0.3 us;
    `a.ctypes.data` builds a new object per read, ~1 us, which a steady ONNX call paid four times), else numpy's."""
    try:
        return ctypes.addressof(_BYTE.from_buffer(a))
    except (TypeError, ValueError, BufferError):  # read-only, empty
        return a.ctypes.data


def overlaps(spans: list[tuple[int, int]]) -> bool:
    """Whether any two of the [start, end) address ranges overlap (a launch must then run the aliasing variant)."""
    return len(spans) > 1 and _overlap(spans)


def _overlap(spans: list[tuple[int, int]]) -> bool:
    if len(spans) == 2:  # the usual launch (one input, one output): no sort
        (a0, a1), (b0, b1) = spans
        return a0 < b1 and b0 < a1
    spans = sorted(spans)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))


def _host_info(a: np.ndarray) -> tuple[int, int, np.dtype, bool]:
    """(address, bytes, element type, C-contiguous) of a host array: what a launch passes and checks (the array
    itself is not kept: a pooled allocator counts the references to a dying buffer's array)."""
    nbytes = a.nbytes
    return (a.ctypes.data if nbytes else _SCRATCH_ADDR, nbytes, a.dtype, a.flags.c_contiguous)


def host_info(b: Buffer) -> tuple[int, int, np.dtype, bool] | None:
    """`_host_info` of a Buffer's host array, read once and kept on it (`Buffer.host`); None when it is not in host
    memory."""
    info = b.host
    if info is None:
        a = b.host_view()
        if a is None:
            return None
        info = b.host = _host_info(a)
    return info


def host_array(b: Buffer | np.ndarray, device: str) -> np.ndarray:
    """The live host array of a buffer (a numpy array passes through)."""
    if isinstance(b, np.ndarray):
        return b
    v = b.host_view()
    if v is None:
        raise TypeError(f"the {device} runtime runs on host buffers, got {b!r}")
    return v


class HostRuntime(Runtime):
    """Runs host kernels (a Program whose entry is a HostKernel) on host buffers, by kernel.param position."""

    def ready(self, prog: Program) -> None:
        """Wait until `prog` can run (its compile finished, its function loaded)."""
        prog.entry.ready()

    def launch(self, prog: Program, buffers: LaunchBuffers, *, global_size: tuple[int, ...] = (1, 1, 1),
               local_size: tuple[int, ...] = (1, 1, 1), var_vals: Mapping[str, int] | None = None) -> Any:
        """Run a kernel on its buffers (by kernel.param position); it writes them in place and returns None."""
        if type(buffers) is not list and isinstance(buffers, Mapping):  # (an ABC check costs ~0.2 us a launch)
            raise TypeError(f"a {self.device} kernel takes its buffers by position (kernel.param index), not by id")
        entry = prog.entry
        if type(entry).__call__ is HostKernel.__call__:
            entry.call_buffers(buffers, var_vals or {}, self.device)
        else:
            prog.entry([host_array(b, self.device) for b in buffers], dict(var_vals or {}))
        return None
