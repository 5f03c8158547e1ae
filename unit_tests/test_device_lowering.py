"""The device passes against the reference interpreter: random tensor programs (the generator of
test_tensor_to_kernel) evaluated as written, as the kernel schedule, and as linearized device programs after
kernel-to-device, device-decompose, device-devectorize and device-linearize (cpu, gpu with hardware ids, a target
lacking the ops decompose rewrites): results and written buffers bit for bit. Every stage verifies and round-trips
through the text. A failing case prints its program."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tensor_to_kernel import _Gen, _input_arrays

from uopir.backends.python import evaluate, run_program
from uopir.dialects import device, kernel, tensor
from uopir.dialects.semantics import np_dtype, values_equal
from uopir.frontend.tensor import Tensor
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import dtypes
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.ir.verify import verify
from uopir.passes.manager import PassManager
from uopir.passes.tensor_to_kernel import tensor_to_kernel

LACKS = "core.mulacc,core.sub,core.neg,core.recip,core.cmpeq"
PIPELINES = {
    "cpu": ["kernel-to-device{target=cpu}", "device-decompose{target=cpu}", "device-devectorize{target=cpu}",
            "device-linearize"],
    "small": ["kernel-to-device{target=cpu}", f"device-decompose{{target=cpu lacks={LACKS}}}",
              "device-devectorize{width=1}", "device-linearize"],
    "gpu": ["kernel-to-device{target=gpu}", "device-decompose{target=gpu}", "device-devectorize{target=gpu}",
            "device-linearize"],
}


def _global_ranges(root: UOp) -> UOp:
    """Output ranges of kind loop marked global (what an optimizer would do for a gpu)."""
    def to_global(k: UOp) -> UOp:
        m = {u: u.replace(arg=(u.arg[0], "global")) for u in k.toposort() if u.op is kernel.RANGE and
             u.arg[1] == "loop"}
        return k.substitute(m) if m else k
    from uopir.ir.regions import map_regions
    return map_regions(root, lambda r: r.op is kernel.DEF, to_global)


def lower(sched: UOp, which: str) -> UOp:
    """The schedule through one device pipeline (the pass manager verifies after each pass); the program verifies
    and round-trips through the text."""
    g = PassManager.parse(",".join(PIPELINES[which])).run(_global_ranges(sched) if which == "gpu" else sched)
    verify(g)
    assert parse_ir(print_ir(g)) is g
    return g


def _run(g: UOp, bufs: dict[int, np.ndarray]) -> list:
    got = {k: v.copy() for k, v in bufs.items()}
    for u in g.toposort():
        if u.op is tensor.BUFFER and u.arg[0] not in got:
            got[u.arg[0]] = np.full(u.arg[2], 7, np_dtype(u.dtype))  # garbage: every element must be written
    out = evaluate(g, got)
    return [out, [got[k] for k in sorted(bufs)]]


def check(root: UOp, seed: int = 0) -> None:
    bufs = _input_arrays(root, np.random.default_rng(seed))
    try:
        want = _run(root, bufs)
        sched = tensor_to_kernel(root)
        stages = {"kernel": sched} | {w: lower(sched, w) for w in PIPELINES}
        for name, g in stages.items():
            got = _run(g, bufs)
            if not values_equal(want, got):
                raise AssertionError(f"{name} level computes other values\n{print_ir(g)}\nwant {want}\ngot {got}")
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\nprogram:\n{print_ir(root)}") from e


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 3))
def test_device_programs_match_the_interpreter(r: random.Random, seed: int) -> None:
    check(_Gen(r).program(), seed)


# ---- fixed cases ---------------------------------------------------------------------------------------------------
def _f32(*shape: int) -> Tensor:
    return Tensor(np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32))


def test_networks_match_at_every_level() -> None:
    x, w, b = _f32(4, 8), _f32(8, 3), _f32(3)
    check(UOp.sink((x @ w + b).relu().uop))
    check(UOp.sink(x.softmax().uop))
    check(UOp.sink(x.layernorm().uop))
    img, cw, cb = _f32(2, 3, 6, 6), _f32(4, 3, 3, 3), _f32(4)
    check(UOp.sink(img.conv2d(cw, cb).relu().uop))


def test_min_reductions_keep_nan_and_signed_zeros() -> None:
    v = np.array([[0.0, -0.0, 1.0], [np.nan, 2.0, -1.0], [-0.0, 0.0, 3.0]], np.float32)
    t = Tensor(v)
    check(UOp.sink(t.min(1).uop, t.max(1).uop, t.min(0).uop, (-t).max(1).uop))
    i = Tensor(np.array([[-2**31, 5, 0], [3, -7, 2**31 - 1]], np.int32))
    check(UOp.sink(i.min(1).uop, i.max(0).uop, i.sum(1).uop))


def test_a_reduction_runs_once_per_row_not_per_element() -> None:
    prog = lower(tensor_to_kernel(UOp.sink(_f32(4, 5).softmax().uop)), "cpu")
    body = next(u.arg[0] for u in prog.toposort() if u.op is tensor.CALL)
    depth, where = 0, {}
    for u in body.src:
        if u.op is device.ENDLOOP:
            depth -= 1
        elif u.op is device.LOOP:
            where[u] = depth
            depth += 1
        elif u.op is device.ACC:
            where[u] = depth
    assert sorted(d for u, d in where.items() if u.op is device.ACC) == [1, 1]  # inside the row loop only
    assert sorted(where[u] for u in where if u.op is device.LOOP) == [0, 1, 1, 1]  # row; max, sum, output loops


def test_program_errors_are_located() -> None:
    text = ("%0 = kernel.param {idx = 0} : ptr<f32, global>\n"
            "%1 = core.const 4 : index\n"
            "%2 = device.loop %1 {id = 0} : index\n"
            "%3 = kernel.index %0, %2 : ptr<f32, global>\n"
            "%4 = core.const 1.0 : f32\n"
            "%5 = kernel.store %3, %4\n"
            "device.program %0, %1, %2, %3, %4, %5 {name = \"k\"}\n")
    with pytest.raises(IRError, match=r"p\.uop:3:\d+: error: device\.loop is never closed"):
        run_program(parse_ir(text, "p.uop"), [np.zeros(4, np.float32)])
    short = text.replace("%1 = core.const 4", "%1 = core.const 8").replace("%5 {name", "%5, %6 {name").replace(
        "device.program", "%6 = device.endloop %2\ndevice.program")
    with pytest.raises(IRError, match=r"p\.uop:6:\d+: error: out-of-bounds store \(buffer of 4 elements\)"):
        run_program(parse_ir(short, "p.uop"), [np.zeros(4, np.float32)])


def test_vector_programs_split_to_any_width() -> None:
    p = parse_ir("""
%0 = kernel.param {idx = 0} : ptr<f32, global>
%1 = kernel.param {idx = 1} : ptr<f32, global>
%2 = core.const 4 : index
%3 = kernel.range %2 {axis = 0} : index
%4 = core.const 8 : index
%5 = core.mul %3, %4 : index
%6 = kernel.index %1, %5 : ptr<f32, global>
%7 = kernel.load %6 : vector<8xf32>
%8 = core.const [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0] : vector<8xf32>
%9 = core.mulacc %7, %8, %7 : vector<8xf32>
%r = kernel.range %2 {axis = 1, kind = reduce} : index
%ro = core.mul %r, %4 : index
%ri = kernel.index %1, %ro : ptr<f32, global>
%rl = kernel.load %ri : vector<8xf32>
%red = kernel.reduce %rl, %r {op = min} : vector<8xf32>
%s = core.add %9, %red : vector<8xf32>
%10 = kernel.index %0, %5 : ptr<f32, global>
%11 = kernel.store %10, %s
%12 = kernel.end %11, %3
kernel.def %12 {name = "v"}
""")
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    want = (x * np.float32(2) + x + x.min(0)).reshape(-1)
    for w in (0, 8, 4, 3, 1):
        prog = PassManager.parse(f"kernel-to-device,device-decompose{{lacks=core.mulacc}},"
                                 f"device-devectorize{{width={w}}},device-linearize").run(p)
        widest = max(u.dtype.count for u in prog.toposort())
        assert widest == ({0: 4}.get(w, w)), w  # the cpu target's 16-byte vectors hold 4 floats
        out = np.zeros(32, np.float32)
        run_program(prog, [out, x.reshape(-1).copy()])
        assert np.array_equal(out, want), w


def test_in_place_programs_run_loops_in_order() -> None:
    """A loop that reads what an earlier iteration wrote (a prefix sum written in place) runs one iteration at a
    time: the sequential meaning of a program, as C runs it."""
    prog = parse_ir("""
%0 = kernel.param {idx = 0} : ptr<i32, global>
%1 = core.const 1 : index
%2 = core.const 5 : index
%3 = device.loop %2 {id = 0} : index
%4 = core.add %3, %1 : index
%5 = kernel.index %0, %4 : ptr<i32, global>
%6 = kernel.index %0, %3 : ptr<i32, global>
%7 = kernel.load %6 : i32
%8 = kernel.load %5 : i32
%9 = core.add %7, %8 : i32
%10 = kernel.store %5, %9
%11 = device.endloop %3
device.program %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11 {name = "scan"}
""")
    buf = np.arange(1, 7, dtype=np.int32)
    run_program(prog, [buf])
    assert buf.tolist() == [1, 3, 6, 10, 15, 21]
    assert dtypes.int32 is prog.src[0].dtype.base
