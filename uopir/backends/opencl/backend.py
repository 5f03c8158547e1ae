"""The OpenCL backend: device programs rendered to OpenCL C, built by the OpenCL driver, run with pyopencl.

    graph --default{target=opencl}--> schedule of tensor.calls whose regions are device.programs
          --GpuRenderer(OPENCL)--> OpenCL C --OpenCLCompiler (disk cache of binaries)--> program
          --OpenCLRuntime--> kernels launched on device buffers

Its target description (`opencl_target`) is read from the device: per-dtype vector widths (the preferred widths),
f64 only with cl_khr_fp64 (or a double config), work-group limits and local memory size; f16 is computed in float
and stored as its bits, so every device has it.
"""
from __future__ import annotations

from uopir.backends.gpu.renderer import GpuRenderer
from uopir.backends.interface import Backend, Buffer, Program
from uopir.backends.opencl.language import OPENCL
from uopir.backends.opencl.runtime import (
    OpenCLAllocator,
    OpenCLCompiler,
    OpenCLRuntime,
    OpenCLUnavailable,
    cl_device,
)
from uopir.backends.realize import print_compiled, realize
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.target import ALL_DTYPES, GPU, Target, target

__all__ = ["OpenCLBackend", "PIPELINE", "opencl_target", "FALLBACK_TARGET"]

PIPELINE = "default{target=opencl}"
# what `target("opencl")` is where no OpenCL device can be opened (lowering for it still works)
FALLBACK_TARGET = GPU.derive(name="opencl", local_bytes=32 * 1024, max_threads_per_block=256,
                             max_local_dims=(256, 256, 256), warp_size=1)

_WIDTHS = (("char", (dtypes.int8, dtypes.uint8, dtypes.bool)), ("short", (dtypes.int16, dtypes.uint16)),
           ("int", (dtypes.int32, dtypes.uint32)), ("long", (dtypes.int64, dtypes.uint64, dtypes.index)),
           ("float", (dtypes.float32, dtypes.bfloat16)), ("double", (dtypes.float64,)), ("half", (dtypes.float16,)))


def opencl_target() -> Target:
    """The opencl target from the device's capabilities (FALLBACK_TARGET where there is no device)."""
    try:
        dev = cl_device()
    except OpenCLUnavailable:
        return FALLBACK_TARGET
    d = dev.device
    exts = set(d.extensions.split())
    has_f64 = "cl_khr_fp64" in exts or bool(getattr(d, "double_fp_config", 0))
    has_f16 = "cl_khr_fp16" in exts
    dts = ALL_DTYPES if has_f64 else ALL_DTYPES - {dtypes.float64}
    widths = []
    for name, ds in _WIDTHS:
        n = int(getattr(d, f"preferred_vector_width_{name}", 1) or 1)
        if name == "half" and not has_f16:
            n = 1  # f16 is computed in float lane by lane
        widths.extend((x, max(1, n)) for x in ds)
    sizes = tuple(int(x) for x in d.max_work_item_sizes[:3]) + (1,) * max(0, 3 - len(d.max_work_item_sizes))
    local_bytes = int(d.local_mem_size)
    has_local = local_bytes > 0
    return GPU.derive(name="opencl", dtypes=dts, vector_widths=tuple(widths), max_vector_bytes=16,
                      has_local=has_local, local_bytes=local_bytes if has_local else 0,
                      max_threads_per_block=int(d.max_work_group_size), max_local_dims=sizes[:3],
                      max_global_dims=(2**31 - 1,) * 3, warp_size=1)


class OpenCLBackend(Backend):
    """Renders device programs to OpenCL C and runs them on the OpenCL device (cl_device())."""

    device = "opencl"

    def __init__(self, pipeline: str = PIPELINE):
        self.pipeline = pipeline
        self.renderer = GpuRenderer(OPENCL)
        self.compiler = OpenCLCompiler()
        self.allocator = OpenCLAllocator()
        self.runtime = OpenCLRuntime(self.compiler, self.allocator)
        self._reason: str | None = None

    @property
    def target(self) -> Target:  # type: ignore[override]
        return target("opencl")

    @property
    def available(self) -> bool:
        try:
            cl_device()
        except OpenCLUnavailable as e:
            self._reason = str(e)
            return False
        return True

    @property
    def reason(self) -> str:
        return self._reason or ""

    def compile(self, program: UOp, name: str | None = None) -> Program:
        """Render, build (binaries through the disk cache) and load one device.program. `UOPIR_DEBUG=4` prints the
        OpenCL C of each kernel, `=6` its device program too."""
        try:
            cl_device()
        except OpenCLUnavailable as e:
            raise RuntimeError(f"device 'opencl' cannot compile programs: {e}") from None
        src = self.renderer.render(program)
        print_compiled(program, name or program.arg, src, "OpenCL C")
        return self.runtime.load(name or program.arg, program, src, self.compiler.compile_cached(src))

    def realize(self, root: UOp) -> Buffer:
        """The value of a tensor-level graph: lowered by the pipeline, its kernels built and launched one by one."""
        if not self.available:
            raise RuntimeError(f"device 'opencl' is not available: {self.reason}")
        return realize(self, root)
