"""A measuring worker process: `python -m uopir.search.worker` reads pickled Jobs from stdin and writes each one's
pickled Measurement to stdout, each framed by its length (8 bytes, little-endian). The job runs through `run_job`,
or through the function `python -m uopir.search.worker MODULE:NAME` names (a test's deterministic cost).

A plain subprocess rather than a multiprocessing child: those re-run the parent's main script first (spawn,
forkserver), which a user's script without a `__main__` guard cannot survive, or copy a process whose runtime
threads they do not copy (fork). `Worker` is the parent's handle: send a job, wait for its answer with a time limit,
kill it.
"""
from __future__ import annotations

import os
import pickle
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from uopir.ir import env as ir_env
from uopir.search.job import Job, Measurement, run_job

__all__ = ["Worker", "WorkerDied"]

_ROOT = str(Path(__file__).resolve().parents[2])  # the folder uopir is imported from, for the child's path


class WorkerDied(RuntimeError):
    """The worker exited, or ran over a time limit and was killed."""


def _write(f: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj)
    f.write(len(data).to_bytes(8, "little") + data)
    f.flush()


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    out = b""
    while len(out) < n:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not select.select([fd], [], [], wait)[0]:
            raise TimeoutError
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


class Worker:
    """One worker process (started now)."""

    def __init__(self, fn: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in (ir_env.BEAM.name, ir_env.BEAM.alias)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen([sys.executable, "-m", "uopir.search.worker", *([fn] if fn else [])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def run(self, job: Job, limit: float) -> Measurement:
        """The job's Measurement; WorkerDied (the worker killed) when it dies or passes `limit` seconds."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        deadline = time.monotonic() + limit
        try:
            _write(self.proc.stdin, job)
            fd = self.proc.stdout.fileno()
            n = int.from_bytes(_read_exact(fd, 8, deadline), "little")
            return pickle.loads(_read_exact(fd, n, deadline))
        except TimeoutError:
            self.kill()
            raise WorkerDied(f"it ran over its time limit of {limit:g} s") from None
        except (EOFError, OSError):
            self.kill()
            raise WorkerDied(f"the worker process died (exit code {self.proc.returncode})") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


def main() -> None:
    """The worker's loop: a job in, its Measurement out, until stdin closes."""
    fn = run_job
    if len(sys.argv) > 1:
        import importlib

        module, _, name = sys.argv[1].partition(":")
        fn = getattr(importlib.import_module(module), name)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a kernel's or a library's prints must not corrupt the framing
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        job = pickle.loads(inp.read(int.from_bytes(head, "little")))
        _write(out, fn(job))


if __name__ == "__main__":
    main()
