"""Reading MLIR back (uopir.backends.mlir.importer): export -> import -> export is stable on the differential suite's
device programs, the imported programs compute what the originals do on the reference interpreter, and bad MLIR is a
located error from uop-opt, never a traceback.

The round trip runs on a subset of the suite's cases that covers every idiom the exporter writes (guarded integer
division, saturating casts, masked shifts, bool / bf16 memory, gated loads and stores, vectors, accumulators, the
parallel global id): lowering and exporting all 144 programs takes minutes on a loaded machine. Set
UOPIR_MLIR_IMPORT_ALL=1 to run every case.
"""
from __future__ import annotations

import io
import math
import os

import numpy as np
import pytest

pytest.importorskip("xdsl")

import differential_cases as dc  # noqa: E402

from uopir.backends.mlir.export import export_text  # noqa: E402
from uopir.backends.mlir.importer import import_module  # noqa: E402
from uopir.backends.python.device import run_program  # noqa: E402
from uopir.dialects import device as D  # noqa: E402
from uopir.dialects import kernel as K  # noqa: E402
from uopir.dialects import tensor as T  # noqa: E402
from uopir.dialects.semantics import np_dtype  # noqa: E402
from uopir.ir.diagnostics import IRError  # noqa: E402
from uopir.ir.dtype import DType, dtypes  # noqa: E402
from uopir.ir.regions import regions_of  # noqa: E402
from uopir.ir.uop import UOp  # noqa: E402
from uopir.ir.verify import verify  # noqa: E402
from uopir.passes.manager import PassManager  # noqa: E402
from uopir.tools.uop_opt import main as uop_opt  # noqa: E402

# the cases that, between them, show every form the exporter writes (~8 s of CPU): saturating casts to unsigned,
# round-to-odd f64 -> f16, the exact int64 -> bf16, bitcasts across lane counts, guarded divisions and masked shifts
# on unsigned index math, bool and bf16 memory, accumulators, a parallel global id (conv2d), gated loads and stores,
# masked vector loads, hex float constants and remf (math-ops), vector inserts and shuffles (attention)
SUBSET = ("cast-to-float16", "cast-to-bfloat16", "cast-to-uint8", "bitcast", "movement-uint64", "reduce-uint8",
          "reduce-bfloat16", "elementwise-bool", "conv2d-float32", "pool-int32", "int-bool-programs", "pad-value",
          "math-ops-float16", "attention-float32")
CASES = dc.CASE_NAMES if os.environ.get("UOPIR_MLIR_IMPORT_ALL") else SUBSET


def _programs(case: dc.Case) -> list[tuple[UOp, list[tuple[DType, int]]]]:
    """The distinct device.programs the case lowers to with default{target=c}, each with its buffers' dtype and
    element count (read off the tensor.call that runs it)."""
    pm = PassManager.parse("default{target=c}")
    outputs = case.build(dc.Inputs(case.name, "python"))
    lowered = pm.run(UOp.sink(*(t.uop for _, t in dc.grouped(outputs))))
    out, seen = [], set()
    for u in lowered.toposort():
        if u.op is not T.CALL:
            continue
        prog = next(r for r in regions_of(u) if r.op is D.PROGRAM)
        if prog in seen:
            continue
        seen.add(prog)
        bufs = []
        for s in u.src:
            while s.op is T.AFTER:
                s = s.src[0]
            if s.op is T.BUFFER:
                bufs.append((s.dtype, math.prod(s.shape)))
        out.append((prog, bufs))
    return out


def _inputs(bufs: list[tuple[DType, int]], rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for d, n in bufs:
        if d is dtypes.bool:
            out.append(rng.random(n) < 0.5)
        elif d.is_float:
            x = rng.standard_normal(n) * 4
            x[::7] = np.nan
            out.append(x.astype(np_dtype(d)))
        else:
            info = np.iinfo(np_dtype(d))
            out.append(rng.integers(max(info.min, -300), min(info.max, 300), size=n, endpoint=True,
                                    dtype=np_dtype(d)))
    return out


def _params(prog: UOp) -> dict[int, DType]:
    return {u.arg: u.dtype.base for u in prog.src if u.op is K.PARAM}


@pytest.mark.parametrize("name", CASES)
def test_export_import_export_is_stable_and_computes_the_same(name: str) -> None:
    case = next(c for c in dc.CASES if c.name == name)
    for prog, bufs in _programs(case):
        text = export_text(prog)
        root = import_module(text, f"{name}.mlir")
        verify(root)
        (imported,) = root.src
        assert imported.op is D.PROGRAM and imported.arg == prog.arg
        assert export_text(root) == text, f"{name}/{prog.arg}: the re-export differs"
        # the imported program on the reference interpreter: the same results, bit for bit (NaN for NaN)
        want = _inputs(bufs, np.random.default_rng(len(text)))
        got = [a.copy() for a in want]
        types = _params(imported)
        for i, d in types.items():  # MLIR integers are signless: a buffer may come back with the other signedness
            assert d.itemsize == bufs[i][0].itemsize, (name, i, d, bufs[i][0])
            if d is not bufs[i][0]:
                got[i] = got[i].view(np_dtype(d))
        run_program(prog, want)
        run_program(imported, got)
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            np.testing.assert_array_equal(g.view(w.dtype), w, err_msg=f"{name}/{prog.arg}: buffer {i}")


# ---- small programs written by hand ---------------------------------------------------------------------------------
SUM = """\
// a sum of 8 floats, the form emit-mlir writes
func.func @sum(%arg0: memref<?xf32> {uop.param = 0 : i64}, %arg1: memref<?xf32> {uop.param = 1 : i64}) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.000000e+00 : f32
  %acc = memref.alloca() {uop.acc = 0 : i64} : memref<f32>
  memref.store %zero, %acc[] : memref<f32>
  scf.for %i = %c0 to %c8 step %c1 {
    %a = memref.load %acc[] : memref<f32>
    %x = memref.load %arg1[%i] : memref<?xf32>
    %s = arith.addf %a, %x : f32
    memref.store %s, %acc[] : memref<f32>
  } {uop.loop = 0 : i64}
  %r = memref.load %acc[] : memref<f32>
  memref.store %r, %arg0[%c0] : memref<?xf32>
  func.return
}
"""


def test_a_hand_written_reduction_imports_to_the_linearized_form() -> None:
    root = import_module(SUM, "sum.mlir")
    verify(root)
    (prog,) = root.src
    names = [u.op.name for u in prog.src]
    assert names == ["kernel.param", "kernel.param", "core.const", "core.const", "core.const", "core.const",
                     "device.acc", "device.loop", "kernel.index", "kernel.load", "core.add", "device.accstore",
                     "device.endloop", "kernel.index", "kernel.store"]
    out, x = np.zeros(1, np.float32), np.arange(8, dtype=np.float32)
    run_program(prog, [out, x])
    assert out[0] == 28.0


def _run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = uop_opt(args, out, err)
    return rc, out.getvalue(), err.getvalue()


def test_uop_opt_reads_mlir_by_extension_or_flag(tmp_path) -> None:
    p = tmp_path / "sum.mlir"
    p.write_text(SUM)
    rc, out, err = _run([str(p)])
    assert rc == 0, err
    assert "device.program" in out and 'name = "sum"' in out and "device.accstore" in out
    rc, mlir, err = _run([str(p), "--emit=mlir"])
    assert rc == 0, err
    q = tmp_path / "sum.txt"  # not .mlir: the flag says what it is
    q.write_text(mlir)
    rc, again, err = _run([str(q), "--input-format=mlir", "--emit=mlir"])
    assert rc == 0, err
    assert again == mlir
    rc, c, err = _run([str(p), "--emit=c"])
    assert rc == 0 and "void sum(float* restrict data0, float* restrict data1)" in c, err


BAD = [
    ("unknown-op", "  %w = arith.ceildivsi %v, %v : i32\n", 5, 3, "'arith.ceildivsi' is outside the MLIR subset"),
    ("unregistered", "  %w = foo.bar %v : i32\n", 5, 8, "unknown MLIR op 'foo.bar'"),
    ("wrong-type", "  %w = arith.addf %v, %v : i32\n", 5, 3, "'arith.addf' op"),
    ("syntax", "  %w = arith.addi %v, : i32\n", 5, 23, "MLIR syntax: operand expected"),
    ("undefined", "  %w = arith.addi %v, %u : i32\n", 5, 24, "value %u is used but never defined"),
]


@pytest.mark.parametrize("what,line,lineno,col,message", BAD, ids=[b[0] for b in BAD])
def test_bad_mlir_is_a_located_error(tmp_path, what: str, line: str, lineno: int, col: int, message: str) -> None:
    text = ("func.func @k(%arg0: memref<?xi32>) {\n  %c0 = arith.constant 0 : index\n"
            "  // the op under test is on line 5\n  %v = memref.load %arg0[%c0] : memref<?xi32>\n" + line +
            "  func.return\n}\n")
    p = tmp_path / f"{what}.mlir"
    p.write_text(text)
    rc, out, err = _run([str(p)])
    assert rc == 1 and out == ""
    assert "Traceback" not in err and "internal error" not in err
    first = err.splitlines()[0]
    assert first.startswith(f"{p}:{lineno}:"), err
    if what != "undefined":
        assert first.startswith(f"{p}:{lineno}:{col}: error: "), err
    assert message in first, err
    with pytest.raises(IRError):
        import_module(text, "x.mlir")


def test_structures_outside_the_subset_are_named(tmp_path) -> None:
    lb1 = SUM.replace("scf.for %i = %c0 to", "scf.for %i = %c1 to")
    with pytest.raises(IRError, match=r"sum\.mlir:9:3: error: 'scf.for' outside the subset: from the constant 0"):
        import_module(lb1, "sum.mlir")
    alloc = SUM.replace("memref.alloca() {uop.acc = 0 : i64} : memref<f32>", "memref.alloc() : memref<f32>")
    with pytest.raises(IRError, match=r"sum\.mlir:7:3: error: 'memref.alloc' is outside the MLIR subset"):
        import_module(alloc, "sum.mlir")
    with pytest.raises(IRError, match="no MLIR"):
        import_module("// nothing\n", "e.mlir")


def test_a_program_with_a_variable_and_every_c_semantics_case_round_trips() -> None:
    """The C backend's semantics program (a kernel.var bound, f16 and bf16 buffers, gated loads and stores, division
    by a value that may be 0, shifts by a variable amount): the variable comes back with its name and range."""
    from uopir.ir.parser import parse_ir

    path = os.path.join(os.path.dirname(__file__), "..", "lit_tests", "backends", "c", "emit-semantics.uop")
    with open(path, encoding="utf-8") as f:
        (prog,) = parse_ir(f.read(), path).src
    text = export_text(prog)
    (imported,) = import_module(text, "semantics.mlir").src
    assert export_text(imported) == text
    (var,) = [u for u in imported.src if u.op is K.VAR]
    assert var.arg == ("n", 0, 16)
    rng = np.random.default_rng(7)
    types = _params(prog)
    want = _inputs([(types[i], 16) for i in range(len(types))], rng)
    got = [a.copy() for a in want]
    run_program(prog, want, {"n": 11})
    run_program(imported, got, {"n": 11})
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(g, w)
