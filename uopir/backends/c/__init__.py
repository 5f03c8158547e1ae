"""The C backend: render device programs to portable C, compile them with the system compiler, run them by ctypes.

    renderer.py   CRenderer: one device.program -> one C function (the C-style base and the C helpers where C
                  differs from uopir's semantics are uopir.backends.codegen's)
    compiler.py   CCompiler: $CC / clang / cc, exact-math flags, the disk cache
    runtime.py    CRuntime: ctypes loading and launching on host buffers
    backend.py    CBackend: the bundle behind the backend interface
    emit.py       the `emit-c` pass (`uop-opt --emit=c`)
"""
from uopir.backends.c.backend import CBackend
from uopir.backends.c.renderer import CRenderer, kernel_signature

__all__ = ["CBackend", "CRenderer", "kernel_signature"]
