"""uopir.backends.params.written_params: the buffer params a kernel stores to, through any chain of kernel.index,
read the same from a kernel.def (uop-run's outputs) and a device.program (what the opencl/cuda runtimes copy back)."""
from __future__ import annotations

from uopir.backends.params import written_params
from uopir.ir.parser import parse_ir
from uopir.passes.manager import PassManager

# param 0 is only read, param 1 written through an index of an index, param 2 written directly
KERNEL = """
%a = kernel.param {idx = 0} : ptr<f32, global>
%b = kernel.param {idx = 1} : ptr<f32, global>
%c = kernel.param {idx = 2} : ptr<f32, global>
%c4 = core.const 4 : index
%i = kernel.range %c4 {axis = 0} : index
%pa = kernel.index %a, %i : ptr<f32, global>
%x = kernel.load %pa : f32
%c1 = core.const 1 : index
%pb0 = kernel.index %b, %c1 : ptr<f32, global>
%pb = kernel.index %pb0, %i : ptr<f32, global>
%sb = kernel.store %pb, %x
%pc = kernel.index %c, %i : ptr<f32, global>
%sc = kernel.store %pc, %x
%g = core.group %sb, %sc
%e = kernel.end %g, %i
kernel.def %e {name = "k"}
"""


def test_written_params_of_a_kernel_def() -> None:
    root = parse_ir(KERNEL, "k.uop")
    assert written_params(root) == frozenset({1, 2})


def test_written_params_of_a_device_program_and_a_read_only_kernel() -> None:
    from uopir.backends.emit import programs
    from uopir.backends.registry import get_backend
    from uopir.tools.uop_run import _stage_pipeline
    lowered = PassManager.parse(_stage_pipeline(get_backend("c"), "kernel")).run(parse_ir(KERNEL, "k.uop"))
    progs = programs(lowered)
    assert len(progs) == 1 and written_params(progs[0]) == frozenset({1, 2})
    read_only = """%a = kernel.param {idx = 0} : ptr<f32, global>
%c0 = core.const 0 : index
%p = kernel.index %a, %c0 : ptr<f32, global>
%x = kernel.load %p : f32
kernel.def %x {name = "r"}
"""
    assert written_params(parse_ir(read_only, "r.uop")) == frozenset()
