"""Hand-written device programs on every compiled device: one body per check, parametrized over the devices that
run it (c, llvm, opencl), each skipped cleanly where its device is missing. A matmul with bias and relu, a variable
trip count with a gated load and an if, vector loads with gep/vectorize, a value read after its loop, bf16 loads
rounding their float32 carrier, the global id split across host cores, a packed matmul (a kernel.local scratch)
bit for bit, an in-place update through aliased buffers, and gated loads of an empty buffer (builders in
device_programs). What a device's renderer must print for these programs stays in its own file (test_<device>_backend).
"""
from __future__ import annotations

import numpy as np
import pytest
from device_programs import (
    GATED,
    MATMUL,
    PARALLEL,
    VECTOR,
    elementwise,
    escape_program,
    fresh_backend,
    gated_empty_program,
    on_device,
    on_devices,
    packed_matmul_program,
    parse_program,
    run,
    sequential_matmul,
    shared_backend,
    shift_add_program,
)

from uopir.backends.interface import Backend
from uopir.dialects.semantics import bf16_round, values_equal
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp

ALL_DEVICES = on_devices("c", "llvm", "opencl")
HOST_DEVICES = on_devices("c", "llvm")  # the devices whose programs run on host cores (threads, kernel.local scratch)


@pytest.fixture
def backend(device: str) -> Backend:
    return shared_backend(device)


@pytest.mark.parametrize("device", ALL_DEVICES)
def test_matmul_bias_relu_matches_numpy(backend: Backend) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8), np.float32), rng.standard_normal((8, 3), np.float32)
    bias = rng.standard_normal(3, np.float32)
    out = np.full((4, 3), np.nan, np.float32)
    run(backend, parse_program(MATMUL), [out, a, b, bias])
    want = np.zeros((4, 3), np.float32)  # the same order of float additions as the program: k ascending from 0
    for k in range(8):
        want = want + a[:, k:k + 1] * b[k:k + 1, :]
    np.testing.assert_array_equal(out, np.maximum(want + bias, np.float32(0)))


@pytest.mark.parametrize("device", ALL_DEVICES)
@pytest.mark.parametrize(("n", "want"), [(8, 36), (3, 6 - 5000), (5, 15 - 3000), (0, None)])
def test_variable_gated_load_and_if(backend: Backend, n: int, want: int | None) -> None:
    x = np.arange(1, 9, dtype=np.int32)
    out = np.array([12345], np.int32)
    run(backend, parse_program(GATED), [out, x[:max(n, 1)].copy() if n < 8 else x], {"n": n})
    assert out[0] == (12345 if want is None or want <= 0 else want)


@pytest.mark.parametrize("device", HOST_DEVICES)
def test_vector_load_alu_gep_vectorize_store(backend: Backend) -> None:
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(backend, parse_program(VECTOR), [out, x])
    m = x.reshape(2, 4) * np.array([2, 3, 4, 5], np.float32)
    np.testing.assert_array_equal(out.reshape(2, 4), np.stack([m[:, 3], m[:, 0], m[:, 3], m[:, 0]], axis=1))


@pytest.mark.parametrize("device", HOST_DEVICES)
def test_value_used_after_its_loop_keeps_the_last_iteration(backend: Backend) -> None:
    got = np.zeros(1, np.int64)
    run(backend, escape_program(), [got])
    assert got[0] == 16


@pytest.mark.parametrize("device", HOST_DEVICES)
def test_bf16_loads_round_the_carrier(backend: Backend) -> None:
    """A bf16 buffer filled from outside may hold any float32: what a kernel reads is that value rounded to bf16
    (as the reference interpreter reads it), never the raw carrier."""
    x = np.array([1.0 + 2**-9, 1.0 + 2**-8 + 2**-9, np.nan, -3.0000002, 1e-40], np.float32)
    out = np.zeros(x.size, np.float32)
    run(backend, elementwise("bf16_copy", x.size, [dtypes.bfloat16], [(dtypes.bfloat16, lambda v: v)]), [out, x])
    assert values_equal(out, bf16_round(x))
    assert out[0] == 1.0 and out[1] == np.float32(1.0 + 2**-7)


@pytest.mark.parametrize("device", HOST_DEVICES)
@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_global_id_splits_across_cores(device: str, threads: int) -> None:
    be = fresh_backend(device)
    be.runtime.threads = threads
    x = np.arange(37000, dtype=np.int64)
    out = np.full(1000, -1, np.int64)
    run(be, parse_program(PARALLEL), [out, x])
    np.testing.assert_array_equal(out, x.reshape(1000, 37).sum(axis=1))


@pytest.mark.parametrize("device", HOST_DEVICES)
@pytest.mark.parametrize("shape", [(128, 48, 64), (128, 160, 128)], ids=["stack-scratch", "heap-scratch"])
def test_packed_matmul_is_bit_identical(device: str, backend: Backend, shape: tuple[int, int, int]) -> None:
    """kernel-optimize's packed panels (a kernel.local: on the stack, or on the heap over 64 KiB), on the shared
    backend and on 3 cores (the column blocks split unevenly: each core packs the panels it computes)."""
    m, k, n = shape
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    out = np.full((m, n), np.nan, np.float32)
    prog = packed_matmul_program(m, k, n)
    run(backend, prog, [out, a, b])
    np.testing.assert_array_equal(out, sequential_matmul(a, b))
    three = fresh_backend(device)
    three.runtime.threads = 3
    out[:] = np.nan
    run(three, prog, [out, a, b])
    np.testing.assert_array_equal(out, sequential_matmul(a, b))


@pytest.mark.parametrize("device", HOST_DEVICES)
def test_heap_scratch_is_private_to_each_concurrent_call(device: str) -> None:
    """The heap scratch of a packed matmul is never zeroed: four Python threads launch the one compiled kernel at
    once, again and again, each on its own operands (so up to 4 calls hold a scratch buffer at a time); a buffer
    shared by two calls (a static one, or a cache of them handed out wrong), or a panel read before it is written,
    would mix another call's B into the result."""
    import threading

    be = fresh_backend(device)
    be.runtime.threads = 1
    m, k, n = 512, 160, 128  # an 80 KiB scratch: heap memory
    prog = packed_matmul_program(m, k, n)
    compiled = be.compile(prog)
    rng = np.random.default_rng(3)
    cases = [(rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)) for _ in range(4)]
    wrong: list[int] = []

    def worker(i: int) -> None:
        a, b = cases[i]
        want = sequential_matmul(a, b)
        for _ in range(40):
            out = np.full((m, n), np.nan, np.float32)
            be.runtime.launch(compiled, [out, a, b])
            be.runtime.synchronize()
            if not np.array_equal(out, want):
                wrong.append(i)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


@pytest.mark.parametrize("device", ALL_DEVICES)
def test_in_place_update_with_aliased_buffers(backend: Backend) -> None:
    """out[i + 1] = x[i] + 1 with out and x the same memory: the loop carries the dependency (c runs its variant
    without restrict, llvm its variant without noalias; opencl's host buffers share one device copy)."""
    buf = np.zeros(64, np.int32)
    run(backend, shift_add_program(), [buf, buf])
    np.testing.assert_array_equal(buf, np.arange(64, dtype=np.int32))


@pytest.mark.parametrize(("device", "width"), [on_device("c", 1, id="x1"), on_device("llvm", 1, id="x1"),
                                               on_device("llvm", 8, id="x8")])
def test_gated_loads_of_an_empty_buffer_read_nothing(backend: Backend, width: int) -> None:
    """A scalar gated load reads element 0 where its gate is off (an empty buffer is passed as a scratch element), so
    even a kernel whose gate is never on runs safely on one; llvm's vector one is a masked load, reading nothing."""
    prog = gated_empty_program(width)
    got = np.zeros(4 * width, np.float32)
    run(backend, prog, [got, np.zeros(0, np.float32)], {"n": 0})
    np.testing.assert_array_equal(got, [-1.0] * 4 * width)
    run(backend, prog, [got, np.arange(2 * width, dtype=np.float32) + 5], {"n": 2})
    np.testing.assert_array_equal(got, [*(np.arange(2 * width) + 5), *[-1.0] * 2 * width])


def _fma_inputs(n: int) -> list[np.ndarray]:
    """a, b, c whose fused and unfused a*b + c differ: cancellation (c = -a*b rounded), subnormal products, overflow
    of the product alone, random bits (inf, NaN, zeros of both signs)."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = (-(a.astype(np.float64) * b)).astype(np.float32)
    q = n // 4
    a[:q] *= np.float32(1e-20)
    b[:q] *= np.float32(1e-19)
    c[:q] = rng.standard_normal(q).astype(np.float32) * np.float32(1e-38)
    a[q:2 * q] *= np.float32(1e30)
    b[q:2 * q] *= np.float32(1e10)
    with np.errstate(all="ignore"):
        c[q:2 * q] = -a[q:2 * q] * np.float32(1e10)
    bits = rng.integers(0, 2**32, (3, q), dtype=np.uint64).astype(np.uint32).view(np.float32)
    for x, r in zip((a, b, c), bits, strict=True):
        x[3 * q:] = r
    return [a, b, c]


@pytest.mark.parametrize("device", HOST_DEVICES)
@pytest.mark.parametrize("width", [1, 16], ids=["scalar", "vector"])
def test_fma_is_rounded_once_as_the_semantics(backend: Backend, width: int) -> None:
    """device.fma (device-contract's fused sum update) on c and llvm: bit for bit the semantics' correctly rounded
    fma_f32, scalar and as a vector type; cancellation, subnormal and overflowing cases would differ if unfused."""
    from uopir.dialects import device as D
    from uopir.dialects.semantics import fma_f32

    n = 4096
    a, b, c = _fma_inputs(n)
    want = fma_f32(a, b, c)
    with np.errstate(all="ignore"):
        assert not values_equal(want, (a * b) + c)  # the inputs tell fused from unfused
    f32 = dtypes.float32
    prog = elementwise("fma", n, [f32, f32, f32], [(f32, lambda x, y, z: UOp(D.FMA, x.dtype, (x, y, z)))], width)
    out = np.full(n, np.nan, np.float32)
    run(backend, prog, [out, a, b, c])
    assert values_equal(out, want)
