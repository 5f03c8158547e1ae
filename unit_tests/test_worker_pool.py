"""The native worker pool (uopir.backends.cpu.graph, graph.c): a graph with parallel kernels keeps the pool hot
between them and nudges sleeping workers ahead of its next parallel kernel, and an idle pool sleeps; every share of
every job runs exactly once whatever the workers' timing (asleep between every job, several Python threads launching
at once, a graph that stops at a bad entry, a fork after the pool started), and a share that aborts ends the process
instead of hanging it."""
from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

import numpy as np
import pytest

from uopir.backends import available
from uopir.backends.cpu import graph as G

if "c" in available():
    import uopir.backends.c.runtime  # noqa: F401 - the C backend names graph.c's builder

pytestmark = pytest.mark.skipif(G.native() is None, reason="no C compiler: no native pool")

_SRC = r"""
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
/* a parallel kernel's share: counts[core_id] += 1 */
void share(int64_t counts, int64_t core_id, int64_t core_count) {
  (void)core_count;
  atomic_fetch_add((_Atomic int64_t *)(intptr_t)counts + core_id, 1);
}
/* a serial kernel that runs `ns` nanoseconds (long enough for a worker to go to sleep when it is not kept hot) */
void busy(int64_t ns) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b); while ((b.tv_sec - a.tv_sec) * 1000000000LL + b.tv_nsec - a.tv_nsec < ns);
}
/* a parallel kernel's share that runs `ns` nanoseconds, then counts[core_id] += 1 */
void slow_share(int64_t counts, int64_t ns, int64_t core_id, int64_t core_count) {
  (void)core_count;
  busy(ns);
  atomic_fetch_add((_Atomic int64_t *)(intptr_t)counts + core_id, 1);
}
/* share 1 aborts */
void abort_share(int64_t core_id, int64_t core_count) {
  (void)core_count;
  if (core_id == 1) abort();
}
"""


@pytest.fixture(scope="module")
def pool() -> tuple[object, object]:
    native = G.native()
    for name in ("uopir_set_spin", "uopir_set_hot_spin", "uopir_set_linger"):
        getattr(native, name).argtypes = [ctypes.c_int64]
        getattr(native, name).restype = ctypes.c_int64
    native.uopir_pool_state.argtypes = [ctypes.c_void_p]
    native.uopir_pool_state.restype = None
    return native, G._BUILDER[0](_SRC)


def _addr(lib: object, name: str) -> int:
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def _state(native: object) -> tuple[int, int, int]:
    return _state4(native)[:3]


def _state4(native: object) -> tuple[int, int, int, int]:
    """(workers made, workers asleep, graphs keeping the pool hot, the linger after the last job in ns)."""
    out = np.zeros(4, np.int64)
    native.uopir_pool_state(out.ctypes.data)
    return int(out[0]), int(out[1]), int(out[2]), int(out[3])


class _Graph:
    """A table of entries for uopir_run_graph: ("share", cores) adds one to counts[core_id] per share, ("busy", ns)
    runs serially for ns nanoseconds, ("wide", cores) is a parallel entry with more arguments than the runner passes."""

    def __init__(self, lib: object, plan: list[tuple[str, int]], counts: np.ndarray):
        self.keep = [np.array([counts.ctypes.data], np.int64)]
        self.entries = (G.Entry * len(plan))()
        for e, (what, v) in zip(self.entries, plan, strict=True):
            if what == "busy":
                a = np.array([v], np.int64)
                e.fn, e.nargs, e.cores = _addr(lib, "busy"), 1, 0
            else:
                a = self.keep[0] if what == "share" else np.zeros(64, np.int64)
                e.fn, e.nargs, e.cores = _addr(lib, "share"), 1 if what == "share" else 64, v
            self.keep.append(a)
            e.args = a.ctypes.data

    def run(self, native: object) -> int:
        return native.uopir_run_graph(len(self.entries), ctypes.addressof(self.entries))


def _wait_asleep(native: object, timeout: float = 5.0) -> tuple[int, int, int]:
    end = time.monotonic() + timeout
    while True:
        st = _state(native)
        if st[0] and st[1] == st[0] or time.monotonic() > end:
            return st
        time.sleep(0.002)


@pytest.mark.parametrize("hot_spin_ns", [0, 300_000])
def test_a_graph_runs_each_share_once_and_leaves_the_pool_asleep(pool, hot_spin_ns: int) -> None:
    # hot_spin_ns 0: workers sleep between any two jobs, so each parallel entry needs the nudge or the job's wake-up
    native, lib = pool
    old = native.uopir_set_hot_spin(hot_spin_ns)
    try:
        counts = np.zeros(2, np.int64)
        g = _Graph(lib, [("share", 2), ("busy", 20_000), ("share", 2), ("share", 2), ("busy", 50_000)] * 10, counts)
        for _ in range(20):
            assert g.run(native) == -1
        np.testing.assert_array_equal(counts, 20 * 30)
        workers, asleep, hot = _wait_asleep(native)
        assert hot == 0 and workers >= 1 and asleep == workers, (workers, asleep, hot)  # an idle pool burns no core
    finally:
        native.uopir_set_hot_spin(old)


def test_workers_linger_after_a_long_job_for_half_its_time_then_sleep(pool) -> None:
    """After a parallel job, waiting workers spin for half its time (at most the linger limit) before they sleep: the
    next kernel of a caller that runs long ones back to back finds them awake. The linger is bounded (the pool ends
    asleep), 0 turns it off, and a short job leaves a short one."""
    native, lib = pool
    old = native.uopir_set_linger(10_000_000_000)
    try:
        counts = np.zeros(2, np.int64)
        args = np.array([counts.ctypes.data, 2_000_000], np.int64)  # each share runs 2 ms
        assert native.uopir_parallel(_addr(lib, "slow_share"), args.ctypes.data, 2, 2) == 0
        np.testing.assert_array_equal(counts, 1)
        assert 1_000_000 <= _state4(native)[3] < 10_000_000_000  # half the job (>= 2 ms), not the limit
        assert native.uopir_set_linger(300_000) == 10_000_000_000
        assert native.uopir_parallel(_addr(lib, "slow_share"), args.ctypes.data, 2, 2) == 0
        assert _state4(native)[3] == 300_000  # capped
        workers, asleep, _ = _wait_asleep(native)
        assert asleep == workers  # the linger ends
        native.uopir_set_linger(0)
        assert native.uopir_parallel(_addr(lib, "slow_share"), args.ctypes.data, 2, 2) == 0
        assert _state4(native)[3] == 0
        np.testing.assert_array_equal(counts, 3)
    finally:
        native.uopir_set_linger(old)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="one cpu (or no affinity): nothing to steer")
def test_workers_are_kept_off_the_submitting_threads_cpu(pool) -> None:
    """The scheduler wakes a worker on the waker's cpu when none is idle; there it can only run after the caller's own
    share, and finds none left. So the submitter keeps the workers off its cpu: after a job, every worker may run on
    every cpu the process may but one."""
    native, lib = pool
    counts = np.zeros(2, np.int64)
    args = np.array([counts.ctypes.data], np.int64)
    assert native.uopir_parallel(_addr(lib, "share"), args.ctypes.data, 1, 2) == 0
    np.testing.assert_array_equal(counts, 1)
    allowed = os.sched_getaffinity(0)
    masks = [os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task")]
    steered = [m for m in masks if m != allowed]
    assert len(steered) == _state(native)[0] >= 1  # the workers, none else
    assert all(len(m) == len(allowed) - 1 and m < allowed for m in steered)


def test_a_graph_that_stops_at_a_bad_entry_releases_the_pool(pool) -> None:
    native, lib = pool
    counts = np.zeros(2, np.int64)
    g = _Graph(lib, [("share", 2), ("busy", 1000), ("wide", 2), ("share", 2)], counts)
    assert g.run(native) == 2  # the entry with too many arguments; nothing after it ran
    np.testing.assert_array_equal(counts, 1)
    assert _wait_asleep(native)[2] == 0  # no graph keeps the pool hot any more


def test_python_threads_running_graphs_at_once(pool) -> None:
    native, lib = pool
    counts = [np.zeros(3, np.int64) for _ in range(4)]
    graphs = [_Graph(lib, [("share", 3), ("busy", 2000), ("share", 3)] * 5, c) for c in counts]
    errors: list[object] = []

    def work(g: _Graph) -> None:
        for _ in range(100):
            if g.run(native) != -1:
                errors.append("bad entry")

    ts = [threading.Thread(target=work, args=(g,)) for g in graphs]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a graph never finished"
    assert not errors
    for c in counts:
        np.testing.assert_array_equal(c, 100 * 10)
    assert _wait_asleep(native)[2] == 0


def _child_status(pid: int, timeout: float = 30.0) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the child hung")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_fork_after_the_pool_started(pool) -> None:
    native, lib = pool
    counts = np.zeros(2, np.int64)
    g = _Graph(lib, [("share", 2), ("busy", 1000), ("share", 2)], counts)
    assert g.run(native) == -1 and _state(native)[0] >= 1  # workers exist before the fork
    pid = os.fork()
    if pid == 0:  # the child: no workers until its first job makes them
        try:
            counts[:] = 0
            ok = _state(native)[0] == 0 and all(g.run(native) == -1 for _ in range(50))
            ok = ok and (counts == 100).all() and _state(native)[0] >= 1
        finally:
            os._exit(0 if ok else 3)
    assert os.waitstatus_to_exitcode(_child_status(pid)) == 0
    np.testing.assert_array_equal(counts, 2)  # the parent's pool still runs its jobs
    assert g.run(native) == -1
    np.testing.assert_array_equal(counts, 4)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_share_that_aborts_ends_the_process(pool) -> None:
    native, lib = pool
    pid = os.fork()
    if pid == 0:
        try:
            native.uopir_parallel(_addr(lib, "abort_share"), None, 0, 2)
        finally:
            os._exit(0)
    assert os.waitstatus_to_exitcode(_child_status(pid)) == -signal.SIGABRT
