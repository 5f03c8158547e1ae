"""A deterministic cost for search tests that run in worker processes or Ray tasks (imported there by name): the
candidate is lowered for real as its job would be, but its time is a function of its opts alone, so two pools must
find the same winner."""
from __future__ import annotations

import numpy as np

from uopir.passes.kernel.optimize import Opt
from uopir.search.fingerprint import device_fingerprint
from uopir.search.job import Job, Measurement, lower_candidate


def cost(opts: tuple[str, ...]) -> float:
    """Fewer seconds for more register-tile lanes on the two output axes (up to 32), a little less with an unroll,
    a little more per opt."""
    parsed = [Opt.parse(o) for o in opts]
    lanes = 1
    for o in parsed:
        lanes *= o.factor if o.kind == "upcast" and o.axis in (0, 1) else 1
    unroll = any(o.kind == "unroll" for o in parsed)
    return 1.0 / min(lanes, 32) - (0.01 if unroll else 0) + 0.001 * len(opts)


def cost_job(job: Job) -> Measurement:
    """run_job's stand-in: lower the candidate (errors come back as run_job's do), then report `cost`."""
    import uopir.backends  # noqa: F401 - registers the devices' targets, as run_job's imports do
    from uopir.ir.parser import parse_ir

    fp = device_fingerprint(job.device)
    try:
        lower_candidate(parse_ir(job.kernel), job.opts, job.device)
    except Exception as e:  # noqa: BLE001 - as run_job: a bad candidate is a note
        return Measurement(job.opts, None, fp, f"{type(e).__name__}: {e}")
    if job.compile_only:
        return Measurement(job.opts, None, fp)
    return Measurement(job.opts, cost(job.opts), fp, None, (np.zeros(1, np.float32),))
