"""Memory: how a process's resident memory grows with the number of distinct programs it realizes, and whether the
hash-cons table comes back to its size after a loop that builds, realizes and drops programs.

Each device runs in a fresh subprocess, so the resident set (RSS, from /proc/self/statm: Python objects and native
memory alike, such as LLVM execution engines and dlopen'ed shared objects) is that device's alone. A child first
realizes `--warmup` programs (imports, the pass registry, thread pools, the JIT settle), then `--programs` distinct
small programs, `(Tensor(x) * (i + 1) + i).sum()` with a constant that changes the kernel's text, so each one is
lowered, compiled and loaded (through a private, empty compile cache), and checks every value against numpy:
    memory device=<d> programs=<N> warmup=<W> rss_start_mb=<m> rss_end_mb=<m> rss_growth_mb=<m>
        per_program_kb=<k> seconds=<s>
The issue's target (24, item 4) is rss_growth_mb <= 20 for 2000 programs on each device. Then, in the same child, a
loop of `--loop` build/realize/drop cycles of one program on new data, with a variable bound to a new value each
time (`(x[:n] * 2 + y[:n]).sum()`, n = 1 + i % 4096), and the number of live hash-consed nodes before and after it:
    memory device=<d> loop=<L> uops_before=<n> uops_after=<n> uops_growth=<n> loop_rss_growth_mb=<m>
uops_growth should be about 0. A device that cannot run here prints `memory device=<d> skipped reason=<why>`.
Devices: python, c (tiered, the default: a new kernel first runs compiled in process by LLVM), c-untiered
(UOPIR_C_TIERED=0: every kernel a dlopen'ed shared object), llvm; opencl with --opencl (pocl on a cpu: slow).
Nothing is asserted (unit_tests/test_memory_bounds.py holds the bounds).

    python3 bench/memory.py [--quick] [--programs N] [--warmup W] [--loop L] [--opencl] [--root CHECKOUT]

`--quick`: 300 programs and a 2000-cycle loop. `--root` runs the uopir of another checkout (its folder as the
children's working directory: `import uopir` finds it first), to compare two versions with the same script.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEVICES = {"python": ("python", {}), "c": ("c", {"UOPIR_C_TIERED": "1"}), "c-untiered": ("c", {"UOPIR_C_TIERED": "0"}),
           "llvm": ("llvm", {})}

# the child: argv = device label, device, programs, warmup, loop; prints the two figure lines
CHILD = r"""
import gc, os, sys, time
import numpy as np
label, device, n, warmup, loop = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
from uopir import Tensor
from uopir.backends import get_backend
from uopir.frontend.variable import Variable
from uopir.ir import uop

be = get_backend(device)
if not be.available:
    print(f"memory device={label} skipped reason={be.reason!r}")
    sys.exit(0)


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def live():  # a checkout older than uop.live_nodes counts its table directly
    f = getattr(uop, "live_nodes", None)
    return f() if f is not None else len(getattr(uop, "_ucache"))


base = np.arange(4, dtype=np.float32)


def program(i):
    got = float((Tensor(base + i, device=device) * (i + 1) + i).sum().numpy())
    want = float(((base + i) * np.float32(i + 1) + np.float32(i)).sum())
    if abs(got - want) > 1e-5 * max(1.0, abs(want)):
        raise SystemExit(f"device {device}: program {i} gave {got}, numpy {want}")


for i in range(warmup):
    program(1_000_000 + i)
gc.collect()
r0, t0 = rss_mb(), time.perf_counter()
for i in range(n):
    program(i)
gc.collect()
r1, dt = rss_mb(), time.perf_counter() - t0
print(f"memory device={label} programs={n} warmup={warmup} rss_start_mb={r0:.1f} rss_end_mb={r1:.1f} "
      f"rss_growth_mb={r1 - r0:.1f} per_program_kb={(r1 - r0) * 1024 / max(n, 1):.1f} seconds={dt:.1f}", flush=True)

x = Tensor(np.ones(4096, np.float32), device=device).realize()


def cycle(i):
    k = 1 + i % 4096
    y = Tensor(np.full(4096, i % 7, np.float32), device=device)
    v = Variable("n", 1, 4096).bind(k)
    got, want = float((x[:v] * 2 + y[:v]).sum().numpy()), 2.0 * k + k * (i % 7)
    if abs(got - want) > 1e-5 * want:
        raise SystemExit(f"device {device}: cycle {i} gave {got}, expected {want}")


for i in range(8):
    cycle(5000 + i)
gc.collect()
u0, r0 = live(), rss_mb()
for i in range(loop):
    cycle(i)
gc.collect()
u1, r1 = live(), rss_mb()
print(f"memory device={label} loop={loop} uops_before={u0} uops_after={u1} uops_growth={u1 - u0} "
      f"loop_rss_growth_mb={r1 - r0:.1f}", flush=True)
"""


def run_device(label: str, device: str, env: dict[str, str], args: argparse.Namespace, root: str) -> None:
    # ignore_cleanup_errors: a detached cc compile of the c device may still be writing into the folder
    with tempfile.TemporaryDirectory(prefix="uopir-bench-memory-", ignore_cleanup_errors=True) as cache:
        e = {**os.environ, **env, "UOPIR_CACHE_DIR": cache, "PYTHONPATH": root}
        e.pop("UOPIR_DEBUG", None)
        try:
            p = subprocess.run([sys.executable, "-c", CHILD, label, device, str(args.programs), str(args.warmup),
                                str(args.loop)], cwd=root, env=e, capture_output=True, text=True, timeout=3600)
        except subprocess.TimeoutExpired:
            print(f"memory device={label} skipped reason='timed out after an hour'", flush=True)
            return
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("memory ")]
    for ln in lines:
        print(ln, flush=True)
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1][:200]
        print(f"memory device={label} failed reason={why!r}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="300 programs, a 2000-cycle loop")
    ap.add_argument("--programs", type=int, default=None, help="distinct programs per device (default 2000)")
    ap.add_argument("--warmup", type=int, default=50, help="programs realized before the first measurement")
    ap.add_argument("--loop", type=int, default=None, help="build/realize/drop cycles (default 20000)")
    ap.add_argument("--opencl", action="store_true", help="also the opencl device (slow on pocl)")
    ap.add_argument("--devices", default=",".join(DEVICES), help="comma-separated subset of " + ",".join(DEVICES))
    ap.add_argument("--root", default=ROOT, help="the checkout whose uopir runs (default: this one)")
    args = ap.parse_args()
    args.programs = args.programs if args.programs is not None else 300 if args.quick else 2000
    args.loop = args.loop if args.loop is not None else 2000 if args.quick else 20000
    labels = [d.strip() for d in args.devices.split(",") if d.strip()]
    table = dict(DEVICES, opencl=("opencl", {}))
    if args.opencl and "opencl" not in labels:
        labels.append("opencl")
    unknown = [d for d in labels if d not in table]
    if unknown:
        ap.error(f"unknown device(s) {', '.join(unknown)}; choose from {', '.join(table)}")
    root = os.path.abspath(args.root)
    for label in labels:
        device, env = table[label]
        run_device(label, device, env, args, root)


if __name__ == "__main__":
    main()
