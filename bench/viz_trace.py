"""The cost of the visualizer's trace (uopir.ir.trace): lowering a small MLP with tracing off and on, and making the
trace (to_dict + JSON) afterwards.

Prints one machine-readable line per device:
    viz_trace device=<d> off_ms=<CPU ms> on_ms=<CPU ms> ratio=<on/off> to_dict_ms=<CPU ms> passes=<n> steps=<n>
    nodes=<n> json_bytes=<n>
Times are CPU time (the machine may be shared), median of interleaved rounds; each round clears the schedule cache,
so the pipeline runs (a cached realize records nothing). Run: python3 bench/viz_trace.py [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from uopir import Tensor  # noqa: E402
from uopir.backends import available  # noqa: E402
from uopir.backends.realize import clear_schedule_cache  # noqa: E402
from uopir.ir import trace  # noqa: E402

RNG = np.random.default_rng(0)
X, W1, W2 = (RNG.standard_normal(s).astype(np.float32) for s in ((8, 32), (32, 64), (64, 10)))


def program(dev: str) -> np.ndarray:
    x, w1, w2 = (Tensor(a, device=dev) for a in (X, W1, W2))
    return ((x @ w1).relu() @ w2).softmax(axis=1).numpy()


def once(dev: str, on: bool) -> tuple[float, float, dict | None, int]:
    clear_schedule_cache()
    t = time.process_time()
    if not on:
        program(dev)
        return time.process_time() - t, 0.0, None, 0
    with trace.tracing("bench") as tr:
        program(dev)
    t1 = time.process_time()
    d = tr.to_dict()
    n = len(json.dumps(d))
    return t1 - t, time.process_time() - t1, d, n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    for dev in [d for d in ("c", "python") if d in available()]:
        once(dev, False)
        once(dev, True)  # warm: compiled matchers, compiled kernels
        off, on, dump = [], [], []
        d, nbytes = None, 0
        for _ in range(args.rounds):
            off.append(once(dev, False)[0])
            t_on, t_dump, d, nbytes = once(dev, True)
            on.append(t_on)
            dump.append(t_dump)
        assert d is not None
        m_off, m_on = statistics.median(off), statistics.median(on)
        print(f"viz_trace device={dev} off_ms={m_off * 1e3:.1f} on_ms={m_on * 1e3:.1f} ratio={m_on / m_off:.3f} "
              f"to_dict_ms={statistics.median(dump) * 1e3:.1f} passes={len(d['passes'])} "
              f"steps={sum(len(p['steps']) for p in d['passes'])} nodes={len(d['nodes'])} json_bytes={nbytes}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
