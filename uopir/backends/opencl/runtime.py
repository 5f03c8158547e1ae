"""The OpenCL runtime: the device, its buffers, program builds (cached) and kernel launches, through pyopencl.

- `cl_device()` picks the device once per process: `$UOPIR_OPENCL_DEVICE` (`P:D`, platform and device index), else
  the first GPU, else the first device of any kind (pocl's CPU device where there is no GPU), and offers it only once
  it has built a trivial kernel (`probe_build`; one tiny build per process, pocl's kernel cache makes later ones
  cheap). `OpenCLUnavailable` says why there is none, with the compiler's reason when the probe build fails.
- `OpenCLAllocator` keeps each buffer in device memory (`cl.Buffer`, at least one element: a branch-free gated load
  reads element 0 of an empty buffer); bf16 rides in float32, bool in bytes, as on the host.
- `OpenCLCompiler` builds OpenCL C and returns the device's program binary; `compile_cached` keeps binaries in the
  disk cache (namespace: the device, its driver and OpenCL version), `OpenCLRuntime.load` builds the binary for the
  device and keeps the built program in memory by source.
- `OpenCLRuntime.launch` runs a kernel with the global and local sizes its hardware ids ask for (gpu/launch.py),
  or the local size given; buffers of other devices (host arrays, numpy arrays in tests) are copied in and, for
  the buffers the kernel writes, back out after it.
"""
from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uopir.backends.codegen.program import kernel_signature
from uopir.backends.gpu.launch import LaunchSpec, launch_arguments, launch_spec
from uopir.backends.gpu.renderer import kernel_name
from uopir.backends.interface import Allocator, BoundedCache, Buffer, Compiler, LaunchBuffers, Program, Runtime
from uopir.backends.interface import CompileError as BaseCompileError
from uopir.backends.opencl.language import OPENCL
from uopir.backends.params import written_params
from uopir.dialects.semantics import np_dtype
from uopir.ir import env
from uopir.ir.dtype import DType
from uopir.ir.uop import UOp

__all__ = ["OpenCLUnavailable", "ClDevice", "cl_device", "open_device", "probe_build", "build_failure_reason",
           "PROBE_SOURCE", "OpenCLAllocator", "OpenCLCompiler", "OpenCLRuntime", "CompileError", "DEVICE_ENV"]

DEVICE_ENV = env.OPENCL_DEVICE.name

# The kernel a device must build before it is offered. A platform can list a device whose compiler builds nothing:
# pocl 3.0 (pocl-binary-distribution 3.0, the newest on PyPI, LLVM 14) asks LLVM for the host CPU's name, gets
# "generic" for a CPU newer than LLVM 14 (AMD Zen 5, cpu family 26) and passes `-target-cpu generic`, which its clang
# rejects ("unknown target CPU 'generic'"): every build fails. No environment variable or build option of that pocl
# chooses another CPU (its option list refuses -target-cpu/-mcpu and it puts its own last; POCL_LLVM_CPU_NAME came in
# pocl 5), so such a device is reported unavailable with the compiler's reason instead.
PROBE_SOURCE = "__kernel void uopir_probe(__global int *out) { out[get_global_id(0)] = 1; }\n"
# pyopencl's own lines around a build log (the log holds the compiler's words)
_BOILERPLATE = ("clBuildProgram failed", "clCompileProgram failed", "Build on ", "(options:")
_REASON_CHARS = 400
_UNKNOWN_CPU_HINT = ("the OpenCL driver's compiler does not know this CPU model: a newer driver is needed, e.g. pocl 5 "
                     "or later, which also takes POCL_LLVM_CPU_NAME=<an LLVM CPU name>")


class OpenCLUnavailable(RuntimeError):
    """No OpenCL device can be used here (the message says why)."""


class CompileError(BaseCompileError):
    """The OpenCL compiler rejected a kernel (the message holds its build log)."""


@dataclass
class ClDevice:
    """One OpenCL device with its context and in-order queue."""

    cl: Any  # the pyopencl module
    device: Any
    context: Any
    queue: Any

    @property
    def identity(self) -> str:
        d = self.device
        return f"{d.platform.name}|{d.name}|{d.driver_version}|{d.version}"

    @property
    def is_cpu(self) -> bool:
        return bool(self.device.type & self.cl.device_type.CPU)


_DEVICE: ClDevice | OpenCLUnavailable | None = None
_DEVICE_LOCK = threading.Lock()


def _pick(cl: Any) -> Any:
    platforms = cl.get_platforms()
    choice = env.OPENCL_DEVICE.raw()
    if choice:
        try:
            p, d = (int(x) for x in choice.split(":"))
            return platforms[p].get_devices()[d]
        except (ValueError, IndexError) as e:
            raise OpenCLUnavailable(f"${DEVICE_ENV}={choice!r} names no device (want PLATFORM:DEVICE indices)") from e
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise OpenCLUnavailable("no OpenCL device found (install an OpenCL driver, or pocl: pip install "
                                "'pyopencl[pocl]')")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


def build_failure_reason(message: str) -> str:
    """The compiler's words in a failed build's message, on one line: pyopencl wraps the build log in its own lines
    (the failed call, the device, the options), which say nothing about why. Its diagnostics ("error: ...") when it
    has any, else what is left; the message's first line when nothing is."""
    lines = [ln.strip() for ln in message.splitlines()]
    words = [ln for ln in lines if ln and not ln.startswith(_BOILERPLATE)]
    errors = [ln for ln in words if "error" in ln.lower()]
    first = next((ln for ln in lines if ln), "the build failed (no build log)")
    reason = "; ".join(errors or words) or first
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 3] + "..."
    if "unknown target cpu" in reason.lower():
        reason += f" ({_UNKNOWN_CPU_HINT})"
    return reason


def open_device() -> ClDevice:
    """A new context and queue on the device `cl_device()` would pick, without its probe build (OpenCLUnavailable
    when there is no device)."""
    try:
        import pyopencl as cl
    except ImportError as e:
        raise OpenCLUnavailable(f"pyopencl is not installed (pip install 'uopir[opencl]'): {e}") from None
    try:
        dev = _pick(cl)
        ctx = cl.Context([dev])
        return ClDevice(cl, dev, ctx, cl.CommandQueue(ctx, dev))
    except OpenCLUnavailable:
        raise
    except Exception as e:  # a broken ICD raises pyopencl's own errors
        raise OpenCLUnavailable(f"OpenCL could not be initialized: {e}") from None


def probe_build(dev: ClDevice, source: str = PROBE_SOURCE) -> str | None:
    """None when `dev` builds `source`, else why not: the compiler's reason (`build_failure_reason`)."""
    try:
        dev.cl.Program(dev.context, source).build(devices=[dev.device])
    except dev.cl.Error as e:
        return build_failure_reason(str(e))
    return None


def cl_device() -> ClDevice:
    """The process's OpenCL device (chosen and probed once); OpenCLUnavailable when there is none, or when it cannot
    build a trivial kernel (`PROBE_SOURCE`)."""
    global _DEVICE
    with _DEVICE_LOCK:
        if _DEVICE is None:
            try:
                dev = open_device()
            except OpenCLUnavailable as e:
                _DEVICE = e
            else:
                why = probe_build(dev, PROBE_SOURCE)
                _DEVICE = dev if why is None else OpenCLUnavailable(
                    f"OpenCL device {dev.device.name.strip()!r} ({dev.device.platform.name.strip()}) cannot build "
                    f"a trivial kernel: {why}")
        if isinstance(_DEVICE, OpenCLUnavailable):
            raise _DEVICE
        return _DEVICE


def _nbytes(dtype: DType, shape: tuple[int, ...]) -> int:
    return np_dtype(dtype).itemsize * math.prod(shape)


class OpenCLAllocator(Allocator):
    """Buffers in the OpenCL device's memory (`cl.Buffer`)."""

    device = "opencl"

    def _alloc(self, dtype: DType, shape: tuple[int, ...]) -> Any:
        dev = cl_device()
        n = max(_nbytes(dtype, shape), np_dtype(dtype).itemsize)
        return dev.cl.Buffer(dev.context, dev.cl.mem_flags.READ_WRITE, n)

    def copyin(self, buf: Buffer, array: np.ndarray) -> None:
        arr = np.ascontiguousarray(np.asarray(array, np_dtype(buf.dtype)).reshape(buf.shape))
        if arr.size:
            dev = cl_device()
            dev.cl.enqueue_copy(dev.queue, buf.handle, arr, is_blocking=True)

    def copyout(self, buf: Buffer) -> np.ndarray:
        out = np.empty(buf.shape, np_dtype(buf.dtype))
        if out.size:
            dev = cl_device()
            dev.cl.enqueue_copy(dev.queue, out, buf.handle, is_blocking=True)
        return out


class OpenCLCompiler(Compiler):
    """OpenCL C -> the device's program binary (kept in the disk cache per device and driver)."""

    def __init__(self, flags: Sequence[str] | None = None):
        self._flags = None if flags is None else tuple(flags)
        self.built = BoundedCache()  # source -> built program, in memory (the runtime loads from here first)

    @property
    def flags(self) -> tuple[str, ...]:  # type: ignore[override]
        if self._flags is None:
            dev = cl_device()
            rounded = dev.device.single_fp_config & dev.cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT
            self._flags = ("-cl-fp32-correctly-rounded-divide-sqrt",) if rounded else ()
        return self._flags

    @property
    def name(self) -> str:  # type: ignore[override]
        return "opencl-" + hashlib.sha256(cl_device().identity.encode()).hexdigest()[:16]

    def build(self, source: str) -> Any:
        """The built program of `source` (CompileError with the build log when the compiler rejects it)."""
        prg = self.built.get(source)
        if prg is not None:
            return prg
        dev = cl_device()
        try:
            prg = dev.cl.Program(dev.context, source).build(options=list(self.flags), devices=[dev.device])
        except dev.cl.Error as e:
            raise CompileError(f"the OpenCL compiler ({dev.device.name}) failed:\n{e}\n--- source ---\n{source}") \
                from None
        return self.built.put(source, prg)

    def compile(self, source: str) -> bytes:
        return bytes(self.build(source).binaries[0])


@dataclass
class ClKernel:
    """What a launch needs: the kernel object, its parameter count, variables, launch sizes, written buffers."""

    kernel: Any
    nparams: int
    vars: tuple[str, ...]
    spec: LaunchSpec
    written: frozenset[int]


class OpenCLRuntime(Runtime):
    """Loads built OpenCL programs (in memory by source) and launches their kernels."""

    device = "opencl"

    def __init__(self, compiler: OpenCLCompiler, allocator: OpenCLAllocator):
        self.compiler, self.allocator = compiler, allocator
        self._launch_lock = threading.Lock()  # a kernel object's arguments are set, then it is enqueued: one at a time

    def _built(self, source: str, binary: bytes | None) -> Any:
        c = self.compiler
        prg = c.built.get(source)
        if prg is not None:
            return prg
        dev = cl_device()
        if binary is not None:
            try:
                prg = dev.cl.Program(dev.context, [dev.device], [binary]).build(options=list(self.compiler.flags))
            except dev.cl.Error:
                prg = None  # a binary the driver no longer accepts: build from source
        if prg is None:
            return c.build(source)
        return c.built.put(source, prg)

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | None) -> Program:
        if source is None:
            raise ValueError("the OpenCL runtime loads rendered OpenCL C (source is None)")
        prg = self._built(source, binary)
        sig = kernel_signature(program)
        kernel = cl_device().cl.Kernel(prg, kernel_name(program, OPENCL))
        entry = ClKernel(kernel, len(sig.params), sig.vars, launch_spec(program), written_params(program))
        return Program(name, self.device, program, source, binary, entry)

    def launch(self, prog: Program, buffers: LaunchBuffers, *, global_size: tuple[int, ...] | None = None,
               local_size: tuple[int, ...] | None = None, var_vals: Mapping[str, int] | None = None) -> None:
        """Run the kernel; `local_size` overrides the work-group size of a kernel with global ids only (the grid is
        rounded up to a multiple of it). `global_size` is ignored: the kernel's ids say how many items run."""
        k: ClKernel = prog.entry
        dev = cl_device()
        bufs, vv = launch_arguments(prog.name, buffers, k.nparams, k.vars, var_vals)
        args: list[Any] = []
        back: list[tuple[int, Any, Any]] = []  # (param, foreign buffer/array, device copy)
        copies: dict[int, Any] = {}  # id(foreign buffer) -> its device copy (one copy when passed twice: aliasing)
        for i, b in enumerate(bufs):
            if isinstance(b, Buffer) and b.allocator is self.allocator:
                args.append(b.handle)
                continue
            if id(b) in copies:
                args.append(copies[id(b)])
                if i in k.written and all(x is not b for _, x, _ in back):
                    back.append((i, b, copies[id(b)]))
                continue
            host = b if isinstance(b, np.ndarray) else b.host_view()
            arr = host if host is not None else b.numpy()
            mf = dev.cl.mem_flags
            if arr.size:
                tmp = dev.cl.Buffer(dev.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(arr))
            else:
                tmp = dev.cl.Buffer(dev.context, mf.READ_WRITE, max(arr.itemsize, 1))
            args.append(tmp)
            copies[id(b)] = tmp
            if i in k.written:
                back.append((i, b, tmp))
        args.extend(np.int64(vv[v]) for v in k.vars)
        gsize, lsize = k.spec.sizes(vv)
        if lsize is None and local_size is not None:
            lsize = tuple(local_size[: len(gsize)]) + (1,) * (len(gsize) - len(local_size))
            gsize = tuple(-(-g // ls) * ls for g, ls in zip(gsize, lsize, strict=True))
        if math.prod(gsize) > 0:
            with self._launch_lock:
                k.kernel(dev.queue, gsize, lsize, *args)
        for _, b, tmp in back:
            host = b if isinstance(b, np.ndarray) else b.host_view()
            if host is not None and host.flags.c_contiguous:
                if host.size:
                    dev.cl.enqueue_copy(dev.queue, host, tmp, is_blocking=True)
            else:
                out = np.empty(b.shape, b.dtype if isinstance(b, np.ndarray) else np_dtype(b.dtype))
                if out.size:
                    dev.cl.enqueue_copy(dev.queue, out, tmp, is_blocking=True)
                if isinstance(b, np.ndarray):
                    b[...] = out
                else:
                    b.allocator.copyin(b, out)

    def synchronize(self) -> None:
        cl_device().queue.finish()
