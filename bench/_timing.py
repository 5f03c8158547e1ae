"""Timing shared by the bench scripts (a module, not a benchmark: `make bench` skips files starting with `_`)."""
from __future__ import annotations

import os
import time
from collections.abc import Callable

# steady-state figures measure the C binaries: with the c device's tiered compile on, the first launches of a kernel
# not yet in the compile cache run its in-process LLVM build (uopir.backends.c.tiered) until cc is done, and a timed
# repeat could land on either (bench/cold_start.py measures the tiered first realize)
os.environ.setdefault("UOPIR_C_TIERED", "0")


def best(fn: Callable[[], object], repeat: int = 5, settle: float = 0.0) -> float:
    """The fastest of `repeat` timed calls of fn (seconds), after a pause of `settle` seconds (the impl timed before
    may have left its thread pool spinning on a core) and one untimed warm-up call."""
    if settle:
        time.sleep(settle)
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)
