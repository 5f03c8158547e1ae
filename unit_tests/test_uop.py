"""The UOp core: hash-consing (identity, bit-exact keys, freeing), graph helpers, operators, dtypes."""
from __future__ import annotations

import copy
import gc
import math
import pickle
import weakref

import pytest

import uopir  # noqa: F401 - registers the dialects
from uopir.dialects import core
from uopir.ir import uop as uop_module
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp, normalize_const

i32, f32, idx = dtypes.int32, dtypes.float32, dtypes.index


def test_equal_uops_are_the_same_object() -> None:
    a, b = UOp.const(i32, 3), UOp.const(i32, 3)
    assert a is b
    assert (a + b) is (UOp.const(i32, 3) + UOp.const(i32, 3))
    assert UOp(core.ADD, i32, (a, b)) is not UOp(core.ADD, dtypes.int64, (a, b))  # dtype is part of identity
    assert UOp(core.ADD, i32, (a, b), tag=1) is not UOp(core.ADD, i32, (a, b))  # and so is the tag


def test_float_args_are_keyed_bit_exactly() -> None:
    assert UOp.const(f32, 0.0) is not UOp.const(f32, -0.0)
    assert math.copysign(1.0, UOp.const(f32, -0.0).arg) == -1.0
    assert UOp.const(f32, math.nan) is UOp.const(f32, math.nan)  # nan != nan, yet it hash-conses
    v = UOp.const(f32.vec(2), 1.0)
    assert UOp(core.GEP, f32, (v,), (1,)) is not UOp(core.GEP, f32, (v,), (True,))  # 1 == True, yet distinct
    assert UOp(core.SINK, arg=(1, 2.0)) is not UOp(core.SINK, arg=(1, -2.0))
    assert UOp(core.SINK, arg=(0.0, (1,))) is not UOp(core.SINK, arg=(-0.0, (1,)))  # nested tuples too
    assert UOp(core.SINK, tag=0.0) is not UOp(core.SINK, tag=-0.0)
    assert UOp(core.SINK, tag=1) is not UOp(core.SINK, tag=True)


def test_unreferenced_uops_are_freed() -> None:
    x = UOp.const(i32, 123456789)
    y = x * 7777777 + 1234567
    nodes = list(y.toposort())
    assert len(nodes) == 5  # x, 7777777, x*7777777, 1234567, y (constants no other code holds)
    assert all(any(r() is n for r in uop_module._ucache.values()) for n in nodes)
    refs = [weakref.ref(n) for n in nodes]
    del x, y, nodes
    gc.collect()
    assert all(r() is None for r in refs)  # nothing else holds them: the cache's weak references let them go
    assert all(r() is not None for r in uop_module._ucache.values())  # and no dead entry stays in the cache
    # rebuilding gives a fresh object that is again unique
    z1 = UOp.const(i32, 123456789) * 7777777 + 1234567
    assert z1 is UOp.const(i32, 123456789) * 7777777 + 1234567


def test_shared_subgraph_survives_while_a_user_holds_it() -> None:
    x = UOp.const(i32, 987654)
    y = x + 1
    keep = weakref.ref(x)
    del x
    gc.collect()
    assert keep() is not None and y.src[0] is keep()


def test_pickle_and_copy_preserve_identity() -> None:
    g = (UOp.const(i32, 5) + 2).lt(9)
    assert pickle.loads(pickle.dumps(g)) is g
    assert copy.copy(g) is g and copy.deepcopy(g) is g
    assert pickle.loads(pickle.dumps(f32.vec(4).ptr("local", 16))) is f32.vec(4).ptr("local", 16)


def test_toposort_orders_sources_first_and_handles_deep_chains() -> None:
    a = UOp.const(i32, 1)
    b = a + 2
    c = b * b
    order = list(c.toposort())
    assert order.index(a) < order.index(b) < order.index(c) and len(order) == 4  # a, 2, b, c; b once
    u = UOp.const(i32, 0)
    for _ in range(20_000):  # 20x Python's recursion limit: a recursive walk would fail
        u = u + 1
    assert len(u.toposort()) == 20_002
    assert list(c.toposort(gate=lambda n: n is not b)) == [b, c]


def test_replace_and_substitute() -> None:
    x, y = UOp.const(i32, 1), UOp.const(i32, 2)
    g = (x + y) * x
    assert g.replace(dtype=i32) is g
    assert g.replace(op=core.ADD) is UOp(core.ADD, i32, g.src)
    h = g.substitute({x: UOp.const(i32, 10)})
    assert h is (UOp.const(i32, 10) + y) * UOp.const(i32, 10)
    assert g.substitute({}) is g


def test_operators_build_core_ops() -> None:
    x = UOp(core.CONST, idx, (), 4)
    assert (x + 1).op is core.ADD and (x + 1).src[1] is UOp.const(idx, 1)
    assert (1 + x).src == (UOp.const(idx, 1), x)
    assert (x // 2).op is core.IDIV and (x % 2).op is core.MOD and (-x).op is core.NEG
    assert (x - 1).op is core.SUB and (x * 3).op is core.MUL and (x << 1).op is core.SHL
    assert x.lt(3).dtype is dtypes.bool and x.lt(3).op is core.CMPLT
    assert x.eq(4).op is core.CMPEQ and x.ne(4).op is core.CMPNE
    assert (x == x) is True and (x == UOp.const(idx, 5)) is False  # == stays identity, never an op
    assert x.lt(2).where(x, 0).op is core.WHERE
    assert x.cast(i32).op is core.CAST and x.cast(idx) is x


@pytest.mark.parametrize("dtype,value,expect", [
    (dtypes.int8, 130, -126), (dtypes.uint8, -1, 255), (dtypes.int64, 2**63, -(2**63)), (f32, 3, 3.0),
    (dtypes.bool, 5, True), (i32, -2.7, -2),
])
def test_normalize_const(dtype: DType, value: object, expect: object) -> None:
    got = normalize_const(dtype, value)
    assert got == expect and type(got) is type(expect)


def test_normalize_const_vectors_and_errors() -> None:
    assert normalize_const(f32.vec(3), 1) == (1.0, 1.0, 1.0)
    assert normalize_const(i32.vec(2), [1, 2**32 + 3]) == (1, 3)
    with pytest.raises(ValueError, match="needs 2 values"):
        normalize_const(i32.vec(2), [1, 2, 3])
    with pytest.raises(ValueError):
        normalize_const(i32, math.inf)


def test_dtypes_are_interned() -> None:
    assert f32.vec(4) is dtypes.float32.vec(4) and f32.vec(1) is f32
    assert f32.ptr() is f32.ptr("global") and f32.ptr("local", 8) is not f32.ptr("local", 16)
    assert dtypes.bfloat16 is not dtypes.float16 and dtypes.bfloat16.is_float
    assert str(f32.vec(4).ptr("register", 2)) == "ptr<vector<4xf32>, register, 2>"
    assert dtypes.from_name("f32") is f32 and dtypes.from_name("float32") is f32 and dtypes.from_name("x") is None
    assert (dtypes.int8.min, dtypes.int8.max, dtypes.uint16.max) == (-128, 127, 65535)


def test_shape_of_a_deep_tensor_chain_needs_no_deep_stack() -> None:
    # regression (issue 8, item 4): shapes were computed lazily and recursively, so .shape of ~500 chained
    # tensor ops built in code raised RecursionError; the printer, parser and verifier must also take the chain
    from uopir.dialects import tensor
    from uopir.ir.parser import parse_ir
    from uopir.ir.printer import print_ir
    from uopir.ir.verify import verify

    x = UOp(tensor.BUFFER, f32, (), (0, "python", (4, 3)))
    one = UOp.const(f32, 1.0)
    for _ in range(20_000):  # 20x Python's recursion limit
        x = UOp(core.ADD, f32, (x, one))
    assert x.shape == (4, 3)
    text = print_ir(x)
    assert text.count("\n") == 20_002 and text.endswith("%20001 = core.add %20000, %1 : tensor<4x3xf32>\n")
    assert parse_ir(text, "deep.uop") is x
    verify(x)
    bad = UOp(tensor.RESHAPE, f32, (x,), (5,))  # a shape error at the top of the chain is still reported
    with pytest.raises(ValueError, match="reshape"):
        _ = bad.shape


def test_shape_error_deep_in_a_chain_surfaces_and_caches_nothing_wrong() -> None:
    from uopir.dialects import tensor
    from uopir.ir.diagnostics import ShapeError

    a = UOp(tensor.BUFFER, f32, (), (0, "python", (4,)))
    b = UOp(tensor.BUFFER, f32, (), (1, "python", (5,)))
    x = UOp(core.ADD, f32, (a, b))  # shapes differ
    for _ in range(2000):
        x = UOp(core.ADD, f32, (x, UOp.const(f32, 2.0)))
    with pytest.raises(ShapeError):
        _ = x.shape
    with pytest.raises(ShapeError):  # still an error the second time: no node above the bad one cached a shape
        _ = x.shape
