"""The four dialects: every documented op is registered, valid graphs verify clean, each rule fails with its message."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import uopir  # noqa: F401 - registers the dialects
from uopir.dialects import core, device, kernel, tensor
from uopir.ir.diagnostics import ShapeError
from uopir.ir.dtype import dtypes
from uopir.ir.ops import DIALECTS, REGISTRY, AttrError, Trait
from uopir.ir.uop import UOp, normalize_const
from uopir.ir.verify import collect_diagnostics

f32, i32, idx, b1 = dtypes.float32, dtypes.int32, dtypes.index, dtypes.bool
DOCS = Path(__file__).resolve().parents[1] / "docs" / "dialects.md"


def msgs(root: UOp) -> list[str]:
    return [d.message for d in collect_diagnostics(root)]


def buf(shape: tuple[int, ...], dtype=f32, id_: int = 0) -> UOp:
    return UOp(tensor.BUFFER, dtype, (), (id_, "python", shape))


def mv(op, x: UOp, arg) -> UOp:
    return UOp(op, x.dtype, (x,), arg)


# ---- the registry matches the documentation --------------------------------------------------------------------------
def documented_ops() -> set[str]:
    names: set[str] = set()
    for line in DOCS.read_text().splitlines():
        m = re.match(r"\| `((core|tensor|kernel|device)\.[a-z0-9]+)((?: [a-z0-9]+)*)`", line)
        if m:
            dialect = m.group(2)
            names.add(m.group(1))
            names.update(f"{dialect}.{w}" for w in m.group(3).split())
        for extra in re.findall(r"\| `[a-z.]+`, `((?:core|tensor|kernel|device)\.[a-z0-9]+)`", line):
            names.add(extra)
    return names


def test_registry_matches_docs():
    registered = {n for n in REGISTRY if n.split(".")[0] in ("core", "tensor", "kernel", "device")}
    assert documented_ops() == registered


def test_every_op_is_a_module_constant_with_summary():
    mods = {"core": core, "tensor": tensor, "kernel": kernel, "device": device}
    for dialect, mod in mods.items():
        for op in DIALECTS[dialect]:
            assert getattr(mod, op.mnemonic.upper()) is op
            assert op.summary, op.name


def test_traits():
    assert core.ADD.has(Trait.COMMUTATIVE | Trait.PURE) and core.ADD.has(Trait.ELEMENTWISE)
    assert not core.SUB.has(Trait.COMMUTATIVE) and core.SUB.has(Trait.ELEMENTWISE)
    assert core.CMPEQ.has(Trait.COMMUTATIVE) and not core.CMPLT.has(Trait.COMMUTATIVE)
    for op in (kernel.STORE, tensor.ASSIGN, device.BARRIER, tensor.CALL, device.ACCSTORE):
        assert op.has(Trait.SIDE_EFFECT), op
        assert not op.has(Trait.PURE), op
    for op in (core.SINK, kernel.DEF, device.PROGRAM):
        assert op.has(Trait.TERMINATOR), op
    assert not kernel.LOAD.has(Trait.PURE)
    assert core.CONST.positional == 1 and core.CONST.normalize_arg is not None


# ---- const -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,value,expect", [
    (dtypes.int8, 200, -56), (dtypes.int8, -129, 127), (dtypes.uint8, -1, 255), (dtypes.uint16, 65536, 0),
    (dtypes.int32, 2**31, -(2**31)), (dtypes.int64, 2**63, -(2**63)), (f32, 1, 1.0), (b1, 2, True), (b1, 0, False),
    (i32, 3.9, 3), (i32, -3.9, -3), (idx, 2**64 + 5, 5),
])
def test_const_normalization(dtype, value, expect):
    v = normalize_const(dtype, value)
    assert v == expect and type(v) is type(expect)
    assert msgs(UOp.const(dtype, value)) == []
    fits = type(value) is type(expect) and value == expect or (dtype is f32 and type(value) is int)
    if fits:
        assert core.CONST.normalize_arg(dtype, value) == expect
    else:  # text input is exact: the parser's hook rejects what UOp.const would wrap or truncate
        with pytest.raises(AttrError, match="attribute 'value'"):
            core.CONST.normalize_arg(dtype, value)


def test_const_negative_zero_and_nan_stay_distinct():
    z, nz = UOp.const(f32, 0.0), UOp.const(f32, -0.0)
    assert z is not nz and math.copysign(1.0, nz.arg) == -1.0
    n1, n2 = UOp.const(f32, float("nan")), UOp.const(f32, float("nan"))
    assert n1 is n2 and math.isnan(n1.arg)
    assert msgs(nz) == [] and msgs(n1) == [] and msgs(UOp.const(f32, float("-inf"))) == []


def test_const_vectors():
    v4 = f32.vec(4)
    assert normalize_const(v4, 2) == (2.0, 2.0, 2.0, 2.0)
    assert normalize_const(dtypes.uint8.vec(2), (256, -1)) == (0, 255)
    assert msgs(UOp.const(v4, (1, 2, 3, 4))) == []
    assert UOp.const(v4, (1, 2, 3, 4)).arg == (1.0, 2.0, 3.0, 4.0)
    bad = UOp(core.CONST, v4, (), (1.0, 2.0))
    assert msgs(bad) == ["'core.const' op invalid value for vector<4xf32>: a const of vector<4xf32> needs 4 values, "
                         "got 2"]


def test_const_not_normalized_and_bad_dtype():
    assert msgs(UOp(core.CONST, f32, (), 1)) == ["'core.const' op value 1 is not normalized for f32 (expected 1.0)"]
    assert msgs(UOp(core.CONST, dtypes.int8, (), 300)) == [
        "'core.const' op invalid value for i8: attribute 'value': integer 300 does not fit i8 (range [-128, 127])"]
    assert msgs(UOp(core.CONST, i32, (), float("nan"))) == [
        "'core.const' op invalid value for i32: attribute 'value': expected an integer for i32, got nan"]
    assert msgs(UOp(core.CONST, dtypes.void, (), 0)) == [
        "'core.const' op const must have a number, bool or vector dtype, got void"]
    assert msgs(UOp(core.CONST, f32, (), "x")) == [
        "'core.const' op attribute 'value': expected a number or a bool, got \"x\""]


def test_shaped_const():
    c = core.const(f32, 0, (3, 4))
    assert c.arg == (0.0, (3, 4)) and c.shape == (3, 4) and core.const_value(c) == 0.0
    assert core.const(f32, 2).arg == 2.0 and core.const(f32, 2).shape is None
    assert core.const(f32, 2) is UOp.const(f32, 2)
    assert core.CONST.attr_values(c.arg) == {"value": 0.0, "shape": (3, 4)}
    assert core.CONST.attr_values(1.5) == {"value": 1.5, "shape": None}
    assert core.CONST.make_arg({"value": 1.5}) == 1.5
    assert core.CONST.make_arg({"value": 0.0, "shape": [3, 4]}) == (0.0, (3, 4))
    assert msgs(c) == [] and msgs(core.const(f32, 1, ())) == []
    assert core.const(f32, 1, ()).shape == ()
    # a shaped const of a vector dtype is meaningless
    assert msgs(UOp(core.CONST, f32.vec(2), (), (1.0, (2,)))) == [
        "'core.const' op invalid value for vector<2xf32>: a tensor-shaped const needs a scalar dtype, "
        "got vector<2xf32>"]
    assert msgs(UOp(core.CONST, f32, (), (1.0, (-1,)))) == [
        "'core.const' op attribute 'shape': expected an integer >= 0, got -1"]


# ---- core dtype rules ------------------------------------------------------------------------------------------------
def test_core_valid_scalar_and_vector_alu():
    a, b = UOp.const(f32, 1.0), UOp.const(f32, 2.0)
    i, j = UOp.const(i32, 3), UOp.const(i32, 4)
    v = UOp(core.VECTORIZE, f32.vec(2), (a, b))
    nodes = [a + b, a - b, a * b, a.maximum(b), a / b, i // j, i % j, -a, i & j, i | j, i ^ j, i << j, i >> j,
             a.lt(b), a.ne(b), a.eq(b), a.lt(b).where(a, b), UOp(core.MULACC, f32, (a, b, a)),
             UOp(core.RECIP, f32, (a,)), UOp(core.SQRT, f32, (a,)), a.cast(i32), UOp(core.BITCAST, i32, (a,)),
             v, v + v, UOp(core.GEP, f32, (v,), (1,)), UOp(core.GEP, f32.vec(2), (v,), (1, 0)),
             UOp(core.CMPLT, b1.vec(2), (v, v)), UOp(core.WHERE, f32.vec(2), (UOp.const(b1.vec(2), True), v, v)),
             UOp.const(b1, True) & UOp.const(b1, False), UOp(core.GROUP, dtypes.void, (a,))]
    assert msgs(UOp.sink(*nodes)) == []


@pytest.mark.parametrize("build,msg", [
    (lambda a, i: UOp(core.ADD, f32, (a, i)), "'core.add' op operand dtypes differ: f32 vs i32"),
    (lambda a, i: UOp(core.ADD, i32, (a, a)), "'core.add' op result dtype i32 differs from operand dtype f32"),
    (lambda a, i: UOp(core.SUB, b1, (UOp.const(b1, 1), UOp.const(b1, 0))), "'core.sub' op sub is not defined on bool"),
    (lambda a, i: UOp(core.FDIV, i32, (i, i)), "'core.fdiv' op result dtype must be a float, got i32"),
    (lambda a, i: UOp(core.IDIV, f32, (a, a)), "'core.idiv' op result dtype must be an integer, got f32"),
    (lambda a, i: UOp(core.MOD, dtypes.bool, (UOp.const(dtypes.bool, True),) * 2),
     "'core.mod' op result dtype must be an integer or a float, got bool"),
    (lambda a, i: UOp(core.SQRT, i32, (i,)), "'core.sqrt' op result dtype must be a float, got i32"),
    (lambda a, i: UOp(core.AND, f32, (a, a)), "'core.and' op result dtype must be an integer or bool, got f32"),
    (lambda a, i: UOp(core.SHL, f32, (a, a)), "'core.shl' op result dtype must be an integer, got f32"),
    (lambda a, i: UOp(core.CMPLT, f32, (a, a)), "'core.cmplt' op result dtype must be bool, got f32"),
    (lambda a, i: UOp(core.CMPEQ, b1, (a, i)), "'core.cmpeq' op operand dtypes differ: f32 vs i32"),
    (lambda a, i: UOp(core.WHERE, f32, (a, a, a)), "'core.where' op condition must be bool, got f32"),
    (lambda a, i: UOp(core.WHERE, f32, (UOp.const(b1, 1), a, i)), "'core.where' op operand dtypes differ: f32 vs i32"),
    (lambda a, i: UOp(core.CAST, f32.vec(2), (a,)), "'core.cast' op cast changes the lane count: f32 to vector<2xf32>"),
    (lambda a, i: UOp(core.BITCAST, dtypes.int64, (a,)),
     "'core.bitcast' op bitcast changes the bit width: f32 (32 bits) to i64 (64 bits)"),
    (lambda a, i: UOp(core.VECTORIZE, f32.vec(2), (a, i)), "'core.vectorize' op operand dtypes differ: f32 vs i32"),
    (lambda a, i: UOp(core.VECTORIZE, f32.vec(3), (a, a)),
     "'core.vectorize' op result dtype must be vector<2xf32>, got vector<3xf32>"),
    (lambda a, i: UOp(core.GEP, f32, (UOp.const(f32.vec(2), 0),), (2,)),
     "'core.gep' op gep index 2 out of range for vector<2xf32> (2 lanes)"),
    (lambda a, i: UOp(core.GEP, i32, (UOp.const(f32.vec(2), 0),), (0,)),
     "'core.gep' op result dtype must be f32, got i32"),
    (lambda a, i: UOp(core.SINK, f32, (a,)), "'core.sink' op result must be void, got f32"),
    (lambda a, i: UOp(core.ADD, f32.ptr(), (UOp(kernel.PARAM, f32.ptr(), (), 0),) * 2),
     "'core.add' op operand dtype must be a number, bool or vector, got ptr<f32, global>"),
])
def test_core_rule_failures(build, msg):
    assert msgs(build(UOp.const(f32, 1.0), UOp.const(i32, 1))) == [msg]


# ---- shape rules -----------------------------------------------------------------------------------------------------
def test_movement_shapes():
    b = buf((2, 3, 4))
    assert mv(tensor.RESHAPE, b, (6, 4)).shape == (6, 4)
    assert mv(tensor.RESHAPE, b, (24,)).shape == (24,)
    assert mv(tensor.PERMUTE, b, (2, 0, 1)).shape == (4, 2, 3)
    r = mv(tensor.RESHAPE, b, (2, 1, 12))
    assert mv(tensor.EXPAND, r, (2, 5, 12)).shape == (2, 5, 12)
    assert mv(tensor.PAD, b, ((1, 0), (0, 2), (3, 3))).shape == (3, 5, 10)
    assert mv(tensor.SHRINK, b, ((0, 1), (1, 3), (2, 2))).shape == (1, 2, 0)
    assert mv(tensor.FLIP, b, (0, 2)).shape == (2, 3, 4)
    assert UOp(tensor.REDUCE, f32, (b,), ("add", (1, 2))).shape == (2, 1, 1)
    assert UOp(tensor.REDUCE, f32, (b,), ("max", ())).shape == (2, 3, 4)
    assert UOp(tensor.COPY, f32, (b,), "GPU").shape == (2, 3, 4)
    assert UOp(tensor.CONTIGUOUS, f32, (b,)).shape == UOp(tensor.DETACH, f32, (b,)).shape == (2, 3, 4)
    zero_d = mv(tensor.RESHAPE, buf((1,)), ())
    assert zero_d.shape == () and mv(tensor.EXPAND, mv(tensor.RESHAPE, zero_d, (1, 1)), (3, 3)).shape == (3, 3)
    assert msgs(UOp.sink(mv(tensor.PERMUTE, b, (2, 0, 1)), zero_d)) == []


@pytest.mark.parametrize("build,msg", [
    (lambda b: mv(tensor.RESHAPE, b, (3, 5)), "cannot reshape tensor<4x4xf32> (16 elements) to [3, 5] (15 elements)"),
    (lambda b: mv(tensor.PERMUTE, b, (0, 0)), "[0, 0] is not a permutation of the 2 axes of tensor<4x4xf32>"),
    (lambda b: mv(tensor.PERMUTE, b, (1, 0, 2)), "[1, 0, 2] is not a permutation of the 2 axes of tensor<4x4xf32>"),
    (lambda b: mv(tensor.EXPAND, b, (4, 4, 2)), "cannot expand tensor<4x4xf32> to [4, 4, 2]: rank 2 vs 3"),
    (lambda b: mv(tensor.EXPAND, b, (4, 8)), "cannot expand tensor<4x4xf32> to [4, 8]: axis 1 has size 4, not 1"),
    (lambda b: mv(tensor.PAD, b, ((1, 1),)), "pad of tensor<4x4xf32> needs 2 [before, after] pairs, got 1"),
    (lambda b: mv(tensor.SHRINK, b, ((0, 4), (3, 2))),
     "cannot shrink tensor<4x4xf32> to bounds [[0, 4], [3, 2]]: axis 1 needs 0 <= 3 <= 2 <= 4"),
    (lambda b: mv(tensor.SHRINK, b, ((0, 5), (0, 4))),
     "cannot shrink tensor<4x4xf32> to bounds [[0, 5], [0, 4]]: axis 0 needs 0 <= 0 <= 5 <= 4"),
    (lambda b: mv(tensor.SHRINK, b, ((0, 4),)), "shrink of tensor<4x4xf32> needs 2 [start, end] pairs, got 1"),
    (lambda b: mv(tensor.FLIP, b, (2,)), "axis 2 out of range for tensor<4x4xf32> (2 axes)"),
    (lambda b: mv(tensor.FLIP, b, (-1,)), "axis -1 out of range for tensor<4x4xf32> (2 axes)"),
    (lambda b: mv(tensor.FLIP, b, (1, 1)), "axis 1 repeated in [1, 1]"),
    (lambda b: UOp(tensor.REDUCE, f32, (b,), ("add", (0, 3))), "axis 3 out of range for tensor<4x4xf32> (2 axes)"),
    (lambda b: b + mv(tensor.SHRINK, b, ((0, 4), (0, 3))),
     "elementwise operands have different shapes: [4, 4] vs [4, 3]"),
    (lambda b: mv(tensor.RESHAPE, UOp.const(f32, 0.0), (1,)),
     "operand must be a tensor, got a value of type f32 without a shape"),
])
def test_shape_rule_failures(build, msg):
    u = build(buf((4, 4)))
    with pytest.raises(ShapeError) as e:
        _ = u.shape
    assert str(e.value) == msg
    assert msgs(u) == [f"'{u.op.name}' op {msg}"]


def test_elementwise_broadcasts_shapeless_operands():
    b = buf((4, 4))
    assert (b + UOp.const(f32, 1.0)).shape == (4, 4)
    assert (b.lt(UOp.const(f32, 1.0))).shape == (4, 4)
    assert UOp(core.WHERE, f32, (UOp.const(b1, True), b, UOp.const(f32, 0.0))).shape == (4, 4)
    assert b.cast(i32).shape == (4, 4)
    assert (UOp.const(f32, 1.0) + UOp.const(f32, 2.0)).shape is None


# ---- tensor dialect rules --------------------------------------------------------------------------------------------
def test_tensor_valid_graph():
    a, b = buf((4, 4), id_=0), buf((16,), id_=1)
    r = mv(tensor.RESHAPE, b, (4, 4))
    s = UOp(tensor.REDUCE, f32, (a * r,), ("add", (1,)))
    out = UOp(tensor.ASSIGN, f32, (mv(tensor.SHRINK, a, ((0, 4), (0, 1))), s))
    v = UOp(tensor.VAR, idx, (), ("n", 1, 10))
    bound = UOp(tensor.BIND, idx, (v, UOp.const(idx, 3)))
    assert out.shape == (4, 1)
    assert msgs(UOp.sink(out, bound, UOp(tensor.COPY, f32, (a,), "GPU"))) == []


@pytest.mark.parametrize("build,msg", [
    (lambda a: UOp(tensor.RESHAPE, i32, (a,), (16,)),
     "'tensor.reshape' op result dtype i32 differs from operand dtype f32"),
    (lambda a: UOp(tensor.BUFFER, f32.vec(2), (), (0, "python", (4,))),
     "'tensor.buffer' op buffer dtype must be a scalar number or bool, got vector<2xf32>"),
    (lambda a: UOp(tensor.BUFFER, f32, (), (-1, "python", (4,))),
     "'tensor.buffer' op attribute 'id': expected an integer >= 0, got -1"),
    (lambda a: UOp(tensor.ASSIGN, f32, (a, buf((4, 4), i32, 1))),
     "'tensor.assign' op assign target and value dtypes differ: f32 vs i32"),
    (lambda a: UOp(tensor.ASSIGN, f32, (a + a, a)),
     "'tensor.assign' op assign target must be a tensor.buffer or a reshape/permute/shrink/flip view of one, "
     "got core.add"),
    (lambda a: UOp(tensor.ASSIGN, f32, (mv(tensor.EXPAND, mv(tensor.RESHAPE, buf((4,)), (4, 1)), (4, 4)), a)),
     "'tensor.assign' op assign target must be a tensor.buffer or a reshape/permute/shrink/flip view of one, "
     "got tensor.expand"),
    (lambda a: UOp(tensor.ASSIGN, f32, (a, buf((2, 8), f32, 1))),
     "'tensor.assign' op assign target and value have different shapes: [4, 4] vs [2, 8]"),
    (lambda a: UOp(tensor.VAR, idx, (), ("n", 5, 1)), "'tensor.var' op variable range is empty: min 5 > max 1"),
    (lambda a: UOp(tensor.VAR, i32, (), ("n", 1, 5)), "'tensor.var' op result dtype must be index, got i32"),
    (lambda a: UOp(tensor.BIND, idx, (UOp(tensor.VAR, idx, (), ("n", 1, 5)), UOp.const(idx, 9))),
     "'tensor.bind' op value 9 of variable 'n' is outside [1, 5]"),
    (lambda a: UOp(tensor.BIND, idx, (UOp.const(idx, 1), UOp.const(idx, 9))),
     "'tensor.bind' op first operand must be a tensor.var, got core.const"),
    (lambda a: UOp(tensor.REDUCE, f32, (a,), ("sum", (0,))),
     "'tensor.reduce' op attribute 'op': expected one of add, mul, max, min, got \"sum\""),
    (lambda a: UOp(tensor.PAD, f32, (a,), ((1, -1), (0, 0))),
     "'tensor.pad' op attribute 'pads': expected an integer >= 0, got -1"),
    (lambda a: UOp(tensor.PAD, f32, (a,), ((1, 2, 3), (0, 0))),
     "'tensor.pad' op attribute 'pads': expected a list of 2 elements, got 3"),
    (lambda a: UOp(tensor.CALL, dtypes.void, (a,), (UOp.sink(), "k")),
     "'tensor.call' op the kernel region's root must be a kernel.def or a device.program, got core.sink"),
])
def test_tensor_rule_failures(build, msg):
    assert msgs(build(buf((4, 4)))) == [msg]


# ---- kernel dialect --------------------------------------------------------------------------------------------------
def kernel_body() -> UOp:
    """out[i] = sum_j a[i*8+j] for i < 4, j < 8."""
    p0, p1 = UOp(kernel.PARAM, f32.ptr(), (), 0), UOp(kernel.PARAM, f32.ptr(), (), 1)
    i = UOp(kernel.RANGE, idx, (UOp.const(idx, 4),), (0, "global"))
    j = UOp(kernel.RANGE, idx, (UOp.const(idx, 8),), (1, "reduce"))
    ld = UOp(kernel.LOAD, f32, (UOp(kernel.INDEX, f32.ptr(), (p1, i * 8 + j)),))
    red = UOp(kernel.REDUCE, f32, (ld, j), "add")
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, f32.ptr(), (p0, i)), red))
    return UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st, i)),), "sum_rows")


def test_kernel_valid_and_in_a_call_region():
    k = kernel_body()
    assert msgs(k) == []
    call = UOp(tensor.CALL, dtypes.void, (buf((4,), id_=0), buf((32,), id_=1)), (k, "sum_rows"))
    assert msgs(UOp.sink(call)) == []
    lp = UOp(kernel.LOCAL, f32.ptr("local", 16), (), 0)
    g = UOp(kernel.LOAD, f32.vec(4), (UOp(kernel.INDEX, lp.dtype, (lp, UOp.const(idx, 0), UOp.const(b1, True))),
                                      UOp.const(f32.vec(4), 0.0), UOp.const(b1, True)))
    reg = UOp(kernel.REGISTER, f32.ptr("register", 4), (), 1)
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, reg.dtype, (reg, UOp.const(idx, 0))), g))
    v = UOp(kernel.VAR, idx, (), ("n", 0, 100))
    st0 = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, f32.ptr(), (UOp(kernel.PARAM, f32.ptr(), (), 0), v)),
                                          UOp.const(f32, 0.0)))
    end = UOp(kernel.END, dtypes.void, (st0, UOp(kernel.RANGE, idx, (v,), (0, "loop"))))
    assert msgs(UOp(kernel.DEF, dtypes.void, (st, end), "k")) == []


def test_kernel_range_kind_default():
    assert kernel.RANGE.make_arg({"axis": 0}) == (0, "loop")
    assert kernel.RANGE.make_arg({"axis": 1, "kind": "upcast"}) == (1, "upcast")


P = UOp(kernel.PARAM, f32.ptr(), (), 0)
ZERO = UOp.const(idx, 0)


@pytest.mark.parametrize("build,msg", [
    (lambda: UOp(kernel.PARAM, f32.ptr("local", 4), (), 0), "'kernel.param' op result must be a global pointer, "
     "got ptr<f32, local, 4>"),
    (lambda: UOp(kernel.RANGE, idx, (UOp.const(i32, 4),), (0, "loop")),
     "'kernel.range' op range end must be index, got i32"),
    (lambda: UOp(kernel.RANGE, idx, (ZERO,), (0, "vector")),
     "'kernel.range' op attribute 'kind': expected one of global, local, loop, reduce, upcast, unroll, group, "
     "got \"vector\""),
    (lambda: UOp(kernel.END, dtypes.void, (ZERO, ZERO)),
     "'kernel.end' op operand 1 must be a kernel.range, got core.const"),
    (lambda: UOp(kernel.INDEX, f32.ptr(), (ZERO, ZERO)),
     "'kernel.index' op first operand must be a pointer, got index"),
    (lambda: UOp(kernel.INDEX, f32.ptr(), (P, UOp.const(i32, 0))), "'kernel.index' op offset must be index, got i32"),
    (lambda: UOp(kernel.INDEX, f32.ptr(), (P, ZERO, ZERO)), "'kernel.index' op gate must be bool, got index"),
    (lambda: UOp(kernel.LOAD, i32, (P,)), "'kernel.load' op result dtype must be f32 or a vector of it, got i32"),
    (lambda: UOp(kernel.LOAD, f32, (P, UOp.const(f32, 0.0))),
     "'kernel.load' op a load takes an alternative value and a gate together (3 operands), not 2"),
    (lambda: UOp(kernel.LOAD, f32, (P, UOp.const(i32, 0), UOp.const(b1, True))),
     "'kernel.load' op alternative value dtype i32 differs from result dtype f32"),
    (lambda: UOp(kernel.STORE, dtypes.void, (P, UOp.const(i32, 0))),
     "'kernel.store' op stored value dtype must be f32 or a vector of it, got i32"),
    (lambda: UOp(kernel.STORE, f32, (P, UOp.const(f32, 0.0))), "'kernel.store' op result must be void, got f32"),
    (lambda: UOp(kernel.REDUCE, f32, (UOp.const(f32, 0.0), ZERO), "add"),
     "'kernel.reduce' op operand 1 must be a kernel.range, got core.const"),
    (lambda: UOp(kernel.LOCAL, f32.ptr("local"), (), 0),
     "'kernel.local' op result must be a local pointer with a size (ptr<T, local, N>), got ptr<f32, local>"),
    (lambda: UOp(kernel.DEF, dtypes.void, (UOp.const(f32, 0.0),), "k"),
     "'kernel.def' op operand 0 must be an effect (void), got f32 from core.const"),
    (lambda: UOp(kernel.VAR, idx, (), ("n", 3, 2)), "'kernel.var' op variable range is empty: min 3 > max 2"),
])
def test_kernel_rule_failures(build, msg):
    assert msgs(build()) == [msg]


# ---- device dialect --------------------------------------------------------------------------------------------------
def test_device_valid_program():
    gid = UOp(device.SPECIAL, idx, (UOp.const(idx, 64),), ("global_id", 0))
    loop = UOp(device.LOOP, idx, (UOp.const(idx, 8),), 0)
    acc = UOp(device.ACC, f32, (UOp.const(f32, 0.0), loop), 0)
    ld = UOp(kernel.LOAD, f32, (UOp(kernel.INDEX, f32.ptr(), (UOp(kernel.PARAM, f32.ptr(), (), 1), gid * 8 + loop)),))
    upd = UOp(device.ACCSTORE, f32, (acc, acc + ld))
    end = UOp(device.ENDLOOP, dtypes.void, (loop, upd))
    cond = UOp(device.IF, dtypes.void, (gid.lt(UOp.const(idx, 60)), end))
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, f32.ptr(), (P, gid)), upd))
    fin = UOp(device.ENDIF, dtypes.void, (cond, st))
    bar = UOp(device.BARRIER, dtypes.void, (fin,))
    h = f32.vec(8)
    z = UOp.const(h, 0.0)
    w = UOp(device.WMMA, h, (z, z, z), ("m16n8k16", (16, 8, 16), "CUDA"))
    prog = UOp(device.PROGRAM, dtypes.void, (gid, loop, acc, ld, upd, end, cond, st, fin, bar, w), "p")
    assert msgs(prog) == []


@pytest.mark.parametrize("build,msg", [
    (lambda: UOp(device.SPECIAL, idx, (ZERO,), ("global_id", 3)), "'device.special' op attribute 'dim': expected an "
     "integer in [0, 2], got 3"),
    (lambda: UOp(device.SPECIAL, idx, (ZERO,), ("thread_id", 0)),
     "'device.special' op attribute 'kind': expected one of group_id, local_id, global_id, got \"thread_id\""),
    (lambda: UOp(device.SPECIAL, i32, (ZERO,), ("local_id", 0)),
     "'device.special' op result dtype must be index, got i32"),
    (lambda: UOp(device.IF, dtypes.void, (ZERO,)), "'device.if' op condition must be bool, got index"),
    (lambda: UOp(device.ENDIF, dtypes.void, (ZERO,)),
     "'device.endif' op first operand must be a device.if, got core.const"),
    (lambda: UOp(device.ENDLOOP, dtypes.void, (ZERO,)),
     "'device.endloop' op first operand must be a device.loop, got core.const"),
    (lambda: UOp(device.ACC, f32, (UOp.const(i32, 0),), 0),
     "'device.acc' op result dtype f32 differs from init dtype i32"),
    (lambda: UOp(device.ACC, f32, (UOp.const(f32, 0.0), ZERO), 0),
     "'device.acc' op operand 1 must be a device.loop (or kernel.range), got core.const"),
    (lambda: UOp(device.ACCSTORE, dtypes.void, (UOp(device.ACC, f32, (UOp.const(f32, 0.0),), 0), ZERO)),
     "'device.accstore' op stored value dtype index differs from accumulator dtype f32"),
    (lambda: UOp(device.WMMA, f32, (ZERO, ZERO, ZERO), ("x", (16, 16, 16), "CUDA")),
     ["'device.wmma' op result dtype f32 differs from accumulator operand dtype index",
      "'device.wmma' op operand a must be a vector, got index"]),
    (lambda: UOp(device.WMMA, f32, (ZERO, ZERO, ZERO), ("x", (16, 16), "CUDA")),
     "'device.wmma' op attribute 'dims': expected a list of 3 elements, got 2"),
    (lambda: UOp(device.PROGRAM, f32, (), "p"), "'device.program' op result must be void, got f32"),
    (lambda: UOp(device.BARRIER, f32, ()), "'device.barrier' op result must be void, got f32"),
])
def test_device_rule_failures(build, msg):
    assert msgs(build()) == (msg if isinstance(msg, list) else [msg])
