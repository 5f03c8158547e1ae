"""One search candidate compiled and timed: the job a local worker process (or, later, a Ray task) runs.

A Job and its Measurement are plain picklable values (the kernel travels as its text, the opts as their strings), so
the same function serves a process pool and a remote worker unchanged. The job applies the opts to the kernel,
lowers it through the rest of the device's pipeline (the passes after kernel-optimize), compiles it, and, unless it
is compile-only, runs it on fresh buffers filled from a fixed seed: one warm-up launch, then `runs` timed launches.
The search ranks by the fastest of them (`seconds`), their `median` beside it: on a machine that others share, a
threaded kernel's median follows the load (a 1 ms softmax read 3 to 10 ms from run to run on 2 busy cores) while
the fastest run follows the schedule. Any failure is the Measurement's `error`, never an exception.
"""
from __future__ import annotations

import statistics
import time
import traceback
from dataclasses import dataclass

import numpy as np

from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["Job", "Measurement", "run_job", "lower_candidate", "candidate_pipeline"]


@dataclass(frozen=True)
class Job:
    """Compile (and time, unless `compile_only`) `kernel` with `opts` on `device`."""

    device: str
    kernel: str  # the kernel.def's text, before kernel-optimize
    opts: tuple[str, ...]  # str(Opt) of each opt, in the order they apply
    runs: int = 5
    seed: int = 0
    want_output: bool = False  # return the written buffers (the first run's, to check against the reference)
    compile_only: bool = False


@dataclass(frozen=True)
class Measurement:
    """What a job found: the fastest launch's seconds (None when it failed), the device's fingerprint (timings
    compare only between equal fingerprints), the error text, the written buffers when asked for, and the median
    launch's seconds."""

    opts: tuple[str, ...]
    seconds: float | None
    fingerprint: str
    error: str | None = None
    outputs: tuple[np.ndarray, ...] | None = None
    median: float | None = None


def candidate_pipeline(device: str) -> str:
    """The passes of `device`'s default pipeline after kernel-optimize (a candidate's opts are applied already)."""
    from uopir.passes.default import DefaultOptions, default_pipeline

    passes = default_pipeline(DefaultOptions(target=device))
    at = next(i for i, p in enumerate(passes) if p.startswith("kernel-optimize"))
    return ",".join(passes[at + 1:])


def lower_candidate(kernel: UOp, opts: tuple[str, ...], device: str) -> UOp:
    """The device program of `kernel` with `opts` applied (OptError when one does not apply)."""
    from uopir.backends import get_backend
    from uopir.passes.kernel.optimize import Opt, apply_opts

    kdef = apply_opts(kernel, [Opt.parse(o) for o in opts])
    return get_backend(device).lower(kdef, candidate_pipeline(device))


def _inputs(kernel: UOp, seed: int) -> list[np.ndarray]:
    """Fresh host arrays for every param of `kernel`, filled from `seed` (small values: an int may be an index)."""
    from uopir.backends.params import param_sizes
    from uopir.dialects import kernel as K
    from uopir.dialects.semantics import np_dtype

    params = {u.arg: u for u in kernel.toposort() if u.op is K.PARAM}
    sizes = param_sizes(kernel)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(max(params) + 1 if params else 0):
        p = params.get(i)
        n, _ = sizes.get(i, (1, None))
        if p is None or n is None:
            raise ValueError(f"param {i}: its size cannot be read from the kernel's index math")
        nd = np_dtype(p.dtype.base)
        if nd.kind == "f":
            a = rng.uniform(-1, 1, n).astype(nd)
        elif nd.kind == "b":
            a = rng.integers(0, 2, n).astype(nd)
        else:
            a = rng.integers(0, 3, n).astype(nd)
        out.append(a)
    return out


def run_job(job: Job) -> Measurement:
    """Compile and time one candidate (see the module docstring); errors come back in the Measurement."""
    from uopir.search.fingerprint import device_fingerprint

    fp = device_fingerprint(job.device)
    try:
        from uopir.backends import get_backend
        from uopir.backends.params import written_params
        from uopir.ir.parser import parse_ir

        backend = get_backend(job.device)
        kernel = parse_ir(job.kernel)
        program = lower_candidate(kernel, job.opts, job.device)
        prog = backend.compile(program, program.arg if isinstance(program.arg, str) else "candidate")
        backend.runtime.ready(prog)
        if job.compile_only:
            return Measurement(job.opts, None, fp)
        arrays = _inputs(kernel, job.seed)
        bufs = [backend.allocator.from_numpy(a.copy(), _dtype_of(kernel, i)) for i, a in enumerate(arrays)]
        launch, sync = backend.runtime.launch, backend.runtime.synchronize
        launch(prog, bufs, var_vals={})
        sync()
        outputs = tuple(bufs[i].numpy().copy() for i in sorted(written_params(kernel))) if job.want_output else None
        times = []
        for _ in range(max(1, job.runs)):
            t0 = time.perf_counter()
            launch(prog, bufs, var_vals={})
            sync()
            times.append(time.perf_counter() - t0)
        return Measurement(job.opts, min(times), fp, None, outputs, statistics.median(times))
    except Exception as e:  # noqa: BLE001 - a bad candidate is a note for the search, never its end
        last = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
        where = f" (at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
        return Measurement(job.opts, None, fp, f"{type(e).__name__}: {e}{where}")


def _dtype_of(kernel: UOp, i: int) -> DType:
    from uopir.dialects import kernel as K

    p = next((u for u in kernel.toposort() if u.op is K.PARAM and u.arg == i), None)
    return p.dtype.base if p is not None else dtypes.uint8
