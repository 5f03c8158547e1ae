"""Ways out of the IR: each device is a Backend (renderer + compiler + allocator + runtime + target description).

    registry.py    device name -> backend; available(), the best-available order, the frontend's device names
    interface.py   Buffer, Allocator, Renderer, Compiler, Program, Runtime, Backend: what every backend implements
    buffers.py     the buffer table behind `tensor.buffer {id = N}` ops
    cache.py       the on-disk compile cache (user cache folder, atomic writes)
    python/        the reference interpreter (handler tables per dialect) and its backend
    c/             the C backend (renderer, prelude of exact-semantics helpers, compiler, ctypes runtime)
    llvm/          the LLVM backend (llvmlite: O3 for the host cpu, MCJIT, ctypes)
    cpu/           what the host-cpu backends share: the program walk, the ctypes runtime
    gpu/           the C-style renderer for gpu dialects (a Language per dialect), launch sizes, emit-opencl/cuda
    opencl/        the OpenCL backend (pyopencl; pocl's CPU device where there is no GPU)
    cuda/          the CUDA backend (NVRTC or nvcc to PTX; pycuda launches where a GPU is present)

Importing this package registers every backend, each device's target description (uopir.passes.target) and the
backends' emit passes (`emit-c`, `emit-llvm`, `emit-opencl`, `emit-cuda`: `uop-opt --emit=LANG`).
"""
from uopir.backends.c import emit as _emit_c  # noqa: F401 - registers the emit-c pass
from uopir.backends.gpu import emit as _emit_gpu  # noqa: F401 - registers emit-opencl and emit-cuda
from uopir.backends.llvm import emit as _emit_llvm  # noqa: F401 - registers the emit-llvm pass
from uopir.backends.registry import (
    BACKENDS,
    DEVICES,
    PREFERENCE,
    available,
    canonical,
    default_device,
    get_backend,
    register_backend,
)

__all__ = ["BACKENDS", "DEVICES", "PREFERENCE", "available", "canonical", "default_device", "get_backend",
           "register_backend"]
