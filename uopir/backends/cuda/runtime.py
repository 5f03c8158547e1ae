"""The CUDA runtime: GPU buffers, PTX modules and kernel launches through pycuda (the `cuda` extra), where an NVIDIA
GPU and its driver are present.

`cuda_context()` initializes the driver and makes a context on `$UOPIR_CUDA_DEVICE` (an index, default 0) once per
process; `CUDAUnavailable` says why there is none (pycuda missing, no driver, no GPU). Buffers are device
allocations (at least one element: a branch-free gated load reads element 0 of an empty buffer); bf16 rides in
float32, bool in bytes, as on the host. A kernel with global ids launches blocks of up to 256 threads on dim x (the
kernel's guard skips the threads past the size), one thread per block on y and z; group and local ids launch exactly
their sizes. Buffers of other devices (host arrays) are copied in and, for the ones the kernel writes, back out.
"""
from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from uopir.backends.codegen.program import kernel_signature
from uopir.backends.cuda.language import CUDA
from uopir.backends.gpu.launch import LaunchSpec, launch_arguments, launch_spec
from uopir.backends.gpu.renderer import kernel_name
from uopir.backends.interface import Allocator, BoundedCache, Buffer, LaunchBuffers, Program, Runtime
from uopir.backends.params import written_params
from uopir.dialects.semantics import np_dtype
from uopir.ir import env
from uopir.ir.dtype import DType
from uopir.ir.uop import UOp

__all__ = ["CUDAUnavailable", "cuda_context", "gpu_compute_capability", "CUDAAllocator", "CUDARuntime",
           "DEVICE_ENV", "BLOCK"]

DEVICE_ENV = env.CUDA_DEVICE.name
BLOCK = 256  # threads per block on dim x for a kernel with global ids


class CUDAUnavailable(RuntimeError):
    """No CUDA GPU can be used here (the message says why)."""


@dataclass
class CudaContext:
    drv: Any  # pycuda.driver
    device: Any
    context: Any


_CTX: CudaContext | CUDAUnavailable | None = None
_LOCK = threading.Lock()


def cuda_context() -> CudaContext:
    """The process's CUDA context (made once); CUDAUnavailable when there is no usable GPU."""
    global _CTX
    with _LOCK:
        if _CTX is None:
            if importlib.util.find_spec("pycuda") is None:
                _CTX = CUDAUnavailable("pycuda is not installed (pip install 'uopir[cuda]' on a machine with the CUDA "
                                       "toolkit and an NVIDIA GPU)")
            else:
                try:
                    import pycuda.driver as drv

                    drv.init()
                    if drv.Device.count() == 0:
                        raise CUDAUnavailable("the CUDA driver sees no GPU")
                    dev = drv.Device(env.CUDA_DEVICE.get())
                    ctx = dev.retain_primary_context()
                    ctx.push()
                    _CTX = CudaContext(drv, dev, ctx)
                except CUDAUnavailable as e:
                    _CTX = e
                except Exception as e:  # no driver, no device: pycuda raises its own errors
                    _CTX = CUDAUnavailable(f"CUDA could not be initialized: {e}")
        if isinstance(_CTX, CUDAUnavailable):
            raise _CTX
        return _CTX


def gpu_compute_capability() -> tuple[int, int] | None:
    """The GPU's compute capability, or None without one (no probing when pycuda is missing)."""
    try:
        return tuple(cuda_context().device.compute_capability())  # type: ignore[return-value]
    except CUDAUnavailable:
        return None


class CUDAAllocator(Allocator):
    """Buffers in GPU memory (pycuda DeviceAllocation; freed when collected)."""

    device = "cuda"

    def _alloc(self, dtype: DType, shape: tuple[int, ...]) -> Any:
        c = cuda_context()
        return c.drv.mem_alloc(max(np_dtype(dtype).itemsize * math.prod(shape), np_dtype(dtype).itemsize))

    def copyin(self, buf: Buffer, array: np.ndarray) -> None:
        arr = np.ascontiguousarray(np.asarray(array, np_dtype(buf.dtype)).reshape(buf.shape))
        if arr.size:
            cuda_context().drv.memcpy_htod(buf.handle, arr)

    def copyout(self, buf: Buffer) -> np.ndarray:
        out = np.empty(buf.shape, np_dtype(buf.dtype))
        if out.size:
            c = cuda_context()
            c.context.synchronize()
            c.drv.memcpy_dtoh(out, buf.handle)
        return out


@dataclass
class CuKernel:
    function: Any
    module: Any
    nparams: int
    vars: tuple[str, ...]
    spec: LaunchSpec
    written: frozenset[int]


class CUDARuntime(Runtime):
    """Loads PTX modules and launches their kernels (one module per kernel, kept by its PTX)."""

    device = "cuda"

    def __init__(self, allocator: CUDAAllocator):
        self.allocator = allocator
        self._modules = BoundedCache()  # PTX -> loaded module (a kernel holds its own module while it lives)

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | None) -> Program:
        if binary is None:
            raise ValueError("the CUDA runtime loads PTX (binary is None)")
        c = cuda_context()
        mod = self._modules.get(binary)
        if mod is None:
            mod = self._modules.put(binary, c.drv.module_from_buffer(binary))
        sig = kernel_signature(program)
        fn = mod.get_function(kernel_name(program, CUDA))
        entry = CuKernel(fn, mod, len(sig.params), sig.vars, launch_spec(program), written_params(program))
        return Program(name, self.device, program, source, binary, entry)

    def launch(self, prog: Program, buffers: LaunchBuffers, *, global_size: tuple[int, ...] | None = None,
               local_size: tuple[int, ...] | None = None, var_vals: Mapping[str, int] | None = None) -> None:
        """Run the kernel with the grid its ids ask for; `local_size` overrides the block of a kernel with global ids
        only. `global_size` is ignored: the kernel's ids say how many threads run."""
        k: CuKernel = prog.entry
        c = cuda_context()
        bufs, vv = launch_arguments(prog.name, buffers, k.nparams, k.vars, var_vals)
        args: list[Any] = []
        back: list[tuple[Any, Any, Any]] = []
        copies: dict[int, Any] = {}
        for i, b in enumerate(bufs):
            if isinstance(b, Buffer) and b.allocator is self.allocator:
                args.append(b.handle)
                continue
            if id(b) not in copies:
                host = b if isinstance(b, np.ndarray) else b.host_view()
                arr = np.ascontiguousarray(host if host is not None else b.numpy())
                mem = c.drv.mem_alloc(max(arr.nbytes, arr.itemsize))
                if arr.size:
                    c.drv.memcpy_htod(mem, arr)
                copies[id(b)] = mem
                if i in k.written or any(j in k.written for j, x in enumerate(bufs) if x is b):
                    back.append((b, arr, mem))
            args.append(copies[id(b)])
        args.extend(np.int64(vv[v]) for v in k.vars)
        gsize, lsize = k.spec.sizes(vv)
        gsize = tuple(gsize) + (1,) * (3 - len(gsize))
        if lsize is None:
            block = tuple(local_size or (min(BLOCK, max(gsize[0], 1)), 1, 1))
            block = block + (1,) * (3 - len(block))
            grid = tuple(-(-g // b) for g, b in zip(gsize, block, strict=True))
        else:
            block = tuple(lsize) + (1,) * (3 - len(lsize))
            grid = tuple(g // b for g, b in zip(gsize, block, strict=True))
        if math.prod(grid) > 0:
            k.function(*args, block=tuple(int(x) for x in block), grid=tuple(int(x) for x in grid))
        for b, arr, mem in back:
            c.context.synchronize()
            if arr.size:
                c.drv.memcpy_dtoh(arr, mem)
            if isinstance(b, np.ndarray):
                if b is not arr:
                    b[...] = arr
            elif b.host_view() is not None:
                b.host_view()[...] = arr
            else:
                b.allocator.copyin(b, arr)

    def synchronize(self) -> None:
        cuda_context().context.synchronize()
