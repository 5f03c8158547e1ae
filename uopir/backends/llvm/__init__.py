"""The LLVM backend: render device programs to LLVM IR, optimize and JIT-compile them with llvmlite, run by ctypes.

    renderer.py   LLVMRenderer: one device.program -> one LLVM IR function (exact semantics, vector types)
    compiler.py   LLVMCompiler: O3 for the host cpu with llvmlite's new pass manager -> object code (disk cache)
    runtime.py    LLVMRuntime: object code linked into one MCJIT engine, kernels called through ctypes
    backend.py    LLVMBackend: the bundle behind the backend interface (available when llvmlite imports)
    emit.py       the `emit-llvm` pass (`uop-opt --emit=llvm`)

The program walk and the ctypes runtime are shared with the C backend (uopir.backends.cpu).
"""
from uopir.backends.llvm.backend import LLVMBackend
from uopir.backends.llvm.renderer import LLVMRenderer, kernel_signature

__all__ = ["LLVMBackend", "LLVMRenderer", "kernel_signature"]
