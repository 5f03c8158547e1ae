"""Regression (issue 8 item 5): canonicalize with many `x*0` users of one chain, dce of a `core.group` of many values
and `where(c, x, x)` over one chain each walked the graph below every candidate (quadratic). The work is now linear:
the nodes the passes walk are counted (a counting wrapper around UOp.toposort), never timed."""
from __future__ import annotations

import pytest

import uopir  # noqa: F401  (registers the dialects)
from uopir.dialects import core, tensor
from uopir.ir.dtype import dtypes
from uopir.ir.folds import EffectCache
from uopir.ir.uop import UOp
from uopir.passes.manager import PassManager

N = 300
i32 = dtypes.int32


def _chain(n: int) -> list[UOp]:
    """x, x+3, (x+3)+3, ...: n values, each one op above the previous (nothing folds)."""
    out = [UOp(tensor.BUFFER, i32, (), (0, "python", (4,)))]
    for _ in range(n - 1):
        out.append(out[-1] + core.const(i32, 3))
    return out


def _mul_zero_users(n: int) -> UOp:
    return UOp.sink(*[v * core.const(i32, 0) for v in _chain(n)])


def _group_of_values(n: int) -> UOp:
    chain = _chain(n)
    write = UOp(tensor.ASSIGN, i32, (chain[0], chain[-1]))
    return UOp.sink(UOp(core.GROUP, dtypes.void, (*chain[1:], write)))


def _where_same(n: int) -> UOp:
    return UOp.sink(*[UOp(core.WHERE, i32, (v.lt(core.const(i32, 7)), v, v)) for v in _chain(n)])


@pytest.fixture
def walked(monkeypatch):
    """The number of nodes UOp.toposort returned while the test ran (the passes' graph walks)."""
    count = [0]
    real = UOp.toposort

    def counting(self, gate=None):
        out = real(self, gate)
        count[0] += len(out)
        return out
    monkeypatch.setattr(UOp, "toposort", counting)
    return count


@pytest.mark.parametrize("build, pipeline", [(_mul_zero_users, "canonicalize"), (_group_of_values, "dce"),
                                             (_where_same, "canonicalize")], ids=["mul-zero", "dce-group", "where"])
def test_effect_checks_walk_each_node_a_bounded_number_of_times(walked, build, pipeline):
    g = build(N)
    size = len(g.toposort())
    walked[0] = 0
    out = PassManager.parse(pipeline).run(g, verify=False)
    assert walked[0] <= 12 * size, (walked[0], size)  # one walk per candidate would be about N*N/2 = 45000
    assert out is not g  # it did fold / prune


def test_effect_cache_answers_each_node_once():
    chain = _chain(N)
    cache = EffectCache()
    for v in chain:
        assert cache.has_effect(v) is False
    assert cache.evaluated == N + 1  # the chain and its constant 3
    write = UOp(tensor.ASSIGN, i32, (chain[0], chain[-1]))
    assert cache.has_effect(write + core.const(i32, 1)) is True and cache.evaluated == N + 4
