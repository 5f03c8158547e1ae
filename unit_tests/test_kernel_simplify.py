"""kernel-simplify against the reference interpreter: random kernels over small ranges (index math with sums,
products, divisions and remainders by constants, flips, pads as gated loads, gates decided or not by the ranges,
reductions over ranges of extent 1, ranges that can merge) run before and after the pass, bit for bit, on every
point of their iteration space; and the fixed behaviours the integer proofs do not cover (ranges, gates, loads)."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from uopir.backends.python.kernel import run_kernel
from uopir.dialects import core, kernel
from uopir.dialects.semantics import np_dtype
from uopir.ir.dtype import DType, dtypes
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.rewrite import RewriteStats
from uopir.ir.uop import UOp
from uopir.ir.valuerange import value_range
from uopir.ir.verify import verify
from uopir.passes.kernel.simplify import SIMPLIFY, linear_terms, simplify_kernel
from uopir.passes.kernel.simplify_rules import RULES
from uopir.passes.manager import PassManager

_I = dtypes.index


def _c(v: int) -> UOp:
    return UOp.const(_I, v)


def _rng(n: int, axis: int, kind: str = "loop") -> UOp:
    return UOp(kernel.RANGE, _I, (_c(n),), (axis, kind))


def _param(i: int, d: DType = dtypes.float32) -> UOp:
    return UOp(kernel.PARAM, d.ptr(), (), i)


# ---- running a kernel ------------------------------------------------------------------------------------------------
def _run(kdef: UOp, inputs: list[np.ndarray], out_size: int, d: DType = dtypes.float32) -> np.ndarray:
    out = np.full(out_size, 7, np_dtype(d))
    run_kernel(kdef, [out, *[a.copy() for a in inputs]])
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---- random kernels ------------------------------------------------------------------------------------------------
class _Gen:
    """A random kernel: output ranges (some of extent 1), an index expression per load, pads as gates."""

    def __init__(self, r: random.Random):
        self.r = r
        self.axis = 0

    def rng(self, kind: str = "loop") -> UOp:
        u = _rng(self.r.choice((1, 1, 2, 3, 4)), self.axis, kind)
        self.axis += 1
        return u

    def index(self, ranges: list[UOp]) -> UOp:
        """A random index over the ranges: scaled terms, flips, constants, and divisions/remainders of them."""
        r = self.r
        e = _c(r.randint(-3, 3))
        for x in ranges:
            k = r.choice((1, 1, 2, 3, 4, -1, 8))
            t = x * _c(k) if k != 1 else x
            if r.random() < 0.3:
                t = (t + _c(r.randint(-2, 2))) * _c(r.choice((1, 2, -1)))
            e = e + t if r.random() < 0.5 else t + e
        k = r.random()
        if k < 0.25:
            e = e // _c(r.choice((1, 2, 3, 4, 8)))
        elif k < 0.5:
            e = e % _c(r.choice((1, 2, 3, 4, 8)))
        elif k < 0.6:
            c = r.choice((2, 3, 4))
            e = (e // _c(c)) * _c(c) + e % _c(c)
        return e

    def gate(self, ranges: list[UOp]) -> UOp | None:
        r = self.r
        g = None
        for x in ranges:
            if r.random() < 0.4:
                if r.random() < 0.5:
                    c = x.lt(_c(r.randint(-1, 5)))
                else:
                    c = _c(r.randint(-2, 3)).lt(x + _c(r.randint(0, 2)))
                g = c if g is None else g & c
        return g

    def load(self, p: UOp, idx: UOp, gate: UOp | None) -> tuple[UOp, int]:
        lo, hi = value_range(idx)
        idx = idx + _c(-lo) if lo < 0 else idx  # keep every address in the buffer
        size = max(1, hi - min(lo, 0) + 1)
        ip = UOp(kernel.INDEX, p.dtype, (p, idx))
        if gate is None:
            return UOp(kernel.LOAD, dtypes.float32, (ip,)), size
        return UOp(kernel.LOAD, dtypes.float32, (ip, UOp.const(dtypes.float32, -0.0), gate)), size

    def kernel(self) -> tuple[UOp, list[int], int]:
        r = self.r
        outs = [self.rng() for _ in range(r.randint(1, 3))]
        red = [self.rng("reduce") for _ in range(r.randint(0, 2))]
        sizes: list[int] = []
        val = None
        for i in range(r.randint(1, 3)):
            space = outs + red
            g = self.gate(space)
            v, n = self.load(_param(i + 1), self.index(space), g)
            sizes.append(n)
            if g is not None and r.random() < 0.5:
                v = g.where(v, UOp.const(dtypes.float32, -0.0))  # a pad's where around its own gated load
            val = v if val is None else val + v
        assert val is not None
        if red:
            val = UOp(kernel.REDUCE, dtypes.float32, (val, *red), r.choice(("add", "max", "mul")))
        strides, acc = [], 1
        for x in reversed(outs):
            strides.append(acc)
            acc *= x.src[0].arg
        off = _c(0)
        for x, st in zip(outs, reversed(strides), strict=True):
            off = off + x * _c(st)
        st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, _param(0).dtype, (_param(0), off)), val))
        return UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st, *outs)),), "k"), sizes, acc


@pytest.mark.parametrize("seed", range(300))
def test_random_kernels_compute_the_same_bits(seed: int) -> None:
    r = random.Random(seed)
    kdef, sizes, out_size = _Gen(r).kernel()
    rng = np.random.default_rng(seed)
    inputs = []
    for n in sizes:
        a = (rng.standard_normal(n) * 3).astype(np.float32)
        a[rng.random(n) < 0.2] = -0.0
        inputs.append(a)
    simple = simplify_kernel(kdef)
    verify(simple)
    assert parse_ir(print_ir(simple)) is simple
    want, got = _run(kdef, inputs, out_size), _run(simple, inputs, out_size)
    assert _same(want, got), f"kernel:\n{print_ir(kdef)}\nsimplified:\n{print_ir(simple)}\nwant {want}\ngot {got}"


# ---- fixed behaviours ------------------------------------------------------------------------------------------------
def test_merged_ranges_keep_the_accumulation_order() -> None:
    """A float sum over two ranges merged into one accumulates in the same order: the same bits, where another
    order would round differently."""
    k0, k1 = _rng(3, 0, "reduce"), _rng(4, 1, "reduce")
    ld = UOp(kernel.LOAD, dtypes.float32, (UOp(kernel.INDEX, _param(1).dtype, (_param(1), k0 * _c(4) + k1)),))
    red = UOp(kernel.REDUCE, dtypes.float32, (ld, k0, k1), "add")
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, _param(0).dtype, (_param(0), _c(0))), red))
    kdef = UOp(kernel.DEF, dtypes.void, (st,), "k")
    simple = simplify_kernel(kdef)
    rngs = [u for u in simple.toposort() if u.op is kernel.RANGE]
    assert [u.src[0].arg for u in rngs] == [12]
    x = np.array([1e8, 1.0, -1e8, 1.0, 3.0, -0.0, 1e-8, 7.0, -3.0, 0.5, 1e8, -1e8], np.float32)
    assert _same(_run(kdef, [x], 1), _run(simple, [x], 1))


def test_a_size_one_float_sum_keeps_its_zero_step() -> None:
    """reduce add over a range of extent 1 is 0.0 + v: -0.0 becomes 0.0, as the loop computes."""
    k = _rng(1, 0, "reduce")
    ld = UOp(kernel.LOAD, dtypes.float32, (UOp(kernel.INDEX, _param(1).dtype, (_param(1), k)),))
    red = UOp(kernel.REDUCE, dtypes.float32, (ld, k), "add")
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, _param(0).dtype, (_param(0), _c(0))), red))
    kdef = UOp(kernel.DEF, dtypes.void, (st,), "k")
    simple = simplify_kernel(kdef)
    assert not any(u.op in (kernel.RANGE, kernel.REDUCE) for u in simple.toposort())
    x = np.array([-0.0], np.float32)
    got = _run(simple, [x], 1)
    assert _same(_run(kdef, [x], 1), got) and not np.signbit(got[0])


def test_every_table_rule_is_a_named_pattern_pointing_at_its_row() -> None:
    src = SIMPLIFY.sources()
    for r in RULES:
        assert src[r.name] == r.where, r.name
        assert r.where.startswith("uopir/passes/kernel/simplify_rules.py:")
    for name in ("collect-terms", "div-peel-in-sum", "mod-peel-in-sum", "range-size-one", "dead-load",
                 "where-gated-load", "fold-constant"):
        assert name in src


def test_statistics_name_the_rules_that_fired() -> None:
    r0, r1 = _rng(4, 0), _rng(8, 1)
    off = r0 * _c(8) + r1
    v = UOp(kernel.LOAD, dtypes.float32, (UOp(kernel.INDEX, _param(1).dtype, (_param(1), (off // _c(8)) * _c(8) +
                                                                               off % _c(8))),))
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, _param(0).dtype, (_param(0), off)), v))
    kdef = UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st, r0, r1)),), "k")
    stats = RewriteStats()
    simple = simplify_kernel(kdef, stats=stats)
    assert stats.fired["merge-ranges"] == 1
    assert stats.fired["div-peel"] + stats.fired["div-peel-in-sum"] >= 1
    assert [u.src[0].arg for u in simple.toposort() if u.op is kernel.RANGE] == [32]


def test_shared_sums_are_not_read_exponentially() -> None:
    """A sum that doubles itself 80 times (a DAG of 80 nodes, 2**80 paths) is read as an opaque term past a budget;
    the pass finishes and the kernel computes the same values."""
    r = _rng(4, 0)
    x = r
    for _ in range(80):
        x = x + x
    terms, const = linear_terms(x)
    assert (terms, const) == ([(x, 1)], 0)
    y = r
    for _ in range(5):
        y = y + y  # a small one is read through: 32 * r
    assert linear_terms(y) == ([(r, 32)], 0)


def test_the_pass_runs_on_nested_kernels_and_keeps_tensor_level_values() -> None:
    text = Path(__file__).parent.parent.joinpath("examples", "pad-flip.uop").read_text()
    prog = parse_ir(text, "pad-flip.uop")
    sched = PassManager.parse("canonicalize,tensor-to-kernel").run(prog)
    simple = PassManager.parse("kernel-simplify").run(sched)
    verify(simple)
    before = [u for u in sched.toposort() if u.op.name == "tensor.call"]
    after = [u for u in simple.toposort() if u.op.name == "tensor.call"]
    assert len(before) == len(after) == 3
    for b, a in zip(before, after, strict=True):
        nb, na = len(b.arg[0].toposort()), len(a.arg[0].toposort())
        assert na <= nb
    flip = next(a for a in after if a.arg[1] == "E_4_6").arg[0]
    assert [u.src[0].arg for u in flip.toposort() if u.op is kernel.RANGE] == [24]  # merged: one range
    assert not any(u.op in (core.IDIV, core.MOD) for u in flip.toposort())


def test_a_kernel_def_root_and_no_kernels_at_all() -> None:
    kdef = UOp(kernel.DEF, dtypes.void, (UOp(kernel.STORE, dtypes.void, (
        UOp(kernel.INDEX, _param(0).dtype, (_param(0), _c(2) + _c(3))), UOp.const(dtypes.float32, 1.0))),), "k")
    out = PassManager.parse("kernel-simplify").run(kdef)
    assert _c(5) in out.toposort()
    plain = UOp.sink(UOp.const(dtypes.int32, 3) + UOp.const(dtypes.int32, 4))
    assert PassManager.parse("kernel-simplify").run(plain) is plain  # only kernel bodies are its business
