"""Thread-safe first use (issue 24, item 3): every lazy registry builds an entry once, however many threads ask for it
at the same time, and a fresh process realizing on a device from 8 threads at once gets the right values in each.

Regression: `target("c")` deleted its factory after building, so the second of two threads building it at once raised
`KeyError: 'c'` (uopir/passes/target.py) on its first realize; each thread could also make its own backend, pool and
one-rule matcher, and a thread could run a pass whose module another thread had not finished importing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from thread_testing import THREADS, run_together

from uopir.backends import registry as backend_registry
from uopir.backends.cpu import runtime as cpu_runtime
from uopir.backends.interface import Backend
from uopir.ir.dtype import dtypes
from uopir.ir.once import FirstUse, once
from uopir.ir.uop import UOp
from uopir.passes import registry as pass_registry
from uopir.passes import target as target_module
from uopir.passes.kernel import simplify
from uopir.passes.kernel.simplify_rules import RULES


class SlowFactory:
    """A factory that takes a while (long enough for every thread to miss the entry) and counts its calls."""

    def __init__(self, make: Callable[[], Any], seconds: float = 0.05):
        self.make, self.seconds, self.calls = make, seconds, 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        time.sleep(self.seconds)
        return self.make(*args)


# ---- one registry at a time: a slow factory asked for by 8 threads runs once ----------------------------------------
def test_first_use_builds_once_and_every_caller_gets_that_value() -> None:
    table: dict[str, object] = {}
    first = FirstUse("thing")
    make = SlowFactory(object)
    got = run_together(lambda k: first.get(table, "x", make))
    assert make.calls == 1
    assert all(g is got[0] for g in got) and table["x"] is got[0]


def test_first_use_of_an_entry_that_needs_itself_is_an_error_not_a_hang() -> None:
    table: dict[str, object] = {}
    first = FirstUse("thing")

    def needs_itself() -> object:
        return first.get(table, "x", needs_itself)

    with pytest.raises(RuntimeError, match="building thing 'x' needs thing 'x' itself"):
        first.get(table, "x", needs_itself)
    assert "x" not in table  # a failed build stores nothing: the next caller builds again
    assert first.get(table, "x", lambda: 7) == 7


def test_once_runs_a_factory_once_per_argument() -> None:
    make = SlowFactory(lambda n: [n])
    pool = once(make)
    got = run_together(lambda k: pool(k % 2))
    assert make.calls == 2
    assert all(g is got[k % 2] for k, g in enumerate(got)) and got[0] == [0] and got[1] == [1]


def test_a_target_factory_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # regression: each thread ran the factory and all but one raised KeyError deleting it
    monkeypatch.setattr(target_module, "_TARGETS", dict(target_module._TARGETS))
    monkeypatch.setattr(target_module, "_FACTORIES", dict(target_module._FACTORIES))
    make = SlowFactory(lambda: target_module.CPU.derive(name="slow-cpu", threads=3))
    target_module.register_target(make, "slow-cpu")
    got = run_together(lambda k: target_module.target("slow-cpu"))
    assert make.calls == 1
    assert all(g is got[0] for g in got) and got[0].threads == 3
    assert "slow-cpu" in target_module.targets()  # still listed once built


class _NamedBackend(Backend):
    """A backend with a name and a target only: what choosing a backend on first use needs."""

    def __init__(self, device: str) -> None:
        self.device, self.target = device, target_module.CPU


def test_a_backend_factory_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend_registry, "_FACTORIES", dict(backend_registry._FACTORIES))
    monkeypatch.setattr(backend_registry, "_INSTANCES", dict(backend_registry._INSTANCES))
    for names in ("BACKENDS", "DEVICES", "PREFERENCE"):  # a registered backend joins the device lists
        monkeypatch.setattr(backend_registry, names, list(getattr(backend_registry, names)))
    make = SlowFactory(lambda: _NamedBackend("slow"))
    backend_registry.register_backend("slow", make)
    got: list[Backend] = run_together(lambda k: backend_registry.get_backend("slow" if k % 2 else " SLOW"))
    assert make.calls == 1
    assert all(g is got[0] for g in got) and got[0].device == "slow"


def test_a_one_rule_matcher_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[simplify.PatternMatcher] = []

    class SlowMatcher(simplify.PatternMatcher):
        def __init__(self, *args: Any, **kwargs: Any):
            time.sleep(0.05)
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(simplify, "PatternMatcher", SlowMatcher)
    monkeypatch.setattr(simplify, "_ONE", {})
    name = RULES[0].name
    x = UOp.const(dtypes.index, 3)  # matches no rule's lhs: each thread only makes the matcher exist
    got = run_together(lambda k: simplify.apply_rule(name, x))
    assert got == [None] * THREADS
    assert len(built) == 1 and simplify.one_rule_matcher(name) is built[0]


def test_a_pass_is_not_run_before_its_module_has_finished_importing(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # regression: a module registers its pass while it runs; a thread that looked the name up then got the pass and
    # ran it before the module had defined what the pass uses (NameError), while another thread was importing it
    mod = "slow_first_use_passes"
    (tmp_path / "slow_first_use_count.py").write_text("RUNS = []\n")
    (tmp_path / f"{mod}.py").write_text(textwrap.dedent("""
        import time
        import slow_first_use_count
        from uopir.passes.registry import register_pass

        slow_first_use_count.RUNS.append(1)

        @register_pass("test-slow-first-use", summary="the identity, through a helper defined after the pass")
        def run(root, options, ctx):
            return helper(root)

        REGISTERED = True
        time.sleep(0.3)

        def helper(root):
            return root
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(pass_registry.LAZY, "test-slow-first-use", mod)
    root = UOp.const(dtypes.index, 5)
    try:
        first = threading.Thread(target=pass_registry.resolve, args=("test-slow-first-use",))
        first.start()
        deadline = time.monotonic() + 30
        while not getattr(sys.modules.get(mod), "REGISTERED", False):  # the pass exists; its module still runs
            assert time.monotonic() < deadline
            time.sleep(0.001)

        def work(k: int) -> UOp:
            assert pass_registry.resolve("test-slow-first-use")
            return pass_registry.get_pass("test-slow-first-use").fn(root, None, None)

        got = run_together(work, THREADS - 1)
        first.join()
        assert all(g is root for g in got)
        assert sys.modules["slow_first_use_count"].RUNS == [1]  # imported once
    finally:
        pass_registry.PASSES.pop("test-slow-first-use", None)
        sys.modules.pop(mod, None)
        sys.modules.pop("slow_first_use_count", None)


def test_the_cpu_worker_pool_is_never_shut_down_under_a_submitter(monkeypatch: pytest.MonkeyPatch) -> None:
    # regression: two threads making the pool at once (or growing it) shut down a pool the other was submitting to
    # ("cannot schedule new futures after shutdown")
    monkeypatch.setattr(cpu_runtime, "_POOL", None)
    monkeypatch.setattr(cpu_runtime, "_POOL_SIZE", 0)

    def work(k: int) -> list[int]:  # each thread asks for a bigger pool each time: the pool grows while in use
        return [cpu_runtime._pool(1 + i).submit(lambda j=i: j * k).result() for i in range(40)]

    got = run_together(work)
    assert got == [[i * k for i in range(40)] for k in range(THREADS)]
    assert cpu_runtime._POOL_SIZE == 40
    assert run_together(lambda k: cpu_runtime._pool(2)) == [cpu_runtime._POOL] * THREADS  # no growth: one pool


# ---- a fresh process realizing on each device from 8 threads at once ------------------------------------------------
_CHILD = r"""
import json, sys, threading
import numpy as np
device, seed, nthreads, shapes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
from uopir import Tensor

def inputs(k):
    rng = np.random.default_rng(seed * 100 + k)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]

def programs(k):
    a, b, v, c, d = (Tensor(x, device=device) for x in inputs(k))
    yield (a * 2 + 1).numpy()
    yield a.sum(axis=1).numpy()
    yield (a @ b + v).relu().numpy()
    yield (c @ d).max(axis=0).numpy()  # big enough to run on several cores where the device has them

barrier = threading.Barrier(nthreads)
results, errors = [None] * nthreads, []

def body(k):
    try:
        barrier.wait()
        results[k] = [r.tolist() for r in programs(k)]
    except BaseException as e:
        import traceback
        errors.append(traceback.format_exc())

sys.setswitchinterval(1e-6)
threads = [threading.Thread(target=body, args=(k,)) for k in range(nthreads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"results": results, "errors": errors}))
"""


def _shapes(seed: int) -> list[tuple[int, ...]]:
    """The inputs' shapes of the child's programs: another seed, other programs."""
    return [(2 + seed, 5), (5, 4), (4,), (48, 64), (64, 38 + seed)]


def _expected(seed: int, k: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed * 100 + k)
    a, b, v, c, d = (rng.standard_normal(s).astype(np.float32) for s in _shapes(seed))
    return [a * 2 + 1, a.sum(axis=1), np.maximum(a @ b + v, 0), (c @ d).max(axis=0)]


@pytest.mark.parametrize("device,env", [("python", {}), ("c", {"UOPIR_C_TIERED": "0"}),
                                        ("c", {"UOPIR_C_TIERED": "1"}), ("llvm", {}), ("opencl", {}), ("cuda", {})],
                         ids=["python", "c", "c-tiered", "llvm", "opencl", "cuda"])
def test_fresh_process_realizes_from_8_threads_at_once(device: str, env: dict[str, str], tmp_path: Path) -> None:
    backend = backend_registry.get_backend(device)
    if not backend.available:  # opencl: only where its driver builds a kernel (the device's own probe)
        pytest.skip(f"the {device} backend is not available here: {backend.reason}")
    child_env = {**os.environ, **env, "UOPIR_CACHE_DIR": str(tmp_path / "cache")}  # cold: every kernel compiles
    for seed in (1, 2):  # each a fresh process: first use really is first; the race is likely, not certain, in one
        out = subprocess.run([sys.executable, "-c", _CHILD, device, str(seed), str(THREADS), json.dumps(_shapes(seed))],
                             capture_output=True, text=True, timeout=300, env=child_env)
        assert out.returncode == 0, out.stderr[-4000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got["errors"] == [], got["errors"][0]
        for k, res in enumerate(got["results"]):
            for j, (r, want) in enumerate(zip(res, _expected(seed, k), strict=True)):
                np.testing.assert_allclose(np.asarray(r, np.float32), want, rtol=1e-4, atol=1e-4,
                                           err_msg=f"{device} seed {seed} thread {k} program {j}")
