"""What the native worker pool (uopir.backends.cpu.graph, graph.c) costs a parallel kernel: a compute-bound test
kernel of W microseconds on one core, run through uopir_run_graph as a graph replay would, split in two shares:
    serial       the kernel on one core
    back_to_back 8 parallel kernels in a row (workers already awake)
    after_serial each parallel kernel after a 10 us serial kernel (the usual shape of a model's replay: the workers
                 sleep through the serial kernel unless the graph keeps them hot)
    alone        one parallel kernel after 2 ms idle (an eager launch: the workers asleep)
Each figure is microseconds per parallel kernel, the best of --rounds interleaved rounds; ideal is W/2.
    pool_wake kernel_us=<W> serial=<t> back_to_back=<t> after_serial=<t> alone=<t>
Run: python3 bench/pool_wake.py [--rounds 8]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from uopir.backends import available  # noqa: E402
from uopir.backends.cpu import graph as G  # noqa: E402

SRC = r"""
#include <stdint.h>
/* n iterations of a dependent multiply-add chain, split into core_count shares */
void work(int64_t out, int64_t n, int64_t core_id, int64_t core_count) {
  int64_t per = (n + core_count - 1) / core_count, lo = core_id * per, hi = lo + per < n ? lo + per : n;
  double x = 1.0;
  for (int64_t i = lo; i < hi; i++) x = x * 1.0000001 + 1e-9;
  ((volatile double *)(intptr_t)out)[core_id * 8] = x;
}
void serial(int64_t out, int64_t n) { work(out, n, 0, 1); }
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    if "c" in available():
        import uopir.backends.c.runtime  # noqa: F401 - names graph.c's builder
    native = G.native()
    if native is None:
        print("pool_wake skipped: no C compiler (no native pool)")
        return 0
    lib = G._BUILDER[0](SRC)
    fns = {k: ctypes.cast(getattr(lib, k), ctypes.c_void_p).value for k in ("work", "serial")}
    out = np.zeros(64 * 8)
    keep: list[np.ndarray] = []

    def graph(plan: list[tuple[int, int]]) -> tuple[int, object]:
        entries = (G.Entry * len(plan))()
        for e, (n, cores) in zip(entries, plan, strict=True):
            args = np.array([out.ctypes.data, n], np.int64)
            keep.append(args)
            e.fn, e.args, e.nargs, e.cores = fns["work" if cores else "serial"], args.ctypes.data, 2, cores
        return len(plan), entries

    def best(plan: list[tuple[int, int]], reps: int = 30, gap: float = 0.0) -> float:
        n, entries = graph(plan)
        t_best = float("inf")
        for _ in range(reps):
            if gap:
                time.sleep(gap)
            t = time.perf_counter()
            native.uopir_run_graph(n, ctypes.addressof(entries))
            t_best = min(t_best, time.perf_counter() - t)
        return t_best * 1e6

    per_us = 100_000 / best([(100_000, 0)])  # iterations per microsecond
    print(f"pool_wake: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    res: dict[int, list[float]] = {}
    for _ in range(a.rounds):
        for w in (5, 10, 20, 50, 100):
            n, gap10 = int(w * per_us), int(10 * per_us)
            vals = [best([(n, 0)] * 8) / 8, best([(n, 2)] * 8) / 8,
                    (best([(n, 2), (gap10, 0)] * 8) - best([(gap10, 0)] * 8)) / 8, best([(n, 2)], 10, 0.002)]
            res[w] = [min(x, y) for x, y in zip(res.get(w, [float("inf")] * 4), vals, strict=True)]
    for w, (ser, b2b, after, alone) in res.items():
        print(f"pool_wake kernel_us={w} serial={ser:.2f} back_to_back={b2b:.2f} after_serial={after:.2f} "
              f"alone={alone:.2f}", flush=True)
    print(f"pool_wake: load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
