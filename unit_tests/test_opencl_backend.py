"""The OpenCL backend: rendered OpenCL C, built by the OpenCL driver (pocl's CPU device in CI), reproduces the
semantics module bit for bit, runs hand-written device programs (loops, accumulators, gated loads, ifs, variables,
vectors, global ids, group/local ids with local memory and barriers), and realizes frontend programs with the same
values as the reference interpreter.

The edge-value kernels are the C backend's (test_c_backend): the same program, compared the same way. Skipped when
pyopencl or an OpenCL device is missing, or the device cannot build a trivial kernel (test_opencl_probe).
"""
from __future__ import annotations

import numpy as np
import pytest
from test_c_backend import (
    ALL,
    GATED,
    MATMUL,
    TRANSCENDENTAL,
    VECTOR,
    _binary_ops,
    _program,
    _result,
    _ulps,
    _unary_ops,
    _vec,
    edge_values,
    elementwise,
    idx,
    load,
    pairs,
    param,
    program,
    store,
)

from uopir.backends.registry import get_backend
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import alu, bitcast_array, cast_array, np_dtype, values_equal
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import get_op
from uopir.ir.uop import UOp

pytestmark = pytest.mark.skipif(not get_backend("opencl").available,
                                reason=f"the opencl device is unavailable: {get_backend('opencl').reason}")


@pytest.fixture(scope="module")
def backend():
    return get_backend("opencl")


def run(backend, prog: UOp, arrays: list[np.ndarray], var_vals: dict[str, int] | None = None, **kw) -> None:
    p = backend.compile(prog)
    backend.runtime.launch(p, arrays, var_vals=var_vals, **kw)
    backend.runtime.synchronize()


# ---- every core op and cast against the semantics --------------------------------------------------------------------
@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
def test_alu_ops_match_semantics_bit_for_bit(backend, d: DType) -> None:
    """Every binary, unary, ternary op of dtype d on all pairs of edge values, scalar and on 4-lane vectors (rendered
    lane by lane) in one kernel each."""
    for w in (1, 4):
        a, b = pairs(d)
        n = a.size - a.size % w
        a, b = a[:n].copy(), b[:n].copy()
        outs = []
        for name in _binary_ops(d):
            outs.append((name, _result(name, d), lambda x, y, name=name, w=w: UOp(get_op(name), _vec(_result(name, d),
                                                                                                     w), (x, y))))
        for name in _unary_ops(d):
            outs.append((name, d, lambda x, y, name=name, w=w: UOp(get_op(name), _vec(d, w), (x,))))
        if d is not dtypes.bool:
            outs.append(("core.mulacc", d, lambda x, y, w=w: UOp(C.MULACC, _vec(d, w), (x, y, x))))
        outs.append(("core.where", d, lambda x, y, w=w: UOp(C.WHERE, _vec(d, w), (
            UOp(C.CMPLT, _vec(dtypes.bool, w), (x, y)), x, y))))
        prog = elementwise(f"alu_{d.name}_{w}", n, [d, d], [(rd, f) for _, rd, f in outs], w)
        results = [np.zeros(n, np_dtype(rd)) for _, rd, _ in outs]
        run(backend, prog, [*results, a, b])
        for (name, rd, _), got in zip(outs, results, strict=True):
            if name == "core.mulacc":
                want = alu(name, d, [a, b, a])
            elif name == "core.where":
                want = alu(name, d, [alu("core.cmplt", dtypes.bool, [a, b]), a, b])
            elif name in _binary_ops(d):
                want = alu(name, rd, [a, b])
            else:
                want = alu(name, d, [a])
            if name in TRANSCENDENTAL:  # the OpenCL library's, within its documented ulps; specials exact
                tol = 4 if d in (dtypes.float32, dtypes.float64) else 1
                assert np.all(_ulps(got, want) <= tol), (name, d.name, a[_ulps(got, want) > tol])
                special = ~np.isfinite(a) | (a == 0)
                assert values_equal(got[special], want[special]), (name, d.name)
                continue
            assert values_equal(got, want), (name, d.name, w, [
                (x, y, g, v) for x, y, g, v in zip(a, b, got, want, strict=True)
                if not values_equal(np.asarray(g), np.asarray(v))][:8])


@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_casts_match_semantics_bit_for_bit(backend, src: DType) -> None:
    """core.cast from src to every dtype: saturating float -> int with NaN -> 0, exact f16/bf16 rounding."""
    x = edge_values(src)
    if src.is_float:
        extra = np.array([1 + 2.0**-8, 1 + 2.0**-9 + 2.0**-30, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-24, 2.0**-25,
                          3 * 2.0**-26, 2.0**24 + 1, 255.99, -0.99, 127.5, -128.99, 4294967295.5,
                          9.2233720368547748e18, -9.2233720368547758e18, 1.8446744073709550e19], np.float64)
        x = np.concatenate([x, cast_array(extra, dtypes.float64, src)])
    else:
        x = np.concatenate([x, cast_array(np.array([2**24 + 1, 2**53 + 1, 65519, 65520, 257], np.int64),
                                          dtypes.int64, src)])
    dsts = [d for d in ALL if d is not src]
    prog = elementwise(f"cast_{src.name}", x.size, [src], [(d, lambda v, d=d: UOp(C.CAST, d, (v,))) for d in dsts])
    results = [np.zeros(x.size, np_dtype(d)) for d in dsts]
    run(backend, prog, [*results, x])
    for d, got in zip(dsts, results, strict=True):
        want = cast_array(x, src, d)
        assert values_equal(got, want), (src.name, d.name, [(v, g, w) for v, g, w in zip(x, got, want, strict=True)
                                                            if not values_equal(np.asarray(g), np.asarray(w))][:8])


def test_bitcasts_match_semantics(backend) -> None:
    pairs_ = [(dtypes.float16, dtypes.int16), (dtypes.bfloat16, dtypes.uint16), (dtypes.int16, dtypes.bfloat16),
              (dtypes.float32, dtypes.int32), (dtypes.uint32, dtypes.float32), (dtypes.float64, dtypes.int64),
              (dtypes.int64, dtypes.float64)]
    for s, d in pairs_:
        x = edge_values(s)
        got = np.zeros(x.size, np_dtype(d))
        run(backend, elementwise(f"bc_{s.name}_{d.name}", x.size, [s], [(d, lambda v, d=d: UOp(C.BITCAST, d, (v,)))]),
            [got, x])
        assert values_equal(got, bitcast_array(x, s, d)), (s.name, d.name)


# ---- hand-written device programs ------------------------------------------------------------------------------------
def test_matmul_bias_relu_matches_numpy(backend) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8), np.float32), rng.standard_normal((8, 3), np.float32)
    bias = rng.standard_normal(3, np.float32)
    out = np.full((4, 3), np.nan, np.float32)
    run(backend, _program(MATMUL), [out, a, b, bias])
    want = np.zeros((4, 3), np.float32)
    for k in range(8):
        want = want + a[:, k:k + 1] * b[k:k + 1, :]
    np.testing.assert_array_equal(out, np.maximum(want + bias, np.float32(0)))


@pytest.mark.parametrize(("n", "want"), [(8, 36), (3, 6 - 5000), (0, None)])
def test_variable_gated_load_and_if(backend, n: int, want: int | None) -> None:
    x = np.arange(1, 9, dtype=np.int32)
    out = np.array([12345], np.int32)
    run(backend, _program(GATED), [out, x[:max(n, 1)].copy() if n < 8 else x], {"n": n})
    assert out[0] == (12345 if want is None or want <= 0 else want)


def test_vector_program_renders_as_opencl_vector_types(backend) -> None:
    """f32 vectors are OpenCL's float4 (vload4/vstore4 at any alignment), never GCC vector types; lanes picked by
    subscripts."""
    src = backend.renderer.render(_program(VECTOR))
    assert "vector_size" not in src and "memcpy" not in src
    assert "typedef float4 f32x4;" in src and "load_f32x4(&data1[" in src and "store_f32x4(&data0[" in src
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(backend, _program(VECTOR), [out, x])
    m = x.reshape(2, 4) * np.array([2, 3, 4, 5], np.float32)
    np.testing.assert_array_equal(out.reshape(2, 4), np.stack([m[:, 3], m[:, 0], m[:, 3], m[:, 0]], axis=1))


def _global_ids_program(n: UOp, m: int) -> UOp:
    """out[i * m + j] = x[i * m + j] * 2 + i over global ids (i on dim 1, j on dim 0)."""
    out, x = param(0, dtypes.int32), param(1, dtypes.int32)
    i = UOp(D.SPECIAL, dtypes.index, (n,), ("global_id", 1))
    j = UOp(D.SPECIAL, dtypes.index, (idx(m),), ("global_id", 0))
    off = i * idx(m) + j
    v = load(x, off) * UOp.const(dtypes.int32, 2) + UOp(C.CAST, dtypes.int32, (i,))
    return program("gids", out, x, n, i, j, off, v, store(out, off, v))


@pytest.mark.parametrize("local", [None, (4, 1), (7, 2)])
def test_global_ids_cover_the_grid_once(backend, local) -> None:
    """Every (i, j) runs once, whatever work-group size the launch takes (the grid is rounded up, the guard skips
    the extra items)."""
    prog = _global_ids_program(idx(5), 9)
    assert "get_global_id(1)" in backend.renderer.render(prog)
    x = np.arange(45, dtype=np.int32)
    out = np.full(45, -1, np.int32)
    run(backend, prog, [out, x], local_size=local)
    np.testing.assert_array_equal(out, x * 2 + np.repeat(np.arange(5, dtype=np.int32), 9))


def test_launch_size_from_a_variable(backend) -> None:
    n = UOp(K.VAR, dtypes.index, (), ("rows", 0, 64))
    prog = _global_ids_program(n, 3)
    x = np.arange(30, dtype=np.int32)
    out = np.full(30, -1, np.int32)
    run(backend, prog, [out, x], {"rows": 4})
    np.testing.assert_array_equal(out[:12], x[:12] * 2 + np.repeat(np.arange(4, dtype=np.int32), 3))
    assert np.all(out[12:] == -1)


def _local_sum_program(groups: int, size: int) -> UOp:
    """Per group: each local item writes x[g*size + l] to local memory, a barrier, item 0 sums the group's values."""
    out, x = param(0, dtypes.float32), param(1, dtypes.float32)
    g = UOp(D.SPECIAL, dtypes.index, (idx(groups),), ("group_id", 0))
    lid = UOp(D.SPECIAL, dtypes.index, (idx(size),), ("local_id", 0))
    lmem = UOp(K.LOCAL, dtypes.float32.ptr("local", size), (), 0)
    ld = load(x, g * idx(size) + lid)
    st = UOp(K.STORE, dtypes.void, (UOp(K.INDEX, lmem.dtype, (lmem, lid)), ld))
    bar = UOp(D.BARRIER, dtypes.void, (st,))
    first = UOp(C.CMPEQ, dtypes.bool, (lid, idx(0)))
    iff = UOp(D.IF, dtypes.void, (first, bar))
    acc = UOp(D.ACC, dtypes.float32, (UOp.const(dtypes.float32, 0.0),), 0)
    k = UOp(D.LOOP, dtypes.index, (idx(size),), 0)
    v = UOp(K.LOAD, dtypes.float32, (UOp(K.INDEX, lmem.dtype, (lmem, k)),))
    upd = UOp(D.ACCSTORE, dtypes.float32, (acc, acc + v))
    endk = UOp(D.ENDLOOP, dtypes.void, (k, upd))
    so = store(out, g, upd)
    return program("local_sum", out, x, g, lid, lmem, ld, st, bar, first, iff, acc, k, v, upd, endk, so,
                   UOp(D.ENDIF, dtypes.void, (iff, so)))


def test_local_memory_and_barrier(backend) -> None:
    prog = _local_sum_program(6, 16)
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


def test_aliased_host_buffers_share_one_device_copy(backend) -> None:
    out, x = param(0, dtypes.int32), param(1, dtypes.int32)
    loop = UOp(D.LOOP, dtypes.index, (idx(63),), 0)
    ld = load(x, loop)
    v = ld + UOp.const(dtypes.int32, 1)
    st = store(out, loop + idx(1), v)
    prog = program("shift_add", loop, ld, v, st, UOp(D.ENDLOOP, dtypes.void, (loop, st)))
    buf = np.zeros(64, np.int32)
    run(backend, prog, [buf, buf])
    np.testing.assert_array_equal(buf, np.arange(64, dtype=np.int32))


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
    prog = _program(MATMUL)
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
