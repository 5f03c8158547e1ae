"""The search on a real local Ray cluster (UOPIR_BEAM_RAY; 2 CPUs, localhost only, started once for the module and
shut down after, with a check that none of its processes is left): with a deterministic cost it finds the same opts
as the local process pool; a real timed search runs end to end, and kernel-optimize picks the Ray pool from the
environment. Skipped only when ray is not installed (`pip install 'uopir[search]'`)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (the search extra: pip install 'uopir[search]')")

from uopir.backends import get_backend  # noqa: E402
from uopir.ir.parser import parse_ir  # noqa: E402
from uopir.passes.kernel.optimize import Opt, apply_opts  # noqa: E402
from uopir.passes.manager import PassManager  # noqa: E402
from uopir.search import beam as B  # noqa: E402
from uopir.search.cache import get_tuning_cache  # noqa: E402
from uopir.search.fingerprint import device_fingerprint  # noqa: E402
from uopir.search.job import Job  # noqa: E402
from uopir.search.pool import LocalPool  # noqa: E402
from uopir.search.ray_pool import RayPool  # noqa: E402

pytestmark = pytest.mark.skipif(not get_backend("c").available, reason="no C compiler")

HERE = str(Path(__file__).resolve().parent)


def matmul(m: int, n: int, k: int) -> str:
    from test_search import matmul as text

    return text(m, n, k)


def _descendants() -> set[int]:
    """The pids of this process's descendants (from /proc: no psutil needed)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = set(), [os.getpid()]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo += kids
    return out


@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster for the module, whose workers import search_cost (this folder on their path)."""
    before = _descendants()
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, old) if p)
    try:
        pool = RayPool("local", num_cpus=2)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    yield pool
    ours = _descendants() - before
    pool.close()
    assert not ray.is_initialized()
    deadline = time.monotonic() + 20
    while ours & _descendants() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = ours & _descendants()
    assert not left, f"Ray left processes behind: {sorted(left)}"


def test_ray_finds_the_local_pools_opts(cluster, monkeypatch):
    """The same search with the same deterministic cost (the candidates lowered for real in the workers) picks the
    same opts through Ray tasks as through the local process pool, and they are the cost's best tile."""
    from search_cost import cost_job

    monkeypatch.syspath_prepend(HERE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p))
    k = parse_ir(matmul(16, 16, 16))
    fp = device_fingerprint("c")
    local = LocalPool(fn="search_cost:cost_job")
    try:
        got_local = B.beam_search(k, "c", 2, lambda jobs: local.measure(jobs, 60.0), [], rounds=4, fingerprint=fp,
                                  check=B.lowering_check(k, "c"))
    finally:
        local.close()
    on_ray = RayPool("local", fn=cost_job)  # joins the module's cluster (Ray is initialized): a pool of cost_job
    got_ray = B.beam_search(k, "c", 2, lambda jobs: on_ray.measure(jobs, 60.0), [], rounds=4, fingerprint=fp,
                            check=B.lowering_check(k, "c"))
    assert got_ray.opts == got_local.opts and got_ray.seconds == got_local.seconds
    assert got_ray.tried == got_local.tried and got_ray.tried > 10
    lanes = 1
    for o in got_ray.opts:
        lanes *= o.factor if o.kind == "upcast" and o.axis in (0, 1) else 1
    assert lanes >= 16 and got_ray.seconds is not None and got_ray.seconds < got_ray.baseline_seconds


def test_ray_times_real_jobs(cluster):
    """Real compile-and-time jobs as Ray tasks: each comes back timed, from this machine's fingerprint; a candidate
    whose opts do not apply is an error, not the end of the batch; a task over its time limit is cancelled."""
    text = matmul(8, 8, 8)
    good, bad = Job("c", text, ("upcast 0 by 4",), runs=3, want_output=True), Job("c", text, ("upcast 7 by 2",))
    m_good, m_bad = cluster.measure([good, bad], 60.0)
    assert m_good.error is None and m_good.seconds is not None and m_good.seconds > 0
    assert m_good.fingerprint == device_fingerprint("c") and m_good.outputs is not None
    assert m_bad.seconds is None and "axis 7" in (m_bad.error or "")
    (slow,) = cluster.measure([Job("c", text, (), runs=10 ** 9)], 3.0)
    assert slow.seconds is None and "time limit" in (slow.error or "")
    (again,) = cluster.measure([good], 60.0)
    assert again.error is None and again.seconds is not None


def test_beam_env_runs_on_ray(cluster, tmp_path, monkeypatch):
    """UOPIR_BEAM_RAY=local: kernel-optimize's search sends its jobs to the Ray cluster (already running here) and
    records the winner in the tuning cache; budget= bounds it."""
    from uopir.search import ray_pool

    monkeypatch.setenv("UOPIR_TUNING_CACHE", str(tmp_path / "t.sqlite"))
    monkeypatch.setenv("UOPIR_BEAM_RAY", "local")
    monkeypatch.setattr(ray_pool, "_POOLS", {})
    k = parse_ir(matmul(8, 16, 8))
    t0 = time.perf_counter()
    out = PassManager.parse("kernel-optimize{strategy=beam width=1 budget=8 target=c}").run(k)
    assert time.perf_counter() - t0 < 60
    assert list(ray_pool._POOLS) == ["local"] and not ray_pool._POOLS["local"]._started  # joined, did not start
    cached = get_tuning_cache().lookup(k, "c", device_fingerprint("c"))
    assert cached is not None and apply_opts(k, cached) is out
    assert all(isinstance(o, Opt) for o in cached)


def test_a_cluster_that_does_not_answer_is_a_clear_error(tmp_path):
    """uop-opt with UOPIR_BEAM_RAY at an address where nothing listens: one located error, exit 1, in seconds (Ray
    itself would retry for minutes)."""
    import subprocess
    import sys

    src = tmp_path / "k.uop"
    src.write_text(matmul(4, 4, 4))
    env = {**os.environ, "UOPIR_BEAM_RAY": "127.0.0.1:1", "PYTHONPATH": str(Path(HERE).parent)}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "uopir.tools.uop_opt", str(src), "-p",
                          "kernel-optimize{strategy=beam target=c}", "--tuning-cache=none"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "error: kernel-optimize: UOPIR_BEAM_RAY=127.0.0.1:1: cannot connect to a Ray cluster: nothing answers at " \
           "127.0.0.1:1" in res.stderr
    assert time.perf_counter() - t0 < 60
