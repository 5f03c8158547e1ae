"""The C backend: render device programs to portable C, compile them with the system compiler, run them by ctypes.

    prelude.py    the C helpers where C differs from uopir's semantics (division by zero, saturating casts, ...)
    renderer.py   CRenderer: one device.program -> one C function
    compiler.py   CCompiler: $CC / clang / cc, exact-math flags, the disk cache
    runtime.py    CRuntime: ctypes loading and launching on host buffers
    backend.py    CBackend: the bundle behind the backend interface
    emit.py       the `emit-c` pass (`uop-opt --emit=c`)
"""
from uopir.backends.c.backend import CBackend
from uopir.backends.c.renderer import CRenderer, kernel_signature

__all__ = ["CBackend", "CRenderer", "kernel_signature"]
