"""The verifier: located MLIR-style diagnostics, arity and arg checks, regions, no cascades, and no crash on garbage."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples

import uopir  # noqa: F401 - registers the dialects
from uopir.dialects import core, kernel, tensor
from uopir.ir.diagnostics import IRError, Location, ShapeError, register_source, set_loc
from uopir.ir.dtype import dtypes
from uopir.ir.ops import REGISTRY, Attr, IntAttr, OpDef, def_op
from uopir.ir.uop import UOp
from uopir.ir.verify import collect_diagnostics, verify

f32, i32, idx = dtypes.float32, dtypes.int32, dtypes.index


def _boom_verify(u):
    yield "first"
    raise ZeroDivisionError("division by zero")


def _boom_shape(u):
    raise KeyError("nope")


BOOM = REGISTRY.get("testverify.boom") or def_op("testverify.boom", (0, None), verify=_boom_verify, summary="t")
BADSHAPE = REGISTRY.get("testverify.badshape") or def_op("testverify.badshape", 0, shape=_boom_shape, summary="t")
TWO = REGISTRY.get("testverify.two") or def_op(
    "testverify.two", 0, (Attr("a", IntAttr(lo=0)), Attr("b", IntAttr())), summary="t")


def msgs(root) -> list[str]:
    return [d.message for d in collect_diagnostics(root)]


def buf(shape, dtype=f32, id_=0):
    return UOp(tensor.BUFFER, dtype, (), (id_, "python", shape))


def test_valid_graph_verifies_clean():
    b = buf((16,))
    r = UOp(tensor.RESHAPE, f32, (b,), (4, 4))
    g = UOp.sink(r.maximum(UOp.const(f32, 0.0)))
    assert verify(g) is None
    assert collect_diagnostics(g) == []


def test_verify_raises_irerror_with_every_diagnostic():
    a, i = UOp.const(f32, 1.0), UOp.const(i32, 1)
    g = UOp.sink(UOp(core.ADD, f32, (a, i)), UOp(core.FDIV, i32, (i, i)))
    with pytest.raises(IRError) as e:
        verify(g)
    assert [d.message for d in e.value.diagnostics] == [
        "'core.add' op operand dtypes differ: f32 vs i32", "'core.fdiv' op result dtype must be a float, got i32"]
    assert str(e.value) == ("error: 'core.add' op operand dtypes differ: f32 vs i32\n"
                            "error: 'core.fdiv' op result dtype must be a float, got i32")


def test_diagnostic_carries_location_and_caret():
    text = "%0 = core.const 1.0 : f32\n%1 = core.const 1 : i32\n%2 = core.add %0, %1 : f32\ncore.sink %2\n"
    register_source("bad.uop", text)
    a, i = UOp.const(f32, 1.0), UOp.const(i32, 1)
    add = UOp(core.ADD, f32, (a, i), tag="located")
    set_loc(add, Location("bad.uop", 3, 6))
    diags = collect_diagnostics(UOp.sink(add))
    assert len(diags) == 1
    assert diags[0].loc == Location("bad.uop", 3, 6)
    assert diags[0].format() == ("bad.uop:3:6: error: 'core.add' op operand dtypes differ: f32 vs i32\n"
                                 "%2 = core.add %0, %1 : f32\n"
                                 "     ^")
    with pytest.raises(IRError) as e:
        verify(add)
    assert e.value.loc == Location("bad.uop", 3, 6)


def test_shape_error_is_located():
    r = UOp(tensor.RESHAPE, f32, (buf((4, 4)),), (3, 5), tag="loc-shape")
    set_loc(r, Location("s.uop", 2, 1))
    (d,) = collect_diagnostics(r)
    assert str(d.loc) == "s.uop:2:1"
    assert d.message == "'tensor.reshape' op cannot reshape tensor<4x4xf32> (16 elements) to [3, 5] (15 elements)"


@pytest.mark.parametrize("op,src,expect", [
    (core.ADD, 1, "'core.add' op expects 2 operands, got 1"),
    (core.NEG, 2, "'core.neg' op expects 1 operand, got 2"),
    (core.WHERE, 0, "'core.where' op expects 3 operands, got 0"),
    (kernel.INDEX, 4, "'kernel.index' op expects 2 to 3 operands, got 4"),
    (kernel.END, 1, "'kernel.end' op expects at least 2 operands, got 1"),
    (core.VECTORIZE, 0, "'core.vectorize' op expects at least 1 operand, got 0"),
])
def test_arity_errors(op, src, expect):
    x = UOp.const(f32, 1.0)
    assert msgs(UOp(op, f32, (x,) * src)) == [expect]


@pytest.mark.parametrize("op,arg,expect", [
    (tensor.BUFFER, (0, "CPU"), "'tensor.buffer' op arg must be a tuple of 3 values (id, device, shape), "
     "got [0, \"CPU\"]"),
    (tensor.BUFFER, 7, "'tensor.buffer' op arg must be a tuple of 3 values (id, device, shape), got 7"),
    (tensor.BUFFER, (0, "python", (4,), 1), "'tensor.buffer' op arg must be a tuple of 3 values (id, device, shape), "
     "got [0, \"python\", [4], 1]"),
    (tensor.BUFFER, (0, 5, (4,)), "'tensor.buffer' op attribute 'device': expected a string, got 5"),
    (tensor.BUFFER, (1.5, "python", (4,)), "'tensor.buffer' op attribute 'id': expected an integer, got 1.5"),
    (tensor.BUFFER, (True, "python", (4,)), "'tensor.buffer' op attribute 'id': expected an integer, got true"),
    (tensor.BUFFER, (0, "python", 4), "'tensor.buffer' op attribute 'shape': expected a list of int, got 4"),
    (core.SINK, 3, "'core.sink' op takes no attributes, got arg 3"),
])
def test_malformed_args(op, arg, expect):
    assert msgs(UOp(op, f32 if op is tensor.BUFFER else dtypes.void, (), arg)) == [expect]


def test_multi_attr_errors_all_reported():
    assert msgs(UOp(TWO, dtypes.void, (), (-1, "x"))) == [
        "'testverify.two' op attribute 'a': expected an integer >= 0, got -1",
        "'testverify.two' op attribute 'b': expected an integer, got \"x\""]


def test_non_canonical_attr_value():
    # a float where the attribute type converts ints to floats would be a different arg: report it
    u = UOp(kernel.PARAM, f32.ptr(), (), 0)
    assert msgs(u) == []
    assert msgs(UOp(tensor.VAR, idx, (), ("n", 0, 10))) == []


def test_unregistered_ops():
    fake = OpDef("nowhere.op", (0, None))
    assert msgs(UOp(fake, f32)) == ["unregistered operation \"nowhere.op\""]
    assert msgs(UOp("core.add", f32)) == ["unregistered operation \"core.add\""]  # a string is not an op
    assert msgs(UOp(42, f32)) == ["unregistered operation 42"]


def test_garbage_structure():
    assert msgs(UOp(core.ADD, f32, (1, 2))) == ["'core.add' op operand 0 is not a UOp: int",
                                                "'core.add' op operand 1 is not a UOp: int"]
    assert msgs(UOp(core.SINK, dtypes.void, "ab")) == ["'core.sink' op operands must be a tuple of UOps, got str"]
    assert msgs(UOp(core.NEG, "f32", (UOp.const(f32, 1.0),))) == ["'core.neg' op result type must be a DType, got str"]
    assert msgs(None) == ["expected a UOp graph to verify, got NoneType"]
    with pytest.raises(IRError):
        verify(3)


def test_cycle_is_reported_not_hung():
    a = UOp(core.NEG, f32, (UOp.const(f32, 1.0),), tag="cycle-a")
    b = UOp(core.NEG, f32, (a,), tag="cycle-b")
    a.src = (b,)  # only possible by mutating a node; the verifier must still terminate
    try:
        assert "'core.neg' op is part of a cycle (a node is its own operand)" in msgs(b)
    finally:
        a.src = (UOp.const(f32, 1.0),)


def test_errors_do_not_cascade():
    bad = UOp(tensor.RESHAPE, f32, (buf((4, 4)),), (3, 5))
    g = UOp.sink(UOp(tensor.PERMUTE, f32, (bad + UOp.const(f32, 1.0),), (1, 0)))
    assert msgs(g) == ["'tensor.reshape' op cannot reshape tensor<4x4xf32> (16 elements) to [3, 5] (15 elements)"]
    arity = UOp(tensor.RESHAPE, f32, (), (16,))
    assert msgs(UOp.sink(UOp(tensor.FLIP, f32, (arity,), (0,)))) == [
        "'tensor.reshape' op expects at least 1 operand, got 0"]


def test_crashing_rules_become_diagnostics():
    assert msgs(UOp(BOOM, dtypes.void)) == [
        "'testverify.boom' op first",
        "'testverify.boom' op verifier of 'testverify.boom' failed: ZeroDivisionError: division by zero"]
    assert msgs(UOp(BADSHAPE, f32)) == ["'testverify.badshape' op shape rule of 'testverify.badshape' failed: "
                                        "KeyError: 'nope'"]


def test_regions_are_verified():
    p = UOp(kernel.PARAM, f32.ptr(), (), 0)
    bad_store = UOp(kernel.STORE, dtypes.void, (p, UOp.const(i32, 1)), tag="in-region")
    set_loc(bad_store, Location("k.uop", 5, 3))
    body = UOp(kernel.DEF, dtypes.void, (bad_store,), "k")
    call = UOp(tensor.CALL, dtypes.void, (buf((4,)),), (body, "k"))
    (d,) = collect_diagnostics(UOp.sink(call))
    assert d.message == "'kernel.store' op stored value dtype must be f32 or a vector of it, got i32"
    assert str(d.loc) == "k.uop:5:3"
    assert msgs(UOp(tensor.CALL, dtypes.void, (), (5, "k"))) == [
        "'tensor.call' op attribute 'kernel': expected a region, got 5"]
    # a region whose root is garbage
    assert msgs(UOp(tensor.CALL, dtypes.void, (), (UOp(core.ADD, f32, ()), "k"))) == [
        "'core.add' op expects 2 operands, got 0",
        "'tensor.call' op the kernel region's root must be a kernel.def or a device.program, got core.add"]


def test_shape_rules_raise_shape_error_outside_verifier():
    with pytest.raises(ShapeError, match=r"\[4, 4\] vs \[2, 8\]"):
        _ = (buf((4, 4)) + buf((2, 8), id_=1)).shape


# ---- fuzz: whatever the graph, only IRError escapes ---
_OPS = sorted((o for o in REGISTRY.values() if not o.dialect.startswith("test")), key=lambda o: o.name)
_DTYPES = [f32, i32, idx, dtypes.bool, dtypes.void, f32.vec(4), f32.ptr(), f32.ptr("local", 8), dtypes.uint8]
_ARGS = st.recursive(st.none() | st.integers(-3, 20) | st.floats(allow_nan=True) | st.booleans() |
                     st.sampled_from(["CPU", "add", "loop", "global_id", "x"]),
                     lambda inner: st.tuples(inner) | st.tuples(inner, inner) | st.tuples(inner, inner, inner),
                     max_leaves=6)


@st.composite
def graphs(draw):
    nodes: list[UOp] = []
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(_OPS))
        src = tuple(draw(st.sampled_from(nodes)) for _ in range(draw(st.integers(0, min(3, len(nodes))))))
        if draw(st.booleans()) and nodes:
            region = draw(st.sampled_from(nodes))
            arg = (region, "k") if op is tensor.CALL else region
        else:
            arg = draw(_ARGS)
        nodes.append(UOp(op, draw(st.sampled_from(_DTYPES)), src, arg))
    return nodes[-1]


@settings(max_examples=examples(300), deadline=None)
@given(graphs())
def test_fuzz_verify_never_crashes(g):
    try:
        verify(g)
    except IRError as e:
        assert e.diagnostics and all(d.message for d in e.diagnostics)
