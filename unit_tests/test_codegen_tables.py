"""Every op a linearized device.program can hold has a row in every output language's table (C, OpenCL C and CUDA C,
LLVM IR, the MLIR export) and in the reference interpreter's, so adding an op is one row per language
(uopir.backends.codegen.walk)."""
from __future__ import annotations

import pytest

import uopir.backends  # noqa: F401  (registers every dialect)
from uopir.backends.c.renderer import C_ROWS, CRenderer
from uopir.backends.codegen.walk import PROGRAM_OPS
from uopir.backends.gpu.renderer import GPU_ROWS, GpuRenderer
from uopir.backends.llvm.renderer import LLVM_ROWS
from uopir.backends.opencl.language import OPENCL
from uopir.backends.python.device import CONTROL, HANDLERS, REFUSED
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import dtypes
from uopir.ir.ops import DIALECTS
from uopir.ir.uop import UOp


def _tables() -> dict[str, set]:
    out = {"c": set(C_ROWS), "opencl/cuda": set(GpuRenderer.rows), "llvm": set(LLVM_ROWS),
           "python": set(HANDLERS) | CONTROL | REFUSED}
    try:
        from uopir.backends.mlir.export import MLIR_ROWS
    except ImportError:  # no xDSL: the MLIR export is not installed here
        pass
    else:
        out["mlir"] = set(MLIR_ROWS)
    return out


def test_program_ops_come_from_the_dialect_registry():
    # every core and device op but device.source, plus the kernel ops device-linearize keeps
    assert C.ADD in PROGRAM_OPS and D.WMMA in PROGRAM_OPS and K.LOAD in PROGRAM_OPS and K.LOCAL in PROGRAM_OPS
    assert D.SOURCE not in PROGRAM_OPS and K.RANGE not in PROGRAM_OPS and K.REDUCE not in PROGRAM_OPS
    assert set(DIALECTS["core"]) <= PROGRAM_OPS


@pytest.mark.parametrize("language", sorted(_tables()))
def test_every_program_op_has_a_row(language: str):
    missing = sorted(op.name for op in PROGRAM_OPS - _tables()[language])
    assert not missing, f"the {language} table has no row for {missing}"


def test_the_gpu_renderers_take_their_table_from_the_class():
    assert GpuRenderer(OPENCL).rows is GPU_ROWS and CRenderer().rows is C_ROWS


def test_a_removed_row_is_a_located_error_not_a_crash():
    """The walk refuses an op its table has no row for, naming the op (what a missing row does at run time)."""
    class NoStore(CRenderer):
        rows = {op: r for op, r in C_ROWS.items() if op is not K.STORE}

    buf = UOp(K.PARAM, dtypes.float32.ptr(), (), 0)
    store = UOp(K.STORE, dtypes.void, (UOp(K.INDEX, dtypes.float32.ptr(), (buf, UOp.const(dtypes.index, 0))),
                                       UOp.const(dtypes.float32, 1.0)))
    prog = UOp(D.PROGRAM, dtypes.void, (store,), "k")
    assert "data0[0ll] = 1.0f;" in CRenderer().render(prog)
    with pytest.raises(IRError, match="the C backend cannot render kernel.store"):
        NoStore().render(prog)
