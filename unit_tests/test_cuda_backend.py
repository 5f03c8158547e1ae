"""The CUDA backend without a GPU: CUDA C of real programs compiles to PTX (NVRTC or nvcc, whichever is present,
both where both are) and the PTX holds each kernel's entry point; the cuda device says clearly why it cannot run.
On a machine with an NVIDIA GPU (tests marked `gpu`) the same programs run and match the reference interpreter.
"""
from __future__ import annotations

import numpy as np
import pytest
from device_programs import (
    ALL,
    MATMUL,
    binary_ops,
    edge_values,
    elementwise,
    global_ids_program,
    idx,
    local_sum_program,
    pairs,
    parse_program,
    unary_ops,
)
from test_opencl_realize import PROGRAMS, _check

from uopir.backends.cuda.backend import CUDABackend
from uopir.backends.cuda.compiler import CUDACompiler, find_nvcc, find_nvrtc
from uopir.backends.cuda.language import CUDA
from uopir.backends.emit import programs
from uopir.backends.gpu.renderer import GpuRenderer, kernel_name
from uopir.backends.registry import get_backend
from uopir.dialects import core as C
from uopir.dialects.semantics import alu, cast_array, np_dtype, values_equal
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import get_op
from uopir.ir.uop import UOp

TOOLS = [t for t, ok in (("nvrtc", find_nvrtc() is not None), ("nvcc", find_nvcc() is not None)) if ok]
needs_compiler = pytest.mark.skipif(not TOOLS, reason="neither NVRTC (pip install nvidia-cuda-nvrtc) nor nvcc is "
                                                      "installed")
RENDER = GpuRenderer(CUDA)


def _alu_program(d: DType) -> UOp:
    outs = [(dtypes.bool if n.startswith("core.cmp") else d, lambda x, y, n=n: UOp(
        get_op(n), dtypes.bool if n.startswith("core.cmp") else d, (x, y))) for n in binary_ops(d)]
    outs += [(d, lambda x, y, n=n: UOp(get_op(n), d, (x,))) for n in unary_ops(d)]
    return elementwise(f"alu_{d.name}", 8, [d, d], outs)


def _cast_program(s: DType) -> UOp:
    return elementwise(f"cast_{s.name}", 8, [s], [(d, lambda v, d=d: UOp(C.CAST, d, (v,))) for d in ALL if d is not s])


def _frontend_programs() -> list[UOp]:
    """The device programs of the realize suite's programs lowered by default{target=cuda} (no GPU needed)."""
    be = CUDABackend()
    out: list[UOp] = []
    for build, _ in PROGRAMS.values():
        out += programs(be.lower(build("python").uop))
    return out


def _ptx_ok(tool: str, progs: list[UOp]) -> None:
    comp = CUDACompiler("sm_90", tool)
    for p in progs:
        ptx = comp.compile(RENDER.render(p)).decode()
        assert f".entry {kernel_name(p, CUDA)}(" in ptx, (tool, p.arg)
        assert ".target sm_90" in ptx


@needs_compiler
def test_every_dtype_compiles_to_ptx() -> None:
    """Every core op and every cast of every dtype (f16 via cuda_fp16.h, bf16 via cuda_bf16.h or exact bit code)."""
    _ptx_ok(TOOLS[0], [_alu_program(d) for d in ALL] + [_cast_program(d) for d in ALL])


@needs_compiler
def test_frontend_programs_compile_to_ptx() -> None:
    """matmul, conv, softmax, reductions over each axis, pads/flips, int/bool/half/bf16 programs: every kernel."""
    progs = _frontend_programs()
    assert len(progs) >= len(PROGRAMS)
    _ptx_ok(TOOLS[0], progs)


@needs_compiler
@pytest.mark.parametrize("tool", TOOLS)
def test_ids_local_memory_and_barriers_compile_with_each_compiler(tool: str) -> None:
    progs = [parse_program(MATMUL), global_ids_program(idx(5), 9), local_sum_program(6, 16),
             _cast_program(dtypes.float16), _cast_program(dtypes.bfloat16)]
    src = RENDER.render(progs[2])
    assert "__shared__ float lmem0[16];" in src and "__syncthreads();" in src
    assert "blockIdx.x" in src and "threadIdx.x" in src
    _ptx_ok(tool, progs)


@needs_compiler
def test_compile_errors_carry_the_log() -> None:
    from uopir.backends.cuda.compiler import CompileError

    with pytest.raises(CompileError, match="undefined|identifier"):
        CUDACompiler("sm_90", TOOLS[0]).compile('extern "C" __global__ void k() { nope(); }')


def test_bad_arch_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="sm_90"):
        CUDACompiler("volta")


def test_cuda_device_without_a_gpu_says_why() -> None:
    be = get_backend("cuda")
    if be.available:
        pytest.skip("a GPU is present")
    assert "cuda" not in __import__("uopir.backends", fromlist=["available"]).available()
    with pytest.raises(RuntimeError, match="device 'cuda' cannot run programs: .*(pycuda|GPU|CUDA)"):
        be.realize(UOp.const(dtypes.float32, 1.0))


# ---- on a GPU --------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_realize_on_the_gpu_matches_the_interpreter(name: str) -> None:
    build, exact = PROGRAMS[name]
    _check(name, build("cuda").numpy(), build("python").numpy(), exact)


@pytest.mark.gpu
@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
def test_alu_and_casts_on_the_gpu_match_semantics(d: DType) -> None:
    be = get_backend("cuda")
    a, b = pairs(d)
    prog = elementwise(f"alu_{d.name}", a.size, [d, d], [(dtypes.bool if n.startswith("core.cmp") else d, lambda x, y,
                       n=n: UOp(get_op(n), dtypes.bool if n.startswith("core.cmp") else d, (x, y)))
                       for n in binary_ops(d)])
    results = [np.zeros(a.size, np_dtype(dtypes.bool if n.startswith("core.cmp") else d)) for n in binary_ops(d)]
    be.runtime.launch(be.compile(prog), [*results, a, b])
    for n, got in zip(binary_ops(d), results, strict=True):
        assert values_equal(got, alu(n, dtypes.bool if n.startswith("core.cmp") else d, [a, b])), (n, d.name)
    x = edge_values(d)
    dsts = [t for t in ALL if t is not d]
    outs = [np.zeros(x.size, np_dtype(t)) for t in dsts]
    be.runtime.launch(be.compile(elementwise(f"cast_{d.name}", x.size, [d], [(t, lambda v, t=t: UOp(C.CAST, t, (v,)))
                                                                             for t in dsts])), [*outs, x])
    for t, got in zip(dsts, outs, strict=True):
        assert values_equal(got, cast_array(x, d, t)), (d.name, t.name)
