"""Every compiled device reproduces the semantics module bit for bit: every core op on every dtype on all pairs of
edge values (NaN, +-inf, -0.0, subnormals, int min/max, division by zero, shifts out of range), every cast (float ->
int out of range, rounding to f16/bf16) and every bitcast, one kernel per dtype, compared with
`uopir.dialects.semantics` (the reference interpreter's and constant folding's arithmetic) by `values_equal` (bits;
any NaN equals any NaN). One body per check, parametrized over the devices (c, llvm, opencl), each skipped with its
reason where its device cannot run here; what each device runs (vector widths, extra cast inputs, bitcast pairs) is
the table device_programs.SEMANTICS_CASES.
"""
from __future__ import annotations

import numpy as np
import pytest
from device_programs import (
    ALL,
    SEMANTICS_CASES,
    check_alu_ops,
    check_bitcasts,
    check_casts,
    elementwise,
    on_device,
    run,
    shared_backend,
)

from uopir.backends.interface import Backend
from uopir.dialects import core as C
from uopir.dialects.semantics import cast_array, values_equal
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

DEVICES = ("c", "llvm", "opencl")


@pytest.fixture
def backend(device: str) -> Backend:
    return shared_backend(device)


@pytest.mark.parametrize(("device", "d", "width"), [on_device(dev, d, w, id=f"{d.name}-x{w}") for dev in DEVICES
                                                    for d in ALL for w in SEMANTICS_CASES[dev].alu_widths])
def test_alu_ops_match_semantics_bit_for_bit(backend: Backend, d: DType, width: int) -> None:
    """Every binary, unary and ternary op of dtype d on all pairs of edge values, in one kernel, as scalars and as
    vectors of the device's widths."""
    check_alu_ops(backend, d, width)


@pytest.mark.parametrize(("device", "src", "width"), [on_device(dev, s, w, id=f"{s.name}-x{w}") for dev in DEVICES
                                                      for s in ALL for w in SEMANTICS_CASES[dev].cast_widths])
def test_casts_match_semantics_bit_for_bit(device: str, backend: Backend, src: DType, width: int) -> None:
    """core.cast from src to every dtype on the edge values and the device's extra inputs."""
    check_casts(backend, src, SEMANTICS_CASES[device], width)


@pytest.mark.parametrize(("device", "bits"), [on_device(dev, b, id=str(b)) for dev in DEVICES for b in (16, 32, 64)])
def test_bitcasts_match_semantics(device: str, backend: Backend, bits: int) -> None:
    check_bitcasts(backend, SEMANTICS_CASES[device].bitcasts, bits)


@pytest.mark.parametrize("device", [on_device(dev) for dev in ("c", "llvm")])
def test_int64_to_bf16_rounds_once(backend: Backend) -> None:
    """Regression: 2**53 + 2**45 + 1 is just above a bf16 halfway point; a double rounding through f32 lands even."""
    x = np.array([2**53 + 2**45 + 1, -(2**53 + 2**45 + 1), 2**62 + 2**54 + 1, 2**63 - 1, -(2**63)], np.int64)
    got = np.zeros(x.size, np.float32)
    run(backend, elementwise("i64_bf16", x.size, [dtypes.int64], [(dtypes.bfloat16, lambda v: UOp(
        C.CAST, dtypes.bfloat16, (v,)))]), [got, x])
    assert values_equal(got, cast_array(x, dtypes.int64, dtypes.bfloat16))
    assert got[0] == np.float32(2.0**53 + 2**46)


@pytest.mark.parametrize(("device", "d", "width"), [on_device(dev, d, w, id=f"{d.name}-x{w}") for dev, ws in
                                                    (("c", ((dtypes.float32, 8), (dtypes.float64, 2))),
                                                     ("llvm", ((dtypes.float32, 2), (dtypes.float32, 13),
                                                               (dtypes.float64, 8)))) for d, w in ws])
def test_float_max_vectors_match_semantics(backend: Backend, d: DType, width: int) -> None:
    """core.max of float vectors at the widths the alu table skips (on an AVX-512DQ host vrangeps and a masked add,
    in registers of 4, 8 or 16 floats; llvm pads 13 lanes to 16) on every pair of edge values: NaN either side wins,
    +0.0 above -0.0, bit for bit (any NaN equals any NaN)."""
    from device_programs import pairs, vec

    from uopir.dialects.semantics import alu
    a, b = pairs(d)
    n = a.size - a.size % width
    a, b = a[:n].copy(), b[:n].copy()
    prog = elementwise("max_edges", n, [d, d], [(d, lambda x, y: UOp(C.MAX, vec(d, width), (x, y)))], width)
    got = np.zeros(n, a.dtype)
    run(backend, prog, [got, a, b])
    assert values_equal(got, alu("core.max", d, [a, b]))
