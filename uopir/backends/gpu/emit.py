"""The `emit-opencl` and `emit-cuda` passes: every device.program of the graph (nested regions included) becomes a
device.source holding its OpenCL C / CUDA C text; `uop-opt --emit=opencl|cuda` prints just the text.

Registered when uopir.backends loads, beside emit-c. Rendering needs no device: a machine without OpenCL or a GPU
emits both languages.
"""
from __future__ import annotations

from dataclasses import dataclass

from uopir.backends.emit import emit_sources
from uopir.ir.uop import UOp
from uopir.passes.registry import register_pass
from uopir.passes.runner import PassContext

__all__ = ["emit_opencl", "emit_cuda"]


@dataclass
class EmitOptions:
    pass


def _emit(root: UOp, ctx: PassContext, lang_name: str) -> UOp:
    from uopir.backends.gpu.renderer import GpuRenderer, kernel_name

    if lang_name == "opencl":
        from uopir.backends.opencl.language import OPENCL as lang
    else:
        from uopir.backends.cuda.language import CUDA as lang
    renderer = GpuRenderer(lang)
    return emit_sources(root, ctx, lang_name, lambda p: (kernel_name(p, lang), renderer.render(p)))


@register_pass("emit-opencl", summary="replace the graph by one device.source of OpenCL C per device.program (what "
               "uop-opt --emit=opencl prints)", consumes=("core", "kernel", "device", "tensor"),
               produces=("device", "core"), options=EmitOptions)
def emit_opencl(root: UOp, options: EmitOptions, ctx: PassContext) -> UOp:
    return _emit(root, ctx, "opencl")


@register_pass("emit-cuda", summary="replace the graph by one device.source of CUDA C per device.program (what "
               "uop-opt --emit=cuda prints)", consumes=("core", "kernel", "device", "tensor"),
               produces=("device", "core"), options=EmitOptions)
def emit_cuda(root: UOp, options: EmitOptions, ctx: PassContext) -> UOp:
    return _emit(root, ctx, "cuda")
