"""Where splitting a host kernel across cores starts to pay (issue 26; Target.parallel_min_work and its rows by
kind, the host's uopir.backends.cpu.runtime.HOST_PARALLEL_MIN_WORK[_BY_KIND]): microseconds per kernel of a TinyJit
replay of a chain of identical kernels, each kind at work sizes 2^14..2^20 iterations (output elements times reduce
extent, as kernel-optimize counts them), compiled never split and always split (two child processes per round, their
thresholds forced, interleaved; the best of --rounds rounds).

Kinds: elementwise (x * 1.0001 + y over n floats), pointwise (a 1x1 conv, 64 -> 64 channels over n / 4096 pixels:
a small GEMM), depthwise (a 3x3 depthwise conv with padding, 64 channels over n / 576 pixels).

Prints one line per kind and size, then each kind's smallest size from which two cores win:
    parallel_threshold kind=<k> work=<2^p> one_us=<t> two_us=<t> speedup=<one/two>
    parallel_threshold kind=<k> splits_from=<2^p | never>
Run: python3 bench/parallel_threshold.py [--device llvm] [--kinds elementwise,pointwise,depthwise] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

KINDS = ("elementwise", "pointwise", "depthwise")
POWERS = range(14, 21)

CHILD = r"""
import json, sys, time
import numpy as np
import uopir.backends.cpu.runtime as rt
device, kind, threshold = sys.argv[1], sys.argv[2], int(sys.argv[3])
host_cpu = rt.host_cpu
rt.HOST_PARALLEL_MIN_WORK = threshold  # (below the Target default too; every kind alike)
rt.HOST_PARALLEL_MIN_WORK_BY_KIND = ()
rt.host_cpu = lambda name: host_cpu(name).derive(parallel_min_work=threshold, parallel_min_work_by_kind=())
from uopir import Tensor, TinyJit
CHAIN = 8
out = {}
rng = np.random.default_rng(0)
for p in range(14, 21):
    n = 1 << p
    if kind == "elementwise":
        x = Tensor(rng.standard_normal(n, dtype=np.float32), device=device).realize()
        y = Tensor(rng.standard_normal(n, dtype=np.float32), device=device).realize()
        step = lambda a: (a * 1.0001 + y).realize()
    elif kind == "pointwise":
        hw = max(1, n // 4096)
        x = Tensor(rng.standard_normal((1, 64, hw, 1), dtype=np.float32), device=device).realize()
        w = Tensor(rng.standard_normal((64, 64, 1, 1), dtype=np.float32) * 0.1, device=device).realize()
        step = lambda a: a.conv2d(w).realize()
    else:
        side = max(1, int(round((n // 576) ** 0.5)))
        x = Tensor(rng.standard_normal((1, 64, side, side), dtype=np.float32), device=device).realize()
        w = Tensor(rng.standard_normal((64, 1, 3, 3), dtype=np.float32) * 0.3, device=device).realize()
        step = lambda a: a.conv2d(w, groups=64, padding=1).realize()

    def chain(a):
        for _ in range(CHAIN):
            a = step(a)
        return a

    jit = TinyJit(chain)
    for _ in range(3):
        jit(x)
    if device == "c":
        from uopir.backends.c.compiler import wait_background
        wait_background()
        jit(x)
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(20):
            jit(x)
        best = min(best, (time.perf_counter() - t) / 20)
    out[p] = best / CHAIN * 1e6
print("RESULT " + json.dumps(out), flush=True)
"""


def child(device: str, kind: str, threshold: int) -> dict[int, float]:
    p = subprocess.run([sys.executable, "-c", CHILD, device, kind, str(threshold)], capture_output=True, text=True,
                       timeout=1800, env={**os.environ, "UOPIR_C_TIERED": "0"})
    if p.returncode:
        raise RuntimeError(f"{kind} on {device} failed:\n{p.stderr[-2000:]}")
    line = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("RESULT "))
    return {int(k): v for k, v in json.loads(line[7:]).items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="llvm")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        ap.error(f"unknown kind(s) {', '.join(bad)}; the kinds are {', '.join(KINDS)}")
    from uopir.backends.registry import DEVICES
    if a.device not in DEVICES or a.device not in ("c", "llvm"):
        ap.error(f"--device must be a host-cpu backend (c or llvm), got {a.device}")
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    print(f"parallel_threshold: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for kind in kinds:
        one: dict[int, float] = {}
        two: dict[int, float] = {}
        for _ in range(a.rounds):  # interleaved: the machine's load moves between them alike
            for best, threshold in ((one, 1 << 40), (two, 1)):
                for p, us in child(a.device, kind, threshold).items():
                    best[p] = min(best.get(p, float("inf")), us)
        for p in POWERS:
            print(f"parallel_threshold kind={kind} work=2^{p} one_us={one[p]:.2f} two_us={two[p]:.2f} "
                  f"speedup={one[p] / two[p]:.2f}", flush=True)
        wins = [p for p in POWERS if all(one[q] / two[q] > 1.1 for q in POWERS if q >= p)]
        print(f"parallel_threshold kind={kind} splits_from={f'2^{wins[0]}' if wins else 'never'}", flush=True)
    print(f"parallel_threshold: load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
