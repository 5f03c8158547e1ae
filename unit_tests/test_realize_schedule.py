"""Realize runs the backend's pipeline and executes the schedule kernel by kernel (uopir.backends.realize): kernels
launched, the results that are not a kernel's output (inputs, views, consts, assigns), empty ranges, the schedule
cache (hits on a program rebuilt on new data, misses on different programs, off with UOPIR_SCHEDULE_CACHE=0),
UOPIR_DEBUG output, and a 20000-deep chain of elementwise ops."""
from __future__ import annotations

import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples
from test_tensor_to_kernel import _Gen, _input_arrays

from uopir.backends import get_backend
from uopir.backends import realize as R
from uopir.backends.buffers import buffer_of
from uopir.backends.python.backend import PIPELINE, PythonBackend
from uopir.dialects import core, tensor
from uopir.dialects.semantics import alu, values_equal
from uopir.frontend import device as D
from uopir.frontend.tensor import Tensor
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import dtypes
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp

f32, i32 = dtypes.float32, dtypes.int32


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return _rng(seed).standard_normal(shape).astype(np.float32)


class _Count:
    """The realize counters' growth over a block."""

    def __enter__(self) -> _Count:
        self.start = R.RealizeStats(**vars(R.STATS))
        return self

    def __exit__(self, *exc: object) -> None:
        self.lowerings = R.STATS.lowerings - self.start.lowerings
        self.hits = R.STATS.cache_hits - self.start.cache_hits
        self.kernels = R.STATS.kernels - self.start.kernels
        self.interpreted = R.STATS.interpreted - self.start.interpreted


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(R.SCHEDULE_CACHE_ENV, raising=False)
    monkeypatch.delenv(R.DEBUG_ENV, raising=False)
    R.clear_schedule_cache()


# ---- realize goes through kernels -------------------------------------------------------------------------------
def test_the_python_pipeline_lowers_to_simplified_kernels() -> None:
    assert PIPELINE.split(",")[-2:] == ["tensor-to-kernel", "kernel-simplify"]
    assert get_backend("python").pipeline == PIPELINE


def test_realize_launches_the_kernels_of_the_schedule() -> None:
    x, m = _f32(4, 8), _f32(5, 6, seed=1)
    cases = [
        (lambda: Tensor(x).softmax(), np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True))
         .sum(1, keepdims=True)),
        (lambda: Tensor(m).sum(0, keepdim=True) + Tensor(m).sum(1, keepdim=True),
         m.sum(0, keepdims=True) + m.sum(1, keepdims=True)),
        (lambda: (Tensor(x) * 2 + 1).relu(), np.maximum(x * 2 + 1, 0)),
    ]
    for build, want in cases:
        n_kernels = len(build().schedule())
        with _Count() as c:
            got = build().numpy()
        assert c.kernels == n_kernels and c.lowerings == 1 and c.interpreted == 0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert [len(build().schedule()) for build, _ in cases] == [1, 2, 1]


def test_realized_inputs_are_not_kernels_and_results_never_alias_them() -> None:
    b = get_backend("python")
    t = Tensor(np.array([1, 2, 3], np.int32))
    with _Count() as c:
        out = b.realize(t.uop)
    assert c.kernels == 0 and out.numpy().tolist() == [1, 2, 3]
    assert out is not buffer_of(t.uop) and not np.shares_memory(out.handle, buffer_of(t.uop).handle)


def test_results_that_are_views_or_consts() -> None:
    b = get_backend("python")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with _Count() as c:
        view = Tensor(a).permute(1, 0).reshape(6).numpy()  # a view of a realized buffer: one copy kernel
    assert c.kernels == 1 and view.tolist() == a.T.reshape(6).tolist()
    with _Count() as c:
        shaped = b.realize(core.const(i32, 7, (2, 2))).numpy()
        scalar = b.realize(core.const(f32, -0.0)).numpy()  # shapeless: no kernel, computed directly
    assert c.kernels == 1 and shaped.tolist() == [[7, 7], [7, 7]]
    assert scalar.shape == () and scalar.item() == 0.0 and np.signbit(scalar)


def test_assigns_write_their_target_and_hand_back_a_copy() -> None:
    b = get_backend("python")
    t = Tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32), device="python")
    buf = t.uop
    flip = UOp(tensor.FLIP, f32, (buf,), (0,))
    a = UOp(tensor.ASSIGN, f32, (buf, flip * core.const(f32, 10.0)))  # reads other elements: through a temporary
    out = b.realize(a)
    assert out.numpy().tolist() == [40.0, 30.0, 20.0, 10.0]
    assert buffer_of(buf).numpy().tolist() == [40.0, 30.0, 20.0, 10.0]  # the input buffer was written
    again = b.realize(UOp(tensor.ASSIGN, f32, (buf, buf + core.const(f32, 1.0))))
    assert again.numpy().tolist() == [41.0, 31.0, 21.0, 11.0] and out.numpy().tolist() == [40.0, 30.0, 20.0, 10.0]


def test_empty_ranges_are_not_out_of_bounds() -> None:
    # kernel loads at a constant offset of an empty buffer, under an empty output range or an empty reduction
    e = Tensor(np.zeros((0,), np.float32))
    assert (e.reshape(4, 0) + 1).numpy().shape == (4, 0)
    assert e.reshape(1, 0).expand(3, 0).sum(1).numpy().tolist() == [0.0, 0.0, 0.0]
    assert (e.reshape(1, 0).expand(3, 0) + 1).sum(1).numpy().tolist() == [0.0, 0.0, 0.0]
    assert Tensor(np.zeros((2, 0), np.int32)).sum(1).numpy().tolist() == [0, 0]


def test_transcendentals_do_not_depend_on_the_layout() -> None:
    # numpy's exp2/log2 give other results (an ulp) on strided float32 input than on contiguous: the semantics take
    # one of them, so a kernel that reads a value through a view computes what the whole-graph interpreter computes
    x = np.abs(_f32(4096, seed=3)) + np.float32(0.5)
    for op in ("core.exp2", "core.log2", "core.sin"):
        assert np.array_equal(alu(op, f32, [x[::-1]])[::-1], alu(op, f32, [x]))
        assert np.array_equal(alu(op, f32, [np.broadcast_to(x[:1], (8,))]), np.repeat(alu(op, f32, [x[:1]]), 8))


# ---- the schedule cache -----------------------------------------------------------------------------------------
def _mlp(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> Tensor:
    return ((Tensor(x) @ Tensor(w1)).relu() @ Tensor(w2)).softmax()


def _np_mlp(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ w1, 0) @ w2
    e = np.exp(h - h.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_a_program_rebuilt_on_new_data_hits_the_cache() -> None:
    first = [_f32(3, 8, seed=1), _f32(8, 16, seed=2), _f32(16, 4, seed=3)]
    with _Count() as c:
        _mlp(*first).numpy()
    assert (c.lowerings, c.hits) == (1, 0)
    for step in range(3):  # a training loop / model call: new buffers, same program
        data = [_f32(3, 8, seed=10 + step), _f32(8, 16, seed=20 + step), _f32(16, 4, seed=30 + step)]
        with _Count() as c:
            got = _mlp(*data).numpy()
        assert (c.lowerings, c.hits) == (0, 1)
        np.testing.assert_allclose(got, _np_mlp(*data), rtol=1e-5, atol=1e-6)
        assert not np.allclose(got, _np_mlp(*first))


def test_different_programs_never_share_an_entry() -> None:
    a, b = np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)
    programs = [
        (lambda x, y: x + y, [11.0, 22.0]),
        (lambda x, y: x + x, [2.0, 4.0]),  # one input read twice is not two inputs
        (lambda x, y: y + y, [20.0, 40.0]),
        (lambda x, y: x - y, [-9.0, -18.0]),
        (lambda x, y: y - x, [9.0, 18.0]),  # x - y on renamed inputs: a hit that binds them the other way
        (lambda x, y: x + 1, [2.0, 3.0]),
        (lambda x, y: x + 2, [3.0, 4.0]),  # constants are part of the program
        (lambda x, y: x.cast("float16") + 1, [2.0, 3.0]),
        (lambda x, y: x.reshape(2, 1) + y, [[11.0, 21.0], [12.0, 22.0]]),
    ]
    seen = 0
    for build, want in programs:
        with _Count() as c:
            got = build(Tensor(a), Tensor(b)).numpy()
        assert got.tolist() == want
        seen += c.lowerings
    assert seen == len(programs) - 2  # y + y is x + x and y - x is x - y, with the inputs renamed
    for dtype, shape in ((np.int32, (2,)), (np.float32, (3,))):  # other dtypes and shapes: other programs
        with _Count() as c:
            got = (Tensor(np.ones(shape, dtype)) + Tensor(np.ones(shape, dtype))).numpy()
        assert c.lowerings == 1 and got.tolist() == [2] * shape[0] and got.dtype == dtype


def test_keys_abstract_buffers_and_nothing_else() -> None:
    a, b = (Tensor(_f32(3, seed=s)) for s in (6, 7))
    k1, in1, _, _ = R.cache_key((a * b + a).uop)
    k2, in2, _, _ = R.cache_key((Tensor(_f32(3, seed=8)) * Tensor(_f32(3, seed=9)) + Tensor(_f32(3, seed=10))).uop)
    k3, in3, _, _ = R.cache_key((b * a + b).uop)
    assert k1 is k3 and [u.arg[0] for u in in3] == [b.uop.arg[0], a.uop.arg[0]]  # renamed inputs, one program
    assert k2 is not k1 and len(in1) == 2 and len(in2) == 3
    assert not any(u.op is tensor.BUFFER and u.tag != R.INPUT_TAG for u in k1.toposort())


def test_realize_from_several_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    def work(seed: int) -> bool:
        ok = True
        for k in range(4):
            data = [_f32(3, 8, seed=seed + k), _f32(8, 16, seed=seed + 50), _f32(16, 4, seed=seed + 99)]
            ok &= np.allclose(_mlp(*data).numpy(), _np_mlp(*data), rtol=1e-5, atol=1e-6)
        return ok

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(work, range(0, 400, 100)))


def test_the_cache_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(R.SCHEDULE_CACHE_ENV, "0")
    with _Count() as c:
        for k in range(3):
            assert (Tensor([1.0, 2.0]) * k).numpy().tolist() == [k * 1.0, k * 2.0]
            assert (Tensor([1.0, 2.0]) * 5).numpy().tolist() == [5.0, 10.0]
    assert (c.lowerings, c.hits) == (6, 0)
    assert not R.schedule_cache_enabled()


@pytest.mark.skipif("c" not in __import__("uopir.backends", fromlist=["available"]).available(),
                    reason="needs the C backend (kernel-optimize runs in its pipeline)")
def test_noopt_is_part_of_the_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """UOPIR_NOOPT changes what kernel-optimize does, so a schedule lowered with it is not reused without it."""
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 100
    want = a @ a

    def run() -> str:
        t = Tensor(a, device="c") @ Tensor(a, device="c")
        (prog,) = t.programs()
        assert np.allclose(t.numpy(), want, rtol=1e-5)
        return prog.source

    monkeypatch.delenv("UOPIR_NOOPT", raising=False)
    tiled = run()
    monkeypatch.setenv("UOPIR_NOOPT", "1")
    plain = run()
    assert tiled != plain  # the optimized kernel (vectors, tiles) is not the plain loop nest
    monkeypatch.delenv("UOPIR_NOOPT")
    assert run() == tiled


def test_a_cached_plan_holds_no_data_of_the_run_that_built_it() -> None:
    import gc
    import weakref

    t = Tensor(_f32(64, seed=4))
    buf = buffer_of(t.uop)
    ref = weakref.ref(buf)
    (t * 2).numpy()
    del t, buf
    gc.collect()
    assert ref() is None  # the cache entry keeps placeholders, not the input's buffer


# ---- debug output -----------------------------------------------------------------------------------------------
def test_debug_2_prints_a_line_per_kernel(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    m = Tensor(_f32(5, 6, seed=5), device="python")
    names = [k.name for k in (m.sum(0, keepdim=True) + m.sum(1, keepdim=True)).schedule()]
    monkeypatch.setenv(R.DEBUG_ENV, "2")
    capsys.readouterr()
    (m.sum(0, keepdim=True) + m.sum(1, keepdim=True)).numpy()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 == len(names)
    for line, name in zip(lines, names, strict=True):
        assert line.startswith("*** python") and f" {name} " in line and line.endswith(" B)")
        assert float(line.split("tm")[1].split("us")[0]) >= 0 and "GFLOP/s" in line and "GB/s" in line
    assert "kernel.def" not in "\n".join(lines)


def test_debug_5_prints_each_kernel_before_lowering(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(R.DEBUG_ENV, "5")
    capsys.readouterr()
    (Tensor([1.0, 2.0, 3.0], device="python") * 1234.5).numpy()
    out = capsys.readouterr().err
    assert out.startswith("// kernel IR of kernel ")
    assert "core.const 1234.5 : f32" in out and "kernel.store" in out and 'kernel.def %' in out
    assert out.rstrip().splitlines()[-1].startswith("*** python")


def test_no_debug_output_by_default(capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    (Tensor([1.0]) + 1).numpy()
    assert capsys.readouterr() == ("", "")


# ---- depth --------------------------------------------------------------------------------------------------------
def test_a_6000_deep_elementwise_chain_lowers_and_realizes() -> None:
    # 6x Python's recursion limit (no pass may recurse on depth) and 3x the kernel size budget (20000 took 6-22 s a
    # leg for the same checks)
    from uopir.passes.tensor_to_kernel.schedule import MAX_KERNEL_OPS

    n = 6000
    assert sys.getrecursionlimit() * 6 <= n and n >= 3 * MAX_KERNEL_OPS
    x = Tensor(np.array([1.0, -2.5], np.float32))
    for _ in range(n):
        x = x + 1
    items = x.schedule()
    # the size budget cuts the chain into kernels of about MAX_KERNEL_OPS / 2 adds, each reading the previous one
    assert n // MAX_KERNEL_OPS <= len(items) <= 2 * n // MAX_KERNEL_OPS + 1
    assert all(len(k.ast.toposort()) < 4 * MAX_KERNEL_OPS for k in items)
    with _Count() as c:
        got = x.numpy()
    assert c.kernels == len(items) and c.interpreted == 0
    assert got.tolist() == [n + 1.0, n - 2.5]


def test_the_size_budget_cuts_a_kernel_only_where_no_intermediate_is_larger_than_its_output() -> None:
    a = _f32(6, 5, seed=21)
    row = Tensor(a[:1])
    y, ref = Tensor(a), a.copy()
    for i in range(30):  # (1, 5) pieces expanded into a (6, 5) chain: a cut may take only (6, 5) nodes
        y = y * 1.01 + row * 0.5 if i % 2 else y - 0.25
        ref = ref * np.float32(1.01) + a[:1] * np.float32(0.5) if i % 2 else ref - np.float32(0.25)
    key = R.cache_key(y.uop)[0]
    one = get_backend("python").lower(key, "tensor-canonicalize,tensor-to-kernel")
    assert sum(u.op is tensor.CALL for u in one.toposort()) == 1
    small = PythonBackend()
    small.pipeline = "tensor-canonicalize,tensor-to-kernel{max-ops=40}"
    calls = [u for u in small.lower(key).toposort() if u.op is tensor.CALL]
    assert len(calls) > 2
    assert all(c.src[0].arg[2] == (6, 5) for c in calls)  # each kernel writes a buffer of the output's size
    np.testing.assert_allclose(R.realize(small, y.uop).numpy(), ref, rtol=1e-5)  # the cut schedule's value
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5)


def test_stacked_softmax_layers_lower_in_polynomial_time() -> None:
    # regression: each layer's reductions read the previous layer at three indices; fused, the first build of the
    # plan rendered 3^layers copies before the review could materialize them (10 layers took over a minute)
    a = _f32(8, 16, seed=11)
    x, ref = Tensor(a), a
    for _ in range(12):
        x = (x.softmax() * 3).T.reshape(8, 16)
        e = np.exp(ref - ref.max(1, keepdims=True))
        ref = (e / e.sum(1, keepdims=True) * 3).T.reshape(8, 16)
    n_kernels = len(x.schedule())
    with _Count() as c:
        got = x.numpy()
    # detach nodes (softmax detaches its max) do not count in the size budget; 25 since a reduction read at an index its
    # loops repeat (each layer reads the previous one transposed) is materialized: 99,840 flops instead of 114,560
    assert c.kernels == 25 == n_kernels
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)


# ---- symbolic variables ------------------------------------------------------------------------------------------
def _bound_program(value: int) -> UOp:
    v = UOp(tensor.VAR, dtypes.index, (), ("n", 1, 8))
    n = UOp(tensor.BIND, dtypes.index, (v, core.const(dtypes.index, value)))
    x = Tensor(np.array([1.0, 2.0], np.float32))
    return x.uop + n.cast(f32)


def test_graphs_with_bound_variables_run_as_kernels_and_share_one_schedule() -> None:
    with _Count() as c:
        out = get_backend("python").realize(_bound_program(3))
    assert c.interpreted == 0 and c.kernels == 1 and c.lowerings == 1 and out.numpy().tolist() == [4.0, 5.0]
    with _Count() as c:  # another bound value: the key holds the variable, so the schedule is reused
        out = get_backend("python").realize(_bound_program(6))
    assert c.lowerings == 0 and c.hits == 1 and c.kernels == 1 and out.numpy().tolist() == [7.0, 8.0]


def test_a_free_variable_cannot_be_realized() -> None:
    v = UOp(tensor.VAR, dtypes.index, (), ("n", 1, 8))
    g = Tensor(np.array([1.0, 2.0], np.float32)).uop + v.cast(f32)
    with pytest.raises(IRError, match="every variable bound"):
        get_backend("python").realize(g)


# ---- realize (cached or not) against the whole-graph interpreter ------------------------------------------------
def _on_new_buffers(root: UOp, seed: int) -> UOp:
    """root with every tensor.buffer replaced by a real buffer holding random data."""
    arrays = _input_arrays(root, np.random.default_rng(seed))
    return root.substitute({u: D.new_buffer(arrays[u.arg[0]], u.dtype, "python")
                            for u in root.toposort() if u.op is tensor.BUFFER})


def _run_both(g: UOp) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(result and input buffers after) of realize and of the whole-graph interpretation, from the same inputs."""
    b = get_backend("python")
    inputs = [buffer_of(u) for u in g.toposort() if u.op is tensor.BUFFER]
    entry = [x.numpy() for x in inputs]
    want = b.interpret(g).numpy()
    want_after = [x.numpy() for x in inputs]
    for x, a in zip(inputs, entry, strict=True):
        x.allocator.copyin(x, a)
    got = b.realize(g).numpy()
    return [want, *want_after], [got, *(x.numpy() for x in inputs)]


@settings(max_examples=examples(60), deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 3))
def test_realize_matches_the_interpreter_on_random_programs(r: random.Random, seed: int) -> None:
    root = _Gen(r).program()
    for k in range(2):  # the second run is a cache hit on new buffers
        g = _on_new_buffers(root, seed + 10 * k)
        with _Count() as c:
            want, got = _run_both(g)
        assert c.hits == k or k == 0
        assert values_equal(want, got), f"realize differs from the interpreter\nprogram:\n{print_ir(root)}"
