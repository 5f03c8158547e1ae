"""The CUDA backend: device programs rendered to CUDA C, compiled to PTX (NVRTC or nvcc), launched with pycuda.

    graph --default{target=cuda}--> schedule of tensor.calls whose regions are device.programs
          --GpuRenderer(CUDA)--> CUDA C --CUDACompiler (disk cache)--> PTX --CUDARuntime (pycuda)--> kernels on the GPU

Available where pycuda sees a GPU and NVRTC or nvcc is present; elsewhere `available` is False with a `reason`, and
CUDA C still renders and compiles to PTX (`emit-cuda`, `CUDACompiler`). The target (`cuda_target`) is the GPU's
limits where there is one (threads per block, block dims, shared memory, warp size), else the generic gpu's.
"""
from __future__ import annotations

from uopir.backends.cuda.compiler import CUDACompiler
from uopir.backends.cuda.language import CUDA
from uopir.backends.cuda.runtime import CUDAAllocator, CUDARuntime, CUDAUnavailable, cuda_context
from uopir.backends.gpu.renderer import GpuRenderer
from uopir.backends.interface import Backend, Buffer, Program
from uopir.backends.realize import print_compiled, realize
from uopir.ir.uop import UOp
from uopir.passes.target import GPU, Target, target

__all__ = ["CUDABackend", "PIPELINE", "cuda_target"]

PIPELINE = "default{target=cuda}"


def cuda_target() -> Target:
    """The cuda target from the GPU's attributes (the generic gpu description where there is no GPU)."""
    try:
        c = cuda_context()
    except CUDAUnavailable:
        return GPU.derive(name="cuda")
    a = c.drv.device_attribute
    get = c.device.get_attribute
    return GPU.derive(name="cuda", max_threads_per_block=get(a.MAX_THREADS_PER_BLOCK),
                      max_local_dims=(get(a.MAX_BLOCK_DIM_X), get(a.MAX_BLOCK_DIM_Y), get(a.MAX_BLOCK_DIM_Z)),
                      max_global_dims=(get(a.MAX_GRID_DIM_X), get(a.MAX_GRID_DIM_Y), get(a.MAX_GRID_DIM_Z)),
                      local_bytes=get(a.MAX_SHARED_MEMORY_PER_BLOCK), warp_size=get(a.WARP_SIZE))


class CUDABackend(Backend):
    """Renders device programs to CUDA C, compiles them to PTX and runs them on the GPU (cuda_context())."""

    device = "cuda"

    def __init__(self, pipeline: str = PIPELINE, arch: str | None = None):
        self.pipeline = pipeline
        self.renderer = GpuRenderer(CUDA)
        self.compiler = CUDACompiler(arch)
        self.allocator = CUDAAllocator()
        self.runtime = CUDARuntime(self.allocator)

    @property
    def target(self) -> Target:  # type: ignore[override]
        return target("cuda")

    @property
    def reason(self) -> str:
        """Why the backend is not available ("" when it is)."""
        try:
            cuda_context()
        except CUDAUnavailable as e:
            return str(e)
        if not self.compiler.available:
            return "no CUDA compiler: install the nvidia-cuda-nvrtc wheel or the CUDA toolkit (nvcc)"
        return ""

    @property
    def available(self) -> bool:
        return not self.reason

    def compile(self, program: UOp, name: str | None = None) -> Program:
        """Render, compile to PTX (through the disk cache) and load one device.program. `UOPIR_DEBUG=4` prints the
        CUDA C of each kernel, `=6` its device program too."""
        reason = self.reason
        if reason:
            raise RuntimeError(f"device 'cuda' cannot run programs: {reason}")
        src = self.renderer.render(program)
        print_compiled(program, name or program.arg, src, "CUDA C")
        return self.runtime.load(name or program.arg, program, src, self.compiler.compile_cached(src))

    def realize(self, root: UOp) -> Buffer:
        """The value of a tensor-level graph: lowered by the pipeline, its kernels compiled and launched one by one."""
        reason = self.reason
        if reason:
            raise RuntimeError(f"device 'cuda' cannot run programs: {reason}")
        return realize(self, root)
