"""uopir.pyrender: the Python it writes, run, rebuilds the same hash-consed graph (`is`), for random graphs of every
op (the text round trip's generator, unit_tests/graphgen.py) and for float edge cases in args and tags."""
from __future__ import annotations

import math

import pytest
from graphgen import FLOAT_EDGES, RandSource, build_graph, graphs
from hypothesis import HealthCheck, given, settings
from proptest import examples

import uopir
from uopir.dialects import core
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp


def rebuilt(g: UOp) -> UOp:
    ns: dict = {}
    exec(compile(uopir.pyrender(g), "<pyrender>", "exec"), ns)
    return ns["root"]


@settings(max_examples=examples(100), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_random_graphs_rebuild_identically(g: UOp) -> None:
    assert rebuilt(g) is g


def test_random_graphs_rebuild_identically_deterministic() -> None:
    """Bigger graphs from fixed seeds, regions (kernel bodies in tensor.call args) included."""
    for seed in range(150):
        g, _ = build_graph(RandSource(seed), 10 + seed % 40)
        assert rebuilt(g) is g


@pytest.mark.parametrize("v", [*FLOAT_EDGES, -math.nan], ids=repr)
def test_float_args_and_tags_rebuild_bit_exactly(v: float) -> None:
    g = UOp(core.SINK, dtypes.void, (UOp.const(dtypes.float64, v),), None, (v, "t"))
    assert rebuilt(g) is g


def test_the_source_reads_as_python() -> None:
    """One assignment per node, sources first, op names bound once, the root last."""
    x = UOp.const(dtypes.int32, 3)
    g = UOp(core.ADD, dtypes.int32, (x, x))
    text = uopir.pyrender(g)
    assert "CORE_ADD = get_op('core.add')" in text
    assert "u0 = UOp(CORE_CONST, dtypes.int32, (), 3)\nu1 = UOp(CORE_ADD, dtypes.int32, (u0, u0))\nroot = u1" in text


def test_long_chains_do_not_recurse() -> None:
    u = UOp.const(dtypes.int32, 0)
    for i in range(5000):
        u = UOp(core.ADD, dtypes.int32, (u, UOp.const(dtypes.int32, i % 7)))
    assert rebuilt(u) is u


def test_an_arg_python_cannot_write_is_a_clear_error() -> None:
    g = UOp(core.SINK, dtypes.void, (), None, object())
    with pytest.raises(TypeError, match="pyrender: cannot write an arg of type object"):
        uopir.pyrender(g)
