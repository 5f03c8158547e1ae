"""The MLIR export (uopir.backends.mlir.export, `emit-mlir`): every program of the differential suite exports to a
module that xDSL's verifier accepts and, where LLVM's mlir-opt is installed, that mlir-opt parses and verifies (one
mlir-opt process for all of them); the choices that keep uopir's semantics where MLIR's defaults differ are there;
bad input is a located error."""
from __future__ import annotations

import io
import subprocess

import differential_cases as dc
import pytest

pytest.importorskip("xdsl", reason="the MLIR export needs xDSL (pip install -e '.[mlir]')")

from xdsl.dialects import arith, memref, scf, vector  # noqa: E402
from xdsl.dialects.builtin import MemRefType, ModuleOp  # noqa: E402

from uopir import Tensor  # noqa: E402
from uopir.backends.mlir import ops as X  # noqa: E402
from uopir.backends.mlir.export import export_module, export_text, print_module  # noqa: E402
from uopir.backends.mlir.tools import find_mlir_tool  # noqa: E402
from uopir.backends.realize import cache_key  # noqa: E402
from uopir.backends.registry import get_backend  # noqa: E402
from uopir.ir.diagnostics import IRError  # noqa: E402
from uopir.ir.parser import parse_ir  # noqa: E402
from uopir.tools.uop_opt import main as uop_opt_main  # noqa: E402

MLIR_OPT = find_mlir_tool("mlir-opt")


# ---- the differential suite ----------------------------------------------------------------------------------------
_GENERIC: list[str] = []  # the generic form of every 4th module the fixture exports (mlir-opt reads both forms)


@pytest.fixture(scope="module")
def exported() -> dict[str, list[str] | Exception]:
    """case name -> the MLIR text of each of its realized tensors (lowered for target c), or the error it raised."""
    backend = get_backend("c")
    out: dict[str, list[str] | Exception] = {}
    n = 0
    for case in dc.CASES:
        try:
            outputs = case.build(dc.Inputs(case.name, "c"))
            if isinstance(outputs, Tensor):
                outputs = {"out": outputs}
            texts = []
            for _, t in dc.grouped(outputs):
                lowered = backend.lower(cache_key(t.uop)[0])
                module = export_module(lowered)  # runs xDSL's verifier
                texts.append(print_module(module))
                if n % 4 == 0:
                    _GENERIC.append(print_module(module, generic=True))
                n += 1
            out[case.name] = texts
        except Exception as e:  # noqa: BLE001 - reported by the case's own test
            out[case.name] = e
    return out


@pytest.mark.parametrize("case", dc.CASES, ids=lambda c: c.name)
def test_differential_program_exports_and_verifies(exported, case: dc.Case):
    got = exported[case.name]
    if isinstance(got, Exception):
        raise got
    assert got and all("func.func @" in t for t in got)


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt is not installed (Debian: apt-get install mlir-19-tools)")
def test_mlir_opt_parses_and_verifies_every_export(exported):
    texts = [(name, t) for name, ts in exported.items() if not isinstance(ts, Exception) for t in ts]
    assert len(texts) >= len(dc.CASES)
    # one process for all of them: --split-input-file checks each module on its own and names the failing chunk
    joined = "\n// -----\n".join(t for _, t in texts)
    res = subprocess.run([MLIR_OPT, "--split-input-file", "-"], input=joined, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[:4000]
    assert res.stdout.count("func.func @") == sum(t.count("func.func @") for _, t in texts)
    # and the generic form (a sample: printing costs as much as exporting)
    assert len(_GENERIC) >= len(texts) // 4
    res = subprocess.run([MLIR_OPT, "--split-input-file", "-"], input="\n// -----\n".join(_GENERIC),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[:4000]


# ---- semantics: small programs ---------------------------------------------------------------------------------------
_HEAD = """
%out = kernel.param {idx = 0} : ptr<T, global>
%x = kernel.param {idx = 1} : ptr<T, global>
%c16 = core.const 16 : index
%i = device.loop %c16 {id = 0} : index
%px = kernel.index %x, %i : ptr<T, global>
%v = kernel.load %px : T
"""


def _binary_program(op: str, dtype: str, result: str | None = None) -> str:
    """out[i] = x[i] OP x[i] over 16 elements of dtype (the result of dtype `result`, default dtype)."""
    res = result or dtype
    body = f"""%r = {op} %v, %v : {res}
%po = kernel.index %out, %i : ptr<{res}, global>
%st = kernel.store %po, %r
%e = device.endloop %i, %st
%p = device.program %out, %x, %c16, %i, %px, %v, %r, %po, %st, %e {{name = "k"}}
core.sink %p
"""
    return _HEAD.replace("ptr<T", f"ptr<{dtype}").replace(": T", f": {dtype}").replace(
        "idx = 0} : ptr<" + dtype, "idx = 0} : ptr<" + res) + body


def _cast_program(src: str, dst: str) -> str:
    return f"""
%out = kernel.param {{idx = 0}} : ptr<{dst}, global>
%x = kernel.param {{idx = 1}} : ptr<{src}, global>
%c16 = core.const 16 : index
%i = device.loop %c16 {{id = 0}} : index
%px = kernel.index %x, %i : ptr<{src}, global>
%v = kernel.load %px : {src}
%r = core.cast %v : {dst}
%po = kernel.index %out, %i : ptr<{dst}, global>
%st = kernel.store %po, %r
%e = device.endloop %i, %st
%p = device.program %out, %x, %c16, %i, %px, %v, %r, %po, %st, %e {{name = "k"}}
core.sink %p
"""


def _module(text: str) -> ModuleOp:
    return export_module(parse_ir(text))


def _ops(module: ModuleOp, cls) -> list:
    return [o for o in module.walk() if isinstance(o, cls)]


def _names(module: ModuleOp) -> list[str]:
    return [o.name for o in module.walk()]


@pytest.mark.parametrize("dtype", ["i32", "i8", "i64", "index"])
def test_signed_division_guards_zero_and_min_by_minus_one(dtype: str):
    m = _module(_binary_program("core.idiv", dtype))
    (div,) = _ops(m, arith.DivSIOp)
    safe = div.rhs.owner
    assert isinstance(safe, X.SelectOp)  # the divisor is 1 where it is 0 or -1
    special = safe.cond.owner
    assert isinstance(special, arith.OrIOp)
    preds = sorted(X.CMPI_PREDICATES[c.predicate.value.data] for c in (special.lhs.owner, special.rhs.owner))
    assert preds == ["eq", "eq"]
    consts = sorted(o.value.value.data for o in (special.lhs.owner.rhs.owner, special.rhs.owner.rhs.owner))
    assert consts == [-1, 0]
    # then the result is selected: 0 where the divisor is 0, -x where it is -1
    users = [u.operation for u in div.result.uses]
    assert len(users) == 1 and isinstance(users[0], X.SelectOp)


def test_unsigned_integers_use_the_unsigned_ops():
    names = []
    for op in ("core.idiv", "core.mod", "core.shr", "core.max"):
        names += _names(_module(_binary_program(op, "u32")))
    for want in ("arith.divui", "arith.remui", "arith.shrui", "arith.maxui"):
        assert want in names
    for unwanted in ("arith.divsi", "arith.remsi", "arith.shrsi", "arith.maxsi"):
        assert unwanted not in names
    m = _module(_cast_program("u32", "f32"))
    assert _ops(m, X.UIToFPOp) and not _ops(m, X.SIToFPOp)
    m = _module(_cast_program("f32", "u16"))
    assert _ops(m, X.FPToUIOp) and not _ops(m, X.FPToSIOp)
    m = _module(_cast_program("u8", "i64"))
    assert _ops(m, X.ExtUIOp) and not _ops(m, X.ExtSIOp)


def test_unsigned_compare_is_ult():
    m = _module(_binary_program("core.cmplt", "u32", "bool"))
    (cmp,) = _ops(m, X.CmpiOp)
    assert X.CMPI_PREDICATES[cmp.predicate.value.data] == "ult"
    # a bool buffer is bytes: the i1 is widened to i8 before the store
    assert isinstance(m.body.block.first_op.args[0].type, MemRefType)
    assert str(m.body.block.first_op.args[0].type) == "memref<?xi8>"
    assert _ops(m, X.ExtUIOp)


@pytest.mark.parametrize("dtype,bits", [("i32", 32), ("i8", 8), ("u16", 16), ("i64", 64)])
def test_shift_amounts_are_masked_to_the_width(dtype: str, bits: int):
    m = _module(_binary_program("core.shl", dtype))
    (shl,) = _ops(m, arith.ShLIOp)
    mask = shl.rhs.owner
    assert isinstance(mask, arith.AndIOp)
    assert mask.rhs.owner.value.value.data == bits - 1


@pytest.mark.parametrize("src,dst,lo,hi", [("f32", "i32", -2**31, 2**31 - 1), ("f64", "u8", 0, 255),
                                           ("f16", "i16", -2**15, 2**15 - 1)])
def test_float_to_int_casts_saturate_and_send_nan_to_zero(src: str, dst: str, lo: int, hi: int):
    m = _module(_cast_program(src, dst))
    text = print_module(m)
    assert "math.trunc" in text
    preds = sorted(X.CMPF_PREDICATES[c.predicate.value.data] for c in _ops(m, X.CmpfOp))
    assert preds == ["oge", "olt", "uno"]
    selects = _ops(m, X.SelectOp)
    picked = {s.lhs.owner.value.value.data for s in selects if isinstance(s.lhs.owner, arith.ConstantOp)}
    width = int(dst.lstrip("iu"))
    wrap = (lambda v: v - (1 << width) if v >= 1 << (width - 1) else v)
    assert {wrap(hi), wrap(lo)} <= picked | {0.0}
    assert text.index("math.trunc") < text.index("arith.fpto")


def test_float_max_is_maximumf_and_nothing_is_fast():
    m = _module(_binary_program("core.max", "f32"))
    assert _ops(m, arith.MaximumfOp)
    assert "fastmath" not in print_module(m)
    m = _module(_binary_program("core.mod", "f64"))
    assert _ops(m, X.RemFOp)


def test_bf16_buffers_hold_the_f32_carrier_rounded_when_read():
    m = _module(_binary_program("core.mul", "bf16"))
    f = m.body.block.first_op
    assert str(f.args[1].type) == "memref<?xf32>"
    (trunc,) = _ops(m, arith.TruncFOp)
    assert str(trunc.result.type) == "bf16" and isinstance(trunc.input.owner, memref.LoadOp)
    (mul,) = _ops(m, arith.MulfOp)
    assert str(mul.result.type) == "bf16"
    (ext,) = _ops(m, arith.ExtFOp)
    assert ext.input is mul.result and str(ext.result.type) == "f32"


def test_f64_to_bf16_rounds_once_through_round_to_odd():
    m = _module(_cast_program("f64", "bf16"))
    truncs = [str(t.result.type) for t in _ops(m, arith.TruncFOp)]
    assert truncs == ["f32", "bf16"]
    assert _ops(m, arith.BitcastOp)  # the sticky bit of round-to-odd is set on the f32's bits


def test_gated_loads_and_stores_run_only_where_the_gate_holds():
    text = """
%out = kernel.param {idx = 0} : ptr<i32, global>
%f = kernel.param {idx = 1} : ptr<f32, global>
%n = kernel.var {name = "n", min = 0, max = 16} : index
%c16 = core.const 16 : index
%nan = core.const nan : f32
%i = device.loop %c16 {id = 0} : index
%g = core.cmplt %i, %n : bool
%pf = kernel.index %f, %i : ptr<f32, global>
%vf = kernel.load %pf, %nan, %g : f32
%cvt = core.cast %vf : i32
%po = kernel.index %out, %i : ptr<i32, global>
%st = kernel.store %po, %cvt, %g
%e = device.endloop %i, %st
%p = device.program %out, %f, %n, %c16, %nan, %i, %g, %pf, %vf, %cvt, %po, %st, %e {name = "k"}
core.sink %p
"""
    m = _module(text)
    ifs = _ops(m, scf.IfOp)
    assert len(ifs) == 2
    load_if, store_if = ifs
    assert [o.name for o in load_if.true_region.block.ops] == ["memref.load", "scf.yield"]
    assert isinstance(load_if.false_region.block.first_op.operands[0].owner, arith.ConstantOp)  # the NaN alternative
    assert [o.name for o in store_if.true_region.block.ops] == ["memref.store", "scf.yield"]
    f = m.body.block.first_op
    assert str(f.args[2].type) == "index"
    assert f.arg_attrs.data[2].data["uop.var"].data == "n"


def test_accumulators_are_allocas_and_global_ids_are_parallel():
    # a sum over a loop, inside a global id: the accumulator belongs to each parallel iteration
    text = """
%out = kernel.param {idx = 0} : ptr<f32, global>
%x = kernel.param {idx = 1} : ptr<f32, global>
%c4 = core.const 4 : index
%c8 = core.const 8 : index
%z = core.const 0.0 : f32
%g = device.special %c4 {kind = global_id, dim = 0} : index
%acc = device.acc %z {id = 0} : f32
%j = device.loop %c8 {id = 0} : index
%row = core.mul %g, %c8 : index
%ix = core.add %row, %j : index
%px = kernel.index %x, %ix : ptr<f32, global>
%v = kernel.load %px : f32
%s = core.add %acc, %v : f32
%up = device.accstore %acc, %s : f32
%e = device.endloop %j, %up
%po = kernel.index %out, %g : ptr<f32, global>
%st = kernel.store %po, %up
%p = device.program %out, %x, %c4, %c8, %z, %g, %acc, %j, %row, %ix, %px, %v, %s, %up, %e, %po, %st {name = "k"}
core.sink %p
"""
    m = _module(text)
    (par,) = _ops(m, scf.ParallelOp)
    (scope,) = _ops(m, memref.AllocaScopeOp)
    # in an scf.execute_region (its region may hold the blocks that lowering the scope makes) in the parallel body
    assert isinstance(scope.parent_op(), scf.ExecuteRegionOp) and scope.parent_op().parent_op() is par
    (alloca,) = _ops(m, memref.AllocaOp)
    assert alloca.parent_op() is scope and alloca.attributes["uop.acc"].value.data == 0
    (loop,) = _ops(m, scf.ForOp)
    assert loop.parent_op() is scope
    stores = [s for s in _ops(m, memref.StoreOp) if s.memref is alloca.memref]
    assert len(stores) == 2  # the init, then the update inside the loop
    assert stores[1].parent_op() is loop


def test_a_parallel_body_without_allocas_holds_the_ops_directly():
    # regression: moving the ops out of the unneeded alloca_scope after erasing it crashed the export
    m = _module("""
%out = kernel.param {idx = 0} : ptr<f32, global>
%c4 = core.const 4 : index
%one = core.const 1.0 : f32
%g = device.special %c4 {kind = global_id, dim = 0} : index
%po = kernel.index %out, %g : ptr<f32, global>
%st = kernel.store %po, %one
%p = device.program %out, %c4, %one, %g, %po, %st {name = "k"}
core.sink %p
""")
    (par,) = _ops(m, scf.ParallelOp)
    assert [o.name for o in par.body.block.ops] == ["memref.store", "scf.reduce"]
    assert not _ops(m, memref.AllocaScopeOp) and not _ops(m, scf.ExecuteRegionOp)


def test_heap_scratch_of_a_parallel_body_is_freed_in_that_body():
    # regression (found by the mlir backend): the dealloc of a large kernel.local allocated in a parallel body was
    # written at the function's end, where its value is out of scope
    m = _module("""
%out = kernel.param {idx = 0} : ptr<f32, global>
%c4 = core.const 4 : index
%one = core.const 1.0 : f32
%g = device.special %c4 {kind = global_id, dim = 0} : index
%buf = kernel.local {id = 0} : ptr<f32, local, 20000>
%pl = kernel.index %buf, %g : ptr<f32, local, 20000>
%s1 = kernel.store %pl, %one
%v = kernel.load %pl : f32
%po = kernel.index %out, %g : ptr<f32, global>
%st = kernel.store %po, %v
%p = device.program %out, %c4, %one, %g, %buf, %pl, %s1, %v, %po, %st {name = "k"}
core.sink %p
""")
    (alloc,) = _ops(m, memref.AllocOp)
    (free,) = _ops(m, memref.DeallocOp)
    (scope,) = _ops(m, memref.AllocaScopeOp)
    assert free.memref is alloc.memref and alloc.parent_op() is scope and free.parent_op() is scope
    assert str(alloc.memref.type) == "memref<20000xf32>"
    if MLIR_OPT is not None:
        res = subprocess.run([MLIR_OPT, "-"], input=print_module(m), capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr


def test_vectors_load_compute_and_store_as_vectors():
    m = export_module(parse_ir("""
%out = kernel.param {idx = 0} : ptr<f32, global>
%x = kernel.param {idx = 1} : ptr<f32, global>
%c0 = core.const 0 : index
%c4 = core.const 4 : index
%c2 = core.const 2.0 : f32
%px = kernel.index %x, %c0 : ptr<f32, global>
%v = kernel.load %px : vector<4xf32>
%r = core.mul %v, %c2 : vector<4xf32>
%a = core.gep %r {idx = [3]} : f32
%b = core.gep %r {idx = [1]} : f32
%w = core.vectorize %a, %b, %a, %b : vector<4xf32>
%po = kernel.index %out, %c0 : ptr<f32, global>
%st = kernel.store %po, %r
%po4 = kernel.index %out, %c4 : ptr<f32, global>
%st4 = kernel.store %po4, %w
%p = device.program %out, %x, %c0, %c4, %c2, %px, %v, %r, %a, %b, %w, %po, %st, %po4, %st4 {name = "k"}
core.sink %p
"""))
    assert len(_ops(m, vector.LoadOp)) == 1 and len(_ops(m, vector.StoreOp)) == 2
    (mul,) = _ops(m, arith.MulfOp)
    assert str(mul.result.type) == "vector<4xf32>"
    assert isinstance(mul.rhs.owner, arith.ConstantOp)  # the scalar 2.0 as a splat vector constant
    lanes = sorted(e.static_position.get_values()[0] for e in _ops(m, vector.ExtractOp))
    assert lanes == [1, 3]
    inserts = _ops(m, vector.InsertOp)  # a broadcast of lane 0's value, then the lanes that differ from it
    assert [i.static_position.get_values()[0] for i in inserts] == [1, 3]


def test_export_text_is_plain_and_generic_forms():
    prog = _binary_program("core.add", "f32")
    pretty, generic = export_text(parse_ir(prog)), export_text(parse_ir(prog), generic=True)
    assert "arith.addf" in pretty and '"arith.addf"' in generic
    if MLIR_OPT is not None:
        for t in (pretty, generic):
            res = subprocess.run([MLIR_OPT, "-"], input=t, capture_output=True, text=True, timeout=60)
            assert res.returncode == 0, res.stderr


# ---- emit-mlir through uop-opt ---------------------------------------------------------------------------------------
def _opt(argv: list[str], text: str, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    out, err = io.StringIO(), io.StringIO()
    rc = uop_opt_main(["-", *argv], out, err)
    return rc, out.getvalue(), err.getvalue()


def test_emit_mlir_prints_the_module(monkeypatch):
    rc, out, err = _opt(["--emit=mlir"], _binary_program("core.add", "i32"), monkeypatch)
    assert rc == 0, err
    assert out.startswith("builtin.module {") and "arith.addi" in out and "scf.for" in out


def test_tensor_level_input_is_a_located_error(monkeypatch):
    text = """%a = tensor.buffer {id = 0, device = "c"} : tensor<4xf32>
%b = core.add %a, %a : tensor<4xf32>
core.sink %b
"""
    rc, out, err = _opt(["--emit=mlir"], text, monkeypatch)
    assert rc == 1 and out == ""
    assert "<stdin>:3:1: error: emit-mlir: the graph has no device.program" in err
    assert "Traceback" not in err


def test_unsupported_op_is_a_located_error():
    text = """%c = core.const 4 : index
%s = device.special %c {kind = local_id, dim = 0} : index
%p = device.program %c, %s {name = "k"}
core.sink %p
"""
    with pytest.raises(IRError) as e:
        export_module(parse_ir(text, "prog.uop"))
    d = e.value.diagnostics[0]
    assert "local_id" in d.message and d.loc is not None and (d.loc.file, d.loc.line) == ("prog.uop", 2)
