"""Ways out of the IR: each device is a Backend (renderer + compiler + allocator + runtime + target description).

    registry.py    device name -> backend; available(), the best-available order, the frontend's device names
    interface.py   Buffer, Allocator, Renderer, Compiler, Program, Runtime, Backend: what every backend implements
    buffers.py     the buffer table behind `tensor.buffer {id = N}` ops
    cache.py       the on-disk compile cache (user cache folder, atomic writes)
    python/        the reference interpreter (handler tables per dialect) and its backend
    c/             the C backend (renderer, prelude of exact-semantics helpers, compiler, ctypes runtime)
    llvm/          the LLVM backend (llvmlite: O3 for the host cpu, MCJIT, ctypes)
    codegen/       what every emitter shares: the identifier and escaping rule of each output language (names.py)
    cpu/           what the host-cpu backends share: the program walk, the ctypes runtime
    gpu/           the C-style renderer for gpu dialects (a Language per dialect), launch sizes, emit-opencl/cuda
    opencl/        the OpenCL backend (pyopencl; pocl's CPU device where there is no GPU)
    cuda/          the CUDA backend (NVRTC or nvcc to PTX; pycuda launches where a GPU is present)
    mlir/          MLIR interop through xDSL (export_module / emit-mlir; find_mlir_tool for mlir-opt)

Importing this package registers every backend, each device's target description (uopir.passes.target) and the
backends' emit passes (`emit-c`, `emit-llvm`, `emit-opencl`, `emit-cuda`, `emit-mlir`: `uop-opt --emit=LANG`), each
by name only: a backend's modules load when it is first used, an emit pass's when a pipeline names it (a realize on
`c` imports neither llvmlite's backend nor the gpu renderers).
"""
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
from uopir.passes.registry import register_lazy

register_lazy("uopir.backends.c.emit", "emit-c")
register_lazy("uopir.backends.gpu.emit", "emit-opencl", "emit-cuda")
register_lazy("uopir.backends.llvm.emit", "emit-llvm")
register_lazy("uopir.backends.mlir.emit", "emit-mlir")

__all__ = ["BACKENDS", "DEVICES", "PREFERENCE", "available", "canonical", "default_device", "get_backend",
           "register_backend"]
