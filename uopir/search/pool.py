"""The local measuring pool: candidates compile in COMPILE_WORKERS worker processes, then run one at a time in a
timing worker.

Compiling is the slow part, so the compile workers take a round's candidates side by side (the C compiler's disk
cache keeps the binaries); timing waits for all of them and then runs the jobs one after another in a single
worker, so no compile or other timing disturbs a measurement. A job that passes its time limit, or a worker that
dies (a kernel that crashes), costs that candidate only: the worker is killed and a fresh one started.
"""
from __future__ import annotations

import atexit
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from uopir.search.fingerprint import device_fingerprint
from uopir.search.job import Job, Measurement
from uopir.search.worker import Worker, WorkerDied

__all__ = ["LocalPool", "local_pool", "COMPILE_WORKERS"]

COMPILE_WORKERS = 2  # processes that compile candidates side by side (this machine's cores)


class LocalPool:
    """Compile in `workers` processes, time one job at a time in another (see the module docstring); `fn`
    ("module:name") runs each job in place of run_job."""

    def __init__(self, workers: int = COMPILE_WORKERS, fn: str | None = None) -> None:
        self.workers, self.fn = workers, fn
        self._idle: list[Worker] = []
        self._timer: Worker | None = None
        self._lock = threading.Lock()
        self._idle_lock = threading.Lock()

    def measure(self, jobs: list[Job], limit: float) -> list[Measurement]:
        """Each job's Measurement, in order; `limit` seconds for each compile and again for each timing."""
        with self._lock:
            with ThreadPoolExecutor(self.workers) as ex:
                compiled = list(ex.map(lambda j: self._compile(j, limit), jobs))
            return [m if m.error else self._time(j, limit) for j, m in zip(jobs, compiled, strict=True)]

    def _compile(self, job: Job, limit: float) -> Measurement:
        with self._idle_lock:
            w = self._idle.pop() if self._idle else None
        w = w if w is not None and w.alive else Worker(self.fn)
        try:
            m = w.run(replace(job, compile_only=True), limit)
        except WorkerDied as e:
            return Measurement(job.opts, None, device_fingerprint(job.device), f"compile: {e}")
        with self._idle_lock:
            self._idle.append(w)
        return m

    def _time(self, job: Job, limit: float) -> Measurement:
        if self._timer is None or not self._timer.alive:
            self._timer = Worker(self.fn)
        try:
            return self._timer.run(job, limit)
        except WorkerDied as e:
            self._timer = None
            return Measurement(job.opts, None, device_fingerprint(job.device), str(e))

    def close(self) -> None:
        """Stop the worker processes."""
        for w in [*self._idle, *([self._timer] if self._timer else [])]:
            w.kill()
        self._idle, self._timer = [], None


_POOL: LocalPool | None = None
_POOL_LOCK = threading.Lock()


def local_pool() -> LocalPool:
    """The process's shared pool (started on first use, stopped at exit)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = LocalPool()
            atexit.register(_POOL.close)
        return _POOL
