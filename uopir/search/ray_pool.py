"""The search's measuring pool on Ray (UOPIR_BEAM_RAY): candidates compile and run as Ray tasks, on every machine of
a cluster whose device matches this one.

`UOPIR_BEAM_RAY=local` starts a Ray cluster on this machine (localhost only, one CPU per core, no dashboard, Ray's
logs kept out of the program's output); `auto` connects to the cluster that is running here (`ray start`);
`HOST:PORT` or `ray://HOST:PORT` to a cluster's address. Ray is optional (`pip install 'uopir[search]'`).

A task runs `run_job` unchanged (a Job in, a Measurement out), as the local pool's workers do. Each node is asked
once for its device fingerprint; timings compare only between machines of the same fingerprint as this one, so jobs
go to the matching nodes (none matching: to any, and the search skips their timings with a note). As in the local
pool, a round compiles side by side first (one task per CPU of a node; the node's compile cache keeps the binary),
then times one job at a time per node on the same node, so that no compile or other timing disturbs a measurement.
A task past its time limit is cancelled (its worker killed); a task that dies costs that candidate only.
"""
from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from uopir.passes.kernel.strategies import RAY_ENV, StrategyError
from uopir.search.fingerprint import device_fingerprint
from uopir.search.job import Job, Measurement, run_job

__all__ = ["RayPool", "ray_pool", "import_ray"]

CONNECT_TIMEOUT_S = 10.0  # for a cluster's address to answer before the search gives up on it
_ROOT = str(Path(__file__).resolve().parents[2])  # the folder uopir is imported from, for the workers' path


def import_ray(setting: str) -> Any:
    """The ray module; StrategyError saying what to install when it is not."""
    try:
        import ray
    except ImportError:
        raise StrategyError(f"{RAY_ENV}={setting} runs the search's jobs on Ray, which is not installed: "
                            f"pip install 'uopir[search]' (or pip install ray)") from None
    return ray


def _reachable(setting: str) -> None:
    """ConnectionError unless the cluster's address answers (ray.init retries an unreachable one for minutes)."""
    address = setting.removeprefix("ray://")
    if setting == "auto":  # the address a running `ray start` left for this machine (ConnectionError: none)
        try:
            from ray._private.services import canonicalize_bootstrap_address
        except ImportError:  # another Ray version: ray.init looks for it itself
            return
        address = canonicalize_bootstrap_address("auto") or ""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as e:
        raise ConnectionError(f"nothing answers at {address} ({e})") from None


def _cpus() -> int:
    """The cores this process may use (its affinity: a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass
class _Node:
    id: str | None  # None: no pinning (no node matched this machine's fingerprint)
    cpus: int


class RayPool:
    """Compile and time jobs as Ray tasks (see the module docstring); `fn` is the task (default run_job)."""

    def __init__(self, setting: str, fn: Callable[[Job], Measurement] = run_job, num_cpus: int | None = None) -> None:
        ray = self.ray = import_ray(setting)
        self.setting, self._started = setting, False
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report, no prompt about it
            path = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p)
            kw: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                                      runtime_env={"env_vars": {"PYTHONPATH": path, "UOPIR_BEAM": "0"}})
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # the error below says it once, located
                    if setting == "local":
                        ray.init(address="local", num_cpus=num_cpus or _cpus(), _node_ip_address="127.0.0.1", **kw)
                    else:
                        _reachable(setting)
                        ray.init(address=setting, **kw)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise StrategyError(f"{RAY_ENV}={setting}: cannot {'start' if setting == 'local' else 'connect to'} "
                                    f"a Ray cluster: {e}") from None
            self._started = True
        self._fn = fn
        self._task = ray.remote(num_cpus=1, max_retries=0)(fn)
        self._nodes: dict[str, list[_Node]] = {}
        self._lock = threading.Lock()

    def nodes(self, device: str) -> list[_Node]:
        """The alive nodes whose fingerprint for `device` is this machine's (asked once per device)."""
        if device in self._nodes:
            return self._nodes[device]
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray, mine = self.ray, device_fingerprint(device)
        alive = [n for n in ray.nodes() if n.get("Alive")]
        probe = ray.remote(num_cpus=0, max_retries=0)(device_fingerprint)
        refs = [probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(device) for n in alive]
        found = []
        for n, ref in zip(alive, refs, strict=True):
            try:
                fp = ray.get(ref, timeout=120)
            except Exception:  # noqa: BLE001 - a node without the device (or gone) takes no jobs
                continue
            if fp == mine:
                found.append(_Node(n["NodeID"], max(1, int(n.get("Resources", {}).get("CPU", 1)))))
        self._nodes[device] = found or [_Node(None, max(1, int(ray.cluster_resources().get("CPU", 1))))]
        return self._nodes[device]

    def measure(self, jobs: list[Job], limit: float) -> list[Measurement]:
        """Each job's Measurement, in order; `limit` seconds for each compile and again for each timing."""
        if not jobs:
            return []
        with self._lock:
            nodes = self.nodes(jobs[0].device)
            where = [nodes[i % len(nodes)] for i in range(len(jobs))]
            compiled = self._run([replace(j, compile_only=True) for j in jobs], where, limit, per_node=None)
            todo = [i for i, m in enumerate(compiled) if not m.error]
            timed = self._run([jobs[i] for i in todo], [where[i] for i in todo], limit, per_node=1)
            out = list(compiled)
            for i, m in zip(todo, timed, strict=True):
                out[i] = m
            return out

    def _run(self, jobs: list[Job], where: list[_Node], limit: float, per_node: int | None) -> list[Measurement]:
        """Run `jobs` on their nodes, at most `per_node` at once on one node (None: one per CPU), each cancelled
        `limit` seconds after it was sent."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        out: list[Measurement | None] = [None] * len(jobs)
        busy: dict[str | None, int] = {}
        pending: dict[Any, tuple[int, float]] = {}
        queue = list(range(len(jobs)))
        while queue or pending:
            for i in list(queue):
                node = where[i]
                if busy.get(node.id, 0) >= (per_node or node.cpus):
                    continue
                opts: dict[str, Any] = {}
                if node.id is not None:
                    opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node.id, soft=False)
                if per_node == 1:  # a timing has its node to itself: the other CPUs stay idle while it runs
                    opts["num_cpus"] = node.cpus
                queue.remove(i)
                busy[node.id] = busy.get(node.id, 0) + 1
                pending[self._task.options(**opts).remote(jobs[i])] = (i, time.monotonic() + limit)
            wait = max(0.0, min(d for _, d in pending.values()) - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait)
            now = time.monotonic()
            for ref in list(pending):
                i, deadline = pending[ref]
                if ref in ready:
                    try:
                        out[i] = ray.get(ref)
                    except Exception as e:  # noqa: BLE001 - a crashed task costs its candidate only
                        out[i] = Measurement(jobs[i].opts, None, "", f"the Ray task failed: {type(e).__name__}: "
                                             f"{str(e).strip().splitlines()[-1] if str(e).strip() else ''}")
                elif deadline <= now:
                    ray.cancel(ref, force=True)
                    out[i] = Measurement(jobs[i].opts, None, "", f"it ran over its time limit of {limit:g} s "
                                         f"(its Ray task was cancelled)")
                else:
                    continue
                del pending[ref]
                busy[where[i].id] -= 1
        return [m for m in out if m is not None]

    def close(self) -> None:
        """Stop the Ray cluster this pool started (one it connected to keeps running)."""
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
        self._started = False


_POOLS: dict[str, RayPool] = {}
_POOLS_LOCK = threading.Lock()


def ray_pool(setting: str) -> RayPool:
    """The process's pool for `setting` (started on first use, stopped at exit)."""
    with _POOLS_LOCK:
        if setting not in _POOLS:
            _POOLS[setting] = pool = RayPool(setting)
            atexit.register(pool.close)
        return _POOLS[setting]
