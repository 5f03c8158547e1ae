"""Every compiled backend side by side: 1024x1024 f32 matmul GFLOP/s and a*b+c (16M f32) GB/s, beside numpy.

Prints machine-readable lines (nothing is asserted), one per available compiled backend (llvm, c, and the others as
they land; the python interpreter is left out: it is the reference, not a fast path):
    backends matmul n=1024 device=<name> gflops=<uopir on it> numpy_gflops=<numpy> ratio=<device / numpy>
    backends elementwise op=a*b+c n=16777216 device=<name> gbps=<uopir on it> numpy_gbps=<numpy> ratio=<...>
    backends cold device=<name> program=matmul512 seconds=<first realize in a fresh process, empty compile cache>
    backends tiled_matmul n=1024 device=<name> gflops=<the hand-tiled device program of bench/c_backend.py: a global id
        over row blocks split across the cores, 4x2 f32x16 accumulators> threads=<cores>: what each renderer and
        runtime reach on kernel-optimize's register-tiled form (the default pipeline's matmul is the naive loop nest
        until kernel-optimize runs in it)
Steady-state figures are the best of a few runs after a warm-up (the schedule and compile caches are warm then).
GB/s counts the 4 arrays read or written once (16 bytes per element). Run: python3 bench/backends.py [--quick]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _timing import best  # noqa: E402  (bench/ is the script's folder)

from uopir.backends import available  # noqa: E402
from uopir.frontend.tensor import Tensor  # noqa: E402

REPEAT = 5
COLD = """
import sys, time, numpy as np
t0 = time.perf_counter()
from uopir import Tensor
a = Tensor(np.ones((512, 512), np.float32), device=sys.argv[1])
b = Tensor(np.ones((512, 512), np.float32), device=sys.argv[1])
(a @ b).numpy()
print(time.perf_counter() - t0)
"""



def matmul(devices: list[str], n: int) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    tn = best(lambda: a @ b)
    flops = 2 * n**3
    for d in devices:
        ta, tb = Tensor(a, device=d).realize(), Tensor(b, device=d).realize()
        t = best(lambda ta=ta, tb=tb: (ta @ tb).realize(), 3)
        print(f"backends matmul n={n} device={d} gflops={flops / t / 1e9:.2f} numpy_gflops={flops / tn / 1e9:.2f} "
              f"ratio={tn / t:.3f}", flush=True)


def elementwise(devices: list[str], n: int) -> None:
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    out = np.empty_like(a)

    def np_axpb() -> None:
        np.multiply(a, b, out=out)
        np.add(out, c, out=out)

    tn = best(np_axpb)
    nbytes = 16 * n
    for d in devices:
        ta, tb, tc = (Tensor(x, device=d).realize() for x in (a, b, c))
        t = best(lambda ta=ta, tb=tb, tc=tc: (ta * tb + tc).realize())
        print(f"backends elementwise op=a*b+c n={n} device={d} gbps={nbytes / t / 1e9:.2f} "
              f"numpy_gbps={nbytes / tn / 1e9:.2f} ratio={tn / t:.3f}", flush=True)


def cold(devices: list[str]) -> None:
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for d in devices:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
            env = {**os.environ, "UOPIR_CACHE_DIR": cache}
            out = subprocess.run([sys.executable, "-c", COLD, d], capture_output=True, text=True, env=env,
                                 timeout=600, cwd=root)
            secs = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else \
                f"failed({out.stderr.strip()[-200:]})"
            print(f"backends cold device={d} program=matmul512 seconds={secs}", flush=True)


def tiled(devices: list[str], n: int) -> None:
    try:
        from c_backend import tiled_program  # bench/c_backend.py: the same program on every backend
    except ImportError:
        print("backends tiled_matmul skipped: bench/c_backend.py has no tiled_program")
        return
    from uopir.backends import get_backend

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    for d in devices:
        be = get_backend(d)
        prog = be.compile(tiled_program(n))
        o = np.zeros((n, n), np.float32)
        t = best(lambda be=be, prog=prog, o=o: be.runtime.launch(prog, [o, a, b]))
        err = float(np.abs(o - a @ b).max())
        print(f"backends tiled_matmul n={n} device={d} gflops={2 * n**3 / t / 1e9:.2f} "
              f"threads={getattr(be.runtime, 'threads', 1)} max_abs_err={err:.2e}", flush=True)


def main() -> None:
    quick = "--quick" in sys.argv
    devices = [d for d in available() if d != "python"]
    if not devices:
        print("backends skipped: no compiled backend is available")
        return
    matmul(devices, 256 if quick else 1024)
    elementwise(devices, 1 << (20 if quick else 24))
    tiled(devices, 512 if quick else 1024)
    cold(devices)


if __name__ == "__main__":
    main()
