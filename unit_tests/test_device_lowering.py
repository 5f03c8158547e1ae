"""The device passes against the reference interpreter: random tensor programs (the generator of
test_tensor_to_kernel) evaluated as the kernel schedule and as linearized device programs after kernel-to-device,
device-decompose, device-devectorize and device-linearize (cpu, gpu with hardware ids, a target lacking the ops
decompose rewrites): results and written buffers bit for bit. The programs verify and round-trip through the text.
A failing case prints its program.

The chain tensor level == kernel level == device level: test_tensor_to_kernel checks the first link on the same
generator (random programs), this file the second, so a defect of tensor-to-kernel fails there, not here. The fixed
cases below compare all three levels.

The `opt-*` pipelines run kernel-optimize and kernel-expand first (the full `default` lowering): the vector forms
they make (lane reductions, vector accumulators, grouped stores, unaligned and gated vector loads, a cpu `global`
range as a hardware id) through every device pass, on the c target (AVX-512 widths when the host has them), a tiny
vector target that devectorize splits to 2 lanes, and with every output range marked global."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples
from test_tensor_to_kernel import _Gen, _input_arrays

import uopir.backends  # noqa: F401  (registers the c target)
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
from uopir.passes.target import CPU, register_target
from uopir.passes.tensor_to_kernel import tensor_to_kernel

LANES2 = CPU.derive(name="test-lanes2", max_vector_bytes=8, upcast_sizes=(2,), unroll_sizes=(2,), max_upcast=8,
                    threads=2)
register_target(LANES2, replace=True)

LACKS = "core.mulacc,core.sub,core.neg,core.recip,core.cmpeq"
PIPELINES = {
    "cpu": ["kernel-to-device{target=cpu}", "device-decompose{target=cpu}", "device-devectorize{target=cpu}",
            "device-linearize"],
    "small": ["kernel-to-device{target=cpu}", f"device-decompose{{target=cpu lacks={LACKS}}}",
              "device-devectorize{width=1}", "device-linearize"],
    "gpu": ["kernel-to-device{target=gpu}", "device-decompose{target=gpu}", "device-devectorize{target=gpu}",
            "device-linearize"],
}


def _opt(t: str, devectorize: str | None = None, mark_global: bool = False) -> list[str]:
    """The kernel-level part of `default{target=t}` from kernel-optimize on (MARK_GLOBAL: every output range made
    global after the expansion)."""
    return [f"kernel-optimize{{target={t}}}", "kernel-expand", *([MARK_GLOBAL] if mark_global else []),
            f"kernel-to-device{{target={t}}}", f"device-decompose{{target={t}}}",
            devectorize or f"device-devectorize{{target={t}}}", "device-linearize"]


MARK_GLOBAL = "<mark output ranges global>"
PIPELINES |= {
    "opt-c": _opt("c"),
    "opt-lanes2": _opt("test-lanes2"),
    "opt-global": _opt("c", "device-devectorize{width=4}", mark_global=True),
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
    g = _global_ranges(sched) if which == "gpu" else sched
    passes = PIPELINES[which]
    if MARK_GLOBAL in passes:
        at = passes.index(MARK_GLOBAL)
        g = _global_ranges(PassManager.parse(",".join(passes[:at])).run(g))
        passes = passes[at + 1:]
    g = PassManager.parse(",".join(passes)).run(g)
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


def check(root: UOp, seed: int = 0, bufs: dict[int, np.ndarray] | None = None, tensor_level: bool = True,
          which: list[str] | None = None) -> None:
    """Kernel level == each device pipeline (`which`, default all) (and == the tensor level, with tensor_level) on
    random inputs (or `bufs`)."""
    if bufs is None:
        bufs = _input_arrays(root, np.random.default_rng(seed))
    try:
        sched = tensor_to_kernel(root)
        stages = {"tensor": root} if tensor_level else {}
        stages |= {"kernel": sched} | {w: lower(sched, w) for w in which or PIPELINES}
        want = None
        for name, g in stages.items():
            got = _run(g, bufs)
            if want is None:
                want, first = got, name
            elif not values_equal(want, got) and not (name.startswith("opt-")
                                                       and _reordered_sum_close(root, want, got, bufs)):
                raise AssertionError(f"{name} level computes other values than the {first} level\n{print_ir(g)}\n"
                                     f"want {want}\ngot {got}")
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\nprogram:\n{print_ir(root)}") from e


_FLOATS = {2: dtypes.float16, 4: dtypes.float32, 8: dtypes.float64}


def _flat(v: object) -> list[np.ndarray]:
    return [a for x in v for a in _flat(x)] if isinstance(v, list) else [np.asarray(v)]


def _reordered_sum_close(root: UOp, want: list, got: list, bufs: dict[int, np.ndarray]) -> bool:
    """kernel-optimize may sum a float reduction in partial accumulators where the target allows reordering (c does):
    such a program's values match the kernel level (index order) within uop-run --check's tolerance for float sums
    (each output measured against its reorder magnitude: a long sum that cancels errs by its terms, not its result),
    the rest bit for bit."""
    from uopir.backends.python.magnitude import reorder_magnitudes
    from uopir.backends.tolerance import op_class
    from uopir.tools.uop_run import compare
    if op_class(root) == "exact":
        return False
    w, g = _flat(want), _flat(got)
    m = reorder_magnitudes(root, bufs)
    mags = m or []
    return len(w) == len(g) and all(
        compare(b, a, _FLOATS.get(a.dtype.itemsize, dtypes.float32), False, "accumulate",
                mags[i] if i < len(mags) and mags[i].shape == a.shape else None)[0]
        if a.dtype.kind == "f" and a.dtype == b.dtype and a.shape == b.shape
        else values_equal(a, b) for i, (a, b) in enumerate(zip(w, g, strict=True)))


@settings(max_examples=examples(100), deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 3))
def test_device_programs_match_the_interpreter(r: random.Random, seed: int) -> None:
    check(_Gen(r).program(), seed, tensor_level=False)


OPTIMIZED = [w for w in PIPELINES if w.startswith("opt-")]


class _WideGen(_Gen):
    """Random programs on shapes large enough that upcasts leave loops, reductions keep a loop after their unroll,
    pads gate vector loads and a kernel may be split across threads."""

    def shape(self) -> tuple[int, ...]:
        return tuple(self.r.choice((1, 3, 8, 16, 17, 32, 48)) for _ in range(self.r.randint(1, 3)))


@settings(max_examples=examples(40), deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 3))
def test_optimized_programs_on_larger_shapes_match_the_interpreter(r: random.Random, seed: int) -> None:
    check(_WideGen(r).program(), seed, tensor_level=False, which=OPTIMIZED)


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


def _program_ops(root: UOp, which: str) -> set[str]:
    """The ops of the device programs `which` lowers root to (`vector-` + name for an op with lanes)."""
    from uopir.ir.regions import regions_of
    out: set[str] = set()
    for call in lower(tensor_to_kernel(root), which).toposort():
        for r in regions_of(call):
            out |= {("vector-" if u.dtype.count > 1 else "") + u.op.name for u in r.toposort()}
    return out


def test_optimized_kernels_match_at_every_level() -> None:
    """matmul, conv, reductions over each axis, softmax and gated pads at sizes where the heuristic tiles, unrolls,
    vectorizes and threads: tensor level == kernel level == every device pipeline (optimized or not)."""
    a, b = _f32(64, 96), _f32(96, 96)  # 589,824 iterations: above the host's parallel_min_work (1 << 19)
    mm = UOp.sink((a @ b).uop)
    assert {"device.special", "vector-device.acc", "vector-kernel.load", "vector-core.mul"} <= _program_ops(mm, "opt-c")
    check(mm)
    img, cw, cb = _f32(2, 8, 18, 18), _f32(16, 8, 3, 3), _f32(16)
    check(UOp.sink(img.conv2d(cw, cb, padding=1).relu().uop))
    x = _f32(24, 40, 36)
    check(UOp.sink(x.sum(0).uop, x.sum(1).uop, x.sum(2).uop, x.max(0).uop, x.max(2).uop, x.sum((0, 2)).uop))
    check(UOp.sink(_f32(32, 100).softmax().uop))
    p = _f32(30, 45)
    check(UOp.sink(p.pad(((3, 5), (1, 17))).uop, (p.pad(((0, 2), (7, 0))) * 2.0).sum(0).uop))


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


def _kernel_vs_program(text: str, pipeline: str, buffers: list[np.ndarray], var_vals: dict[str, int] | None = None
                       ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    from uopir.backends.python import run_kernel
    kdef = parse_ir(text)
    want = [b.copy() for b in buffers]
    run_kernel(kdef, want, var_vals)
    prog = PassManager.parse(pipeline).run(kdef)
    assert prog.op is device.PROGRAM
    got = [b.copy() for b in buffers]
    run_program(prog, got, var_vals)
    return want, got


def test_gpu_groups_and_threads_run_as_the_kernel() -> None:
    """Workgroups × threads (group_id, local_id) with a per-thread reduction: the same values as the kernel."""
    text = """
%0 = kernel.param {idx = 0} : ptr<f32, global>
%1 = kernel.param {idx = 1} : ptr<f32, global>
%2 = core.const 3 : index
%3 = kernel.range %2 {axis = 0, kind = global} : index
%4 = core.const 8 : index
%5 = kernel.range %4 {axis = 1, kind = local} : index
%6 = core.mul %3, %4 : index
%7 = core.add %6, %5 : index
%8 = kernel.index %0, %7 : ptr<f32, global>
%9 = core.const 5 : index
%10 = kernel.range %9 {axis = 2, kind = reduce} : index
%11 = core.mul %7, %9 : index
%12 = core.add %11, %10 : index
%13 = kernel.index %1, %12 : ptr<f32, global>
%14 = kernel.load %13 : f32
%15 = kernel.reduce %14, %10 {op = max} : f32
%16 = kernel.store %8, %15
%17 = kernel.end %16, %3, %5
kernel.def %17 {name = "g"}
"""
    x = np.random.default_rng(1).standard_normal(120).astype(np.float32)
    want, got = _kernel_vs_program(text, "kernel-to-device{target=gpu},device-linearize",
                                   [np.zeros(24, np.float32), x])
    assert np.array_equal(want[0], x.reshape(24, 5).max(1)) and np.array_equal(got[0], want[0])


def test_symbolic_loop_bounds_take_their_variable() -> None:
    text = """
%0 = kernel.param {idx = 0} : ptr<i32, global>
%1 = kernel.var {name = "n", min = 1, max = 8} : index
%2 = kernel.range %1 {axis = 0} : index
%3 = kernel.index %0, %2 : ptr<i32, global>
%4 = core.cast %2 : i32
%5 = kernel.store %3, %4
%6 = kernel.end %5, %2
kernel.def %6 {name = "iota"}
"""
    want, got = _kernel_vs_program(text, "kernel-to-device,device-linearize", [np.full(8, -1, np.int32)], {"n": 5})
    assert want[0].tolist() == got[0].tolist() == [0, 1, 2, 3, 4, -1, -1, -1]


def test_bf16_buffers_are_rounded_when_loaded() -> None:
    """Regression (found by the fuzzer): a bf16 buffer's float32 carrier may hold values between bf16 numbers; the
    tensor level rounds them when it reads the buffer, and so must a kernel's (and a program's) load."""
    b = UOp(tensor.BUFFER, dtypes.bfloat16, (), (0, "python", (2, 3)))
    carrier = np.array([[2.999, -70.6, 1.0], [0.1, 255.4, -3.0001]], np.float32)  # 3.0, -71, 1, ~0.1, 256, -3
    check(UOp.sink(b.alu("core.trunc"), UOp(tensor.SHRINK, b.dtype, (b,), ((0, 2), (1, 3)))), bufs={0: carrier})


def test_a_reduction_result_and_its_update_read_alike_stay_two_ops() -> None:
    """Regression: `-min(x)` reads the min's result as `neg` after the loop while the min's update reads `neg acc`
    inside it; they must stay two ops of the program (the result is read through the accstore)."""
    x = _f32(3, 5)
    check(UOp.sink((-x.min(1)).uop, x.min(1).uop))
    prog = lower(tensor_to_kernel(UOp.sink((-x.min(1)).uop)), "cpu")
    body = next(u.arg[0] for u in prog.toposort() if u.op is tensor.CALL)
    assert len(set(body.src)) == len(body.src)


def test_an_empty_reduction_reads_its_identity() -> None:
    """A reduction over a loop of no iterations: the program reads the accumulator's init through its update."""
    prog = parse_ir("""
%0 = kernel.param {idx = 0} : ptr<f32, global>
%1 = core.const 0 : index
%2 = core.const -inf : f32
%3 = device.acc %2 {id = 0} : f32
%4 = device.loop %1 {id = 0} : index
%5 = core.const 1.0 : f32
%6 = core.max %3, %5 : f32
%7 = device.accstore %3, %6 : f32
%8 = device.endloop %4
%9 = kernel.store %0, %7
device.program %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 {name = "empty"}
""")
    out = np.zeros(1, np.float32)
    run_program(prog, [out])
    assert out[0] == -np.inf


def test_a_gep_of_a_scalar_broadcasts_in_each_loop_iteration() -> None:
    """`core.gep %s {idx = [0, 0, 0, 0]}` of a scalar is a broadcast (a conv's upcast taps lower to one, the last
    tap column's load split off a vector); the scalar's trailing array axis is the vectorized loop's, not a lane,
    so each iteration broadcasts its own value."""
    prog = parse_ir("""
%0 = kernel.param {idx = 0} : ptr<f32, global>
%1 = kernel.param {idx = 1} : ptr<f32, global>
%2 = core.const 3 : index
%3 = core.const 4 : index
%4 = core.const [1.0, 2.0, 3.0, 4.0] : vector<4xf32>
%5 = device.loop %2 {id = 0} : index
%6 = kernel.index %1, %5 : ptr<f32, global>
%7 = kernel.load %6 : f32
%8 = core.gep %7 {idx = [0, 0, 0, 0]} : vector<4xf32>
%9 = core.mul %8, %4 : vector<4xf32>
%10 = core.mul %5, %3 : index
%11 = kernel.index %0, %10 : ptr<f32, global>
%12 = kernel.store %11, %9
%13 = device.endloop %5
device.program %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13 {name = "bcast"}
""")
    x = np.array([2.0, -3.0, 5.0], np.float32)
    out = np.zeros(12, np.float32)
    run_program(prog, [out, x])
    assert np.array_equal(out, (x[:, None] * np.arange(1, 5, dtype=np.float32)).reshape(-1))
