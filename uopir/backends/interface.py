"""The backend interface: renderer, compiler, allocator and runtime, bundled with a target description into a
Backend that realizes tensor graphs.

The flow of a compiled backend (C, LLVM, OpenCL, CUDA):

    graph --pipeline (passes)--> device-level program --Renderer--> source --Compiler (disk cache)--> binary
          --Runtime.load--> Program --Runtime.launch(buffers, launch dims)--> results in buffers

`Backend.realize(root)` does all of it (uopir.backends.realize runs a schedule kernel by kernel) and returns the
Buffer holding the root's value; the frontend wraps that in a `tensor.buffer` op (uopir.backends.buffers). A
lowering issue adds passes to a backend's `pipeline` and fills these classes; nothing above them changes. The python
backend (the reference interpreter) has no source text: its `renderer` and `compiler` are None and `compile` turns
the program itself into a closure (see backends/python).
"""
from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.backends.cache import cache_get, cache_key, cache_put
from uopir.dialects.semantics import np_dtype
from uopir.ir import env
from uopir.ir.diagnostics import check_buffer_size
from uopir.ir.dtype import DType
from uopir.ir.uop import UOp
from uopir.passes.target import Target

if TYPE_CHECKING:
    from uopir.passes.instruments import PassInstrumentation

__all__ = ["Buffer", "Allocator", "HostAllocator", "Renderer", "Compiler", "Program", "Runtime", "Backend",
           "LaunchBuffers", "CompileError", "BoundedCache", "RUNTIME_CACHE_SIZE", "aligned_empty", "ALIGN_BYTES",
           "ALIGN_MIN_BYTES"]

# how many built programs a runtime keeps by source or binary (opencl, cuda) beside the kernels realize caches: a hit
# saves a driver build; a program still in use is held by its kernels, not by this cache
RUNTIME_CACHE_SIZE = 64
# a buffer of at most this many bytes skips check_buffer_size (its sysconf calls): every machine has more memory
_SURELY_FITS = 64 << 20
# Host arrays of at least ALIGN_MIN_BYTES start on an ALIGN_BYTES boundary (a cache line, an AVX-512 vector). numpy
# puts a large array 16 bytes past a page start (glibc's mmap chunk header), so every 64-byte vector load of a kernel
# spans two cache lines: a 16M f32 sum on one core read 50 GB/s against 62 from an aligned start (a plain C loop of
# 4 vector accumulators, 60 interleaved rounds, load 5). Smaller arrays keep np.empty (slicing costs ~1 us a buffer).
ALIGN_BYTES = 64
ALIGN_MIN_BYTES = 64 << 10


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an ALIGN_BYTES boundary when it is ALIGN_MIN_BYTES or
    more (a view into a slightly larger byte array, its `base`), else a plain np.empty."""
    dtype = np.dtype(dtype)
    n = dtype.itemsize
    for d in shape:
        n *= d
    if n < ALIGN_MIN_BYTES:
        return np.empty(shape, dtype)
    raw = np.empty(n + ALIGN_BYTES, np.uint8)
    start = -raw.ctypes.data % ALIGN_BYTES
    return raw[start:start + n].view(dtype).reshape(shape)


class CompileError(RuntimeError):
    """A device's compiler rejected a kernel (the message holds its log); each backend's compile error is one, so a
    tool reports any of them as an error of the program, not of uopir."""


class BoundedCache:
    """A thread-safe least-recently-used map with at most `limit` entries: what a runtime keeps to skip a rebuild,
    without growing with every distinct program a long process compiles."""

    def __init__(self, limit: int = RUNTIME_CACHE_SIZE):
        self.limit = limit
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        """The value of `key` (now the most recently used), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> Any:
        """Keep `value` for `key`, dropping the least recently used entries past the bound; returns `value`."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)


# ---- memory ----------------------------------------------------------------------------------------------------------
class Buffer:
    """Memory for one tensor on one device: dtype, shape and the allocator's handle (host: a numpy array)."""

    __slots__ = ("allocator", "dtype", "shape", "handle", "owned", "host", "__weakref__")

    def __init__(self, allocator: Allocator, dtype: DType, shape: tuple[int, ...], handle: Any, owned: bool = False):
        self.allocator, self.dtype, self.shape, self.handle = allocator, dtype, tuple(shape), handle
        # `owned`: the allocator made the handle (Allocator.alloc) and releases it when this Buffer goes (__del__: one
        # method per class instead of a weakref.finalize object per buffer, which cost ~3 us an allocation)
        self.owned = owned
        self.host: Any = None  # what a host runtime remembers of the handle (its address), filled on first launch

    def __del__(self) -> None:
        if self.owned:
            try:
                self.allocator._free(self.handle, self.host)
            except Exception:  # noqa: BLE001 - at interpreter exit the modules it needs may be gone already
                if not sys.is_finalizing():
                    raise

    @property
    def device(self) -> str:
        return self.allocator.device

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return n

    def numpy(self) -> np.ndarray:
        """A fresh host copy of the contents (bf16 as its float32 carrier)."""
        return self.allocator.copyout(self)

    def host_view(self) -> np.ndarray | None:
        """The live host array when the buffer lives in host memory (writes go to the buffer), else None."""
        return self.allocator.host_view(self)

    def __repr__(self) -> str:
        return f"<Buffer {self.dtype} {list(self.shape)} on {self.device}>"


class Allocator:
    """Allocates buffers of one device and copies between them and numpy. Subclasses implement the _methods."""

    device: str = ""

    def alloc(self, dtype: DType, shape: tuple[int, ...]) -> Buffer:
        """An uninitialized buffer; its memory is released when the Buffer object is collected. BufferTooLarge
        (before allocating) when it needs more than this machine's memory."""
        shape = tuple(shape)
        n = dtype.itemsize
        for d in shape:
            n *= d
        if n > _SURELY_FITS:  # smaller buffers fit on any machine: skip the system call
            check_buffer_size(shape, dtype.itemsize, f"a buffer of {dtype.name} on {self.device or 'the host'}")
        return Buffer(self, dtype, shape, self._alloc(dtype, shape), type(self)._free is not Allocator._free)

    def from_numpy(self, array: np.ndarray, dtype: DType) -> Buffer:
        """A buffer holding `array` (already of dtype's host type). A host allocator may keep the array itself: the
        caller hands it over and must not write it afterwards."""
        buf = self.alloc(dtype, array.shape)
        self.copyin(buf, array)
        return buf

    def host_view(self, buf: Buffer) -> np.ndarray | None:
        return None

    def _alloc(self, dtype: DType, shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def _free(self, handle: Any, host: Any = None) -> None:
        """Release device memory (the default has nothing to release: the handle is garbage collected). Called from
        the dying Buffer's __del__ of a buffer `alloc` made, the handle still in the Buffer's slot; `host` is what a
        host runtime remembered of it (Buffer.host), for an allocator that hands the memory out again."""

    def copyin(self, buf: Buffer, array: np.ndarray) -> None:
        raise NotImplementedError

    def copyout(self, buf: Buffer) -> np.ndarray:
        raise NotImplementedError


class HostAllocator(Allocator):
    """Buffers in host memory: the handle is a C-contiguous numpy array of the dtype's carrier type."""

    def __init__(self, device: str):
        self.device = device

    def _alloc(self, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
        return aligned_empty(shape, np_dtype(dtype))

    def from_numpy(self, array: np.ndarray, dtype: DType) -> Buffer:
        want = np_dtype(dtype)
        if array.dtype == want and array.flags.c_contiguous and array.flags.writeable:
            return Buffer(self, dtype, array.shape, array)  # handed over: no copy
        return super().from_numpy(array, dtype)

    def copyin(self, buf: Buffer, array: np.ndarray) -> None:
        buf.handle[...] = np.asarray(array).reshape(buf.shape)

    def copyout(self, buf: Buffer) -> np.ndarray:
        return buf.handle.copy()

    def host_view(self, buf: Buffer) -> np.ndarray:
        return buf.handle


# ---- code ------------------------------------------------------------------------------------------------------------
class Renderer:
    """Device-level program -> source text in one language (C, LLVM IR, OpenCL C, CUDA C, MLIR)."""

    language: str = ""

    def render(self, program: UOp) -> str:
        raise NotImplementedError


class Compiler:
    """Source text + flags -> a binary, through the disk cache (uopir.backends.cache).

    `name` names the compiler and its version (part of the cache key and of the cache folder): two compilers, or
    two versions of one, never share an entry."""

    name: str = ""
    flags: tuple[str, ...] = ()

    def compile(self, source: str) -> bytes:
        raise NotImplementedError

    def compile_cached(self, source: str) -> bytes:
        key = cache_key(self.name, self.flags, source)
        hit = cache_get(self.name, key)
        if hit is not None:
            return hit
        binary = self.compile(source)
        cache_put(self.name, key, binary)
        return binary


@dataclass(eq=False)
class Program:
    """One loaded program: what it was made from and how the runtime calls it."""

    name: str
    device: str
    program: UOp  # the IR it was made from
    source: str | None  # the rendered text (None for the interpreter)
    binary: bytes | None  # the compiled bytes (None for the interpreter)
    entry: Callable[..., Any]  # the runtime's callable; Runtime.launch knows its signature

    def binary_callback(self) -> Callable[[bytes], None]:
        """What a runtime's kernel calls when its background compile delivers the binary: fills `binary`, holding
        this Program weakly (the kernel is the Program's `entry`: a strong reference back would make a cycle, which
        only the cyclic collector frees, so an evicted kernel's native code would stay until a full collection)."""
        ref = weakref.ref(self)

        def got(binary: bytes) -> None:
            prog = ref()
            if prog is not None:
                prog.binary = binary

        return got


LaunchBuffers = Sequence[Buffer] | Mapping[int, Buffer]


class Runtime:
    """Loads compiled programs and runs them on buffers."""

    device: str = ""

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | None) -> Program:
        raise NotImplementedError

    def launch(self, prog: Program, buffers: LaunchBuffers, *, global_size: tuple[int, ...] = (1, 1, 1),
               local_size: tuple[int, ...] = (1, 1, 1), var_vals: Mapping[str, int] | None = None) -> Any:
        """Run `prog`: compiled kernels take their buffers by position (kernel.param index) and write them,
        returning None; the interpreter takes a graph's buffers by id and returns the graph's value."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until every launched program has finished (a no-op for synchronous runtimes)."""

    def ready(self, prog: Program) -> None:
        """Wait until `prog` can start at once (a compile still running in the background has finished and its
        binary is loaded), so that timing a launch measures the run only. A no-op where loading is immediate."""


# ---- the bundle ------------------------------------------------------------------------------------------------------
class Backend:
    """A device: its target description, realize pipeline, renderer, compiler, allocator and runtime."""

    device: str = ""
    target: Target
    pipeline: str = ""  # pass pipeline text: tensor-level graph -> what this backend executes
    lowering: str = ""  # what `lower` runs when it differs from `pipeline` in form only (the same result)
    renderer: Renderer | None = None
    compiler: Compiler | None = None
    allocator: Allocator
    runtime: Runtime

    @property
    def available(self) -> bool:
        """Whether this backend can run programs on this machine now."""
        return True

    def lower(self, root: UOp, pipeline: str | None = None,
              instruments: Sequence[PassInstrumentation] = ()) -> UOp:
        """`root` through this backend's lowering (`lowering`, else `pipeline`), or the given pipeline (verification
        after each pass when UOPIR_VERIFY=1: the frontend builds valid IR and each pass is checked by its own tests);
        `instruments` observe the run besides the standard ones (realize starts compiles from one)."""
        from uopir.passes.instruments import standard_instruments
        from uopir.passes.manager import PassManager  # the pass registry loads on first realize, not on import

        text = (self.lowering or self.pipeline) if pipeline is None else pipeline
        if not text:
            return root
        insts = standard_instruments(verify=env.VERIFY.get()) + list(instruments)
        return PassManager.parse(text).run(root, instruments=insts)

    def compile(self, program: UOp, name: str = "program") -> Program:
        """Render, compile (cached) and load one device-level program."""
        if self.renderer is None or self.compiler is None:
            raise RuntimeError(f"device {self.device!r} has no renderer and compiler; override Backend.compile")
        src = self.renderer.render(program)
        return self.runtime.load(name, program, src, self.compiler.compile_cached(src))

    def realize(self, root: UOp) -> Buffer:
        """Compute the value of a tensor-level graph into a fresh buffer of this device. A backend whose pipeline
        ends in a schedule of kernels returns `uopir.backends.realize.realize(self, root)`: the schedule runs kernel
        by kernel through `compile`, `runtime.launch` and `allocator`."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.device!r} target={self.target.name!r}>"
