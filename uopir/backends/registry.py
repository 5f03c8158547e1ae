"""Which backends exist: device name -> backend factory, the best-available order, and the frontend's device names.

Every backend is registered by name, once, with a factory that imports its modules on first use (so a realize on
`c` never imports llvmlite or the gpu renderers), and with what it needs to run (the docs' table of backends is
generated from it). `register_backend(name, factory, replace=True)` redefines one; a backend registered as a
device (the default) is a Tensor device: `Tensor(x, device=name)`.

Each device's target description is registered under the device name (uopir.passes.target), so a pass reads
`target("c")` without importing a backend.
"""
from __future__ import annotations

from collections.abc import Callable

from uopir.backends.interface import Backend
from uopir.ir import env
from uopir.ir.once import FirstUse
from uopir.ir.registration import RegistrationError, Sites
from uopir.passes.target import Target, register_target

__all__ = ["DEVICES", "BACKENDS", "PREFERENCE", "register_backend", "unregister_backend", "get_backend", "available",
           "canonical", "default_device", "requirements"]

# The three lists grow in place when a backend is registered (a plugin's backend is a Tensor device like the built-in
# ones), so a module that imported them sees the new names.
DEVICES: list[str] = []  # what Tensor(device=...) accepts
BACKENDS: list[str] = []  # every backend: the devices and those that are not (mlir exports IR for other tools)
# the "best available" order: c before llvm (the frontend suite runs on c in `make test`, and gcc -O2 compiles big
# kernels much faster than LLVM at O3); opencl after both (its device may be the host cpu through pocl, and probing
# it costs ~0.5 s per process): a machine whose OpenCL device is a GPU chooses it with UOPIR_DEVICE=opencl. A
# registered device joins just before python (the reference interpreter stays the last resort).
PREFERENCE: list[str] = ["cuda", "c", "llvm", "opencl", "python"]

_FACTORIES: dict[str, Callable[[], Backend]] = {}
_NEEDS: dict[str, str] = {}  # backend -> what it needs to run, in words
_INSTANCES: dict[str, Backend] = {}
_FIRST_USE = FirstUse("backend")  # threads asking for a backend first: one instance, made once
_SITES = Sites("backend")


def register_backend(name: str, factory: Callable[[], Backend], *, needs: str = "", replace: bool = False,
                     device: bool = True) -> None:
    """Make `name` a backend; `factory()` builds it on first use (once per process, also when several threads use it
    first at the same time). `needs`: what it needs to run, in words (for the docs). `device`: a Tensor device
    (`Tensor(..., device=name)`), as every backend but one that only exports IR. A name registered on another line is
    a RegistrationError naming both places unless `replace`."""
    if not isinstance(name, str) or not name or name != name.strip().lower():
        raise RegistrationError(f"backend name {name!r} must be a non-empty lower-case string")
    _SITES.claim(name, name in _FACTORIES, replace)
    _FACTORIES[name] = factory
    _NEEDS[name] = needs
    _INSTANCES.pop(name, None)
    if name not in BACKENDS:
        BACKENDS.append(name)
    if device and name not in DEVICES:
        DEVICES.append(name)
        if name not in PREFERENCE:
            PREFERENCE.insert(PREFERENCE.index("python"), name)
    elif not device and name in DEVICES:
        DEVICES.remove(name)
        if name != "python":
            PREFERENCE.remove(name)


def unregister_backend(name: str) -> None:
    """Forget backend `name` (a test's or a plugin's that is being unloaded); KeyError if it is not registered."""
    del _FACTORIES[name]
    _NEEDS.pop(name, None)
    _INSTANCES.pop(name, None)
    _SITES.forget(name)
    for names in (BACKENDS, DEVICES, PREFERENCE):
        if name in names and name != "python":
            names.remove(name)


def get_backend(name: str) -> Backend:
    """The backend called `name` (case-insensitive); ValueError names the registered ones."""
    b = _INSTANCES.get(name)
    if b is not None:
        return b
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in _FACTORIES:
        raise ValueError(f"unknown backend {name!r}; registered backends: {', '.join(_FACTORIES)}")
    return _FIRST_USE.get(_INSTANCES, key, _FACTORIES[key])


def requirements() -> dict[str, str]:
    """Backend name -> what it needs to run (without probing the machine: `available()` says what runs here)."""
    return {n: _NEEDS.get(n, "") for n in _FACTORIES}


def available() -> list[str]:
    """The devices that can realize tensors now, best first."""
    return [d for d in PREFERENCE if d in _FACTORIES and get_backend(d).available]


def canonical(name: str | None) -> str:
    """The canonical (lower case) device name; None means the default. ValueError names the valid ones."""
    if name is None:
        return default_device()
    if not isinstance(name, str):
        raise TypeError(f"a device name must be a string, got {type(name).__name__}")
    d = name.strip().lower()
    if d not in DEVICES:
        raise ValueError(f"unknown device {name!r}; valid devices: {', '.join(DEVICES)}")
    return d


def default_device() -> str:
    """$UOPIR_DEVICE if set (validated), else the best available device."""
    name = env.DEVICE.raw()
    if name:
        return canonical(name)
    for d in PREFERENCE:  # the first available, without probing the ones after it
        if d in _FACTORIES and get_backend(d).available:
            return d
    raise RuntimeError("no backend is available")


def _python() -> Backend:
    from uopir.backends.python.backend import PythonBackend

    return PythonBackend()


def _c_target() -> Target:
    from uopir.backends.c.backend import c_target

    return c_target()


def _python_target() -> Target:
    from uopir.backends.python.backend import PYTHON_TARGET

    return PYTHON_TARGET


def _opencl() -> Backend:
    from uopir.backends.opencl.backend import OpenCLBackend

    return OpenCLBackend()


def _opencl_target() -> Target:
    from uopir.backends.opencl.backend import opencl_target

    return opencl_target()


def _cuda() -> Backend:
    from uopir.backends.cuda.backend import CUDABackend

    return CUDABackend()


def _cuda_target() -> Target:
    from uopir.backends.cuda.backend import cuda_target

    return cuda_target()


def _c() -> Backend:
    from uopir.backends.c.backend import CBackend

    return CBackend()


def _llvm() -> Backend:
    from uopir.backends.llvm.backend import LLVMBackend

    return LLVMBackend()


def _mlir() -> Backend:
    from uopir.backends.mlir.backend import MLIRBackend

    return MLIRBackend()


def _mlir_target() -> Target:
    from uopir.backends.mlir.backend import mlir_target

    return mlir_target()


def _llvm_target() -> Target:
    from uopir.backends.llvm.backend import llvm_target

    return llvm_target()


register_backend("python", _python, needs="nothing: the reference interpreter (numpy)")
register_backend("c", _c, needs="a C compiler ($CC, clang or cc); llvmlite for the tiered start")
register_backend("llvm", _llvm, needs="llvmlite (the test extra)")
register_backend("opencl", _opencl, needs="pyopencl and an OpenCL device (a GPU driver, or pocl on the CPU)")
register_backend("cuda", _cuda, needs="pycuda, nvcc and an NVIDIA GPU (the cuda extra)")
register_backend("mlir", _mlir, device=False, needs="xdsl, llvmlite, mlir-opt and mlir-translate (Debian: "
                 "mlir-19-tools; or $UOPIR_MLIR_BIN); it exports and runs IR, it is not a Tensor device")

# each device's target under its name, built on first use (probing the host is not free)
register_target(_python_target, "python")
register_target(_c_target, "c")
register_target(_llvm_target, "llvm")
register_target(_mlir_target, "mlir")
register_target(_opencl_target, "opencl")  # read from the OpenCL device when first asked for
register_target(_cuda_target, "cuda")  # the GPU's limits where pycuda sees one
