"""Hand-written device programs on every compiled device: one body per check, parametrized over the devices that
run it (c, llvm, opencl), each skipped cleanly where its device is missing. A matmul with bias and relu, a variable
trip count with a gated load and an if, vector loads with gep/vectorize, a value read after its loop, bf16 loads
rounding their float32 carrier, the global id split across host cores, and a packed matmul (a kernel.local scratch)
bit for bit. What a device's renderer must print for these programs stays in its own file (test_<device>_backend).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from test_c_backend import (
    GATED,
    MATMUL,
    PARALLEL,
    VECTOR,
    _program,
    elementwise,
    escape_program,
    packed_matmul_program,
    sequential_matmul,
)

from uopir.backends.c.backend import CBackend
from uopir.backends.c.compiler import CCompiler, find_cc
from uopir.backends.interface import Backend
from uopir.backends.llvm.backend import LLVMBackend
from uopir.backends.llvm.compiler import llvm_host
from uopir.backends.registry import get_backend
from uopir.dialects.semantics import bf16_round, values_equal
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp


def _missing(device: str) -> str | None:
    """Why `device` cannot run here (None: it can)."""
    if device == "c":
        return None if find_cc() is not None else "no C compiler ($CC, clang or cc) is installed"
    if device == "llvm":
        return None if llvm_host() is not None else "llvmlite is not installed"
    be = get_backend(device)
    return None if be.available else f"the {device} device is unavailable: {be.reason}"


def _devices(*names: str) -> list:
    return [pytest.param(n, marks=pytest.mark.skipif(_missing(n) is not None, reason=_missing(n) or ""), id=n)
            for n in names]


# how each device's backend is made: the fixture's (c: every kernel at the default -O2, as test_c_backend) and a
# fresh one a test may set up (threads) without touching the shared one
_SHARED: dict[str, Callable[[], Backend]] = {"c": lambda: CBackend(CCompiler()), "llvm": LLVMBackend,
                                              "opencl": lambda: get_backend("opencl")}
_FRESH: dict[str, Callable[[], Backend]] = {"c": CBackend, "llvm": LLVMBackend}
ALL_DEVICES = _devices("c", "llvm", "opencl")
HOST_DEVICES = _devices("c", "llvm")  # the devices whose programs run on host cores (threads, kernel.local scratch)


@pytest.fixture(scope="module")
def backends() -> dict[str, Backend]:
    return {}


@pytest.fixture
def backend(device: str, backends: dict[str, Backend]) -> Backend:
    if device not in backends:
        backends[device] = _SHARED[device]()
    return backends[device]


def run(backend: Backend, prog: UOp, arrays: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    p = backend.compile(prog)
    backend.runtime.launch(p, arrays, var_vals=var_vals)
    backend.runtime.synchronize()


@pytest.mark.parametrize("device", ALL_DEVICES)
def test_matmul_bias_relu_matches_numpy(backend: Backend) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8), np.float32), rng.standard_normal((8, 3), np.float32)
    bias = rng.standard_normal(3, np.float32)
    out = np.full((4, 3), np.nan, np.float32)
    run(backend, _program(MATMUL), [out, a, b, bias])
    want = np.zeros((4, 3), np.float32)  # the same order of float additions as the program: k ascending from 0
    for k in range(8):
        want = want + a[:, k:k + 1] * b[k:k + 1, :]
    np.testing.assert_array_equal(out, np.maximum(want + bias, np.float32(0)))


@pytest.mark.parametrize("device", ALL_DEVICES)
@pytest.mark.parametrize(("n", "want"), [(8, 36), (3, 6 - 5000), (5, 15 - 3000), (0, None)])
def test_variable_gated_load_and_if(backend: Backend, n: int, want: int | None) -> None:
    x = np.arange(1, 9, dtype=np.int32)
    out = np.array([12345], np.int32)
    run(backend, _program(GATED), [out, x[:max(n, 1)].copy() if n < 8 else x], {"n": n})
    assert out[0] == (12345 if want is None or want <= 0 else want)


@pytest.mark.parametrize("device", HOST_DEVICES)
def test_vector_load_alu_gep_vectorize_store(backend: Backend) -> None:
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(backend, _program(VECTOR), [out, x])
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
    be = _FRESH[device]()
    be.runtime.threads = threads
    x = np.arange(37000, dtype=np.int64)
    out = np.full(1000, -1, np.int64)
    run(be, _program(PARALLEL), [out, x])
    np.testing.assert_array_equal(out, x.reshape(1000, 37).sum(axis=1))


@pytest.mark.parametrize("device", HOST_DEVICES)
@pytest.mark.parametrize("shape", [(64, 48, 64), (40, 160, 128)], ids=["stack-scratch", "heap-scratch"])
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
    three = _FRESH[device]()
    three.runtime.threads = 3
    out[:] = np.nan
    run(three, prog, [out, a, b])
    np.testing.assert_array_equal(out, sequential_matmul(a, b))
