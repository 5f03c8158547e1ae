"""The native launch graph (uopir.backends.cpu.graph): a TinyJit replay on the host-cpu backends runs its kernels in
one native call and gives what the Python replay and eager realize give: on c and llvm, with inputs rebound between
replays, parallel kernels, symbolic variables, in-place updates whose buffers alias, kernel lists that mix backends
or hold a non-host one (the Python replay then), from two threads at once; eager parallel launches on the pool."""
from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

from uopir import Tensor, TinyJit, Variable
from uopir.backends import available, get_backend
from uopir.backends import realize as R
from uopir.backends.cpu import graph as G
from uopir.backends.cpu.runtime import HostKernel
from uopir.frontend.jit import _NativeReplay

HOST = [d for d in ("c", "llvm") if d in available()]
pytestmark = pytest.mark.skipif(not HOST or G.native() is None, reason="no host-cpu backend or no C compiler")


def _native(jit: TinyJit) -> bool:
    return isinstance(jit._graph, _NativeReplay)


def _chain(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
    h = (x * 2.0 + w[0]).realize()
    h = (h.exp() - 1.0).realize()
    return h @ w, h.sum()


@pytest.mark.parametrize("device", HOST)
def test_replay_equals_eager_on_new_inputs(device: str) -> None:
    rng = np.random.default_rng(0)
    w = Tensor(rng.standard_normal((4, 4)).astype(np.float32), device=device)
    f = TinyJit(_chain)
    outs = []
    for _ in range(6):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        a, s = f(Tensor(x, device=device), w)
        outs.append(a)
        want_a, want_s = _chain(Tensor(x, device=device), w)
        np.testing.assert_allclose(a.numpy(), want_a.numpy(), rtol=1e-5)
        np.testing.assert_allclose(s.numpy(), want_s.numpy(), rtol=1e-5)
        outs[-1] = (a, a.numpy())
    assert _native(f) and f._graph.graph.n >= 4
    for a, val in outs:  # every replay returned fresh buffers: no later replay overwrote an earlier result
        np.testing.assert_array_equal(a.numpy(), val)


@pytest.mark.parametrize("device", HOST)
def test_python_replay_without_the_runner(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(G.GRAPH_ENV, "0")
    f = TinyJit(lambda x: (x + 1.0).realize() * 3.0)
    for i in range(4):
        out = f(Tensor(np.full(8, i, np.float32), device=device))
        np.testing.assert_array_equal(out.numpy(), np.full(8, (i + 1) * 3, np.float32))
    assert f._graph is False


def test_parallel_kernels_run_in_the_graph() -> None:
    device = HOST[0]
    n = 1 << 20
    f = TinyJit(lambda x: ((x * 2.0).realize() + 1.0).realize())
    for i in range(4):
        x = np.arange(n, dtype=np.float32) * (i + 1)
        np.testing.assert_array_equal(f(Tensor(x, device=device)).numpy(), x * 2 + 1)
    cores = [f._graph.graph.entries[i].cores for i in range(f._graph.graph.n)]
    kernels = [st.program.entry for s in f.steps for st in s.launch.plan.steps]
    assert any(k.sig.parallel for k in kernels), "the benchmark shape should be split across cores"
    assert cores == [k.threads if k.sig.parallel else 0 for k in kernels]


@pytest.mark.parametrize("device", HOST)
def test_eager_parallel_launch_on_the_native_pool(device: str) -> None:
    x = np.arange(1 << 20, dtype=np.float32)
    t = Tensor(x, device=device).realize()
    G.native()  # built now (an eager launch does not wait for it)
    prog = next(p for p in R.compiled(get_backend(device), (t * 5.0).uop) if p.entry.sig.parallel)
    kern: HostKernel = prog.entry
    saved = kern.threads
    try:
        for shares in (2, 5, 1):  # more shares than cores too
            kern.threads = shares
            np.testing.assert_array_equal((t * 5.0).realize().numpy(), x * 5)
    finally:
        kern.threads = saved


def test_symbolic_variables_replay_their_bound_values() -> None:
    device = HOST[0]
    n = Variable("n", 1, 6).bind(4)
    f = TinyJit(lambda c: (c[:n] * 2.0).sum().realize() + 1.0)
    for i in range(4):
        c = np.arange(12, dtype=np.float32).reshape(6, 2) + i
        out = f(Tensor(c, device=device))
        np.testing.assert_allclose(out.numpy(), c[:4].sum() * 2 + 1, rtol=1e-6)
    assert _native(f)


@pytest.mark.parametrize("device", HOST)
def test_in_place_update_replays(device: str) -> None:
    state = Tensor(np.zeros(16, np.float32), device=device).realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        state.assign(state + x).realize()
        return (state * 1.0).realize()

    for i in range(6):
        out = step(Tensor(np.full(16, i + 1, np.float32), device=device))
        np.testing.assert_array_equal(out.numpy(), np.full(16, (i + 1) * (i + 2) / 2, np.float32))
    assert _native(step)


def test_an_input_bound_to_a_captured_buffer_goes_the_python_way() -> None:
    device = HOST[0]
    w = Tensor(np.ones(8, np.float32), device=device).realize()
    f = TinyJit(lambda x: ((x + w).realize() * 2.0).realize())
    for _ in range(3):
        f(Tensor(np.zeros(8, np.float32), device=device))
    assert _native(f)
    np.testing.assert_array_equal(f(w).numpy(), np.full(8, 4, np.float32))  # x is w: the kernel's buffers alias


def test_mixed_host_backends_and_a_non_host_backend() -> None:
    if len(HOST) < 2:
        pytest.skip("needs c and llvm")

    def mixed(x: Tensor) -> Tensor:
        a = (x + 1.0).realize()
        return (a.to("llvm") * 2.0).realize()

    f = TinyJit(mixed)
    for i in range(4):
        out = f(Tensor(np.full(4, i, np.float32), device="c"))
        np.testing.assert_array_equal(out.numpy(), np.full(4, (i + 1) * 2, np.float32))
    assert _native(f)

    g = TinyJit(lambda x: ((x + 1.0).realize().to("python") * 2.0).realize())
    for i in range(4):
        out = g(Tensor(np.full(4, i, np.float32), device="c"))
        np.testing.assert_array_equal(out.numpy(), np.full(4, (i + 1) * 2, np.float32))
    assert g._graph is False


def test_two_threads_replay_two_jits() -> None:
    device = HOST[0]
    jits = [TinyJit(lambda x, k=k: ((x * float(k)).realize() + 1.0).realize()) for k in (2, 3)]
    for j in jits:
        for _ in range(3):
            j(Tensor(np.zeros(1 << 16, np.float32), device=device))
    errors: list[str] = []

    def work(j: TinyJit, k: int) -> None:
        for i in range(200):
            x = np.full(1 << 16, i, np.float32)
            got = j(Tensor(x, device=device)).numpy()
            if not np.array_equal(got, x * k + 1):
                errors.append(f"jit {k} replay {i}")

    ts = [threading.Thread(target=work, args=(j, k)) for j, k in zip(jits, (2, 3), strict=True)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and all(_native(j) for j in jits)


@pytest.mark.parametrize("device", HOST)
def test_a_replay_counts_the_kernels_it_runs_not_its_copies(device: str) -> None:
    # the function returns its input unchanged beside a result: that output is a copy (a memcpy entry), not a kernel
    def body(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        a, s = _chain(x, w)
        return a, s, x

    rng = np.random.default_rng(3)
    w = Tensor(rng.standard_normal((4, 4)).astype(np.float32), device=device)
    f = TinyJit(body)
    for _ in range(3):
        f(Tensor(rng.standard_normal((3, 4)).astype(np.float32), device=device), w)
    assert _native(f)
    before = R.STATS.kernels
    a, s, _ = body(Tensor(rng.standard_normal((3, 4)).astype(np.float32), device=device), w)
    a.realize(s)
    eager = R.STATS.kernels - before
    before = R.STATS.kernels
    f(Tensor(rng.standard_normal((3, 4)).astype(np.float32), device=device), w)
    assert R.STATS.kernels - before == eager == f._graph.graph.kernels < f._graph.graph.n


def _prepared(w: Tensor) -> Callable[[Tensor], Tensor]:
    def f(x: Tensor) -> Tensor:
        packed = (w.exp() * 0.5).realize()  # reads only w: with w constant, a kernel the graph runs once
        return ((x @ packed).realize() + w.sum()).realize()
    return f


@pytest.mark.parametrize("device", HOST)
def test_kernels_that_read_only_constants_run_once(device: str) -> None:
    rng = np.random.default_rng(4)
    w = Tensor(rng.standard_normal((4, 4)).astype(np.float32), device=device).realize()
    plain, const = TinyJit(_prepared(w)), TinyJit(_prepared(w), constants=[w])
    for _ in range(4):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        want = x @ (np.exp(w.numpy()) * 0.5) + w.numpy().sum()
        np.testing.assert_allclose(plain(Tensor(x, device=device)).numpy(), want, rtol=1e-5)
        np.testing.assert_allclose(const(Tensor(x, device=device)).numpy(), want, rtol=1e-5)
    assert _native(plain) and _native(const)
    assert const._graph.graph.kernels == plain._graph.graph.kernels - 1  # the exp kernel reads only w
    before = R.STATS.kernels
    const(Tensor(np.ones((3, 4), np.float32), device=device))
    assert R.STATS.kernels - before == const._graph.graph.kernels


@pytest.mark.parametrize("device", HOST)
def test_a_constant_the_function_writes_is_not_precomputed(device: str) -> None:
    # the "constant" is assigned in the function: precomputing from it would go stale, so every kernel replays
    w = Tensor(np.ones(8, np.float32), device=device).realize()

    def bump(x: Tensor) -> Tensor:
        doubled = (w * 2.0).realize()
        w.assign(w + 1.0).realize()
        return (x + doubled).realize()

    f = TinyJit(bump, constants=[w])
    for i in range(5):
        out = f(Tensor(np.zeros(8, np.float32), device=device))
        np.testing.assert_array_equal(out.numpy(), np.full(8, 2 * (i + 1), np.float32))
    assert _native(f)


_SHARES_SRC = r"""
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
static pthread_t main_tid;
void set_main(void) { main_tid = pthread_self(); }
/* a parallel kernel's share: counts[core_id] += 1, and by_main[core_id] += 1 when the submitting thread ran it */
void share(int64_t counts, int64_t by_main, int64_t core_id, int64_t core_count) {
  (void)core_count;
  atomic_fetch_add((_Atomic int64_t *)(intptr_t)counts + core_id, 1);
  if (pthread_equal(pthread_self(), main_tid)) atomic_fetch_add((_Atomic int64_t *)(intptr_t)by_main + core_id, 1);
}
"""


def test_pool_runs_every_share_once_and_the_caller_takes_shares_a_worker_has_not() -> None:
    import ctypes

    lib = G._BUILDER[0](_SHARES_SRC)
    native = G.native()
    lib.set_main()
    fn = ctypes.cast(lib.share, ctypes.c_void_p).value
    native.uopir_set_spin.argtypes = [ctypes.c_int64]
    native.uopir_set_spin.restype = ctypes.c_int64
    old = native.uopir_set_spin(0)  # workers sleep between jobs: each job has to wake them
    try:
        for cores, jobs in ((2, 300), (7, 100)):
            counts, by_main = np.zeros(cores, np.int64), np.zeros(cores, np.int64)
            args = np.array([counts.ctypes.data, by_main.ctypes.data], np.int64)
            for _ in range(jobs):
                assert native.uopir_parallel(fn, args.ctypes.data, 2, cores) == 0
            np.testing.assert_array_equal(counts, jobs)  # each share of each job exactly once
            # the caller claims shares as the workers do (a statically assigned pool runs only share 0 on it), so a
            # worker that wakes late, or gets no core, does not hold the job up
            assert by_main[0] >= 1 and by_main[1:].sum() >= 1, by_main
    finally:
        native.uopir_set_spin(old)


@pytest.mark.parametrize("device", HOST)
def test_only_the_constant_kernels_whose_output_is_overwritten_replay(device: str) -> None:
    # both first kernels read only w; the first one's output is then updated in place, so it must run on every
    # replay (and so must nothing else): one kernel fewer than without constants, and the values of every call
    w = Tensor(np.arange(8, dtype=np.float32), device=device).realize()

    def body(x: Tensor) -> Tensor:
        a = (w * 2.0).realize()
        b = (w + 1.0).realize()
        a.assign(a + x).realize()
        return (a + b).realize()

    plain, const = TinyJit(body), TinyJit(body, constants=[w])
    for i in range(5):
        x = np.full(8, i, np.float32)
        want = w.numpy() * 3 + 1 + i
        np.testing.assert_array_equal(plain(Tensor(x, device=device)).numpy(), want)
        np.testing.assert_array_equal(const(Tensor(x, device=device)).numpy(), want)
    assert _native(plain) and _native(const)
    assert const._graph.graph.kernels == plain._graph.graph.kernels - 1
