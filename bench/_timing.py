"""Timing shared by the bench scripts (a module, not a benchmark: `make bench` skips files starting with `_`)."""
from __future__ import annotations

import time
from collections.abc import Callable


def best(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of `repeat` timed calls of fn (seconds), after one untimed warm-up call."""
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)
