"""The `emit-opencl` and `emit-cuda` passes (uopir.backends.codegen.emit.emit_pass): each device.program becomes a
device.source of its OpenCL C / CUDA C text; `uop-opt --emit=opencl|cuda` prints just the text. Rendering needs no
device: a machine without OpenCL or a GPU emits both languages."""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.backends.codegen.emit import EmitOptions, Render, emit_pass
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.backends.codegen.cstyle import Language

__all__ = ["emit_opencl", "emit_cuda"]


def gpu_render(lang: Language) -> Render:
    """A program -> (its kernel name, its text in `lang`)."""
    from uopir.backends.gpu.renderer import GpuRenderer, kernel_name

    renderer = GpuRenderer(lang)

    def render(p: UOp) -> tuple[str, str]:
        return kernel_name(p, lang), renderer.render(p)
    return render


def opencl_render(options: EmitOptions) -> Render:
    from uopir.backends.opencl.language import OPENCL

    return gpu_render(OPENCL)


def cuda_render(options: EmitOptions) -> Render:
    from uopir.backends.cuda.language import CUDA

    return gpu_render(CUDA)


emit_opencl = emit_pass("opencl", opencl_render, what="OpenCL C")
emit_cuda = emit_pass("cuda", cuda_render, what="CUDA C")
