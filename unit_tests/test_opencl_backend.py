"""The OpenCL backend: rendered OpenCL C, built by the OpenCL driver (pocl's CPU device in CI): OpenCL vector types,
global ids over any work-group size, launch sizes from variables, group/local ids with local memory and barriers,
located errors, its allocator, build caches and target, and f16 NaN payloads.

Every core op, cast and bitcast on edge values, and the hand-written device programs (matmul, gated loads, aliased
buffers sharing one device copy), run on opencl beside the other compiled devices in test_backend_semantics and
test_backend_programs (builders in device_programs). Skipped when pyopencl or an OpenCL device is missing, or the
device cannot build a trivial kernel (test_opencl_probe).
"""
from __future__ import annotations

import numpy as np
import pytest
from device_programs import (
    MATMUL,
    VECTOR,
    edge_values,
    elementwise,
    global_ids_program,
    idx,
    local_sum_program,
    param,
    parse_program,
    program,
    run,
    shared_backend,
    store,
)

from uopir.backends.registry import get_backend
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import alu, values_equal
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

pytestmark = pytest.mark.skipif(not get_backend("opencl").available,
                                reason=f"the opencl device is unavailable: {get_backend('opencl').reason}")


@pytest.fixture(scope="module")
def backend():
    return shared_backend("opencl")


# ---- hand-written device programs ------------------------------------------------------------------------------------
def test_vector_program_renders_as_opencl_vector_types(backend) -> None:
    """f32 vectors are OpenCL's float4 (vload4/vstore4 at any alignment), never GCC vector types; lanes picked by
    subscripts."""
    src = backend.renderer.render(parse_program(VECTOR))
    assert "vector_size" not in src and "memcpy" not in src
    assert "typedef float4 f32x4;" in src and "load_f32x4(&data1[" in src and "store_f32x4(&data0[" in src
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(backend, parse_program(VECTOR), [out, x])
    m = x.reshape(2, 4) * np.array([2, 3, 4, 5], np.float32)
    np.testing.assert_array_equal(out.reshape(2, 4), np.stack([m[:, 3], m[:, 0], m[:, 3], m[:, 0]], axis=1))


@pytest.mark.parametrize("local", [None, (4, 1), (7, 2)])
def test_global_ids_cover_the_grid_once(backend, local) -> None:
    """Every (i, j) runs once, whatever work-group size the launch takes (the grid is rounded up, the guard skips
    the extra items)."""
    prog = global_ids_program(idx(5), 9)
    assert "get_global_id(1)" in backend.renderer.render(prog)
    x = np.arange(45, dtype=np.int32)
    out = np.full(45, -1, np.int32)
    run(backend, prog, [out, x], local_size=local)
    np.testing.assert_array_equal(out, x * 2 + np.repeat(np.arange(5, dtype=np.int32), 9))


def test_launch_size_from_a_variable(backend) -> None:
    n = UOp(K.VAR, dtypes.index, (), ("rows", 0, 64))
    prog = global_ids_program(n, 3)
    x = np.arange(30, dtype=np.int32)
    out = np.full(30, -1, np.int32)
    run(backend, prog, [out, x], {"rows": 4})
    np.testing.assert_array_equal(out[:12], x[:12] * 2 + np.repeat(np.arange(4, dtype=np.int32), 3))
    assert np.all(out[12:] == -1)


def test_local_memory_and_barrier(backend) -> None:
    prog = local_sum_program(6, 16)
    src = backend.renderer.render(prog)
    assert "__local float lmem0[16];" in src and "barrier(CLK_LOCAL_MEM_FENCE);" in src
    assert "get_group_id(0)" in src and "get_local_id(0)" in src
    x = np.arange(96, dtype=np.float32) * 0.5
    out = np.zeros(6, np.float32)
    run(backend, prog, [out, x])
    want = np.zeros(6, np.float32)
    for t in range(16):
        want = want + x.reshape(6, 16)[:, t]
    np.testing.assert_array_equal(out, want)


def test_unrenderable_ops_are_located_errors(backend) -> None:
    a = UOp.const(dtypes.float32.vec(4), 1.0)
    wmma = UOp(D.WMMA, dtypes.float32.vec(4), (a, a, a), ("m16n8k16", (16, 8, 16), "cuda"))
    out = param(0, dtypes.float32)
    prog = program("tc", out, wmma, store(out, idx(0), UOp(C.GEP, dtypes.float32, (wmma,), (0,))))
    with pytest.raises(IRError, match="device.wmma"):
        backend.renderer.render(prog)
    with pytest.raises(IRError, match="kernel.range is left"):
        r = UOp(K.RANGE, dtypes.index, (idx(4),), (0, "loop"))
        backend.renderer.render(program("r", out, r, store(out, r, UOp.const(dtypes.float32, 1.0))))


# ---- buffers, caches, the target -------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [dtypes.bool, dtypes.int8, dtypes.float16, dtypes.bfloat16, dtypes.float64,
                               dtypes.uint64], ids=lambda d: d.name)
def test_allocator_round_trips_every_carrier(backend, d: DType) -> None:
    x = edge_values(d)
    buf = backend.allocator.from_numpy(x, d)
    assert buf.host_view() is None and buf.device == "opencl"
    assert values_equal(buf.numpy(), x)
    empty = backend.allocator.alloc(d, (0, 3))
    assert empty.numpy().shape == (0, 3)


def test_builds_are_cached_in_memory_and_on_disk(backend, tmp_path, monkeypatch) -> None:
    """The binary goes to the disk cache; a fresh compiler (a new process) takes it from there and the runtime loads
    it without compiling the source; a second build of one source is the same program object (memory cache)."""
    from uopir.backends.opencl.runtime import OpenCLCompiler, OpenCLRuntime

    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    prog = parse_program(MATMUL)
    src = backend.renderer.render(prog)
    comp = OpenCLCompiler()
    binary = comp.compile_cached(src)
    assert binary and any(p.is_file() for p in tmp_path.rglob("*"))
    assert comp.build(src) is comp.built.get(src)
    fresh = OpenCLCompiler()
    assert fresh.compile_cached(src) == binary and src not in fresh.built
    p = OpenCLRuntime(fresh, backend.allocator).load("mm", prog, src, binary)
    assert src in fresh.built  # built from the binary
    rng = np.random.default_rng(1)
    a, b, bias = rng.standard_normal((4, 8), np.float32), rng.standard_normal((8, 3), np.float32), np.zeros(3,
                                                                                                          np.float32)
    out = np.zeros((4, 3), np.float32)
    OpenCLRuntime(fresh, backend.allocator).launch(p, [out, a, b, bias])
    want = np.zeros((4, 3), np.float32)
    for k in range(8):
        want = want + a[:, k:k + 1] * b[k:k + 1, :]
    np.testing.assert_array_equal(out, np.maximum(want, np.float32(0)))


def test_target_capabilities_come_from_the_device() -> None:
    from uopir.backends.opencl.runtime import cl_device
    from uopir.passes.target import target

    t, dev = target("opencl"), cl_device().device
    assert t.kind == "gpu" and t.max_threads_per_block == dev.max_work_group_size
    assert t.local_bytes == dev.local_mem_size and t.max_local_dims[0] == dev.max_work_item_sizes[0]
    assert t.vector_width(dtypes.float32) == dev.preferred_vector_width_float
    assert (dtypes.float64 in t.dtypes) == ("cl_khr_fp64" in dev.extensions or bool(dev.double_fp_config))


def test_f16_nan_payloads_survive_ops(backend) -> None:
    """Regression: the prelude's portable f32 -> f16 code sent every NaN to 0x7e00; numpy (the semantics) keeps the
    payload's top bits (trunc of f16 NaN 0x7e01 is 0x7e01), as the frontend's signed-zero tests check bit for bit."""
    x = np.array([0x7E01, 0xFE02, 0x7C01, 0x7E00, 0x3C00], np.uint16).view(np.float16)
    got = np.zeros((2, x.size), np.float16)
    prog = elementwise("nan_payload", x.size, [dtypes.float16], [
        (dtypes.float16, lambda v: UOp(C.TRUNC, dtypes.float16, (v,))),
        (dtypes.float16, lambda v: UOp(C.NEG, dtypes.float16, (v,)))])
    run(backend, prog, [got[0], got[1], x])
    np.testing.assert_array_equal(got[0].view(np.uint16), alu("core.trunc", dtypes.float16, [x]).view(np.uint16))
    np.testing.assert_array_equal(got[1].view(np.uint16), alu("core.neg", dtypes.float16, [x]).view(np.uint16))
